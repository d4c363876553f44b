"""Write benchmarks/README.md from benchmarks/results/*.json: each benchmark's current figures and the machine it
ran on, nothing else (the history of a figure is in git).

    python benchmarks/make_readme.py           # rewrite benchmarks/README.md
    python benchmarks/make_readme.py --check   # exit 1 when the committed page is not what the results give

tests/test_benchmarks_readme.py runs the check, so the page cannot drift from the results files. Standard library
only: the test imports this file directly.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE / "README.md"
COMMAND = "python benchmarks/make_readme.py"

Section = Callable[[dict[str, Any]], list[str]]


def num(value: Any) -> str:
    """A figure as the results file holds it: integers with thousands separators, floats to six digits."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.6g}" if abs(value) >= 1000 else f"{value:.6g}"
    return str(value)


def table(headers: list[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(num(cell) for cell in row) + " |" for row in rows]
    return lines + [""]


def machine(data: dict[str, Any]) -> str:
    """What the file records of the machine: platform, CPUs, Python, runtimes, load during the run."""
    parts: list[str] = []
    if "machine" not in data and "environment" not in data:  # a file of several runs (scale.json): the first's
        runs = [value for value in data.values() if isinstance(value, dict) and "machine" in value]
        data = runs[0] if runs else data
    recorded = data.get("machine")
    environment = data.get("environment") if isinstance(data.get("environment"), dict) else {}
    if isinstance(recorded, str):
        parts.append(f"`{recorded}`")
    elif environment.get("machine"):
        parts.append(f"`{environment['machine']}`")
    details = recorded if isinstance(recorded, dict) else environment
    cpus = data.get("cpus") or details.get("cpus")
    if cpus:
        parts.append(f"{cpus} CPUs")
    if details.get("python"):
        parts.append(f"Python {details['python']}")
    for runtime in ("onnxruntime", "torch"):
        if environment.get(runtime):
            parts.append(f"{runtime} {environment[runtime]}")
    load = environment.get("load_average_1min_during_run")
    if isinstance(load, dict) and "mean" in load:
        parts.append(f"1-minute load average during the run {num(load['mean'])} (max {num(load.get('max'))})")
    return ", ".join(parts) if parts else "not recorded in the results file"


def ingest(data: dict[str, Any]) -> list[str]:
    lines = [f"{num(data['papers'])} papers, {num(data['pages'])} pages (the sample corpus).", ""]
    alone = [
        ("PyMuPDF parser, every PDF", data.get("parse_pymupdf")),
        ("reading MinerU outputs", data.get("parse_mineru")),
        ("quality gates", data.get("quality_gates")),
    ]
    lines += table(
        ["parse alone", "seconds", "pages/s"],
        [(name, part["seconds"], part["pages_per_second"]) for name, part in alone if part],
    )
    flash = data.get("pymupdf_vs_mineru_flash") or {}
    if flash.get("measured") and flash.get("anchor"):
        speeds, api, cli = flash["mineru_flash_pages_per_second"], flash["in_process"], flash["cli_server"]
        lines += [
            f"MinerU's offline flash tier ({flash['mineru_version'].split(' Python')[0]}) on the {flash['pdfs']} PDFs "
            f"both ways could parse offline ({num(flash['pages'])} pages), timed two ways in the same run: its Python "
            f"API in process (`{api.get('call', 'doc_analyze')}`, timed after import, warm), the **anchor**, "
            f"{num(speeds['in_process'])} pages/s; its CLI through a local server "
            f"{num(speeds['cli_server'])} pages/s net of the CLI's per-call overhead "
            f"({num(cli.get('cli_overhead_seconds_per_call'))} s). Our parser on the same PDFs "
            f"{num(flash['pymupdf_pages_per_second_same_pdfs'])} pages/s, **{num(flash['ratio'])}x** the anchor "
            f"(target {num(flash['target'])}x), {num(flash['ratio_vs_cli_server'])}x the CLI+server path.",
            "",
        ]
    elif flash.get("measured"):
        lines += [
            f"MinerU's offline flash tier ({flash['mineru_version'].split(' Python')[0]}) on the {flash['pdfs']} PDFs "
            f"it could parse offline ({num(flash['pages'])} pages), through its CLI and local server only (this run "
            f"predates the in-process anchor): {num(flash['pages_per_second'])} pages/s, "
            f"{num(flash['pages_per_second_net_of_cli'])} net of its CLI's per-call overhead; our parser on the same "
            f"PDFs {num(flash['pymupdf_pages_per_second_same_pdfs'])} pages/s, **{num(flash['ratio'])}x** "
            f"(target {num(flash['target'])}x).",
            "",
        ]
    runs = [
        ("cold (PyMuPDF, empty caches)", "end_to_end_cold"),
        ("warm (fresh home, shared embedding cache)", "end_to_end_warm"),
        ("cold, float encoder graph", "end_to_end_cold_float"),
        ("cold, one volume (median of rounds)", "end_to_end_cold_one_volume"),
        ("MinerU outputs, every paper", "ingest_mineru_outputs"),
    ]
    present = [(name, data[key]) for name, key in runs if key in data]
    lines += [
        "A full ingest (`paperlake ingest` as it runs, each in a new process); the ratios are against MinerU flash's "
        "parse alone, timed in the same run: in process (its Python API, the anchor; – where a run predates it) and "
        "through its CLI and local server:",
        "",
    ]
    lines += table(
        [
            "ingest",
            "papers",
            "pages",
            "seconds",
            "pages/s",
            "vs MinerU in process",
            "queryable vs in process",
            "vs MinerU CLI+server",
            "queryable vs CLI+server",
            "encoder",
        ],
        [
            (
                name,
                run["published"],
                run["pages"],
                run["step_seconds"]["total"],
                run["pages_per_second"],
                _versus(run, "vs_mineru_flash", "in_process"),
                _versus(run, "queryable_vs_mineru_flash", "in_process"),
                _versus(run, "vs_mineru_flash", "cli_server"),
                _versus(run, "queryable_vs_mineru_flash", "cli_server"),
                run.get("minilm_backend"),
            )
            for name, run in present
        ],
    )
    stages = [stage for stage in present[0][1]["step_seconds"] if stage != "total"] if present else []
    lines += ["Seconds per stage:", ""]
    lines += table(
        ["ingest", *stages], [(name, *(run["step_seconds"].get(s) for s in stages)) for name, run in present]
    )
    volume = data.get("end_to_end_cold_one_volume") or {}
    if volume.get("run_totals") and "mineru_flash_in_process_pages_per_second" in volume:
        medians = volume["mineru_flash_median"]
        lines += [
            f"The {volume['volume']} volume alone ({volume['pdfs']} PDFs, {volume['pages']} pages), "
            f"{volume['of_runs']} rounds, each MinerU flash's parse of those PDFs both ways then our cold ingest: ours "
            + ", ".join(f"{num(total)} s" for total in volume["run_totals"])
            + "; MinerU in process "
            + ", ".join(num(speed) for speed in volume["mineru_flash_in_process_pages_per_second"] or [])
            + " pages/s, through its CLI and server "
            + ", ".join(num(speed) for speed in volume["mineru_flash_cli_server_pages_per_second"] or [])
            + " pages/s net; each round against in process "
            + ", ".join(f"{num(ratio)}x" for ratio in volume["run_vs_mineru_flash_in_process"])
            + f"; median against median **{num(volume.get('vs_mineru_flash_in_process'))}x** in process "
            f"({num(medians['in_process'])} pages/s), {num(volume.get('vs_mineru_flash_cli_server'))}x CLI+server "
            f"({num(medians['cli_server'])} pages/s).",
            "",
        ]
    elif volume.get("run_totals"):
        lines += [
            f"The {volume['volume']} volume alone ({volume['pdfs']} PDFs, {volume['pages']} pages), "
            f"{volume['of_runs']} rounds, each MinerU flash's parse of those PDFs (CLI and server) then our cold "
            "ingest: ours "
            + ", ".join(f"{num(total)} s" for total in volume["run_totals"])
            + "; flash "
            + ", ".join(num(speed) for speed in volume["mineru_flash_pages_per_second_net"])
            + " pages/s net; each round against its flash "
            + ", ".join(f"{num(ratio)}x" for ratio in volume["run_vs_mineru_flash"])
            + f"; median against median **{num(volume['vs_mineru_flash'])}x**.",
            "",
        ]
    if data.get("peak_rss_mb"):
        rss = data["peak_rss_mb"]
        lines += [f"Peak resident memory: {num(rss['self'])} MB (process), {num(rss['children'])} MB (children).", ""]
    return lines


def _versus(run: dict[str, Any], key: str, way: str) -> str:
    """A ratio against one way of timing MinerU flash; a run from before the in-process anchor has the CLI+server
    ratio under the bare key."""
    value = run.get(f"{key}_{way}", run.get(key) if way == "cli_server" else None)
    return f"{num(value)}x" if value is not None else "–"


def parse_fidelity(data: dict[str, Any]) -> list[str]:
    lines = [
        f"Gold set `tests/data/synthetic/`: {data['documents']} papers, {data['pages']} pages, positions written by "
        "TeX. Recall / precision at IoU ≥ 0.5 on the same page:",
        "",
    ]
    rows = []
    for name, detector in data["detectors"].items():
        grids = detector.get("table_grids", {})
        latex = detector.get("equation_latex")
        rows.append(
            (
                name,
                f"{num(detector['tables']['recall'])} / {num(detector['tables']['precision'])}",
                f"{num(detector['figures']['recall'])} / {num(detector['figures']['precision'])}",
                f"{num(detector['equations']['recall'])} / {num(detector['equations']['precision'])}",
                detector.get("captions", {}).get("right_of_gold"),
                grids.get("exact_of_gold"),
                round(latex["equal"] / latex["matched"], 3) if latex and latex.get("matched") else None,
                detector.get("pages_per_second"),
            )
        )
    lines += table(
        ["detector", "tables", "figures", "equations", "captions right", "exact grids", "LaTeX equal", "pages/s"], rows
    )
    return lines + ["(0 captions and grids: the detector attaches no caption, or gives no cell grid.)", ""]


def latex(data: dict[str, Any]) -> list[str]:
    numbers = data.get("equation_numbers", {})
    return [
        f"Glyph-rebuilt LaTeX against MinerU's on {data['total_equations']} display equations: matched "
        f"{num(data['matched_share'])}, identical after normalisation {num(data['identical_normalised_share'])}, "
        f"similarity ≥ 0.9 {num(data['similarity_at_least_0.9_share'])}, "
        f"mean similarity {num(data['similarity_mean'])}; "
        f"equation numbers: {num(numbers.get('ours_same_number'))} of MinerU's {num(numbers.get('mineru_has_number'))} "
        f"the same; {num(data['seconds_per_equation']['median'])} s per equation (median).",
        "",
    ]


def retrieval(data: dict[str, Any]) -> list[str]:
    warehouse = data["warehouse"]
    fusion = data["hybrid_config"]
    lines = [
        f"{data['queries']['count']} labelled queries (`benchmarks/retrieval_queries.jsonl`) over a warehouse of "
        f"{warehouse['papers']} papers, {num(warehouse['text_cells'])} text cells; hybrid = {fusion['fusion']} "
        f"fusion, weights {'/'.join(num(w) for w in fusion['weights'])}.",
        "",
    ]
    held = data.get("held_out_queries", {}).get("quality", {})
    rows = []
    for view, routes in data["quality"].items():
        for route, scores in routes.items():
            held_out = held.get(view, {}).get(route, {})
            rows.append((view, route, scores["recall@1"], scores["recall@5"], scores["mrr"], held_out.get("mrr")))
    lines += table(["view", "route", "recall@1", "recall@5", "MRR", "MRR, held-out queries"], rows)
    better = data.get("hybrid_vs_better_route", {})
    if better:
        lines += [
            "Hybrid minus the better single route (MRR, 95% paired-bootstrap interval): "
            + "; ".join(
                f"{view} {num(row['mrr_difference'])} [{num(row['ci95'][0])}, {num(row['ci95'][1])}] "
                f"against {row['better_single_route']}"
                for view, row in better.items()
            )
            + ".",
            "",
        ]
    latency = []
    for name, part in (("corpus", data.get("corpus")), ("100k entities", data.get("synthetic"))):
        if part:
            chunks = part["latency_chunks_view"]
            latency.append(
                (
                    name,
                    *(chunks[route]["p50_ms"] for route in ("bm25", "dense", "hybrid")),
                    *(chunks[route]["p95_ms"] for route in ("bm25", "dense", "hybrid")),
                )
            )
    lines += ["Search latency over the chunks view (ms):", ""]
    lines += table(
        ["collection size", "BM25 p50", "dense p50", "hybrid p50", "BM25 p95", "dense p95", "hybrid p95"], latency
    )
    encoding = data.get("encoding", {})
    compute = data.get("encoding_compute", {}).get("variants", {})
    if encoding.get("variants"):
        lines += [f"Encoder throughput ({encoding['model']}, configured `{encoding['configured']}`):", ""]
        lines += table(
            ["variant", "cells/s, real mix", "tokens/s, real mix", "cells/s, ≤ 32 tokens", "cells/s, long", "GFLOP/s"],
            [
                (
                    name,
                    variant["mix_cells_per_s"],
                    variant["mix_tokens_per_s"],
                    variant["short_le_32_tokens_cells_per_s"],
                    variant["long_cells_per_s"],
                    compute.get(name, {}).get("achieved_gflops"),
                )
                for name, variant in encoding["variants"].items()
            ],
        )
    return lines


def encode_once(data: dict[str, Any]) -> list[str]:
    lines = [f"The same warehouse synced once per mode, each from an empty cache ({data['queries']} queries):", ""]
    rows = []
    for mode, run in data["modes"].items():
        quality = run.get("quality", {})
        mrr = {view: {route: scores.get("mrr") for route, scores in routes.items()} for view, routes in quality.items()}
        rows.append(
            (
                mode,
                run["sync_seconds"],
                run["encoded_inputs"],
                run["encoded_tokens"],
                mrr.get("chunks.text_content", {}).get("dense"),
                mrr.get("pages.page_content", {}).get("dense"),
                mrr.get("chunks.text_content", {}).get("hybrid"),
                mrr.get("pages.page_content", {}).get("hybrid"),
            )
        )
    lines += table(
        ["mode", "sync s", "windows", "tokens", "dense MRR chunks", "dense MRR pages", "hybrid chunks", "hybrid pages"],
        rows,
    )
    chosen = [
        (mode, run["fusion_chosen_on_first_queries"])
        for mode, run in data["modes"].items()
        if "fusion_chosen_on_first_queries" in run
    ]
    if chosen:
        lines += [
            "Fusion weight chosen on the first queries, per mode: "
            + "; ".join(f"{mode} {choice.get('chosen')}" for mode, choice in chosen)
            + ".",
            "",
        ]
    windows = data.get("int8_vs_float_windows")
    if windows:
        lines += [
            f"Int8 against float window vectors ({num(windows['windows'])} windows): cosine mean "
            f"{num(windows['cosine_mean'])}, p1 {num(windows['cosine_p1'])}, min {num(windows['cosine_min'])}.",
            "",
        ]
    return lines


def late_chunking(data: dict[str, Any]) -> list[str]:
    lines = [
        f"Table-row vectors on {num(data['rows'])} rows of {data['tables']} tables, dense retrieval on the "
        f"{data['questions']} table questions (encoder `{data['encoder']['backend']}`):",
        "",
    ]
    return lines + table(
        ["variant", "tokens", "recall@1", "recall@5", "MRR"],
        [
            (name, v["tokens"], v["all"]["recall@1"], v["all"]["recall@5"], v["all"]["mrr"])
            for name, v in data["variants"].items()
        ],
    )


def late_views(data: dict[str, Any]) -> list[str]:
    lines = ["Each probe's evidence cell ranked among its paper's cells of the view (hit@1 / hit@5):", ""]
    rows = []
    for view, part in data["views"].items():
        rows.append(
            (
                view,
                part["probes"],
                *(f"{num(part[k]['hit_at_1'])} / {num(part[k]['hit_at_5'])}" for k in ("own", "late", "bm25")),
            )
        )
    return lines + table(["view", "probes", "own vector", "late chunked", "BM25"], rows)


def table_questions(data: dict[str, Any]) -> list[str]:
    source = data.get("question_file", "tests/data/airqa_tables.jsonl")
    if source == "tests/data/airqa_tables.jsonl":
        asked = f"{data['questions']} hand-written table questions on {data['papers']} papers"
    else:
        asked = (
            f"{data['questions']} held-out table questions (`{source}`, written by `heldout_tables.py` from the gold "
            f"tables of {data['papers']} synthetic papers of a seed no method was tuned on)"
        )
    lines = [f"{asked}, retrieval only, tables from {', '.join(data['table_backends'])}:", ""]
    lines += table(
        ["method", "recall@1", "recall@5", "ms per question"],
        [(m, r["recall_at_1"], r["recall_at_5"], r.get("ms_per_question")) for m, r in data["methods"].items()],
    )
    halves = data.get("hdrag_halves")
    if halves:
        lines += [
            "hdrag on the halves (recall@1 / @5): "
            + "; ".join(f"{name} {num(r['recall_at_1'])} / {num(r['recall_at_5'])}" for name, r in halves.items())
            + ".",
            "",
        ]
    return lines


def table_lines_bm25(data: dict[str, Any]) -> list[str]:
    lines = ["Table questions, recall@1 / @5, per table source and store scheme:", ""]
    rows = []
    for source, schemes in data["table_questions"].items():
        for scheme, methods in schemes.items():
            rows.append(
                (
                    source,
                    scheme,
                    *(
                        f"{num(methods[m]['recall_at_1'])} / {num(methods[m]['recall_at_5'])}" if m in methods else "–"
                        for m in ("hdrag", "recap", "neusym_rag", "classic_rag")
                    ),
                )
            )
    lines += table(["tables", "scheme", "hdrag", "recap", "neusym_rag", "classic_rag"], rows)
    tokens = data.get("encoded_tokens")
    if tokens:
        lines += ["Tokens encoded on the sample: " + ", ".join(f"{k} {num(v)}" for k, v in tokens.items()) + ".", ""]
    return lines


def probes(data: dict[str, Any]) -> list[str]:
    lines = [
        f"{data['probes']} offline probes over {data['papers']} papers ("
        + ", ".join(f"{kind} {n}" for kind, n in data["by_kind"].items())
        + f"), generated in {num(data['generation_seconds'])} s; each method's first retrieval:",
        "",
    ]
    rows = []
    for volume, part in data["volumes"].items():
        for method, scores in part["methods"].items():
            rows.append(
                (volume, part["probes"], method, scores["answer_at_1"], scores["answer_at_5"], scores["page_at_5"])
            )
    lines += table(["volume", "probes", "method", "answer@1", "answer@5", "page@5"], rows)
    gate = data.get("gate")
    if gate:
        lines += [
            "The suite's regression gate holds each volume within 0.05 of: "
            + "; ".join(f"{v} {g['method']} answer@5 {num(g['answer_at_5'])}" for v, g in gate.items())
            + ".",
            "",
        ]
    return lines


def findable(data: dict[str, Any]) -> list[str]:
    hybrid = data.get("hybrid", {})
    lines = [
        "Answer-bearing recall@5 over every text view, the paper filter on; hybrid = "
        f"{hybrid.get('fusion', '?')} fusion, weights {'/'.join(num(w) for w in hybrid.get('weights', []))}. "
        "Questions per kind in brackets; stored: the share whose answer is printed in one of the paper's cells at "
        "all (the ceiling of any route). `hybrid, fused order`: the same search without the reranker "
        "(paperlake/vectors/rerank.py).",
        "",
    ]
    baseline = data.get("baseline")
    if baseline:
        lines += [
            f"`hybrid at {baseline['label']}`: the same fusion with that commit's search rules, run from its worktree "
            "on a home it ingested, the same questions and needles.",
            "",
        ]
    for name, part in data["sets"].items():
        routes, stored = part["by_route"], part.get("stored", {})
        kinds = sorted({kind for scores in routes.values() for kind in scores}, key=lambda k: (k == "all", k))
        before = (baseline or {}).get("sets", {}).get(name)
        shown = [route for route in ("bm25", "dense", "hybrid_fused", "hybrid") if route in routes]
        rows = [
            (
                f"{kind} ({routes['bm25'][kind]['questions']})",
                num(stored[kind]) if kind in stored else "",
                *(num(routes[route][kind]["recall_at_5"]) for route in shown),
                *([num(before[kind]) if kind in before else ""] if before is not None else []),
            )
            for kind in kinds
        ]
        names = {"bm25": "BM25", "dense": "dense", "hybrid_fused": "hybrid, fused order", "hybrid": "hybrid"}
        header = ["kind", "stored", *(names[route] for route in shown)]
        header += [f"hybrid at {baseline['label']}"] if before else []
        lines += [f"Set `{name}`:", ""] + table(header, rows)
    return lines + _held_out_of_fit(data)


def _held_out_of_fit(data: dict[str, Any]) -> list[str]:
    """The written sets the shipped reranker was not fitted on (``results/rerank.json``'s ``fitted_on``), pooled:
    recall@5 per kind and route over all their questions."""
    try:
        fitted_on = set(json.loads((RESULTS / "rerank.json").read_text(encoding="utf-8"))["fitted_on"])
    except (OSError, ValueError, KeyError):
        return []
    held = [name for name in data["sets"] if name.startswith("written") and name not in fitted_on]
    if not held:
        return []
    routes = ("bm25", "dense", "hybrid_fused", "hybrid")
    found: dict[tuple[str, str], list[int]] = {}
    for name in held:
        for route in routes:
            for kind, score in data["sets"][name]["by_route"].get(route, {}).items():
                counts = found.setdefault((route, kind), [0, 0])
                counts[0] += round(score["recall_at_5"] * score["questions"])
                counts[1] += score["questions"]
    kinds = sorted({kind for _, kind in found}, key=lambda k: (k == "all", k))
    share = {key: num(round(hit / asked, 3)) for key, (hit, asked) in found.items()}
    rows = [(f"{kind} ({found[('hybrid', kind)][1]})", *(share[(route, kind)] for route in routes)) for kind in kinds]
    return [
        f"Pooled over the sets the shipped reranker was not fitted on ({', '.join(f'`{n}`' for n in held)}):",
        "",
    ] + table(["kind", "BM25", "dense", "hybrid, fused order", "hybrid"], rows)


def rerank(data: dict[str, Any]) -> list[str]:
    """The reranker's effect on questions it was not fitted on: each set left out in turn, and the held-out set."""
    lines = [
        f"Pool of {data['pool']}, first {data['keep']} kept. Leave one set out: the model fitted on every other set.",
        "",
    ]
    per_set = data["leave_one_set_out"]
    rows = [
        (name, num(part["all"]["questions"]), num(part["all"]["fused"]), num(part["all"]["reranked"]))
        for name, part in per_set.items()
    ]
    lines += table(["set left out", "questions", "fused order", "reranked"], rows)
    for name, kinds in data.get("held_out", {}).items():
        lines += [f"Held out of the shipped fit (fitted on {len(data.get('fitted_on', []))} sets): `{name}`.", ""]
        lines += table(
            ["kind", "fused order", "reranked"],
            [(f"{kind} ({v['questions']})", num(v["fused"]), num(v["reranked"])) for kind, v in kinds.items()],
        )
    return lines


def enrichment(data: dict[str, Any]) -> list[str]:
    first = data["first_run"]
    stages = {k: v for k, v in first["stage_seconds"].items() if k != "total"}
    kinds = ", ".join(f"{k} {num(v)}" for k, v in data["planned"]["by_kind"].items())
    return [
        f"Against the scripted OpenAI-compatible server, {data['concurrency']} calls at a time: "
        f"{num(first['requests'])} calls ({kinds}), "
        f"{num(first['ms_per_call'])} ms of paperlake's own time per call; {num(first['seconds'])} s in all "
        f"({', '.join(f'{k} {num(v)} s' for k, v in stages.items() if v)}). Every planned item filled: "
        f"{num(data['every_planned_item_filled'])}; Milvus counts equal to the warehouse's: "
        f"{num(data['milvus_matches_warehouse'])}; a second run made {num(data['second_run']['requests'])} requests.",
        "",
    ]


def distributed(data: dict[str, Any]) -> list[str]:
    configurations = data["configurations"]
    stages = [s for s in next(iter(configurations.values()))["step_seconds"] if s != "total"]
    lines = [f"{len(data['papers'])} papers, {data['pages']} pages, each configuration cold in its own home:", ""]
    lines += table(
        ["configuration", "workers", "seconds", "pages/s", "vs in process", *stages],
        [
            (
                name,
                c["workers"],
                c["seconds"],
                c["pages_per_second"],
                c["speedup_vs_in_process"],
                *(c["step_seconds"].get(s) for s in stages),
            )
            for name, c in configurations.items()
        ],
    )
    return lines


def scale(data: dict[str, Any]) -> list[str]:
    runs = [key for key in data if key.startswith("run_")]
    name = runs[0]
    run = data[name]
    lines = [
        f"Adding one paper to a home of N papers (re-keyed copies of the sample), the latest run (`{name}`), "
        "median of the additions after the first, seconds per stage:",
        "",
    ]
    rows = []
    for backend, sizes in run["milvus"].items():
        for size, part in sizes.items():
            median = part["later_additions_median_seconds"]
            first = part["additions"][0]["seconds"]["total"] if part.get("additions") else None
            rows.append(
                (
                    backend,
                    size,
                    *(median.get(stage) for stage in ("warehouse", "formulas", "vectors", "total")),
                    part.get("ratio_to_19_later_median", {}).get("total"),
                    first,
                    part.get("entities_per_collection"),
                    part.get("warehouse_mb_after"),
                )
            )
    lines += table(
        [
            "Milvus",
            "N",
            "warehouse",
            "formulas",
            "vectors",
            "total",
            "total vs N=19",
            "first addition",
            "entities per collection",
            "warehouse MB",
        ],
        rows,
    )
    if len(runs) > 1:
        lines += [
            f"The file keeps {len(runs) - 1} earlier runs beside it: {', '.join(f'`{r}`' for r in runs[1:])}.",
            "",
        ]
    return lines


def hostile(data: dict[str, Any]) -> list[str]:
    """The fuzzers' counters, seconds rounded to milliseconds."""
    keys = [k for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    value = {k: round(data[k], 3) if isinstance(data[k], float) else data[k] for k in keys}
    return [", ".join(f"{k.replace('_', ' ')} {num(value[k])}" for k in keys) + ".", ""]


def noop(data: dict[str, Any]) -> list[str]:
    built = data.get("build_s")
    homes = "each side in the home it built" if isinstance(built, dict) else "alternated on copies of one home"
    first = (
        "first no-op (after its build)" if isinstance(built, dict) else "first no-op (a fresh copy: cold file cache)"
    )
    lines = [
        f"Wall seconds of an unchanged `paperlake ingest` of the sample, {data['after']} against {data['before']}, "
        f"{homes}, the sides alternated (target {num(data['target_s'])} s):",
        "",
    ]
    rows = [
        (side, data[f"{side}_first_s"], data[f"{side}_steady_median_s"], data[f"{side}_steady_max_s"])
        for side in ("before", "after")
    ]
    lines += table(["side", first, "steady median", "steady max"], rows)
    tail = [f"Steady after / before: {num(data['steady_after_over_before'])}."]
    if isinstance(built, dict):
        tail.append("Builds (cold ingests, s): " + ", ".join(f"{side} {num(s)}" for side, s in built.items()) + ".")
    return lines + [" ".join(tail), ""]


def ingest_profile(data: dict[str, Any]) -> list[str]:
    lines = [
        f"{data['what']}; {num(data['wall_s'])} s of wall time (py-spy slows it). Seconds of samples per kind of work:",
        "",
    ]
    rows = [(name, seconds, data["share"].get(name, "")) for name, seconds in data["sampled_s"].items()]
    lines += table(["work", "sampled s", "share"], rows)
    stages = ", ".join(f"{name} {num(value)}" for name, value in data["stages_s"].items() if name != "total")
    commands = ", ".join(f"{c['job']} {num(c['seconds'])} s" for c in data["dbt_commands"])
    return lines + [f"Stages (wall s): {stages}. dbt's own processes (wall, not sampled): {commands}.", ""]


def parse_speed(data: dict[str, Any]) -> list[str]:
    summary = data["summary"]
    lines = [
        f"Pages/s of the PyMuPDF parser on the {data['pdfs']} PDFs ({data['pages']} pages) MinerU flash parses "
        f"offline, {data['after']} against {data['before']}, beside MinerU flash in process, median of "
        f"{len(data['rounds'])} alternated rounds:",
        "",
    ]
    rows = [
        ("this checkout", summary["after_pages_per_second"], summary["after_over_mineru"]),
        (data["before"], summary["before_pages_per_second"], summary["before_over_mineru"]),
        ("MinerU flash, in process", summary["mineru_pages_per_second"], 1),
    ]
    return lines + table(["parser", "pages/s", "against MinerU flash"], rows)


def launch(data: dict[str, Any]) -> list[str]:
    summary = data["summary"]
    lines = [f"{data['what']}; medians:", ""]
    rows = [
        ("in process", summary["in_process_ingest_s"], summary["in_process_run_wait_s"], "-"),
        (
            "through the webserver",
            summary["webserver_ingest_s"],
            summary["webserver_run_wait_s"],
            summary["webserver_start_s"],
        ),
    ]
    lines += table(["runs", "ingest s", "runs waiting to start, s", "webserver start, s"], rows)
    return lines + [f"Through the webserver / in process: {num(summary['webserver_over_in_process'])}.", ""]


def generic(data: dict[str, Any]) -> list[str]:
    scalars = [(k, v) for k, v in data.items() if isinstance(v, (int, float, bool))]
    return table(["figure", "value"], scalars) if scalars else ["(no top-level figures)", ""]


def ingest_stages(data: dict[str, Any]) -> list[str]:
    """The summary figures, then each side's cold ingest by job (runs' seconds plus their waits to start)."""
    lines = generic(data)
    if "warm" in data:
        lines += table(
            ["side", "cached vectors", "untimed warm-up ingest (s)"],
            [(side, warm["cached_vectors"], warm["cold"]) for side, warm in data["warm"].items()],
        )
    cold = [run for run in data["runs"] if "stages" in run and run["round"] == 1]
    if not cold:
        return lines
    jobs = list(dict.fromkeys(job for run in cold for job in run["stages"]["jobs"]))
    headers = ["job (runs: seconds, waits included)", *(f"{run['set']} {run['side']}" for run in cold)]

    def cell(run: dict, job: str) -> str:
        stage = run["stages"]["jobs"].get(job)
        return f"{stage['runs']}: {stage['run_s'] + stage['wait_s']:.1f}" if stage else "–"

    rows = [(job, *(cell(run, job) for run in cold)) for job in jobs]
    rows.append(("outside every run", *(f"{run['stages']['outside_runs_s']:.1f}" for run in cold)))
    rows.append(("cold ingest, wall", *(f"{run['cold']:.1f}" for run in cold)))
    return lines + table(headers, rows)


# stem → (title, script, what it measures, renderer), in the order the page shows them
BENCHMARKS: dict[str, tuple[str, str, str, Section]] = {
    "ingest": ("Ingest against MinerU flash", "ingest.py", "pages/s per backend and stage, side by side", ingest),
    "ingest_repeat": (
        "Ingest against MinerU flash, a second run",
        "ingest.py",
        "the same benchmark run again on a busier machine state, kept for its spread",
        ingest,
    ),
    "parse_fidelity": (
        "Parse fidelity",
        "parse_fidelity.py",
        "detectors against ground truth by construction",
        parse_fidelity,
    ),
    "latex": ("Glyph-rebuilt LaTeX", "latex.py", "our LaTeX against MinerU's for every display equation", latex),
    "retrieval": ("Retrieval", "retrieval.py", "search quality, latency and encoder rates", retrieval),
    "encode_once": ("Encode each token once", "encode_once.py", "truncation against pooled windows", encode_once),
    "encode_once_fusion": (
        "Encode once, fusion weight chosen per mode",
        "encode_once.py",
        "each mode runs the protocol that chooses the fusion weight",
        encode_once,
    ),
    "encode_once_int8_scheme4": (
        "Encode once, int8 against float",
        "encode_once.py",
        "the default int8 graph against the float graph",
        encode_once,
    ),
    "encode_once_table_lines": (
        "Encode once, table lines without dense vectors",
        "encode_once.py",
        "row and column lines BM25 only",
        encode_once,
    ),
    "encode_once_late": (
        "Encode once, late-chunked references and equations",
        "encode_once.py",
        "reference entries and equations pooled from their chunk's pass",
        encode_once,
    ),
    "late_views_mineru": (
        "Late-chunked views, MinerU home",
        "late_views.py",
        "what late chunking costs per view",
        late_views,
    ),
    "late_views_pymupdf": (
        "Late-chunked views, PyMuPDF home",
        "late_views.py",
        "what late chunking costs per view",
        late_views,
    ),
    "late_chunking": ("Late chunking of table rows", "late_chunking.py", "tried and not kept", late_chunking),
    "table_questions_mineru": (
        "Table questions, MinerU tables",
        "table_questions.py",
        "retrieval only",
        table_questions,
    ),
    "table_questions_pymupdf": (
        "Table questions, PyMuPDF tables",
        "table_questions.py",
        "retrieval only",
        table_questions,
    ),
    "table_questions_heldout": (
        "Table questions held out",
        "heldout_tables.py",
        "papers no method was tuned on",
        table_questions,
    ),
    "table_lines_bm25": (
        "Table lines with BM25 vectors only",
        "table_questions.py",
        "the table questions before and after the lines lost their dense vectors",
        table_lines_bm25,
    ),
    "probes": ("Offline probes", "probes.py", "each volume's self-evaluation, four methods", probes),
    "findable": (
        "Every answer findable",
        "findable.py",
        "retrieval only, per kind of answer, BM25, dense and hybrid side by side",
        findable,
    ),
    "rerank": (
        "The hybrid search's reranker",
        "train_rerank.py",
        "answer-bearing recall@5 of the fused order against the reranked one, on questions the model was not fitted on",
        rerank,
    ),
    "enrichment": ("Enrichment", "enrichment.py", "a whole home enriched against a scripted server", enrichment),
    "distributed": (
        "Executors",
        "distributed.py",
        "in process, one and two Celery workers; the Celery runs launched through the home's webserver (a process "
        "per run, started by Dagster's run launcher), two at once with two workers",
        distributed,
    ),
    "scale": ("Adding a paper at scale", "scale.py", "the cost of one more paper in a home of N", scale),
    "before_after": (
        "Ingest before and after one orchestrator",
        "before_after.py",
        "this checkout against 2f13fa0, the commit before issue 48, `--backend pymupdf`, alternated, one round; the "
        "after side also runs what issues 50 and 51 added since (figure and table rules, new views, the reranker's "
        "features); the file keeps the earlier measurements under `at_4b0abfd` (naacl2024 1.71, sample 1.48, before "
        "the one dbt build) and `at_27f973f` (naacl2024 1.72, sample 1.61)",
        generic,
    ),
    "before_after_warm": (
        "Ingest before and after one orchestrator, the encoder left out",
        "before_after.py",
        "this checkout against 2f13fa0 with `--warm-cache` (each side's embedding cache filled by an untimed ingest "
        "of the sample first), `--backend pymupdf`, alternated, three rounds, and where each cold ingest's time went "
        "(round 1); the file keeps each earlier session's rounds under `at_<commit>` (sample 1.13 to 1.45, "
        "naacl2024 1.20 to 1.40, the spread of one product across sessions as much as of the changes between)",
        ingest_stages,
    ),
    "before_after_one_build": (
        "Ingest before and after one dbt build",
        "before_after.py",
        "this checkout against ce94ddd, the commit before the formula graph was made from the lake and its dbt models "
        "joined the warehouse's build, `--backend pymupdf`, alternated, one round",
        generic,
    ),
    "before_after_session": (
        "Ingest before and after the MinerU table and search changes",
        "before_after.py",
        "this round's last commit against 096b888 with `--mineru`, alternated, one round",
        generic,
    ),
    "before_after_findable": (
        "Ingest before and after issue 51",
        "before_after.py",
        "this checkout against 0a9be45, the commit before issue 51's first change (figure text, citing sentences, "
        "front matter, then the search rules and the reranker), with `--mineru`, alternated, two rounds; the file "
        "keeps, under `at_31ea9dd`, three rounds measured before the citing sentences and equation passages were read "
        "inside their chunks (sample 1.14, naacl2024 1.04)",
        generic,
    ),
    "noop": (
        "An unchanged re-ingest",
        "noop.py",
        "the no-op ingest of the 19 papers, this checkout against an earlier commit, alternated",
        noop,
    ),
    "parse_speed": (
        "Parse throughput against MinerU flash",
        "parse_speed.py",
        "the PyMuPDF parser, this checkout against an earlier commit, beside MinerU flash in process",
        parse_speed,
    ),
    "location_import": (
        "The code location's import",
        "location_import.py",
        "what every launched run and multiprocess step pays first: `import orchestration.definitions` in a new "
        "interpreter, this checkout against an earlier commit, alternated",
        generic,
    ),
    "ingest_profile": (
        "Where a cold ingest's time goes",
        "ingest_profile.py",
        "one volume ingested in process into a new home, every thread sampled by py-spy, by kind of work",
        ingest_profile,
    ),
    "launch": (
        "Runs launched through the webserver",
        "launch.py",
        "a cold ingest executed in process against the same ingest launched through a Dagster webserver",
        launch,
    ),
    "hostile_sql": ("Hostile SQL", "hostile_sql.py", "the SQL sandbox fuzzed", hostile),
    "hostile_agent": ("Hostile agent actions", "hostile_agent.py", "the agent's action surface fuzzed", hostile),
    "hostile_filters": ("Hostile filters", "hostile_filters.py", "the vector filter parser fuzzed", hostile),
}


def render(results: Path = RESULTS) -> str:
    files = {path.stem: path for path in sorted(results.glob("*.json"))}
    order = [stem for stem in BENCHMARKS if stem in files] + [stem for stem in files if stem not in BENCHMARKS]
    lines = [
        "# Benchmark results",
        "",
        f"Generated from `benchmarks/results/*.json` by `{COMMAND}`; do not edit by hand. Each section is one "
        "results file: what it measures, the machine it ran on (as the file records it) and its figures. The "
        "machines are small shared VMs whose speed moves within a session, so every speed comparison is taken "
        "inside one run (MinerU flash timed beside our ingest, modes synced one after another); compare ratios, "
        "not seconds, across sections. How each script works: its docstring; the history of a figure: "
        "`git log -p benchmarks/results/<file>.json`.",
        "",
        "## Contents",
        "",
    ]
    for stem in order:
        title = BENCHMARKS[stem][0] if stem in BENCHMARKS else stem
        lines.append(f"- [{title}](#{anchor(title)}) (`results/{stem}.json`)")
    lines.append("")
    for stem in order:
        data = json.loads(files[stem].read_text())
        title, script, what, section = BENCHMARKS.get(stem, (stem, "", "", generic))
        lines += [f"## {title}", ""]
        source = f"`benchmarks/{script}`, " if script else ""
        lines += [f"{source}`results/{stem}.json`: {what}." if what else f"`results/{stem}.json`.", ""]
        lines += [f"Machine: {machine(data)}.", ""]
        lines += section(data)
    return "\n".join(lines).rstrip("\n") + "\n"


def anchor(title: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation dropped, spaces to hyphens."""
    kept = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if benchmarks/README.md is out of date")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        if not README.exists() or README.read_text() != page:
            print(f"benchmarks/README.md is out of date: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    README.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
