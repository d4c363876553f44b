"""The glyph reader's vocabulary: symbol tables (CMEX code points, delimiter pieces, style wrappers) and how one
glyph of a given font becomes a LaTeX token with its class and style."""

from __future__ import annotations

import re
import unicodedata

import pymupdf

from paperlake.formulas.latex.symbols import GREEK_LETTERS, SYMBOLS, TEX_FUNCTION_NAMES

# ------------------------------------------------------------------------------------------------ symbol tables

_GREEK = GREEK_LETTERS
_SYMBOLS = SYMBOLS
FUNCTION_NAMES = TEX_FUNCTION_NAMES
# Upright words that take limits underneath in display style.
LIMIT_WORDS = {"max", "min", "sup", "inf", "lim", "limsup", "liminf", "argmax", "argmin"}

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
OPEN_DELIMITERS = {"(", "[", r"\{", r"\langle", r"\lfloor", r"\lceil"}
CLOSE_DELIMITERS = {")", "]", r"\}", r"\rangle", r"\rfloor", r"\rceil"}

STYLE_WRAPPERS = {
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


# ------------------------------------------------------------------------------------------------ fonts → tokens


def font_family(fontname: str, flags: int) -> str:
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
    wrapper = STYLE_WRAPPERS.get(style)
    if wrapper is None or style == "rm":
        return letter_latex
    return f"{wrapper}{{{letter_latex}}}"


def glyph_token(char: str, family: str) -> tuple[str, str, str] | None:
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
                kind = "open" if latex in OPEN_DELIMITERS else "close" if latex in CLOSE_DELIMITERS else "ord"
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
        style = family if family in STYLE_WRAPPERS else "it"
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
        return expanded, "letter", family if family in STYLE_WRAPPERS else "it"
    return char, "unknown", ""
