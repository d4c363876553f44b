"""Hostile model output against the agent's action surface: parse, check and run random and mutated actions.

Inputs are drawn from three sources, in every action format: random text; valid actions (every action's examples,
a call to a real formula tool) mutated by edits that insert, substitute or repeat hostile fragments (Unicode
digits, digit strings past Python's int-conversion limit, deep nesting, YAML anchors and aliases, NaN and
infinities); and random typed values rendered as an action's parameters. Each input is parsed, built into an
action and run (:func:`agent.actions.run_action`) against an environment; what comes back is classified:

- **action**: the action ran and its observation (an answer, a result or an error observation) is bounded;
- **refused**: an :class:`~agent.formats.ActionParseError`, one line for the model;
- **error**: any other exception, an unbounded observation or a multi-line refusal: a bug.

``tests/integration/test_hostile_agent.py`` runs the same check under hypothesis. Run:
``python benchmarks/hostile_agent.py [--seconds 30] [--seed 0] [--out FILE]``; prints the counts, the worst time and
peak memory (tracemalloc) of one input, and the first errors, and writes them to
``benchmarks/results/hostile_agent.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import time
import tracemalloc
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from agent.actions import ALL_ACTIONS, Action, describe, run_action
from agent.env import AgentEnv
from agent.formats import (
    ACTION_FORMATS,
    MAX_OBSERVATION_CHARS,
    ActionParseError,
    count_tokens,
    parse_action,
    render_action,
)
from paperlake.formulas.model import Formula, Parameter
from paperlake.formulas.tools import FormulaTool, build_tool

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "hostile_agent.json"
MAX_REFUSAL_CHARS = 600
_NOTE_SLACK = 1_000  # the cut note appended after MAX_OBSERVATION_CHARS
_BOMB_LEVELS = "abcdefg"


def alias_bomb(levels: int = 7) -> str:
    """The YAML alias bomb: each level lists the previous one nine times (9**levels values from ~480 characters)."""
    lines = [f"&{_BOMB_LEVELS[0]} [x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"&{name} [" + ", ".join(f"*{previous}" for _ in range(9)) + "]"
        for previous, name in zip(_BOMB_LEVELS, _BOMB_LEVELS[1:levels])
    ]
    terms = "\n".join(f"    - {line}" for line in lines)
    return f"action_type: RetrieveMathKnowledge\nparameters:\n  search_terms:\n{terms}"


HOSTILE_FRAGMENTS: tuple[str, ...] = (
    "²",
    "٣",
    "１２",
    "Ⅻ",
    "\u00a0",
    "\x00",
    "\ufeff",
    "𝟗",
    "-0",
    "+1",
    "1_000",
    "0x1F",
    "1e309",
    "-1e309",
    "NaN",
    "Infinity",
    "nan",
    "inf",
    "9" * 120,
    "9" * 5000,
    "-" + "9" * 4301,
    "1." + "0" * 5000,
    "[" * 5000,
    "{" * 300,
    "(" * 300,
    "]" * 50,
    '"',
    "'",
    "\\",
    "\n",
    "</page_number>",
    "<![CDATA[",
    "]]>",
    "<!ENTITY x 'y'>",
    "&amp;",
    "&#x0;",
    "&a",
    "*a",
    "<<: *a",
    "!!python/object:os.system",
    "---",
    "...",
    "|",
    ">-",
    "```",
    "[Action]:",
    "[Observation]:",
    "**{}",
    "__import__('os')",
    "True",
    "None",
    "[]",
    "{}",
    "()",
    "' OR 1=1 --",
    ";",
)


def formula_tool() -> FormulaTool:
    """A real formula tool (F1 from precision and recall) built the way the formula graph builds one."""
    formula = Formula(
        formula_id=str(uuid.uuid5(uuid.NAMESPACE_DNS, "hostile-agent-f1")),
        label="F1 score",
        latex=r"F_{1} = \frac{2PR}{P+R}",
        normalised_latex=r"F_{1}=\frac{2PR}{P+R}",
        status="validated",
        template="2*P*R/(P + R)",
        output="F_1",
        parameters=[Parameter("P", "P", "precision"), Parameter("R", "R", "recall")],
    )
    return build_tool(formula)


class ToolFormulas:
    """A formula backend holding one real tool: enough for the formula workflow's actions to run for real."""

    def __init__(self) -> None:
        self.tool = formula_tool()
        self.record = {
            "formula_id": self.tool.formula_id,
            "name": "F1 score",
            "latex": r"F_{1} = \frac{2PR}{P+R}",
            "parameters": ["P", "R"],
            "description": "F1 score from precision and recall",
        }

    def search_formulas(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        return [self.record][:limit]

    def search_constants(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        return [{"name": "ln 2", "symbol": "ln2", "value": 0.6931, "unit": ""}][:limit]

    def create_tool(self, formula_id: str) -> FormulaTool:
        if formula_id != self.tool.formula_id:
            raise KeyError(formula_id)
        return self.tool


def arm_tools(env: AgentEnv) -> FormulaTool | None:
    """Make the environment's formula tool callable straight away (as if created earlier in the session)."""
    formulas = env.formulas
    if not isinstance(formulas, ToolFormulas):
        return None
    env.retrieved_formulas[formulas.tool.formula_id] = formulas.record
    env.tools[formulas.tool.name] = formulas.tool
    return formulas.tool


def seed_responses(tool_name: str = "F_1_tool") -> list[tuple[str, str]]:
    """(response, action format): every action's examples in every format, a formula-tool call, and two hostile
    classics (the alias bomb, JSON nested far deeper than Python's recursion limit)."""
    seeds = []
    for action_format in ACTION_FORMATS:
        examples = [(a.action_name(), e) for a in ALL_ACTIONS for e in a.examples]
        examples.append(("CallTool", {"tool_name": tool_name, "parameters": {"P": 0.8, "R": 0.6}}))
        for name, parameters in examples:
            seeds.append(
                (f"[Thought]: next\n[Action]:\n{render_action(name, parameters, action_format)}", action_format)
            )
    seeds.append((alias_bomb(), "yaml"))
    seeds.append(
        ('{"action_type": "GenerateAnswer", "parameters": {"answer": ' + "[" * 9000 + "]" * 9000 + "}}", "json")
    )
    return seeds


def edit(text: str, kind: str, start: int, end: int, fragment: str) -> str:
    """One mutation of ``text``: insert, replace, delete or repeat (``fragment`` 3 to 300 times) a span."""
    start, end = sorted((max(0, min(start, len(text))), max(0, min(end, len(text)))))
    if kind == "insert":
        return text[:start] + fragment + text[start:]
    if kind == "replace":
        return text[:start] + fragment + text[end:]
    if kind == "delete":
        return text[:start] + text[end:]
    if kind == "repeat":
        return text[:start] + fragment * (3 + end % 298) + text[end:]
    raise ValueError(f"unknown edit {kind!r}")


EDITS = ("insert", "replace", "delete", "repeat")


@dataclass
class Outcome:
    kind: str  # action | refused | error
    message: str
    seconds: float
    peak_bytes: int


def try_action(
    response: str, action_format: str, env: AgentEnv, actions: Sequence[type[Action]] = ALL_ACTIONS
) -> Outcome:
    """Parse, build and run one response as the loop does; peak memory is measured when tracemalloc is tracing."""
    by_name = {a.action_name(): a for a in actions}
    tracing = tracemalloc.is_tracing()
    if tracing:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    try:
        parsed = parse_action(response, action_format, list(by_name))
        action = by_name[parsed.action_type].build(parsed)
        action.render(action_format)
        observation = run_action(action, env)
    except ActionParseError as problem:
        kind, message = "refused", str(problem)
        if "\n" in message or len(message) > MAX_REFUSAL_CHARS:
            kind = "error"
    except Exception as problem:
        kind, message = "error", describe(problem)
    else:
        kind, message = "action", observation.text
        if len(message) > MAX_OBSERVATION_CHARS + _NOTE_SLACK:
            kind, message = "error", f"observation of {len(message)} characters"
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] - base if tracing else 0
    return Outcome(kind, message, seconds, peak)


def random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 3 and roll < 0.15:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(6))]
    if depth < 3 and roll < 0.25:
        return {random_text(rng, 6): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    if roll < 0.45:
        return rng.choice(HOSTILE_FRAGMENTS)
    if roll < 0.6:
        return rng.choice([0, -1, 2**63, -(2**64), 10**99, 10**101, 1.5, float("inf"), float("nan"), True, None])
    return random_text(rng, 30)


def random_text(rng: random.Random, size: int) -> str:
    alphabet = string.printable + "²٣１𝟗Ⅻ\u00a0ü中"
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(size + 1)))


def random_case(rng: random.Random, seeds: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """One fuzz input: random text (1 in 10), typed random parameters (2 in 10), else a mutated valid action."""
    roll = rng.random()
    if roll < 0.1:
        return random_text(rng, 400), rng.choice(ACTION_FORMATS)
    if roll < 0.3:
        action = rng.choice(ALL_ACTIONS)
        names = [p.name for p in action.params()] + ["extra"]
        parameters = {rng.choice(names): random_value(rng) for _ in range(rng.randrange(4))}
        action_format = rng.choice(ACTION_FORMATS)
        return render_action(action.action_name(), parameters, action_format), action_format
    text, action_format = rng.choice(seeds)
    for _ in range(rng.randrange(1, 5)):
        start = rng.randrange(len(text) + 1)
        text = edit(text, rng.choice(EDITS), start, start + rng.randrange(40), rng.choice(HOSTILE_FRAGMENTS))
    return text, action_format


def fuzz_env() -> AgentEnv:
    """No warehouse or vectors (those actions answer "unavailable"); the formula workflow runs a real tool."""
    env = AgentEnv(None, None, ToolFormulas())
    arm_tools(env)
    return env


def run_fuzz(seconds: float, env: AgentEnv | None = None, seed: int = 0, inputs: int | None = None) -> dict[str, Any]:
    """Fuzz for ``seconds``, or until ``inputs`` were tried if that comes first (a count that does not depend on how
    busy the machine is): counts of inputs tried, actions run, refusals and errors, the slowest input's seconds,
    the largest peak memory of one input (bytes), and the first errors with their inputs."""
    env = env or fuzz_env()
    tool = arm_tools(env)
    seeds = seed_responses(tool.name if tool else "F_1_tool")
    rng = random.Random(seed)
    count_tokens("the encoding loads on first use: not an input's cost")
    counts = {"tried": 0, "action": 0, "refused": 0, "error": 0}
    slowest, peak, errors = 0.0, 0, []
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and (inputs is None or counts["tried"] < inputs):
            response, action_format = random_case(rng, seeds)
            outcome = try_action(response, action_format, env)
            counts["tried"] += 1
            counts[outcome.kind] += 1
            slowest, peak = max(slowest, outcome.seconds), max(peak, outcome.peak_bytes)
            if outcome.kind == "error" and len(errors) < 5:
                errors.append({"format": action_format, "input": response[:500], "error": outcome.message})
    finally:
        if not tracing:
            tracemalloc.stop()
    return {**counts, "max_seconds": round(slowest, 4), "peak_bytes": peak, "errors": errors}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    result = {"seconds": args.seconds, "seed": args.seed, **run_fuzz(args.seconds, seed=args.seed)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(json.dumps({k: v for k, v in result.items() if k != "errors"}))
    for failure in result["errors"]:
        print(f"error ({failure['format']}): {failure['error']}\n  input: {failure['input'][:200]!r}")
    return result


if __name__ == "__main__":
    main()
