"""A second look at the hybrid search's candidates: a small linear model over what the question and each cell share.

The fused routes rank a cell by BM25 (term frequency, saturated and length-normalised over the whole collection)
and by one dense vector. Neither asks the plain question "how much of what this question names does this cell
print?", and neither knows which kind of cell a question about a plot or a citation wants. Every answer the hybrid
search missed at 5 on the hand-written question sets was a ranking miss, most of them within the first 30 (6–30:
37 of 41 on 754 questions at 4f0091b). So the search keeps its first ``keep`` hits as the routes and the rules put
them, and orders the rest of its first ``pool`` candidates by a logistic score over these features of a cell:

- its place in the fused list (``1/rank`` and ``log rank``);
- ``coverage``: the share of the question's content words it prints, each word weighted by its rarity among the
  candidates (``log((n + 1) / (1 + df)) + 0.5``), so that the one cell printing the question's rare words wins;
- ``numbers``: the share of the question's numbers (tokens with a digit) it prints;
- its length (``log(1 + characters)``);
- its view (one indicator per ``table.column``), and five intents crossed with views: a question about a plot with
  a figure's cell, about a table with a table's, about an equation with an equation's, about a cited work with a
  reference's, about authors with the front matter's.

The weights (``schemas/rerank_weights.json``) are fitted by ``benchmarks/train_rerank.py`` on the hand-written
question sets named in the file, by weighted logistic regression (a cell bearing the answer is a positive); the
script reports the held-out effect (leave one set out, and a set written after the fit).
No model hub is reachable here, so no cross-encoder: this model is 30-odd numbers, computed in numpy in well under
a millisecond per candidate.
"""

from __future__ import annotations

import importlib.resources
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = ["RerankModel", "features", "fit", "load_model", "order"]

_REPO_WEIGHTS = Path(__file__).resolve().parents[2] / "schemas" / "rerank_weights.json"

_WORD = re.compile(r"[a-z0-9][a-z0-9\-.]*[a-z0-9]|[a-z0-9]")
_STOP = frozenset(
    "the a an of in on for to and or is are was were by with what which how does do did that this these those from "
    "as at be it its their they paper authors author according".split()
)
# (intent, the question's words that show it, the views it wants)
_INTENTS = (
    ("figure", re.compile(r"\b(figure|fig\.|plot|chart|diagram|axis|legend|panel|bar|curve)", re.I), ("images.",)),
    ("table", re.compile(r"\b(table|row|column)\b", re.I), ("tables.", "table_rows.", "table_columns.")),
    ("equation", re.compile(r"\b(equation|eq\.|formula|defined|symbol|denote)", re.I), ("equations.",)),
    (
        "reference",
        re.compile(r"\b(cite|cited|citing|reference|prior work|et al|title|published|venue|proceedings)", re.I),
        ("reference.",),
    ),
    ("metadata", re.compile(r"\b(affiliat|universit|institut|e-?mail|author|department|lab)", re.I), ("metadata.",)),
)
BASE_FEATURES = ("inverse_rank", "log_rank", "coverage", "numbers", "log_length")
INTENT_FEATURES = tuple(f"{name}_intent_in_view" for name, _, _ in _INTENTS)


@dataclass(frozen=True)
class RerankModel:
    """Standardisation (``mean``, ``scale``), ``weights`` and ``bias`` over :func:`feature_names` (``views``)."""

    views: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float

    def score(self, rows: np.ndarray) -> np.ndarray:
        return ((rows - self.mean) / self.scale) @ self.weights + self.bias

    def to_json(self) -> dict:
        return {
            "features": list(feature_names(self.views)),
            "views": list(self.views),
            "mean": [round(float(x), 6) for x in self.mean],
            "scale": [round(float(x), 6) for x in self.scale],
            "weights": [round(float(x), 6) for x in self.weights],
            "bias": round(float(self.bias), 6),
        }

    @classmethod
    def from_json(cls, body: dict) -> RerankModel:
        views = tuple(body["views"])
        if list(body["features"]) != list(feature_names(views)):
            raise ValueError(
                "the rerank weights were fitted on other features than this code computes: refit them "
                "(python benchmarks/train_rerank.py)"
            )
        arrays = [np.asarray(body[key], dtype=float) for key in ("mean", "scale", "weights")]
        if any(len(array) != len(body["features"]) for array in arrays):
            raise ValueError("the rerank weights' arrays do not match their feature list")
        return cls(views, *arrays, float(body["bias"]))


def feature_names(views: Sequence[str]) -> tuple[str, ...]:
    return (*BASE_FEATURES, *(f"view={view}" for view in views), *INTENT_FEATURES)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def features(query: str, candidates: Sequence[tuple[str, str]], views: Sequence[str]) -> np.ndarray:
    """One row per candidate (``(view, text)``, best first, ``view`` = ``table.column``), :func:`feature_names`'s
    columns."""
    asked = {word for word in _words(query) if word not in _STOP}
    numbers = {word for word in asked if any(char.isdigit() for char in word)}
    printed = [set(_words(text)) for _, text in candidates]
    count = len(printed) or 1
    rarity = {word: math.log((count + 1) / (1 + sum(word in words for words in printed))) + 0.5 for word in asked}
    total = sum(rarity.values()) or 1.0
    wanted_by = [(pattern.search(query) is not None, views_wanted) for _, pattern, views_wanted in _INTENTS]
    rows = []
    for rank, ((view, text), words) in enumerate(zip(candidates, printed), 1):
        row = [
            1.0 / rank,
            math.log(rank),
            sum(rarity[word] for word in asked if word in words) / total,
            sum(word in words for word in numbers) / (len(numbers) or 1),
            math.log1p(len(text)),
        ]
        row += [float(view == known) for known in views]
        row += [float(asks and view.startswith(prefixes)) for asks, prefixes in wanted_by]
        rows.append(row)
    return np.asarray(rows, dtype=float).reshape(len(rows), len(feature_names(views)))


def order(
    model: RerankModel,
    query: str,
    candidates: Sequence[tuple[str, str]],
    keep: int,
    glued: Sequence[bool] | None = None,
    pinned: Sequence[bool] | None = None,
) -> list[int]:
    """The candidates' indices in the order to show them: the first ``keep`` where they are, then the rest by the
    model's score (ties keep the fused order). ``glued[i]`` ties candidate ``i`` to the one before it (a reference
    entry to the citing sentence that brought it, a figure's words to its caption): the two move as one, at the
    better score of the two. A ``pinned`` candidate (one a rule of the search put where it is) keeps its place
    among the rest, and the others are sorted around it."""
    if len(candidates) <= keep:
        return list(range(len(candidates)))
    scores = model.score(features(query, candidates, model.views))
    units: list[list[int]] = []
    for index in range(len(candidates)):
        if glued is not None and glued[index] and units:
            units[-1].append(index)
        else:
            units.append([index])
    head: list[list[int]] = []
    while units and sum(map(len, head)) < keep:
        head.append(units.pop(0))
    stays = [pinned is not None and any(pinned[index] for index in unit) for unit in units]
    moving = sorted(
        (unit for unit, stay in zip(units, stays) if not stay),
        key=lambda unit: (-max(scores[index] for index in unit), unit[0]),
    )
    rest = [unit if stay else moving.pop(0) for unit, stay in zip(units, stays)]
    return [index for unit in head + rest for index in unit]


def fit(
    questions: Sequence[tuple[np.ndarray, np.ndarray]],
    views: Sequence[str],
    l2: float = 30.0,
    epochs: int = 2000,
    rate: float = 0.05,
) -> RerankModel:
    """Weighted logistic regression by full-batch gradient descent (deterministic): ``questions`` holds each
    question's feature rows and 0/1 labels (the cell bears the answer); positives are weighted up to the negatives'
    total, so that the few answer-bearing cells count as much as the rest."""
    rows = np.vstack([x for x, _ in questions])
    labels = np.concatenate([y for _, y in questions]).astype(float)
    mean, scale = rows.mean(0), rows.std(0) + 1e-6
    standard = (rows - mean) / scale
    positive_weight = (1 - labels).sum() / max(labels.sum(), 1.0)
    sample_weight = np.where(labels > 0, positive_weight, 1.0)
    weights, bias = np.zeros(rows.shape[1]), 0.0
    for _ in range(epochs):
        predicted = 1 / (1 + np.exp(-(standard @ weights + bias)))
        gradient = (predicted - labels) * sample_weight
        weights -= rate * (standard.T @ gradient / len(labels) + l2 * weights / len(labels))
        bias -= rate * gradient.mean()
    return RerankModel(tuple(views), mean, scale, weights, bias)


def weights_path() -> Path:
    if _REPO_WEIGHTS.is_file():
        return _REPO_WEIGHTS
    return Path(str(importlib.resources.files("schemas").joinpath("rerank_weights.json")))


@lru_cache(maxsize=4)
def _loaded(path: str, mtime_ns: int) -> RerankModel:
    return RerankModel.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def load_model(path: Path | None = None) -> RerankModel:
    """The fitted model (``schemas/rerank_weights.json`` unless ``path``), read once per version of the file."""
    path = path or weights_path()
    return _loaded(str(path), path.stat().st_mtime_ns)
