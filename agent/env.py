"""The agent's environment: the stores it may read, how results are shown, and per-question workflow state.

Everything the model can reach goes through here: the sandboxed warehouse, the vector backend, the formula
backend. Trusted lookups the agent makes on its own behalf (where a row is, a paper's title, a paper's PDF) use the
same read-only connection with bound parameters. Text that goes to the model passes :meth:`AgentEnv.redact` so no
absolute path of this machine reaches a prompt.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from agent.backends import CollectionInfo, FormulaBackend, FormulaTool, VectorBackend
from agent.evidence import Evidence, snippet
from agent.formats import MAX_COLUMNS, OUTPUT_FORMATS, cell_text, clip_value, format_table, render_action
from paperlake.runtime.sql_sandbox import QueryResult, ReadOnlyWarehouse
from schemas.warehouse import Column, Table, catalogue

PREFERRED_TEXT_COLLECTIONS = (
    "text_sentence_transformers_all_minilm_l6_v2",
    "text_bm25_en",
    "text_sentence_transformers_bge_large_en_v1_5",
)
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~<>-])/(?:[\w.@+-]+/)+[\w.@+-]*")
_MAX_IDS_PER_LOOKUP = 500
_EVIDENCE_CELL_CHARS = 300  # an evidence snippet is 300 characters: more of a cell is never read


def live_catalogue(warehouse: ReadOnlyWarehouse) -> list[Table]:
    """The documented catalogue (``schemas.warehouse``) restricted to the tables the live file has; tables it does
    not document are described from DuckDB's own catalogue (column comments when present)."""
    live = warehouse.query(
        "select table_name, column_name, data_type, coalesce(comment, '') from duckdb_columns() "
        "where schema_name = 'main' and database_name = current_database() order by table_name, column_index",
        max_rows=100_000,
    )
    live_columns: dict[str, list[Column]] = {}
    for table, column, data_type, comment in live.rows:
        live_columns.setdefault(table, []).append(Column(column, str(data_type).lower(), comment))
    comments = dict(
        warehouse.query(
            "select table_name, coalesce(comment, '') from duckdb_tables() where schema_name = 'main' "
            "and database_name = current_database()",
            max_rows=10_000,
        ).rows
    )
    try:
        documented = {table.name: table for table in catalogue()}
    except OSError:  # no dbt YAML next to the package: the live file's own catalogue only
        documented = {}
    result: list[Table] = []
    for name in [t for t in documented if t in live_columns] + sorted(set(live_columns) - set(documented)):
        if name in documented:
            present = {c.name for c in live_columns[name]}
            doc = documented[name]
            result.append(Table(name, doc.description, tuple(c for c in doc.columns if c.name in present)))
        else:
            result.append(Table(name, comments.get(name, ""), tuple(live_columns[name])))
    return result


@dataclass
class AgentEnv:
    warehouse: ReadOnlyWarehouse | None
    vectors: VectorBackend | None = None
    formulas: FormulaBackend | None = None
    home: Path | None = None
    output_format: str = "json"
    max_rows: int = 20
    max_tokens: int = 5000
    image_max_pixels: int = 1568
    image_dpi: int = 144
    redact_roots: list[str] = field(default_factory=list)
    action_format: str = "markdown"
    default_collection: str | None = None
    # per-question state
    scope_paper_ids: list[str] = field(default_factory=list)
    retrieved_formulas: dict[str, dict[str, Any]] = field(default_factory=dict)
    tools: dict[str, FormulaTool] = field(default_factory=dict)
    _catalogue: list[Table] | None = field(default=None, repr=False)
    _collections: list[CollectionInfo] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.output_format not in OUTPUT_FORMATS:
            raise ValueError(f"unknown output format {self.output_format!r}; choose from {', '.join(OUTPUT_FORMATS)}")
        roots = list(self.redact_roots)
        if self.home is not None:
            roots.append(str(Path(self.home).resolve()))
        if self.warehouse is not None:
            roots.append(str(Path(self.warehouse.path).resolve().parent))
        roots += [str(Path.cwd()), str(Path.home()), tempfile.gettempdir(), os.path.realpath(tempfile.gettempdir())]
        self.redact_roots = sorted({r for r in roots if r and r != "/"}, key=len, reverse=True)

    def reset(self, scope_paper_ids: Sequence[str] = ()) -> None:
        self.retrieved_formulas.clear()
        self.tools.clear()
        self.scope_paper_ids = [str(p) for p in scope_paper_ids]

    def step(self, action: str, **parameters: Any) -> str:
        """An action written in the session's action format (for "next valid step" hints)."""
        return render_action(action, parameters, self.action_format)

    def close(self) -> None:
        if self.warehouse is not None:
            self.warehouse.close()
        for store in (self.vectors, self.formulas):
            close = getattr(store, "close", None)
            if close is not None:  # releases the Milvus Lite file lock for the next process
                close()

    # -- text that goes to the model ------------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """Replace this machine's absolute paths by placeholders."""
        for root in self.redact_roots:
            text = text.replace(root, "<local>")
        return _ABSOLUTE_PATH.sub("<path>", text)

    def table_text(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], more_rows: bool = False) -> str:
        formatted = format_table(columns, rows, self.output_format, self.max_rows, self.max_tokens, more_rows)
        return formatted.text

    # -- catalogue ------------------------------------------------------------------------------------------------

    def catalogue(self) -> list[Table]:
        if self._catalogue is None:
            self._catalogue = live_catalogue(self.warehouse) if self.warehouse is not None else []
        return self._catalogue

    def table(self, name: str) -> Table | None:
        return next((t for t in self.catalogue() if t.name == name), None)

    def collections(self) -> list[CollectionInfo]:
        if self._collections is None:
            self._collections = self.vectors.collections() if self.vectors is not None else []
        return self._collections

    def classic_collection(self) -> str | None:
        """The text collection for classic retrieval: the configured one, else the first of the usual ones built."""
        names = [c.name for c in self.collections() if c.modality == "text"]
        if self.default_collection:
            return self.default_collection if self.default_collection in names else None
        for preferred in PREFERRED_TEXT_COLLECTIONS:
            if preferred in names:
                return preferred
        return names[0] if names else None

    def encodable_views(self, modality: str | None = None) -> list[tuple[str, str]]:
        return [
            (t.name, c.name)
            for t in self.catalogue()
            for c in t.columns
            if c.encodable and (modality is None or c.encodable == modality)
        ]

    # -- trusted lookups ------------------------------------------------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] = (), max_rows: int = 10_000) -> QueryResult:
        if self.warehouse is None:
            raise RuntimeError("no warehouse is open")
        return self.warehouse.query(sql, list(params), max_rows=max_rows)

    def locate(self, table_name: str, ids: Iterable[str]) -> dict[str, tuple[str | None, int | None, tuple | None]]:
        """row id -> (paper id, page number, bbox) for rows of a catalogued table."""
        table = self.table(table_name)
        wanted = sorted({str(i) for i in ids if i})[:_MAX_IDS_PER_LOOKUP]
        if table is None or not wanted:
            return {}
        paper = "ref_paper_id" if table.has("ref_paper_id") else ("paper_id" if table.has("paper_id") else "null")
        if table.has("page_number"):
            page = "page_number"
        elif table.has("page_numbers"):
            page = "page_numbers[1]"
        else:
            page = "null"
        bbox = "bounding_box" if table.has("bounding_box") else "null"
        marks = ", ".join("?" for _ in wanted)
        sql = (
            f'select cast("{table.primary_key}" as varchar), cast({paper} as varchar), {page}, {bbox} '
            f'from "{table.name}" where cast("{table.primary_key}" as varchar) in ({marks})'
        )
        return {
            row_id: (paper_id, page_number, tuple(box) if box else None)
            for row_id, paper_id, page_number, box in self.query(sql, wanted).rows
        }

    def titles(self, paper_ids: Iterable[str]) -> dict[str, str]:
        wanted = sorted({str(p) for p in paper_ids if p})[:_MAX_IDS_PER_LOOKUP]
        if not wanted or self.table("metadata") is None:
            return {}
        marks = ", ".join("?" for _ in wanted)
        result = self.query(
            f"select cast(paper_id as varchar), title from metadata where cast(paper_id as varchar) in ({marks})",
            wanted,
        )
        return {pid: title for pid, title in result.rows if title}

    def pdf_path(self, paper_id: str) -> tuple[Path, int | None] | None:
        """The PDF of a paper, looked up in the warehouse's metadata (never a path from the model)."""
        result = self.query(
            "select pdf_path, num_pages from metadata where cast(paper_id as varchar) = ?", [paper_id], max_rows=1
        )
        if not result.rows or not result.rows[0][0]:
            return None
        path = Path(result.rows[0][0])
        if not path.is_absolute() and self.home is not None:
            path = Path(self.home) / path
        return path, result.rows[0][1]

    # -- evidence from SQL rows ---------------------------------------------------------------------------------

    def evidence_from_rows(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], source: str) -> list[Evidence]:
        """Locate each row the model saw: the most specific catalogued id column decides the table."""
        keys = {t.primary_key: t.name for t in self.catalogue()}
        id_columns = [c for c in columns if c in keys]
        specific = [c for c in id_columns if keys[c] not in ("metadata", "pages")]
        id_column = (specific or id_columns or [None])[0]
        table_name = keys.get(id_column) if id_column else None
        paper_column = next((c for c in ("ref_paper_id", "paper_id", "pdf_id") if c in columns), None)
        content = [c for c in columns if c not in keys and not c.endswith("_id") and c not in ("page_number",)]
        records = [dict(zip(columns, row)) for row in rows]
        located: dict[str, tuple[str | None, int | None, tuple | None]] = {}
        if table_name and id_column:
            located = self.locate(table_name, (str(r[id_column]) for r in records if r.get(id_column) is not None))
        page_ids = [str(r["ref_page_id"]) for r in records if r.get("ref_page_id") is not None]
        pages = self.locate("pages", page_ids) if page_ids and "page_number" not in columns else {}
        evidence = []
        for record in records:
            row_id = str(record[id_column]) if id_column and record.get(id_column) is not None else None
            paper_id, page_number, bbox = located.get(row_id or "", (None, None, None))
            if paper_column and record.get(paper_column) is not None:
                paper_id = str(record[paper_column])
            if record.get("page_number") is not None:
                page_number = int(record["page_number"])
            elif record.get("ref_page_id") is not None and str(record["ref_page_id"]) in pages:
                page_number = pages[str(record["ref_page_id"])][1]
            if record.get("bounding_box"):
                bbox = tuple(record["bounding_box"])
            if paper_id is None and row_id is None:
                continue
            text = " | ".join(
                cell_text(clip_value(record[c], _EVIDENCE_CELL_CHARS)[0])
                for c in content[:MAX_COLUMNS]
                if record.get(c) is not None
            )
            evidence.append(
                Evidence(
                    paper_id=paper_id,
                    page_number=page_number,
                    bbox=tuple(float(v) for v in bbox) if bbox else None,
                    table_name=table_name,
                    column_name=",".join(content) or None,
                    row_id=row_id,
                    snippet=snippet(text),
                    source=source,
                )
            )
        return evidence
