"""Scoring a predictions file against a dataset file, as NeuSym-RAG's own evaluation does (``paperlake eval
score``): predictions are matched by uuid, a missing one counts as wrong and is listed, and the outputs are the
authors' result shape plus the per-example scores and the wrong answers beside their gold."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paperlake.evaluation.dataset import (
    Dataset,
    Example,
    Predictions,
    Report,
    evaluate,
    gold_answer,
    load_dataset,
    read_predictions,
)
from paperlake.evaluation.functions import Judge


@dataclass(frozen=True)
class ScoredFile:
    dataset: Dataset
    predictions: Predictions
    report: Report
    predictions_path: str = ""

    @property
    def missing(self) -> list[str]:
        """Examples with no prediction (scored 0), in the dataset's order."""
        return [e.uuid for e in self.dataset.examples if e.uuid not in self.predictions.answers]

    @property
    def unmatched(self) -> list[str]:
        """Predicted uuids the dataset does not hold (or holds on a skipped line)."""
        known = {e.uuid for e in self.dataset.examples}
        return [uuid for uuid in self.predictions.answers if uuid not in known]

    def warnings(self) -> list[str]:
        lines = self.dataset.warnings()
        lines += [f"{self.predictions_path}, {problem} (skipped)" for problem in self.predictions.problems]
        if self.missing:
            shown = ", ".join(self.missing[:5]) + (", ..." if len(self.missing) > 5 else "")
            lines.append(f"{len(self.missing)} example(s) have no prediction and score 0: {shown}")
        if self.unmatched:
            lines.append(f"{len(self.unmatched)} prediction(s) match no example of the dataset, ignored")
        if self.report.not_scored:
            lines.append(
                f"{len(self.report.not_scored)} example(s) need an LLM judge and were not scored "
                f"({self.report.not_scored[0].error})"
            )
        return lines


def score_file(data: str | Path, predictions: str | Path, judge: Judge | None = None) -> ScoredFile:
    """Load both files (bad lines skipped and named) and score every example of the dataset."""
    dataset = load_dataset(data)
    read = read_predictions(predictions)
    return ScoredFile(dataset, read, evaluate(dataset.examples, read.answers, judge), str(predictions))


def write_outputs(scored: ScoredFile, out: Path) -> list[Path]:
    """``result.json`` (the authors' shape), ``scores.jsonl`` (one line per example), ``wrong.jsonl`` (each
    example scored below 0.5 with its gold and predicted answers, as the authors' ``output_path`` lists them),
    ``report.md``."""
    out.mkdir(parents=True, exist_ok=True)
    examples: dict[str, Example] = {e.uuid: e for e in scored.dataset.examples}
    answers: dict[str, Any] = scored.predictions.answers
    paths = [out / "result.json", out / "scores.jsonl", out / "wrong.jsonl", out / "report.md"]
    paths[0].write_text(json.dumps(scored.report.results(), indent=2) + "\n", encoding="utf-8")
    with open(paths[1], "w", encoding="utf-8") as scores, open(paths[2], "w", encoding="utf-8") as wrong:
        for question in scored.report.questions:
            line = {
                "uuid": question.uuid,
                "score": question.score,
                "scored": question.scored,
                "answered": question.answered,
                "eval_func": question.eval_func,
                "tags": question.tags,
                "error": question.error,
            }
            scores.write(json.dumps(line, ensure_ascii=False) + "\n")
            if question.scored and question.score < 0.5:
                example = examples[question.uuid]
                detail = {
                    "uuid": question.uuid,
                    "tags": question.tags,
                    "question": example.question,
                    "gold": gold_answer(example.evaluator),
                    "predicted": answers.get(question.uuid),
                    "answered": question.answered,
                    "error": question.error,
                }
                wrong.write(json.dumps(detail, ensure_ascii=False, default=str) + "\n")
    paths[3].write_text(scored.report.to_markdown(), encoding="utf-8")
    return paths
