"""The pooled SQLite event log (orchestration/event_log.py) writes what Dagster's stock class reads and the other
way round, keeps a bounded number of databases open, survives a fork and a wipe, and is used only where the home's
dagster.yaml configures no storage of its own."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from orchestration.event_log import MAX_OPEN_DATABASES, PooledSqliteEventLogStorage
from orchestration.instance import load_instance

CHECKS = 5


@dg.asset(check_specs=[dg.AssetCheckSpec(f"check_{i}", asset="numbers") for i in range(CHECKS)])
def numbers():
    return dg.MaterializeResult(
        check_results=[dg.AssetCheckResult(check_name=f"check_{i}", passed=i % 2 == 0) for i in range(CHECKS)]
    )


@dg.asset(deps=[numbers])
def total() -> None:
    return None


def _home(tmp_path: Path, yaml_text: str = "telemetry:\n  enabled: false\n") -> Path:
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml_text)
    return home


def _materializations(instance) -> int:
    return len(instance.fetch_materializations(dg.AssetKey("numbers"), limit=100).records)


def _check_evaluations(instance) -> int:
    key = dg.AssetCheckKey(dg.AssetKey("numbers"), "check_1")
    return len(instance.event_log_storage.get_asset_check_execution_history(key, limit=100))


def test_the_default_home_gets_the_pooled_event_log_and_the_stock_class_reads_it(tmp_path):
    home = _home(tmp_path)
    pooled = load_instance(home)
    assert type(pooled.event_log_storage) is PooledSqliteEventLogStorage
    for _ in range(2):
        assert dg.materialize([numbers, total], instance=pooled).success
    stock = dg.DagsterInstance.from_config(str(home))
    assert type(stock.event_log_storage) is SqliteEventLogStorage
    assert dg.materialize([numbers, total], instance=stock).success
    for instance in (pooled, stock):  # each sees the other's runs, materializations and check evaluations
        assert len(instance.get_runs()) == 3
        assert _materializations(instance) == 3
        assert _check_evaluations(instance) == 3
        logs = instance.all_logs(instance.get_runs()[-1].run_id)
        assert any(e.dagster_event and e.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION" for e in logs)
    assert sorted(p.name for p in (home / "history" / "runs").glob("*.db"))  # the stock layout
    with pooled.event_log_storage.index_connection() as conn:  # WAL, synced at checkpoints (NORMAL = 1)
        assert conn.exec_driver_sql("pragma journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("pragma synchronous").scalar() == 1


def test_a_home_that_configures_its_storage_keeps_it(tmp_path):
    home = _home(
        tmp_path,
        f"telemetry:\n  enabled: false\nevent_log_storage:\n  module: dagster._core.storage.event_log\n"
        f"  class: SqliteEventLogStorage\n  config:\n    base_dir: {tmp_path / 'elsewhere'}\n",
    )
    instance = load_instance(home)
    assert type(instance.event_log_storage) is SqliteEventLogStorage
    assert dg.materialize([numbers], instance=instance).success
    assert list((tmp_path / "elsewhere").glob("*.db"))


def test_open_databases_are_bounded(tmp_path):
    instance = load_instance(_home(tmp_path))
    for _ in range(MAX_OPEN_DATABASES + 3):  # one database per run, plus the index
        assert dg.materialize([total], instance=instance).success
    storage = instance.event_log_storage
    assert len(storage._engines) == MAX_OPEN_DATABASES
    assert len(instance.get_runs()) == MAX_OPEN_DATABASES + 3
    assert all(len(instance.all_logs(run.run_id)) > 5 for run in instance.get_runs())


def _materialize_in_child(instance, queue) -> None:
    try:
        queue.put(dg.materialize([numbers, total], instance=instance).success)
    except Exception as error:  # reported to the parent, which fails the test with it
        queue.put(repr(error))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_forked_child_opens_its_own_connections(tmp_path):
    instance = load_instance(_home(tmp_path))
    assert dg.materialize([numbers, total], instance=instance).success
    storage = instance.event_log_storage
    engines = dict(storage._engines)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_materialize_in_child, args=(instance, queue))
    child.start()
    child.join(60)
    assert queue.get(timeout=5) is True
    assert storage._engines == engines and storage._engines_pid == os.getpid()  # the parent's are untouched
    assert dg.materialize([numbers, total], instance=instance).success
    assert len(instance.get_runs()) == 3 and _materializations(instance) == 3


def test_wiping_closes_the_run_databases_and_writing_goes_on(tmp_path):
    home = _home(tmp_path)
    instance = load_instance(home)
    assert dg.materialize([numbers, total], instance=instance).success
    run_id = instance.get_runs()[0].run_id
    instance.event_log_storage.wipe()
    assert not (home / "history" / "runs" / f"{run_id}.db").exists()
    assert _materializations(instance) == 0
    assert dg.materialize([numbers, total], instance=instance).success
    assert _materializations(instance) == 1 and _check_evaluations(instance) == 1
