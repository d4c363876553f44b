"""AirQA-format datasets and prediction files, and the report that scores one against the other.

A dataset is JSON Lines, one example per line (REFERENCE.md, "AirQA example format"); the authors' AirQA, M3SciQA
and SciDQA files load as they were released. Fields beyond the format (the authors' ``state`` and ``annotator``,
our ``gold_answer``) are kept in :attr:`Example.extra`. A prediction file holds ``{"uuid": ..., "answer": ...}``
per line.

Loading never refuses a whole file for one line: :func:`load_dataset` skips a malformed line and names it (line
number and field) in :attr:`Dataset.problems`, keeps unknown tags (counted in :attr:`Dataset.unknown_tags`) and
counts the keywords an evaluator will ignore (:attr:`Dataset.ignored_keywords`), as the authors' ``**kwargs`` do.

:func:`evaluate` scores every example and never stops on one: a missing prediction scores 0; an LLM-judged
example without a working judge is *not scored* (left out of every score and counted apart); any other evaluator
failure scores 0 with the reason kept in the report. Scores are the evaluator's: 0 or 1, M3SciQA's 0/0.5/1, or
SciDQA's 1-10 mark, and a tag's score is their mean, as in the authors' ``evaluate``.
"""

from __future__ import annotations

import inspect
import json
import uuid as uuid_lib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from paperlake.evaluation.functions import (
    EvaluationError,
    Judge,
    JudgeUnavailable,
    get_eval_function,
    ignored_keywords,
    run_evaluator,
)

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


def _json_lines(path: str | Path) -> Iterator[tuple[int, Any, str | None]]:
    """``(line number, value, None)``, or ``(line number, None, problem)`` for a line that is not JSON."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line), None
            except (json.JSONDecodeError, RecursionError) as exc:
                yield number, None, f"not valid JSON: {exc}"


def _ignored_keywords(name: str, kwargs: Mapping[str, Any]) -> Iterator[str]:
    """``eval_func: keyword`` for each keyword the evaluator and the ones nested in it will ignore."""
    for keyword in ignored_keywords(name, kwargs):
        yield f"{name}: {keyword}"
    nested = list(zip(kwargs.get("eval_func_list") or [], kwargs.get("eval_kwargs_list") or []))
    if "eval_func" in kwargs:
        nested.append((kwargs["eval_func"], kwargs.get("eval_kwargs") or {}))
    for child, child_kwargs in nested:
        if isinstance(child_kwargs, Mapping):
            yield from _ignored_keywords(child, child_kwargs)


@dataclass
class Dataset:
    """A loaded dataset: the examples that validated, and what was skipped or will be ignored."""

    path: str
    examples: list[Example] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "line N: reason" for each skipped line
    unknown_tags: Counter = field(default_factory=Counter)  # tag -> examples carrying it
    ignored_keywords: Counter = field(default_factory=Counter)  # "eval_func: keyword" -> examples

    def warnings(self) -> list[str]:
        """One line each: the skipped lines, then the unknown tags and ignored keywords with their counts."""
        lines = [f"{self.path}, {problem} (skipped)" for problem in self.problems]
        if self.unknown_tags:
            tags = ", ".join(f"{tag} ({count})" for tag, count in sorted(self.unknown_tags.items()))
            lines.append(f"{self.path}: tags outside the AirQA groups, kept and scored as their own tags: {tags}")
        if self.ignored_keywords:
            keywords = ", ".join(f"{k} ({count})" for k, count in sorted(self.ignored_keywords.items()))
            lines.append(f"{self.path}: keywords the evaluators do not take, ignored: {keywords}")
        return lines


def load_dataset(path: str | Path) -> Dataset:
    """Every example that validates; a bad line is skipped and named, never a reason to refuse the file."""
    dataset = Dataset(str(path))
    first_line: dict[str, int] = {}
    for number, data, problem in _json_lines(path):
        try:
            if problem:
                raise DatasetError(problem)
            example = Example.from_dict(data)
            if example.uuid in first_line:
                raise DatasetError(f"field 'uuid': {example.uuid} already used on line {first_line[example.uuid]}")
        except DatasetError as exc:
            dataset.problems.append(f"line {number}: {exc}")
            continue
        first_line[example.uuid] = number
        dataset.examples.append(example)
        dataset.unknown_tags.update(set(example.tags) - KNOWN_TAGS)
        dataset.ignored_keywords.update(
            set(_ignored_keywords(example.evaluator.eval_func, example.evaluator.eval_kwargs))
        )
    return dataset


def load_examples(path: str | Path) -> list[Example]:
    """The examples of :func:`load_dataset`, for callers that write the file themselves and need no report."""
    return load_dataset(path).examples


@dataclass
class Predictions:
    """uuid -> answer from a predictions file, and the lines that were skipped."""

    answers: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def read_predictions(path: str | Path) -> Predictions:
    """``{"uuid": ..., "answer": ...}`` lines; a malformed line, or a uuid predicted again, is skipped and named
    (the first answer counts)."""
    predictions = Predictions()
    first_line: dict[str, int] = {}
    for number, data, problem in _json_lines(path):
        if problem is None and (
            not isinstance(data, dict) or not isinstance(data.get("uuid"), str) or "answer" not in data
        ):
            problem = "expected an object with a string 'uuid' and an 'answer'"
        if problem is None and data["uuid"] in first_line:
            problem = f"field 'uuid': {data['uuid']} is predicted twice (line {first_line[data['uuid']]} counts)"
        if problem:
            predictions.problems.append(f"line {number}: {problem}")
            continue
        first_line[data["uuid"]] = number
        predictions.answers[data["uuid"]] = data["answer"]
    return predictions


def load_predictions(path: str | Path) -> dict[str, Any]:
    """uuid -> answer; the first problem raises :class:`DatasetError` (for files we wrote ourselves)."""
    predictions = read_predictions(path)
    if predictions.problems:
        raise DatasetError(f"{path}, {predictions.problems[0]}")
    return predictions.answers


def gold_answer(evaluator: Evaluator | Mapping[str, Any]) -> Any:
    """The gold answer an evaluator holds, in the shape a correct prediction takes: the ``gold`` /
    ``reference_answer`` / ``answer`` value, a combination's list of its parts' golds, an element evaluator's
    first element; None where the evaluator holds none (a negation)."""
    if isinstance(evaluator, Evaluator):
        name, kwargs = evaluator.eval_func, evaluator.eval_kwargs
    else:
        name, kwargs = evaluator.get("eval_func"), evaluator.get("eval_kwargs") or {}
    if name in ("eval_conjunction", "eval_disjunction"):
        parts = zip(kwargs.get("eval_func_list") or [], kwargs.get("eval_kwargs_list") or [])
        return [gold_answer({"eval_func": f, "eval_kwargs": k if isinstance(k, Mapping) else {}}) for f, k in parts]
    if name == "eval_element_included" and isinstance(kwargs.get("gold"), list) and kwargs["gold"]:
        return kwargs["gold"][0]
    for key in ("gold", "reference_answer", "answer", "reference", "formulas", "candidate_reference_answers"):
        if key in kwargs:
            value = kwargs[key]
            if name == "eval_paper_relevance_with_reference_answer" and isinstance(value, list) and value:
                return value[0]
            return value
    if "scoring_points" in kwargs:
        return kwargs["scoring_points"]
    return None


@dataclass(frozen=True)
class QuestionScore:
    uuid: str
    score: float  # 0 or 1 for most evaluators; M3SciQA 0/0.5/1, SciDQA 1-10
    tags: list[str]
    eval_func: str
    answered: bool
    error: str | None = None
    scored: bool = True  # False: an LLM-judged example without a working judge, left out of every score


@dataclass(frozen=True)
class TagScore:
    tag: str
    group: str
    count: int
    correct: float
    not_scored: int = 0

    @property
    def score(self) -> float:
        return self.correct / self.count if self.count else 0.0


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 4)


@dataclass(frozen=True)
class Report:
    questions: list[QuestionScore]

    @property
    def scored(self) -> list[QuestionScore]:
        return [q for q in self.questions if q.scored]

    @property
    def not_scored(self) -> list[QuestionScore]:
        return [q for q in self.questions if not q.scored]

    @property
    def correct(self) -> float:
        return sum(q.score for q in self.scored)

    @property
    def overall(self) -> float:
        return self.correct / len(self.scored) if self.scored else 0.0

    @property
    def graded(self) -> bool:
        """Scores beyond 0/1 (SciDQA's 1-10 marks): a score is then a mean mark, not a share."""
        return any(q.score > 1 for q in self.scored)

    @property
    def by_tag(self) -> list[TagScore]:
        """Tags that occur, in the order of :data:`TAG_GROUPS`, then any other tag (group "other") by name."""
        occurring = {tag for q in self.questions for tag in q.tags}
        ordered = [(group, tag) for group, tags in TAG_GROUPS.items() for tag in tags if tag in occurring]
        ordered += [("other", tag) for tag in sorted(occurring - KNOWN_TAGS)]
        rows = []
        for group, tag in ordered:
            tagged = [q for q in self.questions if tag in q.tags]
            scored = [q for q in tagged if q.scored]
            rows.append(TagScore(tag, group, len(scored), sum(q.score for q in scored), len(tagged) - len(scored)))
        return rows

    @property
    def errors(self) -> list[QuestionScore]:
        return [q for q in self.questions if q.error]

    def results(self) -> dict[str, dict[str, Any]]:
        """The authors' result shape: ``{"all": {"score", "count", "correct"}, "<tag>": {...}}`` over the scored
        examples; an entry with examples left unscored says how many in ``not_scored``."""
        entries = [("all", len(self.scored), self.correct, len(self.not_scored))]
        entries += [(t.tag, t.count, t.correct, t.not_scored) for t in self.by_tag]
        results: dict[str, dict[str, Any]] = {}
        for key, count, correct, not_scored in entries:
            entry = {"score": correct / count if count else 0.0, "count": count, "correct": _number(correct)}
            if not_scored:
                entry["not_scored"] = not_scored
            results[key] = entry
        return results

    def to_dict(self) -> dict[str, Any]:
        return {
            "overall": self.overall,
            "count": len(self.questions),
            "correct": _number(self.correct),
            "unanswered": sum(not q.answered for q in self.questions),
            "not_scored": len(self.not_scored),
            "errors": len(self.errors),
            "by_tag": {
                t.tag: {
                    "group": t.group,
                    "count": t.count,
                    "correct": _number(t.correct),
                    "score": t.score,
                    "not_scored": t.not_scored,
                }
                for t in self.by_tag
            },
            "questions": [asdict(q) for q in self.questions],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def format_score(self, score: float) -> str:
        return f"{score:.2f}" if self.graded else f"{score:.1%}"

    def to_markdown(self) -> str:
        scored = len(self.scored)
        lines = [
            f"**Overall: {self.format_score(self.overall)}** ({_number(self.correct)}/{scored} correct, "
            f"{sum(not q.answered for q in self.questions)} unanswered, {len(self.not_scored)} not scored, "
            f"{len(self.errors) - len(self.not_scored)} evaluator errors)",
            "",
            "| group | tag | questions | correct | score |",
            "|---|---|---:|---:|---:|",
        ]
        lines += [
            f"| {t.group} | {t.tag} | {t.count} | {_number(t.correct)} | {self.format_score(t.score)} |"
            for t in self.by_tag
        ]
        failed = [q for q in self.errors if q.scored]
        if failed:
            lines += ["", "Evaluator errors (scored 0):", ""]
            lines += [f"- `{q.uuid}` ({q.eval_func}): {q.error}" for q in failed]
        if self.not_scored:
            reasons = Counter(q.error for q in self.not_scored)
            lines += ["", f"Not scored ({len(self.not_scored)}, left out of every score):", ""]
            lines += [f"- {count} x {reason}" for reason, count in reasons.most_common()]
        return "\n".join(lines) + "\n"

    def to_png(self, path: str | Path) -> Path:
        """A bar per tag, coloured by tag group, with the overall score as a dashed line."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred: matplotlib
        from matplotlib.figure import Figure  # deferred: matplotlib
        from matplotlib.patches import Patch  # deferred: matplotlib

        rows = self.by_tag
        figure = Figure(figsize=(max(6.0, 0.8 * len(rows) + 2), 4.0), dpi=120)
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        colours = dict(zip([*TAG_GROUPS, "other"], ("tab:blue", "tab:orange", "tab:green", "tab:grey")))
        scale, unit = (1, "mean mark (1-10)") if self.graded else (100, "score (%)")
        bars = axes.bar([t.tag for t in rows], [scale * t.score for t in rows], color=[colours[t.group] for t in rows])
        labels = [f"{self.format_score(t.score)}\nn={t.count}" for t in rows]
        axes.bar_label(bars, labels=labels, fontsize=8)
        overall = axes.axhline(scale * self.overall, color="grey", linestyle="--", linewidth=1)
        axes.set_ylim(0, 11.5 if self.graded else 115)
        axes.set_ylabel(unit)
        axes.set_title(f"Scores by tag ({len(self.scored)} questions scored)")
        groups = sorted({t.group for t in rows}, key=list(colours).index)
        handles = [Patch(color=colours[group], label=group) for group in groups]
        axes.legend(
            [*handles, overall],
            [*groups, f"overall {self.format_score(self.overall)}"],
            loc="upper right",
            fontsize=8,
            ncols=2,
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


ERROR_PREFIX = "[ERROR]:"  # an agent's failed answer, scored 0 without evaluation (as the authors do)


def score_example(example: Example, prediction: Any, judge: Judge | None = None) -> QuestionScore:
    """One example against its prediction: never raises."""
    name, tags = example.evaluator.eval_func, list(example.tags)
    if str(prediction).upper().startswith(ERROR_PREFIX):
        return QuestionScore(example.uuid, 0, tags, name, answered=True, error=str(prediction)[:200])
    try:
        return QuestionScore(
            example.uuid, run_evaluator(name, prediction, _with_question(example), judge), tags, name, True
        )
    except JudgeUnavailable as exc:
        return QuestionScore(example.uuid, 0, tags, name, answered=True, error=str(exc), scored=False)
    except Exception as exc:  # one broken evaluator must not stop the run
        return QuestionScore(example.uuid, 0, tags, name, answered=True, error=f"{type(exc).__name__}: {exc}")


def evaluate(examples: Iterable[Example], predictions: Mapping[str, Any], judge: Judge | None = None) -> Report:
    """Score every example against its prediction (missing -> 0; no judge -> not scored; a failing evaluator -> 0
    with the reason)."""
    scores = []
    for example in examples:
        if example.uuid not in predictions:
            scores.append(
                QuestionScore(example.uuid, 0, list(example.tags), example.evaluator.eval_func, answered=False)
            )
        else:
            scores.append(score_example(example, predictions[example.uuid], judge))
    return Report(scores)
