"""Table questions, retrieval only: HD-RAG's ensemble over row/column lines against the other methods, same stores.

Reads an ingested home (default ``$PAPERLAKE_HOME``; ``--ingest`` ingests the sample corpus into it first) and scores
every method's deterministic first retrieval on ``tests/data/airqa_tables.jsonl`` (44 hand-written questions over
13 sample papers, each gold value checked on its PDF page by ``tests/unit/test_eval_dataset.py``): answer-bearing
recall@1 and @5 (an item bears the answer when its text states the gold value as papers print it). No LLM.

The ensemble's RRF constant was chosen on the odd-numbered questions; the even-numbered ones are reported apart as
the held-out half, for hdrag under the chosen and the textbook constant (60). Results go to
``benchmarks/results/table_questions_<backend>.json``: the tables' structure depends on the parser (PyMuPDF grids, or
MinerU's HTML when its outputs are present), so run it on a home of each.

    python benchmarks/table_questions.py [--home DIR] [--ingest] [--table-lines bm25]

``--table-lines bm25`` is a what-if for the encoder-token decision of the *Time to queryable* issue: the same stores
searched as if the table row and column lines had no dense vectors (they are HD-RAG's views, not NeuSym-RAG's
encodable cells): any search of those views is BM25's (a hybrid one's dense route would find nothing, a dense-only
method would search them by BM25). Table contents
keep the vectors pooled from their row lines (without dense row lines they would be encoded from their own text).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUESTIONS = REPO / "tests" / "data" / "airqa_tables.jsonl"
METHODS = ("hdrag", "classic_rag", "recap", "neusym_rag", "two_stage_hybrid_rag")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("PAPERLAKE_HOME", "data")))
    parser.add_argument("--ingest", action="store_true", help="ingest the sample corpus into --home first")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default benchmarks/results/table_questions_<backend>.json (the backend the home's "
        "papers were parsed with)",
    )
    parser.add_argument(
        "--questions",
        type=Path,
        default=QUESTIONS,
        help="an AirQA file of table questions (default: the hand-written ones; benchmarks/heldout_tables.py writes "
        "held-out ones); the tuning halves are reported for the default file only",
    )
    parser.add_argument(
        "--table-lines",
        choices=("dense", "bm25"),
        default="dense",
        help="bm25: search as if table row and column lines had no dense vectors (a what-if; see above)",
    )
    args = parser.parse_args()

    import agent.hdrag as hdrag
    from agent.run import open_env, retrieval_only
    from paperlake.config import Settings

    settings = Settings.from_env(home=args.home.resolve())
    if args.ingest:
        from orchestration.run import ingest

        ingest([args.shared / "corpus" / "inbox"], settings)
    examples = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    tuned_on = args.questions.resolve() == QUESTIONS.resolve()
    halves = {"odd (tuning)": examples[1::2], "even (held out)": examples[0::2]} if tuned_on else {}
    import duckdb

    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        backends = sorted(b for (b,) in con.execute("select distinct backend from tables").fetchall())
    out = args.out or REPO / "benchmarks" / "results" / f"table_questions_{'+'.join(backends)}.json"
    results: dict = {
        "questions": len(examples),
        "question_file": str(args.questions.resolve().relative_to(REPO))
        if args.questions.resolve().is_relative_to(REPO)
        else str(args.questions),
        "table_backends": backends,
        "papers": len({e["anchor_pdf"][0] for e in examples}),
        "machine": platform.platform(),
        "home": str(settings.home),
        "methods": {},
        "hdrag_halves": {},
    }
    with open_env(settings) as env:
        if args.table_lines == "bm25":
            _without_dense_table_lines(env)
            results["table_lines"] = "bm25 (what-if)"
        for method in METHODS:
            started = time.perf_counter()
            at = {k: retrieval_only(examples, settings, method, k, env=env) for k in (1, 5)}
            seconds = time.perf_counter() - started
            results["methods"][method] = {
                "recall_at_1": round(at[1].recall_at_k, 3),
                "recall_at_5": round(at[5].recall_at_k, 3),
                "hit_at_5": round(at[5].hit_at_k, 3),
                "error": at[5].error,
                "ms_per_question": round(1000 * seconds / (2 * len(examples)), 1),
                "missed_at_5": [q.uuid for q in at[5].questions if not q.hit],
            }
            print(f"{method:22s} recall@1 {at[1].recall_at_k:.3f}  recall@5 {at[5].recall_at_k:.3f}")
        chosen = hdrag._RRF_K
        for rrf_k in (chosen, 60) if halves else ():
            hdrag._RRF_K = rrf_k
            for name, half in halves.items():
                scores = {k: retrieval_only(half, settings, "hdrag", k, env=env).recall_at_k for k in (1, 5)}
                results["hdrag_halves"][f"rrf_k={rrf_k} {name}"] = {
                    f"recall_at_{k}": round(v, 3) for k, v in scores.items()
                }
                print(f"hdrag rrf_k={rrf_k:<3d} {name:16s} recall@1 {scores[1]:.3f}  recall@5 {scores[5]:.3f}")
        hdrag._RRF_K = chosen
    results["hdrag_weights"] = hdrag._ensemble_weights()
    results["rrf_k"] = chosen
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written: {out}")


LINE_VIEWS = {"table_rows", "table_columns"}


def _without_dense_table_lines(env) -> None:
    """Make ``env``'s vector searches of the row and column views behave as if those cells had BM25 vectors only:
    whichever collection is asked, BM25 answers (a hybrid search's dense route would find nothing; a method whose
    collection is a dense one, as recap's and classic_rag's, would search those views by BM25 instead)."""
    bm25 = next(c.name for c in env.collections() if c.modality == "text" and c.metric.upper() == "BM25")
    search = env.vectors.search

    def searched(query, collection, table_name, column_name, filter="", limit=5):
        if table_name in LINE_VIEWS:
            collection = bm25
        return search(query, collection, table_name, column_name, filter, limit)

    env.vectors.search = searched


if __name__ == "__main__":
    main()
