"""Everything the model can send to the stores is fenced: SQL, expressions, image requests, vector filters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.actions import CalculateExpr, RetrieveFromDatabase, RetrieveFromVectorstore, ViewImage
from agent.backends import InvalidFilter, validate_filter
from paperlake.runtime.sql_sandbox import ReadOnlyWarehouse, SQLFailed, SQLRefused, SQLTimeout, check_statement
from support.agent_fixtures import CALIBRATION, LORETTA, build_warehouse, env  # noqa: F401 (fixtures)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The small agent warehouse, built as support.agent_fixtures.home builds it; defined here rather than imported, as
    each test's `home` parameter would shadow the import. The imported `env` fixture takes this one."""
    build_warehouse(tmp_path / "home")
    return tmp_path / "home"


REFUSED = [
    ("insert into chunks (chunk_id) values (uuid())", "INSERT"),
    ("update metadata set title = 'x'", "UPDATE"),
    ("delete from chunks", "DELETE"),
    ("create table stolen as select * from metadata", "CREATE"),
    ("create temp table scratch (a int)", "CREATE"),
    ("drop table chunks", "DROP"),
    ("alter table chunks add column x int", "ALTER"),
    ("copy chunks to 'out.csv'", "COPY"),
    ("copy (select 1) to '/tmp/x.parquet' (format parquet)", "COPY"),
    ("attach 'other.duckdb' as other", "ATTACH"),
    ("detach warehouse", "DETACH"),
    ("install httpfs", "LOAD"),
    ("load httpfs", "LOAD"),
    ("set enable_external_access = true", "SET"),
    ("reset lock_configuration", "SET"),
    ("pragma enable_profiling", "PRAGMA"),
    ("explain insert into chunks (chunk_id) values (uuid())", "EXPLAIN"),
    ("checkpoint", "CALL"),
    ("export database 'dump'", "EXPORT"),
    ("select 1; select 2", "one statement"),
    ("", "empty"),
    ("selec 1", "parse"),
]


@pytest.mark.parametrize(("sql", "what"), REFUSED)
def test_non_reading_statements_are_refused_before_running(sql: str, what: str) -> None:
    with pytest.raises(SQLRefused) as refused:
        check_statement(sql)
    assert str(refused.value)


@pytest.mark.parametrize(
    "sql",
    [
        "select count(*) from chunks",
        "with t as (select 1 as a) select a from t",
        "from chunks limit 1",
        "describe chunks",
        "show tables",
        "summarize chunks",
        "explain select * from chunks",
        "pragma table_info('chunks')",
    ],
)
def test_reading_statements_run(home: Path, sql: str) -> None:
    with ReadOnlyWarehouse(home / "warehouse.duckdb") as warehouse:
        result = warehouse.query(sql)
    assert result.columns


@pytest.mark.parametrize(
    "sql",
    [
        "select * from read_csv('/etc/passwd')",
        "select * from read_text('/etc/passwd')",
        "select * from read_parquet('data.parquet')",
        "select * from glob('/etc/*')",
        "select * from sniff_csv('/etc/passwd')",
    ],
)
def test_file_access_is_refused_by_the_connection(home: Path, sql: str) -> None:
    with ReadOnlyWarehouse(home / "warehouse.duckdb") as warehouse:
        with pytest.raises(SQLRefused, match="disabled by configuration"):
            warehouse.query(sql)


def test_writes_smuggled_through_query_are_rejected(home: Path) -> None:
    with ReadOnlyWarehouse(home / "warehouse.duckdb") as warehouse:
        with pytest.raises(SQLFailed):
            warehouse.query("select * from query('create temp table x as select 1')")
        assert warehouse.query("select count(*) from metadata").rows == [(2,)]


def test_long_query_times_out_and_the_connection_stays_usable(home: Path) -> None:
    with ReadOnlyWarehouse(home / "warehouse.duckdb", timeout=0.5) as warehouse:
        with pytest.raises(SQLTimeout, match="0.5 s"):
            warehouse.query("select count(*) from range(10000000000) a, range(1000) b")
        assert warehouse.query("select 42").rows == [(42,)]


def test_row_cap_reports_truncation(home: Path) -> None:
    with ReadOnlyWarehouse(home / "warehouse.duckdb", max_rows=3) as warehouse:
        result = warehouse.query("select * from range(10)")
    assert len(result.rows) == 3 and result.truncated


def test_retrieve_from_database_turns_refusals_into_error_observations(env) -> None:  # noqa: F811
    for sql, error_type in [
        ("drop table chunks", "sql_refused"),
        ("copy metadata to 'x.csv'", "sql_refused"),
        ("attach 'x.duckdb'", "sql_refused"),
        ("select * from read_csv('/etc/passwd')", "sql_refused"),
        ("select no_such_column from chunks", "sql_error"),
    ]:
        observation = RetrieveFromDatabase(sql).execute(env)
        payload = json.loads(observation.text)
        assert not observation.ok and payload["error_type"] == error_type, sql
    assert RetrieveFromDatabase("select count(*) as n from chunks").execute(env).ok


def test_retrieve_from_database_times_out_as_an_observation(env) -> None:  # noqa: F811
    env.warehouse.timeout = 0.5
    observation = RetrieveFromDatabase("select count(*) from range(10000000000) a, range(1000) b").execute(env)
    assert observation.error_type == "sql_timeout"


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        "(1).__class__.__bases__",
        "open('/etc/passwd').read()",
        "9 ** 9 ** 9",
        "10 ** 100000",
        "[x for x in range(10)]",
        "lambda: 1",
    ],
)
def test_calculate_expr_refuses_code_and_huge_powers(env, expr: str) -> None:  # noqa: F811
    observation = CalculateExpr(expr).execute(env)
    assert not observation.ok and observation.error_type == "calculation_refused"


def test_calculate_expr_computes(env) -> None:  # noqa: F811
    observation = CalculateExpr("round((71.2 - 68.5) / 68.5 * 100, 2)").execute(env)
    assert observation.ok and observation.text.endswith("= 3.94")


@pytest.mark.parametrize(
    "paper_id",
    ["../../etc/passwd", f"{CALIBRATION}/../../secret", "/etc/passwd", "warehouse.duckdb", f" {CALIBRATION}x", ""],
)
def test_view_image_only_accepts_paper_uuids(env, paper_id: str) -> None:  # noqa: F811
    observation = ViewImage(paper_id, 1).execute(env)
    assert not observation.ok and observation.error_type == "invalid_parameter"
    assert not observation.images


def test_view_image_resolves_through_the_warehouse(env) -> None:  # noqa: F811
    unknown = ViewImage("12345678-1234-5678-1234-567812345678", 1).execute(env)
    assert unknown.error_type == "not_found"
    missing_file = ViewImage(LORETTA, 1).execute(env)
    assert missing_file.error_type == "not_found" and "missing.pdf" not in missing_file.text
    too_far = ViewImage(CALIBRATION, 9).execute(env)
    assert too_far.error_type == "invalid_parameter"
    outside = ViewImage(CALIBRATION, 2, [5000, 5000, 10, 10]).execute(env)
    assert outside.error_type == "invalid_parameter"
    bad_box = ViewImage(CALIBRATION, 2, [1, 2, 3]).execute(env)
    assert bad_box.error_type == "invalid_parameter"
    region = ViewImage(CALIBRATION, 2, [72, 100, 328, 200]).execute(env)
    assert region.ok and region.images[0].startswith(b"\x89PNG")
    assert region.evidence[0].bbox == (72.0, 100.0, 328.0, 200.0) and region.evidence[0].page_number == 2


@pytest.mark.parametrize(
    "expression",
    [
        "pdf_id == 'a'",
        "pdf_id in ['a', 'b'] and page_number <= 3",
        "not (table_name == 'chunks' or page_number > 2)",
        "primary_key like 'abc%' && page_number != 1",
        'pdf_id not in ["x"]',
        "",
    ],
)
def test_valid_filters_pass(expression: str) -> None:
    """Accepted, normalised by the one filter parser every surface shares (quotes, spacing), and stable."""
    normalised = validate_filter(expression)
    assert validate_filter(normalised) == normalised
    assert " ".join(normalised.replace('"', "'").split()) == " ".join(
        expression.replace('"', "'").replace("&&", "and").split()
    )


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("pdf_id = 'a'", "use == for equality"),
        ("secret == 'a'", "unknown field"),
        ("page_number == 'one'", "is an integer, got the string"),
        ("pdf_id == 3", "is a string, got the number"),
        ("pdf_id in ['a'", "ends too early"),
        ("(pdf_id == 'a'", "never closed"),
        ("pdf_id == 'a' and", "ends too early"),
        ("pdf_id == 'a'; drop", "column 14"),
        ("__import__('os')", "unknown field"),
        ("page_number like 'a%'", "'like' matches strings"),
    ],
)
def test_malformed_filters_are_refused(expression: str, reason: str) -> None:
    with pytest.raises(InvalidFilter, match=reason):
        validate_filter(expression)


def test_vector_action_refuses_malformed_filter_before_searching(env) -> None:  # noqa: F811
    observation = RetrieveFromVectorstore(
        "accuracy", "text_bm25_en", "chunks", "text_content", "pdf_id = 'x' or 1", 5
    ).execute(env)
    assert observation.error_type == "invalid_filter" and "next_valid_step" in json.loads(observation.text)
    assert env.vectors.calls == []


def test_vector_action_checks_collection_view_and_limit(env) -> None:  # noqa: F811
    observation = RetrieveFromVectorstore(
        "accuracy", "text_bm25_en", "chunks", "text_content", "page_number == 1", 5
    ).execute(env)
    assert observation.ok
    for kwargs, expected in [
        (dict(collection_name="nope"), "unknown collection"),
        (dict(table_name="metadata", column_name="pdf_path"), "not encoded"),
        (dict(limit=0), "between 1 and"),
    ]:
        params = (
            dict(
                query="accuracy",
                collection_name="text_bm25_en",
                table_name="chunks",
                column_name="text_content",
                filter="",
                limit=5,
            )
            | kwargs
        )
        bad = RetrieveFromVectorstore(**params).execute(env)
        assert bad.error_type == "invalid_parameter" and expected in bad.text
