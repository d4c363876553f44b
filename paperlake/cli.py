"""The `paperlake` command. Dagster is imported only inside `ingest` (the library itself never imports it)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from paperlake.config import Settings
from paperlake.warehouse import connect_read_only

app = typer.Typer(help="paperlake: conference volumes → a queryable, trustworthy knowledge base.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
console = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def _settings(home: Optional[Path] = None, **overrides: Any) -> Settings:
    return Settings.from_env(home=home.resolve() if home else None, **overrides)


def _print_rows(columns: list[str], rows: list[tuple], as_json: bool, title: str | None = None) -> None:
    if as_json:
        print(json.dumps([dict(zip(columns, row)) for row in rows], default=str, ensure_ascii=False))
        return
    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    console.print(table)


HomeOption = typer.Option(None, "--home", help="PAPERLAKE_HOME (default ./data).")


@app.command()
def ingest(
    inboxes: list[Path] = typer.Argument(None, help="Inbox folders holding <volume>/*.pdf (default $PAPERLAKE_INBOX)."),
    backend: str = typer.Option(None, "--backend", help="auto | pymupdf | mineru (default auto)."),
    mineru_dir: Optional[Path] = typer.Option(None, "--mineru-dir", help="Folder of MinerU outputs, one per PDF stem."),
    home: Optional[Path] = HomeOption,
    rebuild_warehouse: bool = typer.Option(False, "--rebuild-warehouse", help="Run dbt even if nothing changed."),
) -> None:
    """Ingest new, changed and removed papers (runs the Dagster asset graph in process)."""
    if not inboxes:
        inboxes = [Path(p) for p in os.environ.get("PAPERLAKE_INBOX", "").split(os.pathsep) if p]
    if not inboxes:
        _fail("no inbox given: pass a folder (e.g. ../shared/corpus/inbox) or set PAPERLAKE_INBOX")
    missing = [str(p) for p in inboxes if not p.is_dir()]
    if missing:
        _fail(f"inbox folder(s) not found: {', '.join(missing)}")
    if mineru_dir is not None and not mineru_dir.is_dir():
        _fail(f"--mineru-dir {mineru_dir} is not a folder")
    settings = _settings(home, backend=backend, mineru_dir=mineru_dir.resolve() if mineru_dir else None)
    from orchestration.run import ingest as run_ingest

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[last]}"), console=err, transient=False) as progress:
        task = progress.add_task("papers", total=None, last="planning…")

        def notify(key: str, status: str) -> None:
            progress.update(task, advance=1, last=f"{key}: {status}")

        from paperlake.inbox import scan_inbox  # the plan's size sets the bar's total
        from paperlake.lake import Lake
        from paperlake.pipeline import plan_ingest

        plan = plan_ingest(scan_inbox([p.resolve() for p in inboxes], settings.mineru_dir), Lake(settings.lake),
                           settings)
        progress.update(task, total=len(plan.to_parse) + len(plan.removed), last=plan.summary())
        summary = run_ingest([p.resolve() for p in inboxes], settings, progress=notify,
                             rebuild_warehouse=rebuild_warehouse)
    console.print(f"[bold]plan:[/] {summary.plan.summary()}")
    console.print(f"parsed {len(summary.published)}, failed {len(summary.failed)}, removed {len(summary.removed)}; "
                  f"warehouse {'rebuilt' if summary.warehouse_built else 'unchanged'} "
                  f"({summary.step_seconds.get('total', 0):.1f}s)")
    for key, reason in summary.failed.items():
        err.print(f"[yellow]failed[/] {key}: {reason}")
    status(home=settings.home, as_json=False)


@app.command()
def status(home: Optional[Path] = HomeOption, as_json: bool = typer.Option(False, "--json")) -> None:
    """Volumes, papers and failures in the warehouse."""
    settings = _settings(home)
    try:
        with connect_read_only(settings.warehouse) as con:
            volumes = con.execute("select volume, venue, num_papers, num_pages, num_failed from volumes "
                                  "order by volume").fetchall()
            counts = {t: con.execute(f'select count(*) from "{t}"').fetchone()[0] for t in (
                "metadata", "pages", "sections", "chunks", "tables", "table_cells", "images", "equations",
                "reference")}
            errors = con.execute("select paper_key, stage, reason from ingest_errors order by paper_key").fetchall()
            backends = dict(con.execute("select backend, count(*) from metadata group by backend").fetchall())
    except FileNotFoundError as error:
        _fail(str(error))
    report = {
        "home": str(settings.home),
        "volumes": [dict(zip(("volume", "venue", "papers", "pages", "failed"), v)) for v in volumes],
        "rows": counts, "backends": backends,
        "ingest_errors": [dict(zip(("paper_key", "stage", "reason"), e)) for e in errors],
    }
    if as_json:
        print(json.dumps(report, default=str))
        return
    _print_rows(["volume", "venue", "papers", "pages", "failed"], volumes, False, title="volumes")
    console.print("rows: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    console.print("backends: " + ", ".join(f"{k} {v}" for k, v in backends.items()))
    if errors:
        _print_rows(["paper_key", "stage", "reason"], errors, False, title="ingest errors")


@app.command()
def sql(query: str = typer.Argument(..., help="A SQL query over the warehouse (read-only)."),
        home: Optional[Path] = HomeOption, as_json: bool = typer.Option(False, "--json"),
        limit: int = typer.Option(1000, "--limit", help="At most this many rows are printed.")) -> None:
    """Query the warehouse read-only (works while an ingest is writing)."""
    import duckdb

    settings = _settings(home)
    try:
        with connect_read_only(settings.warehouse) as con:
            cursor = con.execute(query)
            columns = [d[0] for d in cursor.description or []]
            rows = cursor.fetchmany(limit)
    except FileNotFoundError as error:
        _fail(str(error))
    except duckdb.Error as error:
        _fail(f"{type(error).__name__}: {error}")
    _print_rows(columns, rows, as_json)


def main() -> None:  # pragma: no cover - console entry
    app(sys.argv[1:])
