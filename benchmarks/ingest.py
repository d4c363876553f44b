"""Ingest benchmark on the sample corpus: pages/s per stage and peak memory, written as JSON.

    python benchmarks/ingest.py [--corpus ../shared/corpus] [--out benchmarks/results/ingest.json]

Stages: parse with each backend (library call, no orchestration), quality gates, then the whole in-process
Dagster ingest (parse + gates + lake + dbt) into a fresh PAPERLAKE_HOME. The issue's target: the pymupdf backend
parses at least 5x faster than MinerU's fastest offline tier, measured here at ~2.6 pages/s.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MINERU_FLASH_PAGES_PER_SECOND = 2.6


def peak_rss_mb() -> dict[str, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"self": round(own, 1), "children": round(children, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "ingest.json")
    args = parser.parse_args()

    from paperlake.config import Settings
    from paperlake.inbox import scan_inbox
    from paperlake.parsing import mineru_backend, pymupdf_backend
    from paperlake.pipeline import pdf_page_count
    from paperlake.quality import validate_paper

    sources = scan_inbox([args.corpus / "inbox"], args.corpus / "mineru")
    pages = sum(pdf_page_count(s.pdf_path) for s in sources)
    results: dict = {"papers": len(sources), "pages": pages, "machine": {
        "python": platform.python_version(), "cpus": __import__("os").cpu_count()}}

    parsed_by_backend = {}
    for name, module in (("pymupdf", pymupdf_backend), ("mineru", mineru_backend)):
        module.parse(sources[0])  # warm-up: imports, layout tables, tokenizer
        started = time.perf_counter()
        parsed_by_backend[name] = [module.parse(s) for s in sources]
        seconds = time.perf_counter() - started
        results[f"parse_{name}"] = {"seconds": round(seconds, 2), "pages_per_second": round(pages / seconds, 1)}
        print(f"parse {name}: {pages} pages in {seconds:.1f}s = {pages / seconds:.1f} pages/s", flush=True)
    speedup = results["parse_pymupdf"]["pages_per_second"] / MINERU_FLASH_PAGES_PER_SECOND
    results["pymupdf_vs_mineru_flash"] = {"mineru_flash_pages_per_second": MINERU_FLASH_PAGES_PER_SECOND,
                                          "speedup": round(speedup, 1), "target": 5.0, "met": speedup >= 5}

    started = time.perf_counter()
    for paper, source in zip(parsed_by_backend["pymupdf"], sources):
        validate_paper(paper, pdf_page_count=paper.counts()["pages"], max_chunk_tokens=512)
    seconds = time.perf_counter() - started
    results["quality_gates"] = {"seconds": round(seconds, 2), "pages_per_second": round(pages / seconds, 1)}

    from orchestration.run import ingest

    for backend in ("pymupdf", "auto"):
        with tempfile.TemporaryDirectory(prefix="paperlake-bench-") as home:
            settings = Settings.from_env(home=Path(home), backend=backend,
                                         mineru_dir=(args.corpus / "mineru").resolve())
            summary = ingest([args.corpus / "inbox"], settings)
            steps = {k: round(v, 2) for k, v in summary.step_seconds.items()}
            label = "mineru" if backend == "auto" else backend
            results[f"ingest_{label}"] = {
                "published": len(summary.published), "failed": len(summary.failed), "step_seconds": steps,
                "pages_per_second_total": round(pages / summary.step_seconds["total"], 1),
                "pages_per_second_parse_stage": round(pages / summary.step_seconds["parse"], 1),
                "pages_per_second_dbt": round(pages / summary.step_seconds.get("warehouse", float("nan")), 1),
            }
            print(f"ingest ({label}): {json.dumps(results[f'ingest_{label}'])}", flush=True)
    results["peak_rss_mb"] = peak_rss_mb()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
