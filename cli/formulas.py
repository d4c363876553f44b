"""`paperlake formulas`: search the formula graph by meaning, show one formula with its parameters, occurrences
and relations, and run its validated template. The formula store (and its embedder) is imported when a command runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from cli.common import HomeOption, console, fail, home_settings, print_rows
from paperlake.warehouse.read import connect_read_only

formulas_app = typer.Typer(help="The formula graph: search, inspect and run formula tools.", no_args_is_help=True)


def _formula_layer(home: Optional[Path], with_collection: bool = False):
    from paperlake.formulas.store import WarehouseFormulas, minilm_embedder, open_formula_collection  # deferred: sympy

    settings = home_settings(home)
    try:
        with connect_read_only(settings.warehouse) as con:

            def query(sql: str) -> list[dict[str, Any]]:
                cursor = con.execute(sql)
                names = [d[0] for d in cursor.description]
                return [dict(zip(names, row)) for row in cursor.fetchall()]

            collection = open_formula_collection(settings.milvus_uri, settings.embeddings) if with_collection else None
            return WarehouseFormulas.from_connection(query, embed=minilm_embedder(), collection=collection)
    except FileNotFoundError as error:
        fail(str(error))
    except Exception as error:  # duckdb CatalogException: an older warehouse without formula tables
        fail(f"no formula tables in the warehouse ({type(error).__name__}); run `paperlake ingest` first")


@formulas_app.command("search")
def formulas_search(
    query: str,
    limit: int = typer.Option(5, "--limit", "-k"),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Formulas by meaning (their composite descriptions): in the Milvus `formulas` collection when it exists,
    else with in-process embeddings."""
    layer = _formula_layer(home, with_collection=True)
    try:
        hits = layer.search_formulas(query, limit)
    finally:
        layer.close()
    columns = ["formula_id", "name", "status", "latex", "paper_id", "page_number", "equation_number"]
    print_rows(
        columns,
        [tuple(h.get(c) for c in columns) for h in hits],
        as_json,
        title=f"{query} (searched by {layer.searched_by})",
    )


@formulas_app.command("show")
def formulas_show(
    formula_id: str, home: Optional[Path] = HomeOption, as_json: bool = typer.Option(False, "--json")
) -> None:
    """One formula with its template, parameters, constants, occurrences and relations."""
    layer = _formula_layer(home)
    rows = {
        name: [
            r
            for r in layer.tables[name]
            if r.get("formula_id") == formula_id or r.get("source") == formula_id or r.get("target") == formula_id
        ]
        for name in ("formulas", "formula_parameters", "formula_occurrences", "formula_relations")
    }
    if not rows["formulas"]:
        fail(f"no formula {formula_id!r}; find ids with `paperlake formulas search`")
    if as_json:
        print(json.dumps(rows, default=str, ensure_ascii=False))
        return
    formula = rows["formulas"][0]
    for field_name in (
        "formula_id",
        "label",
        "status",
        "reason",
        "latex",
        "sympy_str",
        "output",
        "template",
        "canonical_key",
        "paper_ids",
        "occurrence_count",
    ):
        if formula.get(field_name) not in (None, "", []):
            console.print(f"[bold]{field_name}:[/] {formula[field_name]}")
    print_rows(
        ["name", "latex_symbol", "description"],
        [(p["name"], p["latex_symbol"], p["description"]) for p in rows["formula_parameters"]],
        False,
        "parameters",
    )
    print_rows(
        ["paper_id", "page_number", "equation_number", "matched_by"],
        [(o["paper_id"], o["page_number"], o["equation_number"], o["matched_by"]) for o in rows["formula_occurrences"]],
        False,
        "occurrences",
    )
    if rows["formula_relations"]:
        print_rows(
            ["source", "relation_type", "target"],
            [(r["source"], r["relation_type"], r["target"]) for r in rows["formula_relations"]],
            False,
            "relations",
        )


@formulas_app.command("run")
def formulas_run(
    formula_id: str,
    assignments: list[str] = typer.Argument(None, help="name=value …"),
    home: Optional[Path] = HomeOption,
) -> None:
    """Evaluate a formula's validated template with the given parameter values (safe evaluator, no eval)."""
    values: dict[str, Any] = {}
    for item in assignments or []:
        name, sep, raw = item.partition("=")
        if not sep:
            fail(f"arguments are name=value, got {item!r}")
        try:
            values[name.strip()] = float(raw)
        except ValueError:
            fail(f"{name} must be a number, got {raw!r}")
    try:
        tool = _formula_layer(home).create_tool(formula_id)
    except KeyError as error:
        fail(str(error.args[0]))
    except Exception as error:  # a formula without a template
        fail(f"{formula_id}: {error}")
    result = tool(**values)
    if not result.ok:
        fail(result.error)
    console.print(f"{tool.name} = {result.value}")
