"""Noticing inbox changes: a sensor (every minute) and a schedule (nightly sweep for new volumes).

Both reconcile the inbox with the lake through :func:`paperlake.pipeline.plan_ingest`: new, changed (sha256) and
parser-bumped papers get a parse run for their partition; papers whose file left the inbox get one too (the parse
asset removes them); a partition is deleted only once the lake has forgotten the paper. Run keys carry the file's
hash and the parser version, so a paper is never parsed twice for the same content.
"""


import dagster as dg

from assets.parse import parsed_views
from orchestration.partitions import papers
from orchestration.resources import PaperlakeResource
from paperlake.inbox import scan_inbox
from paperlake.pipeline import parser_version, plan_ingest, resolve_backend

ingest_job = dg.define_asset_job(
    "ingest_paper", selection=dg.AssetSelection.assets(parsed_views),
    description="Parse one paper partition into the lake (new, changed, or removed from the inbox).",
)


def reconcile(paperlake: PaperlakeResource, existing: set[str]) -> tuple[list[dg.RunRequest], list[str], list[str]]:
    """Run requests, partitions to add, partitions to delete."""
    settings = paperlake.settings()
    lake = paperlake.lake()
    sources = scan_inbox(paperlake.inbox_paths(), settings.mineru_dir)
    plan = plan_ingest(sources, lake, settings)
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
        requests.append(dg.RunRequest(partition_key=key, run_key=f"{key}:removed:{stamp}",
                                      tags={"paperlake/reason": "removed"}))
    present = {source.paper_key for source in sources}
    to_add = sorted((present | set(plan.removed)) - existing)
    to_delete = sorted(existing - present - set(plan.removed))
    return requests, to_add, to_delete


@dg.sensor(job=ingest_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def inbox_sensor(context: dg.SensorEvaluationContext, paperlake: PaperlakeResource) -> dg.SensorResult:
    """New, changed and removed PDFs in the inbox → one parse run per affected paper."""
    requests, to_add, to_delete = reconcile(paperlake, set(context.instance.get_dynamic_partitions(papers.name)))
    partition_requests = []
    if to_add:
        partition_requests.append(papers.build_add_request(to_add))
    if to_delete:
        partition_requests.append(papers.build_delete_request(to_delete))
    return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests)


@dg.schedule(cron_schedule="0 3 * * *", job=ingest_job, execution_timezone="UTC")
def inbox_schedule(context: dg.ScheduleEvaluationContext, paperlake: PaperlakeResource):
    """Nightly sweep: ingest volumes that arrived while the sensor was off."""
    existing = set(context.instance.get_dynamic_partitions(papers.name))
    requests, to_add, to_delete = reconcile(paperlake, existing)
    if to_add:
        context.instance.add_dynamic_partitions(papers.name, to_add)
    for key in to_delete:
        context.instance.delete_dynamic_partition(papers.name, key)
    return requests or dg.SkipReason("inbox and lake agree")
