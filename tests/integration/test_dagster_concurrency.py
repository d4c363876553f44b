"""Two Dagster partition materialisations of the vector assets at once, as the sensor or a backfill launches them:
separate `dagster asset materialize` processes, each running its collection steps in separate processes (Dagster's
multiprocess executor). With a Milvus Lite file the steps hold the file one at a time: the store's file lock makes
that so (the `milvus` pool only spares them the wait: Dagster's SQLite storage checks for a free slot and then claims
it in two statements, so two runs claiming at the same instant can both get the single slot — a fresh-clone run saw
two steps overlap by 0.9 s); with a `milvus-lite server` on 127.0.0.1 they write concurrently. Either way: no lock
error, and exactly each paper's cells end up stored."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from paperlake.config import Settings
from support.fixtures import CORPUS_MINERU, ingest_sample

PAPERS = ["emnlp2024-126-embedding-inversion-attack", "naacl2024-116-quantum-lindblad-lm"]
REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).with_name("dagster"))


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory, dbt_manifest: Path, corpus: Path) -> dict:
    return ingest_sample(tmp_path_factory.mktemp("concurrency"), PAPERS)


def expected_counts(settings: Settings, paper_id: str) -> dict[str, int]:
    from assets.vectors import vector_assets
    from paperlake.vectors.config import load_config
    from paperlake.vectors.entities import collect_cells
    from paperlake.vectors.entities import default_encodable as paper_encodable

    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        cells = collect_cells(con, paper_encodable(), [paper_id])
    config = load_config()
    names = [definition.key.path[-1] for definition in vector_assets]
    # each collection's cells: every text cell in BM25's, all but the views a dense one is configured without
    return {name: sum(config.collection(name).holds(cell) for cell in cells) for name in names}


def forget_vectors(settings: Settings) -> None:
    """Back to a warehouse with no vectors (the embedding cache stays: this is about writers, not encoders)."""
    shutil.rmtree(settings.home / "vectors", ignore_errors=True)
    db = Path(settings.milvus_uri)
    if db.is_dir():
        shutil.rmtree(db)
    db.unlink(missing_ok=True)


def materialize_concurrently(settings: Settings, dagster_home: Path, keys: list[str]) -> list[tuple[int, str]]:
    from assets.vectors import vector_assets

    selection = ",".join("/".join(d.key.path) for d in vector_assets)
    env = {
        **os.environ,
        "PAPERLAKE_HOME": str(settings.home),
        "DAGSTER_HOME": str(dagster_home),
        "MILVUS_URI": settings.milvus_uri,
        "PAPERLAKE_MINERU_DIR": str(CORPUS_MINERU),
    }
    processes = [
        subprocess.Popen(
            [
                DAGSTER,
                "asset",
                "materialize",
                "-m",
                "orchestration.definitions",
                "--select",
                selection,
                "--partition",
                key,
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for key in keys
    ]
    results = []
    for process in processes:
        try:
            output, _ = process.communicate(timeout=900)
        finally:
            if process.poll() is None:
                process.kill()
        results.append((process.returncode, output))
    return results


def store_holds(instance, run_ids: list[str]) -> list[tuple[float, float, str]]:
    """(from, until, step) of each step's hold on the Milvus Lite file, as the step reports it in its
    materialization's metadata (wall-clock instants: the steps run in different processes)."""
    import dagster as dg

    holds = []
    for run_id in run_ids:
        for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            metadata = record.dagster_event.event_specific_data.materialization.metadata
            holds.append(
                (
                    metadata["store_held_from"].value,
                    metadata["store_held_until"].value,
                    f"{run_id[:8]}:{record.step_key}",
                )
            )
    return sorted(holds)


def check_runs(instance, results: list[tuple[int, str]], settings: Settings, ids: dict[str, str]) -> list[str]:
    import dagster as dg

    from paperlake.vectors.store import VectorStore

    for returncode, output in results:
        assert returncode == 0, output[-4000:]
        for symptom in ("StoreLockedError", "Open local milvus failed", "is locked"):
            assert symptom not in output, output[-4000:]
    runs = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]))
    vector_runs = [
        r.run_id
        for r in runs  # the two `dagster asset materialize` runs, not the CLI ingest's
        if r.tags.get("dagster/partition") in ids and "paperlake/trigger" not in r.tags
    ]
    assert len(vector_runs) == 2
    with VectorStore(settings.milvus_uri, cache_path=settings.embeddings) as store:
        for paper_id in ids.values():
            for collection, count in expected_counts(settings, paper_id).items():
                assert count > 0 and store.count(collection, f"pdf_id == '{paper_id}'") == count, collection
    return vector_runs


def test_two_partition_runs_share_a_milvus_lite_file_through_the_pool(ingested):
    from orchestration.instance import dagster_instance

    settings: Settings = ingested["settings"]
    forget_vectors(settings)
    instance = dagster_instance(settings)
    assert instance.event_log_storage.get_concurrency_info("milvus").slot_count == 1
    results = materialize_concurrently(settings, settings.dagster_home, sorted(ingested["ids"]))
    runs = check_runs(instance, results, settings, ingested["ids"])
    holds = store_holds(instance, runs)
    assert len(holds) == 2 * len(expected_counts(settings, next(iter(ingested["ids"].values()))))
    for (_, until, first), (since, _, second) in zip(holds, holds[1:]):
        assert until <= since, f"{first} and {second} held the Milvus Lite file at the same time"


def test_two_partition_runs_write_concurrently_through_a_milvus_lite_server(ingested, tmp_path):
    from assets.partitions import papers
    from orchestration.instance import dagster_instance
    from paperlake.vectors.server import milvus_lite_server

    file_settings: Settings = ingested["settings"]
    forget_vectors(file_settings)
    with milvus_lite_server(tmp_path / "served.db") as server:
        settings = Settings.from_env(
            home=file_settings.home, backend="auto", mineru_dir=CORPUS_MINERU, milvus_uri=server.uri
        )
        dagster_home = tmp_path / "dagster"
        instance = dagster_instance(settings, dagster_home)
        assert "milvus" not in instance.event_log_storage.get_concurrency_keys()  # the server serialises writes
        instance.add_dynamic_partitions(papers.name, sorted(ingested["ids"]))
        results = materialize_concurrently(settings, dagster_home, sorted(ingested["ids"]))
        check_runs(instance, results, settings, ingested["ids"])
    assert server.process.returncode is not None  # stopped by pid when the block ended


def test_a_dead_cli_run_does_not_hold_its_pool_slot(tmp_path):
    import dagster as dg

    from orchestration.instance import dagster_instance, release_stale_slots

    settings = Settings.from_env(home=tmp_path / "home", milvus_uri=str(tmp_path / "home" / "milvus.db"))
    instance = dagster_instance(settings)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    run = instance.create_run_for_job(dg.GraphDefinition("g").to_job(), tags={"paperlake/pid": dead.stdout.strip()})
    storage = instance.event_log_storage
    claim = storage.claim_concurrency_slot("milvus", run.run_id, "vectors_text_bm25_en")
    assert claim.is_claimed and storage.get_concurrency_info("milvus").active_slot_count == 1
    live = instance.create_run_for_job(dg.GraphDefinition("h").to_job(), tags={"paperlake/pid": str(os.getpid())})
    storage.claim_concurrency_slot("warehouse", live.run_id, "warehouse_models")

    assert release_stale_slots(instance) == [run.run_id]
    assert storage.get_concurrency_info("milvus").active_slot_count == 0
    assert storage.get_concurrency_info("warehouse").active_slot_count == 1  # a live process keeps its slot
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE


def test_milvus_uri_may_name_a_milvus_lite_file(tmp_path):
    """pymilvus rejects a file path in MILVUS_URI at import; paperlake documents exactly that setting."""
    env = {**os.environ, "MILVUS_URI": str(tmp_path / "milvus.db")}
    code = (
        "import os; from paperlake.config import Settings; from paperlake.vectors.store import VectorStore; "
        "s = Settings.from_env(home=os.environ['MILVUS_URI'] + '.home'); "
        "assert s.milvus_uri == os.environ['MILVUS_URI'], s.milvus_uri; "
        "store = VectorStore(s.milvus_uri, use_cache=False); store.close(); print('opened')"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "opened" in done.stdout, done.stderr[-3000:]
