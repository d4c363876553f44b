"""Step 3, names: every name of an equation (``W_{q}``, ``\\mathrm{TLD}_{t}``, ``\\hat{y}``) as one identifier, the way
parameters, constants and templates call it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from paperlake.formulas.latex.normalise import normalise_latex
from paperlake.formulas.latex.tokens import (
    _ACCENTS,
    _DIGITS,
    _NOT_COMPUTABLE_STYLED,
    _STYLED_LETTERS,
    GREEK,
    KNOWN_FUNCTION_WORDS,
    Node,
    RewriteError,
    _as_list,
    _flatten,
    _is_letter,
    _matching_paren,
    _word,
    build_tree,
    emit,
    tokenize,
)

# ---------------------------------------------------------------------------------- names and identifiers


def identifier(raw: str) -> str:
    """A Python identifier for a symbol spelled ``raw`` (``d_{k}`` → ``d_k``, ``w_{k+1}`` → ``w_kp1``)."""
    text = raw.replace("\\", "").replace("'", "prime")
    text = text.replace("+", "p").replace("-", "m").replace("*", "star").replace("<", "lt").replace(">", "gt")
    text = re.sub(r"[{}\s]", "", text)
    text = re.sub(r"[^0-9A-Za-z_]+", "_", text)
    text = re.sub(r"_+", "_", text).strip("_")
    if not text:
        return "x"
    return f"v_{text}" if text[0].isdigit() else text


def symbol_name(latex: str) -> str | None:
    """The identifier the formula chain uses for an inline symbol (``$\\lambda$``, ``W_{q}``, ``λ``), or None.

    Lets text mining (parameter descriptions, constants) name symbols exactly as the parsed formulas do.
    """
    normalised = normalise_latex(latex)
    if not normalised:
        return None
    nodes = build_tree(tokenize(normalised))
    atom, end = _read_atom(nodes, 0, frozenset())
    if atom is None or atom.power is not None:
        return None
    if end < len(nodes) and nodes[end] == "(":  # ``p_{x,i}(v)``: the function's name
        try:
            end = _matching_paren(nodes, end) + 1
        except RewriteError:
            return None
    return atom.identifier if end == len(nodes) else None


def symbols_in(latex: str) -> dict[str, str]:
    """``{identifier: LaTeX}`` of every name in an equation, parsed or not (for describing symbols)."""
    found: dict[str, str] = {}

    def walk(nodes: list[Node]) -> None:
        index = 0
        while index < len(nodes):
            node = nodes[index]
            if isinstance(node, list):
                walk(node)
                index += 1
                continue
            atom, end = _read_atom(nodes, index, frozenset())
            if atom is None:
                index += 1
                continue
            if atom.identifier.split("_")[0] not in _NOT_COMPUTABLE_STYLED:  # operators such as E[·], P(·)
                found.setdefault(atom.identifier, atom.latex)
            if atom.power is not None:
                walk(_as_list(atom.power))
            index = end

    walk(build_tree(tokenize(normalise_latex(latex))))
    return found


@dataclass
class _Atom:
    identifier: str
    latex: str
    multi_letter: bool
    subscript_tokens: frozenset[str]
    power: Node | None = None
    transpose: bool = False


def _read_atom(nodes: list[Node], index: int, known_words: frozenset[str]) -> tuple[_Atom | None, int]:
    """A name at ``index`` with its sub/superscripts, or ``(None, index)`` when none starts there."""
    start = index
    node = nodes[index]
    if isinstance(node, list):
        return None, start
    base: str | None = None
    multi_letter = False
    if _is_letter(node):
        run = ""
        probe = index
        while probe < len(nodes) and _is_letter(nodes[probe]):
            run += nodes[probe]
            probe += 1
        base = next(
            (word for word in sorted(known_words, key=len, reverse=True) if len(word) > 1 and run.startswith(word)),
            None,
        )
        if base is None:
            base = next(
                (
                    word
                    for word in sorted(KNOWN_FUNCTION_WORDS, key=len, reverse=True)
                    if run.startswith(word) and _probe_is(nodes, index + len(word), "(")
                ),
                node,
            )
        multi_letter = len(base) > 1
        index += len(base)
    elif isinstance(node, str) and node.lstrip("\\") in GREEK and node.startswith("\\"):
        base = node[1:]
        index += 1
    elif node in (r"\mathrm", r"\operatorname") and index + 1 < len(nodes):
        word = _word(nodes[index + 1])
        if word is None:
            return None, start
        base, multi_letter = word, len(word) > 1
        index += 2
    elif node in _STYLED_LETTERS and index + 1 < len(nodes):
        inner = _word(nodes[index + 1])
        if inner is None:
            return None, start
        base = _STYLED_LETTERS[node] + inner
        index += 2
    elif node in _ACCENTS and index + 1 < len(nodes):
        inner_nodes = _as_list(nodes[index + 1])
        inner, inner_end = _read_atom(inner_nodes, 0, known_words) if inner_nodes else (None, 0)
        if inner is None or inner_end != len(inner_nodes):
            return None, start
        base = inner.identifier + _ACCENTS[node]
        multi_letter = inner.multi_letter
        index += 2
    if base is None:
        return None, start
    raw = base
    subscripts: set[str] = set()
    power: Node | None = None
    transpose = False
    name_end = index  # the name's own LaTeX ends here (a transpose or power is not part of it)
    while index < len(nodes) and power is None:
        marker = nodes[index]
        if marker == "'" or (isinstance(marker, str) and set(marker) == {"'"}):
            raw += "prime" * len(marker)
            index += 1
            name_end = index
        elif marker == "_" and index + 1 < len(nodes):
            tokens = _subscript_tokens(nodes[index + 1])
            subscripts.update(tokens)
            raw += "_{" + "".join(_script_text(nodes[index + 1])) + "}"
            index += 2
            name_end = index
        elif marker == "^" and index + 1 < len(nodes):
            kind = _superscript_kind(nodes[index + 1], has_subscript=bool(subscripts), base=base)
            if kind == "transpose":
                transpose = True
            elif kind == "power":
                power = nodes[index + 1]
            else:
                suffix = "".join(_script_text(nodes[index + 1])) if kind == "index" else kind
                raw += "^{" + suffix + "}"
                subscripts.update(_subscript_tokens(nodes[index + 1]) if kind == "index" else ())
                name_end = index + 2
            index += 2
        else:
            break
    source = emit(nodes[start:name_end])
    return _Atom(
        identifier(raw.replace("^", "_")), source, multi_letter, frozenset(subscripts), power, transpose
    ), index


def _probe_is(nodes: list[Node], index: int, token: str) -> bool:
    return index < len(nodes) and nodes[index] == token


def _script_text(node: Node) -> list[str]:
    """Flatten a script into name pieces: Greek commands by name, styled letters with their prefix."""
    pieces: list[str] = []
    for token in _flatten(node):
        if token in _STYLED_LETTERS:
            pieces.append(_STYLED_LETTERS[token])
        elif token in (r"\mathrm", r"\operatorname") or token in _ACCENTS:
            continue
        elif token.startswith("\\"):
            pieces.append(token[1:] if token[1:].isalpha() else "")
        else:
            pieces.append(token)
    return [piece for piece in pieces if piece]


def _subscript_tokens(node: Node) -> set[str]:
    """The index names in a script (``k``, ``i`` in ``{x,i}``; ``t`` in ``{t_{k}}``) for the summation check."""
    text = "".join(piece if piece.isalnum() else " " for piece in _script_text(node))
    names: set[str] = set()
    for token in text.split():
        if token.isdigit():
            continue
        names.add(token)
        if token.isalpha() and len(token) <= 3 and token.islower():
            names.update(token)
    return names


def _superscript_kind(node: Node, *, has_subscript: bool, base: str) -> str:
    """Decide what a superscript means: ``transpose``, ``star``, ``dagger``, ``index`` or ``power``."""
    tokens = _flatten(node)
    text = "".join(_script_text(node))
    if tokens == [r"\top"]:
        return "transpose"
    if tokens in (["*"], [r"\ast"], [r"\star"]):
        return "star"
    if tokens == [r"\dagger"]:
        return "dagger"
    if tokens and (tokens[0] == "(" and tokens[-1] == ")" or tokens[0] in (r"\mathrm", r"\operatorname")):
        return "index"
    if _DIGITS.match(text) or re.fullmatch(r"\\frac\{?\d+\}?\{?\d+\}?", text) or text in ("-1", "2", "3"):
        return "power"
    if len(tokens) == 1 and _is_letter(tokens[0]) and tokens[0].isupper():
        return "index"
    if has_subscript and re.fullmatch(r"[A-Za-z]{1,3}([+\-]\d)?", text) and base != "e":
        return "index"
    return "power"
