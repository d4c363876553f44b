"""Which file is which paper: keys that never collide, and which of two identical files is kept.

Both were found by an adversarial run: ``col a.pdf`` and ``col-a.pdf`` shared the key ``vol1/col-a`` (one was never
ingested, and every ingest re-parsed the other); and of a manifest-listed PDF and an unlisted identical copy, the
alphabetically first was kept, so the copy was ingested with the folder as venue and a non-AirQA id.
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest

from paperlake.config import Settings
from paperlake.lake.inbox import paper_key_for, scan_inbox
from paperlake.lake.pipeline import ingest_paper, plan_ingest
from paperlake.lake.store import Lake
from support.fixtures import corpus_pdf, manifest_rows

LISTED = "emnlp2024-126-embedding-inversion-attack"
OTHER = "emnlp2024-012-numerologic"

pytestmark = pytest.mark.usefixtures("corpus")


def settings_for(tmp_path: Path) -> Settings:
    return Settings.from_env(home=tmp_path / "home", backend="pymupdf", mineru_dir=None)


def ingest_plan(inbox: Path, settings: Settings) -> list[str]:
    """Parse what the plan says, in its order (the CLI's order); returns the keys it parsed."""
    lake = Lake(settings.lake)
    plan = plan_ingest(scan_inbox([inbox]), lake, settings)
    for key in plan.removed:
        lake.remove_paper(key)
    for source in plan.to_parse:
        ingest_paper(source, lake, settings, inboxes=[inbox])
    return [source.paper_key for source in plan.to_parse]


def test_names_that_spell_the_same_key_get_different_keys(tmp_path):
    volume = tmp_path / "inbox" / "vol1"
    volume.mkdir(parents=True)
    shutil.copyfile(corpus_pdf(LISTED), volume / "col a.pdf")
    shutil.copyfile(corpus_pdf(OTHER), volume / "col-a.pdf")
    shutil.copyfile(corpus_pdf(OTHER), volume / "a...b.pdf")  # Dagster refuses "..." in a partition key
    os.utime(volume / "col-a.pdf", (1_000_000_000, 1_000_000_000))  # the older of the two identical files
    keys = [source.paper_key for source in scan_inbox([tmp_path / "inbox"])]
    assert len(keys) == 3 and len(set(keys)) == 3
    assert "vol1/col-a" in keys and not any("..." in key for key in keys)
    assert paper_key_for("vol1", Path("col a.pdf")).startswith("vol1/col-a~")

    settings = settings_for(tmp_path)
    assert len(ingest_plan(tmp_path / "inbox", settings)) == 3
    lake = Lake(settings.lake)
    assert lake.record("vol1/col-a") is not None  # published
    spaced = next(key for key in keys if key.startswith("vol1/col-a~"))
    assert lake.record(spaced) is not None
    dotted = next(key for key in keys if key.startswith("vol1/a.b"))
    assert lake.error(dotted)["stage"] == "identity" and "identical to vol1/col-a" in lake.error(dotted)["reason"]
    assert ingest_plan(tmp_path / "inbox", settings) == []  # and nothing is parsed again


def write_manifest(volume: Path, rows: list[dict[str, str]]) -> None:
    with (volume / "manifest.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_the_manifest_listed_copy_is_kept_and_the_reason_is_said(tmp_path):
    volume = tmp_path / "inbox" / "emnlp2024"
    volume.mkdir(parents=True)
    listed = volume / f"{LISTED}.pdf"
    copy = volume / "aaa-copy.pdf"  # sorts first, and is older: only the manifest speaks for the listed file
    shutil.copyfile(corpus_pdf(LISTED), copy)
    shutil.copyfile(corpus_pdf(LISTED), listed)
    os.utime(copy, (1_000_000_000, 1_000_000_000))
    write_manifest(volume, [manifest_rows("emnlp2024")[listed.name]])

    settings = settings_for(tmp_path)
    ingest_plan(tmp_path / "inbox", settings)
    lake = Lake(settings.lake)
    record = lake.record(f"emnlp2024/{LISTED}")
    assert record is not None
    error = lake.error("emnlp2024/aaa-copy")
    assert error is not None and error["duplicate_of"] == f"emnlp2024/{LISTED}"
    assert "listed in the volume's manifest" in error["reason"]
    metadata = lake.read_view("metadata", f"emnlp2024/{LISTED}").to_pylist()[0]
    assert metadata["venue"] == "emnlp2024" and metadata["title_source"] == "manifest"


def test_an_ingested_copy_gives_way_when_the_listed_file_arrives(tmp_path):
    volume = tmp_path / "inbox" / "emnlp2024"
    volume.mkdir(parents=True)
    copy = volume / "aaa-copy.pdf"
    shutil.copyfile(corpus_pdf(LISTED), copy)
    settings = settings_for(tmp_path)
    ingest_plan(tmp_path / "inbox", settings)
    lake = Lake(settings.lake)
    assert lake.record("emnlp2024/aaa-copy") is not None  # alone, the copy is the paper

    listed = volume / f"{LISTED}.pdf"
    shutil.copyfile(corpus_pdf(LISTED), listed)
    write_manifest(volume, [manifest_rows("emnlp2024")[listed.name]])
    parsed = ingest_plan(tmp_path / "inbox", settings)
    assert parsed == ["emnlp2024/aaa-copy", f"emnlp2024/{LISTED}"]  # the copy gives its place up first
    assert lake.record("emnlp2024/aaa-copy") is None
    assert lake.error("emnlp2024/aaa-copy")["duplicate_of"] == f"emnlp2024/{LISTED}"
    assert lake.record(f"emnlp2024/{LISTED}") is not None
    assert ingest_plan(tmp_path / "inbox", settings) == []

    listed.unlink()  # the kept file leaves: the copy is the paper again
    assert ingest_plan(tmp_path / "inbox", settings) == ["emnlp2024/aaa-copy"]
    assert lake.record("emnlp2024/aaa-copy") is not None
