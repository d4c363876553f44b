"""A whitelisting arithmetic evaluator for expressions that come from papers, LLMs and users.

The agent's ``CalculateExpr`` and every formula template run through :func:`safe_eval`. It parses the text with
:mod:`ast` and walks the tree itself: only numbers, arithmetic, comparisons, boolean logic, conditional
expressions, a fixed set of math functions and the caller's variables are understood; anything else (attribute
access, subscripts, lambdas, comprehensions, strings, keyword arguments, unknown names) is refused with a
:class:`SafeEvalError` that says what was refused. Python's ``eval``/``exec`` are never used.

Expensive operations are bounded *before* they run: a power whose result would exceed ``max_abs`` (or whose
exponent exceeds ``max_power``) is refused without computing it, and so are factorials, combinations and
permutations of large arguments. Results must be finite: ``inf`` and ``nan`` are not available as constants and
a result outside ``[-max_abs, max_abs]`` is an error, so a caller never receives a silently overflowed value.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Any

Number = int | float | bool

MAX_FACTORIAL_ARGUMENT = 170  # 171! no longer fits in a float
MAX_COMBINATORIAL_N = 5000
MAX_NESTING = 100

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


class SafeEvalError(ValueError):
    """The expression was refused or could not be evaluated; the message says why."""


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


def _round(x: Number, ndigits: Number | None = None) -> Number:
    if ndigits is None:
        return round(x)
    if isinstance(ndigits, float) and not ndigits.is_integer():
        raise SafeEvalError("round(): ndigits must be an integer")
    if abs(ndigits) > 308:
        raise SafeEvalError("round(): ndigits out of range")
    return round(x, int(ndigits))


def _integer_argument(name: str, value: Number) -> int:
    if isinstance(value, float):
        if not value.is_integer():
            raise SafeEvalError(f"{name}() needs an integer, got {value!r}")
        value = int(value)
    if value < 0:
        raise SafeEvalError(f"{name}() needs a non-negative integer, got {value!r}")
    return int(value)


def _factorial(n: Number) -> int:
    n = _integer_argument("factorial", n)
    if n > MAX_FACTORIAL_ARGUMENT:
        raise SafeEvalError(f"factorial({n}) refused: the argument must be at most {MAX_FACTORIAL_ARGUMENT}")
    return math.factorial(n)


def _combinatorial_arguments(name: str, n: Number, k: Number) -> tuple[int, int]:
    n_int, k_int = _integer_argument(name, n), _integer_argument(name, k)
    if n_int > MAX_COMBINATORIAL_N:
        raise SafeEvalError(f"{name}({n_int}, {k_int}) refused: n must be at most {MAX_COMBINATORIAL_N}")
    return n_int, k_int


def _comb(n: Number, k: Number) -> int:
    return math.comb(*_combinatorial_arguments("comb", n, k))


def _perm(n: Number, k: Number) -> int:
    return math.perm(*_combinatorial_arguments("perm", n, k))


FUNCTIONS: dict[str, Callable[..., Number]] = {
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": _log,
    "log2": math.log2,
    "log10": math.log10,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "atan2": math.atan2,
    "sinh": math.sinh,
    "cosh": math.cosh,
    "tanh": math.tanh,
    "abs": abs,
    "min": min,
    "max": max,
    "sum": sum,
    "round": _round,
    "floor": math.floor,
    "ceil": math.ceil,
    "factorial": _factorial,
    "comb": _comb,
    "perm": _perm,
}

ARITY: dict[str, tuple[int, int]] = {
    "log": (1, 2),
    "atan2": (2, 2),
    "round": (1, 2),
    "comb": (2, 2),
    "perm": (2, 2),
    "min": (1, 64),
    "max": (1, 64),
    "sum": (1, 1),
}
SEQUENCE_FUNCTIONS = frozenset({"min", "max", "sum"})

_REFUSED_NODES: dict[type, str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscripts",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "generator expressions",
    ast.NamedExpr: "assignment expressions",
    ast.Starred: "star arguments",
    ast.Dict: "dict literals",
    ast.Set: "set literals",
    ast.JoinedStr: "strings",
    ast.FormattedValue: "strings",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "slices",
}

_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


def allowed_names() -> frozenset[str]:
    """Names an expression may use besides its variables (functions and constants)."""
    return frozenset(FUNCTIONS) | frozenset(CONSTANTS)


def safe_eval(
    expr: str,
    variables: dict[str, float] | None = None,
    *,
    max_power: float = 10_000,
    max_abs: float = 1e300,
    max_len: int = 2000,
) -> Number:
    """Evaluate an arithmetic expression with Python semantics, refusing everything outside the whitelist.

    ``variables`` maps names to numbers; they may not shadow a function or constant name. ``max_power`` bounds
    the magnitude of any exponent, ``max_abs`` the magnitude of every intermediate result, ``max_len`` the
    length of the text.
    """
    if not isinstance(expr, str):
        raise SafeEvalError(f"expression must be a string, got {type(expr).__name__}")
    if len(expr) > max_len:
        raise SafeEvalError(f"expression is {len(expr)} characters long; the limit is {max_len}")
    if not expr.strip():
        raise SafeEvalError("expression is empty")
    scope = _check_variables(variables or {})
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as error:
        raise SafeEvalError(f"not a valid expression: {error.msg}") from None
    except (RecursionError, MemoryError):
        raise SafeEvalError("expression nested too deeply") from None
    evaluator = _Evaluator(scope, max_power=max_power, max_abs=max_abs)
    try:
        return evaluator.evaluate(tree.body, depth=0)
    except SafeEvalError:
        raise
    except ZeroDivisionError:
        raise SafeEvalError("division by zero") from None
    except OverflowError:
        raise SafeEvalError(f"result exceeds {max_abs:g} in magnitude") from None
    except (ValueError, TypeError) as error:
        raise SafeEvalError(f"cannot evaluate: {error}") from None
    except RecursionError:
        raise SafeEvalError("expression nested too deeply") from None


def _check_variables(variables: dict[str, Any]) -> dict[str, Number]:
    reserved = allowed_names()
    for name, value in variables.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise SafeEvalError(f"variable name {name!r} is not an identifier")
        if name in reserved:
            raise SafeEvalError(f"variable {name!r} would shadow the built-in {name!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SafeEvalError(f"variable {name!r} must be a number, got {type(value).__name__}")
        if isinstance(value, float) and not math.isfinite(value):
            raise SafeEvalError(f"variable {name!r} must be finite, got {value!r}")
    return dict(variables)


class _Evaluator:
    """Walks a parsed expression; every node type it does not know is refused."""

    def __init__(self, scope: dict[str, Number], *, max_power: float, max_abs: float):
        self.scope = scope
        self.max_power = max_power
        self.max_abs = max_abs

    def evaluate(self, node: ast.AST, depth: int) -> Number:
        if depth > MAX_NESTING:
            raise SafeEvalError(f"expression nested deeper than {MAX_NESTING} levels")
        refused = _REFUSED_NODES.get(type(node))
        if refused:
            raise SafeEvalError(f"{refused} not allowed")
        method = getattr(self, f"_eval_{type(node).__name__}", None)
        if method is None:
            raise SafeEvalError(f"{type(node).__name__} expressions are not allowed")
        return self._bounded(method(node, depth + 1))

    def _bounded(self, value: Number) -> Number:
        if isinstance(value, bool):
            return value
        if isinstance(value, complex):
            raise SafeEvalError("complex result not allowed")
        if isinstance(value, float) and not math.isfinite(value):
            raise SafeEvalError(f"non-finite result ({value})")
        if abs(value) > self.max_abs:
            raise SafeEvalError(f"result exceeds {self.max_abs:g} in magnitude")
        return value

    def _eval_Constant(self, node: ast.Constant, depth: int) -> Number:
        value = node.value
        if isinstance(value, bool) or isinstance(value, (int, float)):
            return value
        if isinstance(value, str):
            raise SafeEvalError("strings not allowed")
        raise SafeEvalError(f"literal {value!r} not allowed")

    def _eval_Name(self, node: ast.Name, depth: int) -> Number:
        if node.id in self.scope:
            return self.scope[node.id]
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        if node.id in FUNCTIONS:
            raise SafeEvalError(f"function {node.id!r} must be called")
        raise SafeEvalError(f"unknown name {node.id!r}")

    def _eval_UnaryOp(self, node: ast.UnaryOp, depth: int) -> Number:
        operand = self.evaluate(node.operand, depth)
        if isinstance(node.op, ast.USub):
            return -operand
        if isinstance(node.op, ast.UAdd):
            return +operand
        if isinstance(node.op, ast.Not):
            return not operand
        raise SafeEvalError("bitwise operators not allowed")

    def _eval_BinOp(self, node: ast.BinOp, depth: int) -> Number:
        """Evaluate the left spine iteratively, so a long flat sum does not count as deep nesting."""
        spine = [node]
        while isinstance(spine[-1].left, ast.BinOp):
            spine.append(spine[-1].left)
        value = self.evaluate(spine[-1].left, depth)
        for operation_node in reversed(spine):
            right = self.evaluate(operation_node.right, depth)
            value = self._bounded(self._binary(operation_node.op, value, right))
        return value

    def _binary(self, operator: ast.operator, left: Number, right: Number) -> Number:
        if isinstance(operator, ast.Pow):
            return self._power(left, right)
        operation = _BINARY.get(type(operator))
        if operation is None:
            raise SafeEvalError(f"operator {type(operator).__name__} not allowed")
        return operation(left, right)

    def _power(self, base: Number, exponent: Number) -> Number:
        """Refuse a power before computing it when its size could exceed the bounds."""
        if abs(exponent) > self.max_power:
            raise SafeEvalError(f"exponent {exponent:g} exceeds the limit of {self.max_power:g}")
        if base == 0 and exponent < 0:
            raise SafeEvalError("division by zero (zero to a negative power)")
        if base < 0 and isinstance(exponent, float) and not exponent.is_integer():
            raise SafeEvalError("complex result not allowed (negative base, fractional exponent)")
        if base != 0 and abs(base) != 1:
            magnitude = exponent * math.log10(abs(base))
            if magnitude > math.log10(self.max_abs):
                raise SafeEvalError(f"result of {base:g}**{exponent:g} would exceed {self.max_abs:g}")
        return base**exponent

    def _eval_BoolOp(self, node: ast.BoolOp, depth: int) -> Number:
        """Python's values: the first operand that decides (falsy for ``and``, truthy for ``or``), else the last."""
        is_and = isinstance(node.op, ast.And)
        for value_node in node.values[:-1]:
            result = self.evaluate(value_node, depth)
            if bool(result) != is_and:
                return result
        return self.evaluate(node.values[-1], depth)

    def _eval_Compare(self, node: ast.Compare, depth: int) -> bool:
        left = self.evaluate(node.left, depth)
        for operator, comparator in zip(node.ops, node.comparators):
            compare = _COMPARE.get(type(operator))
            if compare is None:
                raise SafeEvalError(f"comparison {type(operator).__name__} not allowed")
            right = self.evaluate(comparator, depth)
            if not compare(left, right):
                return False
            left = right
        return True

    def _eval_IfExp(self, node: ast.IfExp, depth: int) -> Number:
        branch = node.body if self.evaluate(node.test, depth) else node.orelse
        return self.evaluate(branch, depth)

    def _eval_Call(self, node: ast.Call, depth: int) -> Number:
        if not isinstance(node.func, ast.Name):
            raise SafeEvalError("only calls of whitelisted functions by name are allowed")
        name = node.func.id
        if name not in FUNCTIONS:
            raise SafeEvalError(f"function {name!r} is not allowed")
        if node.keywords:
            raise SafeEvalError(f"keyword arguments not allowed (in {name}())")
        low, high = ARITY.get(name, (1, 1))
        if not low <= len(node.args) <= high:
            expected = str(low) if low == high else f"{low} to {high}"
            raise SafeEvalError(f"{name}() takes {expected} argument(s), got {len(node.args)}")
        if len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
            arguments: list[Any] = [self._literal_sequence(name, node.args[0], depth)]
        else:
            arguments = [self.evaluate(argument, depth) for argument in node.args]
            if name in SEQUENCE_FUNCTIONS and len(arguments) == 1:
                if name == "sum":
                    raise SafeEvalError("sum() takes a literal list or tuple of numbers")
                return arguments[0]
        try:
            return FUNCTIONS[name](*arguments)
        except SafeEvalError:  # the bounded wrappers' own refusals name their function already
            raise
        except OverflowError:
            raise SafeEvalError(f"{name}(): result exceeds {self.max_abs:g} in magnitude") from None
        except (ValueError, TypeError) as error:
            raise SafeEvalError(f"{name}(): {error}") from None

    def _literal_sequence(self, function: str, node: ast.List | ast.Tuple, depth: int) -> list[Number]:
        if function not in SEQUENCE_FUNCTIONS:
            raise SafeEvalError(f"{function}() does not take a list")
        if not node.elts:
            raise SafeEvalError(f"{function}() of an empty list")
        return [self.evaluate(element, depth) for element in node.elts]

    def _eval_List(self, node: ast.List, depth: int) -> Number:
        raise SafeEvalError("lists are only allowed as the argument of min, max or sum")

    def _eval_Tuple(self, node: ast.Tuple, depth: int) -> Number:
        raise SafeEvalError("tuples are only allowed as the argument of min, max or sum")
