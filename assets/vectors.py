"""Vector stage: one Milvus collection asset per active collection, partitioned per paper (a run may cover a range
of papers), downstream of the warehouse. Materialising a paper's partition makes its entities exactly its current
non-empty encodable cells (unchanged cells are not re-encoded); a paper that left the warehouse loses its entities.
What is stale is decided by ``paperlake.vectors.ledger`` for the CLI and the sensor alike."""

import dagster as dg

from assets.partitions import papers, run_paper_keys
from assets.resources import PaperlakeResource
from paperlake.vectors.config import load_config
from paperlake.vectors.entities import default_encodable
from paperlake.vectors.ledger import stage_fingerprint, sync_paper_keys

VECTORS_CODE_VERSION = stage_fingerprint()


def _collection_asset(
    name: str, modality: str, models: str, about: str, deps: list[dg.AssetKey]
) -> dg.AssetsDefinition:
    @dg.asset(
        name=name,
        key_prefix=["vectors"],
        deps=deps,
        partitions_def=papers,
        group_name="vectors",
        code_version=VECTORS_CODE_VERSION,
        kinds={"milvus"},
        pool="milvus",
        backfill_policy=dg.BackfillPolicy.single_run(),
        description=f"Milvus collection `{name}` ({modality}; {models}): one entity per non-empty encodable "
        f"warehouse cell of the paper. {about}".strip(),
    )
    def collection(context: dg.AssetExecutionContext, paperlake: PaperlakeResource) -> dg.MaterializeResult:
        """A run covers one paper or a range of them; the store is opened once for the range, and each paper is
        recorded as soon as its entities are flushed, so a failure names its papers and leaves the others synced."""
        results = sync_paper_keys(paperlake.settings(), name, run_paper_keys(context))
        if len(results) == 1:
            return dg.MaterializeResult(metadata=next(iter(results.values())))
        return dg.MaterializeResult(metadata=_batch_metadata(results))

    return collection


def _batch_metadata(results: dict[str, dict]) -> dict:
    """A batch's totals, and one line per paper."""
    totals = {
        name: sum(int(r.get(name, 0)) for r in results.values())
        for name in ("entities", "cells", "encoded", "skipped_unchanged", "deleted")
    }
    first = next(iter(results.values()))
    return {
        "papers": len(results),
        **totals,
        "seconds": round(sum(float(r.get("seconds", 0.0)) for r in results.values()), 3),
        "store_wait_seconds": first["store_wait_seconds"],
        "store_held_from": first["store_held_from"],
        "store_held_until": first["store_held_until"],
        "per_paper": dg.MetadataValue.md(
            "\n".join(
                ["| paper | status | entities | encoded |", "|---|---|---|---|"]
                + [
                    f"| {key} | {r['status']} | {r.get('entities', 0)} | {r.get('encoded', 0)} |"
                    for key, r in results.items()
                ]
            )
        ),
    }


def build_vector_assets() -> list[dg.AssetsDefinition]:
    config = load_config()
    warehouse_deps = sorted(
        {dg.AssetKey(["warehouse", table]) for table, _, _ in default_encodable()}
        | {dg.AssetKey(["warehouse", "metadata"]), dg.AssetKey(["warehouse", "pages"])}
    )
    assets = []
    for spec in config.active_collections():
        models = ", ".join(sorted({config.encoders[e].model_id for e in spec.encoders}) or ["Milvus BM25 function"])
        assets.append(_collection_asset(spec.name, spec.modality, models, spec.description, warehouse_deps))
    return assets


vector_assets = build_vector_assets()
