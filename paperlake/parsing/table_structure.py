"""A table's structure as HD-RAG reads it: header rows and stub columns, every data cell's column and row header
paths, and its number.

Input is a cell grid from either backend (row, col, rowspan, colspan, text, is_header: MinerU's HTML cells or the
PyMuPDF grids with their recovered spans). The rules:

- **Header rows** are the rows the backend marked as header (booktabs rules, ``<th>``, or the rows before the first
  numeric row); a table with none gets its first row when that row holds no number.
- **Stub columns** (row headers) are the leading columns whose body cells hold no numbers: model names, and to their
  left the group labels of ``\\multirow`` cells.
- A data cell's **column header path** is the text of every header cell whose column span covers the cell's column,
  top to bottom (``["Hard", "BLEU"]``), without the stub's own header ("Model") and without repeats; its **row header
  path** is the text of every stub cell whose row span covers the cell's row, left to right (``["Short", "GPT-2"]``).
- A cell's **number** is parsed from its text: ``77.34``, ``−2.1``, ``45.2 ± 0.3`` (value 45.2, flag ``pm``),
  ``12%`` (flag ``percent``), ``1.2M`` / ``3k`` (scaled, flag ``scaled``), ``(0.5)`` (flag ``parenthesised``),
  ``3e-4``, ``×16`` (flag ``times``), ``£100`` (flag ``currency``), ``94.15 (−0.27%)`` (value 94.15, flag
  ``delta``); a trailing ``*``/``†`` mark is kept as the flag ``marked``.

The frames are polars: spans are expanded into one row per covered grid position and joined back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from paperlake.parsing.glossary import glossed

_NUMBER = re.compile(
    r"^(?P<times>[×x]\s*)?(?P<currency>[$£€¥]\s*)?\(?\s*(?P<sign>[-+−–]?)\s*(?P<int>\d{1,3}(?:,\d{3})+|\d+)?"
    r"(?P<frac>\.\d+)?(?:[eE](?P<exp>[-+−]?\d+))?\s*(?P<scale>[kKMB]\b)?\s*(?P<percent>%)?\s*\)?"
    r"(?:\s*(?:±|\+/-|\\pm)\s*(?P<pm>\d*\.?\d+)\s*%?)?"
    r"(?P<delta>\s*\(\s*[-+−–↑↓]?\s*\d*\.?\d+\s*%?\s*\))?\s*(?P<mark>[*†‡§¶]+)?$"
)
_SCALE = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9}
# What can be wrong with a table's structure (TableStructure.flags); "ok" when nothing is.
STRUCTURE_FLAGS = ("empty", "overlapping_spans", "not_rectangular", "no_header")


@dataclass
class ParsedNumber:
    value: float
    flags: list[str] = field(default_factory=list)


def parse_number(text: str | None) -> ParsedNumber | None:
    """The number a table cell states, with how it was written; None when the cell is not one number."""
    cleaned = (text or "").strip().replace("\u2009", "").replace("\u00a0", " ")
    if not cleaned or not any(ch.isdigit() for ch in cleaned):
        return None
    match = _NUMBER.match(cleaned)
    if match is None or not (match.group("int") or match.group("frac")):
        return None
    digits = (match.group("int") or "0").replace(",", "") + (match.group("frac") or "")
    exponent = match.group("exp")
    value = float(f"{digits}e{exponent.replace('−', '-')}" if exponent else digits)
    flags = []
    if match.group("scale"):
        value *= _SCALE[match.group("scale")]
        flags.append("scaled")
    if match.group("sign") in {"-", "−", "–"}:
        value = -value
    if match.group("percent"):
        flags.append("percent")
    if match.group("pm"):
        flags.append("pm")
    if cleaned.startswith("(") and cleaned.rstrip("*†‡§¶ ").endswith(")") and not match.group("delta"):
        flags.append("parenthesised")
    if match.group("mark"):
        flags.append("marked")
    for name in ("times", "currency", "delta"):  # "×16", "£100", "94.15 (−0.27%)": the value, and how it reads
        if match.group(name):
            flags.append(name)
    return ParsedNumber(value, flags)


@dataclass
class TableStructure:
    """Per table: the header rows and stub columns found, the per-cell paths (a polars frame), and a quality flag."""

    header_rows: int
    stub_columns: int
    cells: pl.DataFrame  # row, col, text, is_header, is_stub, column_header_path, row_header_path, number, flags
    flags: list[str]  # empty when the grid is rectangular, has a header and consistent spans

    @property
    def quality(self) -> str:
        return "ok" if not self.flags else ",".join(self.flags)


def table_structure(cells: list[dict[str, Any]]) -> TableStructure:
    """Header rows, stub columns and each cell's header paths and number, from a cell grid."""
    frame = pl.DataFrame(
        [
            {
                "row": int(c["row"]),
                "col": int(c["col"]),
                "rowspan": int(c.get("rowspan") or 1),
                "colspan": int(c.get("colspan") or 1),
                "text": str(c.get("text") or "").strip(),
                "is_header": bool(c.get("is_header")),
            }
            for c in cells
        ],
        schema={
            "row": pl.Int64,
            "col": pl.Int64,
            "rowspan": pl.Int64,
            "colspan": pl.Int64,
            "text": pl.Utf8,
            "is_header": pl.Boolean,
        },
    )
    if frame.is_empty():
        return TableStructure(0, 0, frame, ["empty"])
    frame = frame.with_columns(
        pl.col("text").map_elements(lambda t: parse_number(t) is not None, return_dtype=pl.Boolean).alias("numeric")
    )
    n_rows = int(frame.select((pl.col("row") + pl.col("rowspan")).max()).item())
    n_cols = int(frame.select((pl.col("col") + pl.col("colspan")).max()).item())
    header_rows = _header_rows(frame)
    stub_columns = _stub_columns(frame, header_rows, n_cols)
    # one row per grid position a cell covers
    covered = (
        frame.with_columns(
            pl.int_ranges("row", pl.col("row") + pl.col("rowspan")).alias("r"),
            pl.int_ranges("col", pl.col("col") + pl.col("colspan")).alias("c"),
        )
        .explode("r")
        .explode("c")
    )
    # a spanning cell counts once per position it covers, so a header cell two rows tall is one step of a path
    headers = covered.filter(
        (pl.col("row") < header_rows) & (pl.col("text") != "") & (pl.col("col") >= stub_columns)
    ).unique(["c", "row", "col"])
    column_paths = (
        headers.sort(["c", "row"]).group_by("c", maintain_order=True).agg(pl.col("text").alias("column_header_path"))
    )
    stubs = _filled_stubs(covered, header_rows, stub_columns)
    row_paths = stubs.sort(["r", "c"]).group_by("r", maintain_order=True).agg(pl.col("text").alias("row_header_path"))
    row_paths = _with_section_labels(row_paths, _section_rows(frame, header_rows, n_rows, n_cols))
    numbers = [parse_number(t) for t in frame["text"]]
    result = (
        frame.with_columns(
            (pl.col("row") < header_rows).alias("is_header"),
            ((pl.col("row") >= header_rows) & (pl.col("col") < stub_columns)).alias("is_stub"),
            pl.Series("number", [n.value if n else None for n in numbers], dtype=pl.Float64),
            pl.Series("flags", [n.flags if n else [] for n in numbers], dtype=pl.List(pl.Utf8)),
        )
        .join(column_paths, left_on="col", right_on="c", how="left")
        .join(row_paths, left_on="row", right_on="r", how="left")
        .with_columns(
            pl.when(pl.col("is_header") | pl.col("is_stub"))
            .then(None)
            .otherwise(pl.col("column_header_path"))
            .alias("column_header_path"),
            pl.when(pl.col("is_header") | pl.col("is_stub"))
            .then(None)
            .otherwise(pl.col("row_header_path"))
            .alias("row_header_path"),
        )
        .sort(["row", "col"])
    )
    return TableStructure(header_rows, stub_columns, result, _quality_flags(covered, n_rows, n_cols, header_rows))


def _filled_stubs(covered: pl.DataFrame, header_rows: int, stub_columns: int) -> pl.DataFrame:
    """Each body row's stub labels (r, c, text): the stub cell covering it, else, on a row that holds data, the label
    last set above it in that column, as a reader reads a blank row header ("triviaqa" over the rows of its group
    when the grid has no row span for it: MinerU's HTML often has none). A label set in a column to the left starts
    a new group, so a blank to its right is not filled from the group before."""
    body = covered.filter(pl.col("r") >= header_rows)
    set_here = body.filter((pl.col("c") < stub_columns) & (pl.col("c") == pl.col("col")) & (pl.col("text") != ""))
    labels = {(r, c): text for r, c, text in set_here.unique(["r", "c"]).select("r", "c", "text").iter_rows()}
    starts = {(r, c) for r, c in set_here.filter(pl.col("r") == pl.col("row")).select("r", "c").iter_rows()}
    data_rows = set(body.filter((pl.col("c") >= stub_columns) & (pl.col("text") != ""))["r"].to_list())
    filled = []
    last: dict[int, str] = {}
    for r in sorted(set(body["r"].to_list())):
        for c in range(stub_columns):
            if (r, c) in labels:
                last[c] = labels[(r, c)]
            if (r, c) in starts:  # a new group on the left: its blanks on the right are its own
                for deeper in [k for k in last if k > c and (r, k) not in labels]:
                    del last[deeper]
            if (r, c) in labels or (r in data_rows and c in last):
                filled.append((r, c, last[c]))
    return pl.DataFrame(filled, schema={"r": pl.Int64, "c": pl.Int64, "text": pl.Utf8}, orient="row")


def _section_rows(frame: pl.DataFrame, header_rows: int, n_rows: int, n_cols: int) -> dict[int, str]:
    """Body rows that label the rows below them ("LLaMA-2 7B", "Ablations"): one non-empty cell, in the first
    column, and nothing else on the row, in a table of at least three columns."""
    if n_cols < 3:
        return {}
    sections = {}
    body = frame.filter((pl.col("row") >= header_rows) & (pl.col("text") != ""))
    for row, group in body.group_by("row"):
        row = int(row[0] if isinstance(row, tuple) else row)
        if (
            group.height == 1
            and group["col"][0] == 0
            and group["rowspan"][0] == 1
            and row < n_rows - 1
            and not group["numeric"][0]
        ):
            sections[row] = group["text"][0]
    return sections


def _with_section_labels(row_paths: pl.DataFrame, sections: dict[int, str]) -> pl.DataFrame:
    """Each row under a section row gets the section's label first in its row header path."""
    if not sections:
        return row_paths
    paths = []
    for row, path in row_paths.iter_rows():
        above = [r for r in sections if r < row]
        label = sections[max(above)] if above and row not in sections else None
        paths.append(([label] if label and label not in path else []) + list(path))
    return row_paths.with_columns(pl.Series("row_header_path", paths, dtype=pl.List(pl.Utf8)))


def _header_rows(frame: pl.DataFrame) -> int:
    marked = frame.filter(pl.col("is_header"))
    if not marked.is_empty():
        marked_rows = int(marked.select((pl.col("row") + pl.col("rowspan")).max()).item())
        return min(marked_rows, _first_measurement_row(frame, marked_rows))
    first = frame.filter(pl.col("row") == 0)
    has_body = frame.filter(pl.col("row") > 0).height > 0
    return 1 if has_body and not first["numeric"].any() else 0


def _first_measurement_row(frame: pl.DataFrame, limit: int) -> int:
    """The first row after the first that reads as results, not headers: most of its cells are measurements
    (decimals, percentages, ± values). A rule under a reference row ("FT 66.4 91.9 …") makes the backend mark it as
    header; integers alone do not count, since header levels are often k = 1, 5, 10 or years."""
    for row in range(1, limit):
        texts = [t for t in frame.filter(pl.col("row") == row)["text"].to_list() if t]
        measured = sum(_is_measurement(t) for t in texts)
        if texts and measured >= 2 and measured * 2 >= len(texts):
            return row
    return limit


def _is_measurement(text: str) -> bool:
    number = parse_number(text)
    return number is not None and ("." in text or bool({"percent", "pm"} & set(number.flags)))


def _stub_columns(frame: pl.DataFrame, header_rows: int, n_cols: int) -> int:
    """Leading columns whose body cells hold text but no number."""
    body = frame.filter((pl.col("row") >= header_rows) & (pl.col("text") != ""))
    count = 0
    for col in range(n_cols - 1):  # the last column is never all row header
        column = body.filter(pl.col("col") == col)
        if column.is_empty() or column["numeric"].any():
            break
        count += 1
    return count


def _quality_flags(covered: pl.DataFrame, n_rows: int, n_cols: int, header_rows: int) -> list[str]:
    flags = []
    positions = covered.group_by(["r", "c"]).len()
    if positions.filter(pl.col("len") > 1).height:
        flags.append("overlapping_spans")
    if positions.height < n_rows * n_cols:
        flags.append("not_rectangular")
    if header_rows == 0:
        flags.append("no_header")
    return flags


# ---------------------------------------------------------------------------------------------------------------
# Units and the row/column representations (HD-RAG's H-RCL)

# "Latency (ms)", "Acc. [%]", "Memory (GB)", "Time (s/iter)": a short unit in brackets at the end of a header.
_UNIT = re.compile(r"[(\[]\s*(%|‰|[A-Za-zµμ$€£]{1,5}(?:\s*/\s*[A-Za-z]{1,6})?)\s*[)\]]\s*$")
# Bracketed words at the end of a header that are not units: "(ours)", "(avg)", "(dev)", "(M)" is a unit (millions).
_NOT_UNITS = frozenset(
    "ours avg mean std all test dev val train base large small full none best ft zs fs sft rl acc em f bleu rouge "
    "auc top new old ref gold ppl sota llm vlm cot".split()
)


def header_unit(path: list[str] | None) -> str | None:
    """The unit a column's header states (its deepest header first): ``["Speed", "Latency (ms)"]`` → ``"ms"``."""
    for text in reversed(path or []):
        match = _UNIT.search(text)
        if match and match.group(1).lower() not in _NOT_UNITS and match.start() > 0:
            return match.group(1).replace(" ", "")
    return None


_PATH_JOIN = " > "
_CAPTION_HEAD_CHARS = 160


def caption_head(label: str | None, caption: str | None) -> str:
    """The caption's first sentence (at most ~160 characters), else the label: what a row or column is about."""
    text = " ".join((caption or "").split())
    if not text:
        return label or "Table"
    skip = 12  # not at "Table 4." or "Fig. 3."
    cut = re.search(r"(?<=[.!?])\s+(?=[A-Z(])", text[skip:])
    head = text[: skip + cut.start()] if cut else text
    if len(head) > _CAPTION_HEAD_CHARS:
        head = head[:_CAPTION_HEAD_CHARS].rsplit(" ", 1)[0] + " …"
    if label and not head.lower().startswith(label.lower()):
        head = f"{label}: {head}"
    return head


@dataclass
class TableLine:
    """One table row or column rendered for retrieval: its index, header path, text and how many numbers it holds."""

    index: int
    header_path: list[str]
    text: str
    num_values: int
    unit: str | None = None
    glossary: list[str] = field(default_factory=list)  # "LABEL: long form" for the labels of its own path


def _path_text(path: list[str] | None) -> str:
    return _PATH_JOIN.join(p for p in (path or []) if p)


def header_labels(structure: TableStructure) -> list[str]:
    """The texts of a table's header and stub cells, in reading order, once each."""
    cells = structure.cells
    if cells.is_empty():
        return []
    labels = cells.filter(pl.col("is_header") | pl.col("is_stub")).sort(["row", "col"])["text"].to_list()
    return list(dict.fromkeys(t.strip() for t in labels if t and t.strip()))


def table_lines(
    structure: TableStructure, head: str, glossary: dict[str, str] | None = None
) -> tuple[list[TableLine], list[TableLine]]:
    """HD-RAG's row- and column-level representations of a table, deterministic text (no LLM).

    A row renders as ``<caption head>`` / ``Row: <row header path>`` / ``<column header path>: <value>; …`` and a
    column as ``<caption head>`` / ``Column: <column header path> (unit)`` / ``<row header path>: <value>; …``, so a
    question naming a model and a metric finds the one line holding both with the value beside them. Body rows only
    (header rows are in every line's paths); data columns only (the stub columns are every row's path). A cell
    spanning rows or columns is a value of each line it covers. A label the paper defines (``glossary``, from
    :mod:`paperlake.parsing.glossary`) is stated beside it in the line's own ``Row:``/``Column:`` path
    (``Row: 2D+ (addition)``), and the line's ``glossary`` lists those definitions.
    """
    glossary = glossary or {}

    def own_path(path: list[str]) -> tuple[str, list[str]]:
        parts = [p for p in path if p]
        return (
            _PATH_JOIN.join(glossed(p, glossary) for p in parts),
            [f"{p.strip()}: {glossary[p.strip()]}" for p in parts if p.strip() in glossary],
        )

    cells = structure.cells
    if cells.is_empty():
        return [], []
    body = cells.filter(~pl.col("is_header") & ~pl.col("is_stub") & (pl.col("text") != ""))
    rows_out: list[TableLine] = []
    columns_out: list[TableLine] = []
    n_rows = int(cells.select((pl.col("row") + pl.col("rowspan")).max()).item())
    n_cols = int(cells.select((pl.col("col") + pl.col("colspan")).max()).item())
    records = body.to_dicts()
    if not records:  # nothing below the header (a grid read as one header row): each grid row is a line
        return _flat_lines(cells, head), []
    column_paths: dict[int, list[str]] = {}
    for record in records:
        for c in range(record["col"], record["col"] + record["colspan"]):
            column_paths.setdefault(c, list(record["column_header_path"] or []))
    for r in range(structure.header_rows, n_rows):
        values = [x for x in records if x["row"] <= r < x["row"] + x["rowspan"]]
        if not values:  # a row of empty cells, a section label, or the second line of a spanning row label
            continue
        parts = [
            f"{_path_text(v['column_header_path'])}: {v['text']}" if v["column_header_path"] else v["text"]
            for v in sorted(values, key=lambda v: v["col"])
        ]
        own = [v for v in values if v["row"] == r] or values
        path = list(own[0]["row_header_path"] or [])
        shown, defined = own_path(path)
        label = f"Row: {shown}" if path else f"Row {r + 1 - structure.header_rows}"
        rows_out.append(
            TableLine(
                r,
                path,
                f"{head}\n{label}\n" + "; ".join(parts),
                sum(v["number"] is not None for v in values),
                glossary=defined,
            )
        )
    for c in range(structure.stub_columns, n_cols):
        values = [x for x in records if x["col"] <= c < x["col"] + x["colspan"]]
        if not values:
            continue
        path = column_paths.get(c, [])
        unit = header_unit(path)
        parts = [
            f"{_path_text(v['row_header_path'])}: {v['text']}" if v["row_header_path"] else v["text"]
            for v in sorted(values, key=lambda v: v["row"])
        ]
        shown, defined = own_path(path)
        label = f"Column: {shown}" if path else f"Column {c + 1 - structure.stub_columns}"
        columns_out.append(
            TableLine(
                c,
                path,
                f"{head}\n{label}\n" + "; ".join(parts),
                sum(v["number"] is not None for v in values),
                unit,
                defined,
            )
        )
    return rows_out, columns_out


def _flat_lines(cells: pl.DataFrame, head: str) -> list[TableLine]:
    lines = []
    for (row,), group in cells.filter(pl.col("text") != "").sort(["row", "col"]).group_by("row", maintain_order=True):
        texts = group["text"].to_list()
        lines.append(
            TableLine(
                int(row),
                [],
                f"{head}\nRow {int(row) + 1}\n" + " | ".join(texts),
                int(group["number"].is_not_null().sum()),
            )
        )
    return lines
