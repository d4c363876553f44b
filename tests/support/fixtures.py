"""Shared test helpers: the sample corpus (by relative path, never copied into the repo), small inboxes made of its
papers, and a whole ingest of some of them.

``CORPUS`` is the one definition of where the corpus is: ``$PAPERLAKE_CORPUS``, else ``../shared/corpus`` beside the
repo. Tests reach it through the ``corpus`` fixture (tests/conftest.py), which skips them, saying why, when it is
missing; the names below derive from it for the helpers that are plain functions.
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("PAPERLAKE_CORPUS", REPO.parent / "shared" / "corpus")).resolve()
CORPUS_INBOX = CORPUS / "inbox"
CORPUS_MINERU = CORPUS / "mineru"


def corpus_missing() -> str | None:
    """Why the sample corpus cannot be used, or None when it is there."""
    absent = [str(folder) for folder in (CORPUS_INBOX, CORPUS_MINERU) if not folder.is_dir()]
    if not absent:
        return None
    return (
        f"the sample corpus is missing ({', '.join(absent)} not found): expected ../shared/corpus beside the repo, "
        "or set PAPERLAKE_CORPUS"
    )


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
        settings = Settings.from_env(
            home=root / "home", backend="auto", mineru_dir=CORPUS_MINERU, milvus_uri=str(root / "home" / "milvus.db")
        )
        summary = ingest([inbox], settings)
    assert len(summary.published) == len(stems) and not summary.vector_failures, summary
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        ids = dict(con.execute("select paper_key, paper_id::varchar from metadata").fetchall())
    return {"inbox": inbox, "settings": settings, "summary": summary, "ids": ids}
