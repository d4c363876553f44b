"""The one entry point: composes every area's definitions and applies cross-cutting policy once.

What is stale is decided in one place (``paperlake.freshness``, ``paperlake.vectors.ledger``,
``paperlake.lake.pipeline.needs_parse``) and acted on by the sensors here and by `paperlake ingest` alike, through the
same named jobs. The assets' code versions come from the same digests (parser versions, the dbt project, the formula
extractor, the vector stage's fingerprint), so the UI's "code version changed" marks agree with what will rebuild.
"""

from __future__ import annotations

import json

import dagster as dg

from assets.enrichment import enrichment_summaries
from assets.evaluation import evaluation_probes, retrieval_quality, volume_set
from assets.formulas import formula_collection, formula_graph
from assets.parse import inbox_pdf, parsed_views
from assets.resources import LLMResource, PaperlakeResource, paperlake_from_env, warehouse_resource
from assets.vectors import vector_assets
from assets.warehouse import dbt_cli_resource, warehouse_models
from orchestration.executors import executor_definition
from orchestration.jobs import JOBS, enrich_paper
from orchestration.sensors import inbox_schedule, inbox_sensor, make_stores_sensor
from paperlake.config import Settings


def build_definitions(paperlake: PaperlakeResource | None = None, llm: LLMResource | None = None) -> dg.Definitions:
    """The whole graph; ``paperlake`` overrides the environment's resource (the CLI passes its own inbox/home). The
    jobs' executor is the configured one (:mod:`orchestration.executors`). The enrichment asset, its job and the
    stores sensor's enrich runs are there only with an LLM endpoint: without one, "Materialize all" in the UI does
    not ask for summaries it cannot get (the warehouse reads the enrichment files whenever they exist)."""
    paperlake = paperlake or paperlake_from_env()
    llm = llm or LLMResource()
    with_enrichment = llm.apply(Settings.from_env()).llm_configured
    return dg.Definitions(
        executor=executor_definition(Settings.from_env()),
        assets=[
            inbox_pdf,
            parsed_views,
            *([enrichment_summaries] if with_enrichment else []),
            warehouse_models,
            formula_graph,
            formula_collection,
            *vector_assets,
            evaluation_probes,
            volume_set,
        ],
        asset_checks=[retrieval_quality],
        jobs=[job for job in JOBS if with_enrichment or job is not enrich_paper],
        sensors=[inbox_sensor, make_stores_sensor(with_enrichment)],
        schedules=[inbox_schedule],
        resources={
            "paperlake": paperlake,
            "dbt": dbt_cli_resource(),
            "llm": llm,
            "warehouse": warehouse_resource(paperlake),
        },
    )


def job_for_workers(job_name: str, resource: str) -> dg.JobDefinition:
    """The named job as the process that started the run built it (``resource``: the PaperlakeResource's fields as
    JSON): what a multiprocess child or a Celery worker reconstructs to execute its steps."""
    return build_definitions(PaperlakeResource(**json.loads(resource))).resolve_job_def(job_name)


defs = build_definitions()
