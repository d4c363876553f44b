"""Encode each token once, side by side with truncation: the same warehouse synced into the three text collections
once per mode in one run: per way of reading a text longer than MiniLM's 256-token window, and per ONNX graph.

- ``truncate`` (before): every encodable cell is encoded on its own and cut at 256 tokens, so a page vector sees
  about a quarter of its page, and pages, sections and chunks encode the same text three times;
- ``pool-v1`` (the first pooling scheme): texts are cut into windows the model sees whole; a chunk's vector pools
  its windows, a page's and a section's pool the windows of the chunks they hold, a table's content pools its row
  lines (encoded for ``table_rows`` anyway), token-weighted, normalised; every window goes through the embedding
  cache, so a window shared by several cells is encoded once;
- ``pool-v2-int8`` (``POOLING_VERSION`` 2, on the int8 graph): the same, and a column line's vector reads its head
  (its values are in the row lines: ``paperlake.vectors.entities.HEAD_VIEWS``);
- ``pool-v3-int8`` (``POOLING_VERSION`` 3, int8): the dense collections hold no table row or column lines
  (``without_views``: BM25 finds them) and a table's content pools its outline (caption, column headers, row
  labels) instead of its row lines;
- ``pool`` (now, ``POOLING_VERSION`` 4): the same, and a reference entry's or display equation's vector is late
  chunked from the chunk that holds its text (the mean of its tokens' states in the chunk's encoding:
  ``paperlake.vectors.entities.LATE_VIEWS``), so its tokens are not encoded again; on the float graph, as the first
  two (``backend: onnx``);
- ``pool-int8``: the same on the int8 graph (``backend: onnx-int8``, the configured default).

The hybrid's fusion weight was chosen on truncated vectors, whose dense route was the weaker one; a mode that
makes the dense route stronger may want another. So each mode also runs the protocol that chose it (``retrieval.py``'s
convex sweep, BM25 weight 0.5–0.9): the weight with the best mean MRR over chunks and pages on the first 52 queries,
scored on the 40 written after them; the modes are compared at every weight of the sweep, at the configured one,
and each at its own chosen weight (all queries, and the held-out ones alone).

Each mode starts from an empty embedding cache and an empty Milvus Lite file. Reported per mode: seconds of the
vector sync, windows or cells encoded and their tokens, and page-level recall@1/@5/MRR on the labelled queries
(``benchmarks/retrieval_queries.jsonl``) for BM25, dense and the configured hybrid on the chunks and pages views,
through ``paperlake.vectors.search`` (the path `paperlake search` and the agent take). With ``pool`` and
``pool-int8`` both run, the cosine of every window's int8 vector to its float one (from the two caches).

    python benchmarks/encode_once.py [--warehouse W] [--work-dir D] [--out FILE]
        [--modes truncate,pool-v1,pool-v2-int8,pool,pool-int8]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from retrieval import (  # noqa: E402
    FUSION_CHOSEN_ON,
    METHODS,
    SWEEP,
    load_queries,
    measure_quality,
    paper_files,
    query_ranks,
    scores,
)

TEXT_COLLECTIONS = ("text_bm25_en", "text_sentence_transformers_all_minilm_l6_v2", "text_hybrid")
ENCODER = "all_minilm_l6_v2"


# mode → (long_text, backend, pooling version, whether the dense collections hold the table row lines): the
# configured ONNX graph, and its int8 quantisation (`backend: onnx-int8`); the modes with row lines dense are the
# earlier schemes, for side-by-side runs (None: as configured now, without them)
MODES = {
    "truncate": ("truncate", "onnx", 1, True),
    "pool-v1": ("pool", "onnx", 1, True),
    "pool-v2-int8": ("pool", "onnx-int8", 2, True),
    "pool-v3-int8": ("pool", "onnx-int8", 3, None),
    "pool": ("pool", "onnx", None, None),
    "pool-int8": ("pool", "onnx-int8", None, None),
}


def run_mode(mode: str, warehouse: Path, work: Path, queries: list[dict], files: dict[str, str]) -> dict:
    import duckdb

    from paperlake.vectors.config import load_config
    from paperlake.vectors.encoders import pooled_windows
    from paperlake.vectors.entities import collect_cells
    from paperlake.vectors.store import VectorStore, sync_warehouse

    long_text, backend, pooling, rows_dense = MODES[mode]
    config = load_config()
    encoder_spec = replace(config.encoders[ENCODER], long_text=long_text, backend=backend)
    config = replace(config, encoders={**config.encoders, ENCODER: encoder_spec})
    if rows_dense:
        config = replace(config, collections=tuple(replace(c, without_views=()) for c in config.collections))
    dense = [c for c in config.active_collections() if any(v.encoder == ENCODER for v in c.vectors)]
    folder = work / mode
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with VectorStore(folder / "milvus.db", config=config, cache_path=folder / "embeddings.sqlite") as store:
        encoder = store.encoders.get(ENCODER)
        with duckdb.connect(str(warehouse), read_only=True) as con:
            # a window is counted for the first view that encodes it: cells of their own text before pooled ones
            # and before the pieces of chunks (late chunked), whose windows are the chunks'
            cells = sorted(
                (c for c in collect_cells(con, pooling=pooling) if any(spec.holds(c) for spec in dense)),
                key=lambda c: (c.parts is not None, c.within is not None),
            )
            encoder.encode(["warm-up: load the model before the clock starts"])
            started = time.perf_counter()
            report = sync_warehouse(store, con, collections=TEXT_COLLECTIONS, pooling=pooling)
            seconds = time.perf_counter() - started
        by_view: dict[str, int] = {}
        if long_text == "pool":
            windows: dict[str, int] = {}  # window text → its tokens (special ones not included)
            for cell in cells:
                for w in pooled_windows(encoder, cell.parts or (cell.text,), cell.head_tokens, cell.within):
                    if w.text not in windows:
                        n = w.tokens if w.span is None else encoder.token_counts([w.text])[0] - 2
                        windows[w.text] = n
                        by_view[cell.view] = by_view.get(cell.view, 0) + n + 2
            encoded, tokens = len(windows), sum(n + 2 for n in windows.values())
        else:
            first_view: dict[str, str] = {}
            for cell in cells:
                first_view.setdefault(cell.text, cell.view)
            texts = sorted(first_view)
            counts = encoder.token_counts(texts)
            for text, n in zip(texts, counts):
                by_view[first_view[text]] = by_view.get(first_view[text], 0) + n
            encoded, tokens = len(texts), sum(counts)
        ranks = query_ranks(store, queries, files, {**{m: METHODS[m] for m in ("bm25", "dense", "hybrid")}, **SWEEP})
        quality = measure_quality(ranks)
    sweep = {view: {m: quality[view].pop(m)["mrr"] for m in SWEEP} for view in quality}
    swept = {view: {m: ranks[view].pop(m) for m in SWEEP} for view in ranks}
    return {
        "sync_seconds": round(seconds, 1),
        "failures": report.failures,
        "encoded_inputs": encoded,
        "encoded_tokens": tokens,
        "encoded_tokens_by_view": dict(sorted(by_view.items(), key=lambda kv: -kv[1])),
        "cache_misses": store.cache.stats.misses if store.cache else None,
        "quality": quality,
        "ranks": ranks,
        "fusion_weight_sweep_mrr": sweep,
        "fusion_chosen_on_first_queries": _choose_fusion(swept, ranks),
    }


def _choose_fusion(swept: dict, ranks: dict) -> dict:
    """The protocol that chose the configured fusion weight, run again for this mode's vectors: the convex BM25
    weight with the best mean MRR over the chunks and pages views on the first ``FUSION_CHOSEN_ON`` queries, scored on
    the queries after them (written later, from the papers only). A mode whose dense route is stronger may want a
    lower BM25 weight than the one chosen for truncated vectors; comparing each mode at the configured weight only
    would judge the encoding by a weight fitted to another."""

    def mrr(ranks: list) -> float:
        return sum(1 / r for r in ranks if r) / len(ranks) if ranks else 0.0

    first = {m: sum(mrr(swept[v][m][:FUSION_CHOSEN_ON]) for v in swept) / len(swept) for m in SWEEP}
    chosen = max(SWEEP, key=lambda m: first[m])  # a tie goes to the lower BM25 weight (SWEEP's order)
    return {
        "chosen": chosen,
        "mean_mrr_on_first": round(first[chosen], 3),
        "mean_mrr_on_first_by_weight": {m: round(v, 3) for m, v in first.items()},
        "held_out_mrr": {
            view: {
                "chosen": scores(swept[view][chosen][FUSION_CHOSEN_ON:])["mrr"],
                "configured": scores(ranks[view]["hybrid"][FUSION_CHOSEN_ON:])["mrr"],
                "bm25": scores(ranks[view]["bm25"][FUSION_CHOSEN_ON:])["mrr"],
            }
            for view in swept
        },
        "held_out_mrr_by_weight": {
            view: {m: scores(swept[view][m][FUSION_CHOSEN_ON:])["mrr"] for m in SWEEP} for view in swept
        },
        "ranks_at_chosen": {view: swept[view][chosen] for view in swept},
    }


PAPER_TEXT_VIEWS = ("pages.page_content", "sections.section_content", "chunks.text_content")


def _ratio(after: dict, before: dict, views: tuple[str, ...]) -> float | None:
    """Tokens ``after`` encoded for ``views`` over those ``before`` encoded (a window or text is counted for the first
    view that encodes it, so a page pooled from its chunks' windows costs the chunks' view, not its own)."""
    b = sum(before["encoded_tokens_by_view"].get(v, 0) for v in views)
    a = sum(after["encoded_tokens_by_view"].get(v, 0) for v in views)
    return round(a / b, 3) if b else None


def _mrr_difference(after: dict, before: dict, samples: int = 4000, seed: int = 0) -> dict:
    """Per view and route: MRR after minus before over the same queries, a 95% paired-bootstrap interval, and how
    many queries moved up or down (with 92 queries, one moving from rank 1 to 2 is 0.005 of MRR)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    report: dict = {}
    for view, routes in before.items():
        for route, ranks in routes.items():
            b = np.array([1 / r if r else 0.0 for r in ranks])
            a = np.array([1 / r if r else 0.0 for r in after[view][route]])
            diff = a - b
            means = diff[rng.integers(0, len(diff), size=(samples, len(diff)))].mean(axis=1)
            report.setdefault(view, {})[route] = {
                "mrr_difference": round(float(diff.mean()), 3),
                "ci95": [round(float(np.percentile(means, 2.5)), 3), round(float(np.percentile(means, 97.5)), 3)],
                "queries_better": int((diff > 0).sum()),
                "queries_worse": int((diff < 0).sum()),
            }
    return report


def graph_agreement(work: Path, float_mode: str = "pool", int8_mode: str = "pool-int8") -> dict | None:
    """Per window both modes encoded (the same texts, from each mode's embedding cache): the cosine of the int8
    graph's vector to the float graph's, and the shortest windows among the lowest."""
    import sqlite3

    import numpy as np

    from paperlake.vectors.config import load_config

    model_id = load_config().encoders[ENCODER].model_id
    vectors = {}
    for mode in (float_mode, int8_mode):
        path = work / mode / "embeddings.sqlite"
        if not path.is_file():
            return None
        with sqlite3.connect(path) as con:
            rows = con.execute(
                "select content_sha256, vector from embeddings where model_id like ?", [model_id + "|%"]
            ).fetchall()
        vectors[mode] = {sha: np.frombuffer(blob, dtype=np.float32) for sha, blob in rows}
    shared = sorted(vectors[float_mode].keys() & vectors[int8_mode].keys())
    if not shared:
        return None
    a = np.stack([vectors[float_mode][h] for h in shared])
    b = np.stack([vectors[int8_mode][h] for h in shared])
    cosine = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {
        "windows": len(shared),
        "cosine_mean": round(float(cosine.mean()), 4),
        "cosine_p1": round(float(np.percentile(cosine, 1)), 4),
        "cosine_p0.1": round(float(np.percentile(cosine, 0.1)), 4),
        "cosine_min": round(float(cosine.min()), 4),
        "windows_below_0.99": int((cosine < 0.99).sum()),
    }


def _chosen(mode: dict, start: int = 0) -> dict:
    return {
        view: {"hybrid": ranks[start:]}
        for view, ranks in mode["fusion_chosen_on_first_queries"]["ranks_at_chosen"].items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", type=Path, default=Path("data") / "warehouse.duckdb")
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--work-dir", type=Path, default=Path("data") / "bench-encode-once")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "encode_once.json")
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)} (the first is the baseline)"
    )
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown modes {unknown}: choose from {', '.join(MODES)}")

    import duckdb

    with duckdb.connect(str(args.warehouse), read_only=True) as con:
        files = paper_files(con)
    queries = load_queries(REPO / "benchmarks" / "retrieval_queries.jsonl", args.corpus)
    results: dict = {
        "machine": platform.platform(),
        "warehouse": str(args.warehouse.resolve()),
        "queries": len(queries),
        "modes": {},
    }
    for mode in modes:
        results["modes"][mode] = run_mode(mode, args.warehouse.resolve(), args.work_dir.resolve(), queries, files)
        entry = results["modes"][mode]
        print(
            f"{mode:9s} sync {entry['sync_seconds']:6.1f}s  encoded {entry['encoded_inputs']} inputs, "
            f"{entry['encoded_tokens']} tokens"
        )
        for view, methods in entry["quality"].items():
            print("   ", view, {m: q["mrr"] for m, q in methods.items()})
        chosen = entry["fusion_chosen_on_first_queries"]
        print("    fusion chosen on the first queries:", chosen["chosen"], "held out:", chosen["held_out_mrr"])
    before = results["modes"][modes[0]]
    results["ratios_to"] = modes[0]
    results["ratios"] = {
        mode: {
            "sync_seconds": round(after["sync_seconds"] / before["sync_seconds"], 3),
            "encoded_tokens": round(after["encoded_tokens"] / before["encoded_tokens"], 3),
            # the text the issue found encoded three times: pages, sections (their content) and chunks
            "encoded_tokens_page_section_chunk_text": _ratio(after, before, PAPER_TEXT_VIEWS),
            "encoded_tokens_by_view": {
                view: _ratio(after, before, (view,)) for view in before["encoded_tokens_by_view"]
            },
            "mrr_difference": _mrr_difference(after["ranks"], before["ranks"]),
            # the hybrid at every convex BM25 weight of the sweep, both modes at the same weight: after minus before
            "hybrid_mrr_difference_by_weight": {
                view: {
                    m: round(after["fusion_weight_sweep_mrr"][view][m] - before["fusion_weight_sweep_mrr"][view][m], 3)
                    for m in SWEEP
                }
                for view in before["fusion_weight_sweep_mrr"]
            },
            # each mode's hybrid at the weight the fusion protocol chooses for it (_choose_fusion): on all queries,
            # and on the held-out ones only
            "hybrid_at_chosen_fusion": {
                "chosen": [
                    before["fusion_chosen_on_first_queries"]["chosen"],
                    after["fusion_chosen_on_first_queries"]["chosen"],
                ],
                "all_queries": _mrr_difference(_chosen(after), _chosen(before)),
                "held_out": _mrr_difference(_chosen(after, FUSION_CHOSEN_ON), _chosen(before, FUSION_CHOSEN_ON)),
            },
        }
        for mode, after in results["modes"].items()
        if mode != modes[0]
    }
    if {"pool", "pool-int8"} <= set(modes):
        results["int8_vs_float_windows"] = graph_agreement(args.work_dir.resolve())
        print("int8 vs float, per window:", results["int8_vs_float_windows"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
