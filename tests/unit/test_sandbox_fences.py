"""Each fence of the SQL sandbox holds on its own: with every other fence lowered (the statement whitelist too), the
one left up still stops its attack, and with all of them lowered the same attack gets through, so each test shows
what its fence is for. Then the parent's own way out: a worker that never answers its interrupt is killed and the
user is told why."""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from pathlib import Path

import duckdb
import psutil
import pytest

from paperlake.runtime.sql_sandbox import (
    Fences,
    ReadOnlyWarehouse,
    SQLFailed,
    SQLRefused,
    SQLTimeout,
    SQLTooLarge,
)

FENCE_NAMES = [fence.name for fence in dataclasses.fields(Fences)]
NO_FENCES = Fences(**{name: False for name in FENCE_NAMES})


def only(fence: str) -> Fences:
    return Fences(**{name: name == fence for name in FENCE_NAMES})


@pytest.fixture
def warehouse_file(tmp_path: Path) -> Path:
    """A warehouse of one table; a fresh one per test, as the attacks with fences down may write to it."""
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute(
            "create table metadata as select * from (values ('p1', 'One'), ('p2', 'Two')) t(pdf_id, title)"
        )
    return path


def attack(path: Path, fences: Fences, sql: str, **limits):
    """The result of ``sql`` in a sandbox with ``fences``, or the exception it raised."""
    with ReadOnlyWarehouse(path, timeout=20, fences=fences, **limits) as warehouse:
        try:
            return warehouse.query(sql)
        except (SQLRefused, SQLFailed, SQLTimeout) as error:
            return error


def test_every_fence_is_up_by_default() -> None:
    assert all(dataclasses.asdict(Fences()).values()) and not any(dataclasses.asdict(NO_FENCES).values())
    assert ReadOnlyWarehouse(Path("warehouse.duckdb")).fences == Fences()


def test_the_statement_whitelist_alone_stops_writing_a_file(warehouse_file: Path, tmp_path: Path) -> None:
    written = tmp_path / "stolen.csv"
    sql = f"copy (select * from metadata) to '{written}'"
    stopped = attack(warehouse_file, only("statement_whitelist"), sql)
    assert isinstance(stopped, SQLRefused) and "COPY statements are not allowed" in str(stopped)
    assert not written.exists()
    attack(warehouse_file, NO_FENCES, sql)
    assert written.read_text().splitlines() == ["pdf_id,title", "p1,One", "p2,Two"]


def test_read_only_alone_stops_changing_the_warehouse(warehouse_file: Path) -> None:
    stopped = attack(warehouse_file, only("read_only"), "drop table metadata")
    assert isinstance(stopped, SQLFailed) and "read-only" in str(stopped)
    with duckdb.connect(str(warehouse_file), read_only=True) as connection:
        assert connection.execute("select count(*) from metadata").fetchall() == [(2,)]
    attack(warehouse_file, NO_FENCES, "drop table metadata")
    with duckdb.connect(str(warehouse_file), read_only=True) as connection:
        assert connection.execute("select count(*) from duckdb_tables()").fetchall() == [(0,)]


def test_no_external_access_alone_stops_reading_a_file(warehouse_file: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    sql = f"select content from read_text('{secret}')"
    stopped = attack(warehouse_file, only("no_external_access"), sql)
    assert isinstance(stopped, SQLRefused) and "refused by the sandbox" in str(stopped)
    assert "secret" not in str(stopped).replace(str(secret), "")
    assert attack(warehouse_file, NO_FENCES, sql).rows == [("the host's secret",)]


def test_no_external_access_alone_stops_writing_a_file(warehouse_file: Path, tmp_path: Path) -> None:
    written = tmp_path / "stolen.csv"
    sql = f"copy (select * from metadata) to '{written}'"
    assert isinstance(attack(warehouse_file, only("no_external_access"), sql), SQLRefused)
    assert not written.exists()
    attack(warehouse_file, NO_FENCES, sql)
    assert written.exists()


def test_no_extension_autoload_alone_stops_installing_an_extension(
    warehouse_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query naming an extension's function installs and loads that extension when autoloading is on; the
    repository is a local folder the attacker names, so nothing here reaches the network."""
    (tmp_path / "home").mkdir()
    (tmp_path / "repository").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # DuckDB's extension folder: $HOME/.duckdb/extensions
    installed = tmp_path / "home" / ".duckdb" / "extensions"
    sql = f"set autoinstall_extension_repository = '{tmp_path / 'repository'}'; select * from read_xlsx('book.xlsx')"
    stopped = attack(warehouse_file, only("no_extension_autoload"), sql)
    assert isinstance(stopped, SQLFailed) and "exists in the excel extension" in str(stopped)
    assert not installed.exists()
    tried = attack(warehouse_file, NO_FENCES, sql)
    assert "automatically install" in str(tried) and installed.is_dir()


def test_locked_configuration_alone_stops_changing_a_setting(warehouse_file: Path) -> None:
    setting = "select current_setting('threads')"
    with ReadOnlyWarehouse(warehouse_file, fences=only("locked_configuration")) as warehouse:
        with pytest.raises(SQLFailed, match="configuration has been locked"):
            warehouse.query("set threads = 7")
        assert warehouse.query(setting).rows == [(2,)]
    with ReadOnlyWarehouse(warehouse_file, fences=NO_FENCES) as warehouse:
        warehouse.query("set threads = 7")
        assert warehouse.query(setting).rows == [(7,)]


def test_the_memory_limit_alone_stops_exhausting_memory(warehouse_file: Path) -> None:
    sql = "select length(string_agg(repeat('x', 1000), '')) from range(60000)"  # a 60 MB value in DuckDB's buffers
    stopped = attack(warehouse_file, only("memory_limit"), sql, memory_limit="32MB")
    assert isinstance(stopped, SQLTooLarge) and "needs more memory than the sandbox allows" in str(stopped)
    assert attack(warehouse_file, NO_FENCES, sql, memory_limit="32MB").rows == [(60_000_000,)]


def _workers() -> set[psutil.Process]:
    """The sandbox workers this process started, as the operating system lists them."""
    found = set()
    for child in psutil.Process().children():
        try:
            if "paperlake.runtime.sql_sandbox" in child.cmdline():
                found.add(child)
        except psutil.NoSuchProcess:
            pass
    return found


def _idle_worker_size(path: Path) -> int:
    before = _workers()
    with ReadOnlyWarehouse(path, fences=NO_FENCES) as warehouse:
        warehouse.query("select 1")
        (worker,) = _workers() - before
        return worker.memory_info().vms


def test_the_address_space_limit_alone_stops_a_value_duckdb_does_not_account(warehouse_file: Path) -> None:
    """``repeat`` builds its string outside DuckDB's buffer manager: only the worker's address space bounds it. The
    limit is the idle worker's size and 128 MB more; the value needs 300 MB."""
    sql = "select length(repeat('x', 300000000))"
    limit = _idle_worker_size(warehouse_file) + 128 * 2**20
    stopped = attack(warehouse_file, only("address_space_limit"), sql, address_space=limit)
    assert isinstance(stopped, SQLTooLarge) and "memory" in str(stopped)
    assert attack(warehouse_file, NO_FENCES, sql, address_space=limit).rows == [(300_000_000,)]


def test_the_parent_kills_a_worker_that_does_not_answer_its_interrupt(warehouse_file: Path) -> None:
    """A stopped worker cannot interrupt its query: the parent waits the grace period, kills it, says so, and the
    next query gets a new worker."""
    before = _workers()
    with ReadOnlyWarehouse(warehouse_file, timeout=0.5) as warehouse:
        warehouse.query("select 1")
        (stuck,) = _workers() - before
        stuck.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(SQLTimeout) as timeout:
            warehouse.query("select count(*) from metadata")
        waited = time.monotonic() - started
        assert str(timeout.value) == (
            "query stopped after 0.5 s (the time limit); its worker did not answer the interrupt and was restarted"
        )
        assert 3.5 <= waited < 10
        assert not stuck.is_running() or stuck.status() == psutil.STATUS_ZOMBIE
        assert warehouse.query("select count(*) from metadata").rows == [(2,)]
        assert stuck not in _workers()


def test_the_parent_reports_a_worker_that_died_during_a_query(warehouse_file: Path) -> None:
    before = _workers()
    with ReadOnlyWarehouse(warehouse_file, timeout=20, address_space=3 * 2**30) as warehouse:
        warehouse.query("select 1")
        (worker,) = _workers() - before
        worker.send_signal(signal.SIGSTOP)  # it holds the query until it is killed
        threading.Timer(0.3, worker.kill).start()
        with pytest.raises(SQLTooLarge) as died:
            warehouse.query("select count(*) from metadata")
        assert str(died.value) == (
            "the query's worker died (killed by SIGKILL); most likely the query needed more than the sandbox's "
            "3 GB of memory"
        )
        assert warehouse.query("select count(*) from metadata").rows == [(2,)]


def test_a_worker_that_cannot_open_the_warehouse_says_why(warehouse_file: Path) -> None:
    with duckdb.connect(str(warehouse_file)):  # an ingest holding the file for writing
        with ReadOnlyWarehouse(warehouse_file) as warehouse:
            with pytest.raises(RuntimeError, match="cannot be opened for reading \\(is an ingest writing it\\?\\)"):
                warehouse.query("select 1")
    with ReadOnlyWarehouse(warehouse_file, memory_limit="plenty") as warehouse:
        with pytest.raises(RuntimeError, match="^ParserException: .*Memory must have a number"):
            warehouse.query("select 1")
