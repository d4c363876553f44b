"""Fuzz the vector-search filter validator with hostile input, for a fixed time, and count what happened.

Every input must end in one of two ways, quickly: a normalised filter (accepted) or a :class:`FilterError` whose
message is one line (refused). Anything else (a traceback, a RecursionError, a multi-line message, an accepted
filter that does not re-validate to itself) is counted as a crash and the first few are kept as examples. With a
``VectorStore``, every accepted filter is also run as a search, and a search Milvus fails on is counted too.

The inputs mix deep nesting, long runs of ``not``, token soup from the filter grammar, valid filters with one
character changed, random Unicode (control characters and unpaired surrogates included), huge numbers and long
strings. ``tests/integration/test_hostile_filters.py`` states the same property with hypothesis; this module is the
open-ended version a benchmark run can give minutes to.

Run: ``python benchmarks/hostile_filters.py [--seconds S] [--seed N]``; prints the counts as JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from paperlake.vectors.filters import FIELD_TYPES, MAX_FILTER_CHARS, FilterError, validate_filter

FIELDS = [*FIELD_TYPES, "paper_id", "text", "id", "PDF_ID", "_", "like", "in", "not"]
OPERATORS = [
    "==",
    "!=",
    "<",
    ">",
    "<=",
    ">=",
    "=",
    "===",
    "in",
    "not in",
    "like",
    "and",
    "or",
    "not",
    "&&",
    "||",
    "!",
    "&",
    "|",
    "~",
    "+",
    "-",
    "*",
    "%",
    "->",
    "::",
    "is",
    "null",
    "true",
    "false",
    "exists",
]
PUNCTUATION = ["(", ")", "[", "]", ",", "{", "}", ";", "'", '"', "\\", "$", "#", "`", "\n", "\t", "\x00"]
UNICODE = [
    "é",
    "😀",
    "\u200d",
    "\u2028",
    "\ufeff",
    "\u00a0",
    "٣",
    "𝟗",
    "\udc80",
    "\ud800",
    "\U0010ffff",
    "\x7f",
    "ﬁ",
    "İ",
    "ß",
    "\u0301",
    "\u202e",
]


@dataclass
class FuzzReport:
    seconds: float = 0.0
    tried: int = 0
    refused: int = 0
    accepted: int = 0
    crashed: int = 0
    searched: int = 0
    search_failed: int = 0
    max_seconds_per_input: float = 0.0
    slowest_input: str = ""
    peak_memory_bytes: int = 0
    crash_examples: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _string_literal(rng: random.Random) -> str:
    quote = rng.choice("'\"")
    body = "".join(
        rng.choice([*"abc%_-0123456789", "\\", "\\" + quote, quote, *UNICODE]) for _ in range(rng.randint(0, 12))
    )
    if rng.random() < 0.05:
        body = rng.choice("ab%") * rng.randint(100, 6000)
    return quote + body + (quote if rng.random() < 0.95 else "")


def _number(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.5:
        return str(rng.randint(-5, 50))
    if kind < 0.7:
        return str(rng.choice([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10 ** rng.randint(19, 60)]))
    if kind < 0.8:
        return "9" * rng.randint(20, 6000)
    if kind < 0.9:
        return rng.choice(["1.5", "1e308", "1e999", "-0", "+3", "0x10", "1_000", ".5", "3.", "nan", "inf"])
    return f"{rng.randint(0, 9)}e{rng.randint(-400, 400)}"


def _comparison(rng: random.Random) -> str:
    name = rng.choice(list(FIELD_TYPES)) if rng.random() < 0.85 else rng.choice(FIELDS)
    kind = FIELD_TYPES.get(name, str)

    def value() -> str:
        return _number(rng) if kind is int else _string_literal(rng)

    roll = rng.random()
    if roll < 0.15:
        return f"{name} {rng.choice(['in', 'not in'])} [{', '.join(value() for _ in range(rng.randint(0, 5)))}]"
    if roll < 0.25:
        return f"{name} like {_string_literal(rng)}"
    if roll < 0.3:
        return f"{name} {rng.choice(OPERATORS)} {rng.choice([_number(rng), _string_literal(rng)])}"
    return f"{name} {rng.choice(['==', '!=', '<', '>', '<=', '>='])} {value()}"


def _expression(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if depth > 6 or roll < 0.4:
        return _comparison(rng)
    if roll < 0.55:
        return f"{rng.choice(['not ', '!', 'NOT '])}{_expression(rng, depth + 1)}"
    if roll < 0.7:
        return f"({_expression(rng, depth + 1)})"
    joiner = rng.choice([" and ", " or ", " && ", " || ", " AND ", "&&"])
    return joiner.join(_expression(rng, depth + 1) for _ in range(rng.randint(2, 4)))


def _mutate(rng: random.Random, text: str) -> str:
    if not text:
        return text
    pieces = [*PUNCTUATION, *UNICODE, *OPERATORS, " "]
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(text) + 1)
        action = rng.random()
        if action < 0.4:
            text = text[:at] + rng.choice(pieces) + text[at:]
        elif action < 0.7:
            text = text[:at] + text[at + 1 :]
        else:
            text = text[:at] + rng.choice(pieces) + text[at + 1 :]
    return text


def hostile_filter(rng: random.Random) -> str:
    """One adversarial filter string (deterministic for a seeded ``rng``)."""
    roll = rng.random()
    atom = _comparison(rng)
    if roll < 0.12:
        n = rng.choice([rng.randint(0, 40), rng.randint(0, 1500)])
        closing = n if rng.random() < 0.8 else rng.randint(0, n + 2)
        return "(" * n + atom + ")" * closing
    if roll < 0.22:
        word = rng.choice(["not ", "!", "not(", "! ", "NOT "])
        return word * rng.choice([rng.randint(0, 40), rng.randint(0, 1500)]) + atom
    if roll < 0.4:
        tokens = [*FIELDS, *OPERATORS, *PUNCTUATION]
        return rng.choice(["", " ", "\t"]).join(
            rng.choice([rng.choice(tokens), _number(rng), _string_literal(rng)]) for _ in range(rng.randint(1, 30))
        )
    if roll < 0.5:
        alphabet = [*UNICODE, *PUNCTUATION, *"abz09 _=<>!&|()[],'\""]
        return "".join(
            rng.choice(alphabet) if rng.random() < 0.8 else chr(rng.randrange(0x110000))
            for _ in range(rng.randint(0, 200))
        )
    if roll < 0.55:
        joiner = rng.choice([" and ", " or ", "&&"])
        return joiner.join(_comparison(rng) for _ in range(rng.randint(50, 600)))
    if roll < 0.75:
        return _mutate(rng, _expression(rng))
    return _expression(rng)


def check_filter(text: str) -> tuple[str, str]:
    """``("accepted", normalised)`` or ``("refused", message)``; raises AssertionError (or anything the validator
    lets escape) when the property breaks."""
    try:
        normalised = validate_filter(text)
    except FilterError as error:
        message = str(error)
        assert message and "\n" not in message and "\r" not in message, f"multi-line message: {message!r}"
        assert len(message) < 600, f"message of {len(message)} characters"
        return "refused", message
    assert "\n" not in normalised, "normalised filter spans lines"
    if len(normalised) <= MAX_FILTER_CHARS:
        assert validate_filter(normalised) == normalised, f"not a fixed point: {normalised!r}"
    return "accepted", normalised


def fuzz_filters(
    seconds: float,
    seed: int = 0,
    store: Any = None,
    collection: str = "text_bm25_en",
    max_examples: int = 5,
    inputs: int | None = None,
) -> FuzzReport:
    """Fuzz :func:`validate_filter` for ``seconds``, or until ``inputs`` were tried if that comes first (a count
    that does not depend on how busy the machine is); with ``store`` (a ``VectorStore`` holding ``collection``),
    search with each accepted filter too. Peak memory is what the validator (and search) allocated, by tracemalloc."""
    from paperlake.vectors.search import SearchFailed, search

    rng = random.Random(seed)
    report = FuzzReport()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < seconds and (inputs is None or report.tried < inputs):
            text = hostile_filter(rng)
            report.tried += 1
            begun = time.perf_counter()
            try:
                outcome, normalised = check_filter(text)
                if outcome == "accepted" and store is not None:
                    report.searched += 1
                    try:
                        search(store, "rank calibration", collection, filter=text, limit=3)
                    except SearchFailed as error:
                        report.search_failed += 1
                        _keep(report, max_examples, text, f"SearchFailed: {error}")
            except BaseException as error:  # counting exactly what must never happen
                if isinstance(error, KeyboardInterrupt):
                    raise
                outcome = "crashed"
                report.crashed += 1
                _keep(report, max_examples, text, f"{type(error).__name__}: {error}")
            if outcome == "accepted":
                report.accepted += 1
            elif outcome == "refused":
                report.refused += 1
            took = time.perf_counter() - begun
            if took > report.max_seconds_per_input:
                report.max_seconds_per_input, report.slowest_input = took, text[:200]
    finally:
        report.peak_memory_bytes = tracemalloc.get_traced_memory()[1]
        if not was_tracing:
            tracemalloc.stop()
    report.seconds = time.perf_counter() - started
    return report


def _keep(report: FuzzReport, limit: int, text: str, problem: str) -> None:
    if len(report.crash_examples) < limit:
        report.crash_examples.append({"input": text[:300], "problem": problem[:500]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "hostile_filters.json"
    )
    args = parser.parse_args()
    report = fuzz_filters(args.seconds, args.seed)
    text = json.dumps({"seconds": args.seconds, "seed": args.seed, **report.to_dict()}, indent=2, ensure_ascii=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    if report.crashed or report.search_failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
