"""Step 2, split: rows into equations (continuation rows joined), an equation at its top-level relations."""

from __future__ import annotations

from paperlake.formulas.latex.normalise import normalise_latex
from paperlake.formulas.latex.tokens import RELATIONS, Node, build_tree, emit, tokenize

# -------------------------------------------------------------------------------------- splitting equations


def split_equations(latex: str) -> list[str]:
    """Rows of a (normalised) display equation as separate equations; continuation rows (``= …``, or ``+ …``
    after an equation) join the row before."""
    normalised = normalise_latex(latex)
    equations: list[str] = []
    for row in normalised.split(r" \\ "):
        row = row.strip()
        if not row:
            continue
        tokens = tokenize(row)
        starts_with_relation = _relation_at(build_tree(tokens), 0) is not None
        continues_sum = tokens[0] in ("+", "-") and bool(equations) and bool(split_relations(equations[-1])[1])
        if (starts_with_relation or continues_sum) and equations:
            equations[-1] = normalise_latex(f"{equations[-1]} {row}")
        else:
            equations.append(row)
    return equations


def _relation_at(nodes: list[Node], index: int) -> str | None:
    node = nodes[index]
    if isinstance(node, str) and node in RELATIONS:
        return node
    return None


def split_relations(latex: str) -> tuple[list[str], list[str]]:
    """Top-level segments and the relations between them: ``a = b \\leq c`` → ([a, b, c], ['=', '<='])."""
    tree = build_tree(tokenize(latex))
    segments: list[list[Node]] = [[]]
    relations: list[str] = []
    depth = 0
    for index, node in enumerate(tree):
        if isinstance(node, str) and node in ("(", "["):
            depth += 1
        elif isinstance(node, str) and node in (")", "]") and depth:
            depth -= 1
        relation = _relation_at(tree, index) if depth == 0 else None
        if relation is not None:
            relations.append(RELATIONS[relation])
            segments.append([])
        else:
            segments[-1].append(node)
    return [emit(segment) for segment in segments], relations


def split_lhs_rhs(latex: str) -> tuple[str | None, str | None, str]:
    """``(lhs, relation, rhs)`` at the first top-level relation; ``(None, None, latex)`` for a bare expression.

    A leading relation (a continuation row such as ``= …``) gives ``lhs=None``; ``rhs`` keeps any further
    relations (``a = b = c`` → ``('a', '=', 'b = c')``).
    """
    normalised = normalise_latex(latex)
    segments, relations = split_relations(normalised)
    if not relations:
        return None, None, normalised
    return (segments[0] or None), relations[0], _rejoin(segments[1:], relations[1:])


def _rejoin(segments: list[str], relations: list[str]) -> str:
    symbols = {value: key for key, value in RELATIONS.items()}
    pieces = [segments[0]]
    for relation, segment in zip(relations, segments[1:]):
        pieces.extend([symbols.get(relation, relation), segment])
    return " ".join(pieces)
