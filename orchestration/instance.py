"""The Dagster instance under ``PAPERLAKE_HOME/dagster`` and the pool limits that keep shared stores safe.

Dagster runs each step in its own process and several runs at once (sensor-launched per-paper runs, backfills,
the CLI). Three stores have exactly one writer at a time:

- ``milvus``: a Milvus Lite ``.db`` is opened by one process at a time. With a file URI the pool gets one slot,
  so Dagster queues the collection steps instead of letting them wait on (and time out of) the file lock. With
  ``MILVUS_URI=http://…`` (``milvus-lite server`` or a Milvus server) the server serialises writes and the pool
  is left unlimited.
- ``warehouse``: dbt builds the side file ``warehouse.build.duckdb`` and swaps it in; two builds would race.
- ``formulas``: the formula graph is one state merged paper by paper.

A limit the user set explicitly (UI, ``dagster instance concurrency set``) is never overwritten.
Run ``python -m orchestration.instance`` to apply the limits to ``$DAGSTER_HOME`` (``./run ui`` does).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import dagster as dg
import yaml

from paperlake.config import Settings, is_server_uri
from paperlake.runtime.healing import SetAside, heal_sqlite, set_aside
from paperlake.runtime.processes import pid_alive

SINGLE_WRITER_POOLS = ("warehouse", "formulas")
DEFAULT_CONFIG = "telemetry:\n  enabled: false\n"  # a new home's dagster.yaml: Dagster's defaults otherwise
# A home whose launched runs start at once, without a daemon (Dagster's default run coordinator queues them for one):
# for a webserver alone over the home (tests, benchmarks); `dagster dev` and deploy/ keep the queue.
START_AT_ONCE_CONFIG = (
    DEFAULT_CONFIG + "run_coordinator:\n  module: dagster.core.run_coordinator\n  class: DefaultRunCoordinator\n"
)
PID_TAG = "paperlake/pid"
# A run over a range of papers (the parse and vector jobs' batches, a single-run backfill) records one
# "materialization planned" event per asset with the range, instead of one per asset and paper: 13 views of 8
# papers are 13 events, not 104, each a write to SQLite before the run starts. This is the opt-in Dagster's
# maintainers point to for single-run backfills (dagster-io/dagster#29288, #32242); what it gives up is that a range
# run that fails does not mark its partitions failed in the UI. `paperlake ingest` runs a failed batch again one paper
# per run, and a paper that fails to parse is a materialisation with its reason, not a failed run. Set the variable
# to false to keep Dagster's default; `./run ui` and the local cluster's webserver set it as the CLI does.
PLANNED_SUBSET_VAR = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"


def pool_limits(settings: Settings) -> dict[str, int]:
    limits = {pool: 1 for pool in SINGLE_WRITER_POOLS}
    if not is_server_uri(settings.milvus_uri):
        limits["milvus"] = 1
    return limits


def configure_pools(instance, settings: Settings) -> dict[str, int]:
    """Give each single-writer pool one slot unless a limit exists already; returns the limits now in force."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return {}
    existing = storage.get_concurrency_keys()
    for pool, slots in pool_limits(settings).items():
        if pool not in existing:
            storage.set_concurrency_slots(pool, slots)
    return {pool: storage.get_concurrency_info(pool).slot_count for pool in storage.get_concurrency_keys()}


def release_stale_slots(instance) -> list[str]:
    """Free pool slots still held by runs that can no longer release them; returns those run ids.

    A run that finished releases its slots; one whose process was killed (Ctrl-C twice, OOM) would hold them for
    ever and every later run would queue behind it. CLI runs carry their pid in the ``paperlake/pid`` tag: when that
    process is gone the run is marked failed and its slots are freed. Runs launched by the daemon are left to
    Dagster's run monitoring."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    released = []
    for run_id in storage.get_concurrency_run_ids():
        run = instance.get_run_by_id(run_id)
        pid = run.tags.get(PID_TAG) if run is not None else None
        orphaned = pid is not None and pid.isdigit() and not pid_alive(int(pid))
        if run is None or run.is_finished or orphaned:
            if orphaned and not run.is_finished:
                instance.report_run_failed(
                    run, f"the process that ran it (pid {pid}) is gone; its pool slots were released"
                )
            storage.free_concurrency_slots_for_run(run_id)
            released.append(run_id)
    return released


def run_tags(trigger: str) -> dict[str, str]:
    """Tags of a run this process executes in process (the pid lets a later run free its slots if it dies)."""
    return {"paperlake/trigger": trigger, PID_TAG: str(os.getpid())}


# The SQLite files of the default storage that every run reads (a run's own event log is read with that run only).
SHARED_SQLITE_FILES = ("history/runs.db", "history/runs/index.db", "schedules/schedules.db")


def heal_storage(home: Path) -> list[SetAside]:
    """The default storage's shared SQLite files that cannot be read, set aside (paperlake.runtime.healing): Dagster
    makes them again, empty; the run history before is in the set-aside files. A configured storage (PostgreSQL) is the
    operator's to repair."""
    return heal_sqlite([home / name for name in SHARED_SQLITE_FILES])


def dagster_instance(settings: Settings, home: Path | None = None, healed: list[SetAside] | None = None):
    """The persistent instance the CLI, the tests and `dagster dev` share (telemetry off, pools configured).

    ``home`` defaults to ``PAPERLAKE_HOME/dagster``; ``healed`` collects the storage files set aside."""
    home = home or settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    _check_writable(home)
    os.environ.setdefault(PLANNED_SUBSET_VAR, "true")  # read by Dagster when it creates a run (PLANNED_SUBSET_VAR)
    config = home / "dagster.yaml"
    healed = healed if healed is not None else []
    if problem := _config_problem(config):
        healed.append(set_aside(config, problem))
    if not config.exists():
        config.write_text(DEFAULT_CONFIG)
    healed += heal_storage(home)
    try:
        instance = load_instance(home)
    except dg.DagsterInvalidConfigError as error:  # YAML that Dagster's schema refuses (a file cut short, say)
        healed.append(set_aside(config, " ".join(str(error).split())[:300]))
        config.write_text(DEFAULT_CONFIG)
        instance = load_instance(home)
    configure_pools(instance, settings)
    release_stale_slots(instance)
    fail_orphaned_runs(instance)
    return instance


def _check_writable(folder: Path) -> None:
    """A file can be made in ``folder``, or an ``OSError`` naming it (what SQLite would otherwise say deep in
    Dagster's storage as "attempt to write a readonly database", without a path)."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".write-check-")
        os.close(fd)
        os.unlink(name)
    except OSError as error:
        raise OSError(error.errno, f"Dagster's storage cannot be written ({error.strerror})", str(folder)) from None


def _config_problem(config: Path) -> str | None:
    """Why ``dagster.yaml`` cannot be the instance's configuration (not a file, not UTF-8 YAML, not a mapping), or
    None. Such a file is set aside and the default written again: a configuration to keep (``deploy/``'s
    PostgreSQL) is the operator's to restore from the set-aside copy."""

    if not os.path.lexists(config):
        return None
    if config.is_dir():
        return "a directory, not a file"
    try:
        loaded = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        return f"{type(error).__name__}: {error}"
    if loaded is None:  # (Dagster would take its defaults, telemetry on, and the next ingest would not say why)
        return "empty"
    return None if isinstance(loaded, dict) else "not a mapping of settings"


ORPHAN_STATUSES = ("NOT_STARTED", "STARTING", "STARTED")


def fail_orphaned_runs(instance) -> list[str]:
    """Runs this machine's CLI started whose process is gone (killed) but which still read as running or not
    started: marked failed, so the UI does not show them running for ever. Daemon-launched runs (no pid tag) are
    Dagster's run monitoring's."""
    statuses = [getattr(dg.DagsterRunStatus, name) for name in ORPHAN_STATUSES]
    failed = []
    for run in instance.get_runs(dg.RunsFilter(statuses=statuses, tags={"paperlake/trigger": "cli"})):
        pid = run.tags.get(PID_TAG, "")
        if pid.isdigit() and not pid_alive(int(pid)):
            instance.report_run_failed(run, f"the process that ran it (pid {pid}) is gone")
            failed.append(run.run_id)
    return failed


def load_instance(home: Path):
    """The Dagster instance of ``home``: its ``dagster.yaml``, with Dagster's stock storage (SQLite files under
    ``home`` unless the file configures PostgreSQL, as ``deploy/`` does), so the UI, the daemon and the CLI read
    and write the same runs the same way."""
    return dg.DagsterInstance.from_config(str(home))


if __name__ == "__main__":
    settings = Settings.from_env()
    dagster_home = Path(os.environ["DAGSTER_HOME"]) if os.environ.get("DAGSTER_HOME") else None
    limits = configure_pools(dagster_instance(settings, dagster_home), settings)
    print("pool limits: " + ", ".join(f"{pool}={slots}" for pool, slots in sorted(limits.items())))
