"""Dynamic partitions: one per paper, keyed ``<volume>/<file stem>`` (see paperlake.lake.inbox.paper_key_for),
and one per volume."""

import dagster as dg

PAPERS = "papers"
papers = dg.DynamicPartitionsDefinition(name=PAPERS)
volumes = dg.DynamicPartitionsDefinition(name="volumes")  # one per conference volume (the first part of a paper key)


def run_paper_keys(context: dg.AssetExecutionContext) -> list[str]:
    """The papers a run covers: its range (consecutive partitions, single-run backfill policy) or its one key."""
    return list(context.partition_keys) if context.has_partition_key_range else [context.partition_key]
