"""The Parquet lake's data contract: one file per paper per view, these columns, these types.

Both parser backends produce a :class:`ParsedPaper` whose views follow these schemas; the lake writer enforces them
(missing columns are filled with nulls, extra columns are refused) and dbt's staging models read them.
Bounding boxes are ``[x0, y0, w, h]`` in PDF points with a top-left origin, as doubles here (the warehouse rounds).
Pages are numbered from 1; ``ordinal`` numbers elements within their page (sections, references, chunks: within
the paper), from 0. A figure of several plots is one images row plus one row per plot (a panel): a panel's
``parent_image_id`` is its whole figure's ``image_id`` and its ``ordinal`` numbers it within that figure.
A table's cells carry their header paths and parsed numbers, and ``table_rows`` / ``table_columns`` hold one line
per body row and data column (see :mod:`paperlake.parsing.table_structure`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

_BBOX = pa.list_(pa.float64())
_STR = pa.string()
_INT = pa.int32()

VIEW_SCHEMAS: dict[str, pa.Schema] = {
    "metadata": pa.schema(
        [
            ("paper_id", _STR),
            ("paper_key", _STR),
            ("title", _STR),
            ("abstract", _STR),
            ("num_pages", _INT),
            ("conference_full", _STR),
            ("conference_abbreviation", _STR),
            ("pub_year", _INT),
            ("volume", _STR),
            ("venue", _STR),
            ("download_url", _STR),
            ("bibtex", _STR),
            ("authors", pa.list_(_STR)),
            ("affiliations", pa.list_(_STR)),
            ("author_affiliations", pa.list_(_STR)),
            ("emails", pa.list_(_STR)),
            ("email_domains", pa.list_(_STR)),
            ("front_matter", _STR),
            ("pdf_path", _STR),
            ("file_name", _STR),
            ("license", _STR),
            ("sha256", _STR),
            ("title_source", _STR),
            ("backend", _STR),
            ("parser_version", _STR),
        ]
    ),
    "pages": pa.schema(
        [
            ("page_id", _STR),
            ("paper_id", _STR),
            ("page_number", _INT),
            ("page_width", pa.float64()),
            ("page_height", pa.float64()),
            ("page_content", _STR),
            ("backend", _STR),
        ]
    ),
    "sections": pa.schema(
        [
            ("section_id", _STR),
            ("paper_id", _STR),
            ("section_title", _STR),
            ("section_number", _STR),
            ("level", _INT),
            ("section_content", _STR),
            ("ordinal", _INT),
            ("page_numbers", pa.list_(_INT)),
            ("backend", _STR),
        ]
    ),
    "chunks": pa.schema(
        [
            ("chunk_id", _STR),
            ("paper_id", _STR),
            ("page_number", _INT),
            ("page_id", _STR),
            ("ordinal", _INT),
            ("text_content", _STR),
            ("token_count", _INT),
            ("section_title", _STR),
            ("backend", _STR),
        ]
    ),
    "tables": pa.schema(
        [
            ("table_id", _STR),
            ("paper_id", _STR),
            ("page_number", _INT),
            ("page_id", _STR),
            ("ordinal", _INT),
            ("table_label", _STR),
            ("table_caption", _STR),
            ("table_content", _STR),
            ("bbox", _BBOX),
            ("num_rows", _INT),
            ("num_cols", _INT),
            ("header_rows", _INT),
            ("stub_columns", _INT),
            ("table_structure", _STR),
            ("detector", _STR),
            ("backend", _STR),
        ]
    ),
    "table_cells": pa.schema(
        [
            ("cell_id", _STR),
            ("table_id", _STR),
            ("paper_id", _STR),
            ("row_index", _INT),
            ("col_index", _INT),
            ("rowspan", _INT),
            ("colspan", _INT),
            ("cell_text", _STR),
            ("is_header", pa.bool_()),
            ("is_stub", pa.bool_()),
            ("column_header_path", pa.list_(_STR)),
            ("row_header_path", pa.list_(_STR)),
            ("number_value", pa.float64()),
            ("number_flags", pa.list_(_STR)),
            ("unit", _STR),
            ("backend", _STR),
        ]
    ),
    "table_rows": pa.schema(
        [
            ("row_id", _STR),
            ("table_id", _STR),
            ("paper_id", _STR),
            ("page_number", _INT),
            ("page_id", _STR),
            ("row_index", _INT),
            ("row_header_path", pa.list_(_STR)),
            ("row_text", _STR),
            ("num_values", _INT),
            ("header_glossary", pa.list_(_STR)),
            ("backend", _STR),
        ]
    ),
    "table_columns": pa.schema(
        [
            ("column_id", _STR),
            ("table_id", _STR),
            ("paper_id", _STR),
            ("page_number", _INT),
            ("page_id", _STR),
            ("col_index", _INT),
            ("column_header_path", pa.list_(_STR)),
            ("unit", _STR),
            ("column_text", _STR),
            ("num_values", _INT),
            ("header_glossary", pa.list_(_STR)),
            ("backend", _STR),
        ]
    ),
    "images": pa.schema(
        [
            ("image_id", _STR),
            ("paper_id", _STR),
            ("page_number", _INT),
            ("page_id", _STR),
            ("ordinal", _INT),
            ("image_label", _STR),
            ("image_caption", _STR),
            ("image_text", _STR),
            ("bbox", _BBOX),
            ("image_kind", _STR),
            ("parent_image_id", _STR),
            ("detector", _STR),
            ("backend", _STR),
        ]
    ),
    "equations": pa.schema(
        [
            ("equation_id", _STR),
            ("paper_id", _STR),
            ("page_number", _INT),
            ("page_id", _STR),
            ("ordinal", _INT),
            ("equation_text", _STR),
            ("equation_latex", _STR),
            ("equation_number", _STR),
            ("latex_source", _STR),
            ("bbox", _BBOX),
            ("context", _STR),
            ("context_after", _STR),
            ("detector", _STR),
            ("backend", _STR),
        ]
    ),
    "references": pa.schema(
        [
            ("reference_id", _STR),
            ("paper_id", _STR),
            ("page_number", _INT),
            ("page_id", _STR),
            ("ordinal", _INT),
            ("reference_content", _STR),
            ("citing_context", _STR),
            ("cited_count", _INT),
            ("backend", _STR),
        ]
    ),
}

VIEWS: tuple[str, ...] = tuple(VIEW_SCHEMAS)


@dataclass
class ParsedPaper:
    """One paper's views as lists of row dicts (keys = the view's column names)."""

    paper_id: str
    paper_key: str
    backend: str
    views: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {view: [] for view in VIEWS})

    def rows(self, view: str) -> list[dict[str, Any]]:
        return self.views.setdefault(view, [])

    def counts(self) -> dict[str, int]:
        return {view: len(self.views.get(view, [])) for view in VIEWS}


def to_arrow(view: str, rows: list[dict[str, Any]]) -> pa.Table:
    """Rows → a table with exactly the view's schema; an unknown column is a contract error."""
    schema = VIEW_SCHEMAS[view]
    names = set(schema.names)
    for row in rows:
        unknown = set(row) - names
        if unknown:
            raise ValueError(f"view {view!r}: columns not in the contract: {sorted(unknown)}")
    columns = {name: [row.get(name) for row in rows] for name in schema.names}
    return pa.table(columns, schema=schema)


# LLM summaries of a paper, one lake file per paper beside its views (paperlake.enrichment writes them, dbt reads
# them into the NeuSym-RAG summary columns)
ENRICHMENT_VIEW = "enrichment"
ENRICHMENT_SCHEMA = pa.schema(
    [
        ("paper_id", pa.string()),
        ("kind", pa.string()),
        ("item_id", pa.string()),
        ("content_hash", pa.string()),
        ("prompt_version", pa.string()),
        ("model", pa.string()),
        ("status", pa.string()),
        ("summary", pa.string()),
        ("tags", pa.list_(pa.string())),
        ("reason", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("cost_usd", pa.float64()),
        ("cached", pa.bool_()),
        ("created_at", pa.string()),
    ]
)
