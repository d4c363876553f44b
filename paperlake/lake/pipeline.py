"""One paper through the parse stage: choose a backend, parse, gate on quality, publish or record the failure.

The Dagster parse asset and `paperlake ingest` both call :func:`ingest_paper`; :func:`plan_ingest` decides which
papers need that at all (new, changed, parser version bumped, or removed), so unchanged papers cost one hash.
A failure of any kind becomes an ``ingest_errors`` row naming the paper, the stage and the reason; it never
raises into the caller, so one bad PDF never takes the others down.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from paperlake.config import Settings
from paperlake.lake.inbox import (
    InboxScan,
    PaperSource,
    VolumeHeld,
    folder_problem,
    key_part,
    paper_key_for,
    pdf_entries,
    read_manifest,
    scan_inbox,
    source_for_pdf,
    volume_dirs,
)
from paperlake.lake.store import Lake
from paperlake.lake.views import ParsedPaper
from paperlake.parsing.backends import PARSERS, auto_parser, parse_with
from paperlake.parsing.errors import ParseError
from paperlake.runtime.cores import map_ordered, workers_for

if TYPE_CHECKING:  # the gate (pandas, Great Expectations) is imported where it runs
    from paperlake.lake.quality import QualityReport

log = logging.getLogger(__name__)

BACKENDS = ("auto", *PARSERS)


class IngestError(Exception):
    """A paper that cannot be ingested, with where and why (the lake's ``ingest_errors`` row)."""

    def __init__(self, paper_key: str, stage: str, reason: str, duplicate_of: str | None = None):
        super().__init__(f"{paper_key}: {stage}: {reason}")
        self.paper_key, self.stage, self.reason, self.duplicate_of = paper_key, stage, reason, duplicate_of


def parser_version(backend: str) -> str:
    return PARSERS[backend].version


def parse_code_version() -> str:
    """Every parser's version: the parse asset's code version, so a bump of any marks the parse stale in the UI
    exactly as :func:`needs_parse` re-parses the papers that backend produced."""
    return "parse:" + ";".join(f"{name}={parser.version}" for name, parser in PARSERS.items())


def resolve_backend(source: PaperSource, requested: str) -> str:
    if requested not in BACKENDS:
        raise ValueError(f"unknown backend {requested!r}; choose one of {', '.join(BACKENDS)}")
    if requested == "auto":
        return auto_parser(source)
    return requested


def pdf_page_count(path: Path) -> int:
    import pymupdf  # deferred: pymupdf

    with pymupdf.open(path) as document:
        return document.page_count


def check_integrity(source: PaperSource) -> None:
    """Catch what a parser would silently repair: a file that is not the one the manifest describes, or a
    truncated download (PyMuPDF rebuilds a cut-off PDF from the objects it finds and parses half a paper)."""
    expected = source.manifest.get("sha256")
    if expected and expected.lower() != source.sha256:
        raise IngestError(
            source.paper_key,
            "open",
            f"sha256 {source.sha256[:12]}… differs from the manifest's "
            f"{expected[:12]}…: the file is not the one the manifest lists",
        )
    with open(source.pdf_path, "rb") as handle:
        if b"%PDF-" not in handle.read(1024):
            raise IngestError(source.paper_key, "open", "not a PDF file (no %PDF- header)")
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 2048))
        tail = handle.read()
    if b"%%EOF" not in tail:
        raise IngestError(source.paper_key, "open", "the PDF is truncated or damaged (no end-of-file marker)")


def parse_source(source: PaperSource, backend: str, settings: Settings) -> ParsedPaper:
    """``source`` parsed with ``backend``; a parser's refusal becomes the paper's :class:`IngestError`."""
    try:
        return parse_with(backend, source, settings)
    except ParseError as error:
        raise IngestError(source.paper_key, error.stage, error.reason) from error


def keep_rank(source: PaperSource) -> tuple[int, int, str]:
    """Which of identical files is kept: the one the volume's manifest lists (it carries the AirQA title and venue),
    then the older file, then the first key. The one rule of the plan and of the parse step."""
    return (0 if source.manifest else 1, source.pdf_path.stat().st_mtime_ns, source.paper_key)


def keep_reason(kept: PaperSource, other: PaperSource) -> str:
    if kept.manifest and not other.manifest:
        return "it is listed in the volume's manifest"
    if keep_rank(kept)[1] < keep_rank(other)[1]:
        return "it is the older file"
    return "its key sorts first"


def duplicate_of(source: PaperSource, inboxes: list[Path]) -> tuple[str, str] | None:
    """(key of the identical file that is kept instead of this one, why), if any: the best of the whole group of
    identical files by :func:`keep_rank`, as :func:`duplicate_groups` chooses. Compares sizes first."""
    if source.problem:
        return None
    size = source.pdf_path.stat().st_size
    group = [source]
    keys: set[str] = set()  # a key's first file is its paper; a later one is shadowed, not read (inbox.py)
    for root in inboxes:
        for volume_dir in volume_dirs(Path(root)):
            manifest = None
            for pdf in pdf_entries(volume_dir):
                if (key := paper_key_for(volume_dir.name, pdf)) in keys:
                    continue
                keys.add(key)
                if Path(os.path.abspath(pdf)) == source.pdf_path:
                    continue
                try:
                    if pdf.stat().st_size != size:
                        continue
                except OSError:
                    continue
                if manifest is None:
                    try:
                        manifest = read_manifest(volume_dir)
                    except ValueError:  # a held volume's files are not in the plan: nor here
                        break
                other = source_for_pdf(pdf, None, manifest, inboxes)
                if not other.problem and other.sha256 == source.sha256:
                    group.append(other)
    kept = min(group, key=keep_rank)
    return None if kept is source else (kept.paper_key, keep_reason(kept, source))


def duplicate_groups(sources: list[PaperSource]) -> dict[str, str]:
    """key of every file that an identical, preferred file (:func:`keep_rank`) replaces → the kept file's key."""
    by_hash: dict[str, list[PaperSource]] = {}
    for source in sources:
        if not source.problem:
            by_hash.setdefault(source.sha256, []).append(source)
    losers = {}
    for group in by_hash.values():
        if len(group) > 1:
            kept, *others = sorted(group, key=keep_rank)
            losers.update({other.paper_key: kept.paper_key for other in others})
    return losers


@dataclass
class PaperOutcome:
    paper_key: str
    status: str  # published | failed | unchanged | removed
    backend: str | None = None
    paper_id: str | None = None
    sha256: str | None = None
    pages: int = 0
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    stage: str | None = None
    reason: str | None = None
    duplicate_of: str | None = None
    quality: QualityReport | None = None


def ingest_paper(
    source: PaperSource,
    lake: Lake,
    settings: Settings,
    *,
    backend: str | None = None,
    inboxes: list[Path] | None = None,
) -> PaperOutcome:
    """Parse, validate and publish one paper; on any failure record it and return a ``failed`` outcome."""
    return ingest_papers([source], lake, settings, backend=backend, inboxes=inboxes)[0]


def ingest_papers(
    sources: list[PaperSource],
    lake: Lake,
    settings: Settings,
    *,
    backend: str | None = None,
    inboxes: list[Path] | None = None,
) -> list[PaperOutcome]:
    """Parse each paper, validate them together (:func:`paperlake.lake.quality.validate_papers`: one gate run for the
    batch, each paper's verdict its own), then publish each one that passed; a failure of any kind is recorded as
    that paper's and stops nothing else. Outcomes in the order of ``sources``.

    The parses themselves are independent: with several papers they run on the machine's cores
    (:func:`paperlake.runtime.cores.map_ordered`, ``PAPERLAKE_PARSE_WORKERS``), while this process prepares the gate;
    everything that compares papers (duplicates, ids) and every write stays here, in the papers' order."""
    outcomes: list[tuple[PaperOutcome, float]] = []  # a refused paper's outcome has its reason already
    jobs: list[tuple[PaperSource, str, Settings]] = []
    for source in sources:
        started = time.perf_counter()
        chosen = resolve_backend(source, backend or settings.backend)
        outcome = PaperOutcome(source.paper_key, "failed", backend=chosen, sha256=source.sha256)
        try:
            _check_before_parse(source, inboxes)
            jobs.append((source, chosen, settings))
        except Exception as error:
            _failed(outcome, error)
        outcomes.append((outcome, time.perf_counter() - started))
    parses = iter(
        map_ordered(
            _parse_job,
            jobs,
            workers_for(settings.parse_workers, len(jobs)),
            crashed=lambda job, why: (None, ("parse", why), 0.0, 0),
            while_waiting=_prepare_the_gate,
        )
    )
    prepared: list[tuple[PaperOutcome, ParsedPaper | None, float]] = []
    claimed: dict[str, str] = {}  # paper id → the key that took it, in this batch
    for source, (outcome, seconds) in zip(sources, outcomes):
        parsed = None
        if outcome.reason is None:
            parsed, error, parse_seconds, pages = next(parses)
            started = time.perf_counter()
            try:
                if error is not None:
                    raise IngestError(source.paper_key, *error)
                _check_identity(source, parsed, lake, claimed)
                outcome.paper_id = parsed.paper_id
                outcome.pages = pages
                claimed[parsed.paper_id] = source.paper_key
            except Exception as error:
                parsed = None
                _failed(outcome, error)
            seconds += parse_seconds + time.perf_counter() - started
        prepared.append((outcome, parsed, seconds))
    gated = [(outcome, parsed) for outcome, parsed, _ in prepared if parsed is not None]
    started = time.perf_counter()
    from paperlake.lake.quality import validate_papers  # deferred: pandas

    reports: list[QualityReport | None]
    try:
        items = [(parsed, outcome.pages) for outcome, parsed in gated]
        reports = list(validate_papers(items, max_chunk_tokens=settings.max_chunk_tokens)) if items else []
    except Exception:  # the gate broke on the batch: each paper alone, so what broke it is its paper's failure
        reports = []
        for outcome, parsed in gated:
            try:
                reports += validate_papers([(parsed, outcome.pages)], max_chunk_tokens=settings.max_chunk_tokens)
            except Exception as error:
                _failed(outcome, error)
                reports.append(None)
    gate_seconds = (time.perf_counter() - started) / max(1, len(gated))
    for (outcome, parsed), report in zip(gated, reports):
        if report is None:
            continue
        outcome.quality = report
        try:
            if not report.passed:
                raise IngestError(outcome.paper_key, "quality", report.summary())
            source = next(s for s in sources if s.paper_key == outcome.paper_key)
            record = lake.publish(parsed, source.sha256, parser_version(outcome.backend), source.inputs_hash)
            outcome.status, outcome.counts = "published", record.row_counts
        except Exception as error:
            _failed(outcome, error)
    for source, (outcome, parsed, seconds) in zip(sources, prepared):
        if outcome.status == "failed":
            lake.record_error(
                source.paper_key,
                stage=outcome.stage or "parse",
                reason=outcome.reason or "unknown",
                volume=source.volume,
                pdf_path=str(source.pdf_path),
                sha256=source.sha256,
                paper_id=outcome.paper_id,
                parser_version=parser_version(outcome.backend),
                manifest_hash=source.inputs_hash,
                duplicate_of=outcome.duplicate_of,
            )
        outcome.seconds = seconds + (gate_seconds if parsed is not None else 0.0)
    return [outcome for outcome, _, _ in prepared]


def _check_before_parse(source: PaperSource, inboxes: list[Path] | None) -> None:
    """What refuses a paper before its parse: a problem the inbox saw, a duplicate file, a broken PDF."""
    if source.problem:
        raise IngestError(source.paper_key, "inbox", source.problem)
    if inboxes and (duplicate := duplicate_of(source, inboxes)):
        kept, why = duplicate
        raise IngestError(
            source.paper_key,
            "identity",
            f"duplicate file: identical to {kept}, which is kept because {why}",
            duplicate_of=kept,
        )
    check_integrity(source)


def _parse_job(
    source: PaperSource, chosen: str, settings: Settings
) -> tuple[ParsedPaper | None, tuple[str, ...] | None, float, int]:
    """One paper's parse, in whichever process: (the paper, None, seconds, the PDF's page count), or (None, (stage,
    reason), seconds, 0). The page count, which the gate holds the parse to, is read from the file itself, apart from
    the parser, here where the parse already imported PyMuPDF: the step's own process then never imports it."""
    started = time.perf_counter()
    try:
        parsed = parse_source(source, chosen, settings)
        return parsed, None, time.perf_counter() - started, pdf_page_count(source.pdf_path)
    except IngestError as error:
        return None, (error.stage, error.reason), time.perf_counter() - started, 0
    except Exception as error:  # a parser bug must not take the other papers down; keep the evidence
        return None, ("parse", _bug(error)), time.perf_counter() - started, 0


def _prepare_the_gate() -> None:
    from paperlake.lake.quality import prepare  # deferred: pandas, Great Expectations (seconds of one core)

    prepare()


def _check_identity(source: PaperSource, parsed: ParsedPaper, lake: Lake, claimed: dict[str, str]) -> None:
    """Refuse a paper whose id another paper (in the lake, or earlier in this batch) already has."""
    owners = [r.paper_key for r in lake.records() if r.paper_id == parsed.paper_id and r.paper_key != source.paper_key]
    if parsed.paper_id in claimed:
        owners.append(claimed[parsed.paper_id])
    if owners:
        raise IngestError(
            source.paper_key,
            "identity",
            f"paper id {parsed.paper_id} already belongs to {owners[0]} (same title and venue)",
            duplicate_of=owners[0],
        )


def _failed(outcome: PaperOutcome, error: Exception) -> None:
    if isinstance(error, IngestError):
        outcome.stage, outcome.reason, outcome.duplicate_of = error.stage, error.reason, error.duplicate_of
        return
    # a parser bug must not take the other papers down; keep the evidence
    outcome.stage = "parse"
    outcome.reason = _bug(error)


def _bug(error: Exception) -> str:
    """An unexpected error, on one line, with the last lines of where it came from (raised in this process)."""
    return f"{type(error).__name__}: {error} | {traceback.format_exc(limit=3).splitlines()[-3:]}"


@dataclass
class IngestPlan:
    to_parse: list[PaperSource]
    unchanged: list[PaperSource]
    removed: list[str]
    kept: list[str] = field(default_factory=list)  # gone from the inbox, not removed while removals are held

    def summary(self) -> str:
        kept = f", {len(self.kept)} kept (removals held)" if self.kept else ""
        return f"{len(self.to_parse)} to parse, {len(self.unchanged)} unchanged, {len(self.removed)} removed{kept}"


def needs_parse(source: PaperSource, lake: Lake, settings: Settings, backend: str | None = None) -> bool:
    """New, changed (file sha256 or manifest row), other backend or parser version → parse. A failed file is
    retried once it (or its manifest row, or the parser) changes."""
    chosen = resolve_backend(source, backend or settings.backend)
    version = parser_version(chosen)
    record = lake.record(source.paper_key)
    if record is not None:
        if (damage := lake.damage(record)) is not None:
            log.warning("%s: the lake's files are damaged (%s): parsing it again", source.paper_key, damage)
            return True
        return (record.sha256, record.backend, record.parser_version, record.manifest_hash) != (
            source.sha256,
            chosen,
            version,
            source.inputs_hash,
        )
    error = lake.error(source.paper_key)
    if error is not None:
        return (error.get("sha256"), error.get("parser_version"), error.get("manifest_hash")) != (
            source.sha256,
            version,
            source.inputs_hash,
        )
    return True


def plan_ingest(
    sources: list[PaperSource],
    lake: Lake,
    settings: Settings,
    backend: str | None = None,
    held: Collection[str] = (),
    removals_held: bool = False,
) -> IngestPlan:
    """What the parse stage must do. Besides new and changed files: a kept copy of identical files whose lake
    state says otherwise (it was the duplicate, or the other copy was ingested), and a paper refused as a duplicate
    of one that is gone. Removals come first in ``to_parse``'s caller, then the files that become duplicates, so
    a paper id is free again before its new owner is parsed. ``held``: volumes (key parts) whose manifest cannot
    be read: what the lake holds of them is neither parsed nor removed. ``removals_held`` (an inbox without a volume
    folder, :attr:`~paperlake.lake.inbox.InboxScan.removals_held`): the papers gone from the inbox are ``kept``."""
    present = {source.paper_key for source in sources}
    losers = duplicate_groups(sources)
    to_parse, unchanged = [], []
    for source in sources:
        error = lake.error(source.paper_key)
        kept_by = (error or {}).get("duplicate_of")
        recheck = (source.paper_key in losers and (error is None or kept_by != losers[source.paper_key])) or (
            source.paper_key not in losers
            and error is not None
            and error.get("stage") == "identity"
            and (kept_by not in present or lake.record(kept_by) is None)
        )
        (to_parse if recheck or needs_parse(source, lake, settings, backend) else unchanged).append(source)
    to_parse.sort(key=lambda source: (source.paper_key not in losers, source.paper_key))
    removed = sorted(
        key
        for key in lake.paper_keys() - present
        if key.partition("/")[0] not in held and key.partition("/")[2] != HELD_VOLUME_STEM
    )
    if removals_held:
        return IngestPlan(to_parse, unchanged, [], kept=removed)
    return IngestPlan(to_parse, unchanged, removed)


HELD_VOLUME_STEM = "~manifest"  # a held volume's error row: "<volume>/~manifest" (no PDF's key has a leading ~)


def record_held_volumes(lake: Lake, scan: InboxScan) -> None:
    """One ``ingest_errors`` row per held volume (stage ``manifest``, or ``inbox`` for a folder that cannot be read),
    kept while the volume is held, removed once it reads again."""
    for key in lake.paper_keys():
        volume, _, stem = key.partition("/")
        if stem == HELD_VOLUME_STEM and volume not in scan.held:
            lake.remove_paper(key)
    for volume, reason in scan.held.items():
        key = f"{volume}/{HELD_VOLUME_STEM}"
        previous = lake.error(key)
        if previous is None or previous.get("reason") != reason:
            stage = "inbox" if volume in scan.folders_held else "manifest"  # the folder, or its manifest
            lake.record_error(key, stage=stage, reason=reason, volume=volume, pdf_path=key, sha256=None)


def locate_source(paper_key: str, inboxes: list[Path], mineru_dir: Path | None) -> PaperSource | None:
    """The inbox file behind a partition key, or None if it is gone (:class:`~paperlake.lake.inbox.VolumeHeld` when
    its volume is held, its folder or its manifest unreadable: the paper is not gone)."""
    volume, _, _ = paper_key.partition("/")
    for root in inboxes:
        for volume_dir in sorted(Path(root).iterdir()):
            if key_part(volume_dir.name) != volume or volume_dir.name.startswith("."):
                continue
            if why := folder_problem(volume_dir):
                raise VolumeHeld(why)
            if not volume_dir.is_dir():
                continue
            for pdf in pdf_entries(volume_dir):
                if paper_key_for(volume_dir.name, pdf) == paper_key:
                    return source_for_pdf(pdf, mineru_dir, read_manifest(volume_dir), inboxes)
    return None


__all__ = [
    "IngestError",
    "IngestPlan",
    "PaperOutcome",
    "ingest_paper",
    "locate_source",
    "needs_parse",
    "plan_ingest",
    "resolve_backend",
    "scan_inbox",
]
