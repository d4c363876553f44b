"""Shared fixtures: the sample corpus (by relative path, never copied into the repo) and small inboxes."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("PAPERLAKE_CORPUS", REPO.parent / "shared" / "corpus")).resolve()
CORPUS_INBOX = CORPUS / "inbox"
CORPUS_MINERU = CORPUS / "mineru"


def corpus_pdf(stem: str) -> Path:
    volume = stem.split("-")[0]
    return CORPUS_INBOX / volume / f"{stem}.pdf"


def manifest_rows(volume: str) -> dict[str, dict[str, str]]:
    with open(CORPUS_INBOX / volume / "manifest.csv", newline="", encoding="utf-8") as handle:
        return {row["file"]: row for row in csv.DictReader(handle)}


def make_inbox(root: Path, stems: list[str], *, with_manifest: bool = True) -> Path:
    """A tmp inbox holding copies of some corpus PDFs (tests may then damage, replace or remove them)."""
    inbox = root / "inbox"
    by_volume: dict[str, list[str]] = {}
    for stem in stems:
        by_volume.setdefault(stem.split("-")[0], []).append(stem)
    for volume, volume_stems in by_volume.items():
        folder = inbox / volume
        folder.mkdir(parents=True, exist_ok=True)
        for stem in volume_stems:
            shutil.copyfile(corpus_pdf(stem), folder / f"{stem}.pdf")
        if with_manifest:
            rows = manifest_rows(volume)
            with open(folder / "manifest.csv", "w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(next(iter(rows.values())).keys()))
                writer.writeheader()
                writer.writerows(rows[f"{stem}.pdf"] for stem in volume_stems)
    return inbox


def ingest_sample(root: Path, stems: list[str], unset: tuple[str, ...] = ()) -> dict:
    """Ingest copies of some corpus papers (with their MinerU outputs) into ``root/home``, every stage on a Milvus
    Lite file, with the environment variables ``unset`` removed meanwhile; asserts that each paper was published and
    synced. Returns the inbox, settings, summary and the paper_key → paper_id map of the warehouse."""
    import duckdb

    from orchestration.run import ingest
    from paperlake.config import Settings

    inbox = make_inbox(root, stems)
    with pytest.MonkeyPatch.context() as patch:
        for name in unset:
            patch.delenv(name, raising=False)
        settings = Settings.from_env(home=root / "home", backend="auto", mineru_dir=CORPUS_MINERU,
                                     milvus_uri=str(root / "home" / "milvus.db"))
        summary = ingest([inbox], settings)
    assert len(summary.published) == len(stems) and not summary.vector_failures, summary
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        ids = dict(con.execute("select paper_key, paper_id::varchar from metadata").fetchall())
    return {"inbox": inbox, "settings": settings, "summary": summary, "ids": ids}


@pytest.fixture(scope="session", autouse=True)
def _shared_embedding_cache(tmp_path_factory: pytest.TempPathFactory):
    """One embedding cache for every home of the run (both xdist workers): the suite ingests the same sample papers
    into many fresh homes, and the cache is content-addressed (model, text), so sharing it changes no vector, only
    how often the same text is encoded. Tests that count encodings use caches of their own."""
    if os.environ.get("PAPERLAKE_EMBEDDING_CACHE"):
        yield
        return
    root = tmp_path_factory.getbasetemp()
    shared = (root.parent if root.name.startswith("popen-gw") else root) / "shared-embeddings.sqlite"
    os.environ["PAPERLAKE_EMBEDDING_CACHE"] = str(shared)
    try:
        yield
    finally:
        os.environ.pop("PAPERLAKE_EMBEDDING_CACHE", None)


@pytest.fixture(scope="session", autouse=True)
def _corpus_present() -> None:
    if not CORPUS_INBOX.is_dir():
        pytest.exit(f"the sample corpus is missing at {CORPUS} (expected ../shared/corpus beside the repo)", 2)


@pytest.fixture(scope="session")
def dbt_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`dbt parse` once per session (never at import time)."""
    from orchestration.run import prepare_dbt_manifest
    from paperlake.config import Settings

    home = tmp_path_factory.mktemp("dbt-home")
    return prepare_dbt_manifest(Settings.from_env(home=home))


# The modules that ingest the most, first: pytest-xdist (--dist loadfile) hands out files in collection order, so the
# longest ones start at once instead of ending the run alone on one worker.
HEAVY_FIRST = ("test_self_evaluation.py", "test_crash_recovery.py", "test_crash_recovery_stages.py", "test_stores.py",
               "test_enrichment.py", "test_dagster_concurrency.py", "test_ingest.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: index for index, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))
