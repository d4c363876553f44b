"""Parse stage: one PDF partition → its Parquet views in the lake, gated by Great Expectations."""


import dagster as dg
from dagster._core.definitions.data_version import DATA_VERSION_TAG  # the tag observations carry

from orchestration.partitions import papers
from orchestration.resources import PaperlakeResource
from paperlake.lake import ERROR_VIEW
from paperlake.pipeline import ingest_paper, locate_source, parse_code_version
from paperlake.quality import QualityReport
from paperlake.views import VIEWS

PARSE_CODE_VERSION = parse_code_version()
INBOX_KEY = dg.AssetKey(["inbox", "pdf"])
VIEW_KEYS = {view: dg.AssetKey(["parsed", view]) for view in (*VIEWS, ERROR_VIEW)}
GATED_VIEWS = ("pages", "metadata", "chunks", "tables", "images", "equations")
WARNING_VIEWS = ("sections", "tables", "images")


@dg.observable_source_asset(key=INBOX_KEY, partitions_def=papers, group_name="inbox", description=(
    "PDFs in the inbox, one partition per paper; the data version is the file's sha256 (with its manifest row's "
    "hash when the volume lists it). `paperlake ingest` records the same observation for every paper it plans."))
def inbox_pdf(context: dg.AssetExecutionContext, paperlake: PaperlakeResource) -> dg.DataVersionsByPartition:
    from paperlake.inbox import scan_inbox

    keys = set(context.instance.get_dynamic_partitions(papers.name))
    versions = {s.paper_key: s.data_version for s in scan_inbox(paperlake.inbox_paths()) if s.paper_key in keys}
    return dg.DataVersionsByPartition(versions)


def inbox_events(instance: dg.DagsterInstance, sources) -> list[dg.AssetObservation | dg.AssetMaterialization]:
    """What :func:`inbox_pdf` would observe, for each paper partition whose data version is not the one last
    recorded: an observation carrying the data version (what staleness downstream reads) and a materialization
    with the same metadata (the file and its manifest row), because the UI's partition status counts
    materializations only: without it a present PDF reads "Missing". Nothing for a partition that does not exist
    (a duplicate file, or one the next sensor tick adds)."""
    events: list[dg.AssetObservation | dg.AssetMaterialization] = []
    partitions = set(instance.get_dynamic_partitions(papers.name))
    for source in sources:
        if source.paper_key not in partitions:
            continue
        latest = instance.get_latest_data_version_record(INBOX_KEY, True, source.paper_key)
        entry = latest.event_log_entry.asset_observation if latest is not None else None
        if entry is not None and entry.tags.get(DATA_VERSION_TAG) == source.data_version:
            continue
        metadata = {"path": dg.MetadataValue.path(str(source.pdf_path)), "sha256": source.sha256,
                    "volume": source.volume} | {f"manifest/{k}": str(v) for k, v in sorted(source.manifest.items())}
        tags = {DATA_VERSION_TAG: source.data_version}
        events.append(dg.AssetObservation(asset_key=INBOX_KEY, partition=source.paper_key, tags=tags,
                                          metadata=metadata))
        events.append(dg.AssetMaterialization(asset_key=INBOX_KEY, partition=source.paper_key, tags=tags,
                                              metadata=metadata, description="in the inbox at this version"))
    return events


def observe_inbox(instance: dg.DagsterInstance, sources) -> int:
    """Record :func:`inbox_events` outside any run (what `paperlake ingest` does; the inbox sensor returns the same
    events in its result). Returns how many papers were recorded."""
    events = inbox_events(instance, sources)
    for event in events:
        instance.report_runless_asset_event(event)
    return len(events) // 2


def _check_specs() -> list[dg.AssetCheckSpec]:
    blocking = [
        dg.AssetCheckSpec("gx_blocking", asset=VIEW_KEYS[view], blocking=True,
                          description="Great Expectations: the data is not broken (page count, boxes, ids, tokens, "
                                      "figure panels inside their figure).")
        for view in GATED_VIEWS
    ]
    warnings = [
        dg.AssetCheckSpec("gx_suspicious", asset=VIEW_KEYS[view], blocking=False,
                          description="Great Expectations: the parse looks complete (sections found; as many "
                                      "tables/figures as the text cites).")
        for view in WARNING_VIEWS
    ]
    return blocking + warnings


def _check_results(report: QualityReport | None, note: str) -> list[dg.AssetCheckResult]:
    """Checks guard the lake. Without a report (the paper failed before validation, or left the inbox) nothing
    entered the lake, so the gate held: the result passes and says why nothing was validated."""
    results = []
    for view in GATED_VIEWS:
        covered = {view, "bounding_boxes"} if view in ("tables", "images", "equations") else {view}
        outcomes = [o for o in report.blocking if o.view in covered] if report else []
        failed = [o for o in outcomes if not o.success]
        results.append(dg.AssetCheckResult(
            asset_key=VIEW_KEYS[view], check_name="gx_blocking", passed=not failed,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"expectations": len(outcomes), "note": note,
                      "failed": "; ".join(f"{o.name} observed {o.observed} {o.details}".strip() for o in failed)},
        ))
    for view in WARNING_VIEWS:
        outcomes = [o for o in report.warnings if o.view == view] if report else []
        results.append(dg.AssetCheckResult(
            asset_key=VIEW_KEYS[view], check_name="gx_suspicious", passed=all(o.success for o in outcomes),
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"note": note,
                      "observed": "; ".join(f"{o.name}: {o.observed} ({o.details})" for o in outcomes)},
        ))
    return results


@dg.multi_asset(
    specs=[
        dg.AssetSpec(key, deps=[INBOX_KEY], kinds={"parquet", "pymupdf"},
                     description=f"Parsed view `{view}`: one Parquet file per paper under lake/{view}/.")
        for view, key in VIEW_KEYS.items()
    ],
    check_specs=_check_specs(),
    partitions_def=papers,
    group_name="parse",
    code_version=PARSE_CODE_VERSION,
    pool="parse",
)
def parsed_views(context: dg.AssetExecutionContext, paperlake: PaperlakeResource):
    """Parse one paper (PyMuPDF, or its MinerU outputs when present) into every view, validate the views with
    Great Expectations and publish them to the lake. A failure of any kind becomes an ``ingest_errors`` row with
    the stage and the reason, and the paper keeps no partial rows. A partition whose file left the inbox is
    removed from the lake, and from every store downstream when they rebuild."""
    key = context.partition_key
    settings = paperlake.settings()
    lake = paperlake.lake()
    source = locate_source(key, paperlake.inbox_paths(), settings.mineru_dir)
    if source is None:
        lake.remove_paper(key)
        context.log.info(f"{key}: no longer in the inbox; removed from the lake")
        for view, asset_key in VIEW_KEYS.items():
            yield dg.MaterializeResult(asset_key=asset_key, metadata={"status": "removed", "rows": 0})
        yield from _check_results(None, "not validated: the paper left the inbox")
        return
    outcome = ingest_paper(source, lake, settings, inboxes=paperlake.inbox_paths())
    if outcome.status == "failed":
        context.log.error(f"{key}: {outcome.stage}: {outcome.reason}")
    pages_per_second = outcome.pages / outcome.seconds if outcome.seconds and outcome.pages else 0.0
    for view, asset_key in VIEW_KEYS.items():
        metadata = {
            "status": outcome.status, "backend": outcome.backend or "", "paper_id": outcome.paper_id or "",
            "sha256": source.sha256, "rows": outcome.counts.get(view, 1 if view == ERROR_VIEW and
                                                               outcome.status == "failed" else 0),
        }
        if view == "pages":
            metadata |= {"pages_per_second": round(pages_per_second, 2), "seconds": round(outcome.seconds, 3)}
        if outcome.status == "failed":
            metadata |= {"stage": outcome.stage or "", "reason": (outcome.reason or "")[:2000]}
        yield dg.MaterializeResult(asset_key=asset_key, metadata=metadata, data_version=dg.DataVersion(
            f"{source.sha256[:16]}-{outcome.status}"))
    note = "validated" if outcome.quality else f"not validated: {outcome.stage} failed before validation"
    yield from _check_results(outcome.quality, note)
