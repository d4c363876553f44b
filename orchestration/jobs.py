"""The named jobs: what the Runs page says ran. `paperlake ingest` and the sensors launch exactly these."""

from typing import Iterable

import dagster as dg

from assets.enrichment import enrichment_summaries
from assets.evaluation import evaluation_probes, volume_set
from assets.formulas import formula_collection, formula_graph
from assets.parse import parsed_views
from assets.vectors import vector_assets
from assets.warehouse import FORMULA_MODEL_KEYS, warehouse_models

ingest_paper = dg.define_asset_job(
    "ingest_paper",
    selection=dg.AssetSelection.assets(parsed_views),
    description="Parse one paper partition into the lake (new, changed, or removed from the inbox).",
)
enrich_paper = dg.define_asset_job(
    "enrich_paper",
    selection=dg.AssetSelection.assets(enrichment_summaries),
    description="LLM/VLM summaries, tl;dr and tags of one paper partition (only items whose content, prompt or "
    "model changed), within the run's budget.",
)
build_warehouse = dg.define_asset_job(
    "build_warehouse",
    selection=dg.AssetSelection.assets(formula_graph, warehouse_models, formula_collection),
    description="The formula graph from the lake's equations (when stale), then one dbt build of the warehouse marts "
    "and the graph's tables into a side file, swapped in when every test passed, then the Milvus formulas "
    "collection of a graph that changed.",
)
build_formulas = dg.define_asset_job(
    "build_formulas",
    selection=dg.AssetSelection.assets(formula_graph, formula_collection, *FORMULA_MODEL_KEYS),
    description="What is stale of the formulas when the warehouse's marts are not: the formula graph from the lake, "
    "its dbt models, and the Milvus formulas collection.",
)
sync_vectors = dg.define_asset_job(
    "sync_vectors",
    selection=dg.AssetSelection.assets(*vector_assets, evaluation_probes),
    description="One paper's entities in each Milvus collection made exactly its warehouse cells, and its offline "
    "probes when they are stale too (both read the paper's warehouse rows: a run fewer than a probe_paper after it).",
)
probe_paper = dg.define_asset_job(
    "probe_paper",
    selection=dg.AssetSelection.assets(evaluation_probes),
    description="One paper's offline probes, generated from the warehouse and verified at their evidence rows, when "
    "its vectors are current.",
)
evaluate_volume = dg.define_asset_job(
    "evaluate_volume",
    selection=dg.AssetSelection.assets(volume_set),
    description="A volume's probe set and its retrieval_quality check (answer@1/@5, page@5 of vector retrieval).",
)
JOBS = [ingest_paper, enrich_paper, build_warehouse, build_formulas, sync_vectors, probe_paper, evaluate_volume]
FORMULA_ASSETS = {
    "graph": sorted(formula_graph.keys),
    "models": sorted(FORMULA_MODEL_KEYS),
    "collection": sorted(formula_collection.keys),
}
"""Each part :func:`paperlake.freshness.formula_staleness` names, as the asset keys a run selects for it."""


def warehouse_selection(formulas: dict[str, str], collection: bool = False) -> list[dg.AssetKey]:
    """What a ``build_warehouse`` run makes: the marts, and of the formulas what ``formulas``
    (:func:`paperlake.freshness.formula_build_staleness`) names (the graph before dbt, its tables in the same build),
    and with ``collection`` the Milvus formulas collection after them when the graph's outputs change (a run fewer
    than a ``build_formulas`` after the build)."""
    marts = sorted(key for key in warehouse_models.keys if key not in FORMULA_MODEL_KEYS)
    parts = [part for part in ("graph", "models") if part in formulas]
    if collection and {"graph", "models"} <= formulas.keys():
        parts.append("collection")
    return marts + [key for part in parts for key in FORMULA_ASSETS[part]]


PROBES = dg.AssetKey(["evaluation", "probes"])


def paper_selection(collections: Iterable[str], probes: bool) -> tuple[str, list[dg.AssetKey]]:
    """The run that brings one paper's downstream stores up to date, and what it selects: ``sync_vectors`` for the
    stale vector ``collections``, with the paper's probes when they are stale too; ``probe_paper`` for probes alone.
    `paperlake ingest` and the stores sensor both ask here."""
    selection = [dg.AssetKey(["vectors", collection]) for collection in sorted(collections)]
    if not selection and not probes:
        raise ValueError("nothing of the paper is stale")
    return (sync_vectors.name if selection else probe_paper.name), selection + ([PROBES] if probes else [])
