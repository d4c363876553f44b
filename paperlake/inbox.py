"""The inbox: ``<inbox>/<volume>/*.pdf`` with an optional ``manifest.csv`` per volume.

A paper's *key* is ``<volume>/<file stem>``: stable, readable, and what the Dagster partition is named after.
Its data version is the file's sha256. The paper id (AirQA rule) needs the title, which may only be known after
reading page 1, so it is computed by the parser, not here.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from paperlake.ids import sha256_file, text_hash, venue_key

MANIFEST_NAME = "manifest.csv"
MANIFEST_COLUMNS = ("file", "title", "conference", "year", "volume", "pdf_url", "license", "sha256", "pages")
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class PaperSource:
    """One PDF in the inbox, with what the volume's manifest says about it (possibly nothing)."""

    paper_key: str
    volume: str
    pdf_path: Path
    sha256: str
    manifest: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    mineru_dir: Path | None = None

    @property
    def venue(self) -> str:
        """``emnlp2024``: from the manifest's conference and year, else the volume folder's name."""
        conference = self.manifest.get("conference")
        if conference:
            return venue_key(conference, self.manifest.get("year"))
        return venue_key(self.volume, None)

    @property
    def manifest_hash(self) -> str:
        """The manifest row is input too: editing a title or a checksum there must re-ingest the paper."""
        return text_hash(json.dumps(self.manifest, sort_keys=True))[:16]

    @property
    def data_version(self) -> str:
        """What the inbox asset's observation records: the file's sha256, and its manifest row's hash when the
        volume lists it (either changing re-ingests the paper, so either changes the version)."""
        return f"{self.sha256}.{self.manifest_hash}" if self.manifest else self.sha256

    @property
    def manifest_title(self) -> str | None:
        title = (self.manifest.get("title") or "").strip()
        return title or None


def _key_part(name: str) -> str:
    """A file or folder name as a key part: itself when it is already safe (letters, digits, ``._-``, no ``..``, no
    leading dot), else a safe spelling plus ``~`` and 8 hex digits of the name's hash. ``~`` never survives the
    spelling, so two different names never share a key (``col a`` and ``col-a`` are ``col-a~…`` and ``col-a``)."""
    safe = re.sub(r"\.{2,}", ".", _KEY_UNSAFE.sub("-", name)).lstrip(".") or "paper"
    if safe == name:
        return name
    return f"{safe}~{hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"


def paper_key_for(volume: str, pdf_path: Path) -> str:
    return f"{_key_part(volume)}/{_key_part(pdf_path.stem)}"


def read_manifest(volume_dir: Path) -> dict[str, dict[str, str]]:
    """file name → row; any subset of :data:`MANIFEST_COLUMNS`, unknown columns kept, blank cells dropped."""
    path = volume_dir / MANIFEST_NAME
    if not path.exists():
        return {}
    rows: dict[str, dict[str, str]] = {}
    with open(path, newline="", encoding="utf-8-sig") as handle:
        for row in csv.DictReader(handle):
            name = (row.get("file") or "").strip()
            if name:
                rows[name] = {k.strip(): v.strip() for k, v in row.items() if k and v and v.strip()}
    return rows


def find_mineru_dir(mineru_root: Path | None, pdf_path: Path) -> Path | None:
    """MinerU outputs for a PDF live in ``<mineru_root>/<pdf stem>/`` (cloud or local layout)."""
    if mineru_root is None:
        return None
    candidate = Path(mineru_root) / pdf_path.stem
    if candidate.is_dir() and any(candidate.glob("*content_list.json")):
        return candidate
    auto = candidate / "auto"
    if auto.is_dir() and any(auto.glob("*content_list.json")):
        return auto
    return None


def source_for_pdf(
    pdf: Path, mineru_root: Path | None = None, manifest: dict[str, dict[str, str]] | None = None
) -> PaperSource:
    """The inbox facts of one PDF: key, volume (its folder), sha256, manifest row, MinerU outputs."""
    pdf = Path(pdf).resolve()
    rows = manifest if manifest is not None else read_manifest(pdf.parent)
    return PaperSource(
        paper_key=paper_key_for(pdf.parent.name, pdf),
        volume=pdf.parent.name,
        pdf_path=pdf,
        sha256=sha256_file(pdf),
        manifest=rows.get(pdf.name, {}),
        mineru_dir=find_mineru_dir(mineru_root, pdf),
    )


def scan_inbox(inboxes: list[Path] | Path, mineru_root: Path | None = None) -> list[PaperSource]:
    """Every ``<inbox>/<volume>/*.pdf`` (case-insensitive suffix), sorted by key; hashes each file."""
    roots = [inboxes] if isinstance(inboxes, (str, Path)) else list(inboxes)
    sources: dict[str, PaperSource] = {}
    for root in map(Path, roots):
        if not root.is_dir():
            raise FileNotFoundError(f"inbox {root} is not a directory")
        for volume_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            manifest = read_manifest(volume_dir)
            for pdf in sorted(volume_dir.iterdir()):
                if not pdf.is_file() or pdf.suffix.lower() != ".pdf":
                    continue
                source = source_for_pdf(pdf, mineru_root, manifest)
                sources[source.paper_key] = source
    return [sources[k] for k in sorted(sources)]
