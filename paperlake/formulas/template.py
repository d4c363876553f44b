"""sympy formula → an executable Python template that only :func:`paperlake.runtime.safe_eval.safe_eval` runs.

A template is a plain expression string over parameter names, constant names and the evaluator's whitelisted
functions, e.g. ``Q*K/sqrt(d_k)``. It is printed from the sympy tree by a printer that knows only our whitelist,
then parsed back with :mod:`ast` and checked name by name before anyone may run it, so a template stored in the
warehouse cannot smuggle anything the evaluator would not run anyway. Vectors and matrices are treated as
scalars: a transpose prints as its argument.

What cannot become a scalar template raises :class:`TemplateError` with the reason (undefined functions such as
``softmax``, sums over indexed terms such as ``\\sum_k p_k``, inequalities, a left-hand side that is an
expression rather than a name).
"""

from __future__ import annotations

import ast
import keyword
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sympy
from sympy.core.function import AppliedUndef
from sympy.printing.str import StrPrinter

from paperlake.formulas.latex import TRANSPOSE
from paperlake.runtime.safe_eval import CONSTANTS, FUNCTIONS, Number, safe_eval

RESERVED = frozenset(FUNCTIONS) | frozenset(CONSTANTS) | frozenset(keyword.kwlist)
_PROBE_VALUES = (
    (1.3, 0.7, 2.1, 1.7, 0.9, 1.1, 2.6, 0.6),
    (0.4, 1.9, 0.8, 3.2, 1.4, 2.2, 0.3, 1.6),
    (2.5, 1.2, 0.35, 0.85, 3.1, 0.45, 1.15, 2.75),
)


class TemplateError(ValueError):
    """The formula has no scalar template; the message is the reason, worded for the formula's record."""


@dataclass(frozen=True)
class FormulaTemplate:
    """``output = expression`` over ``parameters`` (caller-supplied numbers) and ``constants`` (fixed values)."""

    output: str
    expression: str
    parameters: tuple[str, ...]
    constants: dict[str, float] = field(default_factory=dict)
    symbol_names: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def evaluate(self, **values: float) -> Number:
        """Compute the output; every parameter is required, nothing else is accepted."""
        unknown = sorted(set(values) - set(self.parameters))
        if unknown:
            raise TemplateError(f"unknown parameter(s) {unknown}; expected {list(self.parameters)}")
        missing = [name for name in self.parameters if name not in values]
        if missing:
            raise TemplateError(f"missing parameter(s) {missing}")
        return safe_eval(self.expression, {**self.constants, **values})


class _WhitelistPrinter(StrPrinter):
    """sympy's string printer, spelled for :mod:`paperlake.runtime.safe_eval` and our identifiers."""

    def __init__(self, names: Mapping[str, str]):
        super().__init__({"order": "none"})
        self.names = names

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return self.names[expr.name]

    def _print_Exp1(self, expr: sympy.Basic) -> str:
        return "e"

    def _print_Pi(self, expr: sympy.Basic) -> str:
        return "pi"

    def _print_Abs(self, expr: sympy.Basic) -> str:
        return f"abs({self._print(expr.args[0])})"

    def _print_Max(self, expr: sympy.Basic) -> str:
        return "max(" + ", ".join(self._print(argument) for argument in expr.args) + ")"

    def _print_Min(self, expr: sympy.Basic) -> str:
        return "min(" + ", ".join(self._print(argument) for argument in expr.args) + ")"

    def _print_ceiling(self, expr: sympy.Basic) -> str:
        return f"ceil({self._print(expr.args[0])})"

    def _print_binomial(self, expr: sympy.Basic) -> str:
        return f"comb({self._print(expr.args[0])}, {self._print(expr.args[1])})"


def python_identifier(name: str) -> str:
    """A parameter name safe for templates: never a keyword, function or constant name (``lambda`` → ``lambda_``)."""
    return f"{name}_" if name in RESERVED or not name.isidentifier() else name


def scalar_expression(expr: sympy.Basic, indices: Mapping[str, frozenset[str]] | None = None) -> sympy.Basic:
    """Resolve what a scalar reading allows (transposes, sums over plain terms); refuse the rest."""
    indices = indices or {}
    had_symbols = bool(expr.free_symbols)
    expr = expr.replace(
        lambda node: isinstance(node, AppliedUndef) and node.func == TRANSPOSE, lambda node: node.args[0]
    )
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, (sympy.Sum, sympy.Product)):
            for limit in node.limits:
                index = limit[0].name
                indexed = sorted(
                    symbol.name
                    for symbol in node.function.free_symbols
                    if index in indices.get(symbol.name, frozenset())
                )
                if indexed:
                    kind = "sum" if isinstance(node, sympy.Sum) else "product"
                    raise TemplateError(f"{kind} over indexed terms {', '.join(indexed)} (needs a vector of values)")
    if expr.has(sympy.Sum, sympy.Product):
        expr = expr.doit()
        if expr.has(sympy.Sum, sympy.Product):
            raise TemplateError("sum or product without a closed form")
    undefined = sorted({node.func.__name__ for node in expr.atoms(AppliedUndef)})
    if undefined:
        raise TemplateError(
            f"uses function(s) {', '.join(f'{name}()' for name in undefined)} with no scalar definition"
        )
    if expr.has(sympy.Integral, sympy.Derivative, sympy.oo, -sympy.oo, sympy.zoo, sympy.nan, sympy.I):
        raise TemplateError("contains an integral, derivative, infinity or complex number")
    if had_symbols and not expr.free_symbols:
        raise TemplateError(f"collapses to the constant {expr} when read as scalars (a vector identity)")
    return expr


def split_definition(expr: sympy.Basic) -> tuple[str | None, sympy.Basic, list[str]]:
    """``(output name, right-hand side, notes)`` of a definition; a bare expression has no output name."""
    if isinstance(expr, sympy.Equality):
        lhs, rhs = expr.lhs, expr.rhs
        if isinstance(lhs, sympy.Symbol):
            return lhs.name, rhs, []
        if isinstance(lhs, AppliedUndef):
            return lhs.func.__name__, rhs, []
        return _solve_for_lhs_symbol(lhs, rhs)
    if isinstance(expr, sympy.core.relational.Relational):
        raise TemplateError("inequality: states a bound, not a value")
    return None, expr, []


def _solve_for_lhs_symbol(lhs: sympy.Basic, rhs: sympy.Basic) -> tuple[str, sympy.Basic, list[str]]:
    """``\\frac{1}{\\delta} = S`` → ``delta = 1/S`` when the left side has exactly one unknown of its own."""
    own = sorted(lhs.free_symbols - rhs.free_symbols, key=lambda symbol: symbol.name)
    if len(own) != 1 or sympy.count_ops(lhs) + sympy.count_ops(rhs) > 60 or lhs.atoms(AppliedUndef):
        raise TemplateError("left-hand side is an expression, not a defined quantity")
    target = own[0]
    solutions = sympy.solve(sympy.Eq(lhs, rhs), target, dict=True)
    if len(solutions) != 1:
        raise TemplateError(f"left-hand side is an expression with {len(solutions)} solutions for {target}")
    return target.name, solutions[0][target], [f"solved the equation for {target.name}"]


def build_template(
    expr: sympy.Basic,
    *,
    constants: Mapping[str, float] | None = None,
    indices: Mapping[str, frozenset[str]] | None = None,
    output: str | None = None,
) -> FormulaTemplate:
    """Template of a sympy definition (``Eq``) or expression; ``constants`` are symbol names with fixed values."""
    constants = dict(constants or {})
    lhs_name, rhs, notes = split_definition(expr)
    rhs = scalar_expression(rhs, indices)
    names: dict[str, str] = {}
    for original in sorted(symbol.name for symbol in rhs.free_symbols):
        candidate = python_identifier(original)
        while candidate in names.values():
            candidate += "_"
        names[original] = candidate
    text = _WhitelistPrinter(names).doprint(rhs)
    constant_values = {names[name]: float(value) for name, value in constants.items() if name in names}
    parameters = tuple(sorted(name for name in names.values() if name not in constant_values))
    output_name = python_identifier(output or lhs_name or "value")
    _validate(text, set(parameters) | set(constant_values))
    return FormulaTemplate(
        output=output_name,
        expression=text,
        parameters=parameters,
        constants=constant_values,
        symbol_names={renamed: original for original, renamed in names.items()},
        notes=tuple(notes),
    )


def _validate(text: str, names: set[str]) -> None:
    """Parse the printed template and check every name: a parameter, a constant or a whitelisted call."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise TemplateError(f"printed template is not valid Python: {error.msg}") from None
    called = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
            raise TemplateError(f"template calls something outside the whitelist: {ast.unparse(node.func)}")
        if isinstance(node, ast.Name) and node.id not in names | set(CONSTANTS) | called:
            raise TemplateError(f"template uses the unknown name {node.id!r}")
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Lambda, ast.comprehension)):
            raise TemplateError(f"template contains {type(node).__name__}")


def cross_check(
    template: FormulaTemplate, expr: sympy.Basic, indices: Mapping[str, frozenset[str]] | None = None
) -> str | None:
    """Compare the template with sympy's own numeric value at fixed probe points; None when they agree.

    This is what turns a formula from ``templated`` into ``validated``: the printed Python means the same as
    the parsed mathematics. A probe that leaves the domain (log of a negative …) moves on to the next one.
    """
    rhs = scalar_expression(split_definition(expr)[1], indices)
    names = list(template.parameters)
    last_error = "no probe point inside the formula's domain"
    for probe in _PROBE_VALUES:
        values = {
            name: probe[position % len(probe)] * (1 + position // len(probe)) for position, name in enumerate(names)
        }
        try:
            computed = float(template.evaluate(**values))
        except Exception as error:  # a domain error at this probe point; try the next one
            last_error = str(error)
            continue
        substitutions = {
            sympy.Symbol(template.symbol_names[name]): value for name, value in {**values, **template.constants}.items()
        }
        expected = sympy.N(rhs.xreplace(substitutions))
        if not expected.is_real or not expected.is_finite:
            last_error = f"sympy gives {expected} at the probe point"
            continue
        if math.isclose(computed, float(expected), rel_tol=1e-9, abs_tol=1e-12):
            return None
        return f"template gives {computed!r} but sympy gives {float(expected)!r} at {values}"
    return last_error


def check_proposed_template(
    expression: str, output: str, parameters: Sequence[str], symbols: Mapping[str, str]
) -> FormulaTemplate:
    """A template proposed from outside the sympy chain (an LLM), held to the same rules plus a parameter check.

    ``symbols`` are the formula's own names (``{identifier: LaTeX}``). The expression must pass the AST whitelist
    over exactly ``parameters``; every parameter must occur in the expression and name a symbol of the formula;
    the output must be a plain name; and the template must evaluate at some probe point. Raises
    :class:`TemplateError` with the reason otherwise.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise TemplateError("no expression")
    if not isinstance(output, str) or not output.isidentifier() or keyword.iskeyword(output):
        raise TemplateError(f"output {output!r} is not a plain name")
    declared = list(parameters)
    bad = [name for name in declared if not isinstance(name, str) or not name.isidentifier() or name in RESERVED]
    if bad:
        raise TemplateError(f"parameter name(s) {bad} are not usable identifiers")
    _validate(expression, set(declared))
    used = {node.id for node in ast.walk(ast.parse(expression, mode="eval")) if isinstance(node, ast.Name)}
    unused = sorted(set(declared) - used)
    if unused:
        raise TemplateError(f"declared parameter(s) {unused} do not occur in the expression")
    foreign = sorted(name for name in declared if name not in symbols)
    if foreign:
        raise TemplateError(f"parameter(s) {foreign} are not symbols of the formula (its symbols: {sorted(symbols)})")
    template = FormulaTemplate(
        output=output,
        expression=expression.strip(),
        parameters=tuple(sorted(declared)),
        symbol_names={name: name for name in declared},
        notes=("template proposed by an LLM; AST-validated and parameter-checked, not cross-checked against sympy",),
    )
    last_error = "no probe point inside the formula's domain"
    for probe in _PROBE_VALUES:
        values = {name: probe[position % len(probe)] for position, name in enumerate(template.parameters)}
        try:
            value = template.evaluate(**values)
        except Exception as error:  # a domain error at this probe point, or a refusal of the evaluator
            last_error = str(error)
            continue
        if isinstance(value, (int, float)) and math.isfinite(value):
            return template
        last_error = f"gives {value!r}"
    raise TemplateError(f"does not evaluate: {last_error}")
