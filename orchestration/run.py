"""`paperlake ingest`: the same asset graph as the Dagster UI, materialised in process, paper by paper.

The run history goes to the Dagster instance under ``PAPERLAKE_HOME/dagster``, so `dagster dev` with the same
``DAGSTER_HOME`` shows what the CLI did. Only papers the plan selects are parsed; the warehouse is rebuilt only
when something changed (or is missing).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from orchestration.instance import dagster_instance, run_tags
from paperlake.config import Settings
from paperlake.inbox import scan_inbox
from paperlake.formulas.store import formula_graph_outdated
from paperlake.lake import Lake, atomic_write_bytes
from paperlake.pipeline import IngestPlan, plan_ingest
from paperlake.warehouse import DBT_PROJECT_DIR, connect_read_only, dbt_env


# The terminal shows a progress bar; the full event log is in the Dagster instance (and the UI).
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass
class IngestSummary:
    plan: IngestPlan
    published: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    warehouse_built: bool = False
    vector_failures: list[str] = field(default_factory=list)
    step_seconds: dict[str, float] = field(default_factory=dict)


def prepare_dbt_manifest(settings: Settings) -> Path:
    """`dbt parse` once, so the dbt assets can be defined (never at import time)."""
    manifest = DBT_PROJECT_DIR / "target" / "manifest.json"
    env = {**os.environ, **dbt_env(settings.lake, settings.warehouse)}
    sources = [p for p in DBT_PROJECT_DIR.rglob("*") if p.suffix in (".sql", ".yml") and "target" not in p.parts]
    newest = max(p.stat().st_mtime for p in sources)
    (DBT_PROJECT_DIR / "target").mkdir(exist_ok=True)
    with open(DBT_PROJECT_DIR / "target" / ".parse.lock", "w") as lock:  # concurrent ingests parse once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not manifest.exists() or manifest.stat().st_mtime < newest:
            _dbt_parse(settings, env)
    return manifest


def _dbt_parse(settings: Settings, env: dict[str, str]) -> None:
    Lake(settings.lake).ensure_contract()
    dbt = str(Path(sys.executable).with_name("dbt"))
    completed = subprocess.run([dbt, "parse", "--quiet"], cwd=DBT_PROJECT_DIR, env=env, capture_output=True,
                               text=True, timeout=600)
    if completed.returncode != 0:
        raise RuntimeError(f"dbt parse failed:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}")


def dbt_fingerprint() -> str:
    """Digest of the dbt project's models, tests and macros: a change rebuilds the warehouse on the next ingest."""
    digest = hashlib.sha256()
    for path in sorted(DBT_PROJECT_DIR.rglob("*")):
        if path.is_file() and path.suffix in (".sql", ".yml", ".yaml") and not {"target", "logs", "dbt_packages"} \
                & set(path.relative_to(DBT_PROJECT_DIR).parts):
            digest.update(path.relative_to(DBT_PROJECT_DIR).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def vectors_fingerprint() -> str:
    """The vector stage's code version plus what of the collection config shapes entities: a change re-syncs every
    paper (cells whose encoder fingerprint is unchanged are still not re-encoded). Search-time settings (the
    ``hybrid`` block: fusion, weights, candidates) and comments do not count."""
    import yaml

    from assets.vectors import VECTORS_CODE_VERSION, vector_assets
    from paperlake.vectors.config import default_config_path

    active = ",".join(sorted(definition.key.path[-1] for definition in vector_assets))
    config = yaml.safe_load(default_config_path().read_text(encoding="utf-8")) or {}
    config.pop("hybrid", None)
    canonical = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(f"{VECTORS_CODE_VERSION}\n{active}\n{canonical}".encode()).hexdigest()[:16]


def _stage_versions(settings: Settings) -> dict[str, str]:
    path = settings.home / "stages.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _record_stage(settings: Settings, stage: str, version: str) -> None:
    versions = {**_stage_versions(settings), stage: version}
    payload = json.dumps(versions, indent=1).encode()
    atomic_write_bytes(settings.home / "stages.json", lambda handle: handle.write(payload))


def ingest(inboxes: list[Path], settings: Settings, *, progress: Callable[[str, str], None] | None = None,
           rebuild_warehouse: bool = False) -> IngestSummary:
    import time

    started = time.perf_counter()
    prepare_dbt_manifest(settings)
    import dagster as dg

    from assets.parse import inbox_pdf, parsed_views
    from assets.formulas import formula_collection, formula_graph
    from assets.vectors import unsynced_partitions, vector_assets
    from assets.warehouse import dbt_cli_resource, formula_models, warehouse_models
    from orchestration.partitions import papers
    from orchestration.resources import PaperlakeResource

    notify = progress or (lambda key, status: None)
    lake = Lake(settings.lake)
    lake.ensure_contract()
    sources = scan_inbox(inboxes, settings.mineru_dir)
    plan = plan_ingest(sources, lake, settings)
    summary = IngestSummary(plan=plan)
    resource = PaperlakeResource(
        home=str(settings.home), inboxes=[str(p) for p in inboxes],
        mineru_dir=str(settings.mineru_dir) if settings.mineru_dir else None, backend=settings.backend,
        max_chunk_tokens=settings.max_chunk_tokens,
    )
    resources = {"paperlake": resource, "dbt": dbt_cli_resource()}
    instance = dagster_instance(settings)
    tags = run_tags("cli")
    keys = [s.paper_key for s in plan.to_parse] + plan.removed
    known = set(instance.get_dynamic_partitions(papers.name))
    instance.add_dynamic_partitions(papers.name, [k for k in keys if k not in known])
    summary.step_seconds["plan"] = time.perf_counter() - started

    parse_started = time.perf_counter()
    for key in keys:
        result = dg.materialize([inbox_pdf, parsed_views], partition_key=key, instance=instance,
                                resources=resources, selection=[parsed_views], raise_on_error=False,
                                tags=tags, run_config=QUIET)
        if key in plan.removed:
            summary.removed.append(key)
            notify(key, "removed")
        elif not result.success:
            summary.failed[key] = "the Dagster run failed; see the run's logs in the Dagster UI"
            notify(key, "run failed")
        elif (error := lake.error(key)) is not None:
            summary.failed[key] = f"{error['stage']}: {error['reason']}"
            notify(key, f"failed at {error['stage']}")
        else:
            summary.published.append(key)
            notify(key, "parsed")
    summary.step_seconds["parse"] = time.perf_counter() - parse_started

    log_path = settings.home / "logs" / "dbt-build.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    stages = _stage_versions(settings)
    dbt_version = dbt_fingerprint()
    if keys or rebuild_warehouse or not settings.warehouse.exists() or stages.get("warehouse") != dbt_version:
        dbt_started = time.perf_counter()
        with open(log_path, "w") as log, contextlib.redirect_stdout(log):  # dagster-dbt echoes dbt's log
            result = dg.materialize([parsed_views, warehouse_models], instance=instance, resources=resources,
                                    selection=[warehouse_models], raise_on_error=False,
                                    tags=tags, run_config=QUIET)
        if not result.success:
            raise RuntimeError(f"the warehouse build failed (dbt build); the previous warehouse is still live. "
                               f"dbt's log: {log_path}")
        summary.warehouse_built = True
        _record_stage(settings, "warehouse", dbt_version)
        summary.step_seconds["warehouse"] = time.perf_counter() - dbt_started

    if summary.warehouse_built or formula_graph_outdated(settings.lake / "formulas"):
        formulas_started = time.perf_counter()
        with open(log_path.with_name("formulas-build.log"), "w") as log, contextlib.redirect_stdout(log):
            result = dg.materialize([parsed_views, warehouse_models, formula_graph, formula_models, formula_collection],
                                    instance=instance, resources=resources,
                                    selection=[formula_graph, formula_models, formula_collection],
                                    raise_on_error=False, tags=tags, run_config=QUIET)
        if not result.success:
            raise RuntimeError("the formula stage failed; the warehouse keeps its previous formula tables. "
                               f"Logs: {log_path.with_name('formulas-build.log')} and the run in the Dagster UI")
        summary.step_seconds["formulas"] = time.perf_counter() - formulas_started

    vectors_started = time.perf_counter()
    collections = [definition.key.path[-1] for definition in vector_assets]
    vector_keys = sorted(set(keys) | unsynced_partitions(resource, collections)) if settings.warehouse.exists() else []
    vectors_version = vectors_fingerprint()
    if settings.warehouse.exists() and stages.get("vectors") != vectors_version:  # new encoder or code: every paper
        with connect_read_only(settings.warehouse) as con:
            vector_keys = sorted(set(vector_keys) | {k for (k,) in con.execute("select paper_key from metadata").fetchall()})
    known = set(instance.get_dynamic_partitions(papers.name))
    instance.add_dynamic_partitions(papers.name, [k for k in vector_keys if k not in known])
    for key in vector_keys:
        result = dg.materialize([parsed_views, warehouse_models, *vector_assets], partition_key=key,
                                instance=instance, resources=resources, selection=vector_assets,
                                raise_on_error=False, tags=tags, run_config=QUIET)
        if not result.success:
            summary.vector_failures.append(key)
            notify(key, "vector sync failed")
    if settings.warehouse.exists() and not summary.vector_failures:
        _record_stage(settings, "vectors", vectors_version)
    summary.step_seconds["vectors"] = time.perf_counter() - vectors_started
    for key in summary.removed:  # every store has forgotten the paper: its partition can go
        instance.delete_dynamic_partition(papers.name, key)
    summary.step_seconds["total"] = time.perf_counter() - started
    return summary
