"""Table cells: a table region's grid, from PyMuPDF's table finder where rules draw one, else from where the words
sit; and how many rows are header."""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import pymupdf

from paperlake.parsing.blocks import TableCell
from paperlake.parsing.pymupdf.geometry import _area, _overlaps
from paperlake.parsing.pymupdf.page import _TEXT_FLAGS
from paperlake.parsing.pymupdf.regions import _Region
from paperlake.parsing.pymupdf.structure import _PageAnalysis


def _fill_table_cells(page: pymupdf.Page, analysis: _PageAnalysis) -> None:
    for region in analysis.regions:
        if region.kind != "table":
            continue
        words = page.get_text("words", clip=pymupdf.Rect(region.bbox), flags=_TEXT_FLAGS)
        ruled = _cells_from_ruled_grid(page, region, words, analysis)
        region.cells = ruled or _cells_from_text(words, region, analysis)


def _cells_from_ruled_grid(
    page: pymupdf.Page, region: _Region, words: list[tuple], analysis: _PageAnalysis
) -> list[TableCell]:
    """Cells from PyMuPDF's table finder when the table draws a grid; texts from our word boxes.

    Booktabs tables (horizontal rules only, the norm in ACL papers) give the line finder nothing to work with
    and cost it up to a second per page, so it only runs where vertical rules exist."""
    vertical_rules = [
        rect for rect, _ in analysis.content.drawings
        if rect[2] - rect[0] <= 2 and rect[3] - rect[1] >= 8 and _overlaps(rect, region.bbox)
    ]
    boxes_drawn = [rect for rect, is_box in analysis.content.drawings if is_box and _overlaps(rect, region.bbox)]
    if len(vertical_rules) < 2 and len(boxes_drawn) < 4:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = page.find_tables(clip=pymupdf.Rect(region.bbox), use_layout=False)
    tables = [t for t in found.tables if t.row_count >= 2 and t.col_count >= 2]
    if not tables:
        return []
    table = max(tables, key=lambda t: _area(t.bbox))
    if _area(table.bbox) < 0.6 * _area(region.bbox):
        return []
    boxes = [cell for row in table.rows for cell in row.cells if cell is not None]
    xs = _cluster_edges([b[0] for b in boxes])
    ys = _cluster_edges([b[1] for b in boxes])
    cells = []
    for box in boxes:
        row, col = _edge_index(ys, box[1]), _edge_index(xs, box[0])
        colspan = max(1, sum(1 for x in xs if box[0] - 1 <= x < box[2] - 1))
        rowspan = max(1, sum(1 for y in ys if box[1] - 1 <= y < box[3] - 1))
        text = " ".join(w[4] for w in words if _center_inside(w, box))
        cells.append(TableCell(row, col, text, rowspan, colspan, is_header=row == 0))
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


def _cells_from_text(words: list[tuple], region: _Region, analysis: _PageAnalysis) -> list[TableCell]:
    """Cells from word positions: rows by baseline, columns by the gaps that the fullest rows share."""
    if not words:
        return []
    rows = _word_rows(words)
    segments_per_row = [_row_segments(row) for row in rows]
    typical = Counter(len(segments) for segments in segments_per_row).most_common(1)[0][0]
    reference_rows = [segments for segments in segments_per_row if len(segments) >= typical]
    boundaries = _column_boundaries(reference_rows)
    header_rows = _header_row_count(rows, region, analysis)
    cells = []
    for row_index, segments in enumerate(segments_per_row):
        occupied: dict[int, TableCell] = {}
        for x0, x1, text in segments:
            first = _column_at(boundaries, x0 + 0.5)
            last = max(first, _column_at(boundaries, x1 - 0.5))
            if first in occupied:
                occupied[first].text = f"{occupied[first].text} {text}"
                continue
            occupied[first] = TableCell(row_index, first, text, colspan=last - first + 1,
                                        is_header=row_index < header_rows)
        covered = {c for cell in occupied.values() for c in range(cell.col, cell.col + cell.colspan)}
        for col in range(len(boundaries) + 1):
            if col not in covered:
                occupied[col] = TableCell(row_index, col, "", is_header=row_index < header_rows)
        cells.extend(occupied[col] for col in sorted(occupied))
    return _drop_overlapping_spans(cells)


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


def _row_segments(row: list[tuple]) -> list[tuple[float, float, str]]:
    """Words of one row grouped into cell texts: a gap wider than about two spaces separates cells."""
    segments: list[list[Any]] = []
    for word in row:
        height = word[3] - word[1]
        if segments and word[0] - segments[-1][1] <= 0.55 * height:
            segments[-1][1] = max(segments[-1][1], word[2])
            segments[-1][2] += " " + word[4]
        else:
            segments.append([word[0], word[2], word[4]])
    return [(s[0], s[1], s[2]) for s in segments]


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


def _header_row_count(rows: list[list[tuple]], region: _Region, analysis: _PageAnalysis) -> int:
    """Rows above the first rule below the table's top rule are the header (booktabs); else the first row."""
    rules = sorted(
        rect[1] for rect, _ in analysis.content.drawings
        if rect[3] - rect[1] <= 2 and rect[2] - rect[0] >= 20 and _overlaps(rect, region.bbox)
    )
    tops = [min(w[1] for w in row) for row in rows]
    first_text = tops[0] if tops else 0
    inner = [y for y in rules if y > first_text + 2]
    if inner:
        count = sum(1 for top in tops if top < inner[0])
        if 0 < count < len(rows):
            return count
    return 1 if len(rows) > 1 else 0
