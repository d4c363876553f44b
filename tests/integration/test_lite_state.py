"""A writer skips its probe of a Milvus Lite folder only while no byte of it changed since a clean close.

Real Milvus Lite files: a writer (``heal=True``) probes a folder it has no record for, and records its state when it
closes cleanly; the next writer then opens it without loading a collection. A closed-on-error writer, a segment
touched since, or a damaged record means the probe runs again, and a damaged segment is still found and set aside.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from paperlake.vectors import lite_state
from paperlake.vectors.store import VectorStore

COLLECTIONS = ["text_bm25_en"]


def _writer(path: Path) -> VectorStore:
    return VectorStore(str(path), use_cache=False, heal=True)


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "milvus.db"
    store = _writer(path)
    store.ensure_collections(COLLECTIONS)
    store.close()
    return path


def _probed(path: Path) -> bool:
    """Whether a writer opening ``path`` now probes it (its probe loads and counts every collection)."""
    store = _writer(path)
    try:
        return bool(store.probed_counts)
    finally:
        store.close()


def test_a_clean_close_records_the_state_and_the_next_writer_skips_its_probe(db: Path):
    assert lite_state.recorded_state(db) == lite_state.folder_state(db) is not None
    assert not _probed(db)
    assert not _probed(db)  # and so on, while nothing changes


def test_a_changed_file_or_a_damaged_record_means_a_probe(db: Path):
    manifest = next(db.glob("collections/*/manifest.json"))
    os.utime(manifest, ns=(manifest.stat().st_atime_ns, manifest.stat().st_mtime_ns + 1_000_000))
    assert _probed(db)
    assert not _probed(db)  # the probe passed, and the close recorded the new state
    lite_state.record_path(db).write_bytes(b"\x00garbage")
    assert _probed(db)
    lite_state.record_path(db).unlink()
    lite_state.record_path(db).mkdir()  # a folder where the record belongs is set aside; the close writes it again
    assert _probed(db)
    assert lite_state.record_path(db).is_file()
    assert not _probed(db)


def test_a_writer_closed_on_an_error_records_nothing(db: Path):
    before = lite_state.record_path(db).read_bytes()
    manifest = next(db.glob("collections/*/manifest.json"))
    with pytest.raises(RuntimeError):
        store = _writer(db)
        try:
            os.utime(manifest, ns=(manifest.stat().st_atime_ns, manifest.stat().st_mtime_ns + 1_000_000))
            raise RuntimeError("a sync failed half-way")
        finally:
            store.close()
    assert lite_state.record_path(db).read_bytes() == before
    assert _probed(db)


def test_a_damaged_file_is_still_set_aside(db: Path):
    store = _writer(db)
    store.ensure_collections(COLLECTIONS)
    store.close()
    schema = next(db.glob("collections/*/schema.json"))
    schema.write_bytes(b"{ not json")
    store = _writer(db)
    try:
        assert store.healed is not None and "milvus.db" in store.healed.line()
    finally:
        store.close()
    assert lite_state.recorded_state(db) == lite_state.folder_state(db)  # the new, empty folder, proved
    assert not _probed(db)


def test_a_collection_whose_schema_is_gone_sets_the_folder_aside(db: Path):
    """Milvus Lite no longer lists the collection, and would refuse to create it again ("File exists")."""
    (schema,) = db.glob("collections/*/schema.json")
    schema.unlink()
    store = _writer(db)
    try:
        assert store.healed is not None and "does not list" in store.healed.line()
        assert store.ensure_collections(COLLECTIONS) == COLLECTIONS  # made again in the new folder
    finally:
        store.close()


# ── the facts a clean close records: what an unchanged ingest's check asks, answered without Milvus Lite ────────


def _ask(store: VectorStore) -> tuple:
    """What the ingest's vector and formula checks ask of a store."""
    name = COLLECTIONS[0]
    return store.exists(name), store.incarnation(name), store.count(name), store.exists("formulas")


@pytest.fixture()
def no_client(monkeypatch: pytest.MonkeyPatch):
    """Opening a pymilvus client fails: what a store answers then, it answered from the record."""
    from paperlake.vectors.pymilvus_names import MilvusClient

    def refuse(self, *args, **kwargs):
        raise AssertionError("a Milvus Lite client was opened")

    with monkeypatch.context() as patch:
        yield lambda: patch.setattr(MilvusClient, "__init__", refuse)


def test_a_writer_that_wrote_nothing_records_what_it_learned_and_the_next_one_answers_from_it(db: Path, no_client):
    lite_state.record_path(db).unlink()  # (the fixture's writer recorded facts too: see below)
    assert _probed(db)
    assert lite_state.recorded_facts(db, lite_state.folder_state(db)) is None  # that prover asked nothing
    store = _writer(db)
    live = _ask(store)
    store.close()
    assert live[0] is True and live[1] and live[2] == 0 and live[3] is False
    facts = lite_state.recorded_facts(db, lite_state.folder_state(db))
    assert facts is not None and facts[COLLECTIONS[0]]["count"] == 0 and facts["formulas"] == {"exists": False}
    no_client()
    for _ in range(2):  # and so on, while nothing changes; the record is left as it was
        store = _writer(db)
        assert _ask(store) == live
        with pytest.raises(AssertionError, match="client was opened"):
            store.stored_spec(COLLECTIONS[0])  # not a fact: asked of Milvus Lite
        store.close()
    assert lite_state.recorded_facts(db, lite_state.folder_state(db)) == facts


def test_facts_go_with_any_change_to_the_folder(db: Path):
    store = _writer(db)
    _ask(store)
    store.close()
    manifest = next(db.glob("collections/*/manifest.json"))
    os.utime(manifest, ns=(manifest.stat().st_atime_ns, manifest.stat().st_mtime_ns + 1_000_000))
    assert lite_state.recorded_facts(db, lite_state.folder_state(db)) is None  # recorded with another state
    assert _probed(db)  # proved again, by Milvus Lite


def test_a_writer_that_writes_records_what_milvus_lite_says_before_it_stops(db: Path, no_client):
    """The first unchanged ingest after one that wrote answers from the record too: the writer asks Milvus Lite,
    before its server stops, what each collection is (its properties, its count when loaded) and which do not
    exist."""
    store = _writer(db)
    assert _ask(store)[3] is False  # an ingest's check asks of the formulas collection too
    store.ensure_collections(COLLECTIONS, recreate=True)  # a new incarnation
    incarnation = store.incarnation(COLLECTIONS[0])
    store.close()
    assert lite_state.recorded_state(db) == lite_state.folder_state(db)
    facts = lite_state.recorded_facts(db, lite_state.folder_state(db))
    assert facts is not None and facts[COLLECTIONS[0]]["exists"] is True and facts[COLLECTIONS[0]]["count"] == 0
    assert all(known == {"exists": False} for name, known in facts.items() if name != COLLECTIONS[0])
    assert set(facts) > {*COLLECTIONS, "formulas"}  # and the configured collections it does not hold, as absent
    no_client()
    store = _writer(db)
    try:
        assert store.incarnation(COLLECTIONS[0]) == incarnation and store.count(COLLECTIONS[0]) == 0
        assert store.exists("formulas") is False
    finally:
        store.close()


def test_facts_milvus_lite_cannot_give_leave_the_state_alone(db: Path, monkeypatch: pytest.MonkeyPatch):
    from paperlake.vectors.pymilvus_names import MilvusClient

    store = _writer(db)
    store.ensure_collections(COLLECTIONS, recreate=True)
    monkeypatch.setattr(MilvusClient, "list_collections", lambda self: (_ for _ in ()).throw(RuntimeError("gone")))
    store.close()
    assert lite_state.recorded_state(db) == lite_state.folder_state(db)
    assert lite_state.recorded_facts(db, lite_state.folder_state(db)) is None


def test_another_store_of_the_process_voids_the_facts_it_may_have_outdated(db: Path):
    store = _writer(db)
    _ask(store)
    store.close()
    checker = _writer(db)  # the ingest's check, holding its store through the steps
    before = checker.incarnation(COLLECTIONS[0])
    step = _writer(db)  # a step of the same process, sharing the lock and the server
    step.ensure_collections(COLLECTIONS, recreate=True)
    recreated = step.incarnation(COLLECTIONS[0])
    step.close()
    try:
        assert checker.incarnation(COLLECTIONS[0]) == recreated != before
    finally:
        checker.close()
    # the checker closes last: what it records is what Milvus Lite says then, not the facts it was given
    facts = lite_state.recorded_facts(db, lite_state.folder_state(db))
    assert facts is not None and facts[COLLECTIONS[0]]["properties"]["paperlake.incarnation"] == recreated
