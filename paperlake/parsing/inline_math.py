"""Inline LaTeX read as the text a PDF prints: MinerU writes table cells and captions with ``$…$`` spans, letter by
letter (``$1 4 ^ { 1 9 }$`` for the "14¹⁹" a PDF shows and PyMuPDF reads as "1419", ``$\\mathrm { o r i }$`` for
"ori"). Table cells are read through it (so both backends give a grid the same words), and so are the captions that
head a table's row and column lines and that define its labels (:mod:`paperlake.parsing.glossary`)."""

from __future__ import annotations

import re

_SYMBOLS = {
    r"\pm": "±",
    r"\times": "×",
    r"\uparrow": "↑",
    r"\downarrow": "↓",
    r"\%": "%",
    r"\dagger": "†",
    r"\ddagger": "‡",
    r"\ast": "*",
    r"\star": "⋆",
    r"\approx": "≈",
    r"\leq": "≤",
    r"\geq": "≥",
    r"\le": "≤",
    r"\ge": "≥",
    r"\cdot": "·",
    r"\checkmark": "✓",
    r"\sim": "~",
    r"\infty": "∞",
    r"\alpha": "α",
    r"\beta": "β",
    r"\lambda": "λ",
    r"\mu": "μ",
}
_INLINE_MATH = re.compile(r"\$([^$]*)\$")


def plain_text(text: str) -> str:
    """Inline LaTeX as the text it prints: MinerU writes ``$1 4 ^ { 1 9 }$`` for "1419",
    ``$\\pm 0 . 3$`` for "± 0.3", ``$\\mathbf { 7 7 . 3 }$`` for a bold 77.3. Text outside ``$…$`` is kept."""
    if "$" not in (text or ""):
        return text

    def plain(match: re.Match) -> str:
        math = match.group(1)
        for command, symbol in sorted(_SYMBOLS.items(), key=lambda kv: -len(kv[0])):
            math = re.sub(re.escape(command) + r"(?![A-Za-z])", symbol, math)
        math = re.sub(
            r"\\(?:mathrm|mathbf|textbf|mathit|textit|text|bf|it|rm|boldsymbol|mathbb|mathcal|"
            r"underline|overline|hat|tilde|bar)(?![A-Za-z])",
            " ",
            math,
        )
        math = re.sub(r"\\[A-Za-z]+", " ", math)  # other commands: their arguments stay
        math = re.sub(r"[{}^_~\\]", " ", math)
        math = re.sub(r"(?<=[\d.]) +(?=[\d.])", "", math)  # "7 7 . 3" → "77.3"
        math = re.sub(r"(?<=\b[A-Za-z]) (?=[A-Za-z]\b)", "", math)  # "o r i" → "ori"
        return " ".join(math.split())

    return " ".join(_INLINE_MATH.sub(plain, text).split())
