"""The Parquet lake: ``lake/<view>/<volume>/<stem>.parquet``, one file per paper per view.

Writes are atomic per file (write a temporary sibling, fsync, ``os.replace``), so a reader never sees half a file.
A paper is *published* when its record ``lake/_papers/<volume>/<stem>.json`` is written, last, after every view:
a crash between views leaves the record missing or stale, and the next ingest re-parses that paper. dbt reads the
views through globs; a zero-row contract file per view (``lake/<view>/_contract/schema.parquet``) keeps the globs
and column types valid even before the first paper arrives.

A paper that failed has no view files, only ``lake/ingest_errors/<volume>/<stem>.parquet``.

Removal runs in the opposite order (views first, the record last), so a process killed half-way leaves a record
and the next ingest finishes the removal. View files without a record (a publish or a removal cut short) count as
a known paper too (:meth:`Lake.paper_keys`), so they are re-parsed or removed, never left for dbt's globs.
:meth:`Lake.digest` names the lake's current state: the warehouse records the digest it was built from.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from paperlake.lake.inbox import shown
from paperlake.lake.views import ENRICHMENT_SCHEMA, ENRICHMENT_VIEW, VIEW_SCHEMAS, VIEWS, ParsedPaper, to_arrow
from paperlake.runtime.failpoints import fault_point
from paperlake.runtime.healing import set_aside

ERROR_VIEW = "ingest_errors"
ERROR_SCHEMA = pa.schema(
    [
        ("paper_key", pa.string()),
        ("paper_id", pa.string()),
        ("volume", pa.string()),
        ("file_name", pa.string()),
        ("pdf_path", pa.string()),
        ("sha256", pa.string()),
        ("stage", pa.string()),
        ("reason", pa.string()),
        ("parser_version", pa.string()),
        ("manifest_hash", pa.string()),
        ("occurred_at", pa.timestamp("us", tz="UTC")),
        ("duplicate_of", pa.string()),
    ]
)
RECORDS_DIR = "_papers"
CONTRACT_DIR = "_contract"


@dataclass(frozen=True)
class PaperRecord:
    """What the lake holds for one paper: enough to decide whether it must be parsed again."""

    paper_key: str
    paper_id: str
    sha256: str
    backend: str
    parser_version: str
    row_counts: dict[str, int]
    published_at: str
    manifest_hash: str = ""
    # view → [size, mtime_ns, sha256] of its file as published: how a damaged file is told (Lake.damage)
    files: dict[str, list] = field(default_factory=dict)


def atomic_write_bytes(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():  # a directory where the file belongs: the file wins
        shutil.rmtree(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _drop(path: Path) -> None:
    """A damaged file (or a directory where a file belongs) out of the way."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def write_table_atomic(table: pa.Table, path: Path) -> None:
    atomic_write_bytes(path, lambda handle: pq.write_table(table, handle, compression="zstd"))


def _digest_lines(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16]


def files_under(base: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(path relative to ``base`` with "/", stat) of every file below ``base`` whose name does not start with a dot,
    by ``os.scandir`` (a lake of 2,000 papers has ~25k files, and ``Path.rglob`` with a stat each made every digest
    grow with them). A file replaced away while listed is skipped: the lake changed, and so does the digest."""
    pending = [(str(base), "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as listing:
            for entry in listing:
                if entry.is_dir():
                    pending.append((entry.path, f"{prefix}{entry.name}/"))
                elif not entry.name.startswith("."):
                    try:
                        stat = entry.stat()
                    except FileNotFoundError:
                        continue
                    if entry.is_file():
                        yield f"{prefix}{entry.name}", stat


class Lake:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    # -- layout ---------------------------------------------------------------------------------------------------
    def view_path(self, view: str, paper_key: str) -> Path:
        return self.root / view / f"{paper_key}.parquet"

    def record_path(self, paper_key: str) -> Path:
        return self.root / RECORDS_DIR / f"{paper_key}.json"

    def ensure_contract(self) -> None:
        """Zero-row files fixing every view's columns, so dbt's globs always match and types never drift."""
        for view, schema in [*VIEW_SCHEMAS.items(), (ERROR_VIEW, ERROR_SCHEMA), (ENRICHMENT_VIEW, ENRICHMENT_SCHEMA)]:
            path = self.root / view / CONTRACT_DIR / "schema.parquet"
            try:
                current = pq.read_schema(path)
            except FileNotFoundError:
                current = None
            except (OSError, pa.ArrowException) as error:  # damaged, or not a file: set aside, written again
                current = None
                with contextlib.suppress(FileNotFoundError):  # another writer set it aside first
                    set_aside(path, "a directory, not a file" if path.is_dir() else f"{type(error).__name__}: {error}")
            if current != schema:
                write_table_atomic(schema.empty_table(), path)

    # -- writes ---------------------------------------------------------------------------------------------------
    def publish(self, parsed: ParsedPaper, sha256: str, parser_version: str, manifest_hash: str = "") -> PaperRecord:
        """Write every view of the paper, then its record; clear a previous error of this paper."""
        self.ensure_contract()
        tables = {view: to_arrow(view, parsed.rows(view)) for view in VIEWS}
        files = {}
        for view, table in tables.items():
            path = self.view_path(view, parsed.paper_key)
            write_table_atomic(table, path)
            stat = path.stat()
            files[view] = [stat.st_size, stat.st_mtime_ns, _file_sha256(path)]
            fault_point("lake.view_written")
        record = PaperRecord(
            paper_key=parsed.paper_key,
            paper_id=parsed.paper_id,
            sha256=sha256,
            backend=parsed.backend,
            parser_version=parser_version,
            row_counts={view: table.num_rows for view, table in tables.items()},
            published_at=datetime.now(timezone.utc).isoformat(),
            manifest_hash=manifest_hash,
            files=files,
        )
        payload = json.dumps(asdict(record), indent=1).encode()
        atomic_write_bytes(self.record_path(parsed.paper_key), lambda handle: handle.write(payload))
        self.view_path(ERROR_VIEW, parsed.paper_key).unlink(missing_ok=True)
        return record

    def record_error(
        self,
        paper_key: str,
        *,
        stage: str,
        reason: str,
        volume: str,
        pdf_path: str,
        sha256: str | None,
        paper_id: str | None = None,
        parser_version: str | None = None,
        manifest_hash: str | None = None,
        duplicate_of: str | None = None,
    ) -> None:
        """The paper's failure as data. Its views are removed: a failed paper has no partial rows."""
        self.remove_views(paper_key)
        row = {
            "paper_key": paper_key,
            "paper_id": paper_id,
            "volume": shown(volume),  # a name that is not UTF-8 is why the paper failed: its row still writes
            "file_name": shown(Path(pdf_path).name),
            "pdf_path": shown(pdf_path),
            "sha256": sha256,
            "stage": stage,
            "reason": shown(reason),
            "parser_version": parser_version,
            "manifest_hash": manifest_hash,
            "occurred_at": datetime.now(timezone.utc),
            "duplicate_of": duplicate_of,
        }
        self.ensure_contract()
        write_table_atomic(pa.Table.from_pylist([row], schema=ERROR_SCHEMA), self.view_path(ERROR_VIEW, paper_key))

    def remove_views(self, paper_key: str) -> None:
        """The views first, the record last: a kill in between leaves a record, and the key stays known."""
        for view in VIEWS:
            self.view_path(view, paper_key).unlink(missing_ok=True)
            fault_point("lake.view_removed")
        self.record_path(paper_key).unlink(missing_ok=True)

    def remove_paper(self, paper_key: str) -> None:
        """Everything the lake holds for a paper, its error included (the file left the inbox)."""
        self.remove_views(paper_key)
        self.view_path(ERROR_VIEW, paper_key).unlink(missing_ok=True)
        self.view_path(ENRICHMENT_VIEW, paper_key).unlink(missing_ok=True)  # its LLM summaries go with it

    # -- reads ----------------------------------------------------------------------------------------------------
    def record(self, paper_key: str) -> PaperRecord | None:
        path = self.record_path(paper_key)
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
            record = PaperRecord(**data)
        except (OSError, ValueError, TypeError):  # damaged: the paper is parsed again, which writes it anew
            return None
        if not all(self.view_path(view, paper_key).exists() for view in VIEWS):
            return None
        return record

    def error(self, paper_key: str) -> dict[str, Any] | None:
        """The paper's error row; a damaged error file is dropped (the paper is then parsed again, which writes its
        row anew if it still fails)."""
        path = self.view_path(ERROR_VIEW, paper_key)
        if not os.path.lexists(path):
            return None
        try:
            rows = pq.read_table(path).to_pylist()
        except (OSError, pa.ArrowException):
            _drop(path)
            return None
        return rows[0] if rows else None

    def damage(self, record: PaperRecord) -> str | None:
        """Why a published paper's view files are not the ones its record describes (truncated, overwritten,
        replaced), or None. A file whose size and mtime are the recorded ones is taken as is; another mtime is
        checked by its sha256 (a copied home keeps its files). A record from before files were recorded is
        checked by each file's row count."""
        for view in VIEWS:
            path = self.view_path(view, record.paper_key)
            try:
                stat = path.stat()
                if not path.is_file():
                    return f"{view}: not a file"
                if view in record.files:
                    size, mtime_ns, digest = record.files[view]
                    if stat.st_size != size:
                        return f"{view}: {stat.st_size} bytes, published {size}"
                    if stat.st_mtime_ns != mtime_ns and _file_sha256(path) != digest:
                        return f"{view}: the content differs from what was published"
                elif pq.read_metadata(path).num_rows != record.row_counts.get(view):
                    return f"{view}: the row count differs from the record's"
            except (OSError, pa.ArrowException, ValueError) as error:
                return f"{view}: {type(error).__name__}: {error}"
        return None

    def _files(self, folder: str, suffix: str) -> Iterator[tuple[str, Path]]:
        """(paper key, path) of the lake's files in one folder; contract files and temporary siblings skipped."""
        base = self.root / folder
        if not base.exists():
            return
        for path in base.rglob(f"*{suffix}"):
            if CONTRACT_DIR in path.parts or path.name.startswith("."):
                continue
            yield path.relative_to(base).with_suffix("").as_posix(), path

    def paper_keys(self) -> set[str]:
        """Keys with a record, an error or any view file: everything the lake knows about."""
        keys = {key for key, _ in self._files(RECORDS_DIR, ".json")}
        for folder in (ERROR_VIEW, *VIEWS):
            keys.update(key for key, _ in self._files(folder, ".parquet"))
        return keys

    def digest(self) -> str:
        """The lake's state as dbt reads it: every view, error, record and contract file (path, size, mtime).
        Every write is an atomic replace, so any change of content changes this digest."""
        entries = [entry for entries in self._file_entries().values() for entry in entries]
        return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()[:16]

    def paper_digests(self) -> tuple[str, dict[str, str]]:
        """(the digest of the files no paper owns: the contracts; each paper key's digest over its files in every
        folder dbt reads), so a build can tell which papers changed since another. Same files as :meth:`digest`."""
        by_key = self._file_entries()
        shared = by_key.pop(None, [])
        return _digest_lines(shared), {key: _digest_lines(entries) for key, entries in by_key.items()}

    def _file_entries(self) -> dict[str | None, list[str]]:
        """paper key (None for contract files) → "path, size, mtime" of each of its files dbt reads."""
        entries: dict[str | None, list[str]] = {}
        for folder in (RECORDS_DIR, ERROR_VIEW, "enrichment", *VIEWS):
            base = self.root / folder
            if not base.exists():
                continue
            for relative, stat in files_under(base):
                key = None if CONTRACT_DIR in relative.split("/") else os.path.splitext(relative)[0]
                entries.setdefault(key, []).append(f"{folder}/{relative}\t{stat.st_size}\t{stat.st_mtime_ns}")
        return entries

    def records(self) -> Iterator[PaperRecord]:
        for key in sorted(self.paper_keys()):
            record = self.record(key)
            if record is not None:
                yield record

    def read_view(self, view: str, paper_key: str) -> pa.Table:
        return pq.read_table(self.view_path(view, paper_key))

    def glob(self, view: str) -> str:
        """The glob dbt reads for a view (contract file included)."""
        return str(self.root / view / "**" / "*.parquet")

    def wipe(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
