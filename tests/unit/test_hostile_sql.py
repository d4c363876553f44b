"""`paperlake sql` and the agent share one SQL sandbox: nothing written, nothing read off the warehouse, one
statement, and bounded time, memory and result size (the CLI once ran any statement with a ~19 GB memory limit and
no timeout). Includes a hypothesis fuzz over SQL statements."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli.app import app
from paperlake.runtime.sql_sandbox import ReadOnlyWarehouse, SQLFailed, SQLRefused, SQLTimeout, SQLTooLarge
from support.agent_fixtures import build_warehouse, env  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-sql")
    build_warehouse(root / "home")
    return root / "home"


def cli_sql(home: Path, *args: str):
    return CliRunner().invoke(app, ["sql", *args, "--home", str(home)])


def one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    text = result.output.strip()
    assert "Traceback" not in text and text.startswith("error:"), text
    return text


@pytest.mark.parametrize(
    "statement",
    [
        "COPY (select 1) TO '{out}/x.csv'",
        "EXPORT DATABASE '{out}/dump'",
        "select * from read_csv('/etc/passwd')",
        "select * from read_text('/etc/passwd')",
        "select * from read_blob('/etc/passwd')",
        "select * from glob('/etc/*')",
        "ATTACH '{out}/other.duckdb' AS other",
        "LOAD httpfs",
        "INSTALL httpfs",
        "SET memory_limit = '20GB'",
        "select 1; select 2",
        "select 1; COPY (select 1) TO '{out}/y.csv'",
        "CREATE TABLE stolen AS SELECT * FROM metadata",
    ],
)
def test_the_cli_refuses_what_the_agent_is_refused(home: Path, tmp_path: Path, statement: str) -> None:
    result = cli_sql(home, statement.format(out=tmp_path))
    one_line_error(result)
    assert list(tmp_path.iterdir()) == [], "the statement wrote a file"


def test_a_runaway_recursive_query_is_stopped_at_the_timeout(home: Path) -> None:
    started = time.monotonic()
    result = cli_sql(
        home, "with recursive t(n) as (select 1 union all select n + 1 from t) select count(*) from t", "--timeout", "1"
    )
    assert "1 s" in one_line_error(result) and time.monotonic() - started < 10


def test_a_giant_value_is_cut_to_the_byte_cap_and_says_so(home: Path) -> None:
    result = cli_sql(home, "select repeat('x', 50000000) as s", "--max-bytes", "20000", "--json")
    assert result.exit_code == 0, result.output
    assert "cut at 20,000 bytes" in result.output
    assert 20_000 <= len(result.output) < 25_000


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise KeyError(field)


def test_a_value_too_large_to_build_in_time_is_stopped_and_the_sandbox_recovers(home: Path) -> None:
    """repeat('x', 1.5e9) is not interruptible inside DuckDB and ignores memory_limit: the worker is killed, and this
    process never holds the value. Its peak RSS is reset first (Linux's clear_refs "5"): the test process's lifetime
    peak is whatever the tests before it in this pytest worker needed."""
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    with ReadOnlyWarehouse(home / "warehouse.duckdb", timeout=1) as warehouse:
        started = time.monotonic()
        with pytest.raises((SQLTimeout, SQLTooLarge)):
            warehouse.query("select repeat('x', 1500000000) as s")
        assert time.monotonic() - started < 8
        assert warehouse.query("select count(*) from metadata").rows == [(2,)]
    assert _status_kib("VmHWM") - before < 2**20  # KiB: far below the 1.5 GB value


def test_the_worker_memory_is_capped(home: Path) -> None:
    with ReadOnlyWarehouse(
        home / "warehouse.duckdb", timeout=20, address_space=int(1.2 * 2**30), memory_limit="256MB"
    ) as warehouse:
        with pytest.raises(SQLTooLarge, match="memory"):
            warehouse.query("select string_agg(repeat('x', 1000), '') from range(1000000)")
        assert warehouse.query("select 1").rows == [(1,)]


def test_row_and_byte_caps_stop_fetching_early(home: Path) -> None:
    with ReadOnlyWarehouse(home / "warehouse.duckdb", max_rows=5, max_bytes=1000) as warehouse:
        many = warehouse.query("select * from range(1000000000)")
        wide = warehouse.query("select repeat('y', 300) as s from range(100)")
    assert len(many.rows) == 5 and many.truncated and "more than 5 rows" in many.note
    assert wide.cut_bytes and sum(len(r[0] or "") for r in wide.rows) <= 1000 + 1 and "1,000 bytes" in wide.note


def test_the_cli_still_answers_reading_queries(home: Path) -> None:
    result = cli_sql(home, "select count(*) as n from metadata", "--json")
    assert result.exit_code == 0 and '"n": 2' in result.output
    result = cli_sql(home, "select * from range(10)", "--limit", "3", "--json")
    assert result.exit_code == 0 and result.output.count('"range"') == 3 and "more than 3 rows" in result.output


def test_the_agent_is_told_the_byte_cap_cut_the_result(env) -> None:  # noqa: F811
    from agent.actions import RetrieveFromDatabase

    observation = RetrieveFromDatabase("select repeat('x', 5000000) as s").execute(env)
    assert observation.ok and "cut at 4,000,000 bytes" in observation.text
    assert "more than" not in observation.text and len(observation.text) < 60_000


# -- fuzz --------------------------------------------------------------------------------------------------------

FRAGMENTS = [
    "select",
    "from",
    "where",
    "with",
    "recursive",
    "union all",
    "copy",
    "to",
    "export",
    "database",
    "attach",
    "load",
    "install",
    "set",
    "pragma",
    "describe",
    "show",
    "summarize",
    "explain",
    "insert",
    "into",
    "values",
    "create",
    "table",
    "drop",
    ";",
    "(",
    ")",
    ",",
    "*",
    "'x'",
    "'/etc/passwd'",
    "1",
    "1e308",
    "9" * 50,
    "metadata",
    "chunks",
    "range(1000000000)",
    "read_csv",
    "read_text",
    "glob",
    "repeat",
    "query",
    "getenv('HOME')",
    "current_setting('memory_limit')",
    "--",
    "/*",
    "*/",
    "\\x00",
    "é",
    "count(*)",
    "as",
    "t",
    "n",
    "+",
    "=",
    "limit",
    "order by",
    "null",
    "::varchar",
    "[1,2]",
    "{'a': 1}",
]
sql_text = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=25).map(" ".join),
    st.text(max_size=200),
    st.builds(lambda n: "select " + "(" * n + "1" + ")" * n, st.integers(0, 3000)),
)


@pytest.fixture(scope="module")
def sandbox(home: Path):
    """One sandbox for all fuzz examples (a worker per example would spend the budget on start-ups)."""
    with ReadOnlyWarehouse(home / "warehouse.duckdb", timeout=2, max_rows=50, max_bytes=100_000) as warehouse:
        yield warehouse


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(statement=sql_text)
def test_fuzz_any_statement_gives_a_bounded_result_or_one_error(sandbox: ReadOnlyWarehouse, statement: str) -> None:
    before = set(Path.cwd().iterdir())
    started = time.monotonic()
    try:
        result = sandbox.query(statement)
    except (SQLRefused, SQLFailed, SQLTimeout) as error:
        assert "\n" not in str(error) and str(error)
    else:
        assert len(result.rows) <= sandbox.max_rows
    assert time.monotonic() - started < sandbox.timeout + 5
    assert set(Path.cwd().iterdir()) == before, "a statement wrote a file"
