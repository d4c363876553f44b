"""Constants: the standard ones, and values a paper fixes in the text around a formula.

Standard constants are applied carefully, because ML papers reuse physics letters for other things (``c`` is a
class, ``h`` a hidden state, ``G`` a tensor core). π and e come from the parsed expression itself. Physical
constants are recognised when their spelling is unmistakable (``\\hbar``, ``k_B``, ``N_A``, ``\\epsilon_0``) or when
the text around the formula names them ("speed of light", "Planck", …).

:func:`constants_defined_in` mines the context for definitions such as "where λ = 0.5", "we set α to 0.1",
"$\\tau = 0.07$" or "K = 5 bins", returning the symbol (named exactly as the formula chain names it, see
:func:`paperlake.formulas.latex.symbol_name`), the value, the unit when one follows, and the matched text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import sympy

from paperlake.formulas.latex import UNICODE_GREEK, normalise_latex, symbol_name, symbols_in


@dataclass(frozen=True)
class Constant:
    """A named value a formula depends on; ``source`` is ``standard`` or ``context`` (then ``paper_id`` says
    which paper's text fixed it and ``evidence`` quotes the text)."""

    name: str
    value: float
    unit: str = ""
    description: str = ""
    latex: str = ""
    source: str = "standard"
    evidence: str = ""
    paper_id: str = ""


STANDARD_CONSTANTS: dict[str, Constant] = {
    constant.name: constant
    for constant in (
        Constant("pi", math.pi, "", "ratio of a circle's circumference to its diameter", r"\pi"),
        Constant("e", math.e, "", "Euler's number, base of the natural logarithm", "e"),
        Constant("c", 299_792_458.0, "m/s", "speed of light in vacuum", "c"),
        Constant("h", 6.626_070_15e-34, "J s", "Planck constant", "h"),
        Constant("hbar", 1.054_571_817e-34, "J s", "reduced Planck constant", r"\hbar"),
        Constant("k_B", 1.380_649e-23, "J/K", "Boltzmann constant", "k_B"),
        Constant("G", 6.674_30e-11, "m^3 kg^-1 s^-2", "Newtonian constant of gravitation", "G"),
        Constant("N_A", 6.022_140_76e23, "1/mol", "Avogadro constant", "N_A"),
        Constant("R", 8.314_462_618, "J/(mol K)", "molar gas constant", "R"),
        Constant("q_e", 1.602_176_634e-19, "C", "elementary charge", "q_e"),
        Constant("epsilon_0", 8.854_187_8128e-12, "F/m", "vacuum permittivity", r"\epsilon_0"),
        Constant("mu_0", 1.256_637_062_12e-6, "N/A^2", "vacuum permeability", r"\mu_0"),
    )
}
# Spellings that mean the constant whatever the context says.
_UNMISTAKABLE = frozenset({"hbar", "k_B", "N_A", "epsilon_0", "mu_0"})
# Ambiguous letters, accepted only when the context names the constant.
_NAMED_IN_TEXT = {
    "c": ("speed of light",),
    "h": ("planck",),
    "G": ("gravitational constant", "constant of gravitation"),
    "R": ("gas constant",),
    "q_e": ("elementary charge",),
}

_NUMBER = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?(?:\s*(?:\\times|\*|×)\s*10\^\{?[-+]?\d+\}?)?"
_UNITS = (
    "%",
    "ms",
    "s",
    "sec",
    "seconds",
    "minutes",
    "hours",
    "days",
    "m",
    "cm",
    "mm",
    "nm",
    "km",
    "kg",
    "g",
    "K",
    "Hz",
    "kHz",
    "MHz",
    "GHz",
    "KB",
    "MB",
    "GB",
    "TB",
    "eV",
    "J",
    "epochs",
    "steps",
    "tokens",
    "bits",
)
_UNIT = "|".join(re.escape(unit) for unit in sorted(_UNITS, key=len, reverse=True))
_SYMBOL = r"(?:\\[A-Za-z]+|[A-Za-z])(?:_\{[^{}]{1,20}\}|_[A-Za-z0-9])?"
_ASSIGNMENT = re.compile(
    rf"(?<![A-Za-z0-9\\])(?P<symbol>{_SYMBOL})\s*(?:=|:=|\\approx)\s*(?P<value>{_NUMBER})"
    rf"(?:\s*(?P<unit>{_UNIT})(?![A-Za-z]))?"
)
_SETTING = re.compile(
    rf"\b(?:set|fix|choose|chose|use|initiali[sz]e)\s+(?:the\s+)?(?:[A-Za-z\-]+\s+){{0,3}}?"
    rf"(?P<symbol>{_SYMBOL})\s+(?:to|as|at|=)\s+(?P<value>{_NUMBER})(?:\s*(?P<unit>{_UNIT})(?![A-Za-z]))?"
)
_IS_SET = re.compile(
    rf"(?<![A-Za-z0-9\\])(?P<symbol>{_SYMBOL})\s+(?:is|was|are|were)\s+(?:set|fixed|chosen|initiali[sz]ed)\s+"
    rf"(?:to|as|at)\s+(?P<value>{_NUMBER})(?:\s*(?P<unit>{_UNIT})(?![A-Za-z]))?"
)
_INLINE_MATH = re.compile(r"\$([^$]+)\$")


def constants_in_expression(expr: sympy.Basic, context: str = "") -> list[Constant]:
    """Standard constants a parsed formula uses (π, e from the expression; physical ones as described above)."""
    found: list[Constant] = []
    if expr.has(sympy.pi):
        found.append(STANDARD_CONSTANTS["pi"])
    if expr.has(sympy.E):
        found.append(STANDARD_CONSTANTS["e"])
    names = {symbol.name for symbol in expr.free_symbols}
    lowered = context.lower()
    for name in sorted(names):
        if name in _UNMISTAKABLE or any(phrase in lowered for phrase in _NAMED_IN_TEXT.get(name, ())):
            found.append(STANDARD_CONSTANTS[name])
    return found


def constants_in_latex(latex: str, context: str = "") -> list[Constant]:
    """Standard constants of a formula that did not parse, read from its symbols (same rules as above)."""
    names = set(symbols_in(latex))
    found = [STANDARD_CONSTANTS["pi"]] if "pi" in names else []
    lowered = context.lower()
    for name in sorted(names):
        if name in _UNMISTAKABLE or any(phrase in lowered for phrase in _NAMED_IN_TEXT.get(name, ())):
            found.append(STANDARD_CONSTANTS[name])
    return found


def plain_text(text: str) -> str:
    """Context text with inline math normalised (``$ \\lambda = 0 . 5 $`` → ``\\lambda=0.5``) and Greek as LaTeX."""
    text = _INLINE_MATH.sub(lambda match: " " + normalise_latex(match.group(1)) + " ", text)
    for letter, command in UNICODE_GREEK.items():
        text = text.replace(letter, f" {command} ")
    return re.sub(r"[ \t]+", " ", text)


def constants_defined_in(text: str) -> list[Constant]:
    """Symbol values the text fixes ("where λ = 0.5", "we set α to 0.1"); first definition of a name wins."""
    if not text:
        return []
    prepared = plain_text(text)
    found: dict[str, Constant] = {}
    for pattern in (_ASSIGNMENT, _SETTING, _IS_SET):
        for match in pattern.finditer(prepared):
            name = symbol_name(match.group("symbol"))
            value = _number(match.group("value"))
            if name is None or value is None or name in found or not _stands_alone(prepared, match):
                continue
            found[name] = Constant(
                name=name,
                value=value,
                unit=match.group("unit") or "",
                latex=match.group("symbol"),
                source="context",
                evidence=match.group(0).strip(),
            )
    return sorted(found.values(), key=lambda constant: prepared.find(constant.evidence))


_BEFORE_REJECTED = re.compile(r"(?:_\{?|\^\{?|[\[=\\])\s*$")
_AFTER_REJECTED = re.compile(
    r"^(?:[-+*/^(_\w]|\s*[-+*/^]\s*[\w(\\]|\s*,\s*(?:\\[lc]?dots|\.\.\.|\d)|\s*(?:to|\\to|\\leq|<)(?!\w))"
)


def _stands_alone(text: str, match: re.Match[str]) -> bool:
    """A value definition, not a summation bound (``\\sum_{k=1}``), a range (``i=1,…,n``), part of a longer
    expression (``p_K=1-(K-1)p``) or of a chain (``a=b=1``)."""
    before = text[max(0, match.start() - 3) : match.start()]
    after = text[match.end() : match.end() + 12] if match.group("unit") is None else ""
    return not (_BEFORE_REJECTED.search(before) or _AFTER_REJECTED.match(after) or _inside_script(text, match.start()))


def _inside_script(text: str, position: int) -> bool:
    """Whether ``position`` lies inside an open ``_{…}`` or ``^{…}`` (``…]_{i,j=1}^{K}``)."""
    depth = 0
    for index in range(position - 1, max(-1, position - 60), -1):
        if text[index] == "}":
            depth += 1
        elif text[index] == "{":
            if depth == 0:
                return index > 0 and text[index - 1] in "_^"
            depth -= 1
    return False


def _number(text: str) -> float | None:
    power = re.search(r"(?:\\times|\*|×)\s*10\^\{?([-+]?\d+)\}?", text)
    mantissa = text[: power.start()] if power else text
    try:
        value = float(mantissa.strip())
    except ValueError:
        return None
    return value * 10 ** int(power.group(1)) if power else value
