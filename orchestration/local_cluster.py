"""A Celery cluster on this machine, for trying the celery executor, for the multi-worker test and the throughput
benchmark: Debian's ``redis-server`` as the broker on 127.0.0.1 and N ``celery -A dagster_celery.app worker``
processes, every one started here and stopped by pid, and with this process (``paperlake.vectors.server.launched``:
set up by the child itself, never by a fork of this process, whose gRPC threads would abort it).

A deployment runs the same worker command on other machines (``deploy/README.md``); here every process shares this
machine's lake, instance storage and Milvus. ``main`` also starts ``dagster dev`` (webserver and daemon) on the same
home: `paperlake ingest` launches its runs through it, and the daemon's run queue starts them side by side.

    python -m orchestration.local_cluster --workers 2   # prints the environment to ingest with, stops on Ctrl-C
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from paperlake.config import Settings
from paperlake.runtime.processes import stop_process
from paperlake.vectors.server import free_port, launched

REPO = Path(__file__).resolve().parents[1]


class BrokerUnavailable(RuntimeError):
    """No redis-server on this machine (Debian: ``apt-get install redis-server``; ``./run test`` installs it)."""


def stop(process: subprocess.Popen, timeout: float = 30) -> None:
    stop_process(process, grace=timeout)


@contextlib.contextmanager
def redis_server(log_dir: Path, port: int | None = None, startup_timeout: float = 30) -> Iterator[str]:
    """A throwaway Redis on 127.0.0.1 (no persistence); yields its URL."""
    executable = shutil.which("redis-server")
    if executable is None:
        raise BrokerUnavailable(
            "redis-server is not installed (apt-get install redis-server): the celery executor needs a broker"
        )
    port = port or free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "redis.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            launched(
                [
                    executable,
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--protected-mode",
                    "yes",
                ]
            ),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise BrokerUnavailable(
                    f"redis-server did not start on 127.0.0.1:{port}: {log.read_text(errors='replace')[-1000:]}"
                )
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(process)


def worker_command(name: str) -> list[str]:
    """One worker: the solo pool (a step at a time, in the worker's own process, like the in-process executor)
    taking one task at a time from the ``dagster`` queue."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "dagster_celery.app",
        "worker",
        "--pool",
        "solo",
        "-n",
        f"{name}@%h",
        "-Q",
        "dagster",
        "--prefetch-multiplier=1",
        "-l",
        "INFO",
    ]


def celery_config(broker: str, directory: Path) -> Path:
    """The ``dagster_celery_config`` module dagster-celery's app reads: the broker and result backend."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "dagster_celery_config.py").write_text(f"broker_url = {broker!r}\nresult_backend = {broker!r}\n")
    return directory


@contextlib.contextmanager
def celery_workers(
    broker: str, env: dict[str, str], count: int, log_dir: Path, startup_timeout: float = 120
) -> Iterator[list[subprocess.Popen]]:
    """``count`` workers with ``env`` (the settings every worker must share: PAPERLAKE_HOME, DAGSTER_HOME,
    MILVUS_URI, ...); yields once every one answers a ping, stops them all on exit."""
    config = celery_config(broker, log_dir / "celery-config")
    # the workers share this machine's cores: each encoder gets its share instead of every core (oversubscribed)
    threads = str(max(1, (os.cpu_count() or 1) // count))
    worker_env = {
        **os.environ,
        "PAPERLAKE_ENCODER_THREADS": threads,
        **env,
        "PYTHONPATH": os.pathsep.join([str(config), str(REPO)]),
        "HF_HUB_OFFLINE": "1",
        "DAGSTER_DISABLE_TELEMETRY": "1",
    }
    workers: list[subprocess.Popen] = []
    try:
        for index in range(count):
            with open(log_dir / f"worker{index}.log", "w") as out:
                workers.append(
                    subprocess.Popen(
                        launched(worker_command(f"worker{index}")),
                        env=worker_env,
                        cwd=REPO,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                    )
                )
        from celery import Celery  # deferred: optional celery

        app = Celery(broker=broker, backend=broker)
        deadline = time.monotonic() + startup_timeout
        while len(app.control.ping(timeout=1.0) or []) < count:
            dead = [index for index, worker in enumerate(workers) if worker.poll() is not None]
            if dead or time.monotonic() > deadline:
                log = log_dir / f"worker{dead[0] if dead else 0}.log"
                raise RuntimeError(f"celery workers did not come up: {log.read_text(errors='replace')[-1500:]}")
        yield workers
    finally:
        for worker in workers:
            stop(worker)


LOCATION_LOADED = "{ workspaceOrError { ... on Workspace { locationEntries { locationOrLoadError { __typename } } } } }"


def _graphql(url: str, query: str) -> dict:
    request = urllib.request.Request(
        f"{url}/graphql", data=json.dumps({"query": query}).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


@contextlib.contextmanager
def dagster_webserver(
    env: dict[str, str],
    log: Path,
    *,
    daemon: bool = True,
    port: int | None = None,
    lifetime: int | None = None,
    startup_timeout: float = 180,
) -> Iterator[str]:
    """The Dagster webserver of this workspace on 127.0.0.1, with ``env`` (the variables every process shares):
    with its daemon (``dagster dev``, as ``./run ui`` starts it: queued runs start within the instance's run queue
    limits), or alone (``dagster-webserver``, for an instance whose run coordinator starts runs at once). Yields its
    URL once the code location has loaded; stopped by pid, and by itself after ``lifetime`` seconds if given (should
    the process that started it die first)."""
    port = port or free_port()
    bin_dir = Path(sys.executable).parent
    if daemon:
        command = [str(bin_dir / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(port)]
    else:
        command = [str(bin_dir / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port)]
    command += ["-w", str(REPO / "workspace.yaml")]
    if lifetime:
        command = ["timeout", str(lifetime), *command]
    # the runs it creates record their planned events as the CLI's do (orchestration.instance.PLANNED_SUBSET_VAR)
    server_env = {"DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS": "true", **os.environ, **env}
    server_env["DAGSTER_DISABLE_TELEMETRY"] = "1"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        process = subprocess.Popen(
            command, cwd=REPO, env=server_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the Dagster webserver exited: {log.read_text(errors='replace')[-2000:]}")
            with contextlib.suppress(OSError, ValueError):
                entries = _graphql(url, LOCATION_LOADED)["data"]["workspaceOrError"]["locationEntries"]
                if entries and all(entry["locationOrLoadError"] for entry in entries):
                    kinds = {entry["locationOrLoadError"]["__typename"] for entry in entries}
                    if kinds != {"RepositoryLocation"}:
                        raise RuntimeError(f"the code location did not load ({kinds}): see {log}")
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Dagster webserver did not load the code location in {startup_timeout:.0f} s")
            time.sleep(1)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):  # the whole session: dagster dev's daemon and code servers
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    from orchestration.instance import dagster_instance  # deferred: dagster (the workers' helpers do without it)

    dagster_instance(settings)  # the home's instance and its single-writer pools, before `dagster dev` reads them
    logs = Path(tempfile.mkdtemp(prefix="paperlake-cluster-"))
    with redis_server(logs) as broker:
        env = {
            "PAPERLAKE_HOME": str(settings.home),
            "DAGSTER_HOME": str(settings.dagster_home),
            "PAPERLAKE_EXECUTOR": "celery",
            "PAPERLAKE_CELERY_BROKER": broker,
            "PAPERLAKE_CONCURRENT_RUNS": str(args.workers),
        }
        if settings.milvus_uri:
            env["MILVUS_URI"] = settings.milvus_uri
        with celery_workers(broker, env, args.workers, logs), dagster_webserver(env, logs / "dagster.log") as url:
            env["PAPERLAKE_DAGSTER_URL"] = url  # the runs go through it: its daemon's queue starts them side by side
            print(f"{args.workers} celery workers on {broker}, the Dagster UI at {url} (logs: {logs}); ingest with:")
            print("  " + " ".join(f"{name}={value}" for name, value in env.items()) + " paperlake ingest INBOX")
            if not settings.milvus_uri:
                print(
                    "(a Milvus Lite file takes one process at a time: set MILVUS_URI to a server for parallel "
                    "vector steps)"
                )
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
