"""Hostile model output on every surface of the agent: parameters checked into their types, bounded parsing (long
numbers, deep nesting, YAML aliases), observations bounded in characters before tokens are counted, runs and
evaluations that survive whatever one turn or one question does, and a fuzz of all four action formats."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from agent import formats
from agent.actions import ALL_ACTIONS, Action, GenerateAnswer, Observation, RetrieveFromDatabase, run_action
from agent.env import AgentEnv
from agent.formats import (
    ACTION_FORMATS,
    MAX_CELL_CHARS,
    MAX_COLUMNS,
    MAX_ELEMENTS,
    MAX_OBSERVATION_CHARS,
    MAX_TOKENIZED_CHARS,
    OUTPUT_FORMATS,
    ActionParseError,
    count_tokens,
    format_table,
    parse_action,
    render_action,
    truncate_tokens,
)
from agent.loop import LoopConfig, ReActLoop
from agent.methods import run_method
from agent.run import ask
from agent.task import Task
from paperlake.runtime.llm import ChatClient
from paperlake.runtime.sql_sandbox import ReadOnlyWarehouse
from support.agent_fixtures import CALIBRATION, FakeVectors, build_warehouse, env, home, settings_for  # noqa: F401
from support.openai_stub import start_stub

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("hostile_agent", REPO / "benchmarks" / "hostile_agent.py")
hostile = importlib.util.module_from_spec(_spec)
sys.modules["hostile_agent"] = hostile
_spec.loader.exec_module(hostile)

NAMES = [a.action_name() for a in ALL_ACTIONS]
ACTIONS = {a.action_name(): a for a in ALL_ACTIONS}
TOOL_NAME = hostile.formula_tool().name
NOTE_SLACK = 1_000
LONG = "9" * 5000
# Hostile inputs are checked by the work they cause (memory traced, characters tokenized, list items read), which
# does not depend on the machine. A clock is only a hang guard: unbounded work (an alias bomb expanding, a huge
# text tokenized) takes minutes, far past it. Per-input speed is a benchmark figure: benchmarks/hostile_agent.py.
HANG_GUARD_SECONDS = 30.0


@contextmanager
def hang_guard() -> Iterator[None]:
    started = time.perf_counter()
    yield
    assert time.perf_counter() - started < HANG_GUARD_SECONDS, "runaway work on a hostile input"


def build(response: str, action_format: str) -> Action:
    parsed = parse_action(response, action_format, NAMES)
    return ACTIONS[parsed.action_type].build(parsed)


def view_image(action_format: str, page_number: str, quoted: bool = True) -> str:
    """A ViewImage action whose page_number is written exactly as ``page_number``."""
    if action_format == "markdown":
        value = f'"{page_number}"' if quoted else page_number
        return f'ViewImage(paper_id="{CALIBRATION}", page_number={value})'
    if action_format == "json":
        value = f'"{page_number}"' if quoted else page_number
        return f'{{"action_type": "ViewImage", "parameters": {{"paper_id": "{CALIBRATION}", "page_number": {value}}}}}'
    if action_format == "xml":
        return (
            f"<action><action_type>ViewImage</action_type><parameters><paper_id>{CALIBRATION}</paper_id>"
            f"<page_number>{page_number}</page_number></parameters></action>"
        )
    value = f'"{page_number}"' if quoted else page_number
    return f"action_type: ViewImage\nparameters:\n  paper_id: {CALIBRATION}\n  page_number: {value}"


def answer_with(action_format: str, literal: str) -> str:
    """A GenerateAnswer action whose answer is written exactly as ``literal``."""
    if action_format == "markdown":
        return f"GenerateAnswer(answer={literal})"
    if action_format == "json":
        return f'{{"action_type": "GenerateAnswer", "parameters": {{"answer": {literal}}}}}'
    if action_format == "xml":
        return (
            f"<action><action_type>GenerateAnswer</action_type><parameters><answer>{literal}</answer>"
            "</parameters></action>"
        )
    return f"action_type: GenerateAnswer\nparameters:\n  answer: {literal}"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# ---------------------------------------------------------------------------------------------------------------
# Parameters are checked into their declared types; parsing is bounded


@pytest.mark.parametrize("action_format", ACTION_FORMATS)
@pytest.mark.parametrize("digits", ["²", "٣", "１２", "3.5", "three"])
def test_a_parameter_that_is_not_its_type_is_a_message_for_the_model(action_format: str, digits: str) -> None:
    with pytest.raises(ActionParseError) as raised:
        build(view_image(action_format, digits), action_format)
    assert str(raised.value) == f"ViewImage: page_number must be a whole number, got {digits!r}"


@pytest.mark.parametrize("action_format", ACTION_FORMATS)
def test_plain_digits_are_still_read_as_whole_numbers(action_format: str) -> None:
    assert build(view_image(action_format, "3"), action_format).page_number == 3
    assert build(view_image(action_format, "3", quoted=False), action_format).page_number == 3


@pytest.mark.parametrize("action_format", ACTION_FORMATS)
@pytest.mark.parametrize("quoted", [True, False])
def test_long_numbers_are_refused_before_they_are_converted(action_format: str, quoted: bool) -> None:
    with hang_guard(), pytest.raises(ActionParseError, match="digits"):
        build(view_image(action_format, LONG, quoted), action_format)
    with hang_guard(), pytest.raises(ActionParseError, match="digits"):
        build(view_image(action_format, "9" * 19, quoted), action_format)


@pytest.mark.parametrize("action_format", ["markdown", "json", "yaml"])
def test_long_number_literals_are_refused_anywhere_in_the_parameters(action_format: str) -> None:
    with pytest.raises(ActionParseError, match="more than 100 digits"):
        build(answer_with(action_format, f"[1, {'9' * 150}]"), action_format)
    assert build(answer_with(action_format, f"[1, {'9' * 90}]"), action_format).answer == [1, int("9" * 90)]


@pytest.mark.parametrize(
    ("action_format", "depth"),
    [("markdown", 150), ("json", 150), ("json", 9000), ("yaml", 150), ("yaml", 9000), ("xml", 150)],
)
def test_deep_nesting_is_refused(action_format: str, depth: int) -> None:
    with hang_guard(), pytest.raises(ActionParseError, match="nest more than 20 levels"):
        build(answer_with(action_format, nested(depth)), action_format)
    assert build(answer_with(action_format, nested(5)), action_format).answer == json.loads(nested(5))


def test_json_nested_past_the_recursion_limit_is_a_message() -> None:
    response = answer_with("json", nested(100_000))
    with pytest.raises(ActionParseError, match="characters, more than the 20000 allowed"):
        build(response, "json")


@pytest.mark.parametrize("action_format", ACTION_FORMATS)
def test_the_number_of_values_is_limited(action_format: str) -> None:
    many = "[" + ", ".join("1" for _ in range(MAX_ELEMENTS + 1)) + "]"
    with pytest.raises(ActionParseError, match=f"more than {MAX_ELEMENTS} values"):
        build(answer_with(action_format, many), action_format)


def test_the_yaml_alias_bomb_is_refused_before_it_expands() -> None:
    tracemalloc.start()
    try:
        with hang_guard(), pytest.raises(ActionParseError, match="anchors and aliases"):
            build(hostile.alias_bomb(), "yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # expanded, the bomb holds billions of nodes
    for text in (
        "action_type: GenerateAnswer\nparameters:\n  answer: &x 1",
        "action_type: GenerateAnswer\nparameters: &p {answer: 1}",
        "base: &b {answer: 1}\naction_type: GenerateAnswer\nparameters:\n  <<: *b",
    ):
        with pytest.raises(ActionParseError, match="anchors and aliases"):
            build(text, "yaml")


def test_messages_quote_long_values_briefly() -> None:
    for response in (
        view_image("json", "x" * 10_000),
        "GenerateAnswer(" + "a" * 10_000 + "=1)",
        '{"action_type": "' + "A" * 10_000 + '"}',
    ):
        with pytest.raises(ActionParseError) as raised:
            build(response, "json" if response.startswith("{") else "markdown")
        assert len(str(raised.value)) < 400 and "\n" not in str(raised.value)


# ---------------------------------------------------------------------------------------------------------------
# Runs survive whatever one turn does


def turn(response: str) -> str:
    return f"[Thought]: next\n[Action]:\n{response}"


HOSTILE_TURNS = {
    "markdown": [
        view_image("markdown", "²"),
        view_image("markdown", LONG, quoted=False),
        answer_with("markdown", nested(150)),
    ],
    "json": [
        view_image("json", "²"),
        answer_with("json", nested(100_000)),
        answer_with("json", nested(9000)),
        view_image("json", LONG, quoted=False),
    ],
    "xml": [view_image("xml", "²"), view_image("xml", LONG)],
    "yaml": [view_image("yaml", "²"), hostile.alias_bomb(), view_image("yaml", LONG, quoted=False)],
}


def test_malformed_actions_cost_a_turn_and_the_run_goes_on(tmp_path: Path, env) -> None:  # noqa: F811
    script = [
        turn(t)
        for action_format in ACTION_FORMATS
        for t in [*HOSTILE_TURNS[action_format], render_action("GenerateAnswer", {"answer": 71.2}, action_format)]
    ]
    task = {
        "uuid": "3b1f1b43-8f0c-4d52-9d2e-4c1c9f3f0a11",
        "question": "What SST-2 accuracy does RankCal reach?",
        "answer_format": "a float",
        "anchor_pdf": [CALIBRATION],
    }
    with start_stub(script, tmp_path / "stub") as stub:
        llm = ChatClient(base_url=stub.base_url, api_key="k", model="stub-model", sleep=lambda _: None)
        results = {f: run_method("neusym_rag", task, env, llm, f, LoopConfig(max_turns=6)) for f in ACTION_FORMATS}
        requests = stub.requests()
    for action_format, result in results.items():
        assert result.answered and result.answer == 71.2, (action_format, result.status, result.error)
        hostile_turns = [t for t in result.trajectory if not t.seeded][:-1]
        assert len(hostile_turns) == len(HOSTILE_TURNS[action_format])
        assert all(t.error_type == "parse_error" for t in hostile_turns), action_format
        first = json.loads(hostile_turns[0].observation)
        assert first["message"] == "ViewImage: page_number must be a whole number, got '²'"
        assert all(len(t.response) < 25_000 for t in result.trajectory)
    assert any(
        "page_number must be a whole number, got '²'" in m["content"]
        for m in requests[1]["messages"]
        if isinstance(m["content"], str)
    )


def test_an_unexpected_exception_while_reading_costs_a_turn(tmp_path: Path, env, monkeypatch) -> None:  # noqa: F811
    import agent.loop

    calls = []

    def exploding(response: str, *args: Any) -> Any:
        calls.append(response)
        if len(calls) == 1:
            raise RuntimeError("reader bug\nwith a second line")
        return parse_action(response, *args)

    monkeypatch.setattr(agent.loop, "parse_action", exploding)
    script = [turn("GenerateAnswer(answer=1)"), turn("GenerateAnswer(answer=2)")]
    with start_stub(script, tmp_path / "stub") as stub:
        llm = ChatClient(base_url=stub.base_url, api_key="k", model="stub-model", sleep=lambda _: None)
        loop = ReActLoop(Task("q"), env, llm, [GenerateAnswer])
        result = loop.run()
    assert result.answered and result.answer == 2
    failed = json.loads(result.trajectory[0].observation)
    assert failed["error_type"] == "parse_error" and "RuntimeError: reader bug with a second line" in failed["message"]


def test_ask_survives_a_malformed_action(tmp_path: Path, home: Path) -> None:  # noqa: F811
    script = [turn(view_image("markdown", "²")), turn("GenerateAnswer(answer=71.2)")]
    with start_stub(script, tmp_path / "stub") as stub:
        result = ask(
            "What SST-2 accuracy does RankCal reach?",
            settings_for(home, stub.base_url),
            paper_ids=[CALIBRATION],
            use_cache=False,
        )
    assert result.answered and result.answer == 71.2
    assert [t.error_type for t in result.trajectory if not t.seeded] == ["parse_error", None]


def test_eval_records_a_failed_question_and_goes_on(tmp_path: Path, home: Path, monkeypatch) -> None:  # noqa: F811
    import agent.run
    from cli.app import app

    uuids = [
        "0f6a3f2e-3c39-4a0e-9a7e-1b9e2b6c3d01",
        "0f6a3f2e-3c39-4a0e-9a7e-1b9e2b6c3d02",
        "0f6a3f2e-3c39-4a0e-9a7e-1b9e2b6c3d03",
    ]
    data = tmp_path / "questions.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "uuid": uuid,
                    "question": f"What SST-2 accuracy does RankCal reach ({number})?",
                    "answer_format": "a float",
                    "tags": ["single", "table", "objective"],
                    "anchor_pdf": [CALIBRATION],
                    "reference_pdf": [],
                    "conference": [],
                    "evaluator": {"eval_func": "eval_float_exact_match", "eval_kwargs": {"gold": 71.2, "ndigits": 1}},
                }
            )
            + "\n"
            for number, uuid in enumerate(uuids)
        )
    )
    real_run_method = agent.run.run_method

    def second_question_breaks(method: str, example: Any, *args: Any, **kwargs: Any) -> Any:
        if example.uuid == uuids[1]:
            raise RuntimeError("the vector store went away")
        return real_run_method(method, example, *args, **kwargs)

    monkeypatch.setattr(agent.run, "run_method", second_question_breaks)
    script = [
        turn(view_image("markdown", "²")),
        turn("GenerateAnswer(answer=71.2)"),
        turn("GenerateAnswer(answer=68.5)"),
    ]
    out = tmp_path / "eval"
    with start_stub(script, tmp_path / "stub") as stub:
        environment = {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "k", "PAPERLAKE_LLM_MODEL": "stub-model"}
        outcome = CliRunner(env=environment).invoke(
            app,
            ["eval", str(data), "--method", "neusym_rag", "--out", str(out), "--max-turns", "3", "--home", str(home)],
        )
    assert outcome.exit_code == 0, outcome.output
    trajectories = {u: json.loads((out / "trajectories" / f"{u}.json").read_text()) for u in uuids}
    assert trajectories[uuids[0]]["status"] == "answered" and trajectories[uuids[0]]["answer"] == 71.2
    assert trajectories[uuids[1]]["status"] == "error"
    assert trajectories[uuids[1]]["error"] == "RuntimeError: the vector store went away"
    assert trajectories[uuids[2]]["answer"] == 68.5
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["uuid"] for p in predictions] == uuids and predictions[1]["answer"] is None
    assert json.loads((out / "report.json").read_text())["overall"] == pytest.approx(1 / 3)


# ---------------------------------------------------------------------------------------------------------------
# Observations are bounded before they are formatted or token-counted


@dataclass
class Work:
    """What a call cost, in units that do not depend on the machine: peak traced memory, the longest text handed
    to the tokenizer, and the items read from :class:`CountedList` arguments."""

    peak_bytes: int
    tokenized_chars: int
    items_read: int


class CountedList(list):
    """A list that counts the items iterated out of it (all instances share one counter)."""

    read = 0

    def __iter__(self) -> Iterator[Any]:
        for item in super().__iter__():
            CountedList.read += 1
            yield item


def measured(monkeypatch: pytest.MonkeyPatch, function: Any, *args: Any) -> tuple[Any, Work]:
    """The result of ``function(*args)`` and the :class:`Work` it did (the tokenizer spied on for the call)."""
    count_tokens("warm up the encoding")
    real = formats.encoding()
    lengths = [0]

    class SpiedEncoding:
        def encode(self, text: str, **kwargs: Any) -> list[int]:
            lengths.append(len(text))
            return real.encode(text, **kwargs)

        def decode(self, tokens: list[int]) -> str:
            return real.decode(tokens)

    CountedList.read = 0
    tracemalloc.start()
    try:
        with monkeypatch.context() as patch, hang_guard():
            patch.setattr(formats, "encoding", SpiedEncoding)
            result = function(*args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, Work(peak, max(lengths), CountedList.read)


HUGE = "x" * 30_000_000


@pytest.mark.parametrize("output_format", OUTPUT_FORMATS)
def test_a_huge_value_is_cut_before_tokens_are_counted(monkeypatch: pytest.MonkeyPatch, output_format: str) -> None:
    formatted, work = measured(monkeypatch, format_table, ["s"], [(HUGE,)] * 3, output_format)
    assert work.peak_bytes < 5_000_000 and work.tokenized_chars < MAX_OBSERVATION_CHARS + NOTE_SLACK
    assert len(formatted.text) < MAX_OBSERVATION_CHARS + NOTE_SLACK
    assert f"longer than {MAX_CELL_CHARS} characters were cut" in formatted.text and "substr(" in formatted.text
    assert "…[29996000 more characters cut]" in formatted.text


def test_huge_lists_and_many_columns_are_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    long_list = CountedList(range(2_000_000))
    columns = [f"c{i}" for i in range(5 * MAX_COLUMNS)]
    formatted, work = measured(monkeypatch, format_table, columns, [[long_list] * len(columns)] * 20, "json")
    # each shown cell reads about as many items as fit in MAX_CELL_CHARS, never the 2 million
    assert work.items_read < MAX_COLUMNS * MAX_CELL_CHARS and work.peak_bytes < 50_000_000
    assert work.tokenized_chars < MAX_OBSERVATION_CHARS + NOTE_SLACK
    assert len(formatted.text) < MAX_OBSERVATION_CHARS + NOTE_SLACK
    assert f"showing the first {MAX_COLUMNS} of {5 * MAX_COLUMNS} columns" in formatted.text
    assert "more items cut]" in formatted.text and formatted.shown_rows == 1


def test_token_counting_never_tokenizes_a_huge_text(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "x " * 15_000_000
    tokens, work = measured(monkeypatch, count_tokens, text)
    assert tokens >= 15_000_000 and work.tokenized_chars <= MAX_TOKENIZED_CHARS and work.peak_bytes < 100_000_000
    (cut, dropped), work = measured(monkeypatch, truncate_tokens, text, 100)
    assert count_tokens(cut) == 100 and dropped > 14_000_000 and work.tokenized_chars <= MAX_TOKENIZED_CHARS


@dataclass
class Flood(Action):
    """Answers with far too much text."""

    size: int = 1_000_000

    def execute(self, env: AgentEnv) -> Observation:  # noqa: F811 (not the fixture)
        return Observation("y" * self.size)


def test_every_observation_is_cut_to_the_character_cap() -> None:
    observation = run_action(Flood(), AgentEnv(None))
    assert len(observation.text) < MAX_OBSERVATION_CHARS + NOTE_SLACK
    assert f"cut at {MAX_OBSERVATION_CHARS} characters (960000 characters cut); ask for less" in observation.text


class HugeResultWarehouse:
    """A warehouse whose queries return one 30-million-character value (the sandbox's own byte cap aside)."""

    path = "/nonexistent/warehouse.duckdb"

    def query(self, sql: str, params: Any = None, max_rows: int | None = None) -> SimpleNamespace:
        rows = [(HUGE,)] if "repeat" in sql else []
        return SimpleNamespace(columns=["s"] if rows else [], rows=rows, truncated=False)

    def close(self) -> None:
        return None


def test_a_huge_sql_result_is_bounded_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = [
        turn(render_action("RetrieveFromDatabase", {"sql": "select repeat('x', 300000000) s"}, "markdown")),
        turn("GenerateAnswer(answer='x')"),
    ]
    with start_stub(script, tmp_path / "stub") as stub:
        llm = ChatClient(base_url=stub.base_url, api_key="k", model="stub-model", sleep=lambda _: None)
        loop = ReActLoop(
            Task("How long is s?"), AgentEnv(HugeResultWarehouse()), llm, [RetrieveFromDatabase, GenerateAnswer]
        )
        result, work = measured(monkeypatch, loop.run)
        requests = stub.requests()
    assert result.answered and work.peak_bytes < 200_000_000 and work.tokenized_chars <= MAX_TOKENIZED_CHARS
    observation = requests[1]["messages"][-1]["content"]
    assert len(observation) < MAX_OBSERVATION_CHARS + NOTE_SLACK and "substr(" in observation


# ---------------------------------------------------------------------------------------------------------------
# Fuzz: every format, random and mutated actions, formula-tool arguments


@pytest.fixture(scope="module")
def fuzz_env(tmp_path_factory: pytest.TempPathFactory):
    """The agent's environment over a small warehouse, fake vectors and a real formula tool; memory is traced."""
    fuzz_home = tmp_path_factory.mktemp("fuzz") / "home"
    build_warehouse(fuzz_home)
    environment = AgentEnv(
        ReadOnlyWarehouse(fuzz_home / "warehouse.duckdb", timeout=2),
        FakeVectors(fuzz_home / "warehouse.duckdb"),
        hostile.ToolFormulas(),
        home=fuzz_home,
    )
    hostile.arm_tools(environment)
    run_action(RetrieveFromDatabase("select 1"), environment)  # the first query and tokenization load lazily
    tracemalloc.start()
    yield environment
    tracemalloc.stop()
    environment.close()


FORMATS = st.sampled_from(ACTION_FORMATS)
FRAGMENTS = st.sampled_from(hostile.HOSTILE_FRAGMENTS) | st.text(max_size=20)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**90, max_value=10**120)
    | st.floats()
    | st.text(max_size=30)
    | FRAGMENTS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
SEEDS = hostile.seed_responses(TOOL_NAME)


@st.composite
def mutated_actions(draw: st.DrawFn) -> tuple[str, str]:
    text, action_format = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        start = draw(st.integers(0, len(text)))
        text = hostile.edit(
            text, draw(st.sampled_from(hostile.EDITS)), start, start + draw(st.integers(0, 40)), draw(FRAGMENTS)
        )
    return text, action_format


@st.composite
def typed_actions(draw: st.DrawFn) -> tuple[str, str]:
    action = draw(st.sampled_from(ALL_ACTIONS))
    names = st.sampled_from([p.name for p in action.params()] + ["extra"])
    action_format = draw(FORMATS)
    return render_action(
        action.action_name(), draw(st.dictionaries(names, VALUES, max_size=4)), action_format
    ), action_format


NUMBERISH = st.sampled_from([f for f in hostile.HOSTILE_FRAGMENTS if any(c.isdigit() for c in f)])
TYPED = [(a, p.name) for a in ALL_ACTIONS if a.examples for p in a.params() if p.annotation is not str]


@st.composite
def hostile_parameters(draw: st.DrawFn) -> tuple[str, str]:
    """An action's example with one typed (not string) parameter replaced by hostile text, number-like or not."""
    action, name = draw(st.sampled_from(TYPED))
    parameters = dict(action.examples[0]) | {name: draw(NUMBERISH | FRAGMENTS)}
    action_format = draw(FORMATS)
    return render_action(action.action_name(), parameters, action_format), action_format


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, str]:
    arguments = draw(st.dictionaries(st.sampled_from(["P", "R", "F_1", ""]) | st.text(max_size=5), VALUES, max_size=4))
    action_format = draw(FORMATS)
    return render_action("CallTool", {"tool_name": TOOL_NAME, "parameters": arguments}, action_format), action_format


@settings(max_examples=250, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.tuples(st.text(max_size=400), FORMATS)
    | mutated_actions()
    | hostile_parameters()
    | typed_actions()
    | tool_calls()
)
def test_fuzzed_actions_are_refused_or_run_bounded(fuzz_env: AgentEnv, case: tuple[str, str]) -> None:
    outcome = hostile.try_action(*case, fuzz_env)
    assert outcome.kind in ("action", "refused"), (case, outcome.message)
    assert outcome.seconds < HANG_GUARD_SECONDS, case
    assert outcome.peak_bytes < 64_000_000, case


def test_the_fuzz_benchmark_reports_counts() -> None:
    report = hostile.run_fuzz(300.0, seed=1, inputs=100)  # a count, not a time budget that a busy machine shrinks
    assert report["tried"] == 100 and report["refused"] > 0 and report["action"] > 0
    assert report["error"] == 0, report["errors"]
    assert 0 < report["max_seconds"] < HANG_GUARD_SECONDS and 0 < report["peak_bytes"] < 64_000_000


def test_a_formula_tool_called_outside_the_agent_refuses_huge_integers() -> None:
    """`paperlake formulas run` calls tools directly: an integer beyond a float's range is a message, not an
    OverflowError."""
    from paperlake.formulas.tools import FormulaTool

    tool = FormulaTool(
        formula_id="f",
        name="y_f",
        description="",
        output="y",
        expression="a * 2",
        parameter_schema={"properties": {"a": {}}, "required": ["a"]},
        constants={},
        defaults={},
    )
    refused = tool(a=10**400)
    assert (
        not refused.ok and "must be finite" in refused.error and "1.8e308" in refused.error and len(refused.error) < 120
    )
    assert tool(a=3).value == 6
