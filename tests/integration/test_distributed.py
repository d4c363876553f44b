"""Beyond one machine: the same asset graph with its steps on two Celery workers (separate processes, a Redis broker,
a Milvus server) builds exactly the stores a single-process ingest builds. `paperlake ingest` launches its runs through
the Dagster webserver, whose run launcher starts the per-paper runs side by side (PAPERLAKE_CONCURRENT_RUNS=2).

Debian's ``redis-server`` (installed by ``./run test`` when missing) is started on 127.0.0.1 by the test, the workers
are ``celery -A dagster_celery.app worker`` processes, and ``milvus-lite server`` stands in for a Milvus server;
everything is stopped by pid. Skipped, saying why, only where redis-server cannot be had."""

from __future__ import annotations

import os
import shutil

import duckdb
import pytest
from dagster import DagsterEventType

from support.fixtures import make_inbox

pytestmark = pytest.mark.usefixtures("corpus")

# four short papers of two volumes (5 to 10 pages): enough steps for two workers, short enough for the suite
PAPERS = [
    "emnlp2024-012-numerologic",
    "emnlp2024-126-embedding-inversion-attack",
    "emnlp2024-177-cute-token-understanding",
    "naacl2024-116-quantum-lindblad-lm",
]
TEXT_COLLECTIONS = ("text_bm25_en", "text_sentence_transformers_all_minilm_l6_v2", "text_hybrid")


@pytest.fixture(scope="module")
def redis(tmp_path_factory) -> str:
    from orchestration.local_cluster import BrokerUnavailable, redis_server

    if shutil.which("redis-server") is None:
        pytest.skip(
            "redis-server is not installed and could not be installed here (apt-get install redis-server): "
            "the Celery executor needs a broker"
        )
    try:
        with redis_server(tmp_path_factory.mktemp("redis")) as url:
            yield url
    except BrokerUnavailable as error:
        pytest.fail(str(error))


def _warehouse_rows(settings) -> dict[str, list[tuple]]:
    """Every mart's rows, in one order, without the columns that say when (timestamps differ between runs)."""
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        tables = [
            name
            for (name,) in con.execute(
                "select table_name from information_schema.tables where table_schema = current_schema() "
                "and table_type = 'BASE TABLE'"
            ).fetchall()
        ]
        rows = {}
        for table in tables:
            columns = [
                name
                for name, kind in con.execute(
                    "select column_name, data_type from information_schema.columns where table_name = ? and "
                    "table_schema = current_schema()",
                    [table],
                ).fetchall()
                if "TIME" not in kind and name not in ("pdf_path", "created_at")
            ]
            listed = ", ".join(f'"{c}"' for c in columns)
            rows[table] = con.execute(f'select {listed} from "{table}" order by all').fetchall()
    return rows


def _entities(settings) -> dict[str, set[tuple[str, str]]]:
    from paperlake.vectors.store import VectorStore

    with VectorStore(settings.milvus_uri, cache_path=settings.embeddings) as store:
        found = {}
        for name in TEXT_COLLECTIONS:
            store.load(name)
            found[name] = {
                (row["id"], row["text_hash"])
                for row in store.client.query(name, filter="", output_fields=["id", "text_hash"], limit=16384)
            }
    return found


@pytest.mark.cluster
def test_two_celery_workers_build_the_stores_one_process_builds(tmp_path, redis, dbt_manifest, monkeypatch):
    from orchestration.instance import START_AT_ONCE_CONFIG
    from orchestration.local_cluster import celery_workers, dagster_webserver
    from orchestration.run import dagster_instance, ingest
    from paperlake.config import Settings
    from paperlake.vectors.server import milvus_lite_server

    inbox = make_inbox(tmp_path / "shared", PAPERS)
    single = Settings.from_env(home=tmp_path / "single", backend="pymupdf", evaluate=False)
    summary = ingest([inbox], single)
    assert summary.ok and len(summary.published) == 4, [f.line() for f in summary.failures]

    home = tmp_path / "distributed"
    home.mkdir()
    with milvus_lite_server(home / "milvus.db") as milvus:
        # what every worker must see: the same lake and warehouse home (a shared file system in a deployment), the
        # same Dagster instance storage, the Milvus server and the broker
        shared_env = {
            "PAPERLAKE_HOME": str(home),
            "DAGSTER_HOME": str(home / "dagster"),
            "MILVUS_URI": milvus.uri,
            "PAPERLAKE_EXECUTOR": "celery",
            "PAPERLAKE_CELERY_BROKER": redis,
            "PAPERLAKE_EVALUATE": "0",
            "PAPERLAKE_CONCURRENT_RUNS": "2",
            "PAPERLAKE_EMBEDDING_CACHE": os.environ.get("PAPERLAKE_EMBEDDING_CACHE", ""),
        }
        # the runs go through the webserver, whose run launcher starts them side by side (no daemon here: the
        # instance's run coordinator starts them at once; a deployment's daemon queues them within its limits)
        (home / "dagster").mkdir()
        (home / "dagster" / "dagster.yaml").write_text(START_AT_ONCE_CONFIG)
        with (
            celery_workers(redis, shared_env, 2, tmp_path / "workers") as workers,
            dagster_webserver(shared_env, tmp_path / "webserver.log", daemon=False, lifetime=1500) as url,
        ):
            for name, value in shared_env.items():
                monkeypatch.setenv(name, value)
            monkeypatch.setenv("PAPERLAKE_DAGSTER_URL", url)
            distributed = Settings.from_env(home=home, backend="pymupdf")
            assert distributed.executor == "celery"
            summary = ingest([inbox], distributed)
            assert summary.ok and len(summary.published) == 4, [f.line() for f in summary.failures]
            assert summary.vectors_synced and summary.warehouse_built

            # the steps ran in the two worker processes, never in this one
            instance = dagster_instance(distributed)
            runs = instance.get_runs()
            step_pids = {
                entry.dagster_event.pid
                for run in runs
                for entry in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_START)
            }
            assert step_pids == {worker.pid for worker in workers}, (step_pids, [w.pid for w in workers])
            assert all(run.run_config.get("execution", {}).get("config", {}).get("broker") == redis for run in runs)
            assert all(run.remote_job_origin is not None for run in runs)  # the UI's own runs, re-executable there
            # the single-writer pools are the instance's whatever the executor (dagster-celery's loop claims a
            # step's slot through the instance before it queues the task); a Milvus server needs none
            storage = instance.event_log_storage
            assert {pool: storage.get_concurrency_info(pool).slot_count for pool in ("warehouse", "formulas")} == {
                "warehouse": 1,
                "formulas": 1,
            }
            assert "milvus" not in storage.get_concurrency_keys()
            # per-paper runs were in flight at once (three papers of one volume: two runs, one for the other volume)
            spans = sorted(
                (r.start_time, r.end_time)
                for r in instance.get_run_records()
                if r.dagster_run.job_name == "ingest_paper"
            )
            assert len(spans) == 3 and any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:])), spans

            # and they built the same stores: every mart (formula tables included), every entity of every collection
            assert _warehouse_rows(distributed) == _warehouse_rows(single)
            assert _entities(distributed) == _entities(single)


def test_the_multiprocess_executor_runs_each_step_in_a_child_process(tmp_path, dbt_manifest, monkeypatch):
    """The second executor outside the process: Dagster's multiprocess executor, one child process per step, the
    same stores (one short paper, a Milvus Lite file: its pool keeps one writer at a time)."""
    from orchestration.run import dagster_instance, ingest
    from paperlake.config import Settings

    inbox = make_inbox(tmp_path / "shared", PAPERS[:1])
    monkeypatch.setenv("PAPERLAKE_EXECUTOR", "multiprocess")
    settings = Settings.from_env(home=tmp_path / "home", backend="pymupdf", evaluate=False)
    assert settings.executor == "multiprocess"
    summary = ingest([inbox], settings)
    assert summary.ok and summary.published == [f"emnlp2024/{PAPERS[0]}"], [f.line() for f in summary.failures]
    assert summary.warehouse_built and summary.vectors_synced

    instance = dagster_instance(settings)
    step_pids = {
        entry.dagster_event.pid
        for run in instance.get_runs()
        for entry in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_START)
    }
    assert step_pids and os.getpid() not in step_pids
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        assert con.execute("select count(*) from metadata").fetchone() == (1,)
        assert con.execute("select count(*) from chunks").fetchone()[0] > 0
