"""An unchanged re-ingest of the sample, this checkout against an earlier commit, the sides alternated (issue 48:
"no-op re-ingest of the 19 papers ≤ 5 s", measured side by side).

    .venv/bin/python benchmarks/noop.py --before e8eb908 --runs 5 --out benchmarks/results/noop.json

Each side builds its own home with its own code (the README's demo ingest: the sample inbox with its MinerU
outputs), so that the first no-op after the build meets what that side's writers left behind for it; ``--home``
names a built home to copy to both sides instead. Each side then runs ``paperlake ingest`` of the same inbox
``--runs`` times, the sides alternating and swapping who goes first each round. The earlier commit runs from a
git worktree through a thin venv over this checkout's packages (:func:`before_after.prepare_before`).

Two figures per side: the *first* no-op after the build (what a user sees right after an ingest that wrote
something) and the median of the *steady* ones after it. Nothing else should run on the machine meanwhile: the
figures are wall times of the whole command, interpreter start included.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from before_after import SHARED, prepare_before  # noqa: E402  (a sibling script)

INBOX = SHARED / "corpus" / "inbox"
MINERU = SHARED / "corpus" / "mineru"


def _environment(bin_dir: Path, pythonpath: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PAPERLAKE_HOME", "DAGSTER_HOME", "PYTHONPATH")}
    env |= {"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env |= {"DAGSTER_DISABLE_TELEMETRY": "1", "OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "PAPERLAKE_LLM_MODEL": ""}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def ingest(bin_dir: Path, pythonpath: str, home: Path) -> tuple[float, int, str]:
    """One `paperlake ingest` of the sample into ``home``: wall seconds, exit code, its plan line."""
    command = [str(bin_dir / "paperlake"), "ingest", "--home", str(home), str(INBOX), "--mineru-dir", str(MINERU)]
    started = time.perf_counter()
    env = _environment(bin_dir, pythonpath)
    done = subprocess.run(command, env=env, cwd=home.parent, capture_output=True, text=True)
    seconds = round(time.perf_counter() - started, 2)
    plan = next((line for line in done.stdout.splitlines() if line.startswith("plan:")), "")
    return seconds, done.returncode, plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--runs", type=int, default=5, help="no-op ingests per side")
    parser.add_argument("--home", type=Path, help="a home this checkout built from the sample (else built here)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/paperlake-noop"))
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "noop.json")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    worktree, venv = prepare_before(args.before, args.work / "before")
    sides = {"after": (REPO / ".venv" / "bin", ""), "before": (venv / "bin", str(worktree))}
    homes, build_seconds = {}, {}
    for side in sides:
        homes[side] = args.work / side / "home"
        shutil.rmtree(homes[side], ignore_errors=True)
        homes[side].parent.mkdir(parents=True, exist_ok=True)
        if args.home is not None:
            shutil.copytree(args.home, homes[side], symlinks=True, ignore=shutil.ignore_patterns("*.lock"))
            continue
        build_seconds[side], code, _ = ingest(*sides[side], homes[side])
        if code != 0:
            raise SystemExit(f"the {side} side's build ingest exited {code}")
    runs = []
    for number in range(args.runs + 1):  # run 0: the first no-op after the build
        for side in ("after", "before") if number % 2 == 0 else ("before", "after"):
            seconds, code, plan = ingest(*sides[side], homes[side])
            run = {"side": side, "run": number, "seconds": seconds, "exit": code, "plan": plan}
            runs.append(run)
            print(json.dumps(run), flush=True)
    summary = {}
    for side in sides:
        mine = [r for r in runs if r["side"] == side]
        summary[f"{side}_first_s"] = mine[0]["seconds"]
        summary[f"{side}_steady_median_s"] = statistics.median(r["seconds"] for r in mine[1:])
        summary[f"{side}_steady_max_s"] = max(r["seconds"] for r in mine[1:])
    summary["steady_after_over_before"] = round(summary["after_steady_median_s"] / summary["before_steady_median_s"], 3)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    data = {
        "what": "unchanged `paperlake ingest` of the sample (19 papers, with MinerU outputs), this checkout against an "
        "earlier commit, the sides alternated, "
        + ("each in the home it built" if args.home is None else "on copies of one home")
        + "; first = the first no-op after the build, steady = the median of the next ones",
        "before": args.before,
        "after": head.stdout.strip() + (" with uncommitted changes" if _dirty() else ""),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "target_s": 5.0,
        "build_s": build_seconds or None,
        **summary,
        "runs": runs,
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


def _dirty() -> bool:
    command = ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"]
    status = subprocess.run(command, capture_output=True)
    return bool(status.stdout.strip())


if __name__ == "__main__":
    raise SystemExit(main())
