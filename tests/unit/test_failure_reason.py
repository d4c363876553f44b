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


_DBT_FAILED = (
    "dagster_dbt.errors.DagsterDbtCliRuntimeError: The dbt CLI process with command\n\n`paperlake-dbt build`\n\n"
    "failed with exit code `1`. Check the stdout in the Dagster compute logs for the full information about the "
    "error, or view the dbt debug log: /home/dbt-target/warehouse/dbt.log.\n\nErrors parsed from dbt logs:\n\n"
)


def test_a_failed_dbt_command_reports_dbts_first_error_and_what_it_says():
    """Real messages of dagster-dbt (colours, dbt's progress line, its macro call stack and SQL position markers)."""
    contract = _DBT_FAILED + (
        "14 of 167 ERROR creating sql table model main.zz_fail .......................... "
        "[\x1b[31mERROR\x1b[0m in 0.16s]\n\n"
        "\x1b[31mFailure in model zz_fail (models/marts/zz_fail.sql)\x1b[0m\n\n"
        "  Compilation Error in model zz_fail (models/marts/zz_fail.sql)\n"
        "  This model has an enforced contract, and its 'columns' specification is missing\n  \n"
        "  > in macro assert_columns_equivalent (macros/relations/column/columns_spec_ddl.sql)\n"
        "  > called by model zz_fail (models/marts/zz_fail.sql)\n"
    )
    hook = _DBT_FAILED + (
        'Runtime Error\n  IO Error: No files found that match the pattern "["\n\n'
        "  LINE 1: ...from read_parquet(['[', ...\n                              ^\n"
    )
    result = SimpleNamespace(
        all_events=[_failure("warehouse_models", contract, "a cause"), _failure("formula_models", hook)]
    )
    assert failure_reason(result) == (
        "warehouse_models: Compilation Error in model zz_fail (models/marts/zz_fail.sql): This model has an enforced "
        "contract, and its 'columns' specification is missing; "
        'formula_models: Runtime Error: IO Error: No files found that match the pattern "["'
    )
