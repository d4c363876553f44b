"""Crash consistency, part 2: kills during the vector stage after a replacement, during a removal and during the
warehouse swap; a collection that fails every paper; and (``-m crash_matrix``) a kill at every fail point. See
``support/crash_harness.py``."""

from __future__ import annotations

import csv
import json
import os
import shutil

import duckdb
import pytest

from support.crash_harness import (
    FIRST,
    OTHER,
    SECOND,
    add_paper,
    assert_same_stores,
    build_references,
    failure_lines,
    fresh_home,
    killed_at,
    must_ingest,
    null_in_lake,
    run_ingest,
)
from support.fixtures import corpus_pdf, make_inbox, manifest_rows

pytestmark = [pytest.mark.crash, pytest.mark.usefixtures("corpus")]


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory, dbt_manifest) -> dict:
    return build_references(tmp_path_factory)


def test_kill_during_vectors_after_a_replacement_leaves_no_old_entities(tmp_path, references):
    """Finding 4: a file replaced by another paper under the same name, killed while its vectors sync: the old
    paper's entities go and the new paper's arrive, in every collection."""
    from paperlake.vectors.config import load_config
    from paperlake.vectors.entities import collect_cells, default_encodable
    from paperlake.vectors.store import VectorStore

    home = fresh_home(tmp_path, references["home_both"])
    inbox = make_inbox(tmp_path, [FIRST, SECOND])
    volume = inbox / SECOND.split("-")[0]
    shutil.copyfile(corpus_pdf(OTHER), volume / f"{SECOND}.pdf")
    row = {**manifest_rows(OTHER.split("-")[0])[f"{OTHER}.pdf"], "file": f"{SECOND}.pdf"}
    with (volume / "manifest.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        old_id = con.execute(
            "select paper_id::varchar from metadata where paper_key like ?", [f"%{SECOND}"]
        ).fetchone()[0]
    killed_at(home, inbox, "vectors.upserted@2")
    must_ingest(home, inbox)
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        new_id = con.execute(
            "select paper_id::varchar from metadata where paper_key like ?", [f"%{SECOND}"]
        ).fetchone()[0]
        cells = collect_cells(con, default_encodable(), [new_id])
    assert new_id != old_id
    with VectorStore(str(home / "milvus.db"), cache_path=home / "cache" / "embeddings.sqlite") as store:
        for spec in load_config().active_collections():
            assert store.count(spec.name, f"pdf_id == '{old_id}'") == 0, spec.name
            expected = sum(spec.holds(cell) for cell in cells)
            assert expected and store.count(spec.name, f"pdf_id == '{new_id}'") == expected, spec.name
    code, output = run_ingest(home, inbox)
    assert code == 0 and "vectors 0 paper(s)" in " ".join(output.split())


def test_kill_during_a_removal_converges(tmp_path, references):
    """A paper deleted from the inbox, the removal killed half-way through the lake: the next run finishes it."""
    home = fresh_home(tmp_path, references["home_both"])
    inbox = make_inbox(tmp_path, [FIRST])
    killed_at(home, inbox, "lake.view_removed@4")
    must_ingest(home, inbox)
    assert_same_stores(home, references["one"])


def test_kill_during_the_warehouse_swap_converges(tmp_path, references):
    """Killed after dbt finished, just before the side file replaces the live one."""
    home = fresh_home(tmp_path, references["home_both"])
    inbox = make_inbox(tmp_path, [FIRST])
    killed_at(home, inbox, "warehouse.before_swap")
    must_ingest(home, inbox)
    assert_same_stores(home, references["one"])


def test_a_failing_collection_fails_each_paper_in_one_line(tmp_path, references):
    """A collection that cannot take the papers' vectors (built by hand with the wrong dimension): every paper
    whose vectors it should hold gets one failure line naming the paper, the stage and the reason; exit 1."""
    from pymilvus import DataType

    from paperlake.vectors.store import VectorStore

    home = fresh_home(tmp_path, references["home_one"])
    inbox = make_inbox(tmp_path, [FIRST])
    add_paper(inbox, SECOND)
    name = "text_sentence_transformers_all_minilm_l6_v2"
    with VectorStore(str(home / "milvus.db"), use_cache=False) as store:
        store.client.drop_collection(name)
        schema = store.client.create_schema(auto_id=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=8)
        store.client.create_collection(name, schema=schema)
    code, output = run_ingest(home, inbox)
    assert code == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    lines = failure_lines(output)
    keys = sorted(f"{stem.split('-')[0]}/{stem}" for stem in (FIRST, SECOND))
    assert sorted(line.split(":")[0].removeprefix("failed ") for line in lines) == keys, output[-3000:]
    assert all(": vectors: " in line and "8-d" in line for line in lines), lines


def test_a_null_where_the_contract_forbids_one_fails_the_build_and_keeps_the_warehouse(tmp_path, references):
    """The marts' NOT NULL columns are contract constraints that DuckDB enforces while the model is written (no
    separate dbt test per column): a lake row breaking one fails the warehouse build in one line naming the model and
    the column, the live warehouse stays as it was, and once the row is right again the next ingest converges."""
    home = fresh_home(tmp_path, references["home_both"])
    inbox = references["inbox_both"]
    lake_file, original = null_in_lake(home, FIRST, "sections", "ordinal")
    live = (home / "warehouse.duckdb").read_bytes()

    code, output = run_ingest(home, inbox)
    assert code == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    (line,) = failure_lines(output)
    assert line.startswith("failed warehouse: ") and "model sections" in line, line
    assert "NOT NULL constraint failed" in line and ".ordinal" in line and "previous warehouse is still live" in line
    assert (home / "warehouse.duckdb").read_bytes() == live

    lake_file.write_bytes(original)
    must_ingest(home, inbox)
    assert_same_stores(home, references["both"])


MATRIX = [
    "lake.view_written@3",
    "warehouse.dbt_event@2",
    "warehouse.after_swap",
    "formulas.table_written@1",
    "formulas.table_written@4",
    "formulas.before_state",
    "warehouse.dbt_event@40",
    "warehouse.before_swap",
    "formula_collection.synced",
    "vectors.upserted@1",
    "vectors.upserted@3",
    "vectors.synced@2",
]


@pytest.mark.crash_matrix
@pytest.mark.parametrize("failpoint", MATRIX)
def test_a_kill_at_each_fail_point_converges(tmp_path, references, failpoint):
    """The second paper added to a home holding the first, killed at one fail point, then run to the end."""
    home = fresh_home(tmp_path, references["home_one"])
    inbox = make_inbox(tmp_path, [FIRST])
    add_paper(inbox, SECOND)
    killed_at(home, inbox, failpoint)
    must_ingest(home, inbox)
    assert_same_stores(home, references["both"])


def _paper_entities(store, collection: str, paper_id: str) -> dict[str, str]:
    rows = store.client.query(collection, filter=f"pdf_id == '{paper_id}'", output_fields=["id", "text_hash"])
    return {row["id"]: row["text_hash"] for row in rows}


def test_sync_records_stand_for_the_collection_and_a_cut_sync_asks_it(tmp_path, references):
    """A sync knows what a collection holds from its records (no filtered query, which scans every entity in Milvus
    Lite): each paper's entities list equals the collection's. A ``.pending`` marker (a sync cut short) or a
    collection that disagrees with the records (an entity added by hand) sends the paper's sync back to asking the
    collection, which then removes what no cell calls for; the records vouch again afterwards."""
    from paperlake.vectors.config import load_config
    from paperlake.vectors.ledger import count_record_path, entities_path, known_entities, pending_path
    from paperlake.vectors.store import VectorStore

    home = fresh_home(tmp_path, references["home_both"])
    inbox = references["inbox_both"]
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        ids = dict(con.execute("select paper_key, paper_id::varchar from metadata").fetchall())
    first = next(key for key in ids if key.endswith(FIRST))
    second = next(key for key in ids if key.endswith(SECOND))
    collections = [spec.name for spec in load_config().active_collections() if spec.modality == "text"]
    marked, tampered = collections[0], collections[-1]
    with VectorStore(str(home / "milvus.db"), cache_path=home / "cache" / "embeddings.sqlite") as store:
        for name in collections:
            store.load(name)
            for key in (first, second):
                held = _paper_entities(store, name, ids[key])
                assert held and known_entities(home, name, key, store.incarnation(name)) == held, (name, key)
        # a stray entity of the first paper, added by hand, in one collection; a marker on the second in another
        stray = store.client.query(tampered, filter=f"pdf_id == '{ids[first]}'", output_fields=["*"], limit=1)[0]
        stray = {k: v for k, v in stray.items() if "sparse" not in k} | {"id": "stray-entity", "primary_key": "x"}
        store.client.insert(tampered, [stray], partition_name="chunks__text_content")
        store.client.flush(tampered)
        count_record_path(home, tampered).unlink(missing_ok=True)  # its recount is due (the test below: until then)
        pending_path(home, marked, second).write_text(ids[second])
        assert known_entities(home, marked, second, store.incarnation(marked)) is None
    output = must_ingest(home, inbox)
    assert "vectors 2 paper(s)" in " ".join(output.split()), output
    with VectorStore(str(home / "milvus.db"), cache_path=home / "cache" / "embeddings.sqlite") as store:
        store.load(tampered)
        assert "stray-entity" not in _paper_entities(store, tampered, ids[first])
        for name, key in ((tampered, first), (marked, second)):
            assert not pending_path(home, name, key).exists() and entities_path(home, name, key).exists()
            store.load(name)
            assert known_entities(home, name, key, store.incarnation(name)) == _paper_entities(store, name, ids[key])
    assert_same_stores(home, references["both"])
    code, output = run_ingest(home, inbox)
    assert code == 0 and "vectors 0 paper(s)" in " ".join(output.split())


def test_a_count_stands_until_a_record_it_covered_is_lost_or_it_is_due(tmp_path, references, monkeypatch):
    """The check counts a collection (a pass over it in Milvus Lite) only when its last matching count no longer
    stands: too old, another incarnation, or a record it covered is gone. A paper's new record does not make it
    count again (its sync checked what it wrote). Until the count is due, an entity inserted by hand goes unseen:
    the trade-off the ledger's docstring names; with a recount every time it is found and its paper resynced."""
    import time

    from paperlake.config import Settings
    from paperlake.vectors import ledger
    from paperlake.vectors.config import load_config
    from paperlake.vectors.store import VectorStore

    home = fresh_home(tmp_path, references["home_both"])
    collections = [spec.name for spec in load_config().active_collections() if spec.modality == "text"]
    tampered = collections[-1]
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        ids = dict(con.execute("select paper_key, paper_id::varchar from metadata").fetchall())
    first = next(key for key in ids if key.endswith(FIRST))
    counts: list[str] = []
    original = VectorStore.count

    def spy(self, collection, expr="", **kwargs):
        if not expr:
            counts.append(collection)
        return original(self, collection, expr, **kwargs)

    monkeypatch.setattr(VectorStore, "count", spy)

    def check(hours: float = 24.0) -> ledger.VectorPlan:
        counts.clear()
        settings = Settings.from_env(home=home, milvus_uri=str(home / "milvus.db"), vector_recount_hours=hours)
        with VectorStore(settings.milvus_uri, cache_path=settings.embeddings) as store:
            return ledger.stale_papers(settings, store, collections)

    for name in collections:
        ledger.count_record_path(home, name).unlink(missing_ok=True)
    assert check().empty and sorted(counts) == sorted(collections)  # no count on record: each is counted
    assert all(ledger.count_record_path(home, name).exists() for name in collections)
    assert check().empty and counts == []  # the counts stand
    record = json.loads(ledger.count_record_path(home, tampered).read_text())
    ledger.count_record_path(home, tampered).write_text(json.dumps({**record, "counted_at": time.time() - 2 * 3600}))
    assert check(hours=1).empty and counts == [tampered]  # due: counted again, and the new count stands
    assert check(hours=1).empty and counts == []

    with VectorStore(str(home / "milvus.db"), cache_path=home / "cache" / "embeddings.sqlite") as store:
        store.load(tampered)
        stray = store.client.query(tampered, filter=f"pdf_id == '{ids[first]}'", output_fields=["*"], limit=1)[0]
        stray = {k: v for k, v in stray.items() if "sparse" not in k} | {"id": "stray-entity", "primary_key": "x"}
        store.client.insert(tampered, [stray], partition_name="chunks__text_content")
        store.client.flush(tampered)
    assert check().empty and counts == []  # the trade-off: unseen until the recount
    plan = check(hours=0)
    assert sorted(counts) == sorted(collections)
    assert plan.stale == {first: {tampered: "its stored entities differ from its cells"}}

    # a record lost (here: the paper's, in another collection) makes its collection count again
    other = collections[0]
    lost = ledger.ledger_path(home, other, first)
    saved = lost.read_bytes()
    lost.unlink()
    plan = check()
    assert other in counts and plan.stale[first][other] == "never synced"
    lost.write_bytes(saved)


def test_a_new_papers_sync_writes_without_looking_up(tmp_path, references, monkeypatch):
    """A paper no record names is known to be absent from the collection: its entities are inserted, and neither a
    filtered query or count (a scan in Milvus Lite) nor an upsert (which looks each id up) runs for it."""
    from paperlake.config import Settings
    from paperlake.vectors import ledger
    from paperlake.vectors.pymilvus_names import MilvusClient
    from paperlake.vectors.store import VectorStore

    home = fresh_home(tmp_path, references["home_both"])
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        key, paper_id = con.execute(
            "select paper_key, paper_id::varchar from metadata where paper_key like ?", [f"%{SECOND}"]
        ).fetchone()
    collection = "text_sentence_transformers_all_minilm_l6_v2"
    settings = Settings.from_env(home=home, milvus_uri=str(home / "milvus.db"))
    with VectorStore(settings.milvus_uri, cache_path=settings.embeddings) as store:
        store.load(collection)
        before = _paper_entities(store, collection, paper_id)
        assert store.delete_paper(paper_id, [collection])[collection] == len(before)
        ledger.forget_sync(home, collection, key)  # as if the paper had never been synced
        assert ledger.known_entities(home, collection, key, store.incarnation(collection)) == {}
    calls: list[str] = []
    for owner, name in ((VectorStore, "existing_hashes"), (VectorStore, "count"), (MilvusClient, "upsert")):
        original = getattr(owner, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(owner, name, spy)
    results = ledger.sync_paper_keys(settings, collection, [key])
    assert results[key]["status"] == "synced" and results[key]["entities"] == len(before)
    assert calls == []
    monkeypatch.undo()
    with VectorStore(settings.milvus_uri, cache_path=settings.embeddings) as store:
        store.load(collection)
        assert _paper_entities(store, collection, paper_id) == before
        assert ledger.known_entities(home, collection, key, store.incarnation(collection)) == before


def test_a_batchs_papers_are_written_together_flushed_once_and_read_once(tmp_path, references, monkeypatch):
    """A run syncs its papers together: each collection gets one insert per partition for all of them (Milvus
    Lite's cost is mostly per call) and one flush, the warehouse cells are read once for all the collections, and
    every paper ends with exactly its entities and its record; a warehouse swapped in makes the cells read again."""
    from paperlake.config import Settings
    from paperlake.vectors import ledger
    from paperlake.vectors.pymilvus_names import MilvusClient
    from paperlake.vectors.store import VectorStore

    home = fresh_home(tmp_path, references["home_both"])
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        papers = dict(con.execute("select paper_key, paper_id::varchar from metadata order by paper_key").fetchall())
    collections = ["text_sentence_transformers_all_minilm_l6_v2", "text_bm25_en"]
    settings = Settings.from_env(home=home, milvus_uri=str(home / "milvus.db"))
    before: dict[tuple[str, str], dict[str, str]] = {}
    with VectorStore(settings.milvus_uri, cache_path=settings.embeddings) as store:
        for collection in collections:
            store.load(collection)
            for key, paper_id in papers.items():
                before[collection, key] = _paper_entities(store, collection, paper_id)
                store.delete_paper(paper_id, [collection])
                ledger.forget_sync(home, collection, key)
    calls: list[tuple[str, str | None]] = []
    for name in ("insert", "upsert", "flush"):
        original = getattr(MilvusClient, name)

        def spy(self, collection, *args, _name=name, _original=original, **kwargs):
            calls.append((_name, kwargs.get("partition_name")))
            return _original(self, collection, *args, **kwargs)

        monkeypatch.setattr(MilvusClient, name, spy)
    reads: list[list[str]] = []
    original_read = ledger._cells_by_paper
    monkeypatch.setattr(ledger, "_cells_by_paper", lambda con, ids: reads.append(list(ids)) or original_read(con, ids))
    monkeypatch.setattr(ledger, "_BATCH_CELLS", [])
    for collection in collections:
        calls.clear()
        results = ledger.sync_paper_keys(settings, collection, list(papers))
        assert {r["status"] for r in results.values()} == {"synced"}
        partitions = [partition for name, partition in calls if name == "insert"]
        assert calls.count(("flush", None)) == 1 and not any(name == "upsert" for name, _ in calls), calls
        assert len(partitions) == len(set(partitions)), partitions  # both papers' rows in one insert per partition
    assert reads == [list(papers.values())]
    with VectorStore(settings.milvus_uri, cache_path=settings.embeddings) as store:
        for collection in collections:
            store.load(collection)
            for key, paper_id in papers.items():
                assert _paper_entities(store, collection, paper_id) == before[collection, key]
                assert (
                    ledger.known_entities(home, collection, key, store.incarnation(collection))
                    == before[collection, key]
                )
    replaced = home / "warehouse.copy.duckdb"
    shutil.copyfile(home / "warehouse.duckdb", replaced)
    os.replace(replaced, home / "warehouse.duckdb")  # as a build is swapped in
    ledger.sync_paper_keys(settings, collections[0], list(papers))
    assert len(reads) == 2


def _built_incrementally(home) -> bool:
    """Whether the last warehouse build read only the papers it changed: its compiled dbt tests are scoped to them,
    and its lake sources read an explicit list of files (the loaded papers' and the contract), not the lake's glob
    (dbt's file log at debug, DBT_LOG_LEVEL_FILE, holds the SQL it ran)."""
    target = home / "dbt-target" / "warehouse"
    compiled = target / "compiled" / "paperlake" / "models" / "marts" / "chunks.yml"
    scoped = any("_paperlake.build_delta" in path.read_text() for path in compiled.glob("relationships_chunks_*.sql"))
    statements = [json.loads(line)["data"].get("sql") or "" for line in (target / "dbt.log").read_text().splitlines()]
    narrowed = any('create or replace view _lake."chunks" as select * from read_parquet([' in sql for sql in statements)
    return scoped and narrowed


def test_incremental_warehouse_builds_equal_clean_ones(tmp_path, references, monkeypatch):
    """The warehouse build reads only the papers whose lake files changed (paperlake/warehouse/build.py, plan_build): a
    paper added to a built warehouse, then removed, leaves every store equal to a clean ingest of the same inbox,
    and each of those builds was incremental; a change of the dbt project makes the next build a full one."""
    from paperlake.warehouse.build import BuildScope, build_path, plan_build, prepare_build

    monkeypatch.setenv("DBT_LOG_LEVEL_FILE", "debug")  # dbt's file log, at info by default: the SQL it ran

    home = fresh_home(tmp_path, references["home_one"])
    inbox = make_inbox(tmp_path / "inbox", [FIRST])
    add_paper(inbox, SECOND)
    must_ingest(home, inbox)
    assert _built_incrementally(home)
    assert_same_stores(home, references["both"])
    _assert_stored_versions_are_the_computed_ones(home, papers=2)
    (inbox / SECOND.split("-")[0] / f"{SECOND}.pdf").unlink()
    must_ingest(home, inbox)
    assert _built_incrementally(home)
    assert_same_stores(home, references["one"])
    _assert_stored_versions_are_the_computed_ones(home, papers=1)

    side = prepare_build(home / "warehouse.duckdb")
    try:
        unchanged = plan_build(side, home / "lake", _recorded_dbt(home))
        other_project = plan_build(side, home / "lake", "another dbt project")
    finally:
        build_path(home / "warehouse.duckdb").unlink()
    assert isinstance(unchanged, BuildScope) and not unchanged.full and unchanged.delta == []
    assert other_project.full and other_project.reason == "the dbt project changed"


def _assert_stored_versions_are_the_computed_ones(home, papers: int) -> None:
    """The content versions an incremental build stored for the vector stage are what hashing the rows gives."""
    from paperlake.vectors.ledger import _computed_versions, _content_tables, content_versions

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        stored = content_versions(con)
        assert stored == _computed_versions(con, _content_tables(con), None)
        assert len(stored) == papers
        assert con.execute("select count(*) from _paperlake.content_versions").fetchone()[0] == papers


def _recorded_dbt(home) -> str:
    from paperlake.warehouse.build import recorded_builds

    return recorded_builds(home / "warehouse.duckdb")["warehouse"]["dbt"]
