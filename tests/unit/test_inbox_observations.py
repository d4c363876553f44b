"""Which inbox partitions `paperlake ingest` and the inbox sensor record again (`assets.parse.inbox_events`): the
last observed data version of each paper is read in pages of the newest observations, and must be the one Dagster's
own per-partition lookup gives, whatever the order and number of earlier observations."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import pytest

from assets.parse import DATA_VERSION_TAG, INBOX_KEY, inbox_events, recorded_versions
from assets.partitions import papers


@dataclass
class Source:
    paper_key: str
    data_version: str
    pdf_path: Path = Path("/inbox/x.pdf")
    sha256: str = "0" * 64
    volume: str = "v"
    manifest: dict = field(default_factory=dict)


def _observe(instance, key: str, version: str) -> None:
    instance.report_runless_asset_event(
        dg.AssetObservation(asset_key=INBOX_KEY, partition=key, tags={DATA_VERSION_TAG: version})
    )


@pytest.fixture
def instance():
    with dg.instance_for_test() as instance:
        yield instance


def test_the_latest_version_of_each_paper_whatever_came_after(instance, monkeypatch):
    keys = [f"v/p{i}" for i in range(7)]
    instance.add_dynamic_partitions(papers.name, keys)
    _observe(instance, "v/p0", "old")
    _observe(instance, "v/p1", "one")
    _observe(instance, "v/p0", "new")
    for round_ in range(12):  # many newer observations of other papers: p0 and p1 are pages back
        for key in keys[2:5]:
            _observe(instance, key, f"r{round_}")
    # p5 observed once, p6 never
    _observe(instance, "v/p5", "five")

    monkeypatch.setattr("assets.parse.PARTITIONS_PER_QUERY", 3)  # several chunks, several pages each
    found = recorded_versions(instance, keys)

    expected = {}
    for key in keys:
        record = instance.get_latest_data_version_record(INBOX_KEY, True, key)
        if record is not None:
            expected[key] = record.event_log_entry.asset_observation.data_version
    assert found == expected
    assert found == {"v/p0": "new", "v/p1": "one", "v/p2": "r11", "v/p3": "r11", "v/p4": "r11", "v/p5": "five"}


def test_only_changed_unseen_and_partitioned_papers_are_recorded_again(instance):
    instance.add_dynamic_partitions(papers.name, ["v/same", "v/changed", "v/new"])
    _observe(instance, "v/same", "a")
    _observe(instance, "v/changed", "a")
    sources = [
        Source("v/same", "a"),
        Source("v/changed", "b"),
        Source("v/new", "c"),
        Source("v/no-partition", "d"),  # a duplicate file, or one the next sensor tick adds
    ]
    events = inbox_events(instance, sources)
    assert sorted((type(e).__name__, e.partition) for e in events) == [
        ("AssetMaterialization", "v/changed"),
        ("AssetMaterialization", "v/new"),
        ("AssetObservation", "v/changed"),
        ("AssetObservation", "v/new"),
    ]
    for event in events:
        instance.report_runless_asset_event(event)
    assert inbox_events(instance, sources) == []


def test_the_ui_observation_records_the_versions_the_sensor_and_the_cli_do(instance, tmp_path, corpus):
    """The inbox asset's own observation (the UI's "Observe") scans with the MinerU outputs as the sensor and
    `paperlake ingest` do: a paper with outputs has one data version, not two that flip with who observed last."""
    import shutil

    from assets.parse import inbox_pdf
    from assets.resources import PaperlakeResource
    from paperlake.lake.inbox import scan_volumes
    from support.fixtures import CORPUS_MINERU, corpus_pdf

    stem = "emnlp2024-012-numerologic"
    (tmp_path / "inbox" / "emnlp2024").mkdir(parents=True)
    shutil.copyfile(corpus_pdf(stem), tmp_path / "inbox" / "emnlp2024" / f"{stem}.pdf")
    shutil.copytree(CORPUS_MINERU / stem, tmp_path / "mineru" / stem)
    resource = PaperlakeResource(
        home=str(tmp_path / "home"), inboxes=[str(tmp_path / "inbox")], mineru_dir=str(tmp_path / "mineru")
    )
    [source] = scan_volumes([tmp_path / "inbox"], tmp_path / "mineru").sources  # what the sensor and the CLI record
    assert source.mineru_hash and source.data_version.startswith(f"{source.sha256}.")
    instance.add_dynamic_partitions(papers.name, [source.paper_key])
    job = dg.define_asset_job("observe_inbox", selection=[INBOX_KEY])
    defs = dg.Definitions(assets=[inbox_pdf], jobs=[job], resources={"paperlake": resource})
    assert defs.resolve_job_def("observe_inbox").execute_in_process(instance=instance).success
    assert recorded_versions(instance, [source.paper_key]) == {source.paper_key: source.data_version}
