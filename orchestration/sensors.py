"""Noticing what is stale: the inbox (a sensor every minute and a nightly schedule) and the stores downstream.

The inbox sensor and schedule reconcile the inbox with the lake through :func:`paperlake.lake.pipeline.plan_ingest`:
new, changed (sha256) and parser-bumped papers get a parse run for their partition; papers whose file left the
inbox get one too (the parse asset removes them); a partition is deleted only once the lake has forgotten the paper.
Run keys carry the file's hash and the parser version, so a paper is never parsed twice for the same content.

The stores sensor asks :mod:`paperlake.freshness` and :mod:`paperlake.vectors.ledger` what is stale, the same
functions `paperlake ingest` asks, and launches the named jobs upstream first: the warehouse once no parse run is in
flight, then the formula assets and the vector partitions once the warehouse is current. A store that a dead run
left half-done, or that someone deleted, is stale by the same rules and is rebuilt. A stage whose inputs did not
change is attempted at most ``MAX_ATTEMPTS`` times (a deterministic failure is not retried every minute).
"""

import hashlib
import json

import dagster as dg

from assets.parse import inbox_events
from assets.partitions import papers, volumes
from assets.resources import PaperlakeResource
from assets.vectors import vector_assets
from orchestration.jobs import (
    FORMULA_ASSETS,
    build_formulas,
    build_warehouse,
    enrich_paper,
    evaluate_volume,
    ingest_paper,
    paper_selection,
    probe_paper,
    sync_vectors,
    warehouse_selection,
)
from paperlake.enrichment import stale_papers as unenriched
from paperlake.evaluation.sets import stale_probe_papers, stale_volumes
from paperlake.freshness import (
    formula_build_staleness,
    formula_encoder_available,
    formula_staleness,
    warehouse_inputs,
    warehouse_staleness,
)
from paperlake.lake.inbox import InboxScan, scan_volumes
from paperlake.lake.pipeline import parser_version, plan_ingest, resolve_backend
from paperlake.vectors.ledger import stale_papers
from paperlake.vectors.server import StoreLockedError
from paperlake.vectors.store import VectorStore

ingest_job = ingest_paper
MAX_ATTEMPTS = 3
INPUTS_TAG = "paperlake/inputs"
IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def reconcile(
    paperlake: PaperlakeResource, existing: set[str], scan: InboxScan | None = None
) -> tuple[list[dg.RunRequest], list[str], list[str]]:
    """Run requests, partitions to add, partitions to delete (``scan``: the inbox, when already scanned). A held
    volume's partitions stay (its papers are not gone)."""
    settings = paperlake.settings()
    lake = paperlake.lake()
    scan = scan_volumes(paperlake.inbox_paths(), settings.mineru_dir) if scan is None else scan
    sources = scan.sources
    plan = plan_ingest(sources, lake, settings, held=scan.held, removals_held=scan.removals_held is not None)
    requests = [
        dg.RunRequest(
            partition_key=source.paper_key,
            run_key=f"{source.paper_key}:{source.sha256}:{parser_version(resolve_backend(source, settings.backend))}",
            tags={"paperlake/reason": "new" if lake.record(source.paper_key) is None else "changed"},
        )
        for source in plan.to_parse
    ]
    for key in plan.removed:
        record = lake.record(key)
        stamp = record.sha256 if record else (lake.error(key) or {}).get("sha256", "error")
        requests.append(
            dg.RunRequest(partition_key=key, run_key=f"{key}:removed:{stamp}", tags={"paperlake/reason": "removed"})
        )
    present = {source.paper_key for source in sources}
    to_add = sorted((present | set(plan.removed)) - existing)
    to_delete = sorted(key for key in existing - present - set(plan.removed) if not scan.held_key(key))
    if scan.removals_held:  # a bare inbox: its papers' partitions stay with them
        to_delete = []
    return requests, to_add, to_delete


def nothing_to_run(problems: list[str]) -> str:
    """A tick's skip reason: nothing stale, or what keeps the inbox from being read whole."""
    if problems:
        return "nothing to run; " + "; ".join(problems)
    return "nothing stale: every PDF of the inbox is in the lake as it is now"


def inbox_problems(scan: InboxScan) -> list[str]:
    """What the sensor and the schedule say of the inbox besides its runs: loose PDFs, and removals held."""
    lines = scan.misplaced()
    if scan.removals_held:
        lines.append(f"{scan.removals_held}: no paper is removed until it has one again")
    return lines


@dg.sensor(job=ingest_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def inbox_sensor(context: dg.SensorEvaluationContext, paperlake: PaperlakeResource) -> dg.SensorResult:
    """New, changed and removed PDFs in the inbox → one parse run per affected paper."""
    scan = scan_volumes(paperlake.inbox_paths(), paperlake.settings().mineru_dir)
    requests, to_add, to_delete = reconcile(paperlake, set(context.instance.get_dynamic_partitions(papers.name)), scan)
    busy = papers_in_flight(context.instance)  # a paper a run (the CLI's, a backfill) is parsing now is not asked twice
    requests = [r for r in requests if r.partition_key not in busy]
    events = inbox_events(context.instance, scan.sources)  # the UI's inbox state, as `paperlake ingest` records it
    partition_requests = []
    if to_add:
        partition_requests.append(papers.build_add_request(to_add))
    if to_delete:
        partition_requests.append(papers.build_delete_request(to_delete))
    problems = inbox_problems(scan)
    for line in problems:
        context.log.warning(line)
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=partition_requests,
        asset_events=events,
        skip_reason=None if requests else nothing_to_run(problems),
    )


@dg.schedule(
    cron_schedule="0 3 * * *",
    job=ingest_job,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,  # scheduled ingestion is the first use: on from the start
)
def inbox_schedule(context: dg.ScheduleEvaluationContext, paperlake: PaperlakeResource):
    """Nightly sweep: ingest volumes that arrived while the sensor was off."""
    existing = set(context.instance.get_dynamic_partitions(papers.name))
    scan = scan_volumes(paperlake.inbox_paths(), paperlake.settings().mineru_dir)
    requests, to_add, to_delete = reconcile(paperlake, existing, scan)
    if to_add:
        context.instance.add_dynamic_partitions(papers.name, to_add)
    for key in to_delete:
        context.instance.delete_dynamic_partition(papers.name, key)
    problems = inbox_problems(scan)
    for line in problems:
        context.log.warning(line)
    return requests or dg.SkipReason(nothing_to_run(problems))


def papers_in_flight(instance: dg.DagsterInstance) -> set[str]:
    """The paper partitions of the parse runs queued or running: a run's partition, or every partition of its range
    (in the partitions' order)."""
    order = instance.get_dynamic_partitions(papers.name)
    busy: set[str] = set()
    for run in instance.get_runs(dg.RunsFilter(job_name=ingest_job.name, statuses=IN_FLIGHT)):
        tags = run.tags
        if tags.get("dagster/partition"):
            busy.add(tags["dagster/partition"])
        start, end = tags.get("dagster/asset_partition_range_start"), tags.get("dagster/asset_partition_range_end")
        if start in order and end in order:
            busy.update(order[order.index(start) : order.index(end) + 1])
    return busy


def _in_flight(instance: dg.DagsterInstance) -> set[str]:
    return {run.job_name for run in instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT))}


def _request(
    instance: dg.DagsterInstance, job_name: str, reason: str, inputs: object, **kwargs
) -> dg.RunRequest | None:
    """A run request whose run key names the inputs and the attempt; None once MAX_ATTEMPTS runs failed on them."""
    digest = hashlib.sha256(json.dumps([job_name, inputs], sort_keys=True, default=str).encode()).hexdigest()[:16]
    failed = len(
        instance.get_runs(
            dg.RunsFilter(
                tags={INPUTS_TAG: digest}, statuses=[dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
            )
        )
    )
    if failed >= MAX_ATTEMPTS:
        return None
    return dg.RunRequest(
        job_name=job_name,
        run_key=f"{job_name}:{digest}:{failed}",
        tags={INPUTS_TAG: digest, "paperlake/reason": reason[:200]},
        **kwargs,
    )


def plan_store_runs(paperlake: PaperlakeResource, instance: dg.DagsterInstance) -> tuple[list[dg.RunRequest], str]:
    """Run requests for the stale stores, upstream first, and a note on what was found."""
    settings = paperlake.settings()
    active = _in_flight(instance)
    if ingest_paper.name in active:
        return [], "parse runs in flight"
    if settings.llm_configured and enrich_paper.name not in active:
        pending = unenriched(settings)
        if pending:  # summaries first: the warehouse build that follows picks them all up at once
            requests = [
                r
                for key, count in sorted(pending.items())
                if (
                    r := _request(
                        instance,
                        enrich_paper.name,
                        f"{count} item(s) to enrich",
                        [key, count, warehouse_inputs(settings)],
                        partition_key=key,
                    )
                )
            ]
            if requests:
                return requests, f"enrichment: {len(requests)} paper(s)"
    elif enrich_paper.name in active:
        return [], "enrichment runs in flight"
    if reason := warehouse_staleness(settings):
        if build_warehouse.name in active:
            return [], f"warehouse build in flight ({reason})"
        request = None
        # with the formulas when they are stale (the collection of a changed graph too); once their attempts have
        # failed (the graph before dbt), without them
        formulas = warehouse_selection(formula_build_staleness(settings), collection=formula_encoder_available())
        for selection in (formulas, warehouse_selection({})):
            inputs = [warehouse_inputs(settings), selection]
            request = request or _request(instance, build_warehouse.name, reason, inputs, asset_selection=selection)
        return ([request] if request else []), f"warehouse: {reason}"
    if build_warehouse.name in active or build_formulas.name in active:
        return [], "warehouse or formula build in flight"
    try:
        store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings, lock_timeout=1.0, heal=True)
    except StoreLockedError:
        return [], "the Milvus Lite file is busy"
    try:
        formulas = formula_staleness(settings, store)
        collections = [definition.key.path[-1] for definition in vector_assets]
        vectors = stale_papers(settings, store, collections) if sync_vectors.name not in active else None
    finally:
        store.close()
    requests = []
    notes = []
    if formulas:
        selection = [key for part in formulas for key in FORMULA_ASSETS[part]]
        request = _request(
            instance,
            build_formulas.name,
            "; ".join(formulas.values()),
            [sorted(formulas), warehouse_inputs(settings)],
            asset_selection=selection,
        )
        requests += [request] if request else []
        notes.append(f"formulas stale: {', '.join(sorted(formulas))}")
    if vectors is not None:
        # a paper's stale probes are made in its vector sync's run (the same rule as `paperlake ingest`), unless a
        # probe run is in flight
        probes = stale_probe_papers(settings) if settings.evaluate and probe_paper.name not in active else {}
        for key, stale in sorted(vectors.stale.items()):
            job, selection = paper_selection(stale, key in probes)
            request = _request(
                instance,
                job,
                "; ".join(sorted({*stale.values(), *([probes[key]] if key in probes else [])})),
                [key, sorted(stale), key in probes, warehouse_inputs(settings)],
                partition_key=key,
                asset_selection=selection,
            )
            requests += [request] if request else []
        if vectors.stale:
            notes.append(f"vectors: {len(vectors.stale)} paper(s) stale")
    if (
        not requests
        and vectors is not None
        and settings.evaluate
        and not {probe_paper.name, evaluate_volume.name} & active
    ):
        requests, note = _evaluation_requests(settings, instance)
        notes += [note] if note else []
    return requests, "; ".join(notes) or "nothing stale: every store was built from what it reads now"


def _evaluation_requests(settings, instance: dg.DagsterInstance) -> tuple[list[dg.RunRequest], str]:
    """Once every store is current: probes of the papers whose warehouse rows changed, then the volumes whose probe
    set or collections changed (their set and retrieval_quality check), by the rules `paperlake ingest` applies."""
    probes = stale_probe_papers(settings)
    if probes:
        requests = [
            r
            for key, why in sorted(probes.items())
            if (r := _request(instance, probe_paper.name, why, [key, why], partition_key=key))
        ]
        return requests, f"probes: {len(probes)} paper(s)"
    targets = stale_volumes(settings)
    requests = [
        r
        for volume, why in sorted(targets.items())
        if (r := _request(instance, evaluate_volume.name, why, [volume, why], partition_key=volume))
    ]
    return requests, f"evaluation: {len(targets)} volume(s)" if targets else ""


STORE_JOBS = [build_warehouse, build_formulas, sync_vectors, probe_paper, evaluate_volume]


def make_stores_sensor(with_enrichment: bool) -> dg.SensorDefinition:
    """The stores sensor, targeting enrich_paper too when an endpoint is configured (the Definitions then hold it)."""
    return dg.sensor(
        name="stores_sensor",
        jobs=([enrich_paper] if with_enrichment else []) + STORE_JOBS,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )(stale_stores)


def stale_stores(context: dg.SensorEvaluationContext, paperlake: PaperlakeResource) -> dg.SensorResult:
    """Stale stores (by the same rules as `paperlake ingest`) → runs of enrich_paper (with an LLM endpoint),
    build_warehouse, build_formulas and sync_vectors, upstream first."""
    requests, note = plan_store_runs(paperlake, context.instance)
    adds = []
    for definition, jobs in ((papers, None), (volumes, {evaluate_volume.name})):
        keys = {
            r.partition_key
            for r in requests
            if r.partition_key and ((r.job_name in jobs) if jobs else r.job_name != evaluate_volume.name)
        }
        missing = sorted(keys - set(context.instance.get_dynamic_partitions(definition.name)))
        adds += [definition.build_add_request(missing)] if missing else []
    return dg.SensorResult(
        run_requests=requests,
        skip_reason=None if requests else (note or "nothing stale: every store was built from what it reads now"),
        dynamic_partitions_requests=adds,
    )
