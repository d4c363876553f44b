"""Evaluation stage: every volume evaluates itself (AirQA's idea, run continuously on one's own data).

``evaluation/probes`` (per paper) writes deterministic probe questions generated from the warehouse, read through
dagster-duckdb's ``DuckDBResource`` on a read-only connection; ``evaluation/volume_set`` (per volume) gathers them,
and its ``retrieval_quality`` check scores the volume's vector retrieval on them (answer@1, answer@5, page@5 as
metadata, so the UI plots their history) and warns below ``PAPERLAKE_EVAL_MIN_ANSWER5``. The set depends on every
vector collection, and its code version includes the parser versions and the vector stage's fingerprint, so a
parser or encoder change marks it (and its check) to run again. What is stale is decided by
``paperlake.evaluation.sets`` for the CLI and the sensor alike.
"""

import hashlib

import dagster as dg
from dagster_duckdb import DuckDBResource

from assets.partitions import papers, run_paper_keys, volumes
from assets.resources import PaperlakeResource
from assets.vectors import vector_assets
from paperlake.evaluation.probes import KINDS, PROBES_VERSION
from paperlake.evaluation.sets import _GENERATOR_DIGEST, volume_set_path, write_probes, write_volume_set
from paperlake.lake.pipeline import parse_code_version
from paperlake.vectors.ledger import stage_fingerprint

PROBES_CODE_VERSION = f"{PROBES_VERSION}-{_GENERATOR_DIGEST}"
VOLUME_SET_CODE_VERSION = hashlib.sha256(
    f"{PROBES_CODE_VERSION}|{parse_code_version()}|{stage_fingerprint()}".encode()
).hexdigest()[:16]
_PROBE_TABLES = ("metadata", "pages", "chunks", "tables", "table_cells", "images", "equations", "reference")


@dg.asset(
    key=["evaluation", "probes"],
    partitions_def=papers,
    group_name="evaluation",
    code_version=PROBES_CODE_VERSION,
    deps=[dg.AssetKey(["warehouse", table]) for table in _PROBE_TABLES],
    kinds={"duckdb", "json"},
    backfill_policy=dg.BackfillPolicy.single_run(),
    description="Offline probes of one paper: deterministic AirQA questions with exact answers, each verified at its "
    f"evidence row (kinds: {', '.join(KINDS)}); evaluation/probes/<paper key>.jsonl.",
)
def evaluation_probes(
    context: dg.AssetExecutionContext, paperlake: PaperlakeResource, warehouse: DuckDBResource
) -> dg.MaterializeResult:
    settings = paperlake.settings()
    with warehouse.get_connection() as con:
        try:
            records = {key: write_probes(settings, key, con) for key in run_paper_keys(context)}
        finally:  # dagster-duckdb closes it only on success; left open, the next step of this process that opens
            con.close()  # the warehouse with another configuration is refused by DuckDB
    kinds: dict[str, int] = {}
    for record in records.values():
        for kind, count in (record.get("by_kind") or {}).items():
            kinds[kind] = kinds.get(kind, 0) + count
    metadata = {
        "probes": sum(r.get("count", 0) for r in records.values()),
        **{f"kind/{kind}": count for kind, count in kinds.items()},
    }
    if len(records) > 1:
        metadata |= {"papers": len(records), "min_probes_per_paper": min(r.get("count", 0) for r in records.values())}
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(
    key=["evaluation", "volume_set"],
    partitions_def=volumes,
    group_name="evaluation",
    code_version=VOLUME_SET_CODE_VERSION,
    kinds={"json"},
    deps=[
        dg.AssetDep(evaluation_probes, partition_mapping=dg.AllPartitionMapping()),
        *(dg.AssetDep(a, partition_mapping=dg.AllPartitionMapping()) for a in vector_assets),
    ],
    description="The volume's probe set in the AirQA format (evaluation/volume_set/<volume>.jsonl), scored by the "
    "retrieval_quality check against the vector collections.",
)
def volume_set(context: dg.AssetExecutionContext, paperlake: PaperlakeResource) -> dg.MaterializeResult:
    info = write_volume_set(paperlake.settings(), context.partition_key)
    return dg.MaterializeResult(
        metadata={
            "probes": info["count"],
            "papers": info["papers"],
            "min_probes_per_paper": info.get("min_per_paper", 0),
            "path": dg.MetadataValue.path(str(volume_set_path(paperlake.settings(), context.partition_key))),
            **{f"kind/{kind}": count for kind, count in (info.get("by_kind") or {}).items()},
        }
    )


@dg.asset_check(
    asset=volume_set,
    name="retrieval_quality",
    partitions_def=volumes,
    blocking=False,
    description="Runs the volume's probes retrieval-only (no LLM) with PAPERLAKE_EVAL_METHODS' first retrievals; "
    "records answer@1, answer@5 and page@5 and warns when the first method's answer@5 is below "
    "PAPERLAKE_EVAL_MIN_ANSWER5.",
)
def retrieval_quality(context: dg.AssetCheckExecutionContext, paperlake: PaperlakeResource) -> dg.AssetCheckResult:
    from agent.run import volume_quality  # deferred: the agent's methods and their libraries

    volume = context.partition_key
    report = volume_quality(paperlake.settings(), volume)
    # every figure is named after its volume: the UI plots a metadata key's history across the check's runs,
    # whatever their partition, so a shared key would join the volumes into one line that seems to jump
    metadata: dict = {
        f"{volume}/answer_at_1": dg.MetadataValue.float(float(report["answer_at_1"])),
        f"{volume}/answer_at_5": dg.MetadataValue.float(float(report["answer_at_5"])),
        f"{volume}/page_at_5": dg.MetadataValue.float(float(report["page_at_5"])),
        "volume": volume,
        "probes": report["probes"],
        "method": report["method"],
        "threshold": report["threshold"],
    }
    for method, result in report["methods"].items():
        if method != report["method"]:
            metadata[f"{volume}/{method}/answer_at_5"] = dg.MetadataValue.float(float(result["answer_at_k"]))
        for kind, values in result["by_kind"].items():
            metadata[f"{volume}/{method}/{kind}/answer_at_5"] = dg.MetadataValue.float(float(values["answer_at_k"]))
    if report["problems"]:
        metadata["problems"] = "; ".join(report["problems"])
    return dg.AssetCheckResult(
        passed=bool(report["passed"]),
        severity=dg.AssetCheckSeverity.WARN,
        metadata=metadata,
        description=None
        if report["passed"]
        else (
            f"answer@5 {report['answer_at_5']:.3f} below {report['threshold']}"
            if not report["problems"]
            else "; ".join(report["problems"])
        ),
    )
