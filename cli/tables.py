"""`paperlake tables`: the warehouse's tables with their header structure, one table as a grid whose column titles
are whole header paths, its cells with their parsed numbers, and what the paper defines its labels to mean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from cli.common import PAPER_HELP, HomeOption, console, fail, home_settings, print_rows, resolve_paper
from paperlake.warehouse.read import connect_read_only

tables_app = typer.Typer(
    help="Tables with their header structure (header paths, parsed numbers).", no_args_is_help=True
)


def _warehouse_rows(home: Optional[Path], sql: str, params: list[Any]) -> tuple[list[str], list[tuple]]:
    settings = home_settings(home)
    try:
        with connect_read_only(settings.warehouse) as con:
            cursor = con.execute(sql, params)
            return [d[0] for d in cursor.description], cursor.fetchall()
    except FileNotFoundError as error:
        fail(str(error))
    except Exception as error:  # duckdb BinderException/CatalogException: a warehouse built before table structure
        fail(
            f"the warehouse has no table structure ({' '.join(str(error).split())[:200]}); "
            "run `paperlake ingest` to rebuild it"
        )
    raise AssertionError("unreachable")


@tables_app.command("list")
def tables_list(
    paper: Optional[str] = typer.Option(None, "--paper", help=PAPER_HELP),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The tables of the warehouse (or of one paper): id, label, shape and structure flag."""
    where, params = "", []
    if paper:
        where = "where cast(m.paper_id as varchar) = ?"
        params = [resolve_paper(home_settings(home), paper)]
    columns, rows = _warehouse_rows(
        home,
        "select cast(t.table_id as varchar) as table_id, m.title, t.page_number, t.table_label, t.num_rows, "
        "t.num_cols, t.header_rows, t.stub_columns, t.table_structure from tables t join metadata m on "
        f"m.paper_id = t.ref_paper_id {where} order by m.title, t.page_number, t.ordinal",
        params,
    )
    print_rows(columns, rows, as_json, title=f"{len(rows)} tables")


@tables_app.command("show")
def tables_show(
    table_id: str = typer.Argument(..., help="A table id (tables.table_id; see `paperlake tables list`)."),
    cells: bool = typer.Option(
        False,
        "--cells",
        help="Also one line per data cell: its row and column header paths, text, parsed number, flags and unit.",
    ),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """One table as a grid whose column titles are the full header paths, with its structure flag."""
    columns, rows = _warehouse_rows(
        home,
        "select cast(t.table_id as varchar) as table_id, m.title, t.page_number, t.table_label, "
        "t.table_caption, t.num_rows, t.num_cols, t.header_rows, t.stub_columns, t.table_structure, t.detector, "
        "t.backend from tables t join metadata m on m.paper_id = t.ref_paper_id "
        "where cast(t.table_id as varchar) = ?",
        [table_id.strip()],
    )
    if not rows:
        fail(f"no table {table_id!r}; find ids with `paperlake tables list`")
    table = dict(zip(columns, rows[0]))
    cell_columns, cell_rows = _warehouse_rows(
        home,
        "select row_index, col_index, rowspan, colspan, cell_text, is_header, is_stub, row_header_path, "
        "column_header_path, number_value, number_flags, unit from table_cells "
        "where cast(ref_table_id as varchar) = ? order by row_index, col_index",
        [table_id.strip()],
    )
    grid = [dict(zip(cell_columns, row)) for row in cell_rows]
    glossary = _table_glossary(home, table_id.strip())
    if as_json:
        print(json.dumps({"table": table, "cells": grid, "glossary": glossary}, default=str, ensure_ascii=False))
        return
    console.print(
        Text(f"{table['table_label'] or 'Table'} · {table['title']} · page {table['page_number']}", style="bold")
    )
    if table["table_caption"]:
        console.print(Text(table["table_caption"]))
    console.print(
        Text(
            f"structure: {table['table_structure']} · {table['header_rows']} header row(s) · "
            f"{table['stub_columns']} stub column(s) · {table['num_rows']}×{table['num_cols']} · "
            f"{table['detector']} ({table['backend']})",
            style="dim",
        )
    )
    console.print(_structured_grid(grid, int(table["header_rows"] or 0)))
    if glossary:
        console.print(
            Text("defined in the paper: " + "; ".join(f"{k} = {v}" for k, v in glossary.items()), style="dim")
        )
    if cells:
        data = [c for c in grid if not c["is_header"] and not c["is_stub"] and c["cell_text"]]
        print_rows(
            ["row header path", "column header path", "text", "number", "flags", "unit"],
            [
                (
                    " > ".join(c["row_header_path"] or []),
                    " > ".join(c["column_header_path"] or []),
                    c["cell_text"],
                    c["number_value"],
                    ",".join(c["number_flags"] or []),
                    c["unit"],
                )
                for c in data
            ],
            False,
            title="data cells",
        )


def _table_glossary(home: Optional[Path], table_id: str) -> dict[str, str]:
    """What the paper defines the table's labels to mean (its lines' ``header_glossary``); empty for a warehouse
    built before labels were glossed."""
    settings = home_settings(home)
    try:
        with connect_read_only(settings.warehouse) as con:
            entries = con.execute(
                "select distinct unnest(header_glossary) from (select header_glossary from table_rows "
                "where cast(ref_table_id as varchar) = $1 union all select header_glossary from table_columns "
                "where cast(ref_table_id as varchar) = $1) order by 1",
                [table_id],
            ).fetchall()
    except Exception:  # duckdb BinderException: no header_glossary column yet
        return {}
    return dict(str(entry).partition(": ")[::2] for (entry,) in entries if entry)


def _structured_grid(grid: list[dict[str, Any]], header_rows: int) -> Table:
    """The body rows under column titles that are whole header paths; a row label spanning rows is repeated."""
    n_cols = max((c["col_index"] + (c["colspan"] or 1) for c in grid), default=0)
    n_rows = max((c["row_index"] + (c["rowspan"] or 1) for c in grid), default=0)
    titles: list[list[str]] = [[] for _ in range(n_cols)]
    for cell in grid:  # header cells, top to bottom, spanning cells once per column they cover
        if cell["row_index"] < header_rows and cell["cell_text"]:
            for col in range(cell["col_index"], cell["col_index"] + (cell["colspan"] or 1)):
                if cell["cell_text"] not in titles[col]:
                    titles[col].append(cell["cell_text"])
    body = [["" for _ in range(n_cols)] for _ in range(max(n_rows - header_rows, 0))]
    for cell in grid:
        if cell["row_index"] < header_rows:
            continue
        rows = (
            range(cell["row_index"], cell["row_index"] + (cell["rowspan"] or 1))
            if cell["is_stub"]
            else [cell["row_index"]]
        )
        for row in rows:
            if 0 <= row - header_rows < len(body):
                body[row - header_rows][cell["col_index"]] = cell["cell_text"] or ""
    out = Table(show_lines=False)
    for col in range(n_cols):
        out.add_column(Text(" > ".join(titles[col]) or f"col {col}"), overflow="fold")
    for row in body:
        if any(row):
            out.add_row(*[Text(v) for v in row])
    return out
