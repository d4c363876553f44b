"""`paperlake ingest`: the Definitions' named jobs, executed in process, for exactly what is stale.

The run history goes to the Dagster instance under ``PAPERLAKE_HOME/dagster``, so `dagster dev` with the same
``DAGSTER_HOME`` shows what the CLI did. Only papers the plan selects are parsed; every store downstream is rebuilt
only when :mod:`paperlake.freshness` finds it stale, by the same rules the stores sensor applies.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import dagster as dg

from assets.parse import observe_inbox
from assets.partitions import PAPERS, papers, volumes
from assets.resources import LLMResource, PaperlakeResource
from assets.vectors import vector_assets
from orchestration.executors import execution_config, reconstructable_job
from orchestration.instance import dagster_instance, run_tags
from orchestration.launch import Launcher, step_failure_reason, webserver_url
from paperlake.config import RUN_INBOXES_TAG, RUN_MINERU_TAG, Settings
from paperlake.enrichment import Budget, not_configured_reason, resolve_kinds
from paperlake.enrichment import stale_papers as papers_to_enrich
from paperlake.evaluation.sets import (
    heal_quality_histories,
    orphan_probe_files,
    read_quality,
    remove_probes,
    stale_probe_papers,
    stale_volumes,
    volume_set_path,
)
from paperlake.evaluation.sets import volumes as warehouse_volumes
from paperlake.freshness import (
    formula_build_staleness,
    formula_encoder_available,
    formula_staleness,
    warehouse_staleness,
)
from paperlake.lake.inbox import scan_volumes
from paperlake.lake.pipeline import IngestPlan, plan_ingest, record_held_volumes
from paperlake.lake.store import Lake
from paperlake.runtime.healing import log as healing_log
from paperlake.vectors.ledger import VectorPlan, delete_orphans, read_ledger, stale_papers
from paperlake.warehouse.build import (
    DBT_PROJECT_DIR,
    SHARED_PARSE_ENV,
    SHARED_PARSE_LOCK,
    dbt_env,
    dbt_target_path,
    heal_warehouse,
    seed_parse_state,
    shared_parse_record,
)
from paperlake.warehouse.dbt_launcher import WORKDIR_VAR

log = logging.getLogger(__name__)

# The terminal shows a progress bar and one line per failure; the full event log is in the Dagster instance (UI).
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
# Papers per run for the per-paper jobs: a run costs Dagster bookkeeping on top of the work (a third of the parse
# stage when every paper had its own run), and a parse run starts its step's worker pool; a batch keeps the progress
# bar moving and bounds what one run's failure sends back to one run per paper. 16 against 8: a cold ingest of
# emnlp2024's 14 papers took 76.4 and 72.3 s against 78.9 and 79.8 s (one parse and one vector run instead of two;
# warm embedding cache, alternated; docs/performance.md).
PAPERS_PER_RUN = 16
COLLECTION_STEP = "vectors__formulas"  # the formulas collection's step (its asset key, as Dagster names steps)
# The tags of a run over a range of partitions, as the Dagster UI sets them when it launches a single-run backfill
RANGE_START_TAG, RANGE_END_TAG = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


@dataclass
class StageFailure:
    """One failed paper or stage of an ingest: what `paperlake ingest` prints, one line each."""

    stage: str
    reason: str
    paper_key: str | None = None

    def line(self) -> str:
        return f"{self.paper_key + ': ' if self.paper_key else ''}{self.stage}: {self.reason}"


@dataclass
class IngestSummary:
    plan: IngestPlan
    published: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    warehouse_built: bool = False
    stale: dict[str, str] = field(default_factory=dict)
    formulas_built: list[str] = field(default_factory=list)
    vectors_synced: list[str] = field(default_factory=list)
    vector_failures: list[str] = field(default_factory=list)
    orphans_deleted: int = 0
    failures: list[StageFailure] = field(default_factory=list)
    step_seconds: dict[str, float] = field(default_factory=dict)
    enrichment_skipped: str | None = None  # why enrichment did not run (no endpoint)
    enriched: list[str] = field(default_factory=list)
    enrichment_pending: dict[str, str] = field(default_factory=dict)  # paper key -> why items are left
    enrichment_usage: dict[str, float] = field(default_factory=dict)  # calls, cached_calls, tokens, cost_usd, errors
    probed: list[str] = field(default_factory=list)  # papers whose probes were (re)generated
    quality: dict[str, dict] = field(default_factory=dict)  # volume -> its retrieval-quality report
    # stores set aside as damaged and rebuilt (paperlake.runtime.healing)
    healed: list[str] = field(default_factory=list)
    # what was made again for a reason other than a new or changed paper: "<store> of <n> papers: <why>"
    repaired: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def prepare_dbt_manifest(settings: Settings) -> Path:
    """`dbt parse` once per version of the project, so the dbt assets can be defined (never at import time). Its
    partial-parse state is also where a new home's builds start from (``paperlake.warehouse.build.seed_parse_state``):
    beside it, the profile it was made under."""
    shared = DBT_PROJECT_DIR / "target"
    manifest = shared / "manifest.json"
    env = {**os.environ, **dbt_env(settings.lake, settings.warehouse)}
    sources = [p for p in DBT_PROJECT_DIR.rglob("*") if p.suffix in (".sql", ".yml") and "target" not in p.parts]
    newest = max(p.stat().st_mtime for p in sources)
    shared.mkdir(exist_ok=True)
    with open(shared / SHARED_PARSE_LOCK, "a") as lock:  # concurrent ingests parse once
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = shared / SHARED_PARSE_ENV
        state = shared / "partial_parse.msgpack"
        if (
            not manifest.exists()
            or manifest.stat().st_mtime < newest
            or _recorded(record) != shared_parse_record(env, state.read_bytes() if state.is_file() else None)
        ):
            record.unlink(missing_ok=True)  # no home starts from a parse being rewritten
            _dbt_parse(settings, env)
            scratch = shared / f"{SHARED_PARSE_ENV}.tmp"
            scratch.write_text(json.dumps(shared_parse_record(env, state.read_bytes())), encoding="utf-8")
            os.replace(scratch, record)
    return manifest


def _recorded(record: Path) -> dict | None:
    try:
        return json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _dbt_parse(settings: Settings, env: dict[str, str]) -> None:
    Lake(settings.lake).ensure_contract()
    workdir = Path(env[WORKDIR_VAR])
    workdir.mkdir(parents=True, exist_ok=True)
    dbt = str(Path(sys.executable).with_name("dbt"))
    completed = subprocess.run(
        [dbt, "parse", "--quiet"], cwd=workdir, env=env, capture_output=True, text=True, timeout=600
    )
    if completed.returncode != 0:
        raise RuntimeError(f"dbt parse failed:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}")


def failure_reason(result) -> str:
    """The innermost error of a failed run's failed steps, on one line (the stack traces stay in the instance); for a
    failed dbt command, dbt's first error and what it says."""

    if hasattr(result, "reason"):  # a run launched through the webserver (orchestration.launch)
        return result.reason
    return step_failure_reason([event for event in result.all_events if event.is_step_failure])


_STEP_STAGES = {"vectors__": "vectors", "evaluation__probes": "evaluation"}
_STEP = re.compile(r"(?:^|; )(%s)\w*: " % "|".join(_STEP_STAGES))


def failures_by_stage(reason: str) -> dict[str, str]:
    """A failed per-paper run's reason (:func:`failure_reason`: ``step: what; step: what``) split by the stage of
    its steps: ``vectors`` (a ``vectors__…`` step) and ``evaluation`` (the probes' step). A reason naming neither
    (the run failed before a step did) is every stage's."""
    cuts = list(_STEP.finditer(reason))
    parts: dict[str, list[str]] = {}
    for cut, after in zip(cuts, [*cuts[1:], None]):
        text = reason[cut.start() + (2 if cut.group(0).startswith("; ") else 0) : after.start() if after else None]
        parts.setdefault(_STEP_STAGES[cut.group(1)], []).append(text)
    if not parts:
        return {"vectors": reason, "evaluation": reason}
    return {stage: "; ".join(texts) for stage, texts in parts.items()}


class _Runner:
    """Executes the Definitions' named jobs against the persistent instance: in this process, or with the configured
    executor (:mod:`orchestration.executors`), whose workers rebuild the job from ``resource``'s fields."""

    def __init__(self, defs, instance, settings: Settings, resource: dict | None = None):
        """``defs``: the Definitions, or a function that builds them when the first run needs them."""
        self._defs, self.instance, self.settings = defs, instance, settings
        self.resource = resource or {}
        self.log_dir = settings.home / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # with the webserver of this home, every run is launched there: the UI's own runs (orchestration.launch)
        self.launcher = None

        url = webserver_url(settings.dagster_url, settings.dagster_home)
        if url:
            self.launcher = Launcher(url, instance)
        elif settings.concurrent_runs > 1:
            log.warning(
                "PAPERLAKE_CONCURRENT_RUNS=%d takes effect through the Dagster webserver (PAPERLAKE_DAGSTER_URL), "
                "whose run queue starts the runs side by side; in this process they run one after the other",
                settings.concurrent_runs,
            )

    @property
    def defs(self):
        """The Definitions, built on first use: an ingest that finds nothing to run never imports the asset modules
        (dagster-dbt and dbt among them: half of an unchanged ingest)."""
        return self.build_definitions()

    def build_definitions(self):
        if not hasattr(self._defs, "resolve_job_def"):
            self._defs = self._defs()
        return self._defs

    def run(
        self,
        job_name: str,
        *,
        partition_key: str | None = None,
        asset_selection=None,
        log: str | None = None,
        run_config: dict | None = None,
        partition_range: tuple[str, str] | None = None,
    ):
        if self.launcher is not None:
            run_id = self._submit(
                job_name,
                partition_key=partition_key,
                partition_range=partition_range,
                asset_selection=asset_selection,
                run_config=run_config,
            )
            return self.launcher.wait(run_id)
        tags = self._tags(partition_key, partition_range)
        with contextlib.ExitStack() as stack:
            if log:  # dagster-dbt echoes dbt's log to stdout
                stack.enter_context(contextlib.redirect_stdout(stack.enter_context(open(self.log_dir / log, "w"))))
            if self.settings.executor == "in_process":
                return self.defs.resolve_job_def(job_name).execute_in_process(
                    instance=self.instance,
                    partition_key=partition_key,
                    asset_selection=asset_selection,
                    raise_on_error=False,
                    tags=tags,
                    run_config=QUIET | (run_config or {}),
                )

            if partition_key:
                tags["dagster/partition"] = partition_key
            # dagster-celery registers its task again for every run of this process: the same callable, said loudly
            warnings.filterwarnings("ignore", message=r"Task name '.*' is already registered")
            with dg.execute_job(
                reconstructable_job(job_name, self.resource),
                instance=self.instance,
                run_config=QUIET | execution_config(self.settings) | (run_config or {}),
                tags=tags,
                asset_selection=asset_selection,
                raise_on_error=False,
            ) as result:
                return result

    def _tags(self, partition_key: str | None, partition_range: tuple[str, str] | None) -> dict[str, str]:
        tags = run_tags("cli")
        if partition_key:
            tags["paperlake/volume"] = partition_key.partition("/")[0]
        if partition_range:  # one run over consecutive partitions (the assets' single-run backfill policy)
            tags |= {RANGE_START_TAG: partition_range[0], RANGE_END_TAG: partition_range[1]}
            tags["paperlake/volume"] = partition_range[0].partition("/")[0]
        return tags

    def _submit(
        self,
        job_name: str,
        *,
        partition_key: str | None = None,
        partition_range: tuple[str, str] | None = None,
        asset_selection=None,
        run_config: dict | None = None,
    ) -> str:
        """The run, submitted to the webserver with this ingest's inputs as tags and the configured executor's
        run config: its id."""
        inputs = {RUN_INBOXES_TAG: os.pathsep.join(self.resource.get("inboxes") or [])}
        if self.resource.get("mineru_dir"):
            inputs[RUN_MINERU_TAG] = self.resource["mineru_dir"]
        partition = {"dagster/partition": partition_key} if partition_key else {}
        return self.launcher.submit(
            job_name,
            tags=self._tags(partition_key, partition_range) | partition | inputs,
            asset_selection=asset_selection,
            run_config=execution_config(self.settings) | (run_config or {}),
        )

    def run_papers(
        self,
        job_name: str,
        keys: list[str],
        *,
        asset_selection=None,
        on_run: Callable[[list[str], object], None] | None = None,
    ) -> list[tuple[list[str], object]]:
        """``job_name`` for the paper partitions ``keys``, in this order: consecutive partitions in one run each
        (at most :data:`PAPERS_PER_RUN`); a batch whose run fails is run again one paper per run, so each failure
        is a paper's. Returns (papers, run result) per run; ``on_run`` is called with each as soon as it ends.

        Through the webserver (:mod:`orchestration.launch`), ``concurrent_runs`` > 1 cuts the papers into that many
        shares and submits their runs at once: the instance's run queue starts them side by side, within its
        limits (``deploy/dagster.yaml``), and the executor spreads their steps (Celery workers). In this process,
        runs go one after the other whatever the setting: Dagster runs are not started from threads of one
        process (its run-time logging set-up is not thread-safe), and a pool of run processes beside the
        instance's own launcher would be a second orchestrator."""

        concurrent = self.settings.concurrent_runs if self.launcher is not None else 1
        size = max(1, min(PAPERS_PER_RUN, -(-len(keys) // concurrent)))
        batches = consecutive_batches(self.instance.get_dynamic_partitions(PAPERS), keys, size)
        if concurrent > 1 and len(batches) > 1:
            runs = self._launch_batches(job_name, batches, asset_selection)
        else:
            runs = (outcome for batch in batches for outcome in self._run_batch(job_name, batch, asset_selection))
        outcomes = []
        for batch, result in runs:
            outcomes.append((batch, result))
            if on_run is not None:
                on_run(batch, result)
        return outcomes

    def _run_batch(self, job_name: str, batch: list[str], asset_selection) -> list[tuple[list[str], object]]:
        if len(batch) == 1:
            return [(batch, self.run(job_name, partition_key=batch[0], asset_selection=asset_selection))]
        result = self.run(job_name, partition_range=(batch[0], batch[-1]), asset_selection=asset_selection)
        if result.success:
            return [(batch, result)]
        return [([key], self.run(job_name, partition_key=key, asset_selection=asset_selection)) for key in batch]

    def _launch_batches(self, job_name: str, batches: list[list[str]], asset_selection):
        """Every batch's run submitted at once, then each waited for in order; a failed batch's papers are
        submitted again one per run, at once, and waited for."""

        def submit(batch: list[str]) -> str:
            if len(batch) == 1:
                return self._submit(job_name, partition_key=batch[0], asset_selection=asset_selection)
            return self._submit(job_name, partition_range=(batch[0], batch[-1]), asset_selection=asset_selection)

        for batch, run_id in [(batch, submit(batch)) for batch in batches]:
            result = self.launcher.wait(run_id)
            if result.success or len(batch) == 1:
                yield batch, result
                continue
            for one, again in [([key], submit([key])) for key in batch]:
                yield one, self.launcher.wait(again)


def consecutive_batches(order: list[str], keys: list[str], limit: int) -> list[list[str]]:
    """``keys`` cut into batches, keeping their order, each made of partitions of one volume that follow each other
    in ``order`` (a range run covers exactly the partitions between its first and last key; its runs are tagged
    with their volume)."""
    position = {key: index for index, key in enumerate(order)}
    batches: list[list[str]] = []
    for key in keys:
        last = batches[-1][-1] if batches else None
        if (
            last is not None
            and len(batches[-1]) < limit
            and key in position
            and last in position
            and position[key] == position[last] + 1
            and key.partition("/")[0] == last.partition("/")[0]
        ):
            batches[-1].append(key)
        else:
            batches.append([key])
    return batches


def ingest(
    inboxes: list[Path],
    settings: Settings,
    *,
    progress: Callable[[str, str], None] | None = None,
    rebuild_warehouse: bool = False,
    enrich_kinds: tuple[str, ...] | None = None,
    enrich_limit: int | None = None,
    retry_errors: bool = False,
) -> IngestSummary:
    """Bring every store up to date with the inbox: parse what changed, then rebuild exactly the stores that are
    stale by :mod:`paperlake.freshness` (which reads each store's own record of what it was built from), so a
    run killed at any point is repaired by the next one. Never raises for a failed paper or stage: each becomes a
    :class:`StageFailure` of the summary. Each damaged file set aside on the way (by the ingest's own checks or by
    a step run in this process) is a line of ``summary.healed``; steps run in other processes log theirs to their
    run's event log."""
    said: list[str] = []
    collector = _SetAsideLines(said)
    healing_log.addHandler(collector)
    try:
        summary = _ingest(inboxes, settings, progress, rebuild_warehouse, enrich_kinds, enrich_limit, retry_errors)
    finally:
        healing_log.removeHandler(collector)
    summary.healed = list(dict.fromkeys([*summary.healed, *said]))
    return summary


# Why a paper's vectors or probes are made again in the ordinary course (new or changed papers): not printed; any
# other reason (a record or file that cannot be read, a collection recreated, a cut sync) is a line of the summary.
ROUTINE_REASONS = (
    "never synced",
    "its cells changed",
    "left the warehouse",
    "no probes yet",
    "the paper, its",
    "probes of changed papers",
    "no probe set yet",
    "papers left the volume",
    "never evaluated",
    "the probe set, the vector stage",
)


class _SetAsideLines(logging.Handler):
    """Keeps the message of each set-aside warning (:func:`paperlake.runtime.healing.set_aside`) logged here."""

    def __init__(self, lines: list[str]):
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _unusual(reasons: dict[str, str]) -> dict[str, int]:
    """reason → how many papers, for the reasons that are not :data:`ROUTINE_REASONS`."""
    counts: dict[str, int] = {}
    for why in reasons.values():
        if not why.startswith(ROUTINE_REASONS):
            counts[why] = counts.get(why, 0) + 1
    return counts


def _note_unusual(summary: "IngestSummary", store: str, reasons: dict[str, str]) -> None:
    for why, count in _unusual(reasons).items():
        summary.repaired.append(f"{store} of {count} paper{'s' if count > 1 else ''}: {why}")


def _ingest(
    inboxes: list[Path],
    settings: Settings,
    progress: Callable[[str, str], None] | None,
    rebuild_warehouse: bool,
    enrich_kinds: tuple[str, ...] | None,
    enrich_limit: int | None,
    retry_errors: bool,
) -> IngestSummary:
    started = time.perf_counter()
    notify = progress or (lambda key, status: None)
    lake = Lake(settings.lake)
    lake.ensure_contract()
    healed = [moved.line() for moved in heal_warehouse(settings.warehouse)]
    scan = scan_volumes(inboxes, settings.mineru_dir)
    sources = scan.sources
    record_held_volumes(lake, scan)
    plan = plan_ingest(sources, lake, settings, held=scan.held, removals_held=scan.removals_held is not None)
    building = bool(plan.to_parse or plan.removed)
    prepare_dbt_manifest(settings)  # before the dbt assets are imported
    if building:  # a new home's builds start from the project's shared parse (same profile in every home)
        seed_parse_state(dbt_target_path(settings.home, "warehouse"), dbt_env(settings.lake, settings.warehouse))

    summary = IngestSummary(plan=plan, healed=healed)
    for volume, reason in scan.held.items():
        stage = "inbox" if volume in scan.folders_held else "manifest"  # as record_held_volumes writes it
        unreadable = "folder" if stage == "inbox" else "manifest"
        held_note = f"its papers stay as the lake has them until the {unreadable} reads again"
        summary.failures.append(StageFailure(stage, f"{reason}; {held_note}", volume))
    summary.failures += [StageFailure("inbox", line) for line in scan.misplaced()]
    if plan.kept:
        kept = f"{len(plan.kept)} paper{'s' if len(plan.kept) > 1 else ''} not in the inbox stay in every store"
        remove = "to remove them, keep one empty volume folder in it"
        summary.failures.append(StageFailure("inbox", f"{scan.removals_held}: {kept}; {remove}"))
    resource = PaperlakeResource(
        home=str(settings.home),
        inboxes=[str(p) for p in inboxes],
        mineru_dir=str(settings.mineru_dir) if settings.mineru_dir else None,
        backend=settings.backend,
        max_chunk_tokens=settings.max_chunk_tokens,
        milvus_uri=settings.milvus_uri,
        lake_dir=str(settings.lake),
        embedding_cache=str(settings.embedding_cache) if settings.embedding_cache else None,
    )
    storage_set_aside: list = []
    instance = dagster_instance(settings, healed=storage_set_aside)
    summary.healed += [moved.line() for moved in storage_set_aside]

    def definitions():
        from orchestration.definitions import build_definitions  # deferred: dagster-dbt

        return build_definitions(resource, LLMResource.from_settings(settings))

    runner = _Runner(definitions, instance, settings, resource.model_dump())
    if building:  # runs will come
        runner.build_definitions()
    keys = plan.removed + [s.paper_key for s in plan.to_parse]  # a removed paper frees its id first
    _add_partitions(instance, papers.name, keys)
    observe_inbox(instance, [s for s in sources if s.paper_key not in plan.removed])
    summary.step_seconds["plan"] = time.perf_counter() - started

    stage_started = time.perf_counter()
    for key, result in ((key, result) for batch, result in runner.run_papers("ingest_paper", keys) for key in batch):
        if not result.success:
            summary.failed[key] = failure_reason(result)
            summary.failures.append(StageFailure("parse", summary.failed[key], key))
            notify(key, "run failed")
        elif key in plan.removed:
            summary.removed.append(key)
            notify(key, "removed")
        elif (error := lake.error(key)) is not None:
            summary.failed[key] = f"{error['stage']}: {error['reason']}"
            summary.failures.append(StageFailure(error["stage"], error["reason"], key))
            notify(key, f"failed at {error['stage']}")
        else:
            summary.published.append(key)
            notify(key, "parsed")
    summary.step_seconds["parse"] = time.perf_counter() - stage_started

    stage_started = time.perf_counter()
    _enrich(runner, instance, settings, summary, notify, enrich_kinds, enrich_limit, retry_errors)
    summary.step_seconds["enrichment"] = time.perf_counter() - stage_started

    stage_started = time.perf_counter()
    # The vector store, once open, stays open through the stages that use it: in process, the steps' own stores
    # share its server, so a Milvus Lite file's collections are loaded once per ingest (loading is what grows with
    # the store) instead of once per step.
    held = contextlib.ExitStack()
    store, store_error = None, None
    in_process = settings.executor == "in_process" and runner.launcher is None
    reason = warehouse_staleness(settings) or ("asked for (--rebuild-warehouse)" if rebuild_warehouse else None)
    if reason:
        from orchestration.jobs import warehouse_selection  # deferred: dagster-dbt

        summary.stale["warehouse"] = reason
        # the formula graph (from the lake) and its dbt models go with the marts when stale: one dbt build; a graph
        # whose outputs change has its collection synced in the same run (a run fewer)
        formulas = formula_build_staleness(settings)
        summary.stale |= {f"formula {part}": why for part, why in formulas.items()}
        with_collection = {"graph", "models"} <= formulas.keys() and formula_encoder_available()
        if with_collection and in_process:  # the collection's step shares the server this process holds from now on
            try:
                store = _hold_store(held, settings, summary)
            except Exception as error:  # said once, by the check below
                store_error, with_collection = error, False
        selection = warehouse_selection(formulas, with_collection)
        result = runner.run("build_warehouse", asset_selection=selection, log="dbt-build.log")
        if not result.success and formulas and (why := failure_reason(result)).startswith("formula_graph: "):
            # the graph failed before dbt began: said once, and the marts are built without it
            summary.failures.append(StageFailure("formulas", why))
            formulas, with_collection = {}, False
            result = runner.run("build_warehouse", asset_selection=warehouse_selection({}), log="dbt-build.log")
        if (
            not result.success
            and with_collection
            and (why := failure_reason(result)).startswith(f"{COLLECTION_STEP}: ")
            and warehouse_staleness(settings) is None
        ):  # the warehouse and the graph's tables were built and swapped in; only the collection's sync failed
            summary.failures.append(StageFailure("formulas", why))
            summary.warehouse_built = True
            summary.formulas_built = sorted(formulas)
        elif not result.success:
            held.close()
            summary.failures.append(
                StageFailure(
                    "warehouse",
                    f"{failure_reason(result)} (the previous warehouse is still live; dbt's log: "
                    f"{runner.log_dir / 'dbt-build.log'})",
                )
            )
            summary.step_seconds["total"] = time.perf_counter() - started
            return summary
        else:
            summary.warehouse_built = True
            summary.formulas_built = sorted({*formulas, *(["collection"] if with_collection else [])})
    summary.step_seconds["warehouse"] = time.perf_counter() - stage_started
    if not settings.warehouse.exists():
        held.close()
        summary.step_seconds["total"] = time.perf_counter() - started
        return summary

    # the probes read the warehouse only: which papers need them is known as soon as it is built; they are made in the
    # vector sync's run of each paper whose vectors are stale too, in a probe_paper run otherwise
    stage_started = time.perf_counter()
    probes = _stale_probes(settings, summary) if settings.evaluate else {}
    summary.step_seconds["probes"] = time.perf_counter() - stage_started

    stage_started = time.perf_counter()
    collections = [definition.key.path[-1] for definition in vector_assets]
    try:
        if store_error is not None:
            raise store_error
        if store is None:
            store = _hold_store(held, settings, summary)
        formulas = formula_staleness(settings, store if formula_encoder_available() else None)
        vectors = stale_papers(settings, store, collections)
        for collection in collections:
            why = {key: reasons[collection] for key, reasons in vectors.stale.items() if collection in reasons}
            _note_unusual(summary, f"vectors {collection}", why)
        summary.orphans_deleted = delete_orphans(store, vectors)
    except Exception as error:  # Milvus unreachable or its file held elsewhere: what needs it waits till next run
        held.close()
        message = " ".join(str(error).split())[:300]
        summary.failures.append(
            StageFailure(
                "vectors",
                f"cannot open the vector store at {settings.milvus_uri} "
                f"({type(error).__name__}: {message}); no collection was "
                "checked or synced",
            )
        )
        formulas = formula_staleness(settings, None)
        vectors = VectorPlan()
    summary.step_seconds["check"] = time.perf_counter() - stage_started
    if not in_process:
        held.close()  # steps run in other processes and open the store themselves (a Lite file: one at a time)
    with held:
        _downstream(runner, instance, settings, summary, formulas, vectors, probes, notify)
    _forget_partitions(instance, papers.name, settings, lake, {s.paper_key for s in sources}, collections)
    summary.step_seconds["total"] = time.perf_counter() - started
    return summary


def _downstream(
    runner: "_Runner",
    instance,
    settings: Settings,
    summary: IngestSummary,
    formulas: dict[str, str],
    vectors: VectorPlan,
    probes: dict[str, str],
    notify: Callable[[str, str], None],
) -> None:
    """The formula graph, the vector sync and the papers' probes, and the volumes' self-evaluation, for what the
    check found stale."""

    stage_started = time.perf_counter()
    if formulas and not any(failure.stage == "formulas" for failure in summary.failures):  # not twice an ingest
        from orchestration.jobs import FORMULA_ASSETS  # deferred: dagster-dbt

        summary.stale |= {f"formula {part}": why for part, why in formulas.items()}
        selection = [key for part in formulas for key in FORMULA_ASSETS[part]]
        result = runner.run("build_formulas", asset_selection=selection, log="formulas-build.log")
        if result.success:
            summary.formulas_built = sorted({*summary.formulas_built, *formulas})
        else:
            summary.failures.append(StageFailure("formulas", failure_reason(result)))
    summary.step_seconds["formulas"] = time.perf_counter() - stage_started

    stage_started = time.perf_counter()
    keys = sorted({*vectors.stale, *probes})
    _add_partitions(instance, papers.name, keys)
    groups: dict[tuple[tuple[str, ...], bool], list[str]] = {}
    for key in keys:  # a run makes the same assets for each of its papers
        groups.setdefault((tuple(sorted(vectors.stale.get(key, ()))), key in probes), []).append(key)
    for (collections, probing), group in groups.items():
        from orchestration.jobs import paper_selection  # deferred: dagster-dbt (an unchanged ingest has no group)

        job, selection = paper_selection(collections, probing)
        for batch, result in runner.run_papers(job, group, asset_selection=selection):
            failed = {} if result.success else failures_by_stage(failure_reason(result))
            for key in batch:
                if collections and "vectors" in failed:
                    summary.vector_failures.append(key)
                    summary.failures.append(StageFailure("vectors", failed["vectors"], key))
                    notify(key, "vector sync failed")
                elif collections:
                    summary.vectors_synced.append(key)
                if probing and "evaluation" in failed:
                    summary.failures.append(StageFailure("evaluation", failed["evaluation"], key))
                elif probing:
                    summary.probed.append(key)
    summary.step_seconds["vectors"] = time.perf_counter() - stage_started

    stage_started = time.perf_counter()
    if settings.evaluate and not summary.vector_failures:
        _evaluate(runner, instance, settings, summary)
    summary.step_seconds["evaluation"] = time.perf_counter() - stage_started


def _stale_probes(settings: Settings, summary: IngestSummary) -> dict[str, str]:
    """The papers whose probes are stale (their warehouse rows changed), paper key → why; the files of papers and
    volumes gone from the warehouse go. The probes are made with the papers' vector sync (:func:`_downstream`), and
    their volumes scored by :func:`_evaluate` once the vectors are synced (a volume's staleness sees its papers' new
    probes, :func:`paperlake.evaluation.sets.stale_volumes`)."""

    heal_quality_histories(settings)
    for key in orphan_probe_files(settings):
        remove_probes(settings, key)
    present = warehouse_volumes(settings)
    for path in [
        *(settings.evaluation / "volume_set").glob("*.jsonl"),
        *(settings.evaluation / "quality").glob("*.json"),
    ]:
        if path.stem not in present:  # a volume with no paper left: its set and latest report go (its history stays)
            path.unlink(missing_ok=True)
    reasons = stale_probe_papers(settings)
    _note_unusual(summary, "probes", reasons)
    return reasons


def _evaluate(runner: "_Runner", instance, settings: Settings, summary: IngestSummary) -> None:
    """Each volume whose probes or vector collections changed: its set and its retrieval_quality check (one
    `evaluate_volume` run). An unchanged ingest runs none."""

    targets = stale_volumes(settings)
    _note_unusual(summary, "evaluation set", targets)
    _add_partitions(instance, volumes.name, list(targets))
    for volume in sorted(targets):
        result = runner.run("evaluate_volume", partition_key=volume)
        report = read_quality(settings).get(volume)
        if not result.success or not volume_set_path(settings, volume).exists() or not report:
            summary.failures.append(StageFailure("evaluation", failure_reason(result), volume))
            continue
        summary.quality[volume] = report  # printed after the run (the progress bar counts papers, not volumes)


def _enrich(
    runner: "_Runner",
    instance,
    settings: Settings,
    summary: IngestSummary,
    notify: Callable[[str, str], None],
    kinds: tuple[str, ...] | None,
    limit: int | None,
    retry_errors: bool,
) -> None:
    """One `enrich_paper` run per paper with items to ask, each given what is left of the run's budget; papers the
    budget does not reach are pending (reported, not failed) and come first next time."""

    summary.enrichment_skipped = not_configured_reason(settings)
    if summary.enrichment_skipped:
        return
    kinds = kinds or resolve_kinds(settings.enrich_kinds)
    budget = Budget.parse(settings.llm_budget)
    stale = papers_to_enrich(settings, kinds, retry_errors=retry_errors)
    keys = sorted(stale)[:limit] if limit is not None else sorted(stale)
    _add_partitions(instance, papers.name, keys)
    usage = {"calls": 0, "cached_calls": 0, "tokens": 0, "cost_usd": 0.0, "errors": 0}
    for key in keys:
        if budget.limited and budget.remaining() in ("0", "$0.000000"):
            summary.enrichment_pending[key] = "budget"
            continue
        config = {"kinds": list(kinds), "budget": budget.remaining(), "retry_errors": retry_errors}
        result = runner.run(
            "enrich_paper", partition_key=key, run_config={"ops": {"enrichment__summaries": {"config": config}}}
        )
        if not result.success:
            summary.failures.append(StageFailure("enrichment", failure_reason(result), key))
            notify(key, "enrichment failed")
            continue
        outcome = {
            name: value.value
            for m in result.asset_materializations_for_node("enrichment__summaries")
            for name, value in m.metadata.items()
        }
        tokens = int(outcome.get("prompt_tokens", 0)) + int(outcome.get("completion_tokens", 0))
        budget.settle(0, 0.0, tokens, float(outcome.get("cost_usd", 0.0)))
        for name, value in (
            ("calls", outcome.get("calls", 0)),
            ("cached_calls", outcome.get("cached_calls", 0)),
            ("tokens", tokens),
            ("cost_usd", outcome.get("cost_usd", 0.0)),
            ("errors", outcome.get("errors", 0)),
        ):
            usage[name] += value
        if int(outcome.get("pending", 0)):
            summary.enrichment_pending[key] = str(outcome.get("pending_reason") or "pending")
            notify(key, "enrichment pending")
        else:
            summary.enriched.append(key)
            notify(key, "enriched")
    summary.enrichment_usage = usage


def _hold_store(held: contextlib.ExitStack, settings: Settings, summary: IngestSummary):
    """The vector store, opened into ``held`` (a damaged Milvus Lite file it replaced is said as healed); raises
    what opening it raised."""
    store = held.enter_context(_open_store(settings))
    if store.healed is not None:
        summary.healed.append(store.healed.line())
    return store


@contextlib.contextmanager
def _open_store(settings: Settings):
    from paperlake.vectors.store import VectorStore  # deferred: pymilvus

    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings, lock_timeout=600.0, heal=True)
    try:
        yield store
    finally:
        store.close()


def _add_partitions(instance, name: str, keys: list[str]) -> None:
    known = set(instance.get_dynamic_partitions(name))
    instance.add_dynamic_partitions(name, [key for key in keys if key not in known])


def _forget_partitions(
    instance, name: str, settings: Settings, lake: Lake, present: set[str], collections: list[str]
) -> None:
    """A partition goes once no store knows its paper: not in the inbox, the lake or any collection's records."""
    synced = set().union(*(read_ledger(settings.home, collection).keys() for collection in collections))
    for key in set(instance.get_dynamic_partitions(name)) - present - lake.paper_keys() - synced:
        instance.delete_dynamic_partition(name, key)
