"""What every launched run and every multiprocess step pays before its first event: importing the code location.

A run the instance's run launcher starts (the UI's, or `paperlake ingest` through the webserver) is a new process
that imports ``orchestration.definitions`` before it does anything; so is each step process of the multiprocess
executor (once per forkserver). This times that import in a new interpreter, split into Dagster, dagster-dbt and
the rest (our asset modules and what they import), this checkout against an earlier commit's worktree
(``before_after.prepare_before``), alternated, ``--rounds`` times each.

    .venv/bin/python benchmarks/location_import.py --before 6eda776~1 --rounds 10 \
        --out benchmarks/results/location_import.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.before_after import prepare_before  # noqa: E402

PROBE = (
    "import time; t = time.perf_counter()\n"
    "import dagster; a = time.perf_counter()\n"
    "import dagster_dbt; b = time.perf_counter()\n"
    "import orchestration.definitions; c = time.perf_counter()\n"
    "import json; print(json.dumps({'dagster': a - t, 'dagster_dbt': b - a, 'rest': c - b, 'total': c - t}))\n"
)


def _env(cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PAPERLAKE_HOME", "DAGSTER_HOME")}
    return env | {"DAGSTER_DISABLE_TELEMETRY": "1", "PYTHONPATH": str(cwd)}


def prepare_manifest(python: Path, cwd: Path, home: Path) -> None:
    """The dbt manifest the code location loads, made the way `paperlake ingest` makes it (by that side's code)."""
    code = (
        "import sys; from pathlib import Path; from orchestration.run import prepare_dbt_manifest; "
        "from paperlake.config import Settings; prepare_dbt_manifest(Settings.from_env(home=Path(sys.argv[1])))"
    )
    subprocess.run([str(python), "-c", code, str(home)], cwd=cwd, env=_env(cwd), check=True, capture_output=True)


def time_import(python: Path, cwd: Path) -> dict[str, float]:
    command = [str(python), "-c", PROBE]
    done = subprocess.run(command, cwd=cwd, env=_env(cwd), capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--work", type=Path, default=Path("/tmp/paperlake-location-import"))
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "location_import.json")
    args = parser.parse_args(argv)
    worktree, venv = prepare_before(args.before, args.work / "before")
    sides = {"after": (REPO / ".venv" / "bin" / "python", REPO), "before": (venv / "bin" / "python", worktree)}
    for side, (python, cwd) in sides.items():
        prepare_manifest(python, cwd, args.work / f"home-{side}")
    runs: list[dict] = []
    for round_ in range(args.rounds):
        for side in ("after", "before") if round_ % 2 == 0 else ("before", "after"):
            python, cwd = sides[side]
            runs.append({"side": side, "round": round_, **time_import(python, cwd)})
            print(json.dumps(runs[-1]), flush=True)
    medians = {
        f"{side}_{part}_s": round(statistics.median(r[part] for r in runs if r["side"] == side), 3)
        for side in ("before", "after")
        for part in ("dagster", "dagster_dbt", "rest", "total")
    }
    report = {
        "what": "import of the code location (orchestration.definitions) in a new interpreter, this checkout "
        "against an earlier commit, alternated; medians",
        "before": args.before,
        "after": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        **medians,
        "after_over_before": round(medians["after_total_s"] / medians["before_total_s"], 3),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
