"""Atoms (glyphs, rules and the structures built from them), read off the page with the equation number taken
apart, then pre-grouped: tall delimiters stacked, horizontal braces, overprinted glyphs, dots, words and accents."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pymupdf

from paperlake.parsing.geometry import union
from paperlake.parsing.glyph_latex.tokens import (
    CLOSE_DELIMITERS,
    FUNCTION_NAMES,
    LIMIT_WORDS,
    OPEN_DELIMITERS,
    STYLE_WRAPPERS,
    font_family,
    glyph_token,
)

# ------------------------------------------------------------------------------------------------ atoms


@dataclass(eq=False)
class Atom:
    """A glyph, a rule, or a structure built from them, with its ink box and where its baseline is."""

    latex: str
    # letter digit word limword rel bin punct ord open close fence prime bigop accent radical negation unknown
    # (glyphs); piece brace-piece hbrace dots (joined glyphs); rule; frac limits (structures)
    kind: str
    x0: float
    y0: float
    x1: float
    y1: float
    baseline: float
    size: float
    style: str = ""
    text: str = ""
    big: bool = False  # a delimiter or operator from an extension font, sized to what it encloses
    font: str = ""
    axis_y: float | None = None  # for what TeX centres on the math axis instead of setting on a baseline

    @property
    def cx(self) -> float:
        return (self.x0 + self.x1) / 2

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2

    @property
    def width(self) -> float:
        return self.x1 - self.x0


def _union(atoms: list[Atom]) -> tuple[float, float, float, float]:
    return union((a.x0, a.y0, a.x1, a.y1) for a in atoms)


def compound_atom(latex: str, kind: str, parts: list[Atom], baseline: float, size: float) -> Atom:
    x0, y0, x1, y1 = _union(parts)
    return Atom(latex, kind, x0, y0, x1, y1, baseline, size)


def dominant_size(atoms: list[Atom]) -> float:
    """The size most of the ink is set in (what a row's baseline is measured against)."""
    weights: dict[float, float] = {}
    for a in atoms:
        if a.kind in {"rule", "limits", "bigop"} or a.big:  # a display operator's size is its own
            continue
        key = round(a.size, 1)
        weights[key] = weights.get(key, 0.0) + max(a.width, 0.5)
    if not weights:
        return max((a.size for a in atoms if a.kind != "rule"), default=10.0)
    largest = max(weights)
    # The largest size that carries a fair share wins: scripts are many but small.
    total = sum(weights.values())
    for key in sorted(weights, reverse=True):
        if weights[key] >= 0.15 * total or key == largest and len(weights) == 1:
            return key
    return largest


# ------------------------------------------------------------------------------------------------ extraction

_TEXT_FLAGS = (
    pymupdf.TEXTFLAGS_RAWDICT | pymupdf.TEXT_ACCURATE_BBOXES | pymupdf.TEXT_INHIBIT_SPACES
) & ~pymupdf.TEXT_PRESERVE_IMAGES
MAX_GLYPHS = 1500  # the longest display equation of the sample corpus has about 300
NUMBER_DROP = 16.0  # how far below the box an equation number pushed onto its own line is looked for
# "(3)", "(10b)", "(A.1)", "(S2)", "(ECE)", "(3')": digits with dotted parts and a letter, or a short capital label.
_NUMBER_TEXT = re.compile(r"^\((?:[A-Z]{0,2}\.?\d{1,3}(?:\.\d{1,3})*[a-z]?|[A-Z][A-Z0-9\-]{0,7})['′]?\)$")


def read_glyphs(page: pymupdf.Page, clip: pymupdf.Rect) -> list[Atom]:
    atoms: list[Atom] = []
    raw = page.get_text("rawdict", clip=clip, flags=_TEXT_FLAGS)
    for block in raw.get("blocks", []):
        for line in block.get("lines", []):
            if abs(line["dir"][1]) > 0.1:
                continue  # rotated text is never part of a display equation
            for span in line["spans"]:
                family = font_family(span["font"], span["flags"])
                for char in span["chars"]:
                    token = glyph_token(char["c"], family)
                    if token is None:
                        continue
                    latex, kind, style = token
                    x0, y0, x1, y1 = char["bbox"]
                    atom = Atom(
                        latex,
                        kind,
                        x0,
                        y0,
                        x1,
                        y1,
                        char["origin"][1],
                        span["size"],
                        style,
                        char["c"],
                        big=family == "ex",
                        font=span["font"],
                    )
                    if atom.big:  # extension glyphs hang from their origin; TeX centres them on the axis
                        atom.axis_y = atom.cy
                        atom.baseline = atom.cy + 0.25 * atom.size
                    atoms.append(atom)
    return atoms


def read_rules(page: pymupdf.Page, clip: pymupdf.Rect) -> list[Atom]:
    """Thin horizontal strokes and filled slivers: fraction bars, radical overbars, overlines."""
    rules = []
    for path in page.get_cdrawings():
        width = path.get("width") or 0.0
        for item in path["items"]:
            if item[0] == "l":
                (ax, ay), (bx, by) = item[1], item[2]
                if abs(ay - by) > 0.3:
                    continue
                x0, x1, y, thickness = min(ax, bx), max(ax, bx), (ay + by) / 2, max(width, 0.2)
            elif item[0] == "re":
                x0, y0, x1, y1 = item[1]
                x0, x1, y0, y1 = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
                if y1 - y0 > 1.6 or x1 - x0 < 2 * (y1 - y0):
                    continue
                y, thickness = (y0 + y1) / 2, max(y1 - y0, width, 0.2)
            else:
                continue
            if x1 - x0 < 1.5 or not (clip.y0 - 1 <= y <= clip.y1 + 1):
                continue
            if x0 < clip.x0 - 2 or x1 > clip.x1 + 2:
                continue
            rules.append(Atom("", "rule", x0, y - thickness / 2, x1, y + thickness / 2, y, thickness))
    return rules


def _take_equation_number(atoms: list[Atom], rect: pymupdf.Rect) -> tuple[str | None, list[Atom]]:
    """The "(3)" set apart to the right of the equation: inside the box or the first thing beyond it (on a
    two-column page whatever follows it belongs to the other column)."""
    main_size = dominant_size(atoms)
    for closing in sorted((a for a in atoms if a.text == ")" and a.size >= 0.8 * main_size), key=lambda a: a.x0):
        line = sorted(
            (
                a
                for a in atoms
                if abs(a.baseline - closing.baseline) < 1.0
                and a.x1 <= closing.x1 + 0.1
                and abs(a.size - closing.size) < 0.5
            ),
            key=lambda a: a.x0,
        )
        opening_index = next((i for i in range(len(line) - 1, -1, -1) if line[i].text == "("), None)
        if opening_index is None:
            continue
        run = line[opening_index:]
        text = "".join(a.text for a in run)
        if not _NUMBER_TEXT.match(text):
            continue
        overlapping = [a for a in atoms if a not in run and a.y1 > run[0].y0 and a.y0 < run[-1].y1]
        left = max((a for a in overlapping if a.x1 <= run[0].x0 + 0.1), key=lambda a: a.x1, default=None)
        if any(run[0].x0 - 0.1 < a.x0 < closing.x1 for a in overlapping):
            continue  # something else sits between the brackets
        if left is not None and (left.x1 > rect.x1 + 2 or run[0].x0 - left.x1 < 0.45 * closing.size):
            continue  # glued to what precedes it, or preceded by text beyond the equation
        if any(0 <= a.x0 - closing.x1 < 1.0 * closing.size for a in overlapping):
            continue  # text follows it: a citation year or an aside in the next column
        if not any(a.x1 <= run[0].x0 and a.cx <= rect.x1 + 2 for a in atoms if a not in run):
            continue  # nothing to its left: a bare parenthesised expression, not a number
        rest = [a for a in atoms if a not in run]
        return text, rest
    return None, atoms


def take_equation_numbers(atoms: list[Atom], rect: pymupdf.Rect) -> tuple[list[tuple[float, str]], list[Atom]]:
    """Every number of a multi-line display (amsmath numbers each line of align), top to bottom."""
    found: list[tuple[float, str]] = []
    while True:
        before = atoms
        number, atoms = _take_equation_number(atoms, rect)
        if number is None:
            return sorted(found), atoms
        found.append((min(a.y0 for a in before if a not in atoms), number))


def number_on_next_line(below: list[Atom], rect: pymupdf.Rect) -> str | None:
    """amsmath drops the number to its own line, flush right, when the equation is too wide for it."""
    mine = [a for a in below if rect.x0 <= a.x0 <= rect.x1 + 5]  # what starts in this column
    if not mine:
        return None
    first = min(mine, key=lambda a: a.baseline)
    line = sorted((a for a in below if abs(a.baseline - first.baseline) < 1.0 and a.x0 >= rect.x0), key=lambda a: a.x0)
    run = [line[0]]
    for a in line[1:]:
        if a.x0 - run[-1].x1 > 0.5 * a.size:
            break
        run.append(a)
    text = "".join(a.text for a in run)
    if _NUMBER_TEXT.match(text) and run[-1].x1 >= rect.x1 - 15 and run[0].x0 > (rect.x0 + rect.x1) / 2:
        return text
    return None


# ------------------------------------------------------------------------------------------------ pre-grouping


def join_delimiter_pieces(atoms: list[Atom]) -> list[Atom]:
    """Stack CMEX pieces (top, extension, bottom) into one tall delimiter."""
    pieces = sorted((a for a in atoms if a.kind == "piece"), key=lambda a: (round(a.x0), a.y0))
    others = [a for a in atoms if a.kind != "piece"]
    stacks: list[list[Atom]] = []
    for piece in pieces:
        for stack in stacks:
            top = stack[-1]
            if abs(piece.x0 - top.x0) < 1.5 and piece.y0 <= top.y1 + 1.5 and piece.y1 > top.y0:
                stack.append(piece)
                break
        else:
            stacks.append([piece])
    for stack in stacks:
        names = [p.latex for p in stack if p.latex != "brace-extension"]
        latex = names[0] if names else r"\{"
        if latex == r"\sqrt":
            kind = "radical"
        elif latex in OPEN_DELIMITERS:
            kind = "open"
        elif latex in CLOSE_DELIMITERS:
            kind = "close"
        else:
            kind = "fence"
        x0, y0, x1, y1 = _union(stack)
        size = stack[0].size
        others.append(
            Atom(latex, kind, x0, y0, x1, y1, (y0 + y1) / 2 + 0.25 * size, size, big=True, axis_y=(y0 + y1) / 2)
        )
    for atom in others:
        if atom.big and atom.kind in {"open", "close", "ord"} and atom.latex in {"|", r"\|"}:
            atom.kind = "fence"
    return others


def join_horizontal_braces(atoms: list[Atom], rules: list[Atom]) -> tuple[list[Atom], list[Atom]]:
    """\\underbrace/\\overbrace: CMEX tips and middle pieces joined by rules, all at one height."""
    pieces = [a for a in atoms if a.kind == "brace-piece"]
    if not pieces:
        return atoms, rules
    groups: list[list[Atom]] = []
    for piece in sorted(pieces, key=lambda a: a.x0):
        group = next((g for g in groups if any(p.y0 < piece.y1 + 1 and piece.y0 < p.y1 + 1 for p in g)), None)
        if group is None:
            groups.append([piece])
        else:
            group.append(piece)
    braces = []
    for group in groups:
        x0, y0, x1, y1 = _union(group)
        fillers = [r for r in rules if abs(r.cy - (y0 + y1) / 2) < 2.5 and r.x0 >= x0 - 1 and r.x1 <= x1 + 1]
        rules = [r for r in rules if r not in fillers]
        braces.append(Atom("", "hbrace", x0, y0, x1, y1, y1, group[0].size, big=True))
    return [a for a in atoms if a.kind != "brace-piece"] + braces, rules


def join_overlays(atoms: list[Atom]) -> list[Atom]:
    """Glyphs TeX builds by overprinting: ≠ from / and =, ↦ from a stem and →, ⟺ from ⇐ and ⇒, --> and ==>."""
    atoms = sorted(atoms, key=lambda a: a.x0)
    negations = [a for a in atoms if a.kind == "negation"]
    for slash in negations:
        target = min(
            (a for a in atoms if a is not slash and a.kind == "rel" and abs(a.cy - slash.cy) < 0.5 * a.size),
            key=lambda a: max(0.0, a.x0 - slash.x1, slash.x0 - a.x1),
            default=None,
        )
        if target is None or max(0.0, target.x0 - slash.x1, slash.x0 - target.x1) > 1.0:
            continue
        target.latex = {"=": r"\neq", r"\in": r"\notin", r"\equiv": r"\not\equiv"}.get(
            target.latex, r"\not" + target.latex
        )
        atoms.remove(slash)
    combined = {
        (r"\Leftarrow", r"\Rightarrow"): r"\iff",
        ("=", r"\Rightarrow"): r"\Longrightarrow",
        (r"\Leftarrow", "="): r"\Longleftarrow",
        ("-", r"\rightarrow"): r"\longrightarrow",
        (r"\leftarrow", "-"): r"\longleftarrow",
        (r"\mapstochar", r"\rightarrow"): r"\mapsto",
        (r"\mapstochar", r"\longrightarrow"): r"\longmapsto",
    }
    merged = True
    while merged:
        merged = False
        for left in atoms:
            right = next(
                (
                    b
                    for b in atoms
                    if (left.latex, b.latex) in combined
                    and b is not left
                    and b.x0 - left.x1 < 0.6
                    and b.x1 > left.x1
                    and b.x0 > left.x0 - 0.5
                    and abs(left.baseline - b.baseline) < 0.5
                ),
                None,
            )
            if right is not None:
                left.latex, left.kind, left.x1 = combined[(left.latex, right.latex)], "rel", max(left.x1, right.x1)
                left.y0, left.y1 = min(left.y0, right.y0), max(left.y1, right.y1)
                atoms.remove(right)
                merged = True
                break
    for slash in [a for a in atoms if a.kind == "negation"]:  # a negation with no relation to strike: a slash
        slash.latex, slash.kind = "/", "ord"
    for atom in atoms:
        if atom.latex == r"\mapstochar":
            atom.latex = r"\mapsto"
    return atoms


def join_dots(atoms: list[Atom]) -> list[Atom]:
    """Three evenly spaced dots on one baseline are \\cdots or \\ldots (TeX sets them as three glyphs)."""
    dots = sorted((a for a in atoms if a.text in {"·", "⋅", "."}), key=lambda a: a.x0)
    used: set[int] = set()
    joined: list[Atom] = []
    for first in dots:
        if id(first) in used:
            continue
        run = [first]
        for other in dots:
            last = run[-1]
            if (
                id(other) not in used
                and other is not first
                and other.text == first.text
                and abs(other.cy - first.cy) < 0.5
                and 0 <= other.x0 - last.x1 < 0.45 * first.size
            ):
                run.append(other)
                if len(run) == 3:
                    break
        gaps = [b.x0 - a.x1 for a, b in zip(run, run[1:])]
        if len(run) == 3 and abs(gaps[0] - gaps[1]) < 0.6:
            latex = r"\ldots" if first.text == "." else r"\cdots"
            joined.append(compound_atom(latex, "dots", run, first.baseline, first.size))
            used.update(id(a) for a in run)
    return [a for a in atoms if id(a) not in used] + joined


def join_words(atoms: list[Atom]) -> list[Atom]:
    """Upright letters set side by side form a word: an operator name (\\log, \\max) or \\mathrm{...}."""
    result: list[Atom] = []
    runs: list[list[Atom]] = []
    for atom in sorted(atoms, key=lambda a: a.x0):
        if not (atom.kind == "letter" and atom.style in {"rm", "bf"} and len(atom.latex) == 1):
            result.append(atom)
            continue
        for run in runs:
            last = run[-1]
            if (
                abs(atom.baseline - last.baseline) < 0.4
                and abs(atom.size - last.size) < 0.3
                and atom.style == last.style
                and -0.5 < atom.x0 - last.x1 < 0.2 * atom.size
            ):
                run.append(atom)
                break
        else:
            runs.append([atom])
    return result + [_word(run) for run in runs]


def _word(run: list[Atom]) -> Atom:
    word = "".join(a.latex for a in run)
    style = run[0].style
    if style == "rm" and word in FUNCTION_NAMES:
        latex = "\\" + word
    elif style == "rm" and word in {"argmax", "argmin"}:
        latex = "\\arg\\" + word[3:]
    elif style == "rm" and word in {"limsup", "liminf"}:
        latex = r"\lim" + word[3:]
    else:
        latex = f"{STYLE_WRAPPERS[style]}{{{word}}}"
    kind = "limword" if style == "rm" and word in LIMIT_WORDS else "word"
    atom = compound_atom(latex, kind, run, run[0].baseline, run[0].size)
    atom.style, atom.text = style, word
    return atom


def attach_accents(atoms: list[Atom], notes: list[str]) -> list[Atom]:
    """An accent glyph (hat, tilde, bar, vec, CMEX wide hat) sits over the glyphs it accents."""
    accents = sorted((a for a in atoms if a.kind == "accent"), key=lambda a: a.y0, reverse=True)
    remaining = [a for a in atoms if a.kind != "accent"]
    for accent in accents:
        if accent.width < 0.5:  # a combining mark reported without ink width: TeX set it before its base
            under = [
                a
                for a in remaining
                if a.kind != "rule"
                and abs(a.x0 - accent.x0) < 0.6
                and a.y1 > accent.y0
                and a.y0 < accent.y1 + 0.6 * a.size
            ]
        else:
            under = [
                a
                for a in remaining
                if a.kind != "rule"
                and a.y0 >= accent.cy - 0.5
                and a.y0 - accent.y1 < 0.6 * a.size
                and min(a.x1, accent.x1) - max(a.x0, accent.x0) > 0
            ]
        if not under:
            notes.append(f"accent {accent.latex} with nothing under it")
            continue
        largest = max(a.size for a in under)
        under = [a for a in under if a.size >= 0.9 * largest]  # a script beside the base is not under the accent
        if accent.big or accent.width > 1.3 * max(a.width for a in under):
            base = [a for a in under if accent.x0 - 1 <= a.cx <= accent.x1 + 1] or under
        else:
            base = [max(under, key=lambda a: (min(a.x1, accent.x1) - max(a.x0, accent.x0)) / max(a.width, 0.1))]
        body = _linear_latex(base)
        latex = f"{accent.latex}{{{body}}}"
        compound = compound_atom(latex, "ord", base + [accent], base[0].baseline, max(a.size for a in base))
        remaining = [a for a in remaining if a not in base] + [compound]
    return remaining


def _linear_latex(atoms: list[Atom]) -> str:
    return join_tokens([a.latex for a in sorted(atoms, key=lambda a: a.x0)])


def join_tokens(tokens: list[str]) -> str:
    """Concatenate LaTeX tokens, keeping a space only where a control word would swallow a letter."""
    out = ""
    for token in tokens:
        if not token:
            continue
        if out and re.search(r"\\[A-Za-z]+$", out) and re.match(r"[A-Za-z0-9]", token):
            out += " "
        out += token
    return out
