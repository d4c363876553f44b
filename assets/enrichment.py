"""Enrichment stage: LLM/VLM-written summaries, tl;dr and tags per paper, downstream of the parse views and upstream
of the warehouse (dbt reads the enrichment lake files into the NeuSym-RAG summary columns).

The asset's code version is the digest of the prompt files and this stage's code, so editing a prompt marks the
stage changed in the UI; which items are asked again is decided per item (content, prompt, model) by
``paperlake.enrichment``. Without an endpoint the asset reports "not configured" and writes nothing."""

import dagster as dg

from assets.parse import VIEW_KEYS
from assets.partitions import papers
from assets.resources import LLMResource, PaperlakeResource
from paperlake.enrichment import Budget, code_version, enrich_one, not_configured_reason, resolve_kinds


class EnrichConfig(dg.Config):
    kinds: list[str] = []  # enrichment kinds; empty: PAPERLAKE_ENRICH_KINDS, else NeuSym-RAG's six
    budget: str = ""  # what this run may spend ("200000" tokens, "$1.50"); empty: PAPERLAKE_LLM_BUDGET
    retry_errors: bool = False  # ask again the items whose earlier answer was refused


@dg.asset(
    key=["enrichment", "summaries"],
    partitions_def=papers,
    group_name="enrichment",
    pool="llm",
    deps=[VIEW_KEYS[v] for v in ("metadata", "pages", "sections", "tables", "images", "table_rows", "table_columns")],
    code_version=code_version(),
    kinds={"openai", "parquet"},
    description="LLM/VLM enrichment of one paper: page, section, table and figure summaries, tl;dr and tags "
    "(HD-RAG's row/column summaries when asked), one lake file per paper; tables and figures go to the "
    "vision model as PNG crops.",
)
def enrichment_summaries(
    context: dg.AssetExecutionContext, config: EnrichConfig, paperlake: PaperlakeResource, llm: LLMResource
) -> dg.MaterializeResult:
    settings = llm.apply(paperlake.settings())
    reason = not_configured_reason(settings)
    if reason:
        context.log.info(f"enrichment skipped: {reason}")
        return dg.MaterializeResult(metadata={"status": "not configured", "reason": reason})
    kinds = resolve_kinds(config.kinds or settings.enrich_kinds)
    budget = Budget.parse(config.budget or settings.llm_budget)
    outcome = enrich_one(settings, context.partition_key, kinds=kinds, budget=budget, retry_errors=config.retry_errors)
    return dg.MaterializeResult(metadata=outcome.metadata() | {"kinds": ", ".join(kinds)})
