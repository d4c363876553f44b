"""Table cells: a table region's grid, from PyMuPDF's table finder where rules draw one, else from where the words
sit; and how many rows are header."""

from __future__ import annotations

import re
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pymupdf

from paperlake.parsing.blocks import TableCell
from paperlake.parsing.pymupdf.geometry import Box, _area, _overlaps
from paperlake.parsing.pymupdf.page import _TEXT_FLAGS, _read_page
from paperlake.parsing.pymupdf.structure import _PageAnalysis


def _fill_table_cells(page: pymupdf.Page, analysis: _PageAnalysis) -> None:
    for region in analysis.regions:
        if region.kind == "table":
            region.cells = _grid(page, region.bbox, analysis.content.drawings)


def grid_in_box(page: pymupdf.Page, bbox: Box) -> list[TableCell]:
    """Our own grid of the table another backend found at ``bbox``: the ruled grid, else where the words sit."""
    return _grid(page, bbox, _read_page(page).drawings)


def box_words(page: pymupdf.Page, bbox: Box) -> list[tuple]:
    """The text layer's words inside ``bbox``, as the grid reads them."""
    return page.get_text("words", clip=pymupdf.Rect(bbox), flags=_TEXT_FLAGS)


def _grid(page: pymupdf.Page, bbox: Box, drawings: list[tuple[Box, bool]]) -> list[TableCell]:
    words = box_words(page, bbox)
    return _cells_from_ruled_grid(page, bbox, words, drawings) or _cells_from_text(words, bbox, drawings)


def _cells_from_ruled_grid(
    page: pymupdf.Page, bbox: Box, words: list[tuple], drawings: list[tuple[Box, bool]]
) -> list[TableCell]:
    """Cells from PyMuPDF's table finder when the table draws a grid; texts from our word boxes.

    Booktabs tables (horizontal rules only, the norm in ACL papers) give the line finder nothing to work with
    and cost it up to a second per page, so it only runs where vertical rules exist."""
    vertical_rules = [
        rect for rect, _ in drawings if rect[2] - rect[0] <= 2 and rect[3] - rect[1] >= 8 and _overlaps(rect, bbox)
    ]
    boxes_drawn = [rect for rect, is_box in drawings if is_box and _overlaps(rect, bbox)]
    if len(vertical_rules) < 2 and len(boxes_drawn) < 4:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = page.find_tables(clip=pymupdf.Rect(bbox), use_layout=False)
    tables = [t for t in found.tables if t.row_count >= 2 and t.col_count >= 2]
    if not tables:
        return []
    table = max(tables, key=lambda t: _area(t.bbox))
    if _area(table.bbox) < 0.6 * _area(bbox):
        return []
    boxes = [cell for row in table.rows for cell in row.cells if cell is not None]
    xs = _cluster_edges([b[0] for b in boxes])
    ys = _cluster_edges([b[1] for b in boxes])
    cells = []
    for box in boxes:
        row, col = _edge_index(ys, box[1]), _edge_index(xs, box[0])
        colspan = max(1, sum(1 for x in xs if box[0] - 1 <= x < box[2] - 1))
        rowspan = max(1, sum(1 for y in ys if box[1] - 1 <= y < box[3] - 1))
        inside = [w for w in words if _center_inside(w, box)]
        text = " ".join(w[4] for w in inside)
        if rowspan > 1 and inside:  # a merged cell whose text sits in one of its rows, not centred over them
            top, bottom = min(w[1] for w in inside), max(w[3] for w in inside)
            bands = [(ys[r], ys[r + 1] if r + 1 < len(ys) else box[3]) for r in range(row, row + rowspan)]
            own = [r for r, (y0, y1) in zip(range(row, row + rowspan), bands) if y0 - 1 <= top and bottom <= y1 + 1]
            centred = abs((top + bottom) / 2 - (box[1] + box[3]) / 2) <= 0.25 * (bottom - top)
            if own and not centred:
                row, rowspan = own[0], 1
        cells.append(TableCell(row, col, text, rowspan, colspan))
    # every row of a fully ruled table has its rule: the header is the rows before the first one holding a number
    numeric_rows = sorted({cell.row for cell in cells if _NUMBER.match(cell.text.strip())})
    header_rows = numeric_rows[0] if numeric_rows and numeric_rows[0] > 0 else 1
    for cell in cells:
        cell.is_header = cell.row < header_rows
    return cells


def _cluster_edges(values: list[float], tolerance: float = 2.0) -> list[float]:
    edges: list[float] = []
    for value in sorted(values):
        if not edges or value - edges[-1] > tolerance:
            edges.append(value)
    return edges


def _edge_index(edges: list[float], value: float) -> int:
    return min(range(len(edges)), key=lambda i: abs(edges[i] - value))


def _center_inside(word: tuple, box: Any) -> bool:
    cx, cy = (word[0] + word[2]) / 2, (word[1] + word[3]) / 2
    return box[0] - 1 <= cx <= box[2] + 1 and box[1] - 1 <= cy <= box[3] + 1


@dataclass
class _Segment:
    """The words of one cell in one text row, with where they sit."""

    x0: float
    x1: float
    y0: float
    y1: float
    text: str

    @property
    def middle(self) -> float:
        return (self.x0 + self.x1) / 2


def _cells_from_text(words: list[tuple], bbox: Box, drawings: list[tuple[Box, bool]]) -> list[TableCell]:
    """Cells from word positions: rows by baseline, columns by the gaps that the fullest rows share; then the
    spans a rule-less reading hides. A label set between two rows (``\\multirow`` over an even number of rows) is
    not a row of its own; a stub label with empty stub cells on both sides spans them; a header label spans the
    columns its ``\\cmidrule``/``\\cline`` underlines, else the columns it is centred over."""
    if not words:
        return []
    rows = [_row_segments(row) for row in _word_rows(words)]
    typical = Counter(len(segments) for segments in rows).most_common(1)[0][0]
    boundaries = _column_boundaries([[(g.x0, g.x1, g.text) for g in row] for row in rows if len(row) >= typical])
    n_cols = len(boundaries) + 1
    intervals = _column_intervals(rows, boundaries, typical)
    where: dict[int, _Segment] = {}  # id(cell) -> its words' extent
    grid = [_place(row, boundaries, where) for row in rows]
    grid, rows, spans = _merge_floating_rows(grid, rows)
    rules = [
        rect for rect, _ in drawings if rect[3] - rect[1] <= 2 and rect[2] - rect[0] >= 8 and _overlaps(rect, bbox)
    ]
    header_rows = _header_rows(rows, rules)
    _stub_spans(grid, spans, header_rows)
    for index in range(max(header_rows - 1, 0)):  # group labels sit in the header rows above the last one
        _header_spans(grid[index], where, rows[index + 1] if index + 1 < len(rows) else [], intervals, rules)
    cells = []
    for row_index, placed in enumerate(grid):
        covered = set()
        for cell in placed.values():
            cell.row, cell.is_header = row_index, row_index < header_rows
            cell.rowspan = spans.get((row_index, cell.col), 1)
            covered |= set(range(cell.col, cell.col + cell.colspan))
        for above in range(row_index):  # cells that a row above spans into
            for cell in grid[above].values():
                if above + spans.get((above, cell.col), 1) > row_index:
                    covered |= set(range(cell.col, cell.col + cell.colspan))
        for col in range(n_cols):
            if col not in covered:
                placed[col] = TableCell(row_index, col, "", is_header=row_index < header_rows)
        cells.extend(placed[col] for col in sorted(placed))
    return _drop_overlapping_spans(cells)


def _place(row: list[_Segment], boundaries: list[float], where: dict[int, _Segment]) -> dict[int, TableCell]:
    placed: dict[int, TableCell] = {}
    for segment in row:
        first = _column_at(boundaries, segment.x0 + 0.5)
        last = max(first, _column_at(boundaries, segment.x1 - 0.5))
        if first in placed:
            cell = placed[first]
            cell.text = f"{cell.text} {segment.text}"
            known = where[id(cell)]
            where[id(cell)] = _Segment(
                min(known.x0, segment.x0),
                max(known.x1, segment.x1),
                min(known.y0, segment.y0),
                max(known.y1, segment.y1),
                cell.text,
            )
            continue
        placed[first] = TableCell(0, first, segment.text, colspan=last - first + 1)
        where[id(placed[first])] = segment
    return placed


def _column_intervals(rows: list[list[_Segment]], boundaries: list[float], typical: int) -> list[tuple[float, float]]:
    """Each column's x extent: every one-column segment of any row (a header name can be the column's widest
    cell, and LaTeX sizes the column to it)."""
    extents: dict[int, list[float]] = {}
    for row in rows:
        for segment in row:
            col = _column_at(boundaries, segment.x0 + 0.5)
            if col != _column_at(boundaries, segment.x1 - 0.5):
                continue  # a spanning label says nothing about one column's width
            low, high = extents.get(col, [segment.x0, segment.x1])
            extents[col] = [min(low, segment.x0), max(high, segment.x1)]
    return [tuple(extents.get(col, [0.0, 0.0])) for col in range(len(boundaries) + 1)]


def _merge_floating_rows(
    grid: list[dict[int, TableCell]], rows: list[list[_Segment]]
) -> tuple[list[dict[int, TableCell]], list[list[_Segment]], dict[tuple[int, int], int]]:
    """A row whose labels sit between the rows above and below it, in columns both leave empty, is a label
    centred over two rows (``\\multirow{2}``): it joins the upper row with a row span of two."""
    spans: dict[tuple[int, int], int] = {}
    index = 1
    while index < len(grid) - 1:
        above, here, below = grid[index - 1], grid[index], grid[index + 1]
        middle = (min(g.y0 for g in rows[index]) + max(g.y1 for g in rows[index])) / 2
        between = max(g.y1 for g in rows[index - 1]) - 1 <= middle <= min(g.y0 for g in rows[index + 1]) + 1
        free = all(col not in above and col not in below for col in here)
        if between and free and len(here) < len(above) and len(here) < len(below):
            for col, cell in here.items():
                above[col] = cell
                spans[(index - 1, col)] = 2
            del grid[index], rows[index]
            spans = {(r - 1 if r > index else r, c): n for (r, c), n in spans.items()}
            continue
        index += 1
    return grid, rows, spans


def _stub_spans(grid: list[dict[int, TableCell]], spans: dict[tuple[int, int], int], header_rows: int) -> None:
    """A stub (first-column) label with as many empty stub cells above as below spans them all (``\\multirow``
    over an odd number of rows, or more rows around a two-row middle)."""
    for index, placed in enumerate(grid):
        if 0 not in placed or not placed[0].text:
            continue
        height = spans.get((index, 0), 1)
        # a span stays on its side of the header/body boundary
        low, high = (0, header_rows) if index < header_rows else (header_rows, len(grid))
        up = 0
        while index - up - 1 >= low and 0 not in grid[index - up - 1] and not _spanned(grid, spans, index - up - 1):
            up += 1
        down = 0
        while index + height + down < high and 0 not in grid[index + height + down]:
            down += 1
        k = min(up, down)
        if k and all(len(grid[r]) > 0 for r in range(index - k, index + height + k)):
            cell = grid[index].pop(0)
            grid[index - k][0] = cell
            spans.pop((index, 0), None)
            spans[(index - k, 0)] = height + 2 * k


def _spanned(grid: list[dict[int, TableCell]], spans: dict[tuple[int, int], int], row: int) -> bool:
    return any(r < row < r + n for (r, c), n in spans.items() if c == 0)


def _header_spans(
    placed: dict[int, TableCell],
    where: dict[int, _Segment],
    below: list[_Segment],
    intervals: list[tuple[float, float]],
    rules: list[Box],
) -> None:
    """Group labels in a header row: the columns a rule right under the label covers (``\\cmidrule``,
    ``\\cline``), else the contiguous columns, free in this row, whose extent the label is centred over."""
    next_top = min((g.y0 for g in below), default=None)
    order = sorted(placed.values(), key=lambda c: c.col)
    for position, cell in enumerate(order):
        segment = where.get(id(cell))
        if segment is None or not cell.text:
            continue
        low = order[position - 1].col + order[position - 1].colspan if position else 0
        high = order[position + 1].col - 1 if position + 1 < len(order) else len(intervals) - 1
        rule = next(
            (
                r
                for r in rules
                if segment.y1 - 1 <= r[1] <= (next_top if next_top is not None else r[1]) + 1
                and r[0] <= segment.middle <= r[2]
            ),
            None,
        )
        if rule is not None:
            cols = [c for c in range(low, high + 1) if rule[0] - 2 <= sum(intervals[c]) / 2 <= rule[2] + 2]
        else:
            cols = _centred_span(segment, intervals, low, high)
        if cols:
            cell.col, cell.colspan = cols[0], cols[-1] - cols[0] + 1


def _centred_span(segment: _Segment, intervals: list[tuple[float, float]], low: int, high: int) -> list[int]:
    """The widest run of columns in [low, high] that holds the label and is centred on it (within a fifth of
    the label's width or two points). A run's extent goes from the middle of the gap before its first column to
    the middle of the gap after its last (a table column's box reaches half-way to its neighbours), so columns
    of numbers of different widths do not move its centre."""
    best: list[int] = []
    tolerance = max(2.0, 0.2 * (segment.x1 - segment.x0))
    edges = [(intervals[c][1] + intervals[c + 1][0]) / 2 for c in range(len(intervals) - 1)]
    for first in range(low, high + 1):
        for last in range(first, high + 1):
            left = edges[first - 1] if first > 0 else intervals[first][0]
            right = edges[last] if last < len(edges) else intervals[last][1]
            if first == 0 and last < len(edges):  # an outer column: mirror its inner half-gap
                left = intervals[first][0] - (edges[last] - intervals[last][1])
            if last == len(edges) and first > 0:
                right = intervals[last][1] + (intervals[first][0] - edges[first - 1])
            if left - 2 > segment.x1 or right + 2 < segment.x0 or right <= left:
                continue
            if abs((left + right) / 2 - segment.middle) <= tolerance and last - first + 1 > len(best):
                best = list(range(first, last + 1))
    return best


def _header_rows(rows: list[list[_Segment]], rules: list[Box]) -> int:
    """Rows above the first rule below the table's top rule are the header (booktabs); else the first row."""
    tops = [min(g.y0 for g in row) for row in rows]
    first_text = tops[0] if tops else 0
    inner = sorted(r[1] for r in rules if r[2] - r[0] >= 20 and r[1] > first_text + 2)
    full = [y for y in inner if _spans_table(y, rules)]
    for y in full or inner:
        count = sum(1 for top in tops if top < y)
        if 0 < count < len(rows):
            return count
    # No rule to go by: the rows before the first one holding a number, when some row does.
    numeric = [any(_NUMBER.match(g.text) for g in row) for row in rows]
    if any(numeric) and 0 < numeric.index(True) < len(rows):
        return numeric.index(True)
    return 1 if len(rows) > 1 else 0


_NUMBER = re.compile(r"^[-+−]?\d[\d.,]*%?$")


def _spans_table(y: float, rules: list[Box]) -> bool:
    """A rule as wide as the widest rule: a \\midrule, not a \\cmidrule under a group label."""
    widest = max(r[2] - r[0] for r in rules)
    return any(abs(r[1] - y) < 0.5 and r[2] - r[0] >= 0.9 * widest for r in rules)


def _drop_overlapping_spans(cells: list[TableCell]) -> list[TableCell]:
    """A colspan that runs into a later cell of the same row is shortened, so the HTML grid stays rectangular."""
    by_row: dict[int, list[TableCell]] = {}
    for cell in cells:
        by_row.setdefault(cell.row, []).append(cell)
    for row_cells in by_row.values():
        row_cells.sort(key=lambda c: c.col)
        for cell, following in zip(row_cells, row_cells[1:]):
            cell.colspan = max(1, min(cell.colspan, following.col - cell.col))
    return cells


def _word_rows(words: list[tuple]) -> list[list[tuple]]:
    rows: list[list[tuple]] = []
    for word in sorted(words, key=lambda w: ((w[1] + w[3]) / 2, w[0])):
        center = (word[1] + word[3]) / 2
        if rows:
            last = rows[-1]
            top = min(w[1] for w in last)
            bottom = max(w[3] for w in last)
            if center <= bottom - 0.25 * (bottom - top) and center >= top:
                last.append(word)
                continue
        rows.append([word])
    return [sorted(row, key=lambda w: w[0]) for row in rows]


def _row_segments(row: list[tuple]) -> list[_Segment]:
    """Words of one row grouped into cell texts: a gap wider than about two spaces separates cells."""
    segments: list[_Segment] = []
    for word in row:
        height = word[3] - word[1]
        if segments and word[0] - segments[-1].x1 <= 0.55 * height:
            last = segments[-1]
            last.x1, last.y0, last.y1 = max(last.x1, word[2]), min(last.y0, word[1]), max(last.y1, word[3])
            last.text += " " + word[4]
        else:
            segments.append(_Segment(word[0], word[2], word[1], word[3], word[4]))
    return segments


def _column_boundaries(rows: list[list[tuple[float, float, str]]]) -> list[float]:
    """x positions that separate columns: the middles of gaps no reference-row segment covers."""
    spans = sorted((x0, x1) for segments in rows for x0, x1, _ in segments)
    boundaries = []
    reach = None
    for x0, x1 in spans:
        if reach is not None and x0 > reach:
            boundaries.append((reach + x0) / 2)
        reach = x1 if reach is None else max(reach, x1)
    return boundaries


def _column_at(boundaries: list[float], x: float) -> int:
    return sum(1 for boundary in boundaries if x > boundary)
