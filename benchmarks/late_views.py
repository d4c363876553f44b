"""Late chunking of the cells whose text lies in a chunk, side by side with encoding them on their own.

A reference entry, a display equation's LaTeX and a caption are also text of a chunk, which is encoded anyway. Late
chunking gives such a cell the mean of its own tokens' states in the chunk's encoding (``within``,
``paperlake.vectors.encoders.pooled_windows``): no encoding of its own. This benchmark measures, on an ingested
home, what that does to finding the cell: for each offline probe kind whose evidence is a cell of one of these views
(``reference_author`` → reference entries, ``equation_symbol`` → equations, ``figure_caption`` → figure captions),
the evidence cell's rank among its paper's cells of that view when the question is searched

- ``own``: by the cell's own dense vector (MiniLM, as configured; what POOLING_VERSION 3 stored);
- ``late``: by its late-chunked vector (what POOLING_VERSION 4 stores for ``LATE_VIEWS``);
- ``bm25``: by BM25 (``text_bm25_en`` of the home's Milvus file).

Reported per view: hit@1, hit@5, MRR, the cells located in a chunk, and the tokens their own encoding costs (what
late chunking saves). The dense search is exact (numpy, within the question's paper); so is BM25's (Milvus, filtered
to the paper and view).

The cells come from the parser (PyMuPDF's reference entries and equations, or MinerU's), so run it on a home of
each: ``benchmarks/results/late_views_mineru.json`` and ``late_views_pymupdf.json``.

    python benchmarks/late_views.py [--home DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ENCODER = "all_minilm_l6_v2"
KINDS = {
    "reference_author": ("reference", "reference_content"),
    "equation_symbol": ("equations", "equation_content"),
    "figure_caption": ("images", "image_caption"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("PAPERLAKE_HOME", "data")))
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "late_views_mineru.json")
    args = parser.parse_args()

    import duckdb

    from paperlake.config import Settings
    from paperlake.evaluation.sets import read_jsonl
    from paperlake.vectors.encoders import encode_pooled
    from paperlake.vectors.entities import ChunkHosts, collect_cells
    from paperlake.vectors.search import search
    from paperlake.vectors.store import VectorStore

    settings = Settings.from_env(home=args.home.resolve())
    probes = [
        p for path in sorted((settings.home / "evaluation" / "probes").glob("*/*.jsonl")) for p in read_jsonl(path)
    ]
    if not probes:
        parser.error(f"no probes under {settings.home}/evaluation/probes: run benchmarks/probes.py on the home first")
    results: dict = {"machine": platform.platform(), "home": str(settings.home), "views": {}}
    with VectorStore(settings.milvus_uri, cache_path=None) as store:
        encoder = store.encoders.get(ENCODER)
        results["encoder"] = encoder.metadata
        with duckdb.connect(str(settings.warehouse), read_only=True) as con:
            cells = [c for c in collect_cells(con, pooling=3) if c.kind == "text"]
            hosts = ChunkHosts()
            for paper, text in con.execute(
                "select cast(ref_paper_id as varchar), text_content from chunks order by ref_paper_id, ordinal"
            ).fetchall():
                if text and text.strip():
                    hosts.add(paper, text)
        for kind, (table, column) in KINDS.items():
            view = [c for c in cells if (c.table_name, c.column_name) == (table, column)]
            within = [hosts.locate(c.pdf_id, c.text) for c in view]
            own = encode_pooled(encoder, [(c.text,) for c in view], None).vectors
            late = encode_pooled(encoder, [(c.text,) for c in view], None, within=within).vectors
            asked = [p for p in probes if p.get("probe_kind") == kind]
            queries = encoder.encode([p["question"] for p in asked])
            ranks: dict[str, list[int | None]] = {"own": [], "late": [], "bm25": []}
            for probe, query in zip(asked, queries):
                paper, gold = probe["anchor_pdf"][0], probe["evidence"]["row_id"]
                keep = [i for i, c in enumerate(view) if c.pdf_id == paper]
                for name, matrix in (("own", own), ("late", late)):
                    order = [view[keep[j]].primary_key for j in np.argsort(-(matrix[keep] @ query), kind="stable")]
                    ranks[name].append(order.index(gold) + 1 if gold in order else None)
                hits = search(
                    store, probe["question"], "text_bm25_en", table, column, f'pdf_id == "{paper}"', max(1, len(keep))
                )
                order = [h.primary_key for h in hits]
                ranks["bm25"].append(order.index(gold) + 1 if gold in order else None)
            tokens = sum(n + 2 for c in view for _, n in encoder.windows([c.text])[0])
            entry = {
                "probe_kind": kind,
                "probes": len(asked),
                "cells": len(view),
                "located_in_a_chunk": sum(1 for w in within if w),
                "own_tokens": tokens,
                **{name: _summary(r) for name, r in ranks.items()},
            }
            results["views"][f"{table}.{column}"] = entry
            print(
                f"{table}.{column:18s} {kind:17s} probes {len(asked):3d}  "
                + "  ".join(f"{n} @1 {entry[n]['hit_at_1']:.3f} @5 {entry[n]['hit_at_5']:.3f}" for n in ranks)
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"written: {args.out}")


def _summary(ranks: list[int | None]) -> dict:
    n = len(ranks) or 1
    return {
        "hit_at_1": round(sum(1 for r in ranks if r == 1) / n, 3),
        "hit_at_5": round(sum(1 for r in ranks if r and r <= 5) / n, 3),
        "mrr": round(sum(1 / r for r in ranks if r) / n, 3),
    }


if __name__ == "__main__":
    main()
