"""Display equations: which lines are math set apart from the text, how they group into one row each, and which
"(N)" numbers a row; and the glyph spans that LaTeX is later rebuilt from."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

import pymupdf

from paperlake.parsing.blocks import DocumentLayout
from paperlake.parsing.pymupdf.captions import _CAPTION
from paperlake.parsing.pymupdf.geometry import Box, _chain_groups, _horizontal_gap, _union, _vertical_gap
from paperlake.parsing.pymupdf.page import (
    _MATH_CHARS,
    _MATH_FONT,
    _TEXT_FLAGS,
    Column,
    _column_box,
    _DocumentStyle,
    _Line,
    _PageContent,
)
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
    """Display equations: math lines set apart from the text (seeds), joined into rows (pieces on one baseline,
    the parts of a fraction), grown by the pieces stacked against them (limits, denominators in fonts that read as
    text), and the rows of one display (``aligned``, ``align*``, ``cases``: rows a line gap apart) joined into one
    block with at most one "(N)". Rows that each carry their own number (``align``, ``gather``) stay separate
    equations, and a row without a number joins the numbered row above it, as a continued equation does."""
    numbers = [line for line in lines if _EQUATION_NUMBER.match(line.text) and not line.role]
    number_ids = {id(line) for line in numbers}
    free = [
        line
        for line in lines
        if id(line) not in number_ids and line.role not in _NOT_EQUATION_ROLES and not _ALGORITHM_STEP.match(line.text)
    ]
    body = [line for line in lines if line.role == "body"]
    free = [line for line in free if not _within_text_line(line, body)]
    candidates = [line for line in free if _is_display_math(line, style)]
    for number in numbers:  # a numbered display whose text happens to use few math glyphs
        if not any(_same_row(number, line) for line in candidates):
            candidates += [
                line
                for line in free
                if _same_row(number, line)
                and line.column == number.column
                and not _looks_like_heading(line)
                and line not in candidates
            ]
    rows = _equation_rows(candidates, _fraction_bars(page))
    taken = {id(line) for row in rows for line in row}
    for row in rows:  # pieces of the row set apart by wide spaces ("Model A:  y = β0 + ...")
        box = _union([line.bbox for line in row])
        column = style.column_of(box)
        row += [line for line in free if id(line) not in taken and _beside(line, box, column)]
        taken |= {id(line) for line in row}
    _grow_rows(rows, [line for line in free if id(line) not in taken], style)
    equations = []
    for block in _display_blocks(rows, numbers, style):
        if _axis_labels(block):
            continue
        box = _union([line.bbox for line in block])
        attached = _numbers_of(box, numbers, page)
        number = _EQUATION_NUMBER.match(attached[-1].text).group(1) if attached else None
        for line in block:
            line.role = "equation"
        equations.append(_Equation(box, block, attached, f"({number})" if number else None))
    return equations


_TICK = re.compile(r"[−-]?\d+(?:[.,]\d+)?%?")  # a plot's tick label: 0.5, 10, −2, 80%


def _axis_labels(block: list[_Line]) -> bool:
    """A row of tick labels under a plot's axis (and its title), not an equation: at least three pieces, each a
    number alone, set apart on one row, and nothing else but a few words (the axis title)."""
    ticks = [line for line in block if _TICK.fullmatch(line.text.strip())]
    others = [line for line in block if line not in ticks]
    if len(ticks) < 3 or any(len(line.text.split()) > 3 or _TICK.search(line.text) for line in others):
        return False
    baseline = sorted(line.bbox[3] for line in ticks)[len(ticks) // 2]
    return sum(abs(line.bbox[3] - baseline) <= 2 for line in ticks) >= 3


def _numbers_of(box: Box, numbers: list[_Line], page: _PageContent) -> list[_Line]:
    return [
        n
        for n in numbers
        if box[1] - 2 <= (n.bbox[1] + n.bbox[3]) / 2 <= box[3] + 2 and _horizontal_gap(n.bbox, box) < 0.6 * page.width
    ]


def _grow_rows(rows: list[list[_Line]], rest: list[_Line], style: _DocumentStyle) -> None:
    """Short pieces stacked tight against a row (a sum's limits, a denominator, a lone script) join it: a display
    is set apart from the text by a display skip, far wider than the gaps inside it."""
    reach = 0.5 * style.body_size
    changed = True
    while changed and rest:
        changed = False
        for line in list(rest):
            piece = _math_evidence(line) >= 0.1 or len(line.text.strip()) <= 30
            if not piece or _prose_words(line) >= 3 or _is_code(line) or _looks_like_heading(line):
                continue
            near = []
            for row in rows:
                box = _core_box(row)
                x_overlap = min(box[2], line.bbox[2]) - max(box[0], line.bbox[0])
                gap = _vertical_gap(box, _core_box([line]))
                if x_overlap > 0.5 * min(line.width, box[2] - box[0]) and gap <= reach:
                    near.append((gap, row))
            if near:
                min(near, key=lambda pair: pair[0])[1].append(line)
                rest.remove(line)
                changed = True


def _joins(
    a: tuple[Box, list[_Line], int], b: tuple[Box, list[_Line], int], gap_limit: float, style: _DocumentStyle
) -> bool:
    """Two blocks are rows of one display: one below the other and overlapping horizontally, at most a line gap
    apart, or side by side on one baseline (the left-hand side beside a fraction); at most one number between them."""
    (upper, _, own_upper), (lower, _, own_lower) = sorted((a, b), key=lambda block: block[0][1])
    if own_upper + own_lower > 1 or not _columns_meet(style.column_of(upper), style.column_of(lower)):
        return False
    x_overlap = min(upper[2], lower[2]) - max(upper[0], lower[0])
    if x_overlap > 0 and lower[1] - upper[3] <= gap_limit:
        return True
    return any(
        outer[1] - 2 <= (inner[1] + inner[3]) / 2 <= outer[3] + 2 and _horizontal_gap(outer, inner) < 40
        for outer, inner in ((upper, lower), (lower, upper))
    )


def _columns_meet(a: Column, b: Column) -> bool:
    """A display in one column, or one that a page-wide piece (its box straddles the gutter) belongs to."""
    return a == b or "full" in (a, b)


def _baseline(line: _Line) -> float:
    return max(span["origin"][1] for span in line.spans)


def _core_box(lines: list[_Line]) -> Box:
    """The lines' box from their glyphs' baselines and sizes: PyMuPDF's line boxes take the font's ascender and
    descender, which some fonts (and accents) make several lines tall, so gaps between display rows vanish."""
    spans = [span for line in lines for span in line.spans]
    return (
        min(span["bbox"][0] for span in spans),
        min(span["origin"][1] - 0.75 * span["size"] for span in spans),
        max(span["bbox"][2] for span in spans),
        max(span["origin"][1] + 0.25 * span["size"] for span in spans),
    )


def _display_blocks(rows: list[list[_Line]], numbers: list[_Line], style: _DocumentStyle) -> list[list[_Line]]:
    """Rows of one display joined top to bottom: same column, overlapping horizontally, at most a line gap
    apart, and the block keeps at most one equation number of its own rows."""
    gap_limit = 0.8 * style.body_size
    ordered = sorted(rows, key=lambda row: _union([line.bbox for line in row])[1])
    owner: dict[int, int] = {}  # number -> the nearest row on its baseline band (two columns: the one beside it)
    for n_index, number in enumerate(numbers):
        middle = _baseline(number) - 0.3 * number.size
        near = [
            (round(_horizontal_gap(box, number.bbox)), abs(middle - (box[1] + box[3]) / 2), r_index)
            for r_index, row in enumerate(ordered)
            for box in [_core_box(row)]
            if box[1] - 1 <= middle <= box[3] + 1
        ]
        if near:
            owner[n_index] = min(near)[2]
    blocks: list[tuple[Box, list[_Line], int]] = []  # box, lines, own numbers
    for r_index, row in enumerate(ordered):
        own = sum(1 for row_index in owner.values() if row_index == r_index)
        blocks.append((_core_box(row), list(row), own))
    merged = True
    while merged:  # join any two blocks of one display until none is left to join
        merged = False
        for i, j in itertools.combinations(range(len(blocks)), 2):
            if _joins(blocks[i], blocks[j], gap_limit, style):
                (box_i, lines_i, own_i), (box_j, lines_j, own_j) = blocks[i], blocks[j]
                blocks[i] = (_union([box_i, box_j]), lines_i + lines_j, own_i + own_j)
                del blocks[j]
                merged = True
                break
    return [lines for _, lines, _ in blocks]


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
    wide = [line for line in candidates if id(line) not in narrow]
    rows = _chain_groups(wide, lambda line: line.bbox, 4.0, lambda upper, lower: _same_equation_row(upper, lower, bars))
    for line in candidates:
        if id(line) not in narrow:
            continue
        near = [
            (_vertical_gap(line.bbox, _union([row_line.bbox for row_line in row])), row)
            for row in rows
            if _horizontal_gap(line.bbox, _union([row_line.bbox for row_line in row])) < 10
        ]
        near = [(gap, row) for gap, row in near if gap <= 6]
        if near:
            min(near, key=lambda pair: pair[0])[1].append(line)
        else:
            rows.append([line])
    return rows


def _is_narrow(line: _Line, candidates: list[_Line]) -> bool:
    neighbours = [
        other.width
        for other in candidates
        if _vertical_gap(other.bbox, line.bbox) < 30 and _horizontal_gap(other.bbox, line.bbox) < 10
    ]
    return line.width < 0.35 * max(neighbours, default=line.width)


def _same_equation_row(upper: _Line, lower: _Line, bars: list[Box]) -> bool:
    overlap = min(upper.bbox[3], lower.bbox[3]) - max(upper.bbox[1], lower.bbox[1])
    if overlap >= 0.5 * min(upper.height, lower.height) and _horizontal_gap(upper.bbox, lower.bbox) < 80:
        return True
    x_overlap = min(upper.bbox[2], lower.bbox[2]) - max(upper.bbox[0], lower.bbox[0])
    if x_overlap <= 0 or lower.bbox[1] - upper.bbox[3] > 0.6 * max(upper.size, lower.size):
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
    evidence = _math_evidence(line)
    if _prose_words(line) >= 4 or _is_code(line):  # a sentence with inline math in a list or a frame; a listing
        return False
    if evidence >= 0.6 and len(line.text) >= 3:
        return True
    if _CAPTION.match(line.text):
        return False
    return indented and (evidence >= 0.3 or (evidence >= 0.15 and bool(_RELATION.search(line.text))))


_WORD = re.compile(r"[A-Za-z]{3,}")
_MATH_WORDS = frozenset(
    "exp log ln max min arg argmax argmin sup inf lim sin cos tan tanh sigmoid softmax det diag trace tr var cov "
    "mod gcd sgn sign relu gelu avg mean std err out".split()
)


def _prose_words(line: _Line) -> int:
    """Words of three or more letters in text fonts that are not the names of functions: a sentence has many,
    a formula few ("max", "softmax", a one-word subscript)."""
    return sum(
        1
        for span in line.spans
        if not _MATH_FONT.match(span["font"])
        for word in _WORD.findall(span["text"])
        if word.lower() not in _MATH_WORDS
    )


def _is_code(line: _Line) -> bool:
    """Mostly set in a monospaced font: a code listing's ``x = f(y)`` is not a display equation."""
    mono = sum(
        len(span["text"].strip())
        for span in line.spans
        if span["flags"] & _MONOSPACED or _MONOSPACED_FONT.search(span["font"])
    )
    return mono >= 0.5 * max(1, sum(len(span["text"].strip()) for span in line.spans))


_RELATION = re.compile(r"[=<>≤≥≈≡∝∈→↦]|:=")
_ITALIC, _MONOSPACED = 2, 8  # PyMuPDF span flags
# Many embedded fonts do not set the monospaced flag: know the common typewriter families by name.
_MONOSPACED_FONT = re.compile(
    r"mono|courier|consol|inconsolata|typewriter|cmtt|sfmono|menlo|nimbusmon|txtt|lmtt|beramono|firacode|"
    r"sourcecode|jetbrains",
    re.I,
)


def _math_evidence(line: _Line) -> float:
    """The share of a line's glyphs that read as math: math fonts and symbols (as ``math_share``), plus what
    text fonts set in math too: italic one- or two-letter spans (variables in a Times or Palatino paper) and
    scripts well below the line's size."""
    math = weights = 0
    for span in line.spans:
        text = span["text"].strip()
        weight = len(text)
        weights += weight
        if _MATH_FONT.match(span["font"]):
            math += weight
        elif (span["flags"] & _ITALIC and weight <= 2) or (span["size"] < 0.8 * line.size and weight <= 4):
            math += weight
        else:
            math += len(_MATH_CHARS.findall(span["text"]))
    return min(1.0, max(math / max(weights, 1), line.math_share))


def _equation_text(lines: list[_Line]) -> str:
    """An equation's lines top to bottom (scripts are already merged into their lines)."""
    return " ".join(line.text for line in sorted(lines, key=lambda line: (line.bbox[1], line.bbox[0])))


# ------------------------------------------------------------------------------------------------ glyphs


def _add_glyph_latex(document: pymupdf.Document, layout: DocumentLayout) -> None:
    """LaTeX for every display equation, rebuilt from its glyphs and drawings (see paperlake.parsing.glyph_latex)."""
    from paperlake.parsing.glyph_latex import reconstruct_latex  # deferred: sympy

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
