"""A Celery cluster on this machine, for trying the celery executor, for the multi-worker test and the throughput
benchmark: Debian's ``redis-server`` as the broker on 127.0.0.1 and N ``celery -A dagster_celery.app worker``
processes, every one started here and stopped by pid, and with this process (``paperlake.vectors.server.launched``:
set up by the child itself, never by a fork of this process, whose gRPC threads would abort it).

A deployment runs the same worker command on other machines (``deploy/README.md``); here every process shares this
machine's lake, instance storage and Milvus.

    python -m orchestration.local_cluster --workers 2   # prints the environment to ingest with, stops on Ctrl-C
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    settings = Settings.from_env()
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
        with celery_workers(broker, env, args.workers, logs):
            print(f"{args.workers} celery workers on {broker} (logs: {logs}); ingest with:")
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
