"""Vector stage: one Milvus collection asset per active collection, partitioned per paper, downstream of the
warehouse. Materialising a paper's partition makes its entities exactly its current non-empty encodable cells
(unchanged cells are not re-encoded); a paper that left the warehouse loses its entities."""

import json
from pathlib import Path

import dagster as dg

from orchestration.partitions import papers
from orchestration.resources import PaperlakeResource
from paperlake.vectors.config import load_config
from paperlake.vectors.entities import collect_cells, default_encodable
from paperlake.vectors.store import VectorStore
from paperlake.warehouse import connect_read_only

VECTORS_CODE_VERSION = "vectors-2"  # ONNX MiniLM encoder (new fingerprint); panels encode regions only


def paper_encodable() -> list[tuple[str, str, str]]:
    """Encodable columns of the per-paper tables (formula descriptions are embedded by the formula stage)."""
    return default_encodable()


def _ledger(home: Path, collection: str, paper_key: str) -> Path:
    """Which paper id a partition was last synced as: needed to delete its entities once it has left."""
    return home / "vectors" / collection / f"{paper_key}.json"


def sync_partition(paperlake: PaperlakeResource, collection: str, paper_key: str) -> dict:
    settings = paperlake.settings()
    ledger = _ledger(settings.home, collection, paper_key)
    with connect_read_only(settings.warehouse) as con:
        row = con.execute("select paper_id::varchar from metadata where paper_key = ?", [paper_key]).fetchone()
        paper_id = row[0] if row else None
        cells = collect_cells(con, paper_encodable(), [paper_id]) if paper_id else []
    # The `milvus` pool queues collection steps; the lock only waits out other processes (a `paperlake search`).
    store = VectorStore(settings.milvus_uri, cache_path=settings.cache / "embeddings.sqlite", lock_timeout=600.0)
    try:
        previous = json.loads(ledger.read_text())["paper_id"] if ledger.exists() else None
        deleted_previous = 0
        if previous and previous != paper_id:  # removed, or re-identified (new title): drop the old entities
            deleted_previous = sum(store.delete_paper(previous, [collection]).values())
        if paper_id is None:
            ledger.unlink(missing_ok=True)
            return {"status": "removed", "deleted": deleted_previous, "entities": 0}
        report = store.sync_paper(paper_id, cells, [collection])
        stats = report.collections[collection]
        entities = store.count(collection, f"pdf_id == '{paper_id}'")
    finally:
        store.close()
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text(json.dumps({"paper_id": paper_id}))
    return {"status": "synced", "paper_id": paper_id, "entities": entities, "cells": len(cells),
            "encoded": stats.encoded, "skipped_unchanged": stats.unchanged, "deleted": stats.deleted + deleted_previous,
            "seconds": round(report.seconds, 3)}


def _collection_asset(name: str, modality: str, models: str, about: str,
                      deps: list[dg.AssetKey]) -> dg.AssetsDefinition:
    @dg.asset(
        name=name, key_prefix=["vectors"], deps=deps, partitions_def=papers, group_name="vectors",
        code_version=VECTORS_CODE_VERSION, kinds={"milvus"}, pool="milvus",
        description=f"Milvus collection `{name}` ({modality}; {models}): one entity per non-empty encodable "
                    f"warehouse cell of the paper. {about}".strip(),
    )
    def collection(context: dg.AssetExecutionContext, paperlake: PaperlakeResource) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata=sync_partition(paperlake, name, context.partition_key))

    return collection


def unsynced_partitions(paperlake: PaperlakeResource, collections: list[str]) -> set[str]:
    """Partitions whose collections never saw their paper, or that still hold a paper the warehouse lost."""
    settings = paperlake.settings()
    with connect_read_only(settings.warehouse) as con:
        in_warehouse = {key for (key,) in con.execute("select paper_key from metadata").fetchall()}
    stale: set[str] = set()
    for collection in collections:
        root = settings.home / "vectors" / collection
        synced = {p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.json")} if root.exists() \
            else set()
        stale |= (in_warehouse - synced) | (synced - in_warehouse)
    return stale


def build_vector_assets() -> list[dg.AssetsDefinition]:
    config = load_config()
    warehouse_deps = sorted({dg.AssetKey(["warehouse", table]) for table, _, _ in paper_encodable()} |
                            {dg.AssetKey(["warehouse", "metadata"]), dg.AssetKey(["warehouse", "pages"])})
    assets = []
    for spec in config.active_collections():
        models = ", ".join(sorted({config.encoders[e].model_id for e in spec.encoders}) or ["Milvus BM25 function"])
        assets.append(_collection_asset(spec.name, spec.modality, models, spec.description, warehouse_deps))
    return assets


vector_assets = build_vector_assets()
