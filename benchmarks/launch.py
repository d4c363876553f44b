"""`paperlake ingest` in its own process against the same ingest launched through a Dagster webserver, side by side.

    .venv/bin/python benchmarks/launch.py [--volume naacl2024] [--rounds 2] [--out benchmarks/results/launch.json]

Issue 48 leaves the choice to measurement: a run the CLI executes in process has no code-location origin (the UI
lists it on the Runs page only), while a run launched through the webserver (what `paperlake ingest` does while
`./run ui` answers) is the UI's own, and each such run starts in a fresh process that loads the code location.
Every round ingests one volume cold (new home, new embedding cache, ``--backend pymupdf``) both ways, alternating
which goes first. Reported per ingest: wall time, and per run its wait from creation to start and its duration, read
from the instance. The webserver's own start (until its code location answers) is reported apart: `./run ui` pays
it once, not per ingest. Nothing else should run on the machine meanwhile.
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
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "tests"))

# runs launch at once without a daemon (`./run ui` serves `dagster dev`, whose daemon dequeues them)
DAGSTER_YAML = (
    "telemetry:\n  enabled: false\nrun_coordinator:\n  module: dagster.core.run_coordinator\n"
    "  class: DefaultRunCoordinator\n"
)


def runs_of(dagster_home: Path) -> list[dict]:
    """Each run of the instance, oldest first: job, wait from creation to start, duration (seconds)."""
    script = (
        "import json, sys\n"
        "from dagster import DagsterInstance\n"
        "instance = DagsterInstance.from_config(sys.argv[1])\n"
        "rows = []\n"
        "for r in instance.get_run_records(order_by='create_timestamp', ascending=True):\n"
        "    created = r.create_timestamp.timestamp()\n"
        "    rows.append({'job': r.dagster_run.job_name, 'status': r.dagster_run.status.value,\n"
        "                 'wait_s': round((r.start_time or created) - created, 2),\n"
        "                 'run_s': round((r.end_time or 0) - (r.start_time or 0), 2)})\n"
        "print(json.dumps(rows))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(dagster_home)],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"DAGSTER_HOME": str(dagster_home)},
    )
    return json.loads(done.stdout)


def ingest(mode: str, inbox: Path, root: Path) -> dict:
    from support.dagster_ui import webserver  # the tests' server: 127.0.0.1, a free port, stopped by pid

    home = root / f"home-{mode}"
    shutil.rmtree(home, ignore_errors=True)
    (home / "logs").mkdir(parents=True)
    (home / "dagster").mkdir()
    (home / "dagster" / "dagster.yaml").write_text(DAGSTER_YAML)
    env = os.environ | {"DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"}
    env.pop("PAPERLAKE_DAGSTER_URL", None)
    command = [str(REPO / ".venv" / "bin" / "paperlake"), "ingest", str(inbox), "--home", str(home)]
    command += ["--backend", "pymupdf"]
    result: dict = {"mode": mode}
    if mode == "webserver":
        started = time.monotonic()
        with webserver(home, inbox, None, lifetime=3600) as url:
            result["webserver_start_s"] = round(time.monotonic() - started, 2)
            began = time.monotonic()
            done = subprocess.run(command, env=env | {"PAPERLAKE_DAGSTER_URL": url}, capture_output=True, text=True)
            result["ingest_s"] = round(time.monotonic() - began, 2)
    else:
        began = time.monotonic()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        result["ingest_s"] = round(time.monotonic() - began, 2)
    if done.returncode != 0:
        raise SystemExit(f"{mode} ingest failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    result["runs"] = runs_of(home / "dagster")
    result["run_wait_s"] = round(sum(run["wait_s"] for run in result["runs"]), 2)
    shutil.rmtree(home, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--volume", default="naacl2024")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "launch.json")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="paperlake-launch-") as tmp:
        root = Path(tmp)
        inbox = root / "inbox"
        shutil.copytree(SHARED / "corpus" / "inbox" / args.volume, inbox / args.volume)
        ingests = []
        for round_ in range(args.rounds):
            order = ("in_process", "webserver") if round_ % 2 == 0 else ("webserver", "in_process")
            for mode in order:
                ingests.append(ingest(mode, inbox, root) | {"round": round_})
                print(json.dumps({k: v for k, v in ingests[-1].items() if k != "runs"}), flush=True)

    def median(mode: str, key: str) -> float:
        return round(statistics.median(i[key] for i in ingests if i["mode"] == mode), 2)

    summary = {
        "in_process_ingest_s": median("in_process", "ingest_s"),
        "webserver_ingest_s": median("webserver", "ingest_s"),
        "webserver_start_s": median("webserver", "webserver_start_s"),
        "in_process_run_wait_s": median("in_process", "run_wait_s"),
        "webserver_run_wait_s": median("webserver", "run_wait_s"),
    }
    summary["webserver_over_in_process"] = round(summary["webserver_ingest_s"] / summary["in_process_ingest_s"], 2)
    report = {
        "what": f"cold `paperlake ingest --backend pymupdf` of {args.volume}, in process against launched through a "
        "Dagster webserver (DefaultRunLauncher), alternated in one session",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "summary": summary,
        "ingests": ingests,
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
