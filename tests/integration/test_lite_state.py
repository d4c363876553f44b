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
