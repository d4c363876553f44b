"""A key that is the same for the same formula written with different symbols, and text for embedding it.

``\\frac{QK^T}{\\sqrt{d_k}}`` in one paper and ``\\frac{AB^T}{\\sqrt{n}}`` in another are one formula. The key
renames free symbols to ``x0, x1, …`` in an order fixed by structure, not by name: each symbol gets a signature
from the paths that lead to its occurrences (which operations, which argument position for non-commutative
ones), refined once by the signatures of the symbols it sits next to. Symbols are ordered by signature; for
symbols whose signatures tie, every order is tried (bounded) and the smallest ``srepr`` wins, so the result does
not depend on the names. ``a/b`` and ``a*b`` differ because their trees differ.

Renaming is only sound for formulas with some structure. ``τ = θ_t − θ_0`` and ``gain = H_x − H_y`` share the
shape "difference of two things", which says nothing about them being the same formula; below
``min_operations`` operations the key keeps the real names. For a definition ``y = f(…)`` the key is built from
the right-hand side only (the defined name is just another name); an equation whose left side is not a name
keeps both sides. Expressions are expanded first (when that stays small) so ``a(b+c)`` and ``ab+ac`` agree.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from typing import TYPE_CHECKING

import sympy
from sympy.core.function import AppliedUndef

if TYPE_CHECKING:
    from paperlake.formulas.model import Formula

MIN_OPERATIONS = 3
MAX_RENAMINGS = 720
_MAX_EXPANDED_OPERATIONS = 60


def canonical_key(
    expr: sympy.Basic, *, min_operations: int = MIN_OPERATIONS, max_renamings: int = MAX_RENAMINGS
) -> str:
    """``shape:<srepr>`` (renaming-invariant) or ``exact:<srepr>`` (names kept) for a parsed formula."""
    relation, body = _defining_part(expr)
    body = _expanded(body)
    if sympy.count_ops(body) < min_operations:
        return f"exact:{relation}:{sympy.srepr(body)}"
    return f"shape:{relation}:{sympy.srepr(_canonical_renaming(body, max_renamings)[0])}"


def symbol_correspondence(expr: sympy.Basic, *, max_renamings: int = MAX_RENAMINGS) -> dict[str, str]:
    """``{symbol name: canonical name}`` used by :func:`canonical_key`; composing two of these maps one
    formula's parameters onto another's when their keys match."""
    _, body = _defining_part(expr)
    body = _expanded(body)
    if sympy.count_ops(body) < MIN_OPERATIONS:
        return {symbol.name: symbol.name for symbol in body.free_symbols}
    return _canonical_renaming(body, max_renamings)[1]


def _defining_part(expr: sympy.Basic) -> tuple[str, sympy.Basic]:
    if isinstance(expr, sympy.Equality) and isinstance(expr.lhs, (sympy.Symbol, AppliedUndef)):
        return "def", expr.rhs
    if isinstance(expr, sympy.core.relational.Relational):
        return type(expr).__name__, sympy.Tuple(expr.lhs, expr.rhs)
    return "expr", expr


def _expanded(expr: sympy.Basic) -> sympy.Basic:
    if isinstance(expr, sympy.Tuple):
        return sympy.Tuple(*(_expanded(part) for part in expr))
    try:
        expanded = sympy.expand(expr)
    except (TypeError, ValueError):  # expand refuses some undefined-function trees; the plain form is fine
        return expr
    return expanded if sympy.count_ops(expanded) <= _MAX_EXPANDED_OPERATIONS else expr


def _paths(expr: sympy.Basic) -> dict[sympy.Symbol, list[tuple[str, ...]]]:
    """Every occurrence of every free symbol as the path of (operation, position) steps from the root."""
    found: dict[sympy.Symbol, list[tuple[str, ...]]] = defaultdict(list)

    def walk(node: sympy.Basic, path: tuple[str, ...]) -> None:
        if isinstance(node, sympy.Symbol):
            found[node].append(path)
            return
        commutative = isinstance(node, (sympy.Add, sympy.Mul))
        name = node.func.__name__ if not isinstance(node, AppliedUndef) else f"fn:{node.func.__name__}"
        for position, argument in enumerate(node.args):
            walk(argument, path + (f"{name}/{'*' if commutative else position}",))

    walk(expr, ())
    return found


def _signatures(expr: sympy.Basic) -> dict[sympy.Symbol, str]:
    paths = _paths(expr)
    first = {symbol: repr(sorted(occurrences)) for symbol, occurrences in paths.items()}
    neighbours: dict[sympy.Symbol, list[str]] = defaultdict(list)
    for node in sympy.preorder_traversal(expr):
        members = [argument for argument in node.args if argument in first]
        for member in members:
            neighbours[member].extend(sorted(first[other] for other in members if other != member))
    return {symbol: first[symbol] + "|" + repr(sorted(neighbours[symbol])) for symbol in first}


def _canonical_renaming(expr: sympy.Basic, max_renamings: int) -> tuple[sympy.Basic, dict[str, str]]:
    signatures = _signatures(expr)
    groups: dict[str, list[sympy.Symbol]] = defaultdict(list)
    for symbol, signature in signatures.items():
        groups[signature].append(symbol)
    ordered = [sorted(groups[signature], key=lambda symbol: symbol.name) for signature in sorted(groups)]
    if math.prod(math.factorial(len(group)) for group in ordered) > max_renamings:
        orderings = [tuple(itertools.chain.from_iterable(ordered))]  # bounded: names break the remaining ties
    else:
        orderings = [
            tuple(itertools.chain.from_iterable(choice))
            for choice in itertools.product(*(itertools.permutations(group) for group in ordered))
        ]
    candidates = []
    for ordering in orderings:
        mapping = {symbol: sympy.Symbol(f"x{position}") for position, symbol in enumerate(ordering)}
        renamed = expr.xreplace(mapping)
        candidates.append((sympy.srepr(renamed), renamed, {old.name: new.name for old, new in mapping.items()}))
    _, renamed, names = min(candidates, key=lambda candidate: candidate[0])
    return renamed, names


def composite_description(formula: Formula) -> str:
    """One text per formula for embedding: label, normalised LaTeX, what the parameters mean, the context."""
    parts = [formula.label or formula.output or "formula", f"Formula: {formula.normalised_latex}"]
    described = [
        f"{parameter.name}: {parameter.description}" for parameter in formula.parameters if parameter.description
    ]
    if described:
        parts.append("Parameters: " + "; ".join(described))
    if formula.occurrences and formula.occurrences[0].context:
        parts.append("Context: " + formula.occurrences[0].context.strip()[:600])
    return ". ".join(parts)
