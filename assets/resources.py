"""Typed resources, configured from the environment (no module-level clients, no secrets in code)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from paperlake.config import RUN_INBOXES_TAG, RUN_MINERU_TAG, Settings
from paperlake.lake.store import Lake


class PaperlakeResource(dg.ConfigurableResource):
    """Where the inbox and the stores are, and how to parse."""

    home: str = "data"
    inboxes: list[str] = []
    mineru_dir: str | None = None
    backend: str = "auto"
    max_chunk_tokens: int = 512
    embedding_cache: str | None = None  # unset: PAPERLAKE_EMBEDDING_CACHE, else the home's cache
    milvus_uri: str | None = None  # unset: MILVUS_URI, else the home's Milvus Lite file
    lake_dir: str | None = None  # unset: PAPERLAKE_LAKE, else the home's lake

    def settings(self) -> Settings:
        home = Path(self.home).expanduser().resolve()
        return Settings.from_env(
            home=home,
            backend=self.backend,
            mineru_dir=Path(self.mineru_dir).resolve() if self.mineru_dir else None,
            max_chunk_tokens=self.max_chunk_tokens,
            milvus_uri=self.milvus_uri,  # None: MILVUS_URI, else the home's Milvus Lite file
            embedding_cache=Path(self.embedding_cache) if self.embedding_cache else None,
            lake_dir=Path(self.lake_dir) if self.lake_dir else None,
        )

    def inbox_paths(self) -> list[Path]:
        return [Path(p).expanduser().resolve() for p in self.inboxes]

    def lake(self) -> Lake:
        return Lake(self.settings().lake)


def run_inputs(context: dg.AssetExecutionContext, paperlake: PaperlakeResource) -> tuple[list[Path], Path | None]:
    """The run's inbox folders and MinerU outputs folder: its tags', else the resource's."""
    try:
        tags = context.run.tags
    except dg.DagsterError:  # the asset invoked directly, as a function: no run, no tags
        tags = {}
    inboxes = [Path(p) for p in tags[RUN_INBOXES_TAG].split(os.pathsep) if p] if RUN_INBOXES_TAG in tags else None
    mineru = Path(tags[RUN_MINERU_TAG]) if tags.get(RUN_MINERU_TAG) else None
    settings = paperlake.settings()
    return inboxes or paperlake.inbox_paths(), mineru if RUN_MINERU_TAG in tags else settings.mineru_dir


class LLMResource(dg.ConfigurableResource):
    """The project's one chat endpoint (the agent, the formula helpers and enrichment all use
    :class:`paperlake.runtime.llm.ChatClient`): an OpenAI-compatible server, its models, budget and rate. Empty
    fields fall back to the environment (OPENAI_BASE_URL, OPENAI_API_KEY, PAPERLAKE_LLM_MODEL, PAPERLAKE_VLM_MODEL,
    PAPERLAKE_LLM_BUDGET, PAPERLAKE_LLM_CONCURRENCY, PAPERLAKE_LLM_RPM); secrets stay out of the run config."""

    base_url: str = ""
    api_key: str = ""  # set in process by `paperlake ingest` from its settings; from the environment otherwise
    model: str = ""
    vlm_model: str = ""
    budget: str = ""
    concurrency: int = 0
    requests_per_minute: int = 0

    def apply(self, settings: Settings) -> Settings:
        changes = {
            name: value
            for name, value in (
                ("openai_base_url", self.base_url),
                ("openai_api_key", self.api_key),
                ("llm_model", self.model),
                ("vlm_model", self.vlm_model),
                ("llm_budget", self.budget),
                ("llm_concurrency", self.concurrency),
                ("llm_requests_per_minute", self.requests_per_minute),
            )
            if value
        }
        return replace(settings, **changes)

    @classmethod
    def from_settings(cls, settings: Settings) -> "LLMResource":
        return cls(
            base_url=settings.openai_base_url or "",
            api_key=settings.openai_api_key or "",
            model=settings.llm_model or "",
            vlm_model=settings.vlm_model or "",
            budget=settings.llm_budget or "",
            concurrency=settings.llm_concurrency,
            requests_per_minute=settings.llm_requests_per_minute or 0,
        )


def paperlake_from_env() -> PaperlakeResource:
    """The resource as `dagster dev` and the schedule see it, from the one reader of the environment
    (:meth:`paperlake.config.Settings.from_env`: PAPERLAKE_HOME, PAPERLAKE_INBOX, …)."""
    settings = Settings.from_env()
    return PaperlakeResource(
        home=str(settings.home),
        inboxes=[str(p) for p in settings.inboxes],
        mineru_dir=str(settings.mineru_dir) if settings.mineru_dir else None,
        backend=settings.backend,
        max_chunk_tokens=settings.max_chunk_tokens,
    )


def warehouse_resource(paperlake: PaperlakeResource):
    """dagster-duckdb's resource on the warehouse, read-only: assets that read the warehouse (the evaluation probes)
    open it per use, so the file swapped in by each dbt build is the one they read."""
    return DuckDBResource(database=str(paperlake.settings().warehouse), connection_config={"access_mode": "READ_ONLY"})
