"""LaTeX for a display equation, rebuilt from the PDF page's own glyphs and vector rules.

Papers parsed with PyMuPDF have no formula model, but the PDF still holds what TeX laid out: every glyph with its
font, size, baseline and ink box, and the rules it drew for fraction bars and radical overbars. TeX's layout is
regular enough to read the structure back: scripts sit on shifted baselines in smaller sizes, limits are centred
above and below big operators, a fraction owns what lies over and under its bar, a radical owns what lies under
its overbar. Fonts say the rest: CMSY capitals are calligraphic, MSBM is blackboard bold, CMEX code points are
big delimiters and operators, NewTX (like Unicode-math fonts such as Cambria Math) uses the math alphabets.

The entry point is :func:`reconstruct_latex`; :func:`latex_comparison_key` is the comparison key used to match two
LaTeX strings that render alike (the benchmark and the tests use it).

Known limits: multi-line displays come out as one ``aligned`` block with the alignment point before each line's
first relation (the author's own alignment columns are not recovered); matrices are read only between a pair of
tall delimiters (or after a lone tall brace, as ``cases``), with columns split at gaps of an em; glyphs of a
neighbouring line that a loose box takes in are read as part of the equation; text is assumed horizontal.

This package's ``__init__`` holds the entry point; the stages it chains live in modules that each import only
the ones listed after them: ``layout`` (:class:`~paperlake.parsing.glyph_latex.layout.Reader`, atoms → LaTeX),
``atoms`` (glyphs and rules read off the page, the equation number, pre-grouping), ``tokens`` (symbol tables, a
font's glyph → a token). ``compare`` (:func:`latex_comparison_key`) stands alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pymupdf

from paperlake.parsing.glyph_latex.atoms import (
    MAX_GLYPHS,
    NUMBER_DROP,
    attach_accents,
    join_delimiter_pieces,
    join_dots,
    join_horizontal_braces,
    join_overlays,
    join_words,
    number_on_next_line,
    read_glyphs,
    read_rules,
    take_equation_numbers,
)
from paperlake.parsing.glyph_latex.compare import latex_comparison_key
from paperlake.parsing.glyph_latex.layout import Reader

__all__ = ["GlyphLatex", "reconstruct_latex", "latex_comparison_key"]


@dataclass(frozen=True)
class GlyphLatex:
    """A reconstruction: LaTeX without the equation number, the number as printed (``"(3)"``), a 0–1 confidence
    that drops with every guess the reader had to make, and notes naming those guesses."""

    latex: str
    equation_number: str | None
    confidence: float
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ entry point


def reconstruct_latex(page: pymupdf.Page, bbox: tuple[float, float, float, float]) -> GlyphLatex:
    """LaTeX for the display equation whose glyphs lie in ``bbox`` (PDF points, top-left origin).

    The equation number is looked for at the right end of the equation's lines, inside the box or as the first
    thing beyond it (or alone on the next line, where amsmath drops a number that does not fit), and returned
    separately as printed (``"(3)"``). Glyphs are kept when their ink centre lies in the box (with a 2 pt
    tolerance, since layout boxes clip). An empty, degenerate or text-sized region gives an empty result with a
    note instead of an error.
    """
    notes: list[str] = []
    rect = pymupdf.Rect(bbox)
    if rect.is_empty or rect.is_infinite:
        return GlyphLatex("", None, 0.0, ["empty region"])
    band = pymupdf.Rect(rect.x0 - 2, rect.y0 - 2, max(rect.x1 + 2, page.rect.x1), rect.y1 + NUMBER_DROP)
    glyphs = read_glyphs(page, band)
    inside = pymupdf.Rect(rect.x0 - 2, rect.y0 - 2, rect.x1 + 2, rect.y1 + 2)
    in_box = [g for g in glyphs if inside.x0 <= g.cx <= inside.x1 and inside.y0 <= g.cy <= inside.y1]
    beside = [g for g in glyphs if g.cx > inside.x1 and inside.y0 <= g.cy <= inside.y1 and g.kind != "piece"]
    numbers, atoms = take_equation_numbers(in_box + beside, rect)
    atoms = [a for a in atoms if a not in beside]
    number = numbers[0][1] if numbers else number_on_next_line([g for g in glyphs if g.cy > inside.y1], rect)
    if len(numbers) > 1:
        notes.append("one number per line: " + " ".join(n for _, n in numbers))
    if not atoms:
        return GlyphLatex("", number, 0.0, notes + ["no glyphs in region"])
    if len(atoms) > MAX_GLYPHS:
        return GlyphLatex("", number, 0.0, notes + [f"{len(atoms)} glyphs: a text region, not a display equation"])
    notes.extend(f"unmapped glyph {a.text!r} (U+{ord(a.text):04X}) in {a.font}" for a in atoms if a.kind == "unknown")
    rules = read_rules(page, inside)
    atoms = join_delimiter_pieces(atoms)
    atoms, rules = join_horizontal_braces(atoms, rules)
    atoms = join_overlays(atoms)
    atoms = join_dots(atoms)
    atoms = join_words(atoms)
    atoms = attach_accents(atoms, notes)
    reader = Reader(notes)
    rows = reader.rows(atoms + rules)
    if len(rows) == 1:
        latex = reader.layout(rows[0])
    else:
        latex = r"\begin{aligned}" + r" \\ ".join(_aligned_row(reader.layout(r)) for r in rows) + r"\end{aligned}"
        notes.append(f"{len(rows)} lines joined in an aligned block")
    unknown = sum(1 for a in atoms if a.kind == "unknown")
    confidence = max(0.0, 1.0 - 0.15 * unknown - 0.05 * reader.guesses - (0.1 if len(rows) > 1 else 0.0))
    return GlyphLatex(latex, number, round(confidence, 2), notes)


_RELATION_START = re.compile(
    r"(?<![\\{_^])(=|<|>|\\leq|\\geq|\\neq|\\approx|\\equiv|\\sim|\\propto|:=|\\le\b|\\ge\b"
    r"|\\Rightarrow|\\iff|\\rightarrow|\\stackrel|\\overset)"
)


def _aligned_row(latex: str) -> str:
    """Put the alignment point before the row's first top-level relation (or at its start)."""
    depth = 0
    for i, ch in enumerate(latex):
        escaped = i > 0 and latex[i - 1] == "\\"
        if ch == "{" and not escaped:
            depth += 1
        elif ch == "}" and not escaped:
            depth -= 1
        elif depth == 0 and _RELATION_START.match(latex, i) and (i == 0 or latex[i - 1] not in "\\_^"):
            return latex[:i] + "&" + latex[i:]
    return "&" + latex
