"""Entry points for the CLI and the evaluation harness: ``ask``, ``answer``, ``retrieval_only``.

``ask`` checks the LLM configuration before touching any store, so a missing endpoint is one clear line.
``ask`` and ``answer`` never raise once a question runs: a run that fails comes back as a result with status
``error`` and the reason, so an evaluation records the failed question and goes on to the next.
``retrieval_only`` needs no LLM: it runs each method's deterministic first retrieval and measures whether the
gold answer (or, for retrieval questions, the gold paper) is in what came back.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid as uuid_lib
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from rapidfuzz import fuzz

from agent.actions import describe
from agent.backends import BackendUnavailable, open_formula_backend, open_vector_backend
from agent.env import AgentEnv
from agent.evidence import answer_needles, contains_needle
from agent.formats import ACTION_FORMATS, OUTPUT_FORMATS
from agent.loop import AgentResult, LoopConfig
from agent.methods import first_retrieval, get_method, run_method
from agent.task import DEFAULT_ANSWER_FORMAT, Task
from paperlake.config import Settings
from paperlake.runtime.llm import ChatClient
from paperlake.runtime.sql_sandbox import ReadOnlyWarehouse

log = logging.getLogger(__name__)
_NOT_GOLD_KEYS = {
    "lowercase",
    "ignore_blank",
    "ndigits",
    "tolerance",
    "threshold",
    "fuzz_method",
    "ignore_order",
    "count",
    "element_type",
    "question",
    "eval_func",
    "eval_func_list",
    "scoring_points",
    "formulas",
}


@contextmanager
def open_env(
    settings: Settings,
    output_format: str = "json",
    action_format: str = "markdown",
    vectors: Any = "auto",
    formulas: Any = "auto",
    **options: Any,
) -> Iterator[AgentEnv]:
    """The environment over the built stores; ``vectors``/``formulas`` default to the real layers when present."""
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"unknown output format {output_format!r}; choose from {', '.join(OUTPUT_FORMATS)}")
    if action_format not in ACTION_FORMATS:
        raise ValueError(f"unknown action format {action_format!r}; choose from {', '.join(ACTION_FORMATS)}")
    warehouse = ReadOnlyWarehouse(settings.warehouse)
    if vectors == "auto":
        try:
            vectors = open_vector_backend(settings.milvus_uri)
        except Exception as problem:  # a missing or locked Milvus file leaves the SQL side usable
            log.warning("vector collections unavailable: %s", problem)
            vectors = None
    if formulas == "auto":
        formulas = open_formula_backend(warehouse, settings.milvus_uri)
    env = AgentEnv(
        warehouse,
        vectors,
        formulas,
        home=settings.home,
        output_format=output_format,
        action_format=action_format,
        **options,
    )
    try:
        yield env
    finally:
        env.close()


def _check_paper_ids(paper_ids: Iterable[str]) -> list[str]:
    checked = []
    for paper in paper_ids:
        try:
            checked.append(str(uuid_lib.UUID(str(paper))))
        except ValueError:
            raise ValueError(f"--paper takes a paper id (a UUID), got {paper!r}") from None
    return checked


def ask(
    question: str,
    settings: Settings,
    paper_ids: Sequence[str] | None = None,
    method: str = "neusym_rag",
    action_format: str = "markdown",
    output_format: str = "json",
    max_turns: int = 20,
    answer_format: str | None = None,
    conference: Sequence[str] | None = None,
    llm: ChatClient | None = None,
    use_cache: bool = True,
    config: LoopConfig | None = None,
) -> AgentResult:
    """Answer one question about the corpus (or about ``paper_ids``); raises ``LLMNotConfigured`` without an
    endpoint."""
    get_method(method)
    papers = _check_paper_ids(paper_ids or [])
    llm = llm or ChatClient.from_settings(settings, use_cache=use_cache)
    config = config or LoopConfig(max_turns=max_turns)
    task = Task(question, answer_format or DEFAULT_ANSWER_FORMAT, anchor_pdf=papers, conference=list(conference or []))
    with open_env(settings, output_format, action_format) as env:
        return answer(task, env, llm, method, action_format, config)


def answer(
    example: Any,
    env: AgentEnv,
    llm: ChatClient,
    method: str = "neusym_rag",
    action_format: str = "markdown",
    config: LoopConfig | None = None,
) -> AgentResult:
    """One evaluation example through one method, in an environment the caller keeps open across examples."""
    try:
        return run_method(method, example, env, llm, action_format, config)
    except Exception as problem:  # one question's failure is recorded with it and never stops the others
        log.exception("question %s failed", _example_field(example, "uuid"))
        return AgentResult(
            question=str(_example_field(example, "question") or ""),
            method=method,
            status="error",
            error=describe(problem),
            uuid=_example_field(example, "uuid"),
        )


# ---------------------------------------------------------------------------------------------------------------
# Retrieval-only metrics


@dataclass
class QuestionRetrieval:
    uuid: str | None
    tags: list[str]
    kind: str  # "answer" (gold answer text) | "paper" (gold paper) | "no_gold"
    hit: int
    recall: float
    retrieved: int
    gold: list[str] = field(default_factory=list)


@dataclass
class RetrievalMetrics:
    method: str
    k: int
    questions: list[QuestionRetrieval]
    error: str | None = None

    @property
    def scored(self) -> list[QuestionRetrieval]:
        return [q for q in self.questions if q.kind != "no_gold"]

    @property
    def hit_at_k(self) -> float:
        scored = self.scored
        return sum(q.hit for q in scored) / len(scored) if scored else 0.0

    @property
    def recall_at_k(self) -> float:
        scored = self.scored
        return sum(q.recall for q in scored) / len(scored) if scored else 0.0

    def by_tag(self) -> dict[str, dict[str, float]]:
        tags: dict[str, list[QuestionRetrieval]] = {}
        for question in self.scored:
            for tag in question.tags:
                tags.setdefault(tag, []).append(question)
        return {
            tag: {
                "count": len(qs),
                "hit_at_k": sum(q.hit for q in qs) / len(qs),
                "recall_at_k": sum(q.recall for q in qs) / len(qs),
            }
            for tag, qs in tags.items()
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "k": self.k,
            "count": len(self.questions),
            "scored": len(self.scored),
            "hit_at_k": self.hit_at_k,
            "recall_at_k": self.recall_at_k,
            "by_tag": self.by_tag(),
            "error": self.error,
            "questions": [asdict(q) for q in self.questions],
        }


def gold_values(evaluator: Any) -> list[Any]:
    """The gold answer values named in an evaluator's kwargs (recursively for conjunction/disjunction)."""
    if evaluator is None:
        return []
    if isinstance(evaluator, Mapping):
        func, kwargs = evaluator.get("eval_func"), evaluator.get("eval_kwargs") or {}
    else:
        func, kwargs = getattr(evaluator, "eval_func", None), getattr(evaluator, "eval_kwargs", None) or {}
    if func == "eval_negation":
        return []
    values: list[Any] = []
    for sub_func, sub_kwargs in zip(kwargs.get("eval_func_list") or [], kwargs.get("eval_kwargs_list") or []):
        values += gold_values({"eval_func": sub_func, "eval_kwargs": sub_kwargs})
    for key, value in kwargs.items():
        if key in _NOT_GOLD_KEYS or key == "eval_kwargs_list":
            continue
        values += _flatten(value)
    return values


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple, set)):
        return [v for item in value for v in _flatten(item)]
    if isinstance(value, Mapping):
        return [v for item in value.values() for v in _flatten(item)]
    if value is None or isinstance(value, bool):
        return []
    return [value]


def _example_field(example: Any, name: str) -> Any:
    return example.get(name) if isinstance(example, Mapping) else getattr(example, name, None)


def _score_question(example: Any, items: list[Any], env: AgentEnv) -> QuestionRetrieval:
    task = Task.from_any(example)
    evaluator = _example_field(example, "evaluator")
    gold = [g for g in gold_values(evaluator) if answer_needles(g)]
    if "retrieval" in task.tags:
        titles = env.titles(i.paper_id for i in items if i.paper_id)
        found_titles = [t.lower() for t in titles.values()]
        gold_titles = [str(g).lower() for g in gold]
        matched = [g for g in gold_titles if any(fuzz.ratio(g, t) >= 95 for t in found_titles)]
        if not gold_titles:
            return QuestionRetrieval(task.uuid, task.tags, "no_gold", 0, 0.0, len(items))
        return QuestionRetrieval(
            task.uuid,
            task.tags,
            "paper",
            int(bool(matched)),
            len(matched) / len(gold_titles),
            len(items),
            [str(g) for g in gold],
        )
    if not gold:
        return QuestionRetrieval(task.uuid, task.tags, "no_gold", 0, 0.0, len(items))
    found = [g for g in gold if any(contains_needle(i.text or "", n) for i in items for n in answer_needles(g))]
    return QuestionRetrieval(
        task.uuid, task.tags, "answer", int(bool(found)), len(found) / len(gold), len(items), [str(g) for g in gold]
    )


def retrieval_only(
    examples: Iterable[Any], settings: Settings, method: str, k: int = 5, env: AgentEnv | None = None
) -> RetrievalMetrics:
    """Answer-bearing recall@k and Hit@k of ``method``'s first retrieval over ``examples``; no LLM is called."""
    get_method(method)
    examples = list(examples)
    if env is None:
        with open_env(settings) as opened:
            return retrieval_only(examples, settings, method, k, opened)
    questions = []
    for example in examples:
        try:
            items = first_retrieval(method, example, env, k)
        except BackendUnavailable as problem:
            return RetrievalMetrics(method, k, questions, error=str(problem))
        questions.append(_score_question(example, items, env))
    return RetrievalMetrics(method, k, questions)


# ---------------------------------------------------------------------------------------------------------------
# Probe metrics: answer-bearing recall at 1 and k, and whether the evidence page was among the hits


@dataclass
class ProbeMetrics:
    """Retrieval quality of one method over probes (AirQA rows with an ``evidence`` location)."""

    method: str
    k: int
    count: int = 0
    answer_at_1: float = 0.0
    answer_at_k: float = 0.0
    page_at_k: float = 0.0
    by_kind: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _page_hit(example: Any, items: Sequence[Any]) -> int:
    evidence = _example_field(example, "evidence") or (getattr(example, "extra", {}) or {}).get("evidence") or {}
    page, papers = evidence.get("page_number"), Task.from_any(example).papers
    return int(page is not None and any(i.page_number == page and (not papers or i.paper_id in papers) for i in items))


def probe_metrics(examples: Iterable[Any], env: AgentEnv, method: str = "neusym_rag", k: int = 5) -> ProbeMetrics:
    """Answer@1 and answer@k (answer-bearing recall of the first hit and of the first ``k``) and page@k of
    ``method``'s deterministic first retrieval; no LLM is called."""
    get_method(method)
    started = time.perf_counter()
    rows: list[tuple[str, int, float, float]] = []  # kind, page hit, recall@1, recall@k
    metrics = ProbeMetrics(method, k)
    examples = list(examples)
    if hasattr(env.vectors, "prepare"):  # every question encoded in one batch, not one call per search
        env.vectors.prepare([str(_example_field(example, "question") or "") for example in examples])
    for example in examples:
        try:
            items = first_retrieval(method, example, env, k)
        except BackendUnavailable as problem:
            metrics.error = str(problem)
            break
        at_k = _score_question(example, items, env)
        if at_k.kind == "no_gold":
            continue
        at_1 = _score_question(example, items[:1], env)
        extra = getattr(example, "extra", None) or {}
        kind = str(_example_field(example, "probe_kind") or extra.get("probe_kind") or "other")
        rows.append((kind, _page_hit(example, items), at_1.recall, at_k.recall))
    metrics.seconds = round(time.perf_counter() - started, 3)

    def summary(selected: list[tuple[str, int, float, float]]) -> dict[str, float]:
        n = len(selected) or 1
        return {
            "count": len(selected),
            "answer_at_1": round(sum(r[2] for r in selected) / n, 4),
            "answer_at_k": round(sum(r[3] for r in selected) / n, 4),
            "page_at_k": round(sum(r[1] for r in selected) / n, 4),
        }

    overall = summary(rows)
    metrics.count = len(rows)
    metrics.answer_at_1, metrics.answer_at_k, metrics.page_at_k = (
        overall["answer_at_1"],
        overall["answer_at_k"],
        overall["page_at_k"],
    )
    metrics.by_kind = {kind: summary([r for r in rows if r[0] == kind]) for kind in sorted({r[0] for r in rows})}
    return metrics


def volume_quality(settings: Settings, volume: str, env: AgentEnv | None = None) -> dict[str, Any]:
    """Score a volume's probe set (``paperlake.evaluation.sets``) with each of ``settings.eval_methods``'s first
    retrievals and record the report; the first method's answer@5 is held against the threshold."""
    from paperlake.evaluation.sets import (  # deferred: polars
        quality_fingerprint,
        read_jsonl,
        record_quality,
        volume_set_path,
    )

    methods = [m.strip() for m in settings.eval_methods.split(",") if m.strip()]
    for method in methods:
        get_method(method)
    examples = read_jsonl(volume_set_path(settings, volume))
    if env is None:
        with open_env(settings, formulas=None) as opened:  # retrieval only: the formula graph is not needed
            return volume_quality(settings, volume, opened)
    results = {method: probe_metrics(examples, env, method, k=5) for method in methods}
    primary = results[methods[0]] if methods else ProbeMetrics("none", 5)
    problems = [f"{m}: {r.error}" for m, r in results.items() if r.error]
    if not examples:
        problems.append("the volume has no probes")
    passed = not problems and primary.answer_at_k >= settings.eval_min_answer_at_5
    report = {
        "volume": volume,
        "fingerprint": quality_fingerprint(settings, volume),
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "probes": len(examples),
        "method": primary.method,
        "answer_at_1": primary.answer_at_1,
        "answer_at_5": primary.answer_at_k,
        "page_at_5": primary.page_at_k,
        "threshold": settings.eval_min_answer_at_5,
        "passed": passed,
        "problems": problems,
        "methods": {m: r.to_dict() for m, r in results.items()},
    }
    record_quality(settings, volume, report)
    return report
