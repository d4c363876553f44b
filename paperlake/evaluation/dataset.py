"""AirQA-format datasets and prediction files, and the report that scores one against the other.

A dataset is JSON Lines, one example per line (REFERENCE.md, "AirQA example format"). Fields beyond the format
(our ``gold_answer`` and ``evidence``, for instance) are kept in :attr:`Example.extra`. A prediction file holds
``{"uuid": ..., "answer": ...}`` per line.

:func:`evaluate` scores every example and never stops on one: a missing prediction scores 0, and an evaluator
that fails (misconfigured, or a judge that cannot be reached) scores 0 with the reason kept in the report.
"""

from __future__ import annotations

import inspect
import json
import uuid as uuid_lib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from paperlake.evaluation.functions import EvaluationError, Judge, get_eval_function, run_evaluator

TAG_GROUPS: dict[str, tuple[str, ...]] = {
    "question type": ("single", "multiple", "retrieval", "comprehensive"),
    "element": ("text", "table", "image", "formula", "metadata"),
    "evaluation": ("objective", "subjective"),
}
KNOWN_TAGS = frozenset(tag for tags in TAG_GROUPS.values() for tag in tags)
_FORMAT_FIELDS = ("uuid", "question", "answer_format", "tags", "anchor_pdf", "reference_pdf", "conference", "evaluator")


class DatasetError(ValueError):
    """A dataset or prediction file is malformed: the message names the file, line and field."""


@dataclass(frozen=True)
class Evaluator:
    eval_func: str
    eval_kwargs: dict[str, Any]


@dataclass(frozen=True)
class Example:
    uuid: str
    question: str
    answer_format: str
    tags: list[str]
    anchor_pdf: list[str]
    reference_pdf: list[str]
    conference: list[str]
    evaluator: Evaluator
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _FORMAT_FIELDS}
        data["evaluator"] = asdict(self.evaluator)
        return {**data, **self.extra}

    @classmethod
    def from_dict(cls, data: Any) -> Example:
        """Validate one example; :class:`DatasetError` names the offending field."""
        if not isinstance(data, dict):
            raise DatasetError(f"expected a JSON object, got {type(data).__name__}")
        missing = [name for name in _FORMAT_FIELDS if name not in data]
        if missing:
            raise DatasetError(f"missing field(s) {', '.join(missing)}")
        _require_uuid(data["uuid"], "uuid")
        if not isinstance(data["question"], str) or not data["question"].strip():
            raise DatasetError("field 'question' must be a non-empty string")
        if not isinstance(data["answer_format"], str):
            raise DatasetError("field 'answer_format' must be a string")
        for name in ("tags", "anchor_pdf", "reference_pdf", "conference"):
            _require_string_list(data[name], name)
        unknown = sorted(set(data["tags"]) - KNOWN_TAGS)
        if unknown:
            raise DatasetError(f"field 'tags': unknown tag(s) {unknown}; known: {sorted(KNOWN_TAGS)}")
        for index, pdf in enumerate(data["anchor_pdf"] + data["reference_pdf"]):
            _require_uuid(pdf, "anchor_pdf" if index < len(data["anchor_pdf"]) else "reference_pdf")
        evaluator = _parse_evaluator(data["evaluator"])
        extra = {k: v for k, v in data.items() if k not in _FORMAT_FIELDS}
        return cls(
            uuid=data["uuid"],
            question=data["question"],
            answer_format=data["answer_format"],
            tags=list(data["tags"]),
            anchor_pdf=list(data["anchor_pdf"]),
            reference_pdf=list(data["reference_pdf"]),
            conference=list(data["conference"]),
            evaluator=evaluator,
            extra=extra,
        )


def _require_uuid(value: Any, name: str) -> None:
    try:
        uuid_lib.UUID(value)
    except (TypeError, ValueError, AttributeError):
        raise DatasetError(f"field {name!r}: {value!r} is not a UUID string") from None


def _require_string_list(value: Any, name: str) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DatasetError(f"field {name!r} must be a list of strings")


def _parse_evaluator(value: Any) -> Evaluator:
    if not isinstance(value, dict) or not isinstance(value.get("eval_func"), str):
        raise DatasetError("field 'evaluator' must be an object with a string 'eval_func'")
    kwargs = value.get("eval_kwargs", {})
    if not isinstance(kwargs, dict):
        raise DatasetError("field 'evaluator.eval_kwargs' must be an object")
    try:
        _check_eval_func_names(value["eval_func"], kwargs)
    except EvaluationError as exc:
        raise DatasetError(f"field 'evaluator': {exc}") from None
    return Evaluator(value["eval_func"], kwargs)


def _check_eval_func_names(name: str, kwargs: Mapping[str, Any]) -> None:
    """The function and every function named inside it (conjunction, disjunction, negation) exist."""
    get_eval_function(name)
    nested = list(kwargs.get("eval_func_list") or [])
    nested_kwargs = list(kwargs.get("eval_kwargs_list") or [])
    if "eval_func" in kwargs:
        nested.append(kwargs["eval_func"])
        nested_kwargs.append(kwargs.get("eval_kwargs") or {})
    for index, child in enumerate(nested):
        child_kwargs = nested_kwargs[index] if index < len(nested_kwargs) else {}
        _check_eval_func_names(child, child_kwargs if isinstance(child_kwargs, Mapping) else {})


def _json_lines(path: str | Path) -> Iterable[tuple[int, Any]]:
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}, line {number}: not valid JSON: {exc}") from None


def load_examples(path: str | Path) -> list[Example]:
    """Every example of a JSON Lines dataset, validated; the first problem raises, naming line and field."""
    examples: list[Example] = []
    first_line: dict[str, int] = {}
    for number, data in _json_lines(path):
        try:
            example = Example.from_dict(data)
        except DatasetError as exc:
            raise DatasetError(f"{path}, line {number}: {exc}") from None
        if example.uuid in first_line:
            raise DatasetError(
                f"{path}, line {number}: field 'uuid': {example.uuid} already used on line {first_line[example.uuid]}"
            )
        first_line[example.uuid] = number
        examples.append(example)
    return examples


def load_predictions(path: str | Path) -> dict[str, Any]:
    """uuid → answer, from ``{"uuid": ..., "answer": ...}`` lines; a uuid may appear once."""
    answers: dict[str, Any] = {}
    for number, data in _json_lines(path):
        if not isinstance(data, dict) or not isinstance(data.get("uuid"), str) or "answer" not in data:
            raise DatasetError(f"{path}, line {number}: expected an object with a string 'uuid' and an 'answer'")
        if data["uuid"] in answers:
            raise DatasetError(f"{path}, line {number}: field 'uuid': {data['uuid']} is predicted twice")
        answers[data["uuid"]] = data["answer"]
    return answers


@dataclass(frozen=True)
class QuestionScore:
    uuid: str
    score: int
    tags: list[str]
    eval_func: str
    answered: bool
    error: str | None = None


@dataclass(frozen=True)
class TagScore:
    tag: str
    group: str
    count: int
    correct: int

    @property
    def score(self) -> float:
        return self.correct / self.count if self.count else 0.0


@dataclass(frozen=True)
class Report:
    questions: list[QuestionScore]

    @property
    def overall(self) -> float:
        return sum(q.score for q in self.questions) / len(self.questions) if self.questions else 0.0

    @property
    def by_tag(self) -> list[TagScore]:
        """Tags that occur, in the order of :data:`TAG_GROUPS`."""
        rows = []
        for group, tags in TAG_GROUPS.items():
            for tag in tags:
                tagged = [q for q in self.questions if tag in q.tags]
                if tagged:
                    rows.append(TagScore(tag, group, len(tagged), sum(q.score for q in tagged)))
        return rows

    @property
    def errors(self) -> list[QuestionScore]:
        return [q for q in self.questions if q.error]

    def to_dict(self) -> dict[str, Any]:
        return {
            "overall": self.overall,
            "count": len(self.questions),
            "correct": sum(q.score for q in self.questions),
            "unanswered": sum(not q.answered for q in self.questions),
            "errors": len(self.errors),
            "by_tag": {
                t.tag: {"group": t.group, "count": t.count, "correct": t.correct, "score": t.score} for t in self.by_tag
            },
            "questions": [asdict(q) for q in self.questions],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def to_markdown(self) -> str:
        correct = sum(q.score for q in self.questions)
        lines = [
            f"**Overall: {self.overall:.1%}** ({correct}/{len(self.questions)} correct, "
            f"{sum(not q.answered for q in self.questions)} unanswered, {len(self.errors)} evaluator errors)",
            "",
            "| group | tag | questions | correct | score |",
            "|---|---|---:|---:|---:|",
        ]
        lines += [f"| {t.group} | {t.tag} | {t.count} | {t.correct} | {t.score:.1%} |" for t in self.by_tag]
        if self.errors:
            lines += ["", "Evaluator errors (scored 0):", ""]
            lines += [f"- `{q.uuid}` ({q.eval_func}): {q.error}" for q in self.errors]
        return "\n".join(lines) + "\n"

    def to_png(self, path: str | Path) -> Path:
        """A bar per tag, coloured by tag group, with the overall score as a dashed line."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch

        rows = self.by_tag
        figure = Figure(figsize=(max(6.0, 0.8 * len(rows) + 2), 4.0), dpi=120)
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        colours = dict(zip(TAG_GROUPS, ("tab:blue", "tab:orange", "tab:green")))
        bars = axes.bar([t.tag for t in rows], [100 * t.score for t in rows], color=[colours[t.group] for t in rows])
        axes.bar_label(bars, labels=[f"{100 * t.score:.0f}%\nn={t.count}" for t in rows], fontsize=8)
        overall = axes.axhline(100 * self.overall, color="grey", linestyle="--", linewidth=1)
        axes.set_ylim(0, 115)
        axes.set_ylabel("score (%)")
        axes.set_title(f"Scores by tag ({len(self.questions)} questions)")
        handles = [Patch(color=colour, label=group) for group, colour in colours.items()]
        axes.legend(
            [*handles, overall], [*colours, f"overall {self.overall:.1%}"], loc="upper right", fontsize=8, ncols=2
        )
        figure.tight_layout()
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(target)
        return target


def _with_question(example: Example) -> dict[str, Any]:
    """LLM-judged functions take the question; AirQA lines usually carry it, ours may leave it to the example."""
    kwargs = dict(example.evaluator.eval_kwargs)
    func = get_eval_function(example.evaluator.eval_func)
    if "question" in inspect.signature(func).parameters and "question" not in kwargs:
        kwargs["question"] = example.question
    return kwargs


def evaluate(examples: Iterable[Example], predictions: Mapping[str, Any], judge: Judge | None = None) -> Report:
    """Score every example against its prediction (missing → 0; a failing evaluator → 0 with the reason)."""
    scores = []
    for example in examples:
        name = example.evaluator.eval_func
        if example.uuid not in predictions:
            scores.append(QuestionScore(example.uuid, 0, list(example.tags), name, answered=False))
            continue
        try:
            score, error = run_evaluator(name, predictions[example.uuid], _with_question(example), judge), None
        except Exception as exc:  # one broken evaluator or judge call must not stop the run
            score, error = 0, f"{type(exc).__name__}: {exc}"
        scores.append(QuestionScore(example.uuid, score, list(example.tags), name, answered=True, error=error))
    return Report(scores)
