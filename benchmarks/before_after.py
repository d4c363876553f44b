"""Cold and no-op ingests of this checkout against an earlier commit, alternated, on the same inputs (issue 48's
"before and after on the same machine"). The earlier commit runs from a git worktree through a thin venv that
reuses this checkout's installed packages, with its own console scripts (``paperlake``, ``paperlake-dbt``, ``dbt``,
``dagster``) so that whatever it runs beside the interpreter is its own.

    .venv/bin/python benchmarks/before_after.py --before 2f13fa0 --rounds 2 --out benchmarks/results/before_after.json

Each round runs, in this order, after/before on the whole sample inbox then before/after on naacl2024 alone (so
neither side always goes first), each a cold ingest into a new home followed by a no-op ingest of the same inbox.
Both use ``--backend pymupdf``, or with ``--mineru`` the sample's MinerU outputs (``--backend mineru --mineru-dir``).
Nothing else should run on the machine meanwhile: the figures are wall times.

``--warm-cache`` takes the encoder out of the comparison: before the rounds, each side ingests the whole sample once
(untimed) into an embedding cache of its own (``PAPERLAKE_EMBEDDING_CACHE``), which its timed ingests then read.
Issues that landed after an earlier commit may encode more texts per paper; with the cache warm, what is left of a
ratio is the orchestration, the parsing and the warehouse. The number of cached vectors of each side is reported.

Each cold ingest also reports where its time went, read from its home's Dagster instance (``launch.runs_of``): per job,
the runs' seconds from start to end and their waits from creation to start, and what was outside every run (the
CLI's start, its planning between runs, its exit). ``--stages-of`` reports it again for a finished ``--work`` folder.
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
SHARED = REPO.parent / "shared"
SCRIPTS = {  # console script → (module, function) of the earlier commit's pyproject, read from it below
    "dbt": ("dbt.cli.main", "cli"),
    "dagster": ("dagster._cli", "main"),  # Dagster's own console script, as installed
}


def _scripts_of(worktree: Path) -> dict[str, tuple[str, str]]:
    import tomllib

    project = tomllib.loads((worktree / "pyproject.toml").read_text())["project"]["scripts"]
    return {name: tuple(target.split(":")) for name, target in project.items()} | SCRIPTS


def prepare_before(rev: str, root: Path) -> tuple[Path, Path]:
    """A worktree of ``rev`` and a venv whose site-packages are this checkout's, with rev's console scripts."""
    worktree, venv = root / "worktree", root / "venv"
    if not worktree.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-f", str(worktree), rev], check=True)
    else:  # a worktree left by an earlier run may hold another commit: this run's is checked out
        subprocess.run(["git", "-C", str(worktree), "checkout", "-q", "--detach", "-f", rev], check=True)
    if not venv.exists():
        base = Path(getattr(sys, "_base_executable", sys.executable))
        subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next((venv / "lib").glob("python3*/site-packages"))
        ours = next((REPO / ".venv" / "lib").glob("python3*/site-packages"))
        (site / "zz_paperlake_packages.pth").write_text(f"import site; site.addsitedir({str(ours)!r})\n")
    for name, (module, function) in _scripts_of(worktree).items():  # rev's own, also in a reused venv
        script = venv / "bin" / name
        script.write_text(
            f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom {module} import {function} as _m\n"
            # a guard, as pip's scripts have: a process pool's spawned worker imports the main module again
            'if __name__ == "__main__":\n    sys.exit(_m())\n'
        )
        script.chmod(0o755)
    return worktree, venv


def ingest_pair(
    side: str, bin_dir: Path, pythonpath: str, inbox: Path, home: Path, backend: list[str], cache: Path | None = None
) -> dict:
    """A cold ingest into a new home, then a no-op ingest of the same inbox: wall seconds and exit codes. ``cache``:
    the embedding cache to read and fill instead of the new home's own."""
    shutil.rmtree(home, ignore_errors=True)
    drop = ("PAPERLAKE_HOME", "DAGSTER_HOME", "PYTHONPATH", "PAPERLAKE_EMBEDDING_CACHE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if cache is not None:
        env["PAPERLAKE_EMBEDDING_CACHE"] = str(cache)
    env |= {"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env |= {"DAGSTER_DISABLE_TELEMETRY": "1", "OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "PAPERLAKE_LLM_MODEL": ""}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    command = [str(bin_dir / "paperlake"), "ingest", "--home", str(home), *backend, str(inbox)]
    result = {"side": side}
    for phase in ("cold", "noop"):
        started = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=home.parent, capture_output=True, text=True)
        result[phase] = round(time.perf_counter() - started, 2)
        result[f"{phase}_exit"] = done.returncode
        if phase == "cold":
            result["stages"] = stages(home, result["cold"])
    return result


def stages(home: Path, wall: float) -> dict:
    """Seconds of a home's runs by job (start to end, and waits from creation to start, summed over the job's runs),
    and what the ingest's wall time spent outside every run."""
    from launch import runs_of  # the same reading of the instance as the launch benchmark's

    jobs: dict[str, dict] = {}
    for run in runs_of(home / "dagster"):
        job = jobs.setdefault(run["job"], {"runs": 0, "run_s": 0.0, "wait_s": 0.0})
        job["runs"] += 1
        job["run_s"] = round(job["run_s"] + run["run_s"], 2)
        job["wait_s"] = round(job["wait_s"] + run["wait_s"], 2)
    inside = sum(job["run_s"] + job["wait_s"] for job in jobs.values())
    return {"jobs": jobs, "outside_runs_s": round(wall - inside, 2)}


def _cached(cache: Path) -> int:
    """How many vectors an embedding cache holds (its one table, the same in every commit that has the cache)."""
    import sqlite3

    with sqlite3.connect(cache) as con:
        return con.execute("select count(*) from embeddings").fetchone()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mineru", action="store_true", help="ingest from the sample's MinerU outputs")
    parser.add_argument("--work", type=Path, default=Path("/tmp/paperlake-before-after"))
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "before_after.json")
    parser.add_argument("--warm-cache", action="store_true", help="each side reads an embedding cache it filled before")
    parser.add_argument("--stages-of", type=Path, help="add the stages of this run's homes to --out, then stop")
    args = parser.parse_args(argv)
    if args.stages_of:
        data = json.loads(args.out.read_text())
        for run in data["runs"]:
            home = args.stages_of / f"{run['side']}-{run['set']}-{run['round']}" / "home"
            run["stages"] = stages(home, run["cold"])
        args.out.write_text(json.dumps(data, indent=1) + "\n")
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    worktree, venv = prepare_before(args.before, args.work / "before")
    inbox = SHARED / "corpus" / "inbox"
    naacl = args.work / "naacl-inbox"
    if not naacl.exists():
        shutil.copytree(inbox / "naacl2024", naacl / "naacl2024")
    sides = {"after": (REPO / ".venv" / "bin", ""), "before": (venv / "bin", str(worktree))}
    mineru = SHARED / "corpus" / "mineru"
    backend = ["--backend", "mineru", "--mineru-dir", str(mineru)] if args.mineru else ["--backend", "pymupdf"]
    caches: dict[str, Path | None] = dict.fromkeys(sides)
    warmed = {}
    if args.warm_cache:
        for side in sides:
            caches[side] = args.work / f"{side}-embeddings.sqlite"
            for stale in caches[side].parent.glob(caches[side].name + "*"):
                stale.unlink()
            home = args.work / f"{side}-warm" / "home"
            home.parent.mkdir(parents=True, exist_ok=True)
            warm = ingest_pair(side, *sides[side], inbox, home, backend, caches[side])
            warmed[side] = {"cold": warm["cold"], "exit": warm["cold_exit"], "cached_vectors": _cached(caches[side])}
            print(json.dumps({"warm": side, **warmed[side]}), flush=True)
    runs = []
    for number in range(1, args.rounds + 1):
        for name, folder, order in (("sample", inbox, ("after", "before")), ("naacl2024", naacl, ("before", "after"))):
            for side in order:
                home = args.work / f"{side}-{name}-{number}" / "home"
                home.parent.mkdir(parents=True, exist_ok=True)
                run = ingest_pair(side, *sides[side], folder, home, backend, caches[side])
                run |= {"set": name, "round": number}
                runs.append(run)
                print(json.dumps(run), flush=True)
    summary = {}
    for name in ("sample", "naacl2024"):
        for phase in ("cold", "noop"):
            medians = {
                side: statistics.median(r[phase] for r in runs if r["set"] == name and r["side"] == side)
                for side in sides
            }
            summary[f"{name}_{phase}_before_s"] = medians["before"]
            summary[f"{name}_{phase}_after_s"] = medians["after"]
            summary[f"{name}_{phase}_after_over_before"] = round(medians["after"] / medians["before"], 3)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    data = {
        "what": f"cold and no-op `paperlake ingest {' '.join(backend[:2])}`, this checkout against an earlier commit, "
        "alternated in one session; medians of the rounds"
        + ("; each side's embedding cache filled beforehand (`warm`)" if args.warm_cache else ""),
        "before": args.before,
        "after": head.stdout.strip(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        **summary,
        **({"warm": warmed} if warmed else {}),
        "runs": runs,
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
