"""The one-line reason a failed stage is reported with."""

from __future__ import annotations

from types import SimpleNamespace

from orchestration.run import failure_reason


def _failure(step_key: str, *messages: str):
    error = None
    for message in reversed(messages):  # outermost first, each caused by the next
        error = SimpleNamespace(message=message, cause=error)
    return SimpleNamespace(is_step_failure=True, step_key=step_key, step_failure_data=SimpleNamespace(error=error))


def test_the_innermost_errors_last_line_that_says_something():
    grpc_repr = (
        "grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:\n"
        "\tstatus = StatusCode.UNAVAILABLE\n"
        '\tdebug_error_string = "UNAVAILABLE:Too many pings"\n'
        ">\n"
    )
    result = SimpleNamespace(
        all_events=[
            SimpleNamespace(is_step_failure=False),
            _failure("vectors__formulas", "Error occurred while executing op", "MilvusException: ...", grpc_repr),
            _failure("formulas__graph", "boom\n"),
        ]
    )
    assert failure_reason(result) == (
        'vectors__formulas: debug_error_string = "UNAVAILABLE:Too many pings"; formulas__graph: boom'
    )
    assert failure_reason(SimpleNamespace(all_events=[_failure("x", "\n>\n")])) == "x: unknown error"
