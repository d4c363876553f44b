"""Display equations: which lines are math set apart from the text, how they group into one row each, and which
"(N)" numbers a row; and the glyph spans that LaTeX is later rebuilt from."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pymupdf

from paperlake.parsing.blocks import DocumentLayout
from paperlake.parsing.pymupdf.captions import _CAPTION
from paperlake.parsing.pymupdf.geometry import Box, _horizontal_gap, _union, _vertical_gap
from paperlake.parsing.pymupdf.page import _TEXT_FLAGS, Column, _column_box, _DocumentStyle, _Line, _PageContent
from paperlake.parsing.pymupdf.regions import _looks_like_heading

_EQUATION_NUMBER = re.compile(r"^\(\s*((?:[A-Z]\.)?\d+[a-z]?(?:\.\d+)?)\s*\)$")
_ALGORITHM_STEP = re.compile(r"^\d{1,2}:\s")  # numbered pseudo-code lines are not display equations

_NOT_EQUATION_ROLES = frozenset({"body", "footer", "header", "caption"})


@dataclass
class _Equation:
    bbox: Box
    lines: list[_Line]
    number_lines: list[_Line]
    number: str | None


def _find_equations(lines: list[_Line], page: _PageContent, style: _DocumentStyle) -> list[_Equation]:
    """Display equations, one per row of a multi-line display: math lines set apart from the text, the pieces
    on their baseline, the parts of their fractions, and the "(N)" at the column's right edge."""
    numbers = [line for line in lines if _EQUATION_NUMBER.match(line.text) and not line.role]
    number_ids = {id(line) for line in numbers}
    free = [
        line for line in lines
        if id(line) not in number_ids and line.role not in _NOT_EQUATION_ROLES and not _ALGORITHM_STEP.match(line.text)
    ]
    body = [line for line in lines if line.role == "body"]
    candidates = [line for line in free if _is_display_math(line, style) and not _within_text_line(line, body)]
    for number in numbers:  # a numbered display whose text happens to use few math glyphs
        if not any(_same_row(number, line) for line in candidates):
            candidates += [
                line for line in free
                if _same_row(number, line) and line.column == number.column and not _looks_like_heading(line)
                and line not in candidates
            ]
    rows = _equation_rows(candidates, _fraction_bars(page))
    taken = {id(line) for row in rows for line in row}
    for row in rows:  # pieces of the row set apart by wide spaces ("Model A:  y = β0 + ...")
        box = _union([line.bbox for line in row])
        column = style.column_of(box)
        row += [line for line in free if id(line) not in taken and _beside(line, box, column)]
        taken |= {id(line) for line in row}
    equations = []
    for row in sorted(rows, key=lambda r: _union([line.bbox for line in r])[1]):
        box = _union([line.bbox for line in row])
        attached = [n for n in numbers if box[1] - 2 <= (n.bbox[1] + n.bbox[3]) / 2 <= box[3] + 2
                    and _horizontal_gap(n.bbox, box) < 0.6 * page.width]
        number = _EQUATION_NUMBER.match(attached[-1].text).group(1) if attached else None
        for line in row:
            line.role = "equation"
        equations.append(_Equation(box, row, attached, f"({number})" if number else None))
    return equations


def _within_text_line(line: _Line, body: list[_Line]) -> bool:
    """Inline math that PyMuPDF split off its sentence sits on the baseline band of a body line."""
    center = (line.bbox[1] + line.bbox[3]) / 2
    return any(
        other.bbox[1] + 1 <= center <= other.bbox[3] - 1 and _horizontal_gap(line.bbox, other.bbox) < 2
        for other in body
    )


def _beside(line: _Line, box: Box, column: Column) -> bool:
    """A label or a piece of the same display on its baseline ("Model A:", "+ ε"), not a run of words."""
    center = (line.bbox[1] + line.bbox[3]) / 2
    same_column = line.column == column or (column != "full" and line.column == "full")
    piece = line.math_share >= 0.2 or len(line.text) <= 25
    return box[1] - 2 <= center <= box[3] + 2 and _horizontal_gap(line.bbox, box) < 80 and same_column and piece


def _equation_rows(candidates: list[_Line], bars: list[Box]) -> list[list[_Line]]:
    """Candidate lines joined into rows: side by side on one baseline, or numerator and denominator across a
    fraction bar. Narrow lines (the limits of a sum, a lone script) then join the one row nearest to them, so
    they cannot chain the rows of a multi-line display into one."""
    narrow = {id(line) for line in candidates if _is_narrow(line, candidates)}
    wide = sorted((line for line in candidates if id(line) not in narrow), key=lambda line: line.bbox[1])
    parent = list(range(len(wide)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, upper in enumerate(wide):
        for j in range(i + 1, len(wide)):
            lower = wide[j]
            if lower.bbox[1] > upper.bbox[3] + 4:
                break
            if _same_equation_row(upper, lower, bars):
                parent[root(j)] = root(i)
    grouped: dict[int, list[_Line]] = {}
    for i, line in enumerate(wide):
        grouped.setdefault(root(i), []).append(line)
    rows = list(grouped.values())
    for line in candidates:
        if id(line) not in narrow:
            continue
        near = [(_vertical_gap(line.bbox, _union([l.bbox for l in row])), row) for row in rows
                if _horizontal_gap(line.bbox, _union([l.bbox for l in row])) < 10]
        near = [(gap, row) for gap, row in near if gap <= 6]
        if near:
            min(near, key=lambda pair: pair[0])[1].append(line)
        else:
            rows.append([line])
    return rows


def _is_narrow(line: _Line, candidates: list[_Line]) -> bool:
    neighbours = [
        other.width for other in candidates
        if _vertical_gap(other.bbox, line.bbox) < 30 and _horizontal_gap(other.bbox, line.bbox) < 10
    ]
    return line.width < 0.35 * max(neighbours, default=line.width)


def _same_equation_row(upper: _Line, lower: _Line, bars: list[Box]) -> bool:
    overlap = min(upper.bbox[3], lower.bbox[3]) - max(upper.bbox[1], lower.bbox[1])
    if overlap >= 0.5 * min(upper.height, lower.height) and _horizontal_gap(upper.bbox, lower.bbox) < 80:
        return True
    x_overlap = min(upper.bbox[2], lower.bbox[2]) - max(upper.bbox[0], lower.bbox[0])
    if x_overlap <= 0 or lower.bbox[1] - upper.bbox[3] > 3:
        return False
    return any(
        upper.bbox[3] - 3 <= bar[1] <= lower.bbox[1] + 3
        and min(bar[2], upper.bbox[2], lower.bbox[2]) - max(bar[0], upper.bbox[0], lower.bbox[0]) > 0
        for bar in bars
    )


def _fraction_bars(page: _PageContent) -> list[Box]:
    return [rect for rect, _ in page.drawings if rect[3] - rect[1] <= 1.5 and 3 <= rect[2] - rect[0] <= 300]


def _same_row(a: _Line, b: _Line) -> bool:
    center = (a.bbox[1] + a.bbox[3]) / 2
    return b.bbox[1] - 2 <= center <= b.bbox[3] + 2


def _is_display_math(line: _Line, style: _DocumentStyle) -> bool:
    left, right = _column_box(style, line.column)
    indented = line.bbox[0] - left >= 12 and right - line.bbox[2] >= 12
    if line.math_share >= 0.6 and len(line.text) >= 3:
        return True
    return indented and line.math_share >= 0.3 and not _CAPTION.match(line.text)


def _equation_text(lines: list[_Line]) -> str:
    """An equation's lines top to bottom (scripts are already merged into their lines)."""
    return " ".join(line.text for line in sorted(lines, key=lambda l: (l.bbox[1], l.bbox[0])))


# ------------------------------------------------------------------------------------------------ glyphs


def _add_glyph_latex(document: pymupdf.Document, layout: DocumentLayout) -> None:
    """LaTeX for every display equation, rebuilt from its glyphs and drawings (see paperlake.latex_glyphs)."""
    from paperlake.latex_glyphs import reconstruct_latex

    for block in layout.blocks:
        if block.kind != "equation":
            continue
        rebuilt = reconstruct_latex(document[block.page_number - 1], block.bbox)
        if rebuilt.latex:
            block.latex = rebuilt.latex
            block.equation_number = block.equation_number or rebuilt.equation_number


def equation_spans(page: pymupdf.Page, bbox: Box) -> list[dict[str, Any]]:
    """The glyph spans of a display equation, each with ``chars`` (per-glyph bbox, origin, character), font,
    size and flags, in PDF order: the input for rebuilding LaTeX from glyphs. ``page`` is
    ``document[block.page_number - 1]`` and ``bbox`` the equation block's ``(x0, y0, x1, y1)``."""
    raw = page.get_text("rawdict", flags=_TEXT_FLAGS, clip=pymupdf.Rect(bbox))
    return [span for block in raw["blocks"] for line in block.get("lines", []) for span in line["spans"]]
