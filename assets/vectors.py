"""Vector stage: one Milvus collection asset per active collection, partitioned per paper, downstream of the
warehouse. Materialising a paper's partition makes its entities exactly its current non-empty encodable cells
(unchanged cells are not re-encoded); a paper that left the warehouse loses its entities. What is stale is
decided by ``paperlake.vectors.ledger`` for the CLI and the sensor alike."""

import dagster as dg

from orchestration.partitions import papers
from orchestration.resources import PaperlakeResource
from paperlake.vectors.config import load_config
from paperlake.vectors.entities import default_encodable
from paperlake.vectors.ledger import stage_fingerprint, sync_paper_key

VECTORS_CODE_VERSION = stage_fingerprint()


def _collection_asset(name: str, modality: str, models: str, about: str,
                      deps: list[dg.AssetKey]) -> dg.AssetsDefinition:
    @dg.asset(
        name=name, key_prefix=["vectors"], deps=deps, partitions_def=papers, group_name="vectors",
        code_version=VECTORS_CODE_VERSION, kinds={"milvus"}, pool="milvus",
        description=f"Milvus collection `{name}` ({modality}; {models}): one entity per non-empty encodable "
                    f"warehouse cell of the paper. {about}".strip(),
    )
    def collection(context: dg.AssetExecutionContext, paperlake: PaperlakeResource) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata=sync_paper_key(paperlake.settings(), name, context.partition_key))

    return collection


def build_vector_assets() -> list[dg.AssetsDefinition]:
    config = load_config()
    warehouse_deps = sorted({dg.AssetKey(["warehouse", table]) for table, _, _ in default_encodable()} |
                            {dg.AssetKey(["warehouse", "metadata"]), dg.AssetKey(["warehouse", "pages"])})
    assets = []
    for spec in config.active_collections():
        models = ", ".join(sorted({config.encoders[e].model_id for e in spec.encoders}) or ["Milvus BM25 function"])
        assets.append(_collection_asset(spec.name, spec.modality, models, spec.description, warehouse_deps))
    return assets


vector_assets = build_vector_assets()
