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
from typing import Any

import dagster as dg

from paperlake.config import Settings

EXECUTORS = ("in_process", "multiprocess", "celery")
# The multiprocess executor's step processes fork from a server that imported these once (the executor's documented
# ``start_method: forkserver`` with ``preload_modules``), instead of each being a new interpreter that imports Dagster,
# dbt and the asset modules again (its default, ``spawn``). Python starts one forkserver per process, in the
# environment of that moment: the steps get their settings from the run's resource configuration, not from a later
# change of this process's environment.
FORKSERVER_PRELOAD = ("orchestration.definitions",)


def check_executor(name: str) -> str:
    if name not in EXECUTORS:
        raise ValueError(f"PAPERLAKE_EXECUTOR must be one of {', '.join(EXECUTORS)}, got {name!r}")
    return name


def executor_definition(settings: Settings) -> dg.ExecutorDefinition:
    """The executor the jobs run with outside `execute_in_process` (launched runs, the UI, the sensors)."""
    name = check_executor(settings.executor)
    if name == "celery":
        from dagster_celery import celery_executor  # deferred: optional celery

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


def reconstructable_job(job_name: str, resource: dict[str, Any]) -> Any:
    """A job a worker process can rebuild: :func:`orchestration.definitions.job_for_workers` with these values."""
    return dg.build_reconstructable_job(
        "orchestration.definitions",
        "job_for_workers",
        reconstructable_args=(job_name, json.dumps(resource, sort_keys=True)),
    )
