"""Formula stage: the lake's equations → a deduplicated formula graph (Parquet tables + RDF Turtle), made in the
warehouse build's run before dbt (which models its tables with the marts), and the Milvus ``formulas`` collection over
the formulas' composite descriptions."""

import dagster as dg
import pyarrow.parquet as pq

from assets.parse import VIEW_KEYS
from assets.resources import LLMResource, PaperlakeResource
from paperlake.formulas.collection import FORMULA_COLLECTION, sync_formula_collection
from paperlake.formulas.llm import formula_assistant
from paperlake.formulas.state import EXTRACTOR_VERSION, FORMULA_SCHEMAS, connect_lake_equations, equation_sources
from paperlake.freshness import (
    FORMULA_COLLECTION_CODE_VERSION,
    SYNCED_PROPERTY,
    formula_collection_inputs,
    formula_dir,
    turtle_path,
)
from paperlake.runtime.failpoints import fault_point
from paperlake.vectors.store import VectorStore

FORMULAS_CODE_VERSION = EXTRACTOR_VERSION
FORMULA_KEYS = {table: dg.AssetKey(["formulas", table]) for table in FORMULA_SCHEMAS}
FORMULA_COLLECTION_KEY = dg.AssetKey(["vectors", FORMULA_COLLECTION])


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            key,
            deps=[VIEW_KEYS["equations"]],
            kinds={"parquet", "sympy", "rdf"},
            description=f"Formula graph table `{table}` (lake/formulas/{table}.parquet).",
        )
        for table, key in FORMULA_KEYS.items()
    ],
    group_name="formulas",
    code_version=FORMULAS_CODE_VERSION,
    pool="formulas",
)
def formula_graph(context: dg.AssetExecutionContext, paperlake: PaperlakeResource, llm: LLMResource):
    """Display equations become formula entities (LaTeX → sympy → validated Python template, parameters,
    constants, provenance), merged across papers and volumes by canonical structure and by embedding similarity of
    their descriptions, with uses_constant / same_as / derived_from / specializes relations. Incremental: only
    papers whose equations changed are re-added, and each is compared against what exists. With an LLM endpoint
    configured, it describes parameters the text left undescribed, judges the 0.8–0.9 similarity band and proposes
    templates for LaTeX the rules reject (validated like any other). Also writes the RDF Turtle export
    ($PAPERLAKE_HOME/formulas/formulas.ttl)."""
    from paperlake.formulas.store import minilm_embedder, update_formula_graph  # deferred: sympy

    settings = llm.apply(paperlake.settings())  # the project's one LLM resource, as for enrichment
    assistant = formula_assistant(settings)
    sources = equation_sources(settings.lake)  # before reading: a file replaced meanwhile leaves the graph stale
    with connect_lake_equations(settings.lake) as con:  # the mart's rows, before dbt loads them
        report = update_formula_graph(
            con,
            formula_dir(settings),
            turtle_path(settings),
            embed=minilm_embedder(settings.embeddings),
            assistant=assistant,
            parse_cache=settings.embeddings,  # content-addressed, like the vectors beside it
            sources=sources,
        )
    for error in report.errors[:20]:
        context.log.warning(error)
    summary = {
        "equations": report.equations,
        **report.counts,
        "papers_added": len(report.papers_added),
        "papers_removed": len(report.papers_removed),
        "papers_unchanged": report.papers_unchanged,
        "errors": len(report.errors),
        "seconds": round(report.seconds, 2),
        "latex_parses_cached": report.parses_cached,
        "latex_parses_new": report.parses_new,
    }
    if assistant is not None:
        summary.update(assistant.metadata())
    for table, key in FORMULA_KEYS.items():
        yield dg.MaterializeResult(
            asset_key=key,
            metadata=summary if table == "formulas" else {"rows": report.counts.get(table.replace("formula_", ""), 0)},
        )


@dg.asset(
    key=FORMULA_COLLECTION_KEY,
    deps=[FORMULA_KEYS["formulas"], FORMULA_KEYS["formula_occurrences"]],
    group_name="formulas",
    code_version=FORMULA_COLLECTION_CODE_VERSION,
    kinds={"milvus"},
    pool="milvus",
)
def formula_collection(paperlake: PaperlakeResource) -> dg.MaterializeResult:
    """Milvus collection `formulas` (dense all-MiniLM-L6-v2, cosine): one entity per formula entity, keyed by
    formula id, over its composite description, with its label, status and occurrences (paper, page). Upserts
    only formulas whose entity changed (new occurrence, new description), deletes formulas that left the graph;
    embeddings come through the shared embedding cache."""
    settings = paperlake.settings()
    inputs = formula_collection_inputs(settings)  # before reading: a graph that changes meanwhile stays stale
    tables = {
        name: pq.read_table(formula_dir(settings) / f"{name}.parquet").to_pylist()
        for name in ("formulas", "formula_occurrences")
    }
    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings, lock_timeout=600.0, heal=True)
    try:
        stats = sync_formula_collection(store, tables)
        fault_point("formula_collection.synced")
        store.client.alter_collection_properties(FORMULA_COLLECTION, properties={SYNCED_PROPERTY: inputs})
    finally:
        store.close()
    return dg.MaterializeResult(
        metadata={
            "collection": FORMULA_COLLECTION,
            "entities": stats.entities,
            "upserted": stats.upserted,
            "unchanged": stats.unchanged,
            "deleted": stats.deleted,
            "encoded": stats.encoded,
            "cache_hits": stats.cache_hits,
            "seconds": round(stats.seconds, 3),
        }
    )
