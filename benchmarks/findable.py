"""Is every answer findable? Retrieval only (no LLM), per kind of answer, BM25, dense and hybrid side by side.

Each question is searched in every text view at once (all of a collection's entities, no table or column filter) with
the paper filter on (``pdf_id`` = the question's paper), top 5, through ``paperlake.vectors.search.search``: BM25
(``text_bm25_en``), dense (``text_sentence_transformers_all_minilm_l6_v2``) and hybrid (``text_hybrid``, the configured
fusion). A question counts as found at k when one of the first k hits' text bears its answer (the needles of
``paperlake.evaluation.needles``, as the self-evaluation scores).

The question sets:

- ``probes``: the home's offline probes (``paperlake.evaluation.probes``: generated from the warehouse, every kind,
  the evidence row checked to hold the answer), grouped by the kind of view that holds the answer;
- ``written``: ``benchmarks/findable_questions.jsonl``, questions written by hand from the PDFs of the sample's
  naacl2024 volume, each with its paper, kind and the answer string as printed;
- ``written_later``: ``benchmarks/findable_questions_later.jsonl``, 17 more written by hand from emnlp2024's PDFs
  after the named-object rules of ``paperlake.vectors.search`` were chosen, each worded apart from the text it asks
  about (no quoted strings, few of the answer sentence's words);
- ``written_heldout``: ``benchmarks/findable_questions_heldout.jsonl``, 48 questions on the seven emnlp2024 papers no
  other set asks about, written by helpers who saw the PDFs only (not the retrieval, the rules or the other sets),
  committed before any route was scored on them;
- ``written_fresh``: ``benchmarks/findable_questions_fresh.jsonl``, 48 questions on the other twelve papers (4 each,
  no figure or table named by its number, no citation marker), written the same way after the rules that
  ``written_heldout``'s misses suggested, and committed before any route was scored on them;
- ``written_blind``: ``benchmarks/findable_questions_blind.jsonl``, 100 questions on all nineteen papers (five or
  six each, about 16 per kind; about half the figure and table questions name the object by its number, a third of
  the reference questions print the citation), written the same way after the rules that ``written_fresh``'s misses
  suggested, and committed before any route was scored on them;
- ``written_blind2``: ``benchmarks/findable_questions_blind2.jsonl``, 100 more on all nineteen papers, written the
  same way (avoiding every earlier set's facts) while the rules that ``written_blind``'s misses suggested were being
  written, and committed before any route was scored on them;
- ``written_blind3``: ``benchmarks/findable_questions_blind3.jsonl``, 110 more on all nineteen papers (six each, one
  of each kind where the paper has it), written the same way after 096b888's rules were fixed, and committed
  before any route was scored on them;
- ``written_blind4``: ``benchmarks/findable_questions_blind4.jsonl``, 101 more on all nineteen papers, written the
  same way (a kind left out where the paper has none) after a9e2937's rules were fixed, and committed before any
  route was scored on them;
- ``written_blind5``: ``benchmarks/findable_questions_blind5.jsonl``, 101 more written the same way after f95aef8's
  rules and needles were fixed, and committed before any route was scored on them;
- ``written_blind6``: ``benchmarks/findable_questions_blind6.jsonl``, 100 more written the same way after 1b9fc0b's
  rules, needles and parser were fixed, and committed before any route was scored on them;
- ``written_blind7``: ``benchmarks/findable_questions_blind7.jsonl``, 95 more written the same way after 4f0091b's
  rules were fixed (six questions that repeat an earlier set's question or answer dropped), and committed before any
  route was scored on them;
- ``written_blind8``: ``benchmarks/findable_questions_blind8.jsonl``, 96 more written the same way while the
  reranker was being fitted (five that repeat an earlier set's answer on the same paper dropped), and committed
  after 4d16574's reranker and weights were fixed, before any route was scored on them;
- ``written_blind9``: ``benchmarks/findable_questions_blind9.jsonl``, 101 more written the same way after 668728c's
  search, weights and needles were fixed, and committed before any route was scored on them;
- ``heldout_tables`` (with ``--heldout-home``): ``benchmarks/heldout_table_questions.jsonl``, table questions from
  the gold tables of synthetic papers no method was tuned on (``benchmarks/heldout_tables.py``), over the home that
  holds those papers.

    python benchmarks/findable.py [--home DIR] [--ingest] [--heldout-home DIR] [--out benchmarks/results/findable.json]
                                  [--baseline RESULTS.json --baseline-label COMMIT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ROUTES = {
    "bm25": "text_bm25_en",
    "dense": "text_sentence_transformers_all_minilm_l6_v2",
    "hybrid": "text_hybrid",
    "hybrid_fused": "text_hybrid",  # the same search without the reranker (paperlake.vectors.rerank)
}
# the element a probe kind asks about (the kinds: text, table, figure, equation, metadata, reference)
PROBE_KIND = {
    "table_cell": "table",
    "sentence_number": "text",
    "sentence_name": "text",
    "figure_caption": "figure",
    "figure_text": "figure",
    "equation_symbol": "equation",
    "reference_author": "reference",
    "reference_citation": "reference",
    "author_affiliation": "metadata",
}
QUESTIONS = REPO / "benchmarks" / "findable_questions.jsonl"
HELDOUT_TABLES = REPO / "benchmarks" / "heldout_table_questions.jsonl"
# the hand-written sets, oldest first (the docstring says when and how each was written)
WRITTEN_SETS = {
    "written": QUESTIONS,
    "written_later": REPO / "benchmarks" / "findable_questions_later.jsonl",
    "written_heldout": REPO / "benchmarks" / "findable_questions_heldout.jsonl",
    "written_fresh": REPO / "benchmarks" / "findable_questions_fresh.jsonl",
    "written_blind": REPO / "benchmarks" / "findable_questions_blind.jsonl",
    "written_blind2": REPO / "benchmarks" / "findable_questions_blind2.jsonl",
    "written_blind3": REPO / "benchmarks" / "findable_questions_blind3.jsonl",
    "written_blind4": REPO / "benchmarks" / "findable_questions_blind4.jsonl",
    "written_blind5": REPO / "benchmarks" / "findable_questions_blind5.jsonl",
    "written_blind6": REPO / "benchmarks" / "findable_questions_blind6.jsonl",
    "written_blind7": REPO / "benchmarks" / "findable_questions_blind7.jsonl",
    "written_blind8": REPO / "benchmarks" / "findable_questions_blind8.jsonl",
    "written_blind9": REPO / "benchmarks" / "findable_questions_blind9.jsonl",
}


def score(store, questions: list[dict], k: int = 5) -> dict:
    """Answer-bearing recall@1 and @k per route, overall and per kind, and the questions each route missed."""
    from paperlake.evaluation.needles import answer_needles, contains_needle
    from paperlake.vectors.search import search

    found = {route: defaultdict(lambda: [0, 0, 0]) for route in ROUTES}  # kind -> [at 1, at k, asked]
    missed: dict[str, list[str]] = {route: [] for route in ROUTES}
    stored = defaultdict(lambda: [0, 0])  # kind -> [the answer is in one of the paper's cells, asked]
    texts: dict[str, list[str]] = {}
    for question in questions:
        needles = answer_needles(question["answer"])
        scope = f'pdf_id == "{question["paper_id"]}"'
        if question["paper_id"] not in texts:
            texts[question["paper_id"]] = [row.get("text") or "" for row in _cells(store, scope)]
        held = any(contains_needle(text, n) for text in texts[question["paper_id"]] for n in needles)
        for kind in (question["kind"], "all"):
            stored[kind][0] += held
            stored[kind][1] += 1
        for route, collection in ROUTES.items():
            hits = search(
                store, question["question"], collection, filter=scope, limit=k, rerank=route != "hybrid_fused"
            )
            bearing = [any(contains_needle(hit.text or "", n) for n in needles) for hit in hits]
            for kind in (question["kind"], "all"):
                found[route][kind][0] += bool(bearing[:1] and bearing[0])
                found[route][kind][1] += any(bearing)
                found[route][kind][2] += 1
            if not any(bearing):
                missed[route].append(question["question"])
    table = {
        route: {
            kind: {"questions": n, "recall_at_1": round(a1 / n, 3), f"recall_at_{k}": round(ak / n, 3)}
            for kind, (a1, ak, n) in sorted(kinds.items())
        }
        for route, kinds in found.items()
    }
    return {
        "stored": {kind: round(held / n, 3) for kind, (held, n) in sorted(stored.items())},
        "by_route": table,
        "missed": missed,
    }


def _cells(store, scope: str) -> list[dict]:
    """Every encodable text cell of one paper (the BM25 collection holds them all), paged past Milvus's query cap."""
    collection, rows, offset = ROUTES["bm25"], [], 0
    store.load(collection)
    while True:
        page = store.client.query(collection, filter=scope, output_fields=["text"], limit=5000, offset=offset)
        rows += page
        if len(page) < 5000:
            return rows
        offset += len(page)


def probe_questions(settings) -> list[dict]:
    from paperlake.evaluation.sets import read_jsonl, volume_set_path, volumes, write_probes, write_volume_set

    grouped = volumes(settings)
    for keys in grouped.values():
        for key in keys:
            write_probes(settings, key)
    questions = []
    for volume in grouped:
        write_volume_set(settings, volume)
        for example in read_jsonl(volume_set_path(settings, volume)):
            questions.append(
                {
                    "question": example["question"],
                    "paper_id": example["anchor_pdf"][0],
                    "answer": example["gold_answer"],
                    "kind": PROBE_KIND[example["probe_kind"]],
                    "probe_kind": example["probe_kind"],
                }
            )
    return questions


def written_questions(settings, path: Path = QUESTIONS) -> list[dict]:
    """The hand-written questions of ``path``, their paper ids looked up by paper key in the warehouse."""
    import duckdb

    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        ids = dict(con.execute("select paper_key, paper_id::varchar from metadata").fetchall())
    questions = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            questions.append(row | {"paper_id": ids[row["paper_key"]]})
    return questions


def heldout_table_questions() -> list[dict]:
    """benchmarks/heldout_table_questions.jsonl (written from synthetic papers' gold tables), as table questions."""
    questions = []
    for line in HELDOUT_TABLES.read_text(encoding="utf-8").splitlines():
        if line.strip():
            example = json.loads(line)
            answer = example["evidence"]["text"]  # the value as printed
            questions.append(
                {
                    "question": example["question"],
                    "paper_id": example["anchor_pdf"][0],
                    "answer": answer,
                    "kind": "table",
                }
            )
    return questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("PAPERLAKE_HOME", "data")))
    parser.add_argument("--ingest", action="store_true", help="ingest the sample corpus into --home first")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "findable.json")
    parser.add_argument(
        "--heldout-home",
        type=Path,
        help="a home holding the synthetic papers of benchmarks/heldout_tables.py: its table questions are scored "
        "too, as the set heldout_tables",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="the results of this script run from a worktree of an earlier commit on a home that commit ingested: "
        "its hybrid recall@5 per set and kind is kept beside this run's, as `baseline`",
    )
    parser.add_argument("--baseline-label", default="baseline", help="what the baseline is (e.g. the commit)")
    args = parser.parse_args()

    from paperlake.config import Settings
    from paperlake.vectors.config import load_config
    from paperlake.vectors.store import VectorStore

    settings = Settings.from_env(home=args.home.resolve())
    if args.ingest:
        from orchestration.run import ingest

        ingest([args.shared / "corpus" / "inbox"], settings)
    sets = {"probes": probe_questions(settings)}
    sets |= {name: written_questions(settings, path) for name, path in WRITTEN_SETS.items()}
    config = load_config()
    results = {
        "what": "answer-bearing recall of the first 1 and 5 hits over every text view, the paper filter on, per "
        "kind and route (benchmarks/findable.py)",
        "machine": platform.platform(),
        "hybrid": {"fusion": config.fusion, "weights": list(config.hybrid_weights)},
        "sets": {},
    }
    homes = {name: settings for name in sets}
    if args.heldout_home:
        heldout = Settings.from_env(home=args.heldout_home.resolve())
        sets["heldout_tables"], homes["heldout_tables"] = heldout_table_questions(), heldout
    for name, questions in sets.items():
        with VectorStore(homes[name].milvus_uri) as store:
            results["sets"][name] = score(store, questions)
        stored = results["sets"][name]["stored"]
        print(f"{name:8s} stored  " + "  ".join(f"{kind} {share:.2f}" for kind, share in stored.items()))
        for route, kinds in results["sets"][name]["by_route"].items():
            cells = "  ".join(f"{kind} {v['recall_at_5']:.2f} ({v['questions']})" for kind, v in kinds.items())
            print(f"{name:8s} {route:7s} {cells}")
    if args.baseline:
        earlier = json.loads(args.baseline.read_text(encoding="utf-8"))
        results["baseline"] = {
            "label": args.baseline_label,
            "sets": {
                name: {kind: v["recall_at_5"] for kind, v in part["by_route"]["hybrid"].items()}
                for name, part in earlier["sets"].items()
                if name in results["sets"]
            },
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
