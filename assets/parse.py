"""Parse stage: one PDF partition → its Parquet views in the lake, gated by Great Expectations."""

import hashlib

import dagster as dg

from assets.partitions import papers, run_paper_keys
from assets.resources import PaperlakeResource, run_inputs
from paperlake.lake.inbox import VolumeHeld, scan_inbox, shown
from paperlake.lake.pipeline import PaperOutcome, ingest_papers, locate_source, parse_code_version
from paperlake.lake.store import ERROR_VIEW
from paperlake.lake.views import VIEWS

PARSE_CODE_VERSION = parse_code_version()
# The tag an observation's data version travels in (what `AssetObservation.data_version` reads back, and what
# Dagster's own observable source assets write): a documented string, not an import from Dagster's internals.
DATA_VERSION_TAG = "dagster/data_version"
INBOX_KEY = dg.AssetKey(["inbox", "pdf"])
VIEW_KEYS = {view: dg.AssetKey(["parsed", view]) for view in (*VIEWS, ERROR_VIEW)}
GATED_VIEWS = ("pages", "metadata", "chunks", "tables", "images", "equations")
WARNING_VIEWS = ("sections", "tables", "images")


@dg.observable_source_asset(
    key=INBOX_KEY,
    partitions_def=papers,
    group_name="inbox",
    description=(
        "PDFs in the inbox, one partition per paper; the data version is the file's sha256 (with the hash of its "
        "manifest row and MinerU outputs when it has them). `paperlake ingest` records the same observation for every "
        "paper it plans."
    ),
)
def inbox_pdf(context: dg.AssetExecutionContext, paperlake: PaperlakeResource) -> dg.DataVersionsByPartition:
    keys = set(context.instance.get_dynamic_partitions(papers.name))
    sources = scan_inbox(paperlake.inbox_paths(), paperlake.settings().mineru_dir)  # as the sensor and the CLI scan
    versions = {s.paper_key: s.data_version for s in sources if s.paper_key in keys}
    return dg.DataVersionsByPartition(versions)


def inbox_events(instance: dg.DagsterInstance, sources) -> list[dg.AssetObservation | dg.AssetMaterialization]:
    """What :func:`inbox_pdf` would observe, for each paper partition whose data version is not the one last
    recorded: an observation carrying the data version (what staleness downstream reads) and a materialization
    with the same metadata (the file and its manifest row), because the UI's partition status counts
    materializations only: without it a present PDF reads "Missing". Nothing for a partition that does not exist
    (a duplicate file, or one the next sensor tick adds)."""
    events: list[dg.AssetObservation | dg.AssetMaterialization] = []
    partitions = set(instance.get_dynamic_partitions(papers.name))
    present = [source for source in sources if source.paper_key in partitions]
    recorded = recorded_versions(instance, [source.paper_key for source in present])
    for source in present:
        if recorded.get(source.paper_key) == source.data_version:
            continue
        metadata = {
            "path": dg.MetadataValue.path(shown(source.pdf_path)),
            "sha256": source.sha256,
            "volume": shown(source.volume),
        } | {f"manifest/{k}": str(v) for k, v in sorted(source.manifest.items())}
        tags = {DATA_VERSION_TAG: source.data_version}
        events.append(
            dg.AssetObservation(asset_key=INBOX_KEY, partition=source.paper_key, tags=tags, metadata=metadata)
        )
        events.append(
            dg.AssetMaterialization(
                asset_key=INBOX_KEY,
                partition=source.paper_key,
                tags=tags,
                metadata=metadata,
                description="in the inbox at this version",
            )
        )
    return events


# Partitions per query of the observations (SQLite's bound on a statement's variables is far above)
PARTITIONS_PER_QUERY = 500


def recorded_versions(instance: dg.DagsterInstance, keys: list[str]) -> dict[str, str | None]:
    """Paper key → the data version last observed for its inbox partition, for each of ``keys`` observed at all.

    The observations are read newest first, a page at a time, each page only of the keys not yet seen: the first
    record of a key is its latest. When each paper's last observation is among the newest (an unchanged inbox),
    that is one query per :data:`PARTITIONS_PER_QUERY` papers, where one lookup per paper grew with the volume."""
    found: dict[str, str | None] = {}
    for start in range(0, len(keys), PARTITIONS_PER_QUERY):
        pending = set(keys[start : start + PARTITIONS_PER_QUERY])
        cursor = None
        while pending:
            page = instance.fetch_observations(
                dg.AssetRecordsFilter(asset_key=INBOX_KEY, asset_partitions=sorted(pending)),
                limit=len(pending),
                cursor=cursor,
            )
            for record in page.records:
                if record.partition_key in pending and record.asset_observation is not None:
                    found[record.partition_key] = record.asset_observation.data_version
                    pending.discard(record.partition_key)
            if not page.has_more:
                break
            cursor = page.cursor
    return found


def observe_inbox(instance: dg.DagsterInstance, sources) -> int:
    """Record :func:`inbox_events` outside any run (what `paperlake ingest` does; the inbox sensor returns the same
    events in its result). Returns how many papers were recorded."""
    events = inbox_events(instance, sources)
    for event in events:
        instance.report_runless_asset_event(event)
    return len(events) // 2


def _check_specs() -> list[dg.AssetCheckSpec]:
    blocking = [
        dg.AssetCheckSpec(
            "gx_blocking",
            asset=VIEW_KEYS[view],
            blocking=True,
            description="Great Expectations: the data is not broken (page count, boxes, ids, tokens, "
            "figure panels inside their figure).",
        )
        for view in GATED_VIEWS
    ]
    warnings = [
        dg.AssetCheckSpec(
            "gx_suspicious",
            asset=VIEW_KEYS[view],
            blocking=False,
            description="Great Expectations: the parse looks complete (sections found; as many "
            "tables/figures as the text cites).",
        )
        for view in WARNING_VIEWS
    ]
    return blocking + warnings


def _check_results(outcomes: dict[str, PaperOutcome | None]) -> list[dg.AssetCheckResult]:
    """Checks guard the lake: a check passes when every paper of the run that was validated met it (a paper that
    failed one was not published: it has an ingest_errors row instead). A paper without a report (it failed before
    validation, or left the inbox) put nothing in the lake, so the gate held for it; the note says so."""
    reports = {key: o.quality for key, o in outcomes.items() if o is not None and o.quality is not None}
    notes = [
        f"{key}: not validated: " + ("the paper left the inbox" if o is None else f"{o.stage} failed before validation")
        for key, o in outcomes.items()
        if key not in reports
    ]
    note = "; ".join(notes) or "validated"
    results = []
    for view in GATED_VIEWS:
        covered = {view, "bounding_boxes"} if view in ("tables", "images", "equations") else {view}
        counted, failed = 0, []
        for key, report in reports.items():
            outcomes_of_view = [o for o in report.blocking if o.view in covered]
            counted += len(outcomes_of_view)
            failed += [
                f"{key + ': ' if len(outcomes) > 1 else ''}{o.name} observed {o.observed} {o.details}".strip()
                for o in outcomes_of_view
                if not o.success
            ]
        results.append(
            dg.AssetCheckResult(
                asset_key=VIEW_KEYS[view],
                check_name="gx_blocking",
                passed=not failed,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={"expectations": counted, "note": note, "failed": "; ".join(failed)},
            )
        )
    for view in WARNING_VIEWS:
        observed = [
            f"{key + ': ' if len(outcomes) > 1 else ''}{o.name}: {o.observed} ({o.details})"
            for key, report in reports.items()
            for o in report.warnings
            if o.view == view
        ]
        passed = all(o.success for report in reports.values() for o in report.warnings if o.view == view)
        results.append(
            dg.AssetCheckResult(
                asset_key=VIEW_KEYS[view],
                check_name="gx_suspicious",
                passed=passed,
                severity=dg.AssetCheckSeverity.WARN,
                metadata={"note": note, "observed": "; ".join(observed)},
            )
        )
    return results


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            key,
            deps=[INBOX_KEY],
            kinds={"parquet", "pdf"},
            description=f"Parsed view `{view}`: one Parquet file per paper under lake/{view}/, from PyMuPDF or the "
            "paper's MinerU outputs (each materialisation's `backend` says which).",
        )
        for view, key in VIEW_KEYS.items()
    ],
    check_specs=_check_specs(),
    partitions_def=papers,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="parse",
    code_version=PARSE_CODE_VERSION,
    pool="parse",
)
def parsed_views(context: dg.AssetExecutionContext, paperlake: PaperlakeResource):
    """Parse each paper of the run's partitions (PyMuPDF, or its MinerU outputs when present) into every view,
    validate the views with Great Expectations and publish them to the lake. A run covers one paper or a range of
    them (`paperlake ingest` batches consecutive new papers into one run, a UI backfill takes them all); the papers
    go one after the other and each is published on its own, so a failure of any kind becomes that paper's
    ``ingest_errors`` row with the stage and the reason, keeps no partial rows and stops nothing else. A partition
    whose file left the inbox is removed from the lake, and from every store downstream when they rebuild."""
    settings = paperlake.settings()
    lake = paperlake.lake()
    inboxes, mineru_dir = run_inputs(context, paperlake)
    outcomes: dict[str, PaperOutcome | None] = {}
    sources = []
    for key in run_paper_keys(context):
        try:
            source = locate_source(key, inboxes, mineru_dir)
        except VolumeHeld as error:  # its volume is held: the paper stays as the lake has it
            context.log.warning(f"{key}: not parsed: {error}")
            continue
        if source is None:
            lake.remove_paper(key)
            context.log.info(f"{key}: no longer in the inbox; removed from the lake")
            outcomes[key] = None
            continue
        outcomes[key] = None  # its place in the run's order; its outcome below
        sources.append(source)
    for outcome in ingest_papers(sources, lake, settings, inboxes=inboxes):
        outcomes[outcome.paper_key] = outcome
        if outcome.status == "failed":
            context.log.error(f"{outcome.paper_key}: {outcome.stage}: {outcome.reason}")
    for view, asset_key in VIEW_KEYS.items():
        yield dg.MaterializeResult(
            asset_key=asset_key, metadata=_view_metadata(view, outcomes), data_version=_data_version(outcomes)
        )
    yield from _check_results(outcomes)


def _view_metadata(view: str, outcomes: dict[str, PaperOutcome | None]) -> dict:
    """What the UI shows for a view: the paper's status, backend, rows (and speed, or the failure) for one paper;
    for a batch, the totals and one line per paper."""

    def rows(outcome: PaperOutcome | None) -> int:
        if outcome is None:
            return 0
        return outcome.counts.get(view, 1 if view == ERROR_VIEW and outcome.status == "failed" else 0)

    if len(outcomes) == 1:
        ((key, outcome),) = outcomes.items()
        if outcome is None:
            return {"status": "removed", "rows": 0}
        metadata = {
            "status": outcome.status,
            "backend": outcome.backend or "",
            "paper_id": outcome.paper_id or "",
            "sha256": outcome.sha256 or "",
            "rows": rows(outcome),
        }
        if view == "pages":
            speed = outcome.pages / outcome.seconds if outcome.seconds and outcome.pages else 0.0
            metadata |= {"pages_per_second": round(speed, 2), "seconds": round(outcome.seconds, 3)}
        if outcome.status == "failed":
            metadata |= {"stage": outcome.stage or "", "reason": (outcome.reason or "")[:2000]}
        return metadata
    statuses = [o.status if o is not None else "removed" for o in outcomes.values()]
    backends = [(o.backend or "") if o is not None else "" for o in outcomes.values()]
    metadata = {
        "papers": len(outcomes),
        "rows": sum(rows(o) for o in outcomes.values()),
        **{f"papers_{status}": statuses.count(status) for status in sorted(set(statuses))},
        "backend": ", ".join(f"{b} {backends.count(b)}" for b in sorted(set(backends) - {""})),
        "per_paper": dg.MetadataValue.md(
            "\n".join(
                ["| paper | status | backend | rows |", "|---|---|---|---|"]
                + [
                    f"| {key} | {status} | {backend} | {rows(o)} |"
                    for (key, o), status, backend in zip(outcomes.items(), statuses, backends)
                ]
            )
        ),
    }
    if view == "pages":
        done = [o for o in outcomes.values() if o is not None and o.seconds]
        seconds = sum(o.seconds for o in done)
        metadata |= {
            "pages_per_second": round(sum(o.pages for o in done) / seconds, 2) if seconds else 0.0,
            "seconds": round(seconds, 3),
        }
    return metadata


def _data_version(outcomes: dict[str, PaperOutcome | None]) -> dg.DataVersion:
    """The paper's file version and outcome (for a batch, a digest of every paper's), so a re-parse of the same
    file to the same outcome keeps its data version."""
    parts = [f"{(o.sha256 or '')[:16]}-{o.status}" if o is not None else "removed" for o in outcomes.values()]
    if len(parts) == 1:
        return dg.DataVersion(parts[0])
    return dg.DataVersion(hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16])
