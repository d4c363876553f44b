"""LLM/VLM enrichment: NeuSym-RAG's summaries, tl;dr and tags (and HD-RAG's row/column summaries), per paper.

``kinds`` says what is asked and from which lake rows; ``runner`` asks it (budget, concurrency, one lake file per
paper). This module is the entry point the Dagster asset and `paperlake enrich` share: which papers have items to
ask (:func:`stale_papers`), what asking them would cost (:func:`dry_run`), and asking one paper
(:func:`enrich_one`). All calls go through :class:`paperlake.runtime.llm.ChatClient` (retries with backoff, the response
cache under ``$PAPERLAKE_HOME/cache/llm``, cost at ``PAPERLAKE_LLM_PRICES``), the client the agent uses too.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from paperlake.config import Settings
from paperlake.enrichment.kinds import DEFAULT_KINDS, KINDS, prompt_versions, resolve_kinds
from paperlake.enrichment.runner import (
    Budget,
    Models,
    PaperOutcome,
    enrich_paper,
    estimate,
    plan_paper,
)
from paperlake.lake.store import Lake
from paperlake.lake.views import ENRICHMENT_VIEW
from paperlake.runtime.llm import DEFAULT_MODEL, ChatClient, parse_prices

ENRICHMENT_VERSION = "enrichment-1"

__all__ = [
    "DEFAULT_KINDS",
    "ENRICHMENT_VIEW",
    "KINDS",
    "Budget",
    "PaperOutcome",
    "code_version",
    "dry_run",
    "enrich_one",
    "models_for",
    "not_configured_reason",
    "resolve_kinds",
    "stale_papers",
]


def code_version() -> str:
    """Changes with any prompt file or this stage's code: the asset's code version in the Dagster UI."""
    payload = json.dumps({"code": ENRICHMENT_VERSION, "prompts": prompt_versions()}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def not_configured_reason(settings: Settings) -> str | None:
    if settings.llm_configured:
        return None
    return (
        "no LLM endpoint configured (set OPENAI_BASE_URL and/or OPENAI_API_KEY, and PAPERLAKE_LLM_MODEL); "
        "run `paperlake enrich` once one is"
    )


def models_for(settings: Settings) -> Models:
    text = settings.llm_model or DEFAULT_MODEL
    return Models(text=text, vision=settings.vlm_model or text)


def _lake(settings: Settings):
    return Lake(settings.lake)


def stale_papers(
    settings: Settings, kinds: tuple[str, ...] | None = None, keys: list[str] | None = None, retry_errors: bool = False
) -> dict[str, int]:
    """paper key → how many items need a call, for the published papers (or ``keys``) with at least one."""
    lake = _lake(settings)
    kinds = kinds or resolve_kinds(settings.enrich_kinds)
    models = models_for(settings)
    stale = {}
    for key in sorted(keys if keys is not None else lake.paper_keys()):
        if lake.record(key) is None:
            continue
        todo, _ = plan_paper(lake, key, kinds, models, retry_errors)
        if todo:
            stale[key] = len(todo)
    return stale


def dry_run(
    settings: Settings, kinds: tuple[str, ...] | None = None, keys: list[str] | None = None, retry_errors: bool = False
) -> dict[str, Any]:
    """What enriching would ask, per paper and in total, with worst-case tokens and cost; calls nothing."""
    lake = _lake(settings)
    kinds = kinds or resolve_kinds(settings.enrich_kinds)
    models = models_for(settings)
    prices = parse_prices(settings.llm_prices)

    def price(model: str, prompt: int, completion: int) -> float:
        per_in, per_out = prices.get(model, (0.0, 0.0))
        return (prompt * per_in + completion * per_out) / 1_000_000

    papers, everything = {}, []
    for key in sorted(keys if keys is not None else lake.paper_keys()):
        if lake.record(key) is None:
            continue
        todo, _ = plan_paper(lake, key, kinds, models, retry_errors)
        if todo:
            papers[key] = estimate(todo, models, price)
            everything += todo
    return {
        "kinds": list(kinds),
        "models": {"text": models.text, "vision": models.vision},
        "papers": papers,
        "total": estimate(everything, models, price),
    }


def enrich_one(
    settings: Settings,
    paper_key: str,
    *,
    kinds: tuple[str, ...] | None = None,
    budget: Budget | None = None,
    retry_errors: bool = False,
    client_factory: Callable[[str], Any] | None = None,
) -> PaperOutcome:
    """Ask the paper's stale items and replace its enrichment file. ``client_factory(model)`` makes the chat
    clients (default: :meth:`ChatClient.from_settings` with the response cache)."""
    lake = _lake(settings)
    record = lake.record(paper_key)
    if record is None:
        raise KeyError(f"{paper_key} is not in the lake (parse it first)")
    kinds = kinds or resolve_kinds(settings.enrich_kinds)
    models = models_for(settings)
    factory = client_factory or (lambda model: ChatClient.from_settings(settings, model=model))
    text_client = factory(models.text)
    clients = {False: text_client, True: text_client if models.vision == models.text else factory(models.vision)}
    return enrich_paper(
        lake,
        paper_key,
        record.paper_id,
        kinds,
        clients,
        models,
        budget or Budget.parse(settings.llm_budget),
        concurrency=settings.llm_concurrency,
        per_minute=settings.llm_requests_per_minute,
        retry_errors=retry_errors,
    )
