"""Rows for a person at any terminal width: a table when it fits, else one record per row.

A table column never wraps (an id is copied whole or not at all): a cell longer than its column ends in an
ellipsis. When the columns cannot all keep their headers and ids whole in the terminal's width, each row prints as
a record, one ``column: value`` line per column, values cut to the line. Cells are cut before they reach the
renderer, so a 16 MB value costs what a screenful costs. ``--json`` prints everything, uncut.
"""

from __future__ import annotations

import re

from rich.console import Console
from rich.table import Table
from rich.text import Text

ELLIPSIS = "…"
_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$|^[\w.~-]+/[\w.~-]+$")
_MIN_TEXT_WIDTH = 12  # a free-text column narrower than this is not worth a table


def cell_text(value: object, limit: int) -> str:
    """The value on one line, at most ``limit`` characters (an ellipsis marks a cut)."""
    if value is None:
        return ""
    text = str(value)
    head = text[: limit * 4 + 16]  # never join or scan more than a screenful of a huge value
    flat = " ".join(head.split())
    if len(flat) > limit or len(head) < len(text):
        return flat[: max(0, limit - 1)] + ELLIPSIS
    return flat


def _short(value: object) -> str:
    """A value's text when it is short enough to be an id, else ""."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value) if not isinstance(value, bytes | bytearray) else ""
    return text if len(text) <= 200 else "\0"


def _is_id(values: list[str]) -> bool:
    present = [v for v in values if v]
    return bool(present) and all(_ID.match(v) for v in present)


def _column_widths(columns: list[str], values: list[list[str]], ids: set[int], room: int) -> list[int] | None:
    """Each column's width in a table of ``room`` characters of content, or None when it cannot keep every id and
    header whole and give each free-text column a few characters: id columns and short ones get what they need,
    free-text columns share the rest by their length."""
    natural = [max([len(str(name)), *(len(v) for v in column)]) for name, column in zip(columns, values)]
    widths = list(natural)
    free = [i for i, n in enumerate(natural) if i not in ids and n > _MIN_TEXT_WIDTH]
    for i in free:
        widths[i] = max(len(str(columns[i])), _MIN_TEXT_WIDTH)
    if sum(widths) > room:
        return None
    spare = room - sum(widths)
    while spare > 0 and free:
        wanting = [i for i in free if widths[i] < natural[i]]
        if not wanting:
            break
        share = max(1, spare // len(wanting))
        for i in wanting:
            grant = min(share, natural[i] - widths[i], spare)
            widths[i] += grant
            spare -= grant
    return widths


def render_rows(console: Console, columns: list[str], rows: list[tuple], title: str | None = None) -> None:
    width = max(40, console.width)
    ids = {i for i in range(len(columns)) if _is_id([_short(row[i]) for row in rows])}
    texts = [[cell_text(v, 200 if i in ids else width) for i, v in enumerate(row)] for row in rows]
    by_column = [[row[i] for row in texts] for i in range(len(columns))]
    widths = _column_widths(columns, by_column, ids, width - 3 * len(columns) - 1)
    if widths is not None:
        table = Table(title=title, show_lines=False)
        for name, column_width in zip(columns, widths):
            table.add_column(Text(str(name)), no_wrap=True, overflow="ellipsis", width=column_width)
        for row in texts:  # cells as Text: a value like "[/x]" is data, not rich markup
            table.add_row(*[Text(cell_text(v, w)) for v, w in zip(row, widths)])
        console.print(table)
        return
    _render_records(console, columns, texts, title, width, ids)


def _render_records(
    console: Console, columns: list[str], texts: list[list[str]], title: str | None, width: int, ids: set[int]
) -> None:
    """One ``column: value`` line per column; a value cut to the line, an id never."""
    label = max((len(str(c)) for c in columns), default=0)
    if title:
        console.print(Text(title, style="italic"))
    for number, row in enumerate(texts, 1):
        console.print(Text(f"── {number} " + "─" * max(0, min(width, 60) - len(str(number)) - 4), style="dim"))
        for index, (name, value) in enumerate(zip(columns, row)):
            room = max(8, width - label - 2)
            shown = value if len(value) <= room or index in ids else value[: room - 1] + ELLIPSIS
            line = Text(f"{str(name).rjust(label)}: ", style="bold")
            line.append(shown)
            console.print(line, soft_wrap=True)
