"""Creating a collection is idempotent under concurrency: writers that all saw it missing all succeed.

A fresh-clone CI run lost this race (two partition runs against one Milvus server, "collection … already exists").
The first test makes the race happen every time (the second writer is shown a stale "missing"); the second races
real processes released together by a barrier, for every collection including ``formulas``; the third completes a
collection that a writer killed between creating it and indexing it left behind.
"""

from __future__ import annotations

import multiprocessing
import traceback
from pathlib import Path

import pytest

from paperlake.vectors.server import milvus_lite_server
from paperlake.vectors.store import INCARNATION_PROPERTY, VectorStore

TEXT_COLLECTIONS = ["text_bm25_en", "text_sentence_transformers_all_minilm_l6_v2", "text_hybrid"]


@pytest.fixture()
def server(tmp_path: Path):
    with milvus_lite_server(tmp_path / "race.db") as running:
        yield running


def test_a_writer_that_saw_the_collection_missing_still_succeeds(server, monkeypatch):
    from paperlake.formulas.collection import FORMULA_COLLECTION, ensure_formula_collection

    first = VectorStore(server.uri, use_cache=False)
    second = VectorStore(server.uri, use_cache=False)
    try:
        first.ensure_collections(TEXT_COLLECTIONS)
        ensure_formula_collection(first)
        stale = set()
        real = second.client.has_collection

        def stale_view(name, *args, **kwargs):  # first asked: the answer it got before the other writer created it
            if name not in stale:
                stale.add(name)
                return False
            return real(name, *args, **kwargs)

        monkeypatch.setattr(second.client, "has_collection", stale_view)
        assert second.ensure_collections(TEXT_COLLECTIONS) == TEXT_COLLECTIONS
        ensure_formula_collection(second)
        assert stale == {*TEXT_COLLECTIONS, FORMULA_COLLECTION}  # each creation was attempted, and survived
        for name in [*TEXT_COLLECTIONS, FORMULA_COLLECTION]:
            assert second.incarnation(name) == first.incarnation(name) is not None
    finally:
        first.close()
        second.close()


def _create_all(uri: str, barrier, results, index: int) -> None:
    from paperlake.formulas.collection import ensure_formula_collection

    try:
        store = VectorStore(uri, use_cache=False)
        barrier.wait(timeout=60)
        store.ensure_collections(TEXT_COLLECTIONS)
        ensure_formula_collection(store)
        store.close()
        results[index] = "ok"
    except Exception:
        results[index] = traceback.format_exc(limit=4)


def test_processes_racing_to_create_every_collection_all_succeed(server):
    from paperlake.formulas.collection import FORMULA_COLLECTION

    context = multiprocessing.get_context("spawn")
    writers = 4
    barrier = context.Barrier(writers)
    with context.Manager() as manager:
        results = manager.dict()
        processes = [
            context.Process(target=_create_all, args=(server.uri, barrier, results, i)) for i in range(writers)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=300)
        outcome = dict(results)
    assert outcome == {i: "ok" for i in range(writers)}, outcome
    with VectorStore(server.uri, use_cache=False) as store:
        for name in [*TEXT_COLLECTIONS, FORMULA_COLLECTION]:
            assert store.client.has_collection(name)
            assert store.client.list_indexes(name), name
            assert store.incarnation(name), name


def test_a_collection_left_without_indexes_is_completed(server):
    """A writer killed between create_collection and create_index left a bare collection: the next one finishes it
    instead of failing to load it (a real Milvus refuses to load a collection without a vector index)."""
    store = VectorStore(server.uri, use_cache=False)
    try:
        spec = store.config.collection("text_bm25_en")
        schema, _ = store._schema(spec)
        store.client.create_collection(spec.name, schema=schema)
        assert store.client.list_indexes(spec.name) == []
        store.ensure_collections([spec.name])
        assert set(store.client.list_indexes(spec.name)) >= {
            "vector",
            "pdf_id",
            "table_name",
            "column_name",
            "page_number",
        }
        properties = store.client.describe_collection(spec.name).get("properties") or {}
        assert properties.get(INCARNATION_PROPERTY)
    finally:
        store.close()
