"""Throughput with the step executors, side by side on the same papers in one run: in process, one Celery worker, two.

    python benchmarks/distributed.py [--papers 8] [--workers 1,2] [--out benchmarks/results/distributed.json]

Every configuration ingests the same PDFs (the first ``--papers`` of the sample, both volumes) into a fresh
PAPERLAKE_HOME with a fresh embedding cache (cold: nothing is reused between configurations) and its own
``milvus-lite server`` (the stand-in for a Milvus server, which parallel vector steps need). The Celery runs use a
Redis broker on 127.0.0.1 and N workers as separate processes on this machine, with N per-paper runs launched at once
(``PAPERLAKE_CONCURRENT_RUNS``) through the Dagster webserver of the home (each run a process of its own, started by
its run launcher). Reported per configuration: wall time of each stage, pages/s, and the speed-up
against in process and against one worker. On this 2-core machine the workers share the cores the encoder already
uses, so the numbers show the executor's overhead and what a second worker buys where the work is not yet
CPU-bound; a worker per machine is what the deployment in ``deploy/`` is for.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def _pages(pdfs: list[Path]) -> int:
    import pymupdf

    total = 0
    for pdf in pdfs:
        with pymupdf.open(pdf) as document:
            total += document.page_count
    return total


def _configuration(label: str, workers: int, inbox: list[Path], work: Path, pages: int, broker: str | None) -> dict:
    from orchestration.instance import START_AT_ONCE_CONFIG
    from orchestration.local_cluster import celery_workers, dagster_webserver
    from orchestration.run import ingest
    from paperlake.config import Settings, environment
    from paperlake.vectors.server import milvus_lite_server

    home = work / label
    home.mkdir()
    with milvus_lite_server(home / "milvus.db") as milvus:
        env = {
            "PAPERLAKE_HOME": str(home),
            "DAGSTER_HOME": str(home / "dagster"),
            "MILVUS_URI": milvus.uri,
            "PAPERLAKE_EMBEDDING_CACHE": str(home / "embeddings.sqlite"),
            "PAPERLAKE_EVALUATE": "0",
            "PAPERLAKE_EXECUTOR": "celery" if workers else "in_process",
            "PAPERLAKE_CONCURRENT_RUNS": str(max(1, workers)),
        }
        if broker:
            env["PAPERLAKE_CELERY_BROKER"] = broker
        with contextlib.ExitStack() as stack:
            if workers:
                stack.enter_context(celery_workers(broker, env, workers, home / "workers"))
                # the runs go through the webserver, whose run launcher starts them side by side (at once: no daemon)
                (home / "dagster").mkdir()
                (home / "dagster" / "dagster.yaml").write_text(START_AT_ONCE_CONFIG)
                url = stack.enter_context(dagster_webserver(env, home / "webserver.log", daemon=False))
                env["PAPERLAKE_DAGSTER_URL"] = url
            stack.enter_context(environment(env))
            started = time.perf_counter()
            summary = ingest(inbox, Settings.from_env(home=home, backend="pymupdf"))
            seconds = time.perf_counter() - started
    if not summary.ok:
        raise SystemExit(f"{label}: the ingest failed: {[failure.line() for failure in summary.failures]}")
    steps = {name: round(value, 2) for name, value in summary.step_seconds.items()}
    entry = {
        "workers": workers,
        "published": len(summary.published),
        "pages": pages,
        "seconds": round(seconds, 2),
        "pages_per_second": round(pages / seconds, 3),
        "step_seconds": steps,
    }
    print(f"{label}: {json.dumps(entry)}", flush=True)
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--papers", type=int, default=8)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts to measure")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "distributed.json")
    args = parser.parse_args()

    from ingest import _inbox_of
    from orchestration.local_cluster import redis_server

    pdfs = sorted((args.corpus / "inbox").glob("*/*.pdf"))
    volumes = sorted({pdf.parent.name for pdf in pdfs})
    # alternate the volumes so any prefix covers both
    by_volume = [[pdf for pdf in pdfs if pdf.parent.name == volume] for volume in volumes]
    chosen = [pdf for group in zip(*by_volume) for pdf in group][: args.papers]
    pages = _pages(chosen)
    counts = [int(count) for count in args.workers.split(",") if count.strip()]
    print(f"{len(chosen)} papers, {pages} pages; in process, then {counts} celery workers", flush=True)
    results: dict = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "papers": [pdf.name for pdf in chosen],
        "pages": pages,
        "configurations": {},
    }
    with tempfile.TemporaryDirectory(prefix="paperlake-distributed-") as tmp:
        work = Path(tmp)
        inbox = _inbox_of(work / "inbox", chosen)
        configurations = results["configurations"]
        configurations["in_process"] = _configuration("in_process", 0, inbox, work, pages, None)
        with redis_server(work / "redis") as broker:
            for count in counts:
                configurations[f"celery_{count}"] = _configuration(f"celery_{count}", count, inbox, work, pages, broker)
    base = configurations["in_process"]["seconds"]
    one = configurations.get("celery_1", {}).get("seconds")
    for entry in configurations.values():
        entry["speedup_vs_in_process"] = round(base / entry["seconds"], 2)
        if one:
            entry["speedup_vs_one_worker"] = round(one / entry["seconds"], 2)
    print(
        json.dumps(
            {
                label: {k: entry[k] for k in ("seconds", "pages_per_second", "speedup_vs_in_process")}
                for label, entry in configurations.items()
            },
            indent=2,
        )
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
