"""Reading the warehouse: read-only connections that never meet a build's lock (builds write a side file), the
paper filter the readers share, and the papers a person means by an id, a key or words of a title."""

from __future__ import annotations

import re
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import duckdb

from paperlake.runtime.healing import StoreUnreadable


def file_identity(warehouse: Path) -> tuple | None:
    """What changes whenever the warehouse's content may have: inode, size and modification time of the file and of
    its write-ahead log (a build swaps a new file in; a write in place changes one of the two). None: no file."""
    identity = []
    for path in (warehouse, warehouse.with_name(warehouse.name + ".wal")):
        try:
            stat = path.stat()
        except OSError:
            identity.append(None)
            continue
        identity.append((stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return None if identity[0] is None else tuple(identity)


@contextmanager
def connect_read_only(warehouse: Path, *, sandboxed: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    if not warehouse.exists():
        raise FileNotFoundError(f"no warehouse at {warehouse}: run `paperlake ingest` first")
    config = {"access_mode": "READ_ONLY"}
    if sandboxed:
        config |= {"enable_external_access": "false", "lock_configuration": "true"}
    try:
        con = duckdb.connect(str(warehouse), read_only=True, config=config)
    except duckdb.Error as error:
        raise StoreUnreadable("warehouse", warehouse, f"{type(error).__name__}: {error}") from None
    except IsADirectoryError:
        raise StoreUnreadable("warehouse", warehouse, "a directory, not a file") from None
    try:
        yield con
    finally:
        con.close()


def paper_filter(pdf_column: str, papers: Sequence[str] | None) -> tuple[str, list]:
    """(where clause, parameters) keeping the rows of ``papers`` (all rows for None). Paper ids that are UUIDs in
    their canonical form, as the warehouse's are, go in as literals: DuckDB then skips the row groups whose min/max
    of the column exclude them (a paper's rows are appended together), which a cast or a subquery hides from it, so
    a paper's rows of a large warehouse are read several times faster. Other ids are compared as text."""
    if papers is None:
        return "", []
    papers = list(papers)
    try:
        canonical = papers and all(str(uuid.UUID(paper)) == paper for paper in papers)
    except (ValueError, TypeError, AttributeError):
        canonical = False
    if canonical:
        return f"where {pdf_column} in ({', '.join(repr(paper) for paper in papers)})", []
    return f"where cast({pdf_column} as varchar) in (select unnest(?::varchar[]))", [papers]


@dataclass(frozen=True)
class PaperMatch:
    paper_id: str
    paper_key: str
    title: str


def find_papers(con: duckdb.DuckDBPyConnection, text: str) -> list[PaperMatch]:
    """The papers a person means by ``text``: its paper id, its key as the Dagster UI shows it
    (``volume/file-stem``), or words of its title (every word, in any order, any case)."""
    text = text.strip()
    query = "select paper_id::varchar, paper_key, title from metadata where "
    try:
        rows = con.execute(query + "paper_id = ?::uuid", [str(uuid.UUID(text))]).fetchall()
    except ValueError:
        rows = []
    if not rows:
        rows = con.execute(query + "paper_key = ? or paper_key = ?", [text, text.removesuffix(".pdf")]).fetchall()
    if not rows:
        words = [word for word in re.split(r"\W+", text.lower()) if word]
        if words:
            where = " and ".join(["lower(title) like ?"] * len(words))
            rows = con.execute(query + where + " order by title", [f"%{w}%" for w in words]).fetchall()
    return [PaperMatch(*row) for row in rows]
