"""What a formula's symbols mean, read from the text around it ("where x is …", "x denotes …").

Papers describe symbols right before or, mostly, right after a display equation. The text from MinerU writes
inline math as ``$ … $`` with spaced tokens; every inline span that is a single symbol is named exactly as the
formula chain names it (:func:`paperlake.formulas.latex.symbol_name`), so "where $W _ { q }$ is the query
projection" describes the parameter ``W_q`` of the parsed formula.

An LLM can fill the gaps through :data:`ParameterDescriber` — any callable ``(formula_latex, context) ->
{symbol: description}``; symbols may be given as identifiers or LaTeX. Nothing here calls a model: the hook is
the caller's. Descriptions found in the text win over the hook's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from paperlake.formulas.latex import UNICODE_GREEK, normalise_latex, split_lhs_rhs, symbol_name

ParameterDescriber = Callable[[str, str], Mapping[str, str]]

_MARK = "\u27e6{}\u27e7"  # ⟦name⟧ stands for an inline symbol inside prepared text
_MARKED = r"\u27e6(?P<{group}>[A-Za-z_][A-Za-z0-9_]*)\u27e7"
_INLINE_MATH = re.compile(r"\$([^$]+)\$")
_VERBS = (
    r"is|are|denotes?|represents?|refers? to|stands? for|indicates?|means?|corresponds? to|"
    r"is defined as|are defined as|is the|are the"
)
_END = r"(?=\s*(?:[.;](?:\s|$)|,\s*(?:and|while|whereas|where)\b|,\s*\u27e6|\s+and\s+\u27e6|$))"
_DEFINITION = re.compile(
    rf"(?P<subjects>{_MARKED.format(group='first')}(?:\s*(?:,|and|,\s*and)\s*\u27e6[A-Za-z0-9_]+\u27e7)*)"
    rf"\s+(?:{_VERBS})\s+(?P<description>[^.;]{{3,200}}?){_END}"
)
# A letter written without $…$ ("where X is the input"): only right after where/and/with and before a verb.
_BARE_LETTER = re.compile(rf"\b(?P<lead>where|Where|and|with)\s(?P<letter>(?![aI]\b)[A-Za-z])(?=\s+(?:{_VERBS})\b)")
_STOP_WORDS = frozenset("to which that of for in on with by from as is are where and or when while".split())
_NOUN_BEFORE = re.compile(
    rf"\b(?:the|a|an|our)\s+(?P<description>[a-z][a-z\- ]{{2,50}}?)\s*,?\s+{_MARKED.format(group='name')}"
)
_LABEL = re.compile(
    r"(?:^|[.;:]\s+|\b)(?:the|The|our|Our|an?|An?)\s+(?P<label>[A-Za-z][\w\- ]{2,60}?)\s+"
    r"(?:\([^)]*\)\s+)?(?:of\s+[^,.]{1,40}\s+)?(?:is|are|can be|could be|was|were|will be)\s+"
    r"(?:then\s+|thus\s+|therefore\s+|formally\s+|simply\s+)?"
    r"(?:defined|computed|calculated|given|formulated|written|expressed|obtained|estimated|measured|"
    r"formalized|formalised|denoted|updated)\s+(?:as|by)\b"
)
_DEFINE_LABEL = re.compile(
    r"\b(?:we|We)\s+(?:define|compute|calculate|formulate|measure|estimate)\s+(?:the\s+)?"
    r"(?P<label>[a-z][\w\- ]{2,60}?)\s+(?:\u27e6[^\u27e7]+\u27e7\s+)?(?:as|by|with)\b"
)


def prepare_text(text: str) -> tuple[str, dict[str, str]]:
    """Mark every inline single-symbol span as ``⟦name⟧``; other inline math becomes its compact LaTeX.

    Returns the prepared text and ``{name: latex}`` for the marked symbols.
    """
    symbols: dict[str, str] = {}

    def replace(match: re.Match[str]) -> str:
        latex = normalise_latex(match.group(1))
        trailing = match.group(1).rstrip()[-1:]  # MinerU puts sentence punctuation inside the math
        punctuation = trailing if trailing in (".", ",", ";") else ""
        name = symbol_name(latex) if latex else None
        rest = ""
        if name is None and latex:  # ``$\beta \in (0,1)$``: the symbol, then what is said about it
            head, relation, tail = split_lhs_rhs(latex)
            name = symbol_name(head) if head and relation else None
            latex, rest = (head, f" {relation} {tail}") if name else (latex, "")
        if name is None:
            return f" {latex}{punctuation} "
        symbols.setdefault(name, latex)
        return " " + _MARK.format(name) + rest + punctuation + " "

    prepared = _INLINE_MATH.sub(replace, text)
    prepared = _BARE_LETTER.sub(lambda match: _bare_letter(match, symbols), prepared)
    for letter, command in UNICODE_GREEK.items():
        if letter in prepared:
            name = symbol_name(command)
            if name:
                symbols.setdefault(name, command)
                prepared = prepared.replace(letter, " " + _MARK.format(name) + " ")
    return re.sub(r"[ \t]+", " ", prepared), symbols


def _bare_letter(match: re.Match[str], symbols: dict[str, str]) -> str:
    symbols.setdefault(match.group("letter"), match.group("letter"))
    return f"{match.group('lead')} " + _MARK.format(match.group("letter"))


def readable(prepared: str, symbols: Mapping[str, str]) -> str:
    """Prepared text back to prose, symbols as ``$latex$``."""
    text = re.sub(
        r"\u27e6([^\u27e7]+)\u27e7", lambda match: f"${symbols.get(match.group(1), match.group(1))}$", prepared
    )
    return re.sub(r"\s+([,.;:)])", r"\1", re.sub(r"\s+", " ", text)).strip()


def describe_parameters(
    symbols: Iterable[str],
    context: str,
    *,
    formula_latex: str = "",
    describer: ParameterDescriber | None = None,
) -> dict[str, str]:
    """``{name: description}`` for the requested symbol names, from the text and then from ``describer``."""
    wanted = set(symbols)
    prepared, latex_of = prepare_text(context or "")
    found: dict[str, str] = {}
    for match in _DEFINITION.finditer(prepared):
        description = readable(match.group("description"), latex_of).rstrip(",")
        for name in re.findall(r"\u27e6([^\u27e7]+)\u27e7", match.group("subjects")):
            if name in wanted:
                found.setdefault(name, description)
    for match in _NOUN_BEFORE.finditer(prepared):
        name, description = match.group("name"), match.group("description").strip()
        if name in wanted and name not in found and not _STOP_WORDS & set(description.split()):
            found[name] = description
    if describer is not None and wanted - set(found):
        for symbol, description in describer(formula_latex, context).items():
            name = symbol if symbol.isidentifier() else symbol_name(symbol)
            if name in wanted and name not in found and description:
                found[name] = str(description).strip()
    return found


def formula_label(context_before: str) -> str | None:
    """A name for the formula from the sentence that introduces it ("The average entropy … is defined as")."""
    if not context_before:
        return None
    prepared, latex_of = prepare_text(context_before)
    last_sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z])", prepared.strip())[-1]
    for pattern in (_LABEL, _DEFINE_LABEL):
        matches = list(pattern.finditer(last_sentence))
        if matches:
            label = readable(matches[-1].group("label"), latex_of)
            return label[:1].upper() + label[1:]
    return None
