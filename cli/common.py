"""What every command group shares: the two consoles, the one-line failure, the home's settings, rows for a person
or as JSON, the `--home` option, and the paper a person names (an id, a key or words of a title)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from cli.render import render_rows
from paperlake.config import Settings
from paperlake.warehouse.read import connect_read_only, find_papers

console = Console()
err = Console(stderr=True)

HomeOption = typer.Option(None, "--home", help="PAPERLAKE_HOME (default ./data).")
PAPER_HELP = "A paper: its id, its key as the Dagster UI shows it (volume/file-stem), or words of its title."


def fail(message: str, code: int = 1) -> None:
    """One line whatever the terminal's width; the message (often quoting the user's input) is never read as markup."""
    one_line(message)
    raise typer.Exit(code)


def one_line(message: str) -> int:
    err.print(f"[bold red]error:[/] {escape(' '.join(str(message).split()))}", soft_wrap=True)
    return 1


def home_settings(home: Optional[Path] = None, **overrides: Any) -> Settings:
    return Settings.from_env(home=home.resolve() if home else None, **overrides)


def print_rows(columns: list[str], rows: list[tuple], as_json: bool, title: str | None = None) -> None:
    if as_json:
        print(json.dumps([dict(zip(columns, row)) for row in rows], default=str, ensure_ascii=False))
        return
    render_rows(console, columns, rows, title)


def resolve_paper(settings: Settings, text: str) -> str:
    """The one paper ``text`` names (:func:`paperlake.warehouse.read.find_papers`): its id. None found, or several,
    is a message and a non-zero exit (several are listed)."""
    try:
        with connect_read_only(settings.warehouse) as con:
            matches = find_papers(con, text)
    except FileNotFoundError as error:
        fail(str(error))
    if not matches:
        fail(f"no paper matches {text!r} (by id, by volume/file-stem, or by every word of its title)")
    if len(matches) > 1:
        print_rows(["paper_id", "paper_key", "title"], [(m.paper_id, m.paper_key, m.title) for m in matches], False)
        fail(f"{len(matches)} papers match {text!r}: give one of the ids or keys above")
    return matches[0].paper_id
