"""Warehouse cells → vector entities: one entity per non-empty encodable (table, column, row).

The warehouse tables follow NeuSym-RAG's multi-view schema (see REFERENCE.md). Which columns are encodable comes
from the warehouse catalogue (``schemas.warehouse.encodable_columns()``) and is passed in; ``DEFAULT_ENCODABLE``
mirrors REFERENCE.md until that catalogue exists.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Iterable, Sequence

import duckdb

from paperlake.warehouse.read import paper_filter
from schemas.warehouse import encodable_columns

log = logging.getLogger(__name__)

Encodable = tuple[str, str, str]  # (table, column, kind) with kind "text" | "image"

DEFAULT_ENCODABLE: tuple[Encodable, ...] = (
    ("metadata", "title", "text"),
    ("metadata", "abstract", "text"),
    ("metadata", "bibtex", "text"),
    ("metadata", "front_matter", "text"),
    ("metadata", "tldr", "text"),
    ("pages", "page_content", "text"),
    ("pages", "page_summary", "text"),
    ("sections", "section_title", "text"),
    ("sections", "section_content", "text"),
    ("sections", "section_summary", "text"),
    ("chunks", "text_content", "text"),
    ("tables", "table_caption", "text"),
    ("tables", "table_content", "text"),
    ("tables", "table_summary", "text"),
    ("images", "image_caption", "text"),
    ("images", "image_text", "text"),
    ("images", "image_summary", "text"),
    ("equations", "equation_content", "text"),
    ("equations", "equation_passage", "text"),
    ("reference", "reference_content", "text"),
    ("reference", "citing_context", "text"),
    ("images", "bounding_box", "image"),
    ("tables", "bounding_box", "image"),
    ("table_rows", "row_text", "text"),
    ("table_columns", "column_text", "text"),
)

# The row id of each warehouse table (the entity's `primary_key`).
PRIMARY_KEYS: dict[str, str] = {
    "metadata": "paper_id",
    "pages": "page_id",
    "sections": "section_id",
    "chunks": "chunk_id",
    "tables": "table_id",
    "images": "image_id",
    "equations": "equation_id",
    "reference": "reference_id",
    "table_rows": "row_id",
    "table_columns": "column_id",
}


def default_encodable() -> list[Encodable]:
    """The catalogue's encodable columns, or REFERENCE.md's list when the catalogue cannot be read."""
    try:
        # per-paper tables only: formula descriptions span papers and are embedded by the formula stage
        columns = [tuple(c) for c in encodable_columns() if c[0] in PRIMARY_KEYS]
    except Exception as error:  # the catalogue reads the dbt model YAMLs; a broken checkout must not stop search
        log.warning("warehouse catalogue unavailable (%s); using REFERENCE.md's encodable list", error)
        return list(DEFAULT_ENCODABLE)
    return columns or list(DEFAULT_ENCODABLE)


class WarehouseSchemaError(ValueError):
    """The warehouse lacks a table or column that the encodable list names."""


@dataclass(frozen=True)
class Cell:
    """One encodable warehouse cell, ready to become a vector entity."""

    pdf_id: str
    page_number: int
    table_name: str
    column_name: str
    primary_key: str
    kind: str = "text"
    text: str = ""
    bbox: tuple[float, ...] | None = None
    pdf_path: str | None = None
    pdf_sha256: str | None = None
    note: str | None = None
    # the texts whose windows make the dense vector, when not the cell's own text: the chunks a page or section
    # holds (their windows are encoded for the chunks already, so every token is encoded once)
    parts: tuple[str, ...] | None = None
    # the dense vector reads the first ``head_tokens`` tokens only (HEAD_VIEWS)
    head_tokens: int | None = None
    # where the text lies in a chunk's (the chunk's text, start, end characters): the dense vector is then the mean of
    # its tokens' states in the chunk's encoding (LATE_VIEWS), so its tokens are encoded once, for the chunk
    within: tuple[str, int, int] | None = None
    # per text of ``parts``, where it lies in a chunk's, or None (LINE_VIEWS): each line found in a chunk takes its
    # tokens' states from the chunk's encoding, a line found in none its own windows
    hosts: tuple[tuple[str, int, int] | None, ...] | None = None

    @cached_property  # read for every cell by each collection's sync and its record
    def entity_id(self) -> str:
        return entity_id(self.table_name, self.column_name, self.primary_key)

    @property
    def view(self) -> str:
        return f"{self.table_name}.{self.column_name}"

    @property
    def content_key(self) -> str:
        """What the vector is computed from: the text, or the rendered region (file, page, box)."""
        if self.kind == "text":
            return self.text
        box = ",".join(f"{v:g}" for v in self.bbox or ())
        return f"pdf:{self.pdf_sha256 or self.pdf_path}|page:{self.page_number}|bbox:{box}"

    @cached_property  # hashes the parts and hosts; read by each dense collection's sync and its record
    def pooled_key(self) -> str:
        """What a pooled dense vector is computed from: the text, and the parts when they stand in for it, or the
        length of the head it reads."""
        key = self.content_key + (f"\x1fhead:{self.head_tokens}" if self.head_tokens else "")
        if self.within is not None:
            host, start, end = self.within
            key += f"\x1fwithin:{hashlib.sha256(host.encode('utf-8')).hexdigest()}:{start}:{end}"
        if self.hosts is not None:
            located = "|".join(
                f"{hashlib.sha256(host[0].encode('utf-8')).hexdigest()}:{host[1]}:{host[2]}" if host else "-"
                for host in self.hosts
            )
            key += f"\x1fhosts:{hashlib.sha256(located.encode('utf-8')).hexdigest()}"
        if not self.parts:
            return key
        return f"{key}\x1fparts:{hashlib.sha256(chr(31).join(self.parts).encode('utf-8')).hexdigest()}"


def entity_id(table: str, column: str, row_id: str) -> str:
    """Deterministic entity primary key, shared by every collection."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{table}.{column}.{row_id}"))


def truncate_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes without splitting a character."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text, False
    return encoded[:max_bytes].decode("utf-8", errors="ignore"), True


def collect_cells(
    warehouse_con: duckdb.DuckDBPyConnection,
    encodable: Iterable[Encodable] | None = None,
    paper_ids: Sequence[str] | None = None,
    *,
    max_text_bytes: int = 65535,
    pdf_root: str | Path | None = None,
    pooling: int | None = None,
) -> list[Cell]:
    """Every non-empty encodable cell of the warehouse (or of ``paper_ids``), in a stable order.

    ``page_number`` is 1-based: elements take their page through ``ref_page_id``; metadata rows are page 1; sections
    take the first of ``page_numbers``; a missing page falls back to 1. Image cells (a ``bounding_box`` column) carry
    the box and the paper's PDF path, resolved against ``pdf_root`` when relative. Panel rows of a split figure
    (``images.parent_image_id`` set) give image cells only: their text repeats the whole figure's.
    """
    by_table: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in encodable if encodable is not None else default_encodable():
        if kind not in ("text", "image"):
            raise ValueError(f"encodable {table}.{column}: kind must be 'text' or 'image', got {kind!r}")
        by_table.setdefault(table, []).append((column, kind))

    columns_of = _warehouse_columns(warehouse_con)
    papers = [str(p) for p in paper_ids] if paper_ids is not None else None
    pdfs = _paper_pdfs(warehouse_con, columns_of, papers, pdf_root) if _wants_images(by_table) else {}

    cells: list[Cell] = []
    for table in sorted(by_table):
        wanted = by_table[table]
        if table not in columns_of:
            raise WarehouseSchemaError(f"warehouse has no table {table!r} (encodable: {[c for c, _ in wanted]})")
        missing = [c for c, _ in wanted if c not in columns_of[table]]
        if missing:
            raise WarehouseSchemaError(f"warehouse table {table!r} has no column(s) {missing}")
        cells.extend(_table_cells(warehouse_con, table, wanted, papers, pdfs, max_text_bytes, columns_of))
    if (pooling or POOLING_VERSION) >= 2:
        cells = [
            replace(c, head_tokens=HEAD_VIEWS[(c.table_name, c.column_name)])
            if (c.table_name, c.column_name) in HEAD_VIEWS and c.kind == "text"
            else c
            for c in cells
        ]
    return _with_chunk_parts(warehouse_con, cells, papers, columns_of, pooling or POOLING_VERSION)


# The views whose dense vector is pooled from texts other than their own: pages and sections from the chunks they hold
# (encoded for the chunks), a table's content from its outline (caption, column headers, row labels: _table_parts).
POOLED_VIEWS = {("pages", "page_content"), ("sections", "section_content"), ("tables", "table_content")}
# Views whose dense vector reads the head of the text only, in tokens (for a dense collection configured to hold the
# column lines; the shipped ones are not: schemas/collections.yaml). A column line is its table's caption head and
# its column's header path, then one "row label: value" per row; every one of those values is in a row line too,
# encoded there, so the head is what the column line adds. On the 44 table questions the 64-token head scored as the
# whole line (benchmarks/table_questions.py), and it costs 41k tokens on the sample instead of 167k.
HEAD_VIEWS = {("table_columns", "column_text"): 64}
# Bump when which texts a pooled cell is made of changes (the views above, or what their parts are): pooled
# collections' fingerprints carry it from 2 on, so every paper's pooled vectors are rebuilt (from the embedding cache,
# which holds every window already: only new windows are encoded). 1 (pages, sections and table contents pooled from
# whole chunks and row lines) is written nowhere, so stores built before the version existed stay valid. 2: column
# lines read by their head (HEAD_VIEWS). Tried and not kept: a chunk pooled from its own prose and, for its pieces
# that other cells hold (reference entries, captions, equations, tables), those cells' vectors, so that no token is
# encoded twice (-35% tokens): the pool of many separately encoded pieces is a blander vector that crowds other
# chunks out of the top five (offline probes, per probe against this scheme: classic_rag 14 better / 17 worse,
# two_stage_neu_rag 14 / 26; reference-list chunks alone: 5 / 10 and 8 / 11). Also tried and not kept: a row line's
# vector pooled from its table's caption head (the first line, repeated by every row of the table, so encoded once
# per table) and the rest of the line: 603k -> 554k tokens and 6% less sync time on the sample, chunk and page
# retrieval unchanged, but the table views moved within noise and not upwards (same run, MinerU build): with the
# table content pooling the head once, recall@5 on the 44 table questions fell for recap .955 -> .886, neusym_rag
# and two_stage_hybrid_rag .909 -> .864 (hdrag unchanged .977); with the head once per row there, recap .932,
# the other two .932, hdrag .977, but the classic_rag probe gate lost 4 of emnlp2024's 224 answers at 5.
# 3: the dense collections hold no table row or column lines (schemas/collections.yaml, ``without_views``: BM25
# finds them as well as their dense vectors did on the 44 table questions, and they were 206k of the sample's 603k
# tokens), so a table's content is pooled from its outline (caption, column headers, row labels) instead of its row
# lines. Tried on the way: the heads of its column lines (recap recall@5 on the table questions .955 -> .864; with
# its row labels added, .886).
# 4: reference entries and display equations (LATE_VIEWS) take their dense vector from the chunk that holds their
# text, late chunked, instead of encoding it again.
# 5: citing sentences and equation passages read line by line inside the chunks that hold them (LINE_VIEWS).
POOLING_VERSION = 5
# The views whose text lies inside a chunk's (a reference list is chunked like any section, a display equation's
# LaTeX is in its paragraph's chunk): their dense vector is the mean of their own tokens' states in the encoding of
# the chunk's window (late chunking, encoders.pooled_windows), so their tokens are encoded once, for the chunk; 75k
# of the sample's 432k tokens. A cell found in no chunk encodes its own text. Measured on the offline probes of the
# sample (benchmarks/late_views.py: the evidence cell's rank among its paper's cells of the view, dense, exhaustive),
# own vector -> late, hit@1 / hit@5, MinerU and PyMuPDF homes: reference entries .918/.973 -> .849/.945 and
# .935/.974 -> .883/.961 (BM25, which every search of the view can also take, 1.000/1.000 on both); equations
# .391/.783 -> .391/.826 and .400/.800 -> .400/.733 (23 and 15 probes). Not figure and table captions: there the
# late vector lost more at 1 (figure captions .766 -> .660, .809 -> .745), for 11k tokens.
LATE_VIEWS = {("reference", "reference_content"), ("equations", "equation_content")}
# Views whose text is lines taken from the paper's prose, one per line (a reference's citing sentences; an equation's
# "Equation (n)", the sentences around it and its formula): their dense vector is the token-weighted mean of each
# line's tokens' states, read inside the chunk that holds the line (as LATE_VIEWS), or from the line's own windows
# when no chunk does. On the sample every citing sentence and 90% of the equation passages' characters lie in a
# chunk: their 635 + 292 windows (10.7 s + 10.6 s of MiniLM on 2 cores) are no longer encoded, of an ingest whose
# vector stage those two views had made 26 s longer (issue 51's ingest-time bar).
LINE_VIEWS = {("reference", "citing_context"), ("equations", "equation_passage")}


def _with_chunk_parts(
    con: duckdb.DuckDBPyConnection,
    cells: list[Cell],
    papers: list[str] | None,
    columns_of: dict[str, set[str]],
    version: int = POOLING_VERSION,
) -> list[Cell]:
    """Pages and sections get the texts of their chunks as ``parts``: a page holds the chunks that start on it, a
    section the chunks under its title (on its pages, when a paper repeats a title); a table's content gets its
    outline (:func:`_table_parts`). A reference entry or equation (LATE_VIEWS) gets the chunk that holds its text as
    ``within``; a cell of LINE_VIEWS its lines as ``parts`` and, per line, the chunk that holds it as ``hosts``. A
    cell without any keeps its own text."""
    late, lined = version >= 4, version >= 5
    wanted = [
        c
        for c in cells
        if (c.table_name, c.column_name) in POOLED_VIEWS
        or (late and c.kind == "text" and (c.table_name, c.column_name) in LATE_VIEWS)
        or (lined and c.kind == "text" and (c.table_name, c.column_name) in LINE_VIEWS)
    ]
    needed = {"ref_paper_id", "ref_page_id", "section_title", "text_content", "ordinal", "page_number"}
    if not wanted or not needed <= columns_of.get("chunks", set()):
        return cells
    lines = _table_parts(con, papers, columns_of, version) if any(c.table_name == "tables" for c in wanted) else {}
    where, params = paper_filter("t.ref_paper_id", papers)
    rows = con.execute(
        f"select cast(t.ref_paper_id as varchar), cast(t.ref_page_id as varchar), t.section_title, "
        f"t.page_number, t.text_content from chunks t {where} order by 1, t.ordinal",
        params,
    ).fetchall()
    by_page: dict[str, list[str]] = {}
    by_title: dict[tuple[str, str], list[tuple[int, str]]] = {}
    hosts = ChunkHosts()
    for paper, page_id, title, page_number, text in rows:
        if not text or not text.strip():
            continue
        hosts.add(paper, text)
        by_page.setdefault(page_id, []).append(text)
        by_title.setdefault((paper, title or ""), []).append((page_number, text))
    sections = {}
    if any(c.table_name == "sections" for c in wanted) and "page_numbers" in columns_of.get("sections", set()):
        where, params = paper_filter("t.ref_paper_id", papers)
        for section_id, paper, title, pages in con.execute(
            f"select cast(t.section_id as varchar), cast(t.ref_paper_id as varchar), t.section_title, "
            f"t.page_numbers from sections t {where}",
            params,
        ).fetchall():
            sections[section_id] = (paper, title or "", set(pages or []))
    titles = Counter((paper, title) for paper, title, _ in sections.values())
    out = []
    for cell in cells:
        parts: list[str] | None = None
        if late and cell.kind == "text" and (cell.table_name, cell.column_name) in LATE_VIEWS:
            out.append(replace(cell, within=hosts.locate(cell.pdf_id, cell.text)))
            continue
        if lined and cell.kind == "text" and (cell.table_name, cell.column_name) in LINE_VIEWS:
            text_lines = tuple(line for line in cell.text.split("\n") if line.strip())
            located = tuple(hosts.locate(cell.pdf_id, line) for line in text_lines)
            out.append(replace(cell, parts=text_lines, hosts=located) if any(located) else cell)
            continue
        if (cell.table_name, cell.column_name) == ("pages", "page_content"):
            parts = by_page.get(cell.primary_key)
        elif (cell.table_name, cell.column_name) == ("tables", "table_content"):
            parts = lines.get(cell.primary_key)
        elif (cell.table_name, cell.column_name) == ("sections", "section_content") and cell.primary_key in sections:
            paper, title, pages = sections[cell.primary_key]
            chunks = by_title.get((paper, title), [])
            if titles[(paper, title)] > 1:
                chunks = [(p, t) for p, t in chunks if p in pages]
            parts = [t for _, t in chunks]
        out.append(replace(cell, parts=tuple(parts)) if parts else cell)
    return out


class ChunkHosts:
    """The chunks of each paper, searchable for a cell's text with runs of white space read as one space."""

    def __init__(self) -> None:
        self._texts: dict[str, list[str]] = {}
        self._flat: dict[str, list[tuple[str, str, list[int]]]] = {}

    def add(self, paper: str, text: str) -> None:
        self._texts.setdefault(paper, []).append(text)

    def locate(self, paper: str, text: str) -> tuple[str, int, int] | None:
        """(chunk text, start, end) of the first of the paper's chunks that holds ``text``, else None."""
        needle = " ".join(text.split())
        if not needle:
            return None
        if paper not in self._flat:
            self._flat[paper] = [(host, *_flatten(host)) for host in self._texts.get(paper, [])]
        for host, flat, index in self._flat[paper]:
            at = flat.find(needle)
            if at >= 0:
                return host, index[at], index[at + len(needle) - 1] + 1
        return None


def _flatten(text: str) -> tuple[str, list[int]]:
    """``text`` with every run of white space one space (none leading), and each character's offset in ``text``."""
    chars: list[str] = []
    index: list[int] = []
    space = True
    for i, char in enumerate(text):
        if char.isspace():
            if not space:
                chars.append(" ")
                index.append(i)
            space = True
        else:
            chars.append(char)
            index.append(i)
            space = False
    return "".join(chars), index


def _table_parts(
    con: duckdb.DuckDBPyConnection, papers: list[str] | None, columns_of: dict[str, set[str]], version: int
) -> dict[str, list[str]]:
    """Per table id, the texts its content's dense vector is pooled from. From ``version`` 3 one outline: its
    caption, its column headers and its row labels (a table's HTML is mostly markup, and its row and column lines,
    which repeat the caption and headers in every line, have BM25 vectors only); before, its row lines."""
    where, params = paper_filter("t.ref_paper_id", papers)
    if version < 3:
        if not {"ref_table_id", "row_text", "row_index"} <= columns_of.get("table_rows", set()):
            return {}
        lines: dict[str, list[str]] = {}
        for table_id, text in con.execute(
            f"select cast(t.ref_table_id as varchar), t.row_text from table_rows t {where} order by 1, t.row_index",
            params,
        ).fetchall():
            if text and text.strip():
                lines.setdefault(table_id, []).append(text)
        return lines
    headers: dict[str, dict[str, list[str]]] = {}
    for view, label, index in (
        ("table_columns", "column_header", "col_index"),
        ("table_rows", "row_header", "row_index"),
    ):
        if not {"ref_table_id", label, index} <= columns_of.get(view, set()):
            continue
        for table_id, text in con.execute(
            f"select cast(t.ref_table_id as varchar), t.{label} from {view} t {where} order by 1, t.{index}",
            params,
        ).fetchall():
            if text and text.strip():
                headers.setdefault(table_id, {}).setdefault(view, []).append(" ".join(text.split()))
    if not headers or "table_caption" not in columns_of.get("tables", set()):
        return {}
    where, params = paper_filter("t.ref_paper_id", papers)
    outlines = {}
    for table_id, caption in con.execute(
        f"select cast(t.table_id as varchar), t.table_caption from tables t {where}", params
    ).fetchall():
        found = headers.get(table_id)
        if not found:
            continue
        text = [" ".join((caption or "").split())]
        text.append("Columns: " + "; ".join(found.get("table_columns", [])))
        text.append("Rows: " + "; ".join(found.get("table_rows", [])))
        outlines[table_id] = ["\n".join(t for t in text if t)]
    return outlines


def _wants_images(by_table: dict[str, list[tuple[str, str]]]) -> bool:
    return any(kind == "image" for columns in by_table.values() for _, kind in columns)


def _warehouse_columns(con: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    rows = con.execute(
        "select table_name, column_name from information_schema.columns where table_schema = current_schema()"
    ).fetchall()
    columns: dict[str, set[str]] = {}
    for table, column in rows:
        columns.setdefault(table, set()).add(column)
    return columns


def _page_expression(table: str, columns: set[str]) -> tuple[str, str]:
    """(select expression, join clause) giving the 1-based page number of a row of ``table``."""
    if table == "metadata":
        return "1", ""
    if table == "pages":
        return "coalesce(t.page_number, 1)", ""
    if "page_numbers" in columns:
        return "coalesce(t.page_numbers[1], 1)", ""
    if "ref_page_id" in columns:
        return "coalesce(p.page_number, 1)", 'left join "pages" p on p.page_id = t.ref_page_id'
    return "1", ""


def _table_cells(
    con: duckdb.DuckDBPyConnection,
    table: str,
    wanted: list[tuple[str, str]],
    papers: list[str] | None,
    pdfs: dict[str, tuple[str | None, str | None]],
    max_text_bytes: int,
    columns_of: dict[str, set[str]],
) -> list[Cell]:
    columns = columns_of[table]
    key = PRIMARY_KEYS.get(table)
    if key is None or key not in columns:
        raise WarehouseSchemaError(f"warehouse table {table!r}: no primary key column {key!r}")
    pdf_column = "t.paper_id" if table == "metadata" else "t.ref_paper_id"
    page_sql, join = _page_expression(table, columns)
    where, params = paper_filter(pdf_column, papers)
    selected = ", ".join(f't."{column}"' for column, _ in wanted)
    # A figure split into panels has one row per panel beside the whole figure's row, repeating its caption: the
    # panels' text is the figure's, encoded once on the whole figure; their regions are encoded as images.
    panel_sql = "t.parent_image_id is not null" if "parent_image_id" in columns else "false"
    sql = (
        f'select cast({pdf_column} as varchar), {page_sql}, cast(t."{key}" as varchar), {panel_sql}, {selected} '
        f'from "{table}" t {join} {where} order by 1, 3'
    )
    cells = []
    for pdf_id, page_number, row_id, is_panel, *values in con.execute(sql, params).fetchall():
        for (column, kind), value in zip(wanted, values):
            if is_panel and kind == "text":
                continue
            cell = _make_cell(pdf_id, int(page_number), table, column, row_id, kind, value, pdfs, max_text_bytes)
            if cell is not None:
                cells.append(cell)
    return cells


def _make_cell(
    pdf_id: str,
    page_number: int,
    table: str,
    column: str,
    row_id: str,
    kind: str,
    value: object,
    pdfs: dict[str, tuple[str | None, str | None]],
    max_text_bytes: int,
) -> Cell | None:
    if kind == "image":
        box = tuple(float(v) for v in value) if value is not None else ()
        if len(box) != 4 or box[2] <= 0 or box[3] <= 0:
            return None
        pdf_path, pdf_sha = pdfs.get(pdf_id, (None, None))
        return Cell(
            pdf_id, page_number, table, column, row_id, kind="image", bbox=box, pdf_path=pdf_path, pdf_sha256=pdf_sha
        )
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    if not text.strip():
        return None
    text, truncated = truncate_utf8(text, max_text_bytes)
    note = None
    if truncated:
        note = f"text truncated to {max_text_bytes} UTF-8 bytes (was {len(str(value).encode('utf-8'))})"
        log.info("%s %s.%s %s: %s", pdf_id, table, column, row_id, note)
    return Cell(pdf_id, page_number, table, column, row_id, kind="text", text=text, note=note)


def _paper_pdfs(
    con: duckdb.DuckDBPyConnection,
    columns_of: dict[str, set[str]],
    papers: list[str] | None,
    pdf_root: str | Path | None,
) -> dict[str, tuple[str | None, str | None]]:
    """paper id → (resolved PDF path, sha256 of the file) for rendering page regions."""
    meta = columns_of.get("metadata", set())
    if "pdf_path" not in meta:
        return {}
    sha_sql = "cast(t.sha256 as varchar)" if "sha256" in meta else "null"
    where, params = paper_filter("t.paper_id", papers)
    rows = con.execute(f"select cast(t.paper_id as varchar), t.pdf_path, {sha_sql} from metadata t {where}", params)
    result = {}
    for pdf_id, pdf_path, sha in rows.fetchall():
        if not pdf_path:
            result[pdf_id] = (None, sha)
            continue
        path = Path(pdf_path)
        if not path.is_absolute() and pdf_root is not None:
            path = Path(pdf_root) / path
        resolved = str(path.resolve()) if path.exists() else str(path)
        result[pdf_id] = (resolved, sha or (_file_sha256_now(resolved) if path.exists() else None))
    return result


def _file_sha256_now(path: str) -> str:
    stat = Path(path).stat()
    return _file_sha256(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4096)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
