"""Step 4, computability: why a formula is not a scalar function (expectations, sets, norms, sums over index sets …),
before any conversion is tried."""

from __future__ import annotations

from paperlake.formulas.latex.tokens import (
    _NOT_COMPUTABLE_COMMANDS,
    _NOT_COMPUTABLE_STYLED,
    _NOT_COMPUTABLE_WORDS,
    _STYLED_LETTERS,
    RELATIONS,
    Node,
    _flatten,
    _is_letter,
    _word,
    build_tree,
    tokenize,
)

# ------------------------------------------------------------------------------------ not-computable scan


def not_computable_reason(latex: str) -> str | None:
    """Why a (normalised) equation is not a scalar computation, or None when nothing says so."""
    tree = build_tree(tokenize(latex))
    return _scan(tree)


def _scan(nodes: list[Node]) -> str | None:
    for index, node in enumerate(nodes):
        if isinstance(node, list):
            reason = _scan(node)
            if reason:
                return reason
            continue
        following = nodes[index + 1] if index + 1 < len(nodes) else None
        if node in _NOT_COMPUTABLE_COMMANDS:
            return _NOT_COMPUTABLE_COMMANDS[node]
        if node in _STYLED_LETTERS and following is not None:
            key = _STYLED_LETTERS[node] + (_word(following) or "")
            if key in _NOT_COMPUTABLE_STYLED:
                return _NOT_COMPUTABLE_STYLED[key]
        if node in (r"\mathrm", r"\operatorname") and following is not None:
            word = _word(following) or ""
            if word in _NOT_COMPUTABLE_WORDS:
                return _NOT_COMPUTABLE_WORDS[word]
        if node in (r"\max", r"\min") and following == "_":
            return "optimisation over a set (min/max with a subscript)"
        if node in (r"\sum", r"\prod"):
            reason = _summation_reason(nodes, index)
            if reason:
                return reason
        if node == r"\begin":
            environment = _word(following or "") or ""
            return "matrix" if environment != "cases" else "piecewise definition (cases)"
        if node == r"\{" and not (index and nodes[index - 1] in (r"\max", r"\min")):
            return "set notation"
        if node == "[" and index and _is_letter(nodes[index - 1]):
            return "array indexing"
        if node == "[" and _bracket_has_comma(nodes, index):
            return "list, interval or commutator notation"
        if node in (":", r"\colon"):
            return "mapping or type signature (':')"
    letters = "".join(node for node in nodes if _is_letter(node))
    for word in ("softmax", "argmin", "argmax", "Pr", "Tr"):
        if word in letters and _letters_spell(nodes, word):
            return _NOT_COMPUTABLE_WORDS.get(word, f"{word} notation")
    return None


def _bracket_has_comma(nodes: list[Node], index: int) -> bool:
    depth = 0
    for node in nodes[index:]:
        if node in ("(", "["):
            depth += 1
        elif node in (")", "]"):
            depth -= 1
            if depth == 0:
                return False
        elif node == "," and depth == 1:
            return True
    return False


def _letters_spell(nodes: list[Node], word: str) -> bool:
    for start in range(len(nodes) - len(word) + 1):
        if all(nodes[start + offset] == letter for offset, letter in enumerate(word)):
            return True
    return False


def _summation_reason(nodes: list[Node], index: int) -> str | None:
    lower = upper = None
    probe = index + 1
    while probe + 1 < len(nodes) and nodes[probe] in ("_", "^"):
        if nodes[probe] == "_":
            lower = nodes[probe + 1]
        else:
            upper = nodes[probe + 1]
        probe += 2
    lower_tokens = _flatten(lower) if lower is not None else []
    if "=" not in lower_tokens:
        return "sum or product over an unspecified index set"
    if upper is None:
        return "sum or product without an upper bound"
    after_equals = lower_tokens[lower_tokens.index("=") + 1 :]
    if any(token in RELATIONS or token in ("|", r"\mid") for token in after_equals):
        return "sum or product with a condition on the index"
    return None
