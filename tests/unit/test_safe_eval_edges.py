"""safe_eval at its edges: Python's own values for short-circuits and chained comparisons, every operator on
operands that tell it from its neighbours, integer-only arguments, and each bound exactly at and just past its limit."""

import ast
import inspect
import math
import sys

import pytest

from paperlake.runtime.safe_eval import (
    ARITY,
    CONSTANTS,
    FUNCTIONS,
    MAX_COMBINATORIAL_N,
    MAX_FACTORIAL_ARGUMENT,
    MAX_NESTING,
    SafeEvalError,
    _Evaluator,
    allowed_names,
    safe_eval,
)


def refused(expression: str, variables=None, **limits) -> str:
    with pytest.raises(SafeEvalError) as error:
        safe_eval(expression, variables, **limits)
    return str(error.value)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0 and 5", 0),
        ("3 and 5", 5),
        ("3 or 0", 3),
        ("0 or 0.0", 0.0),
        ("0 or 7", 7),
        ("1 and 0 and 5", 0),
        ("1 and 2 and 3", 3),
        ("0 or 0 or 4", 4),
        ("2 or 1/0", 2),  # the right side is never evaluated
        ("0 and 1/0", 0),
        ("not 0", True),
        ("not 3", False),
    ],
)
def test_and_or_return_the_deciding_operand_and_short_circuit(expression: str, expected) -> None:
    value = safe_eval(expression)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("7 + 2", 9),
        ("7 - 2", 5),
        ("7 * 2", 14),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("7 % 2", 1),
        ("-7 % 3", 2),
        ("2 ** 3", 8),
        ("2 ** -2", 0.25),
        ("-2", -2),
        ("+2", 2),
        ("-(-3)", 3),
        ("10 - 4 - 3", 3),  # left to right along the spine
        ("2 ** 3 ** 2", 512),  # right-associative
        ("1 if 0 else 2", 2),
        ("1 if 3 else 2", 1),
        ("x * y - y", 10),
    ],
)
def test_every_operator_keeps_python_semantics(expression: str, expected) -> None:
    value = safe_eval(expression, {"x": 3, "y": 5})
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 == 2", True),
        ("2 == 3", False),
        ("2 != 3", True),
        ("2 != 2", False),
        ("2 < 3", True),
        ("3 < 3", False),
        ("3 <= 3", True),
        ("4 <= 3", False),
        ("3 > 2", True),
        ("3 > 3", False),
        ("3 >= 3", True),
        ("2 >= 3", False),
        ("1 < 2 < 3", True),
        ("1 < 3 < 2", False),
        ("3 > 2 > 2", False),
        ("1 < 3 > 2", True),
        ("1 == 1.0 != 2", True),
    ],
)
def test_comparisons_and_their_chains(expression: str, expected: bool) -> None:
    assert safe_eval(expression) is expected


def test_a_chain_stops_at_its_first_false_link() -> None:
    assert safe_eval("2 < 1 < 1/0") is False


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 in 2", "comparison In not allowed"),
        ("1 is 1", "comparison Is not allowed"),
        ("~3", "bitwise operators not allowed"),
        ("3 << 1", "operator LShift not allowed"),
        ("3 & 1", "operator BitAnd not allowed"),
        ("3 | 1", "operator BitOr not allowed"),
        ("(1).real()", "only calls of whitelisted functions by name are allowed"),
        ("x.y()", "only calls of whitelisted functions by name are allowed"),
        ("(lambda: 1)()", "only calls of whitelisted functions by name are allowed"),
        ("sqrt", "function 'sqrt' must be called"),
        ("tau", "unknown name 'tau'"),
        ("inf", "unknown name 'inf'"),
        ("None", "literal None not allowed"),
        ("1j", "literal 1j not allowed"),
        ("'a'", "strings not allowed"),
        ("{1: 2}", "dict literals not allowed"),
        ("{1}", "set literals not allowed"),
        ("(1, 2)", "tuples are only allowed as the argument of min, max or sum"),
        ("f'{x}'", "strings not allowed"),
        ("sqrt(*[4])", "star arguments not allowed"),
        ("1e400", "non-finite result (inf)"),
        ("-1e300 * 1e300", "non-finite result (-inf)"),
        ("...", "literal Ellipsis not allowed"),
        ("b'x'", "literal b'x' not allowed"),
    ],
)
def test_refusals_name_what_was_refused(expression: str, message: str) -> None:
    assert refused(expression, {"x": 1}) == message


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("factorial(5.0)", 120),
        ("factorial(0)", 1),
        ("factorial(True)", 1),
        ("comb(5, 2.0)", 10),
        ("comb(5.0, 5)", 1),
        ("perm(5, 2.0)", 20),
        ("round(2.567, 2.0)", 2.57),
        ("round(2.567, 1)", 2.6),
        ("round(2.5)", 2),
        ("round(1234.5, -2)", 1200.0),
        ("round(1.5, 308)", 1.5),
        ("round(1.5, -308)", 0.0),
        (f"comb({MAX_COMBINATORIAL_N}, 1)", MAX_COMBINATORIAL_N),
        (f"perm({MAX_COMBINATORIAL_N}, 1)", MAX_COMBINATORIAL_N),
        ("factorial(20)", math.factorial(20)),
    ],
)
def test_integer_arguments_may_be_integral_floats(expression: str, expected) -> None:
    value = safe_eval(expression)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("factorial(2.5)", "factorial() needs an integer, got 2.5"),
        ("factorial(-1)", "factorial() needs a non-negative integer, got -1"),
        ("factorial(-1.0)", "factorial() needs a non-negative integer, got -1"),
        ("comb(5.5, 2)", "comb() needs an integer, got 5.5"),
        ("comb(5, 2.5)", "comb() needs an integer, got 2.5"),
        ("comb(-1, 2)", "comb() needs a non-negative integer, got -1"),
        ("perm(5, -2)", "perm() needs a non-negative integer, got -2"),
        ("round(2.567, 1.5)", "round(): ndigits must be an integer"),
        ("round(1, 309)", "round(): ndigits out of range"),
        ("round(1, -309)", "round(): ndigits out of range"),
        (f"factorial({MAX_FACTORIAL_ARGUMENT + 1})", "factorial(171) refused: the argument must be at most 170"),
        (f"comb({MAX_COMBINATORIAL_N + 1}, 2)", "comb(5001, 2) refused: n must be at most 5000"),
        (f"perm({MAX_COMBINATORIAL_N + 1}, 1.0)", "perm(5001, 1) refused: n must be at most 5000"),
        ("factorial(170)", "result exceeds 1e+300 in magnitude"),
        ("sqrt(-1)", "sqrt(): math domain error"),
        ("log(0)", "log(): math domain error"),
        ("exp(1000)", "exp(): result exceeds 1e+300 in magnitude"),
    ],
)
def test_non_integer_and_out_of_range_arguments_are_refused_by_name(expression: str, message: str) -> None:
    assert refused(expression) == message


def test_factorial_is_bounded_before_it_is_computed() -> None:
    assert MAX_FACTORIAL_ARGUMENT == 170 and MAX_COMBINATORIAL_N == 5000
    assert safe_eval(f"factorial({MAX_FACTORIAL_ARGUMENT})", max_abs=1e308) == math.factorial(170)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("log(8, 2)", 3.0),
        ("log(e)", 1.0),
        ("atan2(1, 0)", math.pi / 2),
        ("min(4, 2, 9)", 2),
        ("max(4, 2, 9)", 9),
        ("max(3)", 3),
        ("min([2, 1])", 1),
        ("max((2, 7))", 7),
        ("sum([1, 2, 3.5])", 6.5),
        ("sum((1,))", 1),
        ("abs(-3)", 3),
        ("floor(-2.5)", -3),
        ("ceil(-2.5)", -2),
        ("min(" + ", ".join(["1"] * 64) + ")", 1),
    ],
)
def test_functions_and_their_arities(expression: str, expected) -> None:
    assert safe_eval(expression) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("min()", "min() takes 1 to 64 argument(s), got 0"),
        ("min(" + ", ".join(["1"] * 65) + ")", "min() takes 1 to 64 argument(s), got 65"),
        ("log(8, 2, 3)", "log() takes 1 to 2 argument(s), got 3"),
        ("atan2(1)", "atan2() takes 2 argument(s), got 1"),
        ("sqrt(1, 2)", "sqrt() takes 1 argument(s), got 2"),
        ("sqrt()", "sqrt() takes 1 argument(s), got 0"),
        ("round(1, 2, 3)", "round() takes 1 to 2 argument(s), got 3"),
        ("sum(3)", "sum() takes a literal list or tuple of numbers"),
        ("min([])", "min() of an empty list"),
        ("sqrt([4])", "sqrt() does not take a list"),
        ("sqrt((4,))", "sqrt() does not take a list"),
        ("max(a=1)", "keyword arguments not allowed (in max())"),
        ("open(1)", "function 'open' is not allowed"),
        ("[1, 2]", "lists are only allowed as the argument of min, max or sum"),
    ],
)
def test_calls_outside_the_arities_are_refused(expression: str, message: str) -> None:
    assert refused(expression) == message


def test_every_function_has_an_arity_it_can_be_called_with() -> None:
    assert set(ARITY) <= set(FUNCTIONS)
    assert allowed_names() == frozenset(FUNCTIONS) | {"pi", "e"} and set(CONSTANTS) == {"pi", "e"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("10 ** 300", 10**300),  # exactly max_abs's magnitude
        ("1 ** 10000", 1),  # exactly max_power; base 1 never grows
        ("(-1) ** 10000", 1),
        ("1 ** -10000", 1.0),
        ("0 ** 0", 1),
        ("0 ** 5", 0),
        ("(-2) ** 3", -8),
        ("(-8) ** 2.0", 64.0),
        ("0.5 ** 3", 0.125),
    ],
)
def test_powers_at_the_bounds_are_computed(expression: str, expected) -> None:
    value = safe_eval(expression)
    assert value == expected and type(value) is type(expected)


def test_the_size_of_a_power_is_its_exponent_times_the_digits_of_its_base() -> None:
    assert safe_eval("2 ** 996") == 2**996  # 299.8 digits
    assert safe_eval("0 ** 0.5") == 0.0 and safe_eval("0.25 ** 0.5") == 0.5  # fractional exponents of bases >= 0
    assert refused("1000 ** 101") == "result of 1000**101 would exceed 1e+300"  # 303 digits


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("10 ** 301", "result of 10**301 would exceed 1e+300"),
        ("(-10) ** 301", "result of -10**301 would exceed 1e+300"),
        ("2.0 ** 1000", "result of 2**1000 would exceed 1e+300"),
        ("1 ** 10001", "exponent 10001 exceeds the limit of 10000"),
        ("1 ** -10001", "exponent -10001 exceeds the limit of 10000"),
        ("0 ** -1", "division by zero (zero to a negative power)"),
        ("0.0 ** -0.5", "division by zero (zero to a negative power)"),
        ("(-8) ** (1/3)", "complex result not allowed (negative base, fractional exponent)"),
    ],
)
def test_powers_past_the_bounds_are_refused_before_they_run(expression: str, message: str) -> None:
    assert refused(expression) == message


def test_the_power_bounds_follow_the_limits() -> None:
    assert safe_eval("2 ** 20", max_power=20) == 2**20
    assert refused("2 ** -21", max_power=20) == "exponent -21 exceeds the limit of 20"
    assert safe_eval("10 ** 5", max_abs=1e5) == 10**5
    assert refused("10 ** 6", max_abs=1e5) == "result of 10**6 would exceed 100000"


@pytest.mark.parametrize(
    ("expression", "limit", "expected"),
    [("1000 * 100", 1e5, 100_000), ("-1000 * 100", 1e5, -100_000), ("not 0", 0.5, True)],
)
def test_results_exactly_at_max_abs_pass(expression: str, limit: float, expected) -> None:
    assert safe_eval(expression, max_abs=limit) == expected


@pytest.mark.parametrize("expression", ["1000 * 100 + 1", "-1000 * 100 - 1", "x", "abs(-100001)", "100001"])
def test_results_past_max_abs_are_refused(expression: str) -> None:
    assert refused(expression, {"x": 100_001}, max_abs=1e5) == "result exceeds 100000 in magnitude"


def test_an_overflow_outside_a_function_is_refused_with_the_limit() -> None:
    assert refused("10 ** 400 / 1", max_abs=math.inf, max_power=10**6) == "result exceeds inf in magnitude"


def test_an_unexpected_type_error_is_refused_not_raised() -> None:
    assert refused("2 ** 2", max_power=None).startswith("cannot evaluate: '>' not supported")


@pytest.mark.parametrize("expression", ["1/0", "1 // 0", "1 % 0", "1.0 / 0.0"])
def test_division_by_zero(expression: str) -> None:
    assert refused(expression) == "division by zero"


def test_nesting_is_bounded_exactly() -> None:
    assert MAX_NESTING == 100
    assert safe_eval("-" * 100 + "1") == 1
    assert refused("-" * 101 + "1") == "expression nested deeper than 100 levels"
    assert refused("-" * 100_000 + "1", max_len=10**6) == "expression nested too deeply"


@pytest.mark.parametrize(
    ("expression", "limits", "message"),
    [
        ("1" * 11, {"max_len": 10}, "expression is 11 characters long; the limit is 10"),
        ("", {}, "expression is empty"),
        ("  \t", {}, "expression is empty"),
        ("1 +", {}, "not a valid expression: invalid syntax"),
    ],
)
def test_the_text_is_checked_before_it_is_parsed(expression: str, limits: dict, message: str) -> None:
    assert refused(expression, **limits) == message


def test_the_text_limit_is_inclusive_and_surrounding_space_is_ignored() -> None:
    assert safe_eval("1" * 10, max_len=10) == 1111111111
    assert safe_eval("  1 + 1\n") == 2


def test_only_text_is_evaluated() -> None:
    assert refused(42) == "expression must be a string, got int"


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"x": math.nan}, "variable 'x' must be finite, got nan"),
        ({"x": -math.inf}, "variable 'x' must be finite, got -inf"),
        ({"x": None}, "variable 'x' must be a number, got NoneType"),
        ({"x": False}, "variable 'x' must be a number, got bool"),
        ({3: 1}, "variable name 3 is not an identifier"),
        ({"2x": 1}, "variable name '2x' is not an identifier"),
        ({"e": 1}, "variable 'e' would shadow the built-in 'e'"),
        ({"sqrt": 1}, "variable 'sqrt' would shadow the built-in 'sqrt'"),
    ],
)
def test_variables_are_checked_with_their_names(variables: dict, message: str) -> None:
    assert refused("1", variables) == message


def test_variables_are_numbers_by_name_and_win_over_nothing_else() -> None:
    assert safe_eval("x + y", {"x": 1.5, "y": 2}) == 3.5
    assert safe_eval("pi", {}) == math.pi and safe_eval("e", None) == math.e
    assert refused("z", {"x": 1}) == "unknown name 'z'"


def test_a_recursion_error_while_evaluating_is_refused() -> None:
    """The nesting bound keeps evaluation far from Python's recursion limit; were the limit lower, the expression is
    still refused rather than the error raised."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 60)  # room to parse 45 levels, not to evaluate them (2 frames each)
    try:
        message = refused("-" * 45 + "1")
    finally:
        sys.setrecursionlimit(limit)
    assert message == "expression nested too deeply"


def test_the_evaluator_refuses_what_it_does_not_know_and_complex_values() -> None:
    """Default deny below the parser: a node type no expression produces today, and a complex value whatever made it."""
    evaluator = _Evaluator({}, max_power=10, max_abs=1e300)
    with pytest.raises(SafeEvalError, match="^Module expressions are not allowed$"):
        evaluator.evaluate(ast.parse("1"), depth=0)
    with pytest.raises(SafeEvalError, match="^complex result not allowed$"):
        evaluator._bounded(1j)
