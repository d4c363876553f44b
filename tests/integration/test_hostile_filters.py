"""Hostile input on the search surfaces: the filter validator, vector search, `paperlake search`, ViewImage.

The property everywhere: a one-line error or a valid result, quickly, never a traceback. The filter fuzzing runs
through hypothesis (bounded, no example database written); the Milvus checks use one small Milvus Lite collection
(BM25, so no model is loaded) filled with a few hand-made entities.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import time
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymilvus import MilvusClient, MilvusException
from typer.testing import CliRunner

from agent.actions import ViewImage
from agent.env import AgentEnv
from cli.app import app
from paperlake.runtime.sql_sandbox import ReadOnlyWarehouse
from paperlake.vectors.filters import FIELD_TYPES, MAX_FILTER_CHARS, MAX_FILTER_DEPTH, FilterError, validate_filter
from paperlake.vectors.search import SearchFailed, search
from paperlake.vectors.store import VectorStore
from support.agent_fixtures import CALIBRATION, FakeFormulas, build_warehouse

COLLECTION = "text_bm25_en"
SECONDS_PER_INPUT = 10.0  # a hang guard: the slowest input measured takes ~0.05 s; runaway work takes minutes
FUZZ = settings(
    max_examples=400,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def refused_in_one_line(expression) -> str:
    started = time.perf_counter()
    with pytest.raises(FilterError) as error:
        validate_filter(expression)
    assert time.perf_counter() - started < SECONDS_PER_INPUT
    message = str(error.value)
    assert message and "\n" not in message and "\r" not in message and len(message) < 600, message
    return message


def one_line_or_valid(expression: str) -> None:
    """The fuzz property: a normalised filter that re-validates to itself, or a one-line FilterError; in time."""
    started = time.perf_counter()
    try:
        normalised = validate_filter(expression)
    except FilterError as error:
        message = str(error)
        assert message and "\n" not in message and "\r" not in message and len(message) < 600, message
    else:
        assert "\n" not in normalised
        if len(normalised) <= MAX_FILTER_CHARS:  # `&&` normalises to ` and `, so the text can grow
            assert validate_filter(normalised) == normalised
    assert time.perf_counter() - started < SECONDS_PER_INPUT, expression[:200]


# ── the validator ────────────────────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("levels", [100, 200, 300, 400, 2000])
def test_deep_parentheses_are_refused_in_one_line(levels):
    expression = "(" * levels + "pdf_id == 'a'" + ")" * levels
    message = refused_in_one_line(expression)
    assert f"nests deeper than {MAX_FILTER_DEPTH} levels" in message or "characters, more than" in message


@pytest.mark.parametrize(
    "expression",
    ["not " * 1200 + "pdf_id == 'a'", "!" * 1200 + "pdf_id == 'a'", "not (" * 500 + "pdf_id == 'a'" + ")" * 500],
)
def test_long_runs_of_not_are_refused_in_one_line(expression):
    refused_in_one_line(expression)


def test_nesting_up_to_the_limit_is_accepted_and_one_more_level_is_not():
    deepest = "(" * (MAX_FILTER_DEPTH - 1) + "not pdf_id == 'a'" + ")" * (MAX_FILTER_DEPTH - 1)
    assert validate_filter(deepest) == "(" * (MAX_FILTER_DEPTH - 1) + 'not pdf_id == "a"' + ")" * (MAX_FILTER_DEPTH - 1)
    assert "nests deeper than 32 levels" in refused_in_one_line("(" + deepest + ")")


def test_filter_text_is_capped():
    many = " or ".join(f"page_number == {n}" for n in range(400))
    assert len(many) > MAX_FILTER_CHARS
    assert f"more than {MAX_FILTER_CHARS}" in refused_in_one_line(many)
    assert f"more than {MAX_FILTER_CHARS}" in refused_in_one_line("pdf_id == '" + "x" * 100_000 + "'")


def test_like_is_supported_on_string_fields_only():
    assert validate_filter("pdf_id like 'abc%'") == 'pdf_id like "abc%"'
    assert (
        validate_filter('not primary_key LIKE "%_1" and page_number <= 3')
        == 'not primary_key like "%_1" and page_number <= 3'
    )
    assert "matches strings and page_number is an integer" in refused_in_one_line("page_number like '1%'")
    assert "takes a quoted pattern" in refused_in_one_line("pdf_id like abc")
    assert "ends too early" in refused_in_one_line("pdf_id like")


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("page_number == 9223372036854775808", "64-bit integer"),
        ("page_number >= -9223372036854775809", "64-bit integer"),
        ("page_number == " + "9" * 3000, "3000 characters"),  # int() of it would raise its own ValueError
        ("pdf_id == 'a\nb'", "control character"),
        ("pdf_id == 'a\x00'", "control character"),
        ("pdf_id == '\udc80'", "not valid Unicode"),
        ("pdf_id == 'a' " + "y" * 3000, "join conditions"),
        ("x[/bold]", "unexpected character"),
    ],
)
def test_hostile_values_are_refused_in_one_line(expression, reason):
    assert reason in refused_in_one_line(expression)


def test_extreme_values_inside_the_limits_are_accepted():
    assert validate_filter("page_number == 9223372036854775807") == "page_number == 9223372036854775807"
    assert validate_filter("pdf_id == 'é😀\u200d'") == 'pdf_id == "é😀\u200d"'
    assert validate_filter("pdf_id == 'a\\\\\"b'") == 'pdf_id == "a\\\\\\"b"'


# ── fuzzing the validator ────────────────────────────────────────────────────────────────────────────────────────

VALID_FIELDS = list(FIELD_TYPES)
WORDS = [*VALID_FIELDS, "paper_id", "text", "like", "in", "not", "and", "or", "true", "null", "LIKE", "Not"]
SYMBOLS = [
    "==",
    "!=",
    "<",
    ">",
    "<=",
    ">=",
    "=",
    "&&",
    "||",
    "!",
    "(",
    ")",
    "[",
    "]",
    ",",
    "'",
    '"',
    "\\",
    "%",
    "\n",
    "\x00",
    "\udc80",
    "😀",
]
ANY_CHARACTER = st.characters(blacklist_categories=())  # control characters and surrogates included
NUMBERS = st.one_of(st.integers(-(2**70), 2**70).map(str), st.sampled_from(["9" * 5000, "1e999", "1.5", "-0", "+3"]))
STRINGS = st.text(ANY_CHARACTER, max_size=30).map(lambda s: "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'")
TOKENS = st.one_of(
    st.sampled_from(WORDS), st.sampled_from(SYMBOLS), NUMBERS, STRINGS, st.text(ANY_CHARACTER, max_size=4)
)


@FUZZ
@given(st.text(ANY_CHARACTER, max_size=300))
def test_fuzz_random_unicode(text):
    one_line_or_valid(text)


@FUZZ
@given(st.lists(TOKENS, max_size=60), st.sampled_from(["", " ", "  ", "\t"]))
def test_fuzz_token_soup_from_the_grammar(tokens, separator):
    one_line_or_valid(separator.join(tokens))


@FUZZ
@given(
    st.integers(0, 3000),
    st.integers(0, 3000),
    st.sampled_from(["(", "not ", "!", "not (", "( not "]),
    st.sampled_from(["pdf_id == 'a'", "page_number in [1, 2]", "", "pdf_id like '%'", ")"]),
)
def test_fuzz_nesting(opening, closing, word, atom):
    one_line_or_valid(word * opening + atom + ")" * closing)


def _string_value(kind):
    if kind is int:
        return st.integers(-(2**63), 2**63 - 1).map(str)
    text = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=12)
    return text.map(lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"')


@st.composite
def comparisons(draw):
    name = draw(st.sampled_from(VALID_FIELDS))
    kind = FIELD_TYPES[name]
    if draw(st.booleans()) and kind is str:
        return f"{name} like {draw(_string_value(str))}"
    if draw(st.integers(0, 3)) == 0:
        values = draw(st.lists(_string_value(kind), min_size=1, max_size=4))
        return f"{name} {draw(st.sampled_from(['in', 'not in']))} [{', '.join(values)}]"
    return f"{name} {draw(st.sampled_from(['==', '!=', '<', '>', '<=', '>=']))} {draw(_string_value(kind))}"


VALID_FILTERS = st.recursive(
    comparisons(),
    lambda inner: st.one_of(
        inner.map(lambda e: f"not ({e})"),
        inner.map(lambda e: f"!{e}" if not e.startswith(("!", "not")) else f"(({e}))"),
        st.tuples(inner, inner, st.sampled_from([" and ", " or ", " && ", " || "])).map(lambda t: t[2].join(t[:2])),
        inner.map(lambda e: f"({e})"),
    ),
    max_leaves=8,
)


@FUZZ
@given(VALID_FILTERS)
def test_fuzz_grammar_filters(expression):
    one_line_or_valid(expression)


@FUZZ
@given(VALID_FILTERS, st.integers(0, 200), st.sampled_from(list("()[]'\",=!&| \\\n\x00é")))
def test_fuzz_grammar_filters_with_one_character_changed(expression, at, character):
    at = at % (len(expression) + 1)
    one_line_or_valid(expression[:at] + character + expression[at + 1 :])


def test_the_benchmark_fuzzer_reports_counts(monkeypatch):
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "hostile_filters.py"
    spec = importlib.util.spec_from_file_location("benchmark_hostile_filters", script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    # a count, not a time budget: on a busy machine one second tried 15 inputs where it usually tries hundreds
    report = module.fuzz_filters(300.0, seed=7, inputs=200)
    assert report.tried == 200 == report.accepted + report.refused + report.crashed
    assert report.accepted and report.refused and report.crashed == 0, report.crash_examples
    assert 0 < report.max_seconds_per_input < SECONDS_PER_INPUT and report.peak_memory_bytes > 0


# ── Milvus: accepted filters search, Milvus errors become one line ───────────────────────────────────────────────


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A home whose milvus.db holds the BM25 collection with six entities of two papers (page 1..6)."""
    home = tmp_path_factory.mktemp("hostile") / "home"
    vectors = VectorStore(home / "milvus.db", cache_path=home / "cache" / "embeddings.sqlite")
    vectors.ensure_collections([COLLECTION])
    partition = vectors.view_partition(COLLECTION, "chunks", "text_content", create=True)
    vectors.client.insert(
        COLLECTION,
        [
            {
                "id": f"entity-{n}",
                "pdf_id": f"paper-{n % 2}",
                "page_number": n,
                "table_name": "chunks",
                "column_name": "text_content",
                "primary_key": f"chunk-{n}",
                "text": f"rank calibration of model {n}",
                "bbox": [],
                "text_hash": "x",
            }
            for n in range(1, 7)
        ],
        partition_name=partition,
    )
    vectors.client.flush(COLLECTION)
    yield vectors
    vectors.close()


def test_like_filters_search_in_milvus(store):
    found = search(
        store, "rank calibration", COLLECTION, "chunks", "text_content", filter="pdf_id like 'paper-1%'", limit=10
    )
    assert sorted(h.page_number for h in found) == [1, 3, 5]
    found = search(
        store,
        "rank calibration",
        COLLECTION,
        filter="primary_key like '%-6' or primary_key like 'chunk-_' and page_number < 3",
        limit=10,
    )
    assert sorted(h.page_number for h in found) == [1, 2, 6]


def test_like_patterns_cannot_make_milvus_backtrack(store):
    assert validate_filter("pdf_id like '" + "%" * 3000 + "'") == 'pdf_id like "%"'
    assert "more than 2" in refused_in_one_line("pdf_id like '%a%b%'")
    started = time.perf_counter()  # before: Milvus Lite's regex for this pattern did not finish in minutes
    assert (
        search(
            store, "rank calibration", COLLECTION, filter="pdf_id like '" + "%" * 1500 + ";" + "%" * 1500 + "'", limit=3
        )
        == []
    )
    assert time.perf_counter() - started < SECONDS_PER_INPUT


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(VALID_FILTERS)
def test_fuzz_accepted_filters_search_without_milvus_errors(store, expression):
    try:
        validate_filter(expression)
    except FilterError:
        return
    started = time.perf_counter()
    found = search(store, "rank calibration", COLLECTION, filter=expression, limit=3)
    assert len(found) <= 3 and time.perf_counter() - started < SECONDS_PER_INPUT


def test_milvus_errors_become_one_line(store, monkeypatch):
    def refuse(*args, **kwargs):
        raise MilvusException(code=1100, message="unexpected token at column 16\nexpected literal, identifier")

    monkeypatch.setattr(store.client, "search", refuse)
    with pytest.raises(SearchFailed) as error:
        search(store, "rank calibration", COLLECTION, filter="page_number == 3")
    assert str(error.value) == (
        "Milvus failed the search of text_bm25_en: unexpected token at column 16 expected literal, identifier"
    )


def test_a_query_with_an_unpaired_surrogate_is_refused(store):
    with pytest.raises(ValueError, match="not valid Unicode"):
        search(store, "rank \udc80", COLLECTION)


# ── `paperlake search` ───────────────────────────────────────────────────────────────────────────────────────────


def run_cli(*args: str):
    result = CliRunner().invoke(app, ["search", *args])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    return result


def one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv("MILVUS_URI", raising=False)
    monkeypatch.delenv("PAPERLAKE_HOME", raising=False)


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 400 + "pdf_id == 'a'" + ")" * 400,
        "(" * 250 + "pdf_id == 'a'" + ")" * 250,
        "!" * 1200 + "pdf_id == 'a'",
        "x[/bold] == 'a'",
        "pdf_id == 'a" + "b" * 5000,
    ],
)
def test_cli_refuses_hostile_filters_in_one_line(tmp_path, no_env, expression):
    line = one_line_error(run_cli("x", "--filter", expression, "--home", str(tmp_path / "home")))
    assert "filter" in line


def test_cli_on_an_empty_home_says_nothing_was_ingested_and_creates_nothing(tmp_path, no_env):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_line_error(run_cli("rank calibration", "--home", str(empty)))
    assert "nothing has been ingested into" in line and "paperlake ingest" in line
    assert list(empty.iterdir()) == []
    missing = tmp_path / "missing"
    one_line_error(run_cli("rank calibration", "--home", str(missing)))
    assert not missing.exists()


def test_cli_searches_with_like_and_reports_milvus_errors_in_one_line(store, no_env, monkeypatch):
    home = store.db_path.parent
    found = run_cli(
        "rank calibration", "-c", COLLECTION, "--json", "--filter", "pdf_id like '%-0'", "--home", str(home)
    )
    assert found.exit_code == 0, found.output
    assert '"pdf_id": "paper-0"' in found.output and "paper-1" not in found.output

    def refuse(*args, **kwargs):
        raise MilvusException(code=1100, message="expression too deep\nRecursionError")

    monkeypatch.setattr(MilvusClient, "search", refuse)
    line = one_line_error(run_cli("rank calibration", "-c", COLLECTION, "--home", str(home)))
    assert line == "error: Milvus failed the search of text_bm25_en: expression too deep RecursionError"


# ── ViewImage ────────────────────────────────────────────────────────────────────────────────────────────────────


@pytest.fixture
def viewer(tmp_path):
    """An agent env over the small agent warehouse, with the sha256 of the paper's PDF recorded in metadata."""
    home = tmp_path / "home"
    build_warehouse(home)
    pdf = home / "inbox" / "emnlp2024" / "rank-calibration.pdf"
    with duckdb.connect(str(home / "warehouse.duckdb")) as con:
        con.execute(
            "update metadata set sha256 = ? where cast(paper_id as varchar) = ?",
            [hashlib.sha256(pdf.read_bytes()).hexdigest(), CALIBRATION],
        )
    env = AgentEnv(ReadOnlyWarehouse(home / "warehouse.duckdb", timeout=5), None, FakeFormulas(), home=home)
    yield env, pdf
    env.close()


@pytest.mark.parametrize(
    "box",
    [
        [1e308, 1e308, 1e308, 1e308],
        [-1e308, -1e308, 1e308, 1e308],
        [0, 0, 1e308, 1e308],
        [0, 0, 1e20, 10],
        [2**80, 0, 10, 10],
        [0, 0, 0.5, 200],
        [0, 0, float("nan"), 1],
        ["72", 100, 10, 10],
        [True, 1, 1, 1],
        [1, 2, 3],
    ],
)
def test_view_image_refuses_absurd_boxes(viewer, box):
    env, _ = viewer
    observation = ViewImage(CALIBRATION, 2, box).execute(env)
    assert not observation.ok and observation.error_type == "invalid_parameter" and "bounding_box" in observation.text
    assert "\n" not in observation.text and not observation.images


def test_view_image_clips_a_large_box_to_the_page(viewer):
    env, _ = viewer
    observation = ViewImage(CALIBRATION, 2, [-100, -100, 10_000, 10_000]).execute(env)
    assert observation.ok and observation.evidence[0].bbox == (0.0, 0.0, 612.0, 792.0)
    assert ViewImage(CALIBRATION, 2.5, []).execute(env).error_type == "invalid_parameter"


def test_view_image_checks_the_pdf_is_the_ingested_file_and_caches_its_hash(viewer, monkeypatch):
    env, pdf = viewer
    digests = []
    real = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda *a, **k: digests.append(1) or real(*a, **k))
    assert ViewImage(CALIBRATION, 1).execute(env).ok
    assert ViewImage(CALIBRATION, 2, [72, 100, 328, 200]).execute(env).ok
    assert len(digests) == 1  # the same file (path, mtime, size) is hashed once
    pdf.write_bytes(pdf.read_bytes() + b"\n% appended by someone else\n")
    changed = ViewImage(CALIBRATION, 1).execute(env)
    assert not changed.ok and changed.error_type == "file_changed" and not changed.images
    assert "sha256 differs" in changed.text and str(pdf) not in changed.text
    assert len(digests) == 2
    pdf.unlink()
    assert ViewImage(CALIBRATION, 1).execute(env).error_type == "not_found"
