"""Fit the hybrid search's reranker (``schemas/rerank_weights.json``) and report what it does on questions it never saw.

For every question of the hand-written sets (``benchmarks/findable.py``'s ``WRITTEN_SETS``, paper filter on), the
candidates the search reorders (``paperlake.vectors.search.candidates``: the first ``hybrid.rerank_pool`` of the
fused order, rules applied) are labelled by the answer's needles (``paperlake.evaluation.needles``, as findable.py
scores). Then, side by side on the same candidates, answer-bearing recall@5 of the fused order and of the reranked
one (the first ``hybrid.rerank_keep`` kept):

- ``leave_one_set_out``: for each set, the model fitted on all the others;
- ``held_out``: the ``--hold-out`` sets (default: every set written after ``LAST_FITTED_SET``), scored by the model
  fitted on every other set.
  That model is the one written to ``--weights``: the held-out sets never enter the shipped fit.

    python benchmarks/train_rerank.py [--home DIR] [--hold-out written_blind7 ...] [--no-write-weights]
                                      [--weights schemas/rerank_weights.json] [--out benchmarks/results/rerank.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.findable import WRITTEN_SETS, written_questions  # noqa: E402


def pools(store, questions: list[dict]) -> list[dict]:
    """Each question's candidates: (view, text) and whether each bears the answer."""
    from paperlake.evaluation.needles import answer_needles, contains_needle
    from paperlake.vectors.search import candidates, glued

    found = []
    for question in questions:
        needles = answer_needles(question["answer"])
        hits = candidates(store, question["question"], "text_hybrid", filter=f'pdf_id == "{question["paper_id"]}"')
        found.append(
            {
                "question": question["question"],
                "kind": question["kind"],
                "cells": [(f"{hit.table_name}.{hit.column_name}", hit.text or "") for hit in hits],
                "bearing": [any(contains_needle(hit.text or "", n) for n in needles) for hit in hits],
                "glued": glued([(hit.table_name, hit.column_name) for hit in hits], [hit.primary_key for hit in hits]),
                "pinned": [hit.placed for hit in hits],
            }
        )
    return found


def recall(model, questions: list[dict], keep: int, k: int = 5) -> dict:
    """Recall@k per kind and overall, fused order against reranked order (``model`` None: fused only)."""
    from paperlake.vectors.rerank import order

    counts = defaultdict(lambda: [0, 0, 0])  # kind -> [fused, reranked, asked]
    for question in questions:
        shown = (
            order(model, question["question"], question["cells"], keep, question["glued"], question["pinned"])
            if model
            else range(len(question["cells"]))
        )
        top = list(shown)[:k]
        for kind in (question["kind"], "all"):
            counts[kind][0] += any(question["bearing"][:k])
            counts[kind][1] += any(question["bearing"][index] for index in top)
            counts[kind][2] += 1
    return {
        kind: {"questions": n, "fused": round(a / n, 3), "reranked": round(b / n, 3)}
        for kind, (a, b, n) in sorted(counts.items())
    }


def fitted(questions: list[dict]):
    from paperlake.vectors.rerank import features, fit

    views = sorted({view for question in questions for view, _ in question["cells"]})
    rows = [
        (features(q["question"], q["cells"], views), np.asarray(q["bearing"], dtype=float))
        for q in questions
        if q["cells"]
    ]
    return fit(rows, views)


# The last set the reranker's features, pool and weights were chosen on: every set written after it is held out of
# the shipped fit by default, so that rerunning this script reproduces schemas/rerank_weights.json.
LAST_FITTED_SET = "written_blind6"


def written_after_fit() -> list[str]:
    names = list(WRITTEN_SETS)
    return names[names.index(LAST_FITTED_SET) + 1 :]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("PAPERLAKE_HOME", "data")))
    parser.add_argument("--hold-out", nargs="*", default=written_after_fit(), choices=list(WRITTEN_SETS))
    parser.add_argument("--weights", type=Path, default=REPO / "schemas" / "rerank_weights.json")
    parser.add_argument("--no-write-weights", action="store_true", help="report only")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "rerank.json")
    args = parser.parse_args()

    from paperlake.config import Settings
    from paperlake.vectors.config import load_config
    from paperlake.vectors.store import VectorStore

    settings = Settings.from_env(home=args.home.resolve())
    config = load_config()
    if not config.rerank_pool:
        raise SystemExit("hybrid.rerank_pool is 0 in the collection config: there is no pool to fit on")
    with VectorStore(settings.milvus_uri) as store:
        sets = {name: pools(store, written_questions(settings, path)) for name, path in WRITTEN_SETS.items()}
    keep = config.rerank_keep
    results = {
        "what": "answer-bearing recall@5 of the hybrid search over every view, the paper filter on: the fused order "
        f"against the reranked one (first {keep} kept, pool of {config.rerank_pool}), on questions the model was not "
        "fitted on (benchmarks/train_rerank.py)",
        "machine": platform.platform(),
        "pool": config.rerank_pool,
        "keep": keep,
        "leave_one_set_out": {},
    }
    for name, questions in sets.items():
        others = [q for other, part in sets.items() if other != name for q in part]
        results["leave_one_set_out"][name] = recall(fitted(others), questions, keep)
        line = results["leave_one_set_out"][name]["all"]
        print(f"{name:16s} fused {line['fused']:.3f}  reranked {line['reranked']:.3f}  ({line['questions']})")
    results["leave_one_set_out"]["pooled"] = {"all": _pooled(results["leave_one_set_out"], sets)}
    print("pooled          ", results["leave_one_set_out"]["pooled"]["all"])
    training = [q for name, part in sets.items() if name not in args.hold_out for q in part]
    model = fitted(training)
    results["fitted_on"] = [name for name in sets if name not in args.hold_out]
    results["held_out"] = {name: recall(model, sets[name], keep) for name in args.hold_out}
    for name in args.hold_out:
        print(
            f"held out {name}: "
            + "  ".join(
                f"{kind} {v['fused']:.3f}->{v['reranked']:.3f}" for kind, v in results["held_out"][name].items()
            )
        )
    if not args.no_write_weights:
        args.weights.write_text(json.dumps(model.to_json(), indent=1) + "\n", encoding="utf-8")
        print(f"weights: {args.weights}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"written: {args.out}")


def _pooled(per_set: dict, sets: dict) -> dict:
    """Recall@5 over every set's questions together."""
    lines = [per_set[name]["all"] for name in sets]
    asked = sum(line["questions"] for line in lines)
    shares = {
        key: round(sum(line[key] * line["questions"] for line in lines) / asked, 4) for key in ("fused", "reranked")
    }
    return {"questions": asked, **shares}


if __name__ == "__main__":
    main()
