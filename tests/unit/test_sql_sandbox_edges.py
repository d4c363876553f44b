"""The SQL sandbox at its edges: the statement whitelist's messages, the worker's answers (run in this process over
pipes, as the parent talks to it), the row and byte caps at their exact limits, the pipe protocol, and the parent's
errors. The fences themselves are in test_sandbox_fences.py."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from pathlib import Path

import duckdb
import psutil
import pytest

from paperlake.runtime.sql_sandbox import (
    ADDRESS_SPACE,
    MAX_BYTES,
    MAX_ROWS,
    MEMORY_LIMIT,
    TIMEOUT,
    Fences,
    QueryResult,
    ReadOnlyWarehouse,
    SQLFailed,
    SQLRefused,
    SQLTimeout,
    SQLTooLarge,
    _answer,
    _exit_text,
    _fetch,
    _first_line,
    _fit,
    _receive,
    _send,
    _serve,
    check_statement,
)

RECURSIVE = "with recursive t(n) as (select 1 union all select n + 1 from t) select count(*) from t"


@pytest.fixture
def warehouse_file(tmp_path: Path) -> Path:
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute("create table metadata as select range as n, 'title ' || range as title from range(5)")
    return path


# -- the statement whitelist ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "select 1",
        "from metadata",
        "with a as (select 1) select * from a",
        "describe metadata",
        "show tables",
        "summarize metadata",
        "explain select 1",
        "EXPLAIN ANALYZE select 1",
        "explain (format json) select 1",
        "explain analyze (format json) select 1",
        "EXPLAIN (FORMAT JSON, ANALYZE) select 1",
        "explain (select 1)",
        "explain /* a comment */ select 1",
        "pragma table_info('metadata')",
        "PRAGMA show_tables",
        "pragma version",
        "pragma storage_info('metadata')",
        "pragma show_tables_expanded",
    ],
)
def test_reading_statements_pass_unchanged(sql: str) -> None:
    assert check_statement(sql) == sql


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("", "empty SQL statement"),
        ("  \n\t ", "empty SQL statement"),
        ("selec 1", 'SQL does not parse: Parser Error: syntax error at or near "selec"'),
        ("select 1; select 2", "exactly one statement is allowed, got 2"),
        ("explain create table x (a int)", "EXPLAIN is allowed only for SELECT queries"),
        ("explain analyze delete from metadata", "EXPLAIN is allowed only for SELECT queries"),
        ("explain select 1; select 2", "exactly one statement is allowed, got 2"),
        ("explain (analyze) delete from metadata", "EXPLAIN is allowed only for SELECT queries"),
        ("explain (format json) insert into metadata values (9, 'x')", "EXPLAIN is allowed only for SELECT queries"),
        (
            "pragma enable_profiling",
            "only the catalogue PRAGMAs are allowed (show, show_tables, show_tables_expanded, ",
        ),
        ("pragma", "SQL does not parse"),
        (
            "drop table metadata",
            "DROP statements are not allowed: the warehouse is read-only "
            "(use SELECT/WITH, DESCRIBE, SHOW, SUMMARIZE or EXPLAIN)",
        ),
        ("call pragma_version()", "CALL statements are not allowed"),
    ],
)
def test_refusals_say_what_was_refused(sql: str, message: str) -> None:
    with pytest.raises(SQLRefused) as refused:
        check_statement(sql)
    assert str(refused.value).startswith(message)


def test_an_explain_whose_rest_does_not_parse_alone_is_refused_as_such() -> None:
    """A comment between EXPLAIN and its options hides them from the prefix: refused, on the safe side."""
    with pytest.raises(SQLRefused) as refused:
        check_statement("explain /* why */ (format json) select 1")
    assert str(refused.value) == 'SQL does not parse: Parser Error: syntax error at or near "format"'


# -- the worker, in this process --------------------------------------------------------------------------------------


class Pipes:
    """The worker's loop on a thread, talked to as the parent talks to it."""

    def __init__(self) -> None:
        to_worker, self.worker_stdin = os.pipe()
        self.worker_stdout, from_worker = os.pipe()
        self.send_end = os.fdopen(self.worker_stdin, "wb")
        self.receive_end = os.fdopen(self.worker_stdout, "rb")
        stdin, stdout = os.fdopen(to_worker, "rb"), os.fdopen(from_worker, "wb")
        self.thread = threading.Thread(target=self._run, args=(stdin, stdout), daemon=True)
        self.thread.start()

    @staticmethod
    def _run(stdin, stdout) -> None:
        with stdin, stdout:
            _serve(stdin, stdout)

    def ask(self, message: dict) -> dict:
        _send(self.send_end, message)
        return _receive(self.receive_end, deadline=time.monotonic() + 30)

    def close(self) -> None:
        self.send_end.close()
        self.thread.join(timeout=10)
        self.receive_end.close()


def request(sql: str, **overrides) -> dict:
    return {"sql": sql, "params": None, "max_rows": 100, "max_bytes": 10_000, "timeout": 10.0} | overrides


def test_the_worker_opens_what_it_is_sent_and_answers_until_its_stdin_closes(warehouse_file: Path) -> None:
    pipes = Pipes()
    try:
        assert pipes.ask(ReadOnlyWarehouse(warehouse_file)._opening()) == {"opened": True}
        answer = pipes.ask(request("select n, title from metadata where n < ? order by n", params=[2]))
        assert 0 <= answer.pop("elapsed") < 10
        assert answer == {
            "columns": ["n", "title"],
            "types": ["BIGINT", "VARCHAR"],
            "rows": [(0, "title 0"), (1, "title 1")],
            "truncated": False,
            "row_cap": 100,
            "byte_cap": 10_000,
            "cut_bytes": False,
            "note": "",
        }
        assert pipes.ask(request("select current_setting('memory_limit'), current_setting('threads')"))["rows"] == [
            ("953.6 MiB", 2)
        ]
        written = pipes.ask(request("create table stolen as select 1"))
        assert written["error"] == "failed" and "read-only mode" in written["message"]
    finally:
        pipes.close()
    assert not pipes.thread.is_alive()


def test_the_opening_carries_every_fence(warehouse_file: Path) -> None:
    opening = ReadOnlyWarehouse(warehouse_file, memory_limit="64MB", threads=3)._opening()
    assert opening == {
        "path": str(warehouse_file),
        "read_only": True,
        "settings": {
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "threads": 3,
            "memory_limit": "64MB",
            "lock_configuration": True,
        },
    }
    assert list(opening["settings"])[-1] == "lock_configuration"
    lowered = ReadOnlyWarehouse(warehouse_file, fences=Fences(memory_limit=False))._opening()
    assert "memory_limit" not in lowered["settings"] and lowered["settings"]["lock_configuration"] is True


def test_a_worker_that_cannot_open_the_file_says_so_and_ends(tmp_path: Path) -> None:
    pipes = Pipes()
    answer = pipes.ask(ReadOnlyWarehouse(tmp_path / "missing" / "warehouse.duckdb")._opening())
    pipes.thread.join(timeout=10)
    assert not pipes.thread.is_alive()
    assert answer["error"] == "failed"
    assert answer["message"].startswith(
        "warehouse warehouse.duckdb cannot be opened for reading (is an ingest writing it?): IO Error: "
    )
    pipes.close()


def test_a_worker_given_a_bad_setting_names_the_error(warehouse_file: Path) -> None:
    pipes = Pipes()
    answer = pipes.ask(ReadOnlyWarehouse(warehouse_file, memory_limit="plenty")._opening())
    pipes.thread.join(timeout=10)
    assert not pipes.thread.is_alive()
    assert answer == {
        "error": "failed",
        "message": "ParserException: Parser Error: Memory must have a number (e.g. 1GB)",
    }
    pipes.close()


# -- one answer -------------------------------------------------------------------------------------------------------


@pytest.fixture
def connection(warehouse_file: Path):
    with duckdb.connect(
        str(warehouse_file), read_only=True, config={"enable_external_access": False, "memory_limit": "16MB"}
    ) as connection:
        yield connection


def test_more_rows_than_the_cap_are_cut_and_said(connection) -> None:
    answer = _answer(connection, request("select n from metadata order by n", max_rows=3))
    assert answer["rows"] == [(0,), (1,), (2,)] and answer["truncated"] and not answer["cut_bytes"]
    assert answer["note"] == "more than 3 rows: the first 3 are shown"
    exact = _answer(connection, request("select n from metadata order by n", max_rows=5))
    assert len(exact["rows"]) == 5 and not exact["truncated"] and exact["note"] == ""


def test_a_result_over_the_byte_cap_is_cut_and_said(connection) -> None:
    answer = _answer(connection, request("select repeat('x', 600) from range(3)", max_rows=2, max_bytes=1000))
    assert answer["rows"] == [("x" * 600,), ("x" * 400 + "…",)]
    assert answer["truncated"] and answer["cut_bytes"] and answer["byte_cap"] == 1000
    assert answer["note"] == (
        "the result was cut at 1,000 bytes of data (select fewer rows or columns, or shorten long values with "
        "left(column, n))"
    )


def test_a_result_cut_by_bytes_says_only_that(connection) -> None:
    """Fetching stops at the first cap it meets, so a result is cut by rows or by bytes, never said to be both."""
    rows = _answer(connection, request("select 'x' from range(3) union all select repeat('y', 50)", max_rows=1))
    assert rows["note"] == "more than 1 rows: the first 1 are shown" and not rows["cut_bytes"]
    cut = _answer(connection, request("select repeat('y', 60) from range(3)", max_rows=1, max_bytes=50))
    assert cut["note"].startswith("the result was cut at 50 bytes") and cut["truncated"] and ";" not in cut["note"]


@pytest.mark.parametrize(
    ("sql", "kind", "message"),
    [
        (RECURSIVE, "timeout", "query interrupted after 0.3 s (the time limit)"),
        ("select content from read_text('/etc/hostname')", "refused", "refused by the sandbox: Permission Error: "),
        (
            "select length(string_agg(repeat('x', 1000), '')) from range(60000)",
            "memory",
            "the query needs more memory than the sandbox allows: Out of Memory Error: ",
        ),
        ("select * from nowhere", "failed", "Catalog Error: Table with name nowhere does not exist!"),
    ],
)
def test_each_failure_is_answered_as_its_kind(connection, sql: str, kind: str, message: str) -> None:
    answer = _answer(connection, request(sql, timeout=0.3))
    assert answer["error"] == kind and answer["message"].startswith(message) and "\n" not in answer["message"]


class Refusing:
    """A connection whose query raises ``error`` after ``delay`` seconds (interrupting it changes nothing)."""

    def __init__(self, error: BaseException, delay: float = 0.0) -> None:
        self.error, self.delay, self.interrupted = error, delay, False

    def execute(self, sql, params):
        time.sleep(self.delay)
        raise self.error

    def interrupt(self) -> None:
        self.interrupted = True


def test_a_python_memory_error_is_answered_as_memory() -> None:
    answer = _answer(Refusing(MemoryError()), request("select 1"))
    assert answer == {"error": "memory", "message": "the query's result needs more memory than the sandbox allows"}


def test_a_value_python_cannot_hold_is_answered_with_its_type() -> None:
    answer = _answer(Refusing(ValueError("year 10000 is out of range")), request("select 1"))
    assert answer == {"error": "failed", "message": "ValueError: year 10000 is out of range"}


def test_a_duckdb_error_after_the_time_limit_is_a_timeout() -> None:
    late = Refusing(duckdb.Error("Connection was interrupted\nLINE 1: ..."), delay=0.4)
    answer = _answer(late, request("select 1", timeout=0.1))
    assert late.interrupted and answer == {
        "error": "timeout",
        "message": "query interrupted after 0.1 s (the time limit)",
    }
    early = Refusing(duckdb.Error("Binder Error: no such column\nLINE 1: ..."))
    assert _answer(early, request("select 1", timeout=5)) == {
        "error": "failed",
        "message": "Binder Error: no such column",
    }
    assert not early.interrupted


def test_a_statement_without_columns_answers_no_rows() -> None:
    class Silent:
        description = None

    class Connection:
        def execute(self, sql, params):
            return Silent()

        def interrupt(self) -> None:
            pass

    answer = _answer(Connection(), request("pragma x"))
    assert answer["columns"] == [] and answer["rows"] == [] and not answer["truncated"] and answer["note"] == ""


# -- fetching and fitting ---------------------------------------------------------------------------------------------


class Cursor:
    def __init__(self, rows: list[tuple]) -> None:
        self.rows, self.asked = list(rows), []

    def fetchmany(self, size: int) -> list[tuple]:
        self.asked.append(size)
        batch, self.rows = self.rows[:size], self.rows[size:]
        return batch


def test_fetching_stops_at_the_deadline() -> None:
    with pytest.raises(TimeoutError):
        _fetch(Cursor([(1,)]), 10, 100, time.monotonic() - 1)


@pytest.mark.parametrize(
    ("available", "cap", "rows", "more"),
    [
        (0, 0, 0, False),
        (1, 0, 0, True),
        (3, 3, 3, False),
        (4, 3, 3, True),
        (200, 150, 150, True),
        (150, 150, 150, False),
    ],
)
def test_fetching_counts_rows_up_to_the_cap(available: int, cap: int, rows: int, more: bool) -> None:
    cursor = Cursor([(i,) for i in range(available)])
    fetched, truncated, cut = _fetch(cursor, cap, 10**6, time.monotonic() + 10)
    assert fetched == [(i,) for i in range(rows)] and truncated is more and cut is False
    assert all(size <= 64 for size in cursor.asked) and sum(cursor.asked) <= cap + 1 + 64


def test_fetching_asks_one_row_past_the_cap_in_batches_of_64() -> None:
    cursor = Cursor([(i,) for i in range(1000)])
    _fetch(cursor, 100, 10**6, time.monotonic() + 10)
    assert cursor.asked == [64, 37]


def test_a_cut_cell_ends_the_result_and_blanks_the_rest_of_its_row() -> None:
    rows, truncated, cut = _fetch(Cursor([("aaa", "bbbb", "c"), ("d", "e", "f")]), 10, 5, time.monotonic() + 10)
    assert rows == [("aaa", "bb…", None)] and not truncated and cut


def test_the_byte_budget_is_shared_by_all_rows() -> None:
    rows, _, cut = _fetch(Cursor([("aaaa",), ("bbbb",), ("cccc",)]), 10, 8, time.monotonic() + 10)
    assert rows == [("aaaa",), ("bbbb",), ("…",)] and cut


@pytest.mark.parametrize(
    ("value", "budget", "expected"),
    [
        ("abc", 3, ("abc", 3, False)),
        ("abcd", 3, ("abc…", 3, True)),
        ("abc", -2, ("…", 0, True)),
        (b"abc", 3, (b"abc", 3, False)),
        (b"abcd", 3, (b"abc", 3, True)),
        (bytearray(b"abcd"), 2, (b"ab", 2, True)),
        (memoryview(b"abcd"), 1, (b"a", 1, True)),
        (b"abc", -1, (b"", 0, True)),
        (12345, 16, (12345, 16, False)),
        (12345, 15, (None, 0, True)),
        (None, 16, (None, 16, False)),
        (["ab", "cd"], 4, (["ab", "cd"], 4, False)),
        (["ab", "cd", "ef"], 3, (["ab", "c…"], 3, True)),
        (("ab", 1), 18, (("ab", 1), 18, False)),
        (("ab", 1), 17, (("ab", None), 2, True)),
        ({"ab": "cd", "ef": "gh"}, 8, ({"ab": "cd", "ef": "gh"}, 8, False)),
        ({"ab": "cd", "ef": "gh"}, 7, ({"ab": "cd", "ef": "g…"}, 7, True)),
        ({"ab": "cd", "ef": "gh"}, 5, ({"ab": "cd"}, 5, True)),
        ({"ab": "cd"}, 3, ({"ab": "c…"}, 3, True)),
    ],
)
def test_a_value_is_cut_to_the_budget(value, budget: int, expected: tuple) -> None:
    fitted = _fit(value, budget)
    assert fitted == expected and type(fitted[0]) is type(expected[0])


def test_nested_values_share_one_budget() -> None:
    assert _fit([["ab", "cd"], ["ef"]], 5) == ([["ab", "cd"], ["e…"]], 5, True)
    assert _fit({"k": {"a": "bcd"}}, 4) == ({"k": {"a": "bc…"}}, 4, True)


# -- the pipe protocol and the parent's words -----------------------------------------------------------------------


def test_a_message_larger_than_one_read_arrives_whole() -> None:
    reader, writer = os.pipe()
    message = {"rows": ["x" * (3 << 20)]}
    with os.fdopen(reader, "rb") as receive_end, os.fdopen(writer, "wb") as send_end:
        sender = threading.Thread(target=_send, args=(send_end, message))
        sender.start()
        assert _receive(receive_end, deadline=time.monotonic() + 30) == message
        sender.join()


def test_a_silent_pipe_times_out_and_a_closed_one_ends() -> None:
    reader, writer = os.pipe()
    with os.fdopen(reader, "rb") as receive_end, os.fdopen(writer, "wb") as send_end:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            _receive(receive_end, deadline=started + 0.1)
        assert 0.1 <= time.monotonic() - started < 0.9
        send_end.write(b"\x00" * 7 + b"\x0a" + b"abc")  # a header for 10 bytes, then 3 of them
        send_end.flush()
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            _receive(receive_end, deadline=started + 0.1)
        assert time.monotonic() - started < 0.9
        send_end.write(b"\x00\x00\x00")
        send_end.close()
        with pytest.raises(EOFError):
            _receive(receive_end)


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (None, "it did not exit"),
        (-signal.SIGKILL, "killed by SIGKILL"),
        (-6, "killed by SIGABRT"),
        (1, "exit 1"),
        (0, "exit 0"),
    ],
)
def test_how_a_worker_ended_is_said_in_words(code, text: str) -> None:
    assert _exit_text(code) == text


def test_duckdb_messages_keep_their_first_lines_without_the_echoed_query() -> None:
    error = duckdb.Error('Binder Error: column "x" not found\n\nDid you mean "n"?\n\nLINE 1: select x from t\n   ^')
    assert _first_line(error) == 'Binder Error: column "x" not found Did you mean "n"?'
    assert _first_line(ValueError("  \n")) == "ValueError"
    assert _first_line(ValueError("LINE 1: only the echo")) == "ValueError"


def test_records_pair_columns_with_values() -> None:
    result = QueryResult(columns=["a", "b"], types=["INTEGER", "VARCHAR"], rows=[(1, "x"), (2, "y")])
    assert result.records() == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]


def test_the_defaults_are_the_documented_limits(warehouse_file: Path) -> None:
    warehouse = ReadOnlyWarehouse(str(warehouse_file))
    assert isinstance(warehouse.path, Path)
    assert (
        (warehouse.timeout, warehouse.max_rows, warehouse.max_bytes)
        == (TIMEOUT, MAX_ROWS, MAX_BYTES)
        == (
            30.0,
            1000,
            4_000_000,
        )
    )
    assert (warehouse.memory_limit, warehouse.address_space, warehouse.threads) == (MEMORY_LIMIT, ADDRESS_SPACE, 2)
    assert (MEMORY_LIMIT, ADDRESS_SPACE) == ("1GB", 3 * 2**30)


# -- the parent, with a real worker ---------------------------------------------------------------------------------


def _workers() -> set[psutil.Process]:
    found = set()
    for child in psutil.Process().children():
        try:
            if "paperlake.runtime.sql_sandbox" in child.cmdline():
                found.add(child)
        except psutil.NoSuchProcess:
            pass
    return found


def test_the_parent_raises_each_kind_of_failure_and_keeps_its_worker(warehouse_file: Path) -> None:
    before = _workers()
    with ReadOnlyWarehouse(warehouse_file, timeout=0.5, memory_limit="16MB", max_rows=2) as warehouse:
        result = warehouse.query("select n from metadata where n >= ? order by n", [1])
        assert result.rows == [(1,), (2,)] and result.truncated and result.row_cap == 2
        assert warehouse.query("select n from metadata order by n", max_rows=4).rows == [(0,), (1,), (2,), (3,)]
        (worker,) = _workers() - before
        with pytest.raises(SQLRefused, match="^refused by the sandbox: Permission Error"):
            warehouse.query("select content from read_text('/etc/hostname')")
        with pytest.raises(SQLTimeout, match=r"^query interrupted after 0.5 s \(the time limit\)$"):
            warehouse.query(RECURSIVE)
        with pytest.raises(SQLTooLarge, match="^the query needs more memory than the sandbox allows"):
            warehouse.query("select length(string_agg(repeat('x', 1000), '')) from range(60000)")
        with pytest.raises(SQLFailed, match="^Catalog Error: Table with name nowhere does not exist"):
            warehouse.query("select * from nowhere")
        with pytest.raises(SQLRefused, match="^DROP statements are not allowed"):
            warehouse.query("drop table metadata")
        assert _workers() - before == {worker}, "an answered failure keeps the worker"
        assert warehouse._stop() == 0, "closing lets the worker end on its own"
    assert not worker.is_running()


def test_a_missing_warehouse_is_named(tmp_path: Path) -> None:
    with ReadOnlyWarehouse(tmp_path / "warehouse.duckdb") as warehouse:
        with pytest.raises(
            FileNotFoundError, match="^warehouse warehouse.duckdb does not exist; run the ingest first$"
        ):
            warehouse.query("select 1")


def test_a_worker_that_does_not_start_is_reported(
    warehouse_file: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("PYTHONHOME", str(warehouse_file.parent / "no-python-here"))
    with ReadOnlyWarehouse(warehouse_file) as warehouse:
        with pytest.raises(
            RuntimeError, match=r"^the SQL sandbox's worker did not start \((EOFError|BrokenPipeError)\)$"
        ):
            warehouse.query("select 1")
    assert not _workers()
    assert capfd.readouterr().err == "", "the worker's own complaints stay out of the caller's output"


def test_a_worker_that_does_not_finish_starting_is_killed(
    warehouse_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "sitecustomize.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "slow"))
    started = time.monotonic()
    with ReadOnlyWarehouse(warehouse_file, start_timeout=1) as warehouse:
        with pytest.raises(RuntimeError, match=r"^the SQL sandbox's worker did not start \(TimeoutError\)$"):
            warehouse.query("select 1")
    assert time.monotonic() - started < 15 and not _workers()


def test_a_forgotten_sandbox_does_not_leave_its_worker_behind(warehouse_file: Path) -> None:
    before = _workers()
    warehouse = ReadOnlyWarehouse(warehouse_file)
    warehouse.query("select 1")
    (worker,) = _workers() - before
    del warehouse
    gc.collect()
    worker.wait(timeout=10)
    assert not worker.is_running()


def test_closing_kills_a_worker_that_does_not_end_on_its_own(warehouse_file: Path) -> None:
    before = _workers()
    warehouse = ReadOnlyWarehouse(warehouse_file)
    warehouse.query("select 1")
    (worker,) = _workers() - before
    worker.send_signal(signal.SIGSTOP)  # it cannot read that its stdin closed
    started = time.monotonic()
    assert warehouse._stop() == -signal.SIGKILL
    assert 4 < time.monotonic() - started < 15


def test_a_sandbox_that_never_started_or_was_never_built_cleans_up_quietly(
    warehouse_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", unraisable.append)
    unused = ReadOnlyWarehouse(warehouse_file)
    del unused
    refused = False
    try:
        ReadOnlyWarehouse()  # no path: __init__ fails before any field is set, and the half-built object is dropped
    except TypeError:  # (not pytest.raises, which would keep the object alive past this test in its traceback)
        refused = True
    gc.collect()
    assert refused and unraisable == []


def test_stopping_twice_and_stopping_an_unused_sandbox_are_harmless(warehouse_file: Path) -> None:
    warehouse = ReadOnlyWarehouse(warehouse_file)
    assert warehouse._stop() is None
    warehouse.query("select 1")
    assert warehouse._stop(kill=True) == -signal.SIGKILL
    assert warehouse._stop() is None
    warehouse.close()
