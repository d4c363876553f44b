"""Running enrichment: which items need a call, a budget, bounded concurrency, and one lake file per paper.

Per paper, ``lake/enrichment/<volume>/<paper>.parquet`` holds one row per enriched item: its kind, id, content
hash, prompt version and model (what the answer was made from), the answer (summary or tags) or the reason it was
refused (``status = error``), and the call's tokens and cost. An item is asked again only when one of the four
inputs changed; error rows are kept (and not retried unless asked) so a model that refuses an item does not cost
a call on every run. The file is replaced atomically once all of the paper's calls returned, so a killed run loses
only its in-flight paper, whose answers the LLM client's response cache then replays for free.

The budget (``PAPERLAKE_LLM_BUDGET``: ``200000`` or ``200000 tokens``, or ``$1.50`` / ``1.5 usd``) is per run: a call
is made only if its worst case (estimated prompt tokens + the kind's completion limit) still fits; the items that
do not fit are *pending* (reported, not failed) and are the first ones a later run asks. Transient failures that
survive the client's retries (429, 5xx, timeouts) leave items pending too; only answers that cannot be stored (empty,
refusals, malformed tags) and requests the endpoint rejects (4xx) become error rows.
"""

from __future__ import annotations

import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from paperlake.enrichment.kinds import KINDS, BadAnswer, Item, paper_items, read_answer
from paperlake.lake.store import CONTRACT_DIR, write_table_atomic
from paperlake.lake.views import ENRICHMENT_SCHEMA, ENRICHMENT_VIEW
from paperlake.runtime.healing import set_aside
from paperlake.runtime.llm import LLMError


class BudgetError(ValueError):
    """PAPERLAKE_LLM_BUDGET cannot be read."""


@dataclass
class Budget:
    """A per-run spending limit in tokens or US dollars; None fields mean unlimited."""

    tokens: int | None = None
    usd: float | None = None
    spent_tokens: int = 0
    spent_usd: float = 0.0
    _reserved_tokens: int = 0
    _reserved_usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def parse(cls, text: str | None) -> "Budget":
        raw = (text or "").strip().lower().replace(" ", "")
        if not raw:
            return cls()
        money = re.fullmatch(r"\$?(\d+(?:\.\d+)?)(\$|usd)?", raw)
        tokens = re.fullmatch(r"(\d+)(k|m)?(tokens?)?", raw)
        if tokens and not raw.startswith("$") and "usd" not in raw:
            scale = {"k": 1_000, "m": 1_000_000}.get(tokens.group(2) or "", 1)
            return cls(tokens=int(tokens.group(1)) * scale)
        if money and (raw.startswith("$") or money.group(2)):
            return cls(usd=float(money.group(1)))
        raise BudgetError(
            f"PAPERLAKE_LLM_BUDGET must be tokens ('200000', '200k tokens') or money ('$1.50', '1.5 usd'); got {text!r}"
        )

    @property
    def limited(self) -> bool:
        return self.tokens is not None or self.usd is not None

    def reserve(self, tokens: int, usd: float) -> bool:
        with self._lock:
            if self.tokens is not None and self.spent_tokens + self._reserved_tokens + tokens > self.tokens:
                return False
            if self.usd is not None and self.spent_usd + self._reserved_usd + usd > self.usd:
                return False
            self._reserved_tokens += tokens
            self._reserved_usd += usd
            return True

    def settle(self, reserved_tokens: int, reserved_usd: float, tokens: int, usd: float) -> None:
        with self._lock:
            self._reserved_tokens -= reserved_tokens
            self._reserved_usd -= reserved_usd
            self.spent_tokens += tokens
            self.spent_usd += usd

    def remaining(self) -> str:
        """The unspent part, in the budget's own unit (what the next paper's run may spend)."""
        if self.tokens is not None:
            return str(max(0, self.tokens - self.spent_tokens))
        if self.usd is not None:
            return f"${max(0.0, self.usd - self.spent_usd):.6f}"
        return ""


@dataclass
class PaperOutcome:
    paper_key: str
    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    enriched: int = 0
    errors: int = 0
    pending: int = 0
    unchanged: int = 0
    pending_reason: str | None = None
    by_kind: dict[str, int] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        """What the Dagster UI shows on the paper's enrichment materialization."""
        return {k: v for k, v in asdict(self).items() if v not in (None, {})} | {
            "status": "enriched" if not self.pending else "pending"
        }


@dataclass
class Models:
    text: str
    vision: str

    def for_kind(self, kind: str) -> str:
        return self.vision if KINDS[kind].vision else self.text


def enrichment_path(lake_root: Path, paper_key: str) -> Path:
    return Path(lake_root) / ENRICHMENT_VIEW / f"{paper_key}.parquet"


def read_rows(lake_root: Path, paper_key: str) -> list[dict[str, Any]]:
    """The paper's enrichment rows; a file that cannot be read is set aside (its answers are asked again)."""
    path = enrichment_path(lake_root, paper_key)
    if not os.path.lexists(path):
        return []
    try:
        return pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowException) as error:
        set_aside(path, f"{type(error).__name__}: {error}")
        return []


def ensure_enrichment_contract(lake_root: Path) -> None:

    path = Path(lake_root) / ENRICHMENT_VIEW / CONTRACT_DIR / "schema.parquet"
    try:
        current = pq.read_schema(path) if path.is_file() else None
    except (OSError, pa.ArrowException):  # damaged: written again below
        current = None
    if path.is_dir():
        set_aside(path, "a directory, not a file")
    if current != ENRICHMENT_SCHEMA:
        write_table_atomic(ENRICHMENT_SCHEMA.empty_table(), path)


def _is_current(row: dict[str, Any], item: Item, models: Models, retry_errors: bool) -> bool:
    return (
        row["content_hash"] == item.content_hash
        and row["prompt_version"] == KINDS[item.kind].prompt_version
        and row["model"] == models.for_kind(item.kind)
        and (row["status"] == "ok" or not retry_errors)
    )


def plan_paper(
    lake: Any, paper_key: str, kinds: tuple[str, ...], models: Models, retry_errors: bool = False, render: bool = False
) -> tuple[list[Item], list[dict[str, Any]]]:
    """(items that need a call, rows to keep): a row is kept while its item exists with the same content, prompt and
    model; rows of kinds not asked for are kept as they are."""
    existing = {(r["kind"], r["item_id"]): r for r in read_rows(lake.root, paper_key)}
    items = paper_items(lake, paper_key, kinds, render=render)
    todo, keep = [], [r for (kind, _), r in existing.items() if kind not in kinds]
    for item in items:
        row = existing.get((item.kind, item.item_id))
        if row is not None and _is_current(row, item, models, retry_errors):
            keep.append(row)
        else:
            todo.append(item)
    return todo, keep


def estimate(items: list[Item], models: Models, price: Callable[[str, int, int], float]) -> dict[str, Any]:
    """Calls, worst-case tokens and cost of asking ``items`` (what --dry-run prints)."""
    prompt = sum(i.estimated_prompt_tokens() for i in items)
    completion = sum(KINDS[i.kind].max_tokens for i in items)
    cost = sum(price(models.for_kind(i.kind), i.estimated_prompt_tokens(), KINDS[i.kind].max_tokens) for i in items)
    by_kind: dict[str, int] = {}
    for item in items:
        by_kind[item.kind] = by_kind.get(item.kind, 0) + 1
    return {
        "calls": len(items),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cost_usd": round(cost, 6),
        "by_kind": by_kind,
    }


class _RateLimiter:
    def __init__(self, per_minute: int | None):
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self.next = 0.0
        self.lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.interval
        time.sleep(max(0.0, start - now))


def enrich_paper(
    lake: Any,
    paper_key: str,
    paper_id: str,
    kinds: tuple[str, ...],
    clients: dict[bool, Any],
    models: Models,
    budget: Budget,
    *,
    concurrency: int = 4,
    per_minute: int | None = None,
    retry_errors: bool = False,
) -> PaperOutcome:
    """Ask every item of the paper that needs it (``clients[vision]`` answers), then replace the paper's file."""
    todo, rows = plan_paper(lake, paper_key, kinds, models, retry_errors, render=True)
    outcome = PaperOutcome(paper_key, unchanged=len(rows))
    limiter = _RateLimiter(per_minute)
    lock = threading.Lock()
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")

    def ask(item: Item) -> dict[str, Any] | None:
        kind = KINDS[item.kind]
        client = clients[kind.vision]
        worst_tokens = item.estimated_prompt_tokens() + kind.max_tokens
        worst_usd = client.cost(client.model, item.estimated_prompt_tokens(), kind.max_tokens)
        if not budget.reserve(worst_tokens, worst_usd):
            with lock:
                outcome.pending += 1
                outcome.pending_reason = "budget"
            return None
        limiter.wait()
        base = {
            "paper_id": paper_id,
            "kind": item.kind,
            "item_id": item.item_id,
            "content_hash": item.content_hash,
            "prompt_version": kind.prompt_version,
            "model": client.model,
            "created_at": stamp,
        }
        try:
            response = client.complete(item.messages(), max_tokens=kind.max_tokens, temperature=0.0, top_p=1.0)
        except LLMError as problem:
            budget.settle(worst_tokens, worst_usd, 0, 0.0)
            if problem.status_code is None or problem.status_code in (408, 409, 429) or problem.status_code >= 500:
                with lock:  # the endpoint is down or overloaded: the item waits for the next run
                    outcome.pending += 1
                    outcome.pending_reason = outcome.pending_reason or f"endpoint: {problem}"[:200]
                return None
            return base | {
                "status": "error",
                "reason": f"request refused: {problem}"[:500],
                "cached": False,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cost_usd": 0.0,
            }
        usage = response.usage
        budget.settle(worst_tokens, worst_usd, usage.total_tokens, usage.cost_usd)
        with lock:
            outcome.calls += 1
            outcome.cached_calls += int(response.cached)
            outcome.prompt_tokens += usage.prompt_tokens
            outcome.completion_tokens += usage.completion_tokens
            outcome.cost_usd += usage.cost_usd
        spent = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cost_usd": usage.cost_usd,
            "cached": response.cached,
        }
        try:
            summary, tags = read_answer(item.kind, response.text)
        except BadAnswer as problem:
            return base | spent | {"status": "error", "reason": str(problem)}
        return base | spent | {"status": "ok", "summary": summary, "tags": tags}

    if todo:
        with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="enrich") as pool:
            answered = list(pool.map(ask, todo))
        for row in answered:
            if row is None:
                continue
            rows.append(row)
            if row["status"] == "ok":
                outcome.enriched += 1
                outcome.by_kind[row["kind"]] = outcome.by_kind.get(row["kind"], 0) + 1
            else:
                outcome.errors += 1
    ensure_enrichment_contract(lake.root)
    table = pa.Table.from_pylist(
        [{name: row.get(name) for name in ENRICHMENT_SCHEMA.names} for row in rows], schema=ENRICHMENT_SCHEMA
    )
    if todo or not enrichment_path(lake.root, paper_key).exists():
        write_table_atomic(table, enrichment_path(lake.root, paper_key))
    outcome.cost_usd = round(outcome.cost_usd, 8)
    return outcome
