"""Where the steps of a run execute, chosen by configuration (``PAPERLAKE_EXECUTOR``), the same asset graph for all:

- ``in_process`` (default): every step in the process that started the run (`paperlake ingest`'s way on one machine);
- ``multiprocess``: Dagster's multiprocess executor, each step in a child process of the run's process;
- ``celery``: dagster-celery: each step a Celery task on the broker (``PAPERLAKE_CELERY_BROKER``, Redis by default),
  picked up by workers on any machine that sees the same lake, instance storage and Milvus (see ``deploy/``).

The concurrency pools of the single-writer stores are claimed through the Dagster instance by every executor (the
run's coordinator claims a slot before it hands a step to a process or to Celery), so they hold whatever the
executor. Runs outside the process are rebuilt by the workers from :func:`job_for_workers` with the same resource
configuration, which is why it takes only plain values.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import dagster as dg

from paperlake.config import Settings

EXECUTORS = ("in_process", "multiprocess", "celery")
# The multiprocess executor's step processes fork from a server that imported these once (Dagster's ``forkserver``
# start method), instead of each being a new interpreter that imports Dagster, dbt and the asset modules again (its
# default, ``spawn``): seconds of a core per step, for every step of every run.
FORKSERVER_PRELOAD = ("orchestration.definitions",)


def check_executor(name: str) -> str:
    if name not in EXECUTORS:
        raise ValueError(f"PAPERLAKE_EXECUTOR must be one of {', '.join(EXECUTORS)}, got {name!r}")
    return name


def executor_definition(settings: Settings) -> dg.ExecutorDefinition:
    """The executor the jobs run with outside `execute_in_process` (launched runs, the UI, the sensors)."""
    name = check_executor(settings.executor)
    if name == "celery":
        from dagster_celery import celery_executor

        return celery_executor
    if name == "multiprocess":
        return dg.multiprocess_executor
    return dg.in_process_executor


def execution_config(settings: Settings) -> dict[str, Any]:
    """The run config's ``execution`` block for the configured executor."""
    name = check_executor(settings.executor)
    if name == "celery":
        return {
            "execution": {
                "config": {
                    "broker": settings.celery_broker,
                    "backend": settings.celery_backend or settings.celery_broker,
                    "include": ["orchestration.definitions"],
                }
            }
        }
    if name == "multiprocess":
        return {
            "execution": {
                "config": {
                    "max_concurrent": 0,  # one per CPU
                    "start_method": {"forkserver": {"preload_modules": list(FORKSERVER_PRELOAD)}},
                }
            }
        }
    return {}


_FORKSERVER_STARTED_IN: tuple | None = None  # the environment the running forkserver (if any) was started in


def forkserver_for_this_environment() -> None:
    """Before a run with the multiprocess executor: a step process forks from the forkserver, so it sees the
    environment, working directory and import path the server was started with, not this process's current ones
    (``spawn`` gave each step the current ones). One `paperlake ingest` never changes them; a process that runs
    ingests with different settings (a notebook, the test suite) does, and then the server is stopped here, so the
    run starts a new one in the current environment (so is a server started before the first call, whose
    environment is unknown). Python's forkserver has no public way to stop it: where its
    private ``_stop`` is gone, the server is left as it is."""
    global _FORKSERVER_STARTED_IN
    from multiprocessing import forkserver

    now = (tuple(sorted(os.environ.items())), os.getcwd(), tuple(sys.path))
    if _FORKSERVER_STARTED_IN != now:  # changed, or a server this module did not see start (if any) runs
        stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
        if stop is not None:
            stop()
    _FORKSERVER_STARTED_IN = now


def reconstructable_job(job_name: str, resource: dict[str, Any]) -> Any:
    """A job a worker process can rebuild: :func:`orchestration.definitions.job_for_workers` with these values."""
    return dg.build_reconstructable_job(
        "orchestration.definitions",
        "job_for_workers",
        reconstructable_args=(job_name, json.dumps(resource, sort_keys=True)),
    )
