"""The inbox: ``<inbox>/<volume>/*.pdf`` with an optional ``manifest.csv`` per volume.

A paper's *key* is ``<volume>/<file stem>``: stable, readable, and what the Dagster partition is named after.
Its data version is the file's sha256. The paper id (AirQA rule) needs the title, which may only be known after
reading page 1, so it is computed by the parser, not here.

Symbolic links are papers under the *link's* name, their content read through the link, so an inbox made of
links (to a shared drive, a download cache) ingests like a copied one. A link that cannot be followed (dangling,
a loop), or that leads out of the inboxes to a file not named ``*.pdf`` (``p.pdf -> /etc/passwd``), is not read:
its :attr:`PaperSource.problem` becomes the paper's ``ingest_errors`` row. A volume whose ``manifest.csv`` cannot be
read (not UTF-8, a field over the csv module's limit, a directory) is *held*: its papers stay as the lake has them,
none is parsed or removed, and the volume gets one ``ingest_errors`` row until the manifest reads again
(:func:`scan_volumes`); titles are never guessed from page 1 where the manifest meant to give them. A volume folder
that cannot be read is held the same way: a link to a folder that points to nothing or loops (a share linked in but
not mounted), or a folder that cannot be listed; its papers are not taken for removed.

An inbox is read as a whole, so a paper gone from it is removed from every store; two mistakes would make that
remove what was not meant to go, and neither does. A PDF directly in an inbox (in no volume folder) or in a folder
inside a volume is *loose*: it is not read, and the scan lists it so that the ingest can say where it belongs. An
inbox with no volume folder at all (a share not mounted, a volume folder given as the inbox) is *bare*: while one
is, no paper is removed (:attr:`InboxScan.removals_held`). An inbox whose volumes are all gone on purpose keeps an
empty volume folder, or its home is deleted.

A file or folder name that is not UTF-8 (a ZIP made on another system) is the paper's error: every store writes
text as UTF-8, so such a paper is refused with a reason saying to rename it, and :func:`shown` writes its path
wherever one is said, each stray byte as ``\\xNN``.

Two files can claim one key: ``a.pdf`` and ``a.PDF`` in one volume, or one volume's ``a.pdf`` in two inboxes. The
first (inboxes in the order given, then names in order) is the paper, as :func:`paperlake.lake.pipeline.locate_source`
finds it; each other one is *shadowed*: not read, and said (:meth:`InboxScan.misplaced`), never silently dropped.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from paperlake.lake.ids import sha256_file, text_hash, venue_key

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
    problem: str | None = None  # why the file is not read (a link that cannot be followed...): its error row
    mineru_hash: str = ""  # the MinerU outputs a parse reads, hashed (:func:`mineru_fingerprint`); "" without any

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
    def inputs_hash(self) -> str:
        """What the paper is made from besides its PDF: the manifest row and, when there are any, its MinerU outputs
        (redone or repaired outputs re-ingest the paper as an edited title does). The lake keeps it as
        ``manifest_hash``; without MinerU outputs it is the manifest row's hash alone."""
        if not self.mineru_hash:
            return self.manifest_hash
        return text_hash(f"{self.manifest_hash}.{self.mineru_hash}")[:16]

    @property
    def data_version(self) -> str:
        """What the inbox asset's observation records: the file's sha256, and :attr:`inputs_hash` when the volume
        lists the file or it has MinerU outputs (any of them changing re-ingests the paper, so changes the version)."""
        return f"{self.sha256}.{self.inputs_hash}" if self.manifest or self.mineru_hash else self.sha256

    @property
    def manifest_title(self) -> str | None:
        title = (self.manifest.get("title") or "").strip()
        return title or None


def shown(path: Path | str) -> str:
    """A path as UTF-8 text, for messages and rows: itself, or with each byte of a name that is not UTF-8 as
    ``\\xNN`` (Python hands such bytes over as lone surrogates, which no UTF-8 writer takes)."""
    return os.fsencode(str(path)).decode("utf-8", "backslashreplace")


def key_part(name: str) -> str:
    """A file or folder name as a key part: itself when it is already safe (letters, digits, ``._-``, no ``..``, no
    leading dot), else a safe spelling plus ``~`` and 8 hex digits of the name's hash. ``~`` never survives the
    spelling, so two different names never share a key (``col a`` and ``col-a`` are ``col-a~…`` and ``col-a``)."""
    safe = re.sub(r"\.{2,}", ".", _KEY_UNSAFE.sub("-", name)).lstrip(".") or "paper"
    if safe == name:
        return name
    return f"{safe}~{hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"


def paper_key_for(volume: str, pdf_path: Path) -> str:
    return f"{key_part(volume)}/{key_part(pdf_path.stem)}"


class VolumeHeld(ValueError):
    """A volume that cannot be read now (its folder or its manifest): it is held, its papers stay as the lake has
    them (see the module's docstring)."""


class ManifestError(VolumeHeld):
    """A volume's manifest.csv cannot be read: the volume is held."""


def folder_problem(entry: Path) -> str | None:
    """Why an inbox entry that stands for a volume cannot be read, or None when it can (or is no volume: a file, a
    hidden name, a ``*.pdf``): a link that points to nothing or loops, or a folder that cannot be listed."""
    if entry.name.startswith(".") or entry.suffix.lower() == ".pdf":
        return None
    if entry.is_symlink() and (how := _follow(entry)[1]):
        return f"the volume folder {shown(entry)} is a symbolic link that {how} ({shown(os.readlink(entry))})"
    if entry.is_dir():
        try:
            next(os.scandir(entry), None)
        except OSError as error:
            return f"the volume folder {shown(entry)} cannot be listed: {error.strerror or error}"
    return None


def read_manifest(volume_dir: Path) -> dict[str, dict[str, str]]:
    """file name → row; any subset of :data:`MANIFEST_COLUMNS`, unknown columns kept, blank cells dropped.
    :class:`ManifestError` when the file exists and cannot be read."""
    path = volume_dir / MANIFEST_NAME
    if not os.path.lexists(path):
        return {}
    rows: dict[str, dict[str, str]] = {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            for row in csv.DictReader(handle):
                name = (row.get("file") or "").strip()
                if name:
                    rows[name] = {
                        k.strip(): v.strip()
                        for k, v in row.items()
                        if isinstance(k, str) and isinstance(v, str) and v.strip()
                    }
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ManifestError(f"{shown(path)} cannot be read: {type(error).__name__}: {error}") from None
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


def mineru_fingerprint(mineru_dir: Path | None) -> str:
    """The MinerU outputs of a paper that its parse reads (the JSON files of its folder), hashed by name and content;
    "" without a folder, ``unreadable`` when one cannot be read (the parse then says why)."""
    if mineru_dir is None:
        return ""
    digest = hashlib.sha256()
    try:
        for path in sorted(mineru_dir.iterdir()):
            if path.name.endswith((".json", ".json.gz")) and path.is_file():
                digest.update(f"{shown(path.name)}\0{sha256_file(path)}\0".encode())
    except OSError:
        return "unreadable"
    return digest.hexdigest()[:16]


def _follow(link: Path) -> tuple[Path | None, str | None]:
    """A symbolic link's target, or None and how it cannot be followed ("loops", "points to nothing"). One
    resolution, so a link changed meanwhile cannot pass this check and then fail the caller's."""
    try:
        return link.resolve(strict=True), None
    except RuntimeError:  # Python 3.11 reports a loop this way
        return None, "loops"
    except OSError as error:
        return None, "loops" if error.errno == errno.ELOOP else "points to nothing"


def link_problem(pdf: Path, inboxes: list[Path]) -> str | None:
    """Why a PDF that is a symbolic link is not read, or None (also None for a plain file)."""
    if not pdf.is_symlink():
        return None
    target, how = _follow(pdf)
    if target is None:
        return f"the symbolic link {how} ({shown(os.readlink(pdf))})"
    if not target.is_file():
        return f"the symbolic link does not point to a file ({shown(target)})"
    inside = any(target.is_relative_to(Path(root).resolve()) for root in inboxes)
    if not inside and target.suffix.lower() != ".pdf":
        return f"the symbolic link leads out of the inboxes to a file that is not a PDF ({shown(target)})"
    return None


def source_for_pdf(
    pdf: Path,
    mineru_root: Path | None = None,
    manifest: dict[str, dict[str, str]] | None = None,
    inboxes: list[Path] | None = None,
) -> PaperSource:
    """The inbox facts of one PDF: key (from its own name, a link's included), volume (its folder), sha256, manifest
    row, MinerU outputs; a link that is not to be read gets its :attr:`~PaperSource.problem` and no sha256."""
    pdf = Path(os.path.abspath(pdf))  # absolute, links kept: the key is the link's name, the content its target's
    rows = manifest if manifest is not None else read_manifest(pdf.parent)
    problem = link_problem(pdf, inboxes if inboxes is not None else [pdf.parent.parent])
    if problem is None and shown(pdf) != str(pdf):
        problem = f"the path {shown(pdf)} is not UTF-8 (each stray byte shown as \\xNN): rename the file or its folder"
    if problem is None and not pdf.is_file():
        problem = "a folder, not a PDF file" if pdf.is_dir() else "not a regular file"
    digest = ""
    if problem is None:
        try:
            digest = sha256_file(pdf)
        except OSError as error:
            problem = f"the file cannot be read: {error.strerror or error}"
    mineru_dir = None if problem else find_mineru_dir(mineru_root, pdf)
    return PaperSource(
        paper_key=paper_key_for(pdf.parent.name, pdf),
        volume=pdf.parent.name,
        pdf_path=pdf,
        sha256=digest,
        manifest=rows.get(pdf.name, {}),
        mineru_dir=mineru_dir,
        problem=problem,
        mineru_hash=mineru_fingerprint(mineru_dir),
    )


def volume_dirs(root: Path) -> list[Path]:
    """The volume folders of an inbox (links to folders included), by name."""
    return sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.name.startswith("."))


def pdf_entries(volume_dir: Path) -> list[Path]:
    """Every ``*.pdf`` entry of a volume folder (case-insensitive suffix), by name: files, links whether or not they
    can be followed, and anything else so named (a folder called ``x.pdf`` is its paper's error, not a removal)."""
    return sorted(p for p in volume_dir.iterdir() if p.suffix.lower() == ".pdf")


@dataclass
class InboxScan:
    """What the inboxes hold: the papers, the volumes held because their folder or manifest cannot be read, and what is
    in the wrong place (loose PDFs, inboxes without a volume folder)."""

    sources: list[PaperSource]
    held: dict[str, str] = field(default_factory=dict)  # volume's key part → why it is held
    folders_held: set[str] = field(default_factory=set)  # the held volumes whose folder (not manifest) cannot be read
    loose: list[Path] = field(default_factory=list)  # PDFs in no volume, or in a volume's subfolder: not read
    bare: list[Path] = field(default_factory=list)  # inboxes without any volume folder
    roots: list[Path] = field(default_factory=list)  # the inboxes scanned (absolute)
    shadowed: list[tuple[Path, Path]] = field(default_factory=list)  # (a PDF not read, the one read for its key)

    def held_key(self, paper_key: str) -> bool:
        return paper_key.partition("/")[0] in self.held

    @property
    def removals_held(self) -> str | None:
        """Why no paper may be removed now (a bare inbox: its volumes may only be out of sight), or None."""
        if not self.bare:
            return None
        names = ", ".join(shown(root) for root in self.bare)
        return f"no volume folder in {names} (not mounted, or a volume folder given as the inbox?)"

    def misplaced(self) -> list[str]:
        """One line per inbox or volume with loose PDFs (how many, and where they belong), and one per shadowed PDF
        (which file has its key)."""
        roots = set(self.roots)
        by_folder: dict[Path, list[Path]] = {}
        for pdf in self.loose:
            folder = pdf.parent if pdf.parent in roots else next(p for p in pdf.parents if p.parent in roots)
            by_folder.setdefault(folder, []).append(pdf)
        lines = []
        for folder, pdfs in sorted(by_folder.items()):
            count = f"{len(pdfs)} PDF{'s' if len(pdfs) > 1 else ''}"
            first = f"{shown(pdfs[0].relative_to(folder))}{', …' if len(pdfs) > 1 else ''}"
            if folder in roots:
                lines.append(
                    f"{count} directly in {shown(folder)} ({first}) belong to no volume and are not read: move them "
                    f"into {shown(folder)}/<volume>/"
                )
            else:
                lines.append(
                    f"{count} in folders inside the volume {shown(folder)} ({first}) are not read: a volume's PDFs "
                    f"sit directly in its folder"
                )
        for unread, read in self.shadowed:
            where = (
                "in the same volume (a key ignores the case of .pdf)"
                if unread.parent == read.parent
                else "in an inbox given before it"
            )
            lines.append(
                f"{shown(unread)} is not read: {shown(read)}, {where}, is already the paper "
                f"{paper_key_for(read.parent.name, read)}; rename one of them"
            )
        return lines


def scan_volumes(inboxes: list[Path] | Path, mineru_root: Path | None = None) -> InboxScan:
    """Every ``<inbox>/<volume>/*.pdf``, sorted by key (each file hashed), and the held volumes."""
    roots = [Path(inboxes)] if isinstance(inboxes, (str, Path)) else [Path(root) for root in inboxes]
    sources: dict[str, PaperSource] = {}
    held: dict[str, str] = {}
    loose: list[Path] = []
    bare: list[Path] = []
    shadowed: list[tuple[Path, Path]] = []
    folders_held: set[str] = set()
    for root in roots:
        if not root.is_dir():
            raise FileNotFoundError(f"inbox {shown(root)} is not a directory")
        loose += [Path(os.path.abspath(pdf)) for pdf in pdf_entries(root) if not pdf.is_dir()]
        volumes = volume_dirs(root)
        unreadable = {entry: why for entry in sorted(Path(root).iterdir()) if (why := folder_problem(entry))}
        for entry, why in unreadable.items():
            held[key_part(entry.name)] = why
            folders_held.add(key_part(entry.name))
        if not volumes and not unreadable:
            bare.append(Path(os.path.abspath(root)))
        for volume_dir in volumes:
            if volume_dir in unreadable:
                continue
            loose += nested_pdfs(volume_dir, mineru_root)
            try:
                manifest = read_manifest(volume_dir)
            except ManifestError as error:
                held[key_part(volume_dir.name)] = str(error)
                continue
            for pdf in pdf_entries(volume_dir):
                if (first := sources.get(paper_key_for(volume_dir.name, pdf))) is not None:
                    shadowed.append((Path(os.path.abspath(pdf)), first.pdf_path))
                    continue
                source = source_for_pdf(pdf, mineru_root, manifest, roots)
                sources[source.paper_key] = source
    absolute = [Path(os.path.abspath(root)) for root in roots]
    return InboxScan([sources[k] for k in sorted(sources)], held, folders_held, loose, bare, absolute, shadowed)


def nested_pdfs(volume_dir: Path, mineru_root: Path | None = None) -> list[Path]:
    """The ``*.pdf`` files in folders inside a volume (links to folders not followed, hidden folders and MinerU's
    outputs skipped), by path: they are in no volume, so they are not read."""
    skip = Path(os.path.abspath(mineru_root)) if mineru_root else None
    found: list[Path] = []
    for folder, subfolders, files in os.walk(os.path.abspath(volume_dir)):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and Path(folder, d) != skip)
        if Path(folder) != Path(os.path.abspath(volume_dir)):
            found += [Path(folder, name) for name in sorted(files) if name.lower().endswith(".pdf")]
    return found


def scan_inbox(inboxes: list[Path] | Path, mineru_root: Path | None = None) -> list[PaperSource]:
    """The papers of :func:`scan_volumes` (a held volume's none)."""
    return scan_volumes(inboxes, mineru_root).sources
