"""Where a cold ingest's time goes: `paperlake ingest` of one volume into a new home, sampled by py-spy.

    .venv/bin/pip install py-spy        # once: a sampling profiler, not a dependency of paperlake
    .venv/bin/python benchmarks/ingest_profile.py --volume naacl2024 --out benchmarks/results/ingest_profile.json

The ingest runs in process (the CLI's default executor) with the volume's MinerU outputs and an embedding cache of
its own, so every text is encoded, as on a first ingest. py-spy samples every thread of the process at ``--rate``
Hz; each sample goes to the category of the innermost frame of its stack that holds one of :data:`CATEGORIES`'
markers, so work is counted where it is done (the parser inside a Dagster step is parsing) and an import where it is
imported (dbt imported by dagster-dbt is "dbt in Dagster's process"). The dbt commands run in processes py-spy does
not follow (`paperlake-dbt` replaces itself with dbt); their wall seconds are read from the run's event log instead
("Running dbt command" to "Finished dbt command").

The figures are seconds of samples of threads that were running or blocked in a call (an fsync, a lock held by
another process), not wall time: the encoder runs on both cores, most of the rest on one. Threads parked on a queue
or a condition are counted apart ("waiting threads") and left out of the shares. The figures say what a kind of work
costs, not what changing it would save on the critical path: a change is measured side by side (``before_after.py``).
py-spy itself slows the ingest (``wall_s`` here against ``before_after.py``'s).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PAPERLAKE_SHARED", REPO.parent / "shared"))

# (category, markers): a sample goes to the category of the innermost frame of its stack that holds a marker (the
# first category in this order whose marker it holds), so work done for a step is counted where it is done (the
# parser's frames inside Dagster's step, Dagster's storage called from our code), imports where they are imported
CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("encoding (ONNX, tokenizers)", ("onnxruntime", "tokenizers", "vectors/encoders.py", "embedding_cache")),
    ("Milvus Lite", ("milvus_lite", "pymilvus", "grpc")),
    ("Great Expectations", ("great_expectations",)),
    ("sympy (LaTeX, formula graph)", ("sympy", "paperlake/formulas/")),
    ("parsing (PyMuPDF, MinerU outputs)", ("paperlake/parsing/", "pymupdf", "fitz")),
    ("DuckDB", ("duckdb",)),
    ("dbt in Dagster's process", ("dagster_dbt", "dbt/", "dbt_common", "mashumaro")),
    ("Dagster's event log and run storage", ("dagster/_core/storage", "sqlalchemy", "alembic", "sqlite3")),
    ("Dagster, other", ("dagster",)),
    ("paperlake, other", ("(paperlake/", "(assets/", "(orchestration/", "(agent/", "(cli/")),
]
OTHER = "other (interpreter, pyarrow, imports of other libraries)"
# a thread parked on a queue or a condition (the encoder's lanes, Milvus Lite's server pool between calls): py-spy
# samples it, but it uses no CPU; counted apart and left out of the shares
WAITING = ("_worker (concurrent/futures/thread.py", "wait (threading.py", "_wait_for_tstate_lock")
STAGE_SCRIPT = """
import json, sys, time
from pathlib import Path
from orchestration.run import ingest
from paperlake.config import Settings
home, inbox, mineru, out = map(Path, sys.argv[1:5])
started = time.perf_counter()
summary = ingest([inbox], Settings.from_env(home=home, mineru_dir=mineru))
Path(out).write_text(json.dumps({"wall_s": time.perf_counter() - started, "stages": summary.step_seconds,
                                 "failures": [f.line() for f in summary.failures]}))
"""


def category(stack: str) -> str:
    frames = stack.split(";")
    if not stack.strip() or any(marker in frames[-1] for marker in WAITING):
        return "waiting threads" if stack.strip() else "native frames, unattributed"
    for frame in reversed(frames):
        for name, markers in CATEGORIES:
            if any(marker in frame for marker in markers):
                return name
    return OTHER


def categorise(raw: Path, rate: int) -> dict[str, float]:
    """Sampled seconds per category of a py-spy ``--format raw`` file (one ``stack count`` line per distinct stack)."""
    seconds: Counter[str] = Counter()
    for line in raw.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            seconds[category(stack)] += int(count) / rate
    return {name: round(value, 1) for name, value in seconds.most_common()}


def dbt_commands(home: Path) -> list[dict]:
    """Wall seconds of each dbt command of the home's runs, from their event logs."""
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(home / "dagster"))
    commands = []
    for record in instance.get_run_records():
        started = None
        for entry in instance.all_logs(record.dagster_run.run_id):
            message = entry.user_message or ""
            if message.startswith("Running dbt command"):
                started = entry.timestamp
            elif message.startswith("Finished dbt command") and started is not None:
                commands.append({"job": record.dagster_run.job_name, "seconds": round(entry.timestamp - started, 2)})
                started = None
    return sorted(commands, key=lambda c: c["job"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--volume", default="naacl2024")
    parser.add_argument("--rate", type=int, default=50, help="samples per second")
    parser.add_argument("--work", type=Path, default=None, help="a scratch folder (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "ingest_profile.json")
    args = parser.parse_args(argv)
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        print("py-spy is not installed: .venv/bin/pip install py-spy", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="ingest-profile-"))
    inbox = work / "inbox"
    shutil.rmtree(work / "home", ignore_errors=True)
    shutil.rmtree(inbox, ignore_errors=True)
    (work / "embeddings.sqlite").unlink(missing_ok=True)  # every text encoded, as on a first ingest
    shutil.copytree(SHARED / "corpus" / "inbox" / args.volume, inbox / args.volume)
    env = {k: v for k, v in os.environ.items() if k not in ("PAPERLAKE_HOME", "DAGSTER_HOME")}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DAGSTER_DISABLE_TELEMETRY": "1"}
    env |= {"PAPERLAKE_EMBEDDING_CACHE": str(work / "embeddings.sqlite"), "OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    raw, stages = work / "profile.raw", work / "stages.json"
    command = [py_spy, "record", "--rate", str(args.rate), "--format", "raw", "--output", str(raw), "--"]
    command += [sys.executable, "-c", STAGE_SCRIPT, str(work / "home"), str(inbox), str(SHARED / "corpus" / "mineru")]
    started = time.perf_counter()
    done = subprocess.run([*command, str(stages)], env=env, cwd=work, capture_output=True, text=True)
    if done.returncode != 0 or not stages.exists():
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
        return 1
    measured = json.loads(stages.read_text())
    sampled = categorise(raw, args.rate)
    apart = ("waiting threads", "native frames, unattributed")
    total = sum(value for name, value in sampled.items() if name not in apart)
    result = {
        "what": f"A cold in-process ingest of {args.volume} (MinerU outputs, an empty embedding cache), sampled by "
        f"py-spy at {args.rate} Hz",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()[0]},
        "wall_s": round(measured["wall_s"], 1),
        "wall_with_interpreter_s": round(time.perf_counter() - started, 1),
        "stages_s": {name: round(value, 1) for name, value in measured["stages"].items()},
        "sampled_s": sampled,
        "share": {name: round(value / total, 3) for name, value in sampled.items() if name not in apart},
        "dbt_commands": dbt_commands(work / "home"),
        "failures": measured["failures"],
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
