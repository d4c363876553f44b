"""Parse throughput of the default parser, this checkout against an earlier commit, beside MinerU flash, one run.

    .venv/bin/python benchmarks/parse_speed.py --before d0fcd33 [--rounds 2] [--out benchmarks/results/parse_speed.json]

Issue 50 asks that the detector's fixes keep the parse stage's ratio to MinerU flash. Each round times, in an order
that alternates between rounds: this checkout's PyMuPDF parser, the ``--before`` commit's (from a git worktree,
imported ahead of this checkout), and MinerU's flash tier through its own Python API in process
(``benchmarks/mineru_in_process.py``, in its venv ``benchmarks/.mineru-venv``, as ``benchmarks/ingest.py`` installs
it). Every side parses exactly the PDFs MinerU parsed offline (it cannot parse a page that needs OCR weights), each
in a fresh process, timed after its imports and one untimed warm-up parse; reported: pages/s per side (the median of
the rounds) and each parser's ratio to MinerU in the same round. Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "benchmarks"))

# run in a fresh interpreter: parse every PDF once untimed (imports, caches), then each once timed
TIMER = """
import json, sys, time
from pathlib import Path
from paperlake.lake.inbox import PaperSource
from paperlake.parsing.pymupdf_backend import parse
import paperlake
pdfs = [Path(p) for p in sys.argv[1:]]
def source(pdf):
    return PaperSource(paper_key=pdf.stem, volume=pdf.parent.name, pdf_path=pdf, sha256="0" * 64)
parse(source(pdfs[0]))
began = time.perf_counter()
for pdf in pdfs:
    parse(source(pdf))
print(json.dumps({"seconds": time.perf_counter() - began, "module": paperlake.__file__}))
"""


def time_paperlake(pdfs: list[Path], tree: Path) -> float:
    env = os.environ | {"PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", TIMER, *map(str, pdfs)], capture_output=True, text=True, env=env, cwd=tree, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the parser of {tree} failed: {done.stderr[-2000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if not report["module"].startswith(str(tree)):
        raise SystemExit(f"imported {report['module']}, not the parser of {tree}")
    return report["seconds"]


def main(argv: list[str] | None = None) -> int:
    from mineru_in_process import time_in_process
    from paperlake.lake.pipeline import pdf_page_count

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mineru", type=Path, default=REPO / "benchmarks" / ".mineru-venv" / "bin" / "mineru")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "parse_speed.json")
    args = parser.parse_args(argv)

    candidates = sorted((SHARED / "corpus" / "inbox").glob("*/*.pdf"))
    with tempfile.TemporaryDirectory(prefix="paperlake-parse-speed-") as tmp:
        worktree = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-f", "-q", str(worktree), args.before], check=True)
        try:
            rounds, pdfs = [], candidates
            for index in range(args.rounds):
                row: dict = {}
                order = ["mineru", "after", "before"] if index % 2 == 0 else ["before", "after", "mineru"]
                for side in order:
                    if side == "mineru":
                        report = time_in_process(pdfs, args.mineru)  # its seconds: of the PDFs it parsed
                        pdfs = [result.pdf for result in report["results"]]  # first round: the others go
                        row["mineru_seconds"] = round(report["seconds"], 2)
                    else:
                        row[f"{side}_seconds"] = round(time_paperlake(pdfs, REPO if side == "after" else worktree), 2)
                pages = sum(pdf_page_count(pdf) for pdf in pdfs)
                for side in ("after", "before", "mineru"):
                    row[f"{side}_pages_per_second"] = round(pages / row[f"{side}_seconds"], 2)
                for side in ("after", "before"):
                    row[f"{side}_over_mineru"] = round(row["mineru_seconds"] / row[f"{side}_seconds"], 2)
                rounds.append(row)
                print(json.dumps(row), flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)], check=False)

    def median(key: str) -> float:
        return round(statistics.median(row[key] for row in rounds), 2)

    report = {
        "what": "pages/s of the PyMuPDF parser (library call, no orchestration), this checkout against "
        f"{args.before}, beside MinerU flash in process, on the PDFs MinerU parses offline, alternated in one run",
        "after": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "before": args.before,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "pdfs": len(pdfs),
        "pages": sum(pdf_page_count(pdf) for pdf in pdfs),
        "summary": {
            key: median(key)
            for key in (
                "after_pages_per_second",
                "before_pages_per_second",
                "mineru_pages_per_second",
                "after_over_mineru",
                "before_over_mineru",
            )
        },
        "rounds": rounds,
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
