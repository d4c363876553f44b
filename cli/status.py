"""`paperlake status`: volumes, row counts, enrichment, backends, the formula graph and the ingest errors, read from
the warehouse (`paperlake ingest` prints it after a run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import duckdb
import typer

from cli.common import HomeOption, console, fail, home_settings, print_rows
from paperlake.warehouse.read import connect_read_only


def status(home: Optional[Path] = HomeOption, as_json: bool = typer.Option(False, "--json")) -> None:
    """Volumes, papers, failures and the formula graph in the warehouse."""
    settings = home_settings(home)
    try:
        with connect_read_only(settings.warehouse) as con:
            volumes = con.execute(
                "select volume, venue, num_papers, num_pages, num_failed, llm_calls, llm_tokens, "
                "round(llm_cost_usd, 4), llm_errors from volumes order by volume"
            ).fetchall()
            enriched = dict(
                con.execute(
                    "select 'page_summary', count(page_summary) from pages union all "
                    "select 'section_summary', count(section_summary) from sections union all "
                    "select 'table_summary', count(table_summary) from tables union all "
                    "select 'image_summary', count(image_summary) from images "
                    "where parent_image_id is null union all "
                    "select 'tldr', count(tldr) from metadata union all "
                    "select 'tags', count(tags) from metadata union all "
                    "select 'row_summary', count(row_summary) from table_rows union all "
                    "select 'column_summary', count(column_summary) from table_columns"
                ).fetchall()
            )
            counts = {
                t: con.execute(f'select count(*) from "{t}"').fetchone()[0]
                for t in (
                    "metadata",
                    "pages",
                    "sections",
                    "chunks",
                    "tables",
                    "table_cells",
                    "table_rows",
                    "table_columns",
                    "images",
                    "equations",
                    "reference",
                )
            }
            # a figure of several plots is one row plus one per plot (panel): figures are the rows without a parent
            panels = con.execute("select count(*) from images where parent_image_id is not null").fetchone()[0]
            errors = con.execute("select paper_key, stage, reason from ingest_errors order by paper_key").fetchall()
            backends = dict(con.execute("select backend, count(*) from metadata group by backend").fetchall())
            try:
                formulas = dict(
                    zip(
                        ("equations", "formulas", "templated", "validated", "merged_groups", "cross_paper_groups"),
                        con.execute(
                            "select (select count(*) from equations), count(*), count(template), "
                            "count(*) filter (where status = 'validated'), "
                            "count(*) filter (where occurrence_count > 1), "
                            "count(*) filter (where len(paper_ids) > 1) from formulas"
                        ).fetchone(),
                    )
                )
            except duckdb.CatalogException:
                formulas = {}
    except FileNotFoundError as error:
        fail(str(error))
    report = {
        "home": str(settings.home),
        "volumes": [
            dict(
                zip(
                    (
                        "volume",
                        "venue",
                        "papers",
                        "pages",
                        "failed",
                        "llm_calls",
                        "llm_tokens",
                        "llm_cost_usd",
                        "llm_errors",
                    ),
                    v,
                )
            )
            for v in volumes
        ],
        "rows": counts,
        "figures": {"figures": counts["images"] - panels, "panels": panels},  # images rows = figures + panels
        "backends": backends,
        "formulas": formulas,
        "enriched": enriched,
        "ingest_errors": [dict(zip(("paper_key", "stage", "reason"), e)) for e in errors],
    }
    if as_json:
        print(json.dumps(report, default=str))
        return
    columns = ["volume", "venue", "papers", "pages", "failed", "llm calls", "llm tokens", "llm $", "llm errors"]
    if not any(v[5] for v in volumes):  # nothing enriched yet: the LLM columns would be all zero
        columns, volumes = columns[:5], [v[:5] for v in volumes]
    print_rows(columns, volumes, False, title="volumes")
    shown = {
        k: f"{v} ({v - panels} figures, {panels} panels)" if k == "images" and panels else v for k, v in counts.items()
    }
    console.print("rows: " + ", ".join(f"{k} {v}" for k, v in shown.items()))
    if any(enriched.values()):
        console.print("enriched: " + ", ".join(f"{k} {v}" for k, v in enriched.items()))
    console.print("backends: " + ", ".join(f"{k} {v}" for k, v in backends.items()))
    if formulas:
        console.print("formula graph: " + ", ".join(f"{k} {v}" for k, v in formulas.items()))
    if errors:
        print_rows(["paper_key", "stage", "reason"], errors, False, title="ingest errors")
