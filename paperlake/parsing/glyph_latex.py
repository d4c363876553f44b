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
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from dataclasses import dataclass, field

import pymupdf

from paperlake.formulas.latex.symbols import GREEK_LETTERS, SYMBOLS, TEX_FUNCTION_NAMES
from paperlake.parsing.geometry import union

__all__ = ["GlyphLatex", "reconstruct_latex", "latex_comparison_key"]


@dataclass(frozen=True)
class GlyphLatex:
    """A reconstruction: LaTeX without the equation number, the number as printed (``"(3)"``), a 0–1 confidence
    that drops with every guess the reader had to make, and notes naming those guesses."""

    latex: str
    equation_number: str | None
    confidence: float
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ symbol tables

_GREEK = GREEK_LETTERS
_SYMBOLS = SYMBOLS
_FUNCTION_NAMES = TEX_FUNCTION_NAMES
# Upright words that take limits underneath in display style.
_LIMIT_WORDS = {"max", "min", "sup", "inf", "lim", "limsup", "liminf", "argmax", "argmin"}

# CMEX10 (and NewTX's txexs, which keeps CMEX's slots for what the corpus uses) by code point.
_CMEX_DELIMITERS = {
    0x00: "(",
    0x01: ")",
    0x02: "[",
    0x03: "]",
    0x04: r"\lfloor",
    0x05: r"\rfloor",
    0x06: r"\lceil",
    0x07: r"\rceil",
    0x08: r"\{",
    0x09: r"\}",
    0x0A: r"\langle",
    0x0B: r"\rangle",
    0x0E: "/",
    0x0F: r"\backslash",
    0x10: "(",
    0x11: ")",
    0x12: "(",
    0x13: ")",
    0x14: "[",
    0x15: "]",
    0x16: r"\lfloor",
    0x17: r"\rfloor",
    0x18: r"\lceil",
    0x19: r"\rceil",
    0x1A: r"\{",
    0x1B: r"\}",
    0x1C: r"\langle",
    0x1D: r"\rangle",
    0x1E: "/",
    0x1F: r"\backslash",
    0x20: "(",
    0x21: ")",
    0x22: "[",
    0x23: "]",
    0x24: r"\lfloor",
    0x25: r"\rfloor",
    0x26: r"\lceil",
    0x27: r"\rceil",
    0x28: r"\{",
    0x29: r"\}",
    0x2A: r"\langle",
    0x2B: r"\rangle",
    0x2C: "/",
    0x2D: r"\backslash",
    0x2E: "/",
    0x2F: r"\backslash",
    0x44: r"\langle",
    0x45: r"\rangle",
    0x68: "[",
    0x69: "]",
    0x6A: r"\lfloor",
    0x6B: r"\rfloor",
    0x6C: r"\lceil",
    0x6D: r"\rceil",
    0x6E: r"\{",
    0x6F: r"\}",
}
_CMEX_BIGOPS = {
    0x46: r"\bigsqcup",
    0x47: r"\bigsqcup",
    0x48: r"\oint",
    0x49: r"\oint",
    0x4A: r"\bigodot",
    0x4B: r"\bigodot",
    0x4C: r"\bigoplus",
    0x4D: r"\bigoplus",
    0x4E: r"\bigotimes",
    0x4F: r"\bigotimes",
    0x50: r"\sum",
    0x51: r"\prod",
    0x52: r"\int",
    0x53: r"\bigcup",
    0x54: r"\bigcap",
    0x55: r"\biguplus",
    0x56: r"\bigwedge",
    0x57: r"\bigvee",
    0x58: r"\sum",
    0x59: r"\prod",
    0x5A: r"\int",
    0x5B: r"\bigcup",
    0x5C: r"\bigcap",
    0x5D: r"\biguplus",
    0x5E: r"\bigwedge",
    0x5F: r"\bigvee",
    0x60: r"\coprod",
    0x61: r"\coprod",
    0xCD: r"\sum",  # txexs: the text-style sum as NewTX's subset fonts report it
}
_CMEX_ACCENTS = {0x62: r"\hat", 0x63: r"\hat", 0x64: r"\hat", 0x65: r"\tilde", 0x66: r"\tilde", 0x67: r"\tilde"}
_CMEX_RADICALS = {0x70, 0x71, 0x72, 0x73}
# Pieces of tall delimiters: CMEX slots, Adobe Symbol private-use slots, Unicode bracket pieces → the delimiter.
_DELIMITER_PIECES = {
    **dict.fromkeys(["\x30", "\x40", "\x42", "\uf8eb", "\uf8ec", "\uf8ed", "⎛", "⎜", "⎝"], "("),
    **dict.fromkeys(["\x31", "\x41", "\x43", "\uf8f6", "\uf8f7", "\uf8f8", "⎞", "⎟", "⎠"], ")"),
    **dict.fromkeys(["\x32", "\x34", "\x36", "\uf8ee", "\uf8ef", "\uf8f0", "⎡", "⎢", "⎣"], "["),
    **dict.fromkeys(["\x33", "\x35", "\x37", "\uf8f9", "\uf8fa", "\uf8fb", "⎤", "⎥", "⎦"], "]"),
    **dict.fromkeys(["\x38", "\x3a", "\x3c", "\uf8f1", "\uf8f2", "\uf8f3", "⎧", "⎨", "⎩"], r"\{"),
    **dict.fromkeys(["\x39", "\x3b", "\x3d", "\uf8fc", "\uf8fd", "\uf8fe", "⎫", "⎬", "⎭"], r"\}"),
    **dict.fromkeys(["\x3e", "\uf8f4", "⎪"], "brace-extension"),
    **dict.fromkeys(["\x0c", "⏐", "\uf8e6"], "|"),
    **dict.fromkeys(["\x0d", "\x77"], r"\|"),
    **dict.fromkeys(["\x74", "\x75", "\x76", "\uf8e5"], r"\sqrt"),
}
_HORIZONTAL_BRACE_PIECES = {"\x7a", "\x7b", "\x7c", "\x7d"}
_OPEN_DELIMITERS = {"(", "[", r"\{", r"\langle", r"\lfloor", r"\lceil"}
_CLOSE_DELIMITERS = {")", "]", r"\}", r"\rangle", r"\rfloor", r"\rceil"}

_STYLE_WRAPPERS = {
    "bf": r"\mathbf",
    "bfit": r"\boldsymbol",
    "cal": r"\mathcal",
    "bb": r"\mathbb",
    "frak": r"\mathfrak",
    "scr": r"\mathscr",
    "sf": r"\mathsf",
    "tt": r"\mathtt",
    "rm": r"\mathrm",
}
_MATH_ALPHABET_STYLES = [
    ("DOUBLE-STRUCK", "bb"),
    ("BOLD FRAKTUR", "frak"),
    ("FRAKTUR", "frak"),
    ("BOLD SCRIPT", "cal"),
    ("SCRIPT", "cal"),
    ("BLACK-LETTER", "frak"),
    ("MONOSPACE", "tt"),
    ("SANS-SERIF BOLD ITALIC", "bfit"),
    ("SANS-SERIF BOLD", "bf"),
    ("SANS-SERIF ITALIC", "sf"),
    ("SANS-SERIF", "sf"),
    ("BOLD ITALIC", "bfit"),
    ("BOLD", "bf"),
    ("ITALIC", "it"),
    ("PLANCK", "it"),
]


# ------------------------------------------------------------------------------------------------ atoms


@dataclass(eq=False)
class _Atom:
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


def _union(atoms: list[_Atom]) -> tuple[float, float, float, float]:
    return union((a.x0, a.y0, a.x1, a.y1) for a in atoms)


def _compound(latex: str, kind: str, parts: list[_Atom], baseline: float, size: float) -> _Atom:
    x0, y0, x1, y1 = _union(parts)
    return _Atom(latex, kind, x0, y0, x1, y1, baseline, size)


# ------------------------------------------------------------------------------------------------ fonts → tokens


def _font_family(fontname: str, flags: int) -> str:
    """Which alphabet a font's letters belong to: it, rm, bf, bfit, cal, bb, frak, sy (symbols), ex (extension)."""
    name = fontname.split("+")[-1]
    upper = name.upper()
    base = re.sub(r"\d+$", "", upper)
    if base in {"CMEX", "EUEX", "TXEXS", "TXEX", "PXEX", "PXEXS", "EXTENSIONSCM"} or base.startswith("TXEX"):
        return "ex"
    if base in {"CMMIB", "NEWTXBMI", "TXBMI", "PXBMI"} or base.startswith("NEWTXBMI"):
        return "bfit"
    if base in {"CMMI", "NEWTXMI", "TXMI", "PXMI"} or base.startswith("NEWTXMI"):
        return "it"
    if base in {"CMSY", "CMBSY", "TXSYS", "TXSY", "PXSYS", "PXSY"} or base.startswith("TXSY"):
        return "sy"
    if base in {"EUSM", "EUSB"}:
        return "cal"
    if (
        base in {"MSBM", "TXMIASTBB", "DSROM", "BBOLD", "BBM", "DSSS"}
        or "DOUBLESTRUCK" in upper
        or "BLACKBOARD" in upper
    ):  # PazoMathBlackboardBold (mathpazo's \mathbb)
        return "bb"
    if base in {"EUFM", "EUFB"}:
        return "frak"
    if base in {"RSFS"}:
        return "scr"
    if base in {"CMBX", "CMBXTI"}:
        return "bf"
    if base.startswith(("CMR", "CMSS", "CMTT", "CMU", "LMROMAN", "LMR")):
        return "rm"
    if base.startswith("CMTI") or base.startswith("CMSL"):
        return "it"
    bold = bool(flags & pymupdf.TEXT_FONT_BOLD) or any(k in upper for k in ("BOLD", "MEDI", "-BD", "BLACK"))
    italic = bool(flags & pymupdf.TEXT_FONT_ITALIC) or any(k in upper for k in ("ITAL", "OBLIQUE", "-IT"))
    if bold and italic:
        return "bfit"
    if bold:
        return "bf"
    if italic:
        return "it"
    return "rm"


def _math_alphabet(char: str) -> tuple[str, str] | None:
    """A Unicode math-alphabet letter (𝜽, 𝑡, ℝ, 𝟙, ℒ) → (plain letter, style)."""
    code = ord(char)
    if not (0x1D400 <= code <= 0x1D7FF or 0x2100 <= code <= 0x214F):
        return None
    name = unicodedata.name(char, "")
    style = next((s for key, s in _MATH_ALPHABET_STYLES if key in name), None)
    if style is None:
        return None
    if "PARTIAL DIFFERENTIAL" in name:
        return "∂", style
    if "NABLA" in name:
        return "∇", style
    symbol_variants = {
        "EPSILON SYMBOL": "ϵ",
        "THETA SYMBOL": "ϑ",
        "PHI SYMBOL": "ϕ",
        "KAPPA SYMBOL": "ϰ",
        "RHO SYMBOL": "ϱ",
        "PI SYMBOL": "ϖ",
        "CAPITAL THETA SYMBOL": "ϴ",
    }
    for key, plain in symbol_variants.items():
        if name.endswith(key):
            return plain, style
    plain = unicodedata.normalize("NFKC", char)
    if plain == "ϵ":  # NFKC folds the lunate epsilon; the math alphabet's plain EPSILON is ε
        plain = "ε"
    return (plain, style) if len(plain) == 1 else None


def _styled(letter_latex: str, style: str) -> str:
    wrapper = _STYLE_WRAPPERS.get(style)
    if wrapper is None or style == "rm":
        return letter_latex
    return f"{wrapper}{{{letter_latex}}}"


def _glyph_token(char: str, family: str) -> tuple[str, str, str] | None:
    """One glyph → (LaTeX, class, style), or None for what carries no ink of its own (spaces, selectors)."""
    code = ord(char)
    if family == "ex":
        if code < 0x80 or code == 0xCD:
            if code in _CMEX_BIGOPS:
                return _CMEX_BIGOPS[code], "bigop", ""
            if char in _DELIMITER_PIECES and code not in _CMEX_DELIMITERS:
                return _DELIMITER_PIECES[char], "piece", ""
            if code in _CMEX_DELIMITERS:
                latex = _CMEX_DELIMITERS[code]
                kind = "open" if latex in _OPEN_DELIMITERS else "close" if latex in _CLOSE_DELIMITERS else "ord"
                return latex, kind, ""
            if code in _CMEX_ACCENTS:
                return _CMEX_ACCENTS[code], "accent", ""
            if code in _CMEX_RADICALS:
                return r"\sqrt", "radical", ""
            if char in _HORIZONTAL_BRACE_PIECES:
                return "", "brace-piece", ""
        if char in _DELIMITER_PIECES:
            return _DELIMITER_PIECES[char], "piece", ""
    elif char in _DELIMITER_PIECES and not (char.isascii() and char.isprintable()):
        return _DELIMITER_PIECES[char], "piece", ""
    if char.isspace() or unicodedata.category(char) in {"Cc", "Cf"} or 0xFE00 <= code <= 0xFE0F:
        return None
    if char == "\u0338":
        return r"\not", "negation", ""
    alphabet = None if char in _SYMBOLS or char in _GREEK else _math_alphabet(char)
    if alphabet is not None:
        char, family = alphabet
    if family == "sy" and "A" <= char <= "Z":
        return _styled(char, "cal"), "letter", "cal"
    if family == "sy" and char == "7":
        return r"\mapstochar", "rel", ""  # CMSY's stem of ↦, joined with the arrow later
    if family == "rm" and char in {"^", "~"}:
        return (r"\hat" if char == "^" else r"\tilde"), "accent", ""
    if char.isascii() and char.isalpha():
        style = family if family in _STYLE_WRAPPERS else "it"
        # Upright and bold letters are wrapped when words are joined; the other alphabets wrap each letter.
        return (char if style in {"rm", "bf"} else _styled(char, style)), "letter", style
    if char.isdigit() and char.isascii():
        style = family if family in {"bb", "bf", "bfit"} else ""
        return _styled(char, "bf" if style == "bfit" else style), "digit", style
    if char in _GREEK:
        style = "bfit" if family in {"bf", "bfit"} else ""
        return _styled(_GREEK[char], style), "letter", style
    if char in _SYMBOLS:
        latex, kind = _SYMBOLS[char]
        return latex, kind, ""
    if unicodedata.category(char) == "Mn":
        return None
    expanded = unicodedata.normalize("NFKC", char)
    if expanded != char and expanded.isascii() and expanded.isalpha():  # ligatures such as ﬁ
        return expanded, "letter", family if family in _STYLE_WRAPPERS else "it"
    return char, "unknown", ""


# ------------------------------------------------------------------------------------------------ extraction

_TEXT_FLAGS = (
    pymupdf.TEXTFLAGS_RAWDICT | pymupdf.TEXT_ACCURATE_BBOXES | pymupdf.TEXT_INHIBIT_SPACES
) & ~pymupdf.TEXT_PRESERVE_IMAGES
_MAX_GLYPHS = 1500  # the longest display equation of the sample corpus has about 300
_NUMBER_DROP = 16.0  # how far below the box an equation number pushed onto its own line is looked for
# "(3)", "(10b)", "(A.1)", "(S2)", "(ECE)", "(3')": digits with dotted parts and a letter, or a short capital label.
_NUMBER_TEXT = re.compile(r"^\((?:[A-Z]{0,2}\.?\d{1,3}(?:\.\d{1,3})*[a-z]?|[A-Z][A-Z0-9\-]{0,7})['′]?\)$")


def _read_glyphs(page: pymupdf.Page, clip: pymupdf.Rect) -> list[_Atom]:
    atoms: list[_Atom] = []
    raw = page.get_text("rawdict", clip=clip, flags=_TEXT_FLAGS)
    for block in raw.get("blocks", []):
        for line in block.get("lines", []):
            if abs(line["dir"][1]) > 0.1:
                continue  # rotated text is never part of a display equation
            for span in line["spans"]:
                family = _font_family(span["font"], span["flags"])
                for char in span["chars"]:
                    token = _glyph_token(char["c"], family)
                    if token is None:
                        continue
                    latex, kind, style = token
                    x0, y0, x1, y1 = char["bbox"]
                    atom = _Atom(
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


def _read_rules(page: pymupdf.Page, clip: pymupdf.Rect) -> list[_Atom]:
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
            rules.append(_Atom("", "rule", x0, y - thickness / 2, x1, y + thickness / 2, y, thickness))
    return rules


def _take_equation_number(atoms: list[_Atom], rect: pymupdf.Rect) -> tuple[str | None, list[_Atom]]:
    """The "(3)" set apart to the right of the equation: inside the box or the first thing beyond it (on a
    two-column page whatever follows it belongs to the other column)."""
    main_size = _dominant_size(atoms)
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


def _take_equation_numbers(atoms: list[_Atom], rect: pymupdf.Rect) -> tuple[list[tuple[float, str]], list[_Atom]]:
    """Every number of a multi-line display (amsmath numbers each line of align), top to bottom."""
    found: list[tuple[float, str]] = []
    while True:
        before = atoms
        number, atoms = _take_equation_number(atoms, rect)
        if number is None:
            return sorted(found), atoms
        found.append((min(a.y0 for a in before if a not in atoms), number))


def _number_on_next_line(below: list[_Atom], rect: pymupdf.Rect) -> str | None:
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


def _join_delimiter_pieces(atoms: list[_Atom]) -> list[_Atom]:
    """Stack CMEX pieces (top, extension, bottom) into one tall delimiter."""
    pieces = sorted((a for a in atoms if a.kind == "piece"), key=lambda a: (round(a.x0), a.y0))
    others = [a for a in atoms if a.kind != "piece"]
    stacks: list[list[_Atom]] = []
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
        elif latex in _OPEN_DELIMITERS:
            kind = "open"
        elif latex in _CLOSE_DELIMITERS:
            kind = "close"
        else:
            kind = "fence"
        x0, y0, x1, y1 = _union(stack)
        size = stack[0].size
        others.append(
            _Atom(latex, kind, x0, y0, x1, y1, (y0 + y1) / 2 + 0.25 * size, size, big=True, axis_y=(y0 + y1) / 2)
        )
    for atom in others:
        if atom.big and atom.kind in {"open", "close", "ord"} and atom.latex in {"|", r"\|"}:
            atom.kind = "fence"
    return others


def _join_horizontal_braces(atoms: list[_Atom], rules: list[_Atom]) -> tuple[list[_Atom], list[_Atom]]:
    """\\underbrace/\\overbrace: CMEX tips and middle pieces joined by rules, all at one height."""
    pieces = [a for a in atoms if a.kind == "brace-piece"]
    if not pieces:
        return atoms, rules
    groups: list[list[_Atom]] = []
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
        braces.append(_Atom("", "hbrace", x0, y0, x1, y1, y1, group[0].size, big=True))
    return [a for a in atoms if a.kind != "brace-piece"] + braces, rules


def _join_overlays(atoms: list[_Atom]) -> list[_Atom]:
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


def _join_dots(atoms: list[_Atom]) -> list[_Atom]:
    """Three evenly spaced dots on one baseline are \\cdots or \\ldots (TeX sets them as three glyphs)."""
    dots = sorted((a for a in atoms if a.text in {"·", "⋅", "."}), key=lambda a: a.x0)
    used: set[int] = set()
    joined: list[_Atom] = []
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
            joined.append(_compound(latex, "dots", run, first.baseline, first.size))
            used.update(id(a) for a in run)
    return [a for a in atoms if id(a) not in used] + joined


def _join_words(atoms: list[_Atom]) -> list[_Atom]:
    """Upright letters set side by side form a word: an operator name (\\log, \\max) or \\mathrm{...}."""
    result: list[_Atom] = []
    runs: list[list[_Atom]] = []
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


def _word(run: list[_Atom]) -> _Atom:
    word = "".join(a.latex for a in run)
    style = run[0].style
    if style == "rm" and word in _FUNCTION_NAMES:
        latex = "\\" + word
    elif style == "rm" and word in {"argmax", "argmin"}:
        latex = "\\arg\\" + word[3:]
    elif style == "rm" and word in {"limsup", "liminf"}:
        latex = r"\lim" + word[3:]
    else:
        latex = f"{_STYLE_WRAPPERS[style]}{{{word}}}"
    kind = "limword" if style == "rm" and word in _LIMIT_WORDS else "word"
    atom = _compound(latex, kind, run, run[0].baseline, run[0].size)
    atom.style, atom.text = style, word
    return atom


def _attach_accents(atoms: list[_Atom], notes: list[str]) -> list[_Atom]:
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
        compound = _compound(latex, "ord", base + [accent], base[0].baseline, max(a.size for a in base))
        remaining = [a for a in remaining if a not in base] + [compound]
    return remaining


def _linear_latex(atoms: list[_Atom]) -> str:
    return _join_tokens([a.latex for a in sorted(atoms, key=lambda a: a.x0)])


def _join_tokens(tokens: list[str]) -> str:
    """Concatenate LaTeX tokens, keeping a space only where a control word would swallow a letter."""
    out = ""
    for token in tokens:
        if not token:
            continue
        if out and re.search(r"\\[A-Za-z]+$", out) and re.match(r"[A-Za-z0-9]", token):
            out += " "
        out += token
    return out


# ------------------------------------------------------------------------------------------------ layout


class _Reader:
    """Reads one region's atoms into LaTeX; keeps the notes of what it had to guess."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self.guesses = 0

    # -- rows of a multi-line display

    def rows(self, atoms: list[_Atom]) -> list[list[_Atom]]:
        main_size = _dominant_size(atoms)
        rules = [a for a in atoms if a.kind == "rule"]
        # Numerators and denominators do not vote for a row of their own.
        voters = [
            a
            for a in atoms
            if a.kind in {"letter", "digit", "word", "rel", "bin", "ord", "open", "close"}
            and not a.big
            and a.size >= 0.8 * main_size
            and not any(r.x0 - 1 <= a.cx <= r.x1 + 1 and abs(a.cy - r.cy) < 1.6 * main_size for r in rules)
        ]
        clusters: list[list[_Atom]] = []
        for atom in sorted(voters, key=lambda a: a.baseline):
            if clusters and atom.baseline - clusters[-1][-1].baseline <= 0.3 * main_size:
                clusters[-1].append(atom)
            else:
                clusters.append([atom])
        # A row is a baseline with real content, or at least a relation or operator that starts a continued line;
        # a lone stray glyph does not make one.
        lines: list[float] = []
        for cluster in clusters:
            if len(cluster) >= 2 or len(clusters) == 1 or cluster[0].kind in {"rel", "bin"}:
                y = statistics.median(a.baseline for a in cluster)
                if not lines or y - lines[-1] > 1.2 * main_size:
                    lines.append(y)
        for fence in (a for a in atoms if a.big and a.kind in {"open", "close", "fence"}):
            spanned = [y for y in lines if fence.y0 < y - 0.3 * main_size and y < fence.y1 + 0.1 * main_size]
            lines = [y for y in lines if y not in spanned[1:]]
        if len(lines) <= 1:
            return [atoms]
        cuts = [self._cut_between(atoms, upper, lower, main_size) for upper, lower in zip(lines, lines[1:])]
        rows: list[list[_Atom]] = [[] for _ in lines]
        for atom in atoms:
            y = atom.baseline if atom.kind not in {"rule", "frac"} else atom.cy
            rows[sum(1 for c in cuts if y > c)].append(atom)
        return [r for r in rows if r]

    @staticmethod
    def _cut_between(atoms: list[_Atom], upper: float, lower: float, size: float) -> float:
        """The widest empty horizontal band between two baselines, not splitting a fraction or a limit."""
        low, high = upper + 0.1 * size, lower - 0.75 * size
        if high <= low:
            return (upper + lower) / 2
        intervals = sorted((a.y0, a.y1) for a in atoms if a.y1 > low and a.y0 < high)
        for rule in (a for a in atoms if a.kind in {"rule", "bigop"} and low < a.cy < high + size):
            near = [a for a in atoms if a is not rule and rule.x0 - 1 <= a.cx <= rule.x1 + 1]
            above = [a.y1 for a in near if a.y1 <= rule.y0 + 0.5 and rule.y0 - a.y1 < 0.6 * size]
            below = [a.y0 for a in near if a.y0 >= rule.y1 - 0.5 and a.y0 - rule.y1 < 0.6 * size]
            intervals.append((min(above, default=rule.y0), max(below, default=rule.y1)))
        intervals.sort()
        best, best_width, cursor = (upper + lower) / 2, -1.0, low
        for y0, y1 in intervals + [(high, high)]:
            if y0 > cursor and y0 - cursor > best_width:
                best, best_width = (cursor + min(y0, high)) / 2, y0 - cursor
            cursor = max(cursor, y1)
            if cursor >= high:
                break
        return best

    # -- structure within a row

    def layout(self, atoms: list[_Atom]) -> str:
        if not atoms:
            return ""
        atoms = self._group_arrays(atoms)
        atoms = self._group_braces(atoms)
        atoms = self._group_radicals(atoms)
        atoms = self._group_rules(atoms)
        atoms = self._group_limits(atoms)
        return self._baseline(atoms) if atoms else ""

    def _group_arrays(self, atoms: list[_Atom]) -> list[_Atom]:
        """Several lines between a pair of tall delimiters (or after a lone tall brace) form a matrix (cases)."""
        fences = sorted((a for a in atoms if a.big and a.kind in {"open", "close", "fence"}), key=lambda a: a.x0)
        for left in fences:
            if left not in atoms or left.kind == "close":
                continue
            height = left.y1 - left.y0
            right = next(
                (
                    a
                    for a in fences
                    if a.x0 > left.x1
                    and a is not left
                    and a.kind != "open"
                    and abs(a.y0 - left.y0) < 0.15 * height
                    and abs(a.y1 - left.y1) < 0.15 * height
                ),
                None,
            )
            if right is None and left.latex != r"\{":
                continue
            limit = right.x0 if right else float("inf")
            inside = [
                a
                for a in atoms
                if a is not left
                and a is not right
                and left.x1 - 0.5 <= a.cx <= limit
                and left.y0 - 1 <= a.cy <= left.y1 + 1
            ]
            rows = self.rows(inside) if inside else []
            if len(rows) < 2:
                continue
            columns = _column_gaps([a for row in rows for a in row])
            body = r" \\ ".join(" & ".join(self.layout(cell) for cell in _cells(row, columns)) for row in rows)
            if right is None:
                latex = rf"\begin{{cases}}{body}\end{{cases}}"
            else:
                latex = rf"\left{left.latex}\begin{{matrix}}{body}\end{{matrix}}\right{right.latex}"
            parts = [left, *inside] + ([right] if right else [])
            compound = _compound(latex, "ord", parts, left.baseline, left.size)
            compound.axis_y = left.axis_y
            gone = {id(a) for a in parts}
            atoms = [a for a in atoms if id(a) not in gone] + [compound]
        return atoms

    def _group_braces(self, atoms: list[_Atom]) -> list[_Atom]:
        """A horizontal brace under (over) main-size content with a small label beyond it."""
        for brace in [a for a in atoms if a.kind == "hbrace"]:
            spanned = [a for a in atoms if a is not brace and brace.x0 - 1 <= a.cx <= brace.x1 + 1]
            above = [a for a in spanned if a.cy < brace.cy and brace.y0 - a.y1 < 1.5 * brace.size]
            below = [a for a in spanned if a.cy > brace.cy and a.y0 - brace.y1 < 1.5 * brace.size]
            under = _dominant_size(above) >= _dominant_size(below) if above and below else bool(above)
            content, label = (above, below) if under else (below, above)
            command, script = (r"\underbrace", "_") if under else (r"\overbrace", "^")
            latex = f"{command}{{{self.layout(content)}}}" + (f"{script}{{{self.layout(label)}}}" if label else "")
            parts = [brace, *content, *label]
            compound = _compound(
                latex,
                "ord",
                parts,
                _dominant_baseline(content) if content else brace.cy,
                _dominant_size(content) if content else brace.size,
            )
            gone = {id(a) for a in parts}
            atoms = [a for a in atoms if id(a) not in gone] + [compound]
        return atoms

    def _group_radicals(self, atoms: list[_Atom]) -> list[_Atom]:
        radicals = sorted((a for a in atoms if a.kind == "radical"), key=lambda a: a.y1 - a.y0, reverse=True)
        for radical in radicals:
            if radical not in atoms:
                continue
            bar = min(
                (
                    r
                    for r in atoms
                    if r.kind == "rule" and abs(r.x0 - radical.x1) < 2.0 and abs(r.cy - radical.y0) < 2.0
                ),
                key=lambda r: abs(r.x0 - radical.x1),
                default=None,
            )
            if bar is None:
                self.notes.append("radical without an overbar")
                self.guesses += 1
                continue
            inside = [
                a
                for a in atoms
                if a is not radical
                and a is not bar
                and radical.x1 - 0.5 <= a.cx <= bar.x1 + 0.5
                and bar.cy <= a.cy <= radical.y1 + 0.5
            ]
            # An index (\sqrt[n]) is small, over the radical's left arm, within its height.
            height = radical.y1 - radical.y0
            index = [
                a
                for a in atoms
                if a is not radical
                and a is not bar
                and a not in inside
                and a.size < 0.9 * radical.size
                and radical.x0 - 0.5 * radical.size <= a.cx <= radical.cx
                and a.cy < radical.cy
                and a.y1 > radical.y0 + 0.2 * height
            ]
            body = self.layout(inside)
            latex = rf"\sqrt[{self.layout(index)}]{{{body}}}" if index else rf"\sqrt{{{body}}}"
            baseline = _dominant_baseline(inside) if inside else radical.y1
            size = _dominant_size(inside) if inside else radical.size
            compound = _compound(latex, "ord", [radical, bar, *inside, *index], baseline, size)
            atoms = [a for a in atoms if a not in inside and a not in index and a is not radical and a is not bar]
            atoms.append(compound)
        return atoms

    def _group_rules(self, atoms: list[_Atom]) -> list[_Atom]:
        """Fraction bars own what lies over and under them; a rule with only glyphs under it is an overline."""
        for rule in sorted((a for a in atoms if a.kind == "rule"), key=lambda a: a.width, reverse=True):
            if rule not in atoms:
                continue
            spanned = [a for a in atoms if a is not rule and rule.x0 - 1 <= a.cx <= rule.x1 + 1]
            above = [a for a in spanned if a.y1 <= rule.y0 + 0.6 and a.cy < rule.cy]
            below = [a for a in spanned if a.y0 >= rule.y1 - 0.6 and a.cy > rule.cy]
            glyphs_above, glyphs_below = (any(a.kind != "rule" for a in side) for side in (above, below))
            if glyphs_above and glyphs_below and self._is_fraction_bar(rule, atoms):
                numerator, denominator = self.layout(above), self.layout(below)
                size = max(a.size for a in above + below if a.kind != "rule")
                latex = rf"\frac{{{numerator}}}{{{denominator}}}"
                compound = _compound(latex, "frac", [rule, *above, *below], rule.cy + 0.25 * size, size)
                compound.axis_y = rule.cy
                atoms = [a for a in atoms if a is not rule and a not in above and a not in below] + [compound]
            elif under := [a for a in below if a.kind != "rule" and a.y0 - rule.y1 < 0.5 * a.size]:
                under = [a for a in below if a.kind != "rule" and a.y0 - rule.y1 < 0.9 * a.size]
                latex = rf"\overline{{{self.layout(under)}}}"
                compound = _compound(latex, "ord", [rule, *under], _dominant_baseline(under), _dominant_size(under))
                atoms = [a for a in atoms if a is not rule and a not in under] + [compound]
            elif over := [a for a in above if a.kind != "rule" and rule.y0 - a.y1 < 0.4 * a.size]:
                over = [a for a in above if a.kind != "rule" and rule.y0 - a.y1 < 0.9 * a.size]
                latex = rf"\underline{{{self.layout(over)}}}"
                compound = _compound(latex, "ord", [rule, *over], _dominant_baseline(over), _dominant_size(over))
                atoms = [a for a in atoms if a is not rule and a not in over] + [compound]
            else:
                self.notes.append("a rule that is neither a fraction bar nor an overline")
                self.guesses += 1
                atoms = [a for a in atoms if a is not rule]
        return atoms

    @staticmethod
    def _is_fraction_bar(rule: _Atom, atoms: list[_Atom]) -> bool:
        """TeX draws a fraction bar across the whole of numerator and denominator: nothing next to it overhangs.
        An overline inside a stacked limit has the line above it sticking out on both sides."""
        for a in atoms:
            if a is rule or a.kind == "rule" or not (a.x1 > rule.x0 and a.x0 < rule.x1):
                continue
            near = rule.y0 - a.y1 < 0.9 * a.size if a.cy < rule.cy else a.y0 - rule.y1 < 0.9 * a.size
            if near and (a.x0 < rule.x0 - 1.5 or a.x1 > rule.x1 + 1.5) and not (a.y0 < rule.cy < a.y1):
                return False
        return True

    def _group_limits(self, atoms: list[_Atom]) -> list[_Atom]:
        """Limits centred under and over \\sum, \\prod, \\max ... and labels over relations (\\overset);
        scripts set beside an operator stay scripts."""
        operators = [a for a in atoms if a.kind in {"bigop", "limword"} or (a.kind == "rel" and not a.big)]
        if not operators:
            return atoms
        lower = self._assign_limits([o for o in operators if o.kind != "rel"], atoms, below=True)
        upper = self._assign_limits(operators, atoms, below=False, taken={id(a) for r in lower.values() for a in r})
        for op in operators:
            below_part, above_part = lower.get(id(op), []), upper.get(id(op), [])
            if not below_part and not above_part:
                continue
            if op.kind == "rel":
                latex = rf"\overset{{{self._stacked(above_part)}}}{{{op.latex}}}"
                compound = _compound(latex, "rel", [op, *above_part], op.baseline, op.size)
            else:
                latex = op.latex
                if below_part:
                    latex += f"_{{{self._stacked(below_part)}}}"
                if above_part:
                    latex += f"^{{{self._stacked(above_part)}}}"
                compound = _compound(latex, "limits", [op, *below_part, *above_part], op.baseline, op.size)
                compound.axis_y = op.axis_y
            gone = {id(a) for a in below_part + above_part} | {id(op)}
            atoms = [a for a in atoms if id(a) not in gone] + [compound]
        return atoms

    def _stacked(self, members: list[_Atom]) -> str:
        """A limit of one line, or of several stacked lines (\\substack)."""
        lines: list[list[_Atom]] = []
        for a in sorted(members, key=lambda a: a.y0):
            if lines and a.y0 < max(b.y1 for b in lines[-1]) - 0.5:
                lines[-1].append(a)
            else:
                lines.append([a])
        if len(lines) == 1:
            return self.layout(members)
        return r"\substack{" + r" \\ ".join(self.layout(line) for line in lines) + "}"

    def _assign_limits(
        self, operators: list[_Atom], atoms: list[_Atom], below: bool, taken: set[int] | None = None
    ) -> dict[int, list[_Atom]]:
        """Each operator's limit: the atoms centred on it in the band under (or over) it. Neighbouring operators'
        limits can touch; the atoms between two seeds go to whichever split keeps both limits centred."""
        taken = taken or set()
        op_ids = {id(o) for o in operators}
        bands: dict[int, list[_Atom]] = {}
        seeds: dict[int, list[_Atom]] = {}
        for op in operators:
            reach = (0.8 if op.kind != "rel" else 0.6) * op.size
            if below:
                band = [
                    a
                    for a in atoms
                    if id(a) not in op_ids
                    and id(a) not in taken
                    and a.cy > op.y1
                    and a.y0 >= op.y1 - 0.5
                    and a.y0 - op.y1 < 3 * reach
                ]
                first_line = [a for a in band if a.y0 - op.y1 < reach]
            else:
                band = [
                    a
                    for a in atoms
                    if id(a) not in op_ids
                    and id(a) not in taken
                    and a.cy < op.y0
                    and a.y1 <= op.y0 + 0.5
                    and op.y0 - a.y1 < 3 * reach
                ]
                first_line = [a for a in band if op.y0 - a.y1 < reach]
            if op.kind == "rel":
                band = first_line = [a for a in first_line if a.size < 0.9 * op.size]
            bands[id(op)] = band
            seeds[id(op)] = [a for a in first_line if min(a.x1, op.x1) - max(a.x0, op.x0) > 0]
        seeded = {id(a): id(op) for op in operators for a in seeds[id(op)]}
        runs: dict[int, list[_Atom]] = {}
        for op in operators:
            run = self._grow(seeds[id(op)], bands[id(op)], {k for k, owner in seeded.items() if owner != id(op)}, below)
            if run:
                runs[id(op)] = run
        ordered = sorted((o for o in operators if id(o) in runs), key=lambda o: o.cx)
        for left_op, right_op in zip(ordered, ordered[1:]):
            left_run, right_run = runs[id(left_op)], runs[id(right_op)]
            contested = [a for a in left_run if a in right_run]
            if not contested:
                continue
            contested.sort(key=lambda a: a.cx)
            left_core = [a for a in left_run if a not in contested]
            right_core = [a for a in right_run if a not in contested]
            best = min(
                range(len(contested) + 1),
                key=lambda k: (
                    _centre_offset(left_op, left_core + contested[:k])
                    + _centre_offset(right_op, right_core + contested[k:])
                ),
            )
            runs[id(left_op)], runs[id(right_op)] = left_core + contested[:best], right_core + contested[best:]
        result = {}
        for op in operators:
            run = runs.get(id(op))
            if not run:
                continue
            width = max(a.x1 for a in run) - min(a.x0 for a in run)
            if _centre_offset(op, run) <= max(2.5, 0.15 * width):
                result[id(op)] = run
        return result

    @staticmethod
    def _grow(seed: list[_Atom], band: list[_Atom], forbidden: set[int], below: bool) -> list[_Atom]:
        """Grow sideways over small gaps along the seed's line, then onto stacked lines further out."""
        members = [a for a in seed if id(a) not in forbidden]
        if not members:
            return []
        gap = 0.5 * max(a.size for a in members)
        grown = True
        while grown:
            grown = False
            left, right = min(a.x0 for a in members), max(a.x1 for a in members)
            top, bottom = min(a.y0 for a in members), max(a.y1 for a in members)
            for a in band:
                if a in members or id(a) in forbidden:
                    continue
                beside = (
                    a.y0 < bottom
                    and a.y1 > top
                    and (0 <= left - a.x1 < gap or 0 <= a.x0 - right < gap or (a.x0 < right and a.x1 > left))
                )
                stacked = (
                    (-0.5 <= a.y0 - bottom < 0.5 * a.size if below else -0.5 <= top - a.y1 < 0.5 * a.size)
                    and a.x0 < right
                    and a.x1 > left
                )
                if beside or stacked:
                    members.append(a)
                    grown = True
        return members

    def _baseline(self, atoms: list[_Atom]) -> str:
        """Left to right along the dominant baseline; what sits off it in a smaller size is a script."""
        size = _dominant_size(atoms)
        baseline = _dominant_baseline(atoms)
        ordered = sorted(atoms, key=lambda a: a.x0)
        items: list[tuple[_Atom | None, list[_Atom], list[_Atom]]] = []  # (base, subscripts, superscripts)
        pending: list[_Atom] = []

        def close_scripts() -> None:
            if not pending:
                return
            subs, sups = self._split_scripts(pending, baseline, size)
            if items and not items[-1][1] and not items[-1][2]:
                base = items[-1][0]
                items[-1] = (base, subs, sups)
            else:
                items.append((None, subs, sups))
            pending.clear()

        on_baseline: set[int] = set()
        previous_on_baseline = True
        for atom in ordered:
            if self._on_baseline(atom, baseline, size) or (
                previous_on_baseline and self._inline_small(atom, baseline, size)
            ):
                on_baseline.add(id(atom))
                previous_on_baseline = True
            else:
                previous_on_baseline = False
        if not on_baseline:  # nothing to hang scripts on (a lone prime, a stray): read it as one line
            on_baseline = {id(a) for a in ordered}
        for atom in ordered:
            if id(atom) in on_baseline:
                close_scripts()
                items.append((atom, [], []))
            else:
                pending.append(atom)
        close_scripts()
        return self._emit(items)

    @staticmethod
    def _on_baseline(atom: _Atom, baseline: float, size: float) -> bool:
        if atom.axis_y is not None:  # fractions, big operators and delimiters are centred on the math axis
            return abs(atom.axis_y - (baseline - 0.25 * size)) <= 0.22 * size
        if atom.kind == "prime":
            return False
        return atom.size >= 0.85 * size and abs(atom.baseline - baseline) <= 0.25 * size

    @staticmethod
    def _inline_small(atom: _Atom, baseline: float, size: float) -> bool:
        """A smaller glyph sitting exactly on the baseline: small capitals or footnote-size text, unless it
        follows a script (then it is a script of that script that happens to land on the baseline)."""
        return atom.kind != "prime" and abs(atom.baseline - baseline) <= 0.06 * size

    def _split_scripts(self, scripts: list[_Atom], baseline: float, size: float) -> tuple[list[_Atom], list[_Atom]]:
        """Superscripts sit above the base's baseline, subscripts below; deeper levels follow their parent."""
        first_level = max(a.size for a in scripts)
        subs: list[_Atom] = []
        sups: list[_Atom] = []
        parents: list[tuple[_Atom, list[_Atom]]] = []
        for atom in sorted(scripts, key=lambda a: a.x0):
            if atom.size >= 0.9 * first_level or not parents:
                offset = atom.baseline - baseline
                if atom.kind == "prime" or offset < -0.08 * size:
                    target = sups
                elif offset > 0.02 * size:
                    target = subs
                else:
                    self.guesses += 1
                    target = subs if atom.y1 > baseline else sups
                target.append(atom)
                parents.append((atom, target))
            else:
                _, target = min(parents, key=lambda p: (atom.x0 < p[0].x0, abs(atom.x0 - p[0].x1)))
                target.append(atom)
        return subs, sups

    def _emit(self, items: list[tuple[_Atom | None, list[_Atom], list[_Atom]]]) -> str:
        tokens: list[str] = []
        bases = [b for b, _, _ in items]
        pairs = _pair_big_delimiters(bases)
        for base, subs, sups in items:
            if base is None:
                token = "{}"
            else:
                token = pairs.get(id(base), base.latex)
            if subs:
                token += f"_{{{self.layout(subs)}}}"
            if sups:
                token += f"^{{{self.layout(sups)}}}"
            tokens.append(token)
        return _join_tokens(tokens)


def _column_gaps(atoms: list[_Atom]) -> list[float]:
    """x positions where no cell of any row has ink over a gap of at least an em: column boundaries."""
    size = _dominant_size(atoms)
    spans = sorted((a.x0, a.x1) for a in atoms if a.kind != "rule")
    gaps: list[float] = []
    reach = spans[0][1]
    for x0, x1 in spans[1:]:
        if x0 - reach >= 0.9 * size:
            gaps.append((reach + x0) / 2)
        reach = max(reach, x1)
    return gaps


def _cells(row: list[_Atom], columns: list[float]) -> list[list[_Atom]]:
    cells: list[list[_Atom]] = [[] for _ in range(len(columns) + 1)]
    for a in row:
        cells[sum(1 for x in columns if a.cx > x)].append(a)
    return cells


def _centre_offset(op: _Atom, run: list[_Atom]) -> float:
    return abs((min(a.x0 for a in run) + max(a.x1 for a in run)) / 2 - op.cx)


def _pair_big_delimiters(bases: list[_Atom | None]) -> dict[int, str]:
    """Big delimiters that open and close at the same level become \\left ... \\right pairs."""
    stack: list[_Atom] = []
    pairs: dict[int, str] = {}
    for atom in bases:
        if atom is None or not atom.big or atom.kind not in {"open", "close", "fence"}:
            continue
        opening = atom.kind == "open" or (
            atom.kind == "fence" and not any(s.kind == "fence" and s.latex == atom.latex for s in stack)
        )
        if opening:
            stack.append(atom)
        elif stack:
            partner = stack.pop()
            pairs[id(partner)] = r"\left" + partner.latex
            pairs[id(atom)] = r"\right" + atom.latex
    return pairs


def _dominant_size(atoms: list[_Atom]) -> float:
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


def _dominant_baseline(atoms: list[_Atom]) -> float:
    size = _dominant_size(atoms)
    # Big operators (and the limits grouped with them) sit on their own glyph origin, a few points off the
    # baseline in fonts that do not centre them the way cmex does: they never decide where the baseline is.
    candidates = [
        a for a in atoms if a.kind not in {"rule", "limits", "bigop"} and not a.big and abs(a.size - size) < 0.15 * size
    ]
    if not candidates:
        candidates = [a for a in atoms if a.kind != "rule"] or atoms
    clusters: list[list[_Atom]] = []
    for a in sorted(candidates, key=lambda atom: atom.baseline):
        if clusters and a.baseline - clusters[-1][-1].baseline < 0.25 * size:
            clusters[-1].append(a)
        else:
            clusters.append([a])

    def weight(a: _Atom) -> float:
        return max(a.width, 0.5) * (2.0 if a.kind in {"rel", "bin"} else 1.0)

    best = max(clusters, key=lambda cluster: sum(weight(a) for a in cluster))
    return max(best, key=weight).baseline


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
    band = pymupdf.Rect(rect.x0 - 2, rect.y0 - 2, max(rect.x1 + 2, page.rect.x1), rect.y1 + _NUMBER_DROP)
    glyphs = _read_glyphs(page, band)
    inside = pymupdf.Rect(rect.x0 - 2, rect.y0 - 2, rect.x1 + 2, rect.y1 + 2)
    in_box = [g for g in glyphs if inside.x0 <= g.cx <= inside.x1 and inside.y0 <= g.cy <= inside.y1]
    beside = [g for g in glyphs if g.cx > inside.x1 and inside.y0 <= g.cy <= inside.y1 and g.kind != "piece"]
    numbers, atoms = _take_equation_numbers(in_box + beside, rect)
    atoms = [a for a in atoms if a not in beside]
    number = numbers[0][1] if numbers else _number_on_next_line([g for g in glyphs if g.cy > inside.y1], rect)
    if len(numbers) > 1:
        notes.append("one number per line: " + " ".join(n for _, n in numbers))
    if not atoms:
        return GlyphLatex("", number, 0.0, notes + ["no glyphs in region"])
    if len(atoms) > _MAX_GLYPHS:
        return GlyphLatex("", number, 0.0, notes + [f"{len(atoms)} glyphs: a text region, not a display equation"])
    notes.extend(f"unmapped glyph {a.text!r} (U+{ord(a.text):04X}) in {a.font}" for a in atoms if a.kind == "unknown")
    rules = _read_rules(page, inside)
    atoms = _join_delimiter_pieces(atoms)
    atoms, rules = _join_horizontal_braces(atoms, rules)
    atoms = _join_overlays(atoms)
    atoms = _join_dots(atoms)
    atoms = _join_words(atoms)
    atoms = _attach_accents(atoms, notes)
    reader = _Reader(notes)
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


# ------------------------------------------------------------------------------------------------ normalisation

_DROP_COMMANDS = {
    r"\left",
    r"\right",
    r"\big",
    r"\Big",
    r"\bigg",
    r"\Bigg",
    r"\bigl",
    r"\bigr",
    r"\Bigl",
    r"\Bigr",
    r"\biggl",
    r"\biggr",
    r"\Biggl",
    r"\Biggr",
    r"\middle",
    r"\displaystyle",
    r"\textstyle",
    r"\scriptstyle",
    r"\scriptscriptstyle",
    r"\limits",
    r"\nolimits",
    r"\,",
    r"\;",
    r"\:",
    r"\!",
    r"\ ",
    r"\quad",
    r"\qquad",
    r"\enspace",
    r"\thinspace",
    r"\medspace",
    r"\thickspace",
    r"\hfill",
    r"\nonumber",
    r"\notag",
    r"\rm",
    r"\mathrm",
    r"\operatorname",
    r"\operatorname*",
    r"\text",
    r"\textrm",
    r"\textit",
    r"\mathit",
    r"\mbox",
    r"\mathnormal",
    r"\hbox",
    r"\it",
    r"\up",
    r"\tt",
}
_BOLD = {r"\mathbf", r"\boldsymbol", r"\pmb", r"\bm", r"\bf", r"\textbf", r"\mathbold", r"\bold"}
_SYNONYMS = {
    r"\le": r"\leq",
    r"\ge": r"\geq",
    r"\leqslant": r"\leq",
    r"\geqslant": r"\geq",
    r"\ne": r"\neq",
    r"\to": r"\rightarrow",
    r"\gets": r"\leftarrow",
    r"\longrightarrow": r"\rightarrow",
    r"\longleftarrow": r"\leftarrow",
    r"\Longrightarrow": r"\Rightarrow",
    r"\Longleftarrow": r"\Leftarrow",
    r"\Longleftrightarrow": r"\iff",
    r"\Leftrightarrow": r"\iff",
    r"\implies": r"\Rightarrow",
    r"\vert": "|",
    r"\lvert": "|",
    r"\rvert": "|",
    r"\mid": "|",
    r"\Vert": r"\|",
    r"\lVert": r"\|",
    r"\rVert": r"\|",
    r"\parallel": r"\|",
    r"\lbrace": r"\{",
    r"\rbrace": r"\}",
    r"\lbrack": "[",
    r"\rbrack": "]",
    r"\ldots": r"\dots",
    r"\cdots": r"\dots",
    r"\dotsc": r"\dots",
    r"\dotsb": r"\dots",
    r"\widehat": r"\hat",
    r"\widetilde": r"\tilde",
    r"\overline": r"\bar",
    r"\stackrel": r"\overset",
    r"\dfrac": r"\frac",
    r"\tfrac": r"\frac",
    r"\ast": "*",
    r"\intercal": r"\top",
    r"\cal": r"\mathcal",
    r"\Bbb": r"\mathbb",
    r"\colon": ":",
    r"\coloneqq": ":=",
    r"\prime": "'",
    r"\lnot": r"\neg",
    r"\land": r"\wedge",
    r"\lor": r"\vee",
    r"\emptyset": r"\varnothing",
    r"\bot": r"\perp",
    r"\dag": r"\dagger",
    r"\varepsilon": r"\epsilon",
    r"\textless": "<",
    r"\textgreater": ">",
    r"\sp": "^",
    r"\sb": "_",
    r"\dot{=}": r"\doteq",
    r"\triangleq": r"\triangleq",
    r"\gt": ">",
    r"\lt": "<",
}
_FUNCTION_COMMANDS = {"\\" + name for name in _FUNCTION_NAMES} | {r"\arg"}
_ACCENTS = {r"\hat", r"\tilde", r"\bar", r"\vec", r"\dot", r"\ddot", r"\check", r"\breve"}
_TOKEN = re.compile(r"\\[A-Za-z]+\*?|\\.|[^\s]")


def _tokens(latex: str) -> list[str]:
    return _TOKEN.findall(latex)


def _skip_group(tokens: list[str], start: int) -> int:
    """Index after the brace group (or single token) beginning at ``start``."""
    if start >= len(tokens):
        return start
    if tokens[start] != "{":
        return start + 1
    depth = 0
    for i in range(start, len(tokens)):
        depth += tokens[i] == "{"
        depth -= tokens[i] == "}"
        if depth == 0:
            return i + 1
    return len(tokens)


def latex_comparison_key(latex: str) -> str:
    """A comparison key: two LaTeX strings that render alike (up to spacing, sizing and wrapper choices) get the
    same key.

    Removed: whitespace, ``$``/``$$``, ``\\tag{…}``, ``\\left``/``\\right`` and ``\\big``-family sizes, spacing
    commands, ``\\displaystyle``, ``\\phantom{…}`` with its content, alignment (``&``, the ``array``/``aligned``/
    ``matrix`` environments and their column specs; ``\\\\`` stays), upright-text wrappers (``\\mathrm``,
    ``\\operatorname(*)``, ``\\text``), braces that only group (not after ``^``, ``_`` or a command) and braces
    around a single token, and leading/trailing ``.``/``,``. Unified: every bold wrapper → ``\\mathbf``, letter
    by letter like the other alphabets (``\\mathbf{XY}`` = ``\\mathbf X\\mathbf Y``), and outside an accent;
    operator commands (``\\log``, ``\\max``) → their letters (so ``\\mathrm{l n}`` = ``\\ln``);
    ``\\underset{a}{op}`` → ``op_{a}``; ``\\substack``/``\\atop`` → stacked lines; ``cases`` → ``\\{``;
    synonyms (``\\le``/``\\leq``, ``\\widehat``/``\\hat``, ``\\overline``/``\\bar``, ``\\stackrel``/``\\overset``,
    ``\\vert``/``\\mid``/``|``, ``\\ldots``/``\\cdots``/``\\cdot\\cdot\\cdot``/``...`` → ``\\dots``,
    ``\\prime`` → ``'``, ``\\varepsilon`` → ``\\epsilon``, ``\\longrightarrow`` → ``\\rightarrow``).
    ``\\cdot`` and ``\\times`` stay distinct: they are different glyphs.
    """
    text = latex.strip()
    text = re.sub(r"^\$+|\$+$", "", text)
    text = re.sub(r"\\tag\*?\s*\{[^{}]*\}", "", text)
    tokens = _rewrite_underset(_tokens(text))
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in {r"\begin", r"\end"}:
            j = _skip_group(tokens, i + 1)
            env = "".join(tokens[i + 1 : j]).strip("{}")
            if tok == r"\begin" and env in {"array", "tabular", "alignat", "alignat*"} and tokens[j : j + 1] == ["{"]:
                j = _skip_group(tokens, j)
            delimiters = {
                "pmatrix": ("(", ")"),
                "bmatrix": ("[", "]"),
                "Bmatrix": (r"\{", r"\}"),
                "vmatrix": ("|", "|"),
                "Vmatrix": (r"\|", r"\|"),
                "cases": (r"\{", ""),
            }
            if env in delimiters:
                out.append(delimiters[env][0 if tok == r"\begin" else 1])
            i = j
            continue
        if tok in {r"\phantom", r"\hphantom", r"\vphantom", r"\hspace", r"\vspace", r"\hspace*"}:
            i = _skip_group(tokens, i + 1)
            continue
        if tok in {"&", "~", r"\substack"} or tok in _DROP_COMMANDS:
            i += 1
            continue
        if tok in _BOLD:
            out.append(r"\mathbf")
        elif tok in _FUNCTION_COMMANDS:
            out.extend(tok[1:])
        elif tok == r"\atop":
            out.append(r"\\")
        else:
            out.append(_SYNONYMS.get(tok, tok))
        i += 1
    out = _collapse_dots(out)
    out = _spread_alphabets(out)
    out = _strip_braces(out)
    while out and out[-1] in {".", ","}:
        out.pop()
    while out and out[0] in {".", ","}:
        out.pop(0)
    return "".join(out)


_ALPHABETS = {r"\mathbf", r"\mathbb", r"\mathcal", r"\mathfrak", r"\mathsf", r"\mathtt", r"\mathscr"}


def _spread_alphabets(tokens: list[str]) -> list[str]:
    """``\\mathbf{XY}`` → ``\\mathbf X \\mathbf Y``: an alphabet applies letter by letter."""
    result: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] in _ALPHABETS and tokens[i + 1 : i + 2] == ["{"]:
            end = _skip_group(tokens, i + 1)
            inner = tokens[i + 2 : end - 1]
            if len(inner) > 1 and all(len(t) == 1 and t.isalnum() for t in inner):
                for t in inner:
                    result.extend([tokens[i], t])
                i = end
                continue
        result.append(tokens[i])
        i += 1
    return result


def _rewrite_underset(tokens: list[str]) -> list[str]:
    """``\\underset{a}{op}`` → ``{op}_{a}`` (how ``\\operatorname*{op}_{a}`` and ``\\min_{a}`` are written)."""
    while r"\underset" in tokens:
        i = tokens.index(r"\underset")
        below_end = _skip_group(tokens, i + 1)
        base_end = _skip_group(tokens, below_end)
        below, base = tokens[i + 1 : below_end], tokens[below_end:base_end]
        tokens = tokens[:i] + ["{", *base, "}", "_", *below] + tokens[base_end:]
    return tokens


def _collapse_dots(tokens: list[str]) -> list[str]:
    result: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i : i + 3] in ([r"\cdot"] * 3, ["."] * 3):
            result.append(r"\dots")
            i += 3
        else:
            result.append(tokens[i])
            i += 1
    return result


_TWO_ARGUMENTS = {r"\frac", r"\overset", r"\underset", r"\binom", r"\cfrac"}
_ONE_ARGUMENT = {r"\sqrt", r"\underbrace", r"\overbrace", r"\underline", r"\not", *_ACCENTS, *_ALPHABETS}


def _strip_braces(tokens: list[str]) -> list[str]:
    """Drop braces that only group (every group that is not the argument of ``^``, ``_`` or a command), then
    braces around a single token (``x^{2}`` → ``x^2``), so that ``{ : = }``, ``{\\pmb x}`` and ``\\pmb{x}``
    compare alike."""
    arguments: set[int] = set()  # positions of "{" that open an argument
    for i, tok in enumerate(tokens):
        count = 2 if tok in _TWO_ARGUMENTS else 1 if tok in _ONE_ARGUMENT or tok in {"^", "_"} else 0
        j = i + 1
        if tok == r"\sqrt" and tokens[j : j + 1] == ["["]:
            j = tokens.index("]", j) + 1 if "]" in tokens[j:] else j
        for _ in range(count):
            if tokens[j : j + 1] != ["{"]:
                break
            arguments.add(j)
            j = _skip_group(tokens, j)
    kept: list[str] = []
    stack: list[bool] = []
    for i, tok in enumerate(tokens):
        if tok == "{":
            stack.append(i in arguments)
            if i in arguments:
                kept.append(tok)
        elif tok == "}" and stack:
            if stack.pop():
                kept.append(tok)
        elif tok != "}":
            kept.append(tok)
    result: list[str] = []
    i = 0
    while i < len(kept):
        if (
            kept[i] == r"\mathbf"
            and kept[i + 1 : i + 2] == ["{"]
            and i + 4 < len(kept)
            and kept[i + 2] in _ACCENTS
            and kept[i + 3] not in {"{", "}"}
            and kept[i + 4] == "}"
        ):
            result.extend([kept[i + 2], "{", r"\mathbf", kept[i + 3], "}"])  # bold outside or inside the accent
            i += 5
        elif kept[i] == "{" and i + 2 < len(kept) and kept[i + 2] == "}" and kept[i + 1] not in {"{", "}"}:
            result.append(kept[i + 1])
            i += 3
        elif kept[i] == "{" and i + 1 < len(kept) and kept[i + 1] == "}":
            i += 2
        else:
            result.append(kept[i])
            i += 1
    return result
