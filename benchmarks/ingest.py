"""Ingest benchmark on the sample corpus: pages/s per stage and peak memory, written as JSON.

    python benchmarks/ingest.py [--corpus ../shared/corpus] [--out benchmarks/results/ingest.json]

    python benchmarks/ingest.py --skip-mineru   # where MinerU cannot be installed

Stages: parse with each backend (library call, no orchestration), MinerU's offline flash tier on the same PDFs in the
same run (``benchmarks/mineru_flash.py``: its own venv and a private local server), quality gates, then the whole
in-process Dagster ingest (parse + gates + lake + dbt) into a fresh PAPERLAKE_HOME. The target: the PyMuPDF parse
stage at least 2x MinerU flash's pages/s, both measured here and now (never a number from another machine).
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

PARSE_SPEED_TARGET = 2.0  # our parse stage vs MinerU flash, same run, same PDFs


def peak_rss_mb() -> dict[str, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"self": round(own, 1), "children": round(children, 1)}


def _versus_mineru_flash(pages: dict[Path, int], our_seconds: dict[Path, float]) -> dict:
    """MinerU flash on the same PDFs, now. Both speeds cover the PDFs MinerU could parse offline, and the ratio uses
    MinerU's speed net of its CLI overhead (the harder bar for us)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from mineru_flash import FlashServer, MineruUnavailable, locate_or_install, time_flash

    try:
        with FlashServer(locate_or_install()) as server:
            flash = time_flash(list(pages), server)
    except MineruUnavailable as error:
        print(f"mineru flash: not measured: {error}", flush=True)
        return {"measured": False, "reason": str(error)}
    parsed = [result.pdf for result in flash.pop("results")]
    ours = sum(pages[pdf] for pdf in parsed) / sum(our_seconds[pdf] for pdf in parsed)
    theirs = flash["pages_per_second_net_of_cli"]
    ratio = ours / theirs
    print(f"mineru flash: {flash['pages']} pages of {len(parsed)} PDFs in {flash['seconds']}s = "
          f"{flash['pages_per_second']} pages/s ({theirs} net of CLI overhead), {len(flash['failed'])} PDFs failed "
          f"offline; pymupdf on the same PDFs {ours:.1f} pages/s = {ratio:.1f}x", flush=True)
    return {"measured": True, **flash, "pymupdf_pages_per_second_same_pdfs": round(ours, 1),
            "ratio": round(ratio, 1), "target": PARSE_SPEED_TARGET, "met": ratio >= PARSE_SPEED_TARGET}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "ingest.json")
    parser.add_argument("--skip-mineru", action="store_true", help="do not install or time MinerU flash")
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
    our_seconds: dict[Path, float] = {}  # per PDF, so MinerU flash is compared on exactly the PDFs it parsed
    for name, module in (("pymupdf", pymupdf_backend), ("mineru", mineru_backend)):
        module.parse(sources[0])  # warm-up: imports, layout tables, tokenizer
        started = time.perf_counter()
        parsed_by_backend[name] = []
        for source in sources:
            one = time.perf_counter()
            parsed_by_backend[name].append(module.parse(source))
            if name == "pymupdf":
                our_seconds[source.pdf_path] = time.perf_counter() - one
        seconds = time.perf_counter() - started
        results[f"parse_{name}"] = {"seconds": round(seconds, 2), "pages_per_second": round(pages / seconds, 1)}
        print(f"parse {name}: {pages} pages in {seconds:.1f}s = {pages / seconds:.1f} pages/s", flush=True)
    if not args.skip_mineru:
        results["pymupdf_vs_mineru_flash"] = _versus_mineru_flash(
            {s.pdf_path: pdf_page_count(s.pdf_path) for s in sources}, our_seconds)

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
