"""The evaluation functions at their edges: what each option, guard and parser does at its boundary, the messages a
misconfigured evaluator gives, the judges' replies as they are read, and the element evaluators' decorator.

test_eval_functions.py pins the common cases; these pin the rest of the module docstring's contract (a prediction
never raises, only a misconfiguration does) and the deliberate differences from the authors it lists.
"""

from __future__ import annotations

import datetime
import inspect
from typing import Any

import pytest

from paperlake.evaluation import functions
from paperlake.evaluation.functions import (
    EVAL_FUNCTIONS,
    EvaluationError,
    JudgeUnavailable,
    ignored_keywords,
    parse_judgement,
    parse_quality,
    parse_selection,
    run_evaluator,
)


def score(eval_func: str, pred, **kwargs):
    return run_evaluator(eval_func, pred, kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Keywords: what run_evaluator passes on, and what the loader reports as ignored


def test_keywords_a_function_does_not_take_are_ignored_not_errors():
    """Real AirQA lines carry ``nidigits`` or ``ignore_order`` on string matchers; the authors' ``**kwargs`` drop
    them."""
    assert score("eval_string_exact_match", "BART", gold="BART", nidigits=2, ignore_order=True) == 1


def test_ignored_keywords_lists_what_the_function_does_not_take_sorted():
    kwargs = {"gold": "BART", "nidigits": 2, "ignore_order": True, "lowercase": True, "llm": "a judge"}
    assert ignored_keywords("eval_string_exact_match", kwargs) == ["ignore_order", "nidigits"]
    assert ignored_keywords("eval_string_exact_match", {"gold": "x"}) == []


def test_ignored_keywords_knows_the_element_evaluators_full_signature():
    kwargs = {"gold": ["a"], "count": 1, "element_type": "str", "ndigits": 2, "threshold": 90, "ignore_order": True}
    assert ignored_keywords("eval_element_list_overlap", kwargs) == ["ignore_order"]
    assert ignored_keywords("eval_element_included", kwargs) == ["count", "ignore_order"]


def test_llm_is_never_an_ignored_keyword_even_where_no_judge_is_taken():
    assert ignored_keywords("eval_int_exact_match", {"gold": 1, "llm": None}) == []
    assert ignored_keywords("eval_reference_answer_with_llm", {"llm": None, "llm_model": "gpt"}) == []


def test_ignored_keywords_of_an_unknown_function_is_a_configuration_error():
    with pytest.raises(EvaluationError, match="unknown eval_func 'eval_nope'"):
        ignored_keywords("eval_nope", {})


def test_unknown_function_message_lists_the_known_ones():
    with pytest.raises(EvaluationError) as error:
        score("eval_nope", "x")
    known = ", ".join(sorted(EVAL_FUNCTIONS))
    assert str(error.value) == f"unknown eval_func 'eval_nope'; known: {known}"


@pytest.mark.parametrize("eval_kwargs", [["gold", 1], "gold=1", 3])
def test_eval_kwargs_that_are_not_an_object_are_a_configuration_error(eval_kwargs):
    with pytest.raises(EvaluationError) as error:
        run_evaluator("eval_int_exact_match", "1", eval_kwargs)
    assert str(error.value) == f"eval_int_exact_match: eval_kwargs must be an object, got {type(eval_kwargs).__name__}"


def test_no_eval_kwargs_at_all_is_a_missing_keyword():
    with pytest.raises(EvaluationError, match="eval_int_exact_match: bad eval_kwargs"):
        run_evaluator("eval_int_exact_match", "1", None)


# ---------------------------------------------------------------------------------------------------------------
# Scalars


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("NOX", False, 0),  # only trailing full stops are dropped: NOX is not "no"
        ("TX", True, 0),
        ("yes...", True, 1),
        ("No .", False, 1),
    ],
)
def test_bool_words_drop_only_trailing_full_stops(pred, gold, expected):
    assert score("eval_bool_exact_match", pred, gold=gold) == expected


@pytest.mark.parametrize("pred", ["3.7", " 3.5 ", "2.9999"])
def test_int_text_with_a_fraction_is_not_truncated(pred):
    """Deliberate difference: the authors' ``int()`` truncates 3.7 to 3; here it is not that integer."""
    assert score("eval_int_exact_match", pred, gold=3) == 0


@pytest.mark.parametrize("blank", ["\n", "\t", "\u3000", "\x1e"])
def test_numbers_read_through_any_surrounding_blank(blank):
    """Every blank ``str.strip`` knows, including the separators ``float()`` alone would refuse."""
    text = f"{blank}12{blank}"
    assert score("eval_int_exact_match", text, gold=12) == 1
    assert score("eval_float_exact_match", text, gold=12.0) == 1
    assert score("eval_structured_object_exact_match", [text], gold=[12.0]) == 1


def test_float_tolerance_zero_is_exact_after_rounding():
    assert score("eval_float_exact_match", 0.1 + 0.2, gold=0.3, tolerance=0) == 0
    assert score("eval_float_exact_match", 0.1 + 0.2, gold=0.3, tolerance=0, ndigits=2) == 1


@pytest.mark.parametrize("tolerance", [True, "0.1", None, -0.5])
def test_float_tolerance_must_be_a_non_negative_number(tolerance):
    with pytest.raises(EvaluationError) as error:
        score("eval_float_exact_match", 1.0, gold=1.0, tolerance=tolerance)
    assert str(error.value) == f"eval_float_exact_match: tolerance must be a non-negative number, got {tolerance!r}"


def test_numeric_string_gold_is_read_as_a_number():
    """Deliberate difference (a real AirQA line): gold "2463.5" with ndigits 1; the authors' ``round(str)`` fails."""
    assert score("eval_float_exact_match", 2463.5, gold="2463.5", ndigits=1) == 1
    assert score("eval_float_exact_match", "2463.54", gold="2463.5", ndigits=1) == 1
    assert score("eval_float_exact_match", "2463.46", gold="2463.5", ndigits=1) == 1
    assert score("eval_float_exact_match", "2463.44", gold="2463.5", ndigits=1) == 0


def test_more_digits_than_a_float_holds_compares_unrounded():
    """Rounding to 30 places is beyond Decimal's 28 digits; the values are then compared as they are."""
    assert score("eval_float_exact_match", 0.1, gold=0.4, ndigits=30) == 0
    assert score("eval_float_exact_match", 0.4, gold=0.4, ndigits=30) == 1
    assert score("eval_float_exact_match", 1e30, gold=1e30, ndigits=2) == 1


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("BART", ["BART"], 1),  # deliberate difference: a one-element list gold is that string too
        (" BART ", ("BART",), 1),
        ("['BART']", ["BART"], 1),
        ("H", "Hello", 0),  # a string gold is not a list of characters
        ("a", ["a", "b"], 0),  # a list of two is no one string
        ("b", ["a", "b"], 0),
        ("", "", 1),
    ],
)
def test_string_exact_match_takes_a_one_element_list_gold_as_its_string(pred, gold, expected):
    assert score("eval_string_exact_match", pred, gold=gold) == expected


def test_lowercase_is_str_lower_not_casefold():
    assert score("eval_string_exact_match", "\u212a", gold="k", lowercase=True) == 1  # the Kelvin sign lowers to k
    assert score("eval_string_exact_match", "Straße", gold="STRASSE", lowercase=True) == 0  # casefold would match


# ---------------------------------------------------------------------------------------------------------------
# Fuzzy matching


def test_ignore_blank_removes_blanks_on_both_sides_for_ratio():
    assert score("eval_string_fuzzy_match", "helloworld", gold="hello  world", ignore_blank=True, threshold=100) == 1
    assert score("eval_string_fuzzy_match", "hello world", gold="helloworld", ignore_blank=True, threshold=100) == 1
    assert score("eval_string_fuzzy_match", "helloworld", gold="hello  world", threshold=100) == 0


def test_ignore_blank_keeps_one_blank_between_tokens_for_token_methods():
    kwargs = {"fuzz_method": "token_sort_ratio", "threshold": 100, "ignore_blank": True}
    assert score("eval_string_fuzzy_match", "world \t hello", gold="hello \n world", **kwargs) == 1
    assert score("eval_string_fuzzy_match", "world hello", gold="hello\n\nworld", **kwargs) == 1
    assert score("eval_string_fuzzy_match", "worldhello", gold="hello world", **kwargs) == 0


@pytest.mark.parametrize("threshold", [True, "95", None, 100.5, 101])
def test_threshold_must_be_a_number_up_to_100(threshold):
    with pytest.raises(EvaluationError) as error:
        score("eval_string_fuzzy_match", "a", gold="a", threshold=threshold)
    assert str(error.value) == (
        f"eval_string_fuzzy_match: threshold must be a number on the 0-100 scale, got {threshold!r}"
    )


def test_threshold_100_is_allowed_and_inclusive():
    assert score("eval_string_fuzzy_match", "same", gold="same", threshold=100) == 1


def test_fuzz_method_error_lists_the_methods():
    with pytest.raises(EvaluationError) as error:
        score("eval_structured_object_exact_match", "['a']", gold=["a"], threshold=50, fuzz_method="WRatio")
    assert str(error.value) == (
        "eval_structured_object_exact_match: fuzz_method must be one of ratio, partial_ratio, token_sort_ratio, "
        "token_set_ratio, got 'WRatio'"
    )


def test_fuzz_method_matters_only_above_a_threshold_of_0():
    """``threshold <= 0`` is exact matching, so an unknown method is no error there, and any threshold above 0 is
    fuzzy (the method is checked)."""
    assert score("eval_structured_object_exact_match", "['a']", gold=["a"], threshold=0, fuzz_method="WRatio") == 1
    assert score("eval_element_included", "a", gold=["a"], threshold=-1, fuzz_method="WRatio") == 1
    with pytest.raises(EvaluationError, match="fuzz_method"):
        score("eval_structured_object_exact_match", "['a']", gold=["a"], threshold=0.5, fuzz_method="WRatio")


# ---------------------------------------------------------------------------------------------------------------
# Structured objects


@pytest.mark.parametrize(
    ("pred", "kwargs", "expected"),
    [
        ("['apples']", {"threshold": 0}, 0),  # 0 is exact
        ("['apples']", {"threshold": 1}, 1),  # anything above 0 is fuzzy
        ("['apples']", {"threshold": 91}, 1),  # ratio 90.9 rounds to 91, and the threshold is inclusive
        ("['apples']", {"threshold": 92}, 0),
        ("['APPLE']", {"threshold": 95, "lowercase": True}, 1),
        ("['APPLE']", {"threshold": 95}, 0),
        ("['ap ple']", {"threshold": 100, "ignore_blank": True}, 1),
        ("['ap ple']", {"threshold": 100}, 0),
        ("['ap ple']", {"ignore_blank": True}, 1),
        ("['elppa']", {"threshold": 100, "fuzz_method": "token_sort_ratio"}, 0),
    ],
)
def test_structured_strings_use_the_string_options(pred, kwargs, expected):
    assert score("eval_structured_object_exact_match", pred, gold=["apple"], **kwargs) == expected


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("[1.5]", [2.5], 0),
        ("['abc']", [1.5], 0),
        ("[1.5]", [1.5], 1),
        ("['1.50']", [1.5], 1),
    ],
)
def test_structured_floats_compare_as_numbers(pred, gold, expected):
    assert score("eval_structured_object_exact_match", pred, gold=gold) == expected


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        ("null", 1),  # deliberate difference: the text null names JSON's null
        ("None", 1),
        (" None ", 1),
        (None, 1),
        ("nothing", 0),
        ("0", 0),
        (0, 0),
        ("", 0),
    ],
)
def test_null_gold_is_matched_by_none_or_its_name(pred, expected):
    assert score("eval_structured_object_exact_match", pred, gold=None) == expected


@pytest.mark.parametrize(
    ("pred", "expected"),
    [('{"y": "null"}', 1), ("{'y': 'None'}", 1), ("{'y': 'x'}", 0), ("{'y': 0}", 0), ("{'y': False}", 0)],
)
def test_null_inside_a_structure(pred, expected):
    assert score("eval_structured_object_exact_match", pred, gold={"y": None}) == expected


def test_a_gold_of_another_python_type_is_compared_by_equality():
    """Gold from JSON is never of another type, but a Python caller's may be (a date, say)."""
    day = datetime.date(2024, 5, 1)
    assert score("eval_structured_object_exact_match", datetime.date(2024, 5, 1), gold=day) == 1
    assert score("eval_structured_object_exact_match", datetime.date(2024, 5, 2), gold=day) == 0
    assert score("eval_structured_object_exact_match", "2024-05-01", gold=day) == 0


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("{'a': 1, 'c': 2}", {"a": 1, "b": 2}, 0),  # same size, other keys
        ("[1, 2]", {"a": 1, "b": 2}, 0),  # a list of the dict's size
        ("5", {"a": 1}, 0),
        ("'text'", {"a": 1}, 0),
        ([{"a": 1}], [{"a": 1}], 1),
        (["{'a': 1}"], [{"a": 1}], 1),  # a string inside a structure holding a dict literal is that dict
        (["{'a': 2}"], [{"a": 1}], 0),
        (["not a dict"], [{"a": 1}], 0),
    ],
)
def test_structured_dicts(pred, gold, expected):
    assert score("eval_structured_object_exact_match", pred, gold=gold) == expected


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        (["[1, 2]"], [[1, 2]], 1),  # a string inside a structure holding a list literal is that list
        (["[2, 1]"], [[1, 2]], 0),
        ('[["a", "b"], "c"]', [["a", "b"], ["c"]], 1),  # a scalar where a list is due is a list of one
        (["x y"], [["x y"]], 1),  # text that is no literal is a string, and a list of one
        (["x y"], [["x", "y"]], 0),
    ],
)
def test_structured_values_inside_a_structure(pred, gold, expected):
    assert score("eval_structured_object_exact_match", pred, gold=gold) == expected


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        # deliberate difference: a set literal has no order, so it is paired in any order (not hash order)
        ("{'mCLIP', 'UC2'}", ["UC2", "mCLIP"], 1),
        ("{'mCLIP', 'UC2'}", ["mCLIP", "UC2"], 1),
        ("{'mCLIP', 'UC2'}", ["mCLIP", "UC3"], 0),
        ("{2, 'a', None, 2.5, True, (1, 2)}", [(1, 2), True, 2.5, None, "a", 2], 1),
        ({"b", "a"}, ["a", "b"], 1),
    ],
)
def test_structured_set_predictions_pair_in_any_order(pred, gold, expected):
    assert score("eval_structured_object_exact_match", pred, gold=gold) == expected


MIXED = "[[1, 'b'], 'a', 3, True, None, {'k': 'v'}, {2, 'c'}, 1.5, (4,)]"
MIXED_GOLD = [1.5, {"k": "v"}, None, True, 3, "a", [1, "b"], ["c", 2], [4]]


def test_ignore_order_pairs_any_mix_of_literals():
    assert score("eval_structured_object_exact_match", MIXED, gold=MIXED_GOLD, ignore_order=True) == 1
    assert score("eval_structured_object_exact_match", MIXED, gold=MIXED_GOLD) == 0
    wrong = [1.5, {"k": "w"}, None, True, 3, "a", [1, "b"], ["c", 2], [4]]
    assert score("eval_structured_object_exact_match", MIXED, gold=wrong, ignore_order=True) == 0


def test_ignore_order_pairs_nested_strings_with_the_string_options():
    pred = "[['B', 'a'], ['C ', 'd']]"
    gold = [["d", "c"], ["a", "b"]]
    assert score("eval_structured_object_exact_match", pred, gold=gold, ignore_order=True, lowercase=True) == 1
    assert score("eval_structured_object_exact_match", pred, gold=gold, ignore_order=True) == 0
    pred = "[{'K': 'B'}, {'J': 'a'}]"
    gold = [{"j": "A"}, {"k": "b"}]
    assert score("eval_structured_object_exact_match", pred, gold=gold, ignore_order=True, lowercase=True) == 1


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("[None, 'null']", ["x", "y"]),  # a null prediction is no string
        ("['x', 'y']", [None, None]),  # nor is a string a null
        ("[None, 'a']", ["a", "b"]),
    ],
)
def test_ignore_order_never_pairs_unequal_elements(pred, gold):
    assert score("eval_structured_object_exact_match", pred, gold=gold, ignore_order=True) == 0


def test_a_prediction_too_deep_to_compare_scores_0():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    assert score("eval_structured_object_exact_match", deep, gold=[[1]], ignore_order=True) == 0
    assert score("eval_structured_object_exact_match", deep, gold=[[1]]) == 0


# ---------------------------------------------------------------------------------------------------------------
# Element evaluators


@pytest.mark.parametrize(
    ("pred", "gold", "kwargs", "expected"),
    [
        # str (the default) compares text: the gold element's own text
        ("2.5", [2.5], {}, 1),
        ("2.50", [2.5], {}, 0),
        ("'a'", ["a"], {}, 0),
        ("Hel lo", ["Hello"], {"ignore_blank": True}, 1),
        ("Hel lo", ["Hello"], {}, 0),
        ("world hello", ["hello world"], {"fuzz_method": "token_sort_ratio", "threshold": 100}, 1),
        ("world hello", ["hello world"], {"threshold": 100}, 0),
        # int: both sides read as integers
        ("4", [1, 2, 3], {"element_type": "int"}, 0),
        ("7.0", ["7"], {"element_type": "int"}, 1),
        ("seven", [7], {"element_type": "int"}, 0),
        # float: both sides read as numbers, rounded to ndigits (2 by default)
        (0.5, ["0.50"], {"element_type": "float"}, 1),
        (0.5, [0.6, "x"], {"element_type": "float"}, 0),
        ("x", [0.5], {"element_type": "float"}, 0),
        # bool: both sides read as booleans
        ("yes", [True], {"element_type": "bool"}, 1),
        ("no", ["false"], {"element_type": "bool"}, 1),
        ("yes", [False], {"element_type": "bool"}, 0),
        ("maybe", [False], {"element_type": "bool"}, 0),
        ("maybe", ["perhaps"], {"element_type": "bool"}, 0),
        # any other type: structured
        ("[1, 2]", [[1, 2]], {"element_type": "list"}, 1),
        ("[2, 1]", [[1, 2]], {"element_type": "list"}, 0),
        ("[0.333]", [[0.33]], {"element_type": "list"}, 1),  # rounded to the default 2 digits
        ("[0.333]", [[0.33]], {"element_type": "list", "ndigits": None}, 0),
        ("[0.3331]", [[0.333]], {"element_type": "list", "ndigits": 3}, 1),
        ("{'a': 'X'}", [{"a": "x"}], {"element_type": "dict", "lowercase": True}, 1),
        ("null", [None], {"element_type": "json"}, 1),
    ],
)
def test_element_included_compares_as_element_type_says(pred, gold, kwargs, expected):
    assert score("eval_element_included", pred, gold=gold, **kwargs) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ndigits": 1.5}, "eval_element_included: ndigits must be an int or null, got 1.5"),
        ({"ndigits": "2"}, "eval_element_included: ndigits must be an int or null, got '2'"),
        ({"tolerance": -1}, "eval_element_included: tolerance must be a non-negative number, got -1"),
        ({"threshold": 101}, "eval_element_included: threshold must be a number on the 0-100 scale, got 101"),
        ({"threshold": 90, "fuzz_method": "WRatio"}, "eval_element_included: fuzz_method must be one of"),
        ({"gold": "a"}, "eval_element_included: gold must be a list, got str"),
        ({"gold": {"a": 1}}, "eval_element_included: gold must be a list, got dict"),
        ({"colour": "red"}, "eval_element_included: got an unexpected keyword argument 'colour'"),
    ],
)
def test_element_evaluator_configuration_errors_name_the_function(kwargs, message):
    with pytest.raises(EvaluationError) as error:
        EVAL_FUNCTIONS["eval_element_included"]("a", **{"gold": ["a"], **kwargs})
    assert str(error.value).startswith(message)


def test_element_evaluators_bind_positionally_and_by_keyword():
    overlap = EVAL_FUNCTIONS["eval_element_list_overlap"]
    assert overlap("['a', 'B']", ["a", "b"], 2, "str", 2, 1e-6, "ratio", -1, True) == 1
    assert overlap("['a', 'B']", ["a", "b"], 2) == 0
    assert overlap(pred="['a', 'B']", gold=["a", "b"], count=2, lowercase=True) == 1
    with pytest.raises(EvaluationError, match="eval_element_list_overlap: missing a required argument: 'gold'"):
        overlap("['a']")


@pytest.mark.parametrize(
    ("pred", "expected"),
    [("{1, 'a'}", 1), ("{'a', 1, 2}", 0), ({"a", 1}, 1), ("(1, 'a')", 1)],
)
def test_element_list_included_takes_sets_of_any_mix(pred, expected):
    assert score("eval_element_list_included", pred, gold=["a", "1"]) == expected


@pytest.mark.parametrize("count", [True, 0, -1, 1.0, "2"])
def test_element_list_overlap_count_must_be_a_positive_int(count):
    with pytest.raises(EvaluationError, match="eval_element_list_overlap: count must be a positive int"):
        score("eval_element_list_overlap", "['a']", gold=["a"], count=count)


def _scratch_registry(monkeypatch):
    registry = dict(EVAL_FUNCTIONS)
    monkeypatch.setattr(functions, "EVAL_FUNCTIONS", registry)
    monkeypatch.setattr(functions, "LLM_EVAL_FUNCTIONS", set(functions.LLM_EVAL_FUNCTIONS))
    return registry


ELEMENT_OPTIONS = [
    ("element_type", "str"),
    ("ndigits", 2),
    ("tolerance", 1e-6),
    ("fuzz_method", "ratio"),
    ("threshold", -1),
    ("lowercase", False),
    ("ignore_blank", False),
]


@pytest.mark.parametrize(
    ("name", "own", "hit", "miss"),
    [
        ("eval_element_included", [], "B", "c"),
        ("eval_element_list_included", [], "['a', 'B']", "['a', 'c']"),
        ("eval_element_list_overlap", [("count", 1)], "['c', 'B']", "['c']"),
    ],
)
def test_element_evaluator_decorator_gives_airqa_signature(monkeypatch, name, own, hit, miss):
    """The decorator turns ``check(pred, gold_items, matches, *own)`` into AirQA's ``(pred, gold, *own, options)``,
    registered under the check's name: applied again here, it builds the same evaluator the registry holds."""
    registry = _scratch_registry(monkeypatch)
    check = EVAL_FUNCTIONS[name].__wrapped__
    rebuilt = functions._element_evaluator(check)
    assert registry[name] is rebuilt and rebuilt.__name__ == name
    signature = inspect.signature(rebuilt)
    parameters = signature.parameters
    assert parameters["pred"].annotation is Any and parameters["gold"].annotation is Any
    assert signature.return_annotation is int
    assert [(p.name, p.default) for p in parameters.values()] == [
        ("pred", inspect.Parameter.empty),
        ("gold", inspect.Parameter.empty),
        *own,
        *ELEMENT_OPTIONS,
    ]
    assert {p.kind for p in parameters.values()} == {inspect.Parameter.POSITIONAL_OR_KEYWORD}
    assert rebuilt(hit, ["a", "b"], lowercase=True) == 1
    assert rebuilt(hit, gold=["a", "b"]) == 0
    assert rebuilt(miss, gold=["a", "b"], lowercase=True) == 0
    assert run_evaluator(name, hit, {"gold": ["a", "b"], "lowercase": True, "nidigits": 2}) == 1
    assert ignored_keywords(name, {"gold": ["a"], "count": 1, "nidigits": 2}) == sorted(
        ["nidigits"] + ([] if own else ["count"])
    )


def test_registering_an_evaluator_makes_it_runnable_by_name(monkeypatch):
    registry = _scratch_registry(monkeypatch)

    def eval_always(pred, llm=None):
        return 1

    def eval_judged_always(pred, llm=None):
        return 1

    assert functions._register(eval_always) is eval_always
    assert functions._register_judged(eval_judged_always) is eval_judged_always
    assert registry["eval_always"] is eval_always and registry["eval_judged_always"] is eval_judged_always
    assert "eval_judged_always" in functions.LLM_EVAL_FUNCTIONS and "eval_always" not in functions.LLM_EVAL_FUNCTIONS
    assert run_evaluator("eval_always", "x") == 1


# ---------------------------------------------------------------------------------------------------------------
# Logical combinations


SUBS = {
    "eval_func_list": ["eval_string_exact_match", "eval_string_exact_match"],
    "eval_kwargs_list": [{"gold": "mCLIP"}, {"gold": "UC2"}],
}


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        ("{'UC2', 'mCLIP'}", 1),  # deliberate difference: a set's parts match the sub-evaluations in any order
        ("{'mCLIP', 'UC2'}", 1),
        ({"UC2", "mCLIP"}, 1),
        ("['mCLIP', 'UC2']", 1),
        ("['UC2', 'mCLIP']", 0),  # a list is in order
        ("{'UC2', 'mCLIP', 'X'}", 0),
        ("{'UC2', 'UC3'}", 0),
    ],
)
def test_conjunction_of_a_set_prediction(pred, expected):
    assert run_evaluator("eval_conjunction", pred, SUBS) == expected


@pytest.mark.parametrize(("pred", "expected"), [("{'UC3', 'mCLIP'}", 1), ("['UC3', 'mCLIP']", 0), ("{'X', 'Y'}", 0)])
def test_disjunction_of_a_set_prediction(pred, expected):
    assert run_evaluator("eval_disjunction", pred, SUBS) == expected


def test_text_that_is_no_list_fails_even_a_one_part_conjunction():
    """The prediction must be a list with one element per sub-evaluation: bare text is none, even where the one
    sub-evaluation would pass anything."""
    negation = {"eval_func": "eval_int_exact_match", "eval_kwargs": {"gold": 1}}
    kwargs = {"eval_func_list": ["eval_negation"], "eval_kwargs_list": [negation]}
    assert run_evaluator("eval_conjunction", "hello world", kwargs) == 0
    assert run_evaluator("eval_conjunction", "['hello world']", kwargs) == 1
    assert run_evaluator("eval_conjunction", "2", kwargs) == 1  # a scalar literal is a list of one


@pytest.mark.parametrize("eval_func_list", [[], "eval_int_exact_match", None])
def test_combination_needs_a_non_empty_list_of_functions(eval_func_list):
    with pytest.raises(EvaluationError) as error:
        run_evaluator("eval_conjunction", "[]", {"eval_func_list": eval_func_list, "eval_kwargs_list": []})
    assert str(error.value) == "eval_conjunction: eval_func_list must be a non-empty list of eval_func names"


# ---------------------------------------------------------------------------------------------------------------
# The judges


class ScriptedJudge:
    def __init__(self, reply):
        self.reply = reply
        self.calls: list[list[dict]] = []

    def complete(self, messages):
        self.calls.append(messages)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("```\nTrue\n```\nIt is not false that it agrees.", True),  # the fenced verdict wins over a later word
        ("```\nFalse\n```\nSo the claim is not true.", False),
        ("```\n**True.**\n```\nfalse alarm", True),
        ('```json\n"True"\n```\nfalse', True),
        ("```\nmaybe\n```\nfinally: true", True),  # a block without a verdict: the last word decides
        ("```\nmaybe\n```", None),
        ("I think the answer is True.", True),
        ("TRUE", True),
        ("False at first, then false again, finally true", True),
        ("true, true, false", False),
        ("untrue and falsehood", None),  # whole words only
        (None, None),
    ],
)
def test_parse_judgement_reads_the_last_fenced_block_then_the_last_word(reply, verdict):
    assert parse_judgement(reply) is verdict


def test_judge_gets_the_instructions_as_system_message_and_the_sections_as_paragraphs():
    judge = ScriptedJudge("```\nTrue\n```")
    kwargs = {"reference_answer": "30%", "question": "How much?"}
    assert run_evaluator("eval_reference_answer_with_llm", "about 30%", kwargs, llm=judge) == 1
    ((system, user),) = judge.calls
    assert system == {"role": "system", "content": functions._JUDGE_SYSTEM}
    assert user["role"] == "user"
    sections = user["content"].split("\n\n")
    assert sections[:3] == ["[Question]\nHow much?", "[Reference answer]\n30%", "[Predicted answer]\nabout 30%"]
    assert sections[3].startswith("[Rule]\nTrue if and only if the predicted answer means the same")


def test_judge_sees_the_points_numbered_from_1():
    judge = ScriptedJudge("```\nFalse\n```")
    kwargs = {"scoring_points": [" uses PPI ", "three judges"], "question": "q"}
    assert run_evaluator("eval_scoring_points_with_llm", "x", kwargs, llm=judge) == 0
    prompt = judge.calls[0][1]["content"]
    assert "[Scoring points (2)]\n1. uses PPI\n2. three judges\n\n" in prompt


def test_a_single_formula_may_be_given_as_a_string():
    judge = ScriptedJudge("```\nTrue\n```")
    kwargs = {"formulas": "E = mc^2", "question": "q"}
    assert run_evaluator("eval_complex_math_formula_with_llm", "E=mc^2", kwargs, llm=judge) == 1
    assert "[Gold formula(s) in LaTeX]\n1. E = mc^2\n\n" in judge.calls[0][1]["content"]


@pytest.mark.parametrize("points", [[], ["a", 1], {"a": "b"}, None, 5, [None]])
def test_scoring_points_must_be_a_non_empty_list_of_strings(points):
    with pytest.raises(EvaluationError) as error:
        run_evaluator("eval_scoring_points_with_llm", "x", {"scoring_points": points, "question": "q"})
    assert str(error.value) == "eval_scoring_points_with_llm: scoring_points must be a non-empty list of strings"
    assert not isinstance(error.value, JudgeUnavailable)


def test_no_judge_names_the_function():
    with pytest.raises(JudgeUnavailable) as error:
        run_evaluator("eval_reference_answer_with_llm", "x", {"reference_answer": "y", "question": "q"})
    assert str(error.value).startswith("eval_reference_answer_with_llm needs an LLM endpoint")


def test_a_failing_judge_is_unavailable_not_a_wrong_answer():
    failure = ConnectionError("refused")
    with pytest.raises(JudgeUnavailable) as error:
        run_evaluator("eval_m3sciqa", "x", {"reference_answer": "y", "question": "q"}, llm=ScriptedJudge(failure))
    assert str(error.value) == "eval_m3sciqa: the judge failed: ConnectionError: refused"
    assert error.value.__cause__ is failure


def test_a_reply_without_text_is_no_verdict():
    class Silent:
        pass

    kwargs = {"reference_answer": "y", "question": "q"}
    assert run_evaluator("eval_reference_answer_with_llm", "x", kwargs, llm=ScriptedJudge(Silent())) == 0
    assert run_evaluator("eval_m3sciqa", "x", kwargs, llm=ScriptedJudge(Silent())) == 0.0


@pytest.mark.parametrize(
    ("reply", "selection"),
    [
        ('{"selection": "1"}', 1.0),
        ('{"selection": 0.5}', 0.5),
        ('Partly right. {"selection": "0"}', 0.0),
        ('{"verdict": 1} then {"selection": "2"} then {"selection": "bad"} and {"selection": "0.5"}', 0.5),
        ('{"selection": "0.5"} {"selection": "1"}', 0.5),  # the first readable one
        ('{"selection": -0.5}', None),
        ('{"selection": 1.5}', None),
        ("{not json}", None),
        ("no object", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_selection_reads_m3sciqas_first_selection_from_0_to_1(reply, selection):
    assert parse_selection(reply) == selection


@pytest.mark.parametrize(("reply", "expected"), [('{"selection": "0.5"}', 0.5), ("no selection", 0.0)])
def test_m3sciqa_scores_the_selection_or_0(reply, expected):
    judge = ScriptedJudge(reply)
    kwargs = {"reference_answer": "gold text", "question": "what?"}
    result = run_evaluator("eval_m3sciqa", "candidate text", kwargs, llm=judge)
    assert result == expected and isinstance(result, float)
    system, user = judge.calls[0]
    assert system["role"] == "system" and user["role"] == "user"
    for part in ("<QUESTION>\nwhat?\n</QUESTION>", "<REFERENCE>\ngold text\n</REFERENCE>", "candidate text"):
        assert part in user["content"]


QUALITY = "Relevance: {}\nAccuracy: {}\nCompleteness: {}\nConciseness: {}"


@pytest.mark.parametrize(
    ("reply", "mark"),
    [
        ("Overall Quality Score: 7.5", 7.5),
        ("overall quality score = **8**", 8.0),
        ("Overall Quality Score: 7.456", 7.46),
        ("Overall Quality Score: 3\nOverall Quality Score: 5\nOverall Quality Score: 9", 9.0),  # the last one
        ("Overall Quality Score: 10", 10.0),
        ("Overall Quality Score: 1", 1.0),
        ("Overall Quality Score: 0.5", None),
        ("Overall Quality Score: 10.5", None),
        ("Overall Quality Score: 11", None),
        # the stated mark wins over the four
        (QUALITY.format(2, 2, 2, 2) + "\nOverall Quality Score: 9", 9.0),
        # without it, the mean of the four dimensions
        (QUALITY.format(8, 7, 6, 9), 7.5),
        (QUALITY.format(7.5, 8, 8, 8.01), 7.88),
        (QUALITY.format(1, 1, 1, 10), 3.25),
        ("relevance: 8\nACCURACY = 8\nCompleteness **: 8\nConciseness: **6**", 7.5),
        (QUALITY.format(3, 8, 8, 8) + "\nRelevance: 5\nRelevance: 8", 8.0),  # each dimension's last mark
        (QUALITY.format(8, 8, 8, 0), None),  # a mark out of 1-10
        (QUALITY.format(8, 8, 8, 11), None),
        (QUALITY.format(8, 8, 8, 10.5), None),
        ("Relevance: 8\nAccuracy: 8\nCompleteness: 8", None),  # a dimension missing
        ("", None),
        (None, None),
    ],
)
def test_parse_quality_reads_scidqas_mark(reply, mark):
    assert parse_quality(reply) == mark


def test_scidqa_scores_the_mark_or_0_against_the_gold_without_its_a_prefix():
    judge = ScriptedJudge(QUALITY.format(8, 7, 6, 9))
    kwargs = {"reference_answer": "A: the gold answer", "question": "why?"}
    assert run_evaluator("eval_scidqa", "predicted", kwargs, llm=judge) == 7.5
    prompt = judge.calls[0][0]["content"]
    assert "Gold answer: the gold answer\n" in prompt and "Question: why?" in prompt
    assert run_evaluator("eval_scidqa", "predicted", kwargs, llm=ScriptedJudge("no marks")) == 0.0


# ---------------------------------------------------------------------------------------------------------------
# The registered functions' own checks and defaults


@pytest.mark.parametrize(
    ("eval_func", "gold", "message"),
    [
        ("eval_bool_exact_match", "maybe", "eval_bool_exact_match: gold 'maybe' is not a boolean"),
        ("eval_int_exact_match", "many", "eval_int_exact_match: gold 'many' is not an integer"),
        ("eval_float_exact_match", "x", "eval_float_exact_match: gold 'x' is not a number"),
    ],
)
def test_a_scalar_gold_of_the_wrong_type_is_named(eval_func, gold, message):
    with pytest.raises(EvaluationError) as error:
        score(eval_func, "1", gold=gold)
    assert str(error.value) == message


def test_string_exact_match_keeps_blanks_unless_asked_and_then_on_both_sides():
    assert score("eval_string_exact_match", "Hello", gold="Hel lo") == 0
    assert score("eval_string_exact_match", "Hello", gold="Hel lo", ignore_blank=True) == 1


def test_string_fuzzy_match_refuses_an_unknown_method_at_any_threshold():
    with pytest.raises(EvaluationError) as error:
        score("eval_string_fuzzy_match", "a", gold="a", threshold=0, fuzz_method="WRatio")
    assert str(error.value) == (
        "eval_string_fuzzy_match: fuzz_method must be one of ratio, partial_ratio, token_sort_ratio, token_set_ratio"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ndigits": 1.5}, "eval_structured_object_exact_match: ndigits must be an int or null, got 1.5"),
        ({"tolerance": -1}, "eval_structured_object_exact_match: tolerance must be a non-negative number, got -1"),
        ({"threshold": 101}, "eval_structured_object_exact_match: threshold must be a number on the 0-100 scale"),
    ],
)
def test_structured_configuration_errors_name_the_function(kwargs, message):
    with pytest.raises(EvaluationError) as error:
        score("eval_structured_object_exact_match", "[1.5]", gold=[1.5], **kwargs)
    assert str(error.value).startswith(message)


def test_structured_fuzzy_strings_use_the_method_asked_for():
    kwargs = {"threshold": 100, "fuzz_method": "token_sort_ratio"}
    assert score("eval_structured_object_exact_match", "['world hello']", gold=["hello world"], **kwargs) == 1
    assert score("eval_structured_object_exact_match", "['world hello']", gold=["hello world"], threshold=100) == 0


def test_element_list_overlap_needs_one_match_by_default():
    assert score("eval_element_list_overlap", "['a', 'x']", gold=["a", "b"]) == 1


@pytest.mark.parametrize(
    ("pred", "kwargs", "expected"),
    [
        ("Deep Residul Lerning", {}, 1),  # ratio 95.2 rounds to 95: passes the default threshold of 95
        ("Deep Residul Lerning", {"threshold": 96}, 0),
        ("deep residual learning", {"threshold": 100}, 1),  # case-insensitive, and the threshold is inclusive
        ("DeepResidualLearning", {"threshold": 100}, 0),  # blanks count
    ],
)
def test_paper_relevance_threshold(pred, kwargs, expected):
    assert score(
        "eval_paper_relevance_with_reference_answer", pred, reference_answer="Deep Residual Learning", **kwargs
    ) == (expected)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"reference_answer": {"title": "x"}},
            "eval_paper_relevance_with_reference_answer: reference_answer must be a title or a list of titles",
        ),
        (
            {"reference_answer": "x", "threshold": 101},
            "eval_paper_relevance_with_reference_answer: threshold must be a number on the 0-100 scale, got 101",
        ),
    ],
)
def test_paper_relevance_configuration_errors(kwargs, message):
    with pytest.raises(EvaluationError) as error:
        score("eval_paper_relevance_with_reference_answer", "x", **kwargs)
    assert str(error.value) == message


def test_disjunction_configuration_error_names_it():
    with pytest.raises(EvaluationError) as error:
        run_evaluator("eval_disjunction", "[]", {"eval_func_list": [], "eval_kwargs_list": []})
    assert str(error.value) == "eval_disjunction: eval_func_list must be a non-empty list of eval_func names"


JUDGED_SUB = {"reference_answer": "three", "question": "How many?"}


@pytest.mark.parametrize(
    ("eval_func", "pred", "kwargs"),
    [
        (
            "eval_conjunction",
            "{'three judges', 3}",  # a set: paired in any order
            {
                "eval_func_list": ["eval_int_exact_match", "eval_reference_answer_with_llm"],
                "eval_kwargs_list": [{"gold": 3}, JUDGED_SUB],
            },
        ),
        (
            "eval_disjunction",
            "[4, 'three judges']",
            {
                "eval_func_list": ["eval_int_exact_match", "eval_reference_answer_with_llm"],
                "eval_kwargs_list": [{"gold": 3}, JUDGED_SUB],
            },
        ),
        (
            "eval_disjunction",
            "{4, 'three judges'}",
            {
                "eval_func_list": ["eval_int_exact_match", "eval_reference_answer_with_llm"],
                "eval_kwargs_list": [{"gold": 3}, JUDGED_SUB],
            },
        ),
        (
            "eval_negation",
            "four judges",
            {"eval_func": "eval_reference_answer_with_llm", "eval_kwargs": JUDGED_SUB},
        ),
    ],
)
def test_every_combination_passes_the_judge_down(eval_func, pred, kwargs):
    verdict = "```\nFalse\n```" if eval_func == "eval_negation" else "```\nTrue\n```"
    judge = ScriptedJudge(verdict)
    assert run_evaluator(eval_func, pred, kwargs, llm=judge) == 1
    assert judge.calls
    with pytest.raises(JudgeUnavailable, match="eval_reference_answer_with_llm needs an LLM endpoint"):
        run_evaluator(eval_func, pred, kwargs)


# ---------------------------------------------------------------------------------------------------------------
# What the judges are asked, word for word: the prompt is part of the score (a changed word changes what the judge
# decides), so a change to it is made here too, on purpose.

THINK = "Think step by step, then give the verdict."
SAME = "True if and only if the predicted answer means the same as the reference answer for this question."
ANY_CANDIDATE = "True if and only if the predicted answer means the same as at least one candidate reference answer."
EVERY_POINT = "True if and only if the predicted answer states every scoring point."
ANY_ORDER = "The order of the points does not matter."
IN_ORDER = "The points must appear in this order."
AGREES = "True if and only if the predicted answer agrees with the reference answer and states every scoring point."
FORMULA = (
    "True if and only if the predicted LaTeX is mathematically equivalent to the gold formula(s): renamed bound "
    "variables, reordered terms and equivalent notation are fine, a different expression is not."
)


def _airqa_prompt(sections: list[str], rule: str) -> str:
    return "\n\n".join(
        ["[Question]\nWhat is asked?", *sections, "[Predicted answer]\nthe prediction", f"[Rule]\n{rule}\n{THINK}"]
    )


AIRQA_PROMPTS = [
    ("eval_reference_answer_with_llm", {"reference_answer": 30}, ["[Reference answer]\n30"], SAME),
    (
        "eval_candidate_reference_answer_with_llm",
        {"candidate_reference_answers": ["BPE", " byte-pair encoding"]},
        ["[Candidate reference answers (2)]\n1. BPE\n2. byte-pair encoding"],
        ANY_CANDIDATE,
    ),
    (
        "eval_candidate_reference_answer_with_llm",
        {"candidate_reference_answers": "BPE"},
        ["[Candidate reference answers (1)]\n1. BPE"],
        ANY_CANDIDATE,
    ),
    (
        "eval_scoring_points_with_llm",
        {"scoring_points": ["a", "b"]},
        ["[Scoring points (2)]\n1. a\n2. b"],
        f"{EVERY_POINT} {ANY_ORDER}",
    ),
    (
        "eval_scoring_points_with_llm",
        {"scoring_points": ["a", "b"], "ignore_order": False},
        ["[Scoring points (2)]\n1. a\n2. b"],
        f"{EVERY_POINT} {IN_ORDER}",
    ),
    (
        "eval_partial_scoring_points_with_llm",
        {"scoring_points": ["a", "b", "c"]},
        ["[Scoring points (3)]\n1. a\n2. b\n3. c"],
        "True if and only if the predicted answer correctly states at least 1 of the scoring points.",
    ),
    (
        "eval_partial_scoring_points_with_llm",
        {"scoring_points": ["a", "b", "c"], "count": 3},
        ["[Scoring points (3)]\n1. a\n2. b\n3. c"],
        "True if and only if the predicted answer correctly states at least 3 of the scoring points.",
    ),
    (
        "eval_reference_answer_and_scoring_points_with_llm",
        {"reference_answer": "ARES", "scoring_points": ["PPI"]},
        ["[Reference answer]\nARES", "[Scoring points (1)]\n1. PPI"],
        f"{AGREES} {ANY_ORDER}",
    ),
    (
        "eval_reference_answer_and_scoring_points_with_llm",
        {"reference_answer": "ARES", "scoring_points": ["PPI", "judges"], "ignore_order": False},
        ["[Reference answer]\nARES", "[Scoring points (2)]\n1. PPI\n2. judges"],
        f"{AGREES} {IN_ORDER}",
    ),
    ("eval_complex_math_formula_with_llm", {"formulas": ["x^2"]}, ["[Gold formula(s) in LaTeX]\n1. x^2"], FORMULA),
    (
        "eval_complex_math_formula_with_llm",
        {"formulas": ["x^2", "y"]},
        ["[Gold formula(s) in LaTeX]\n1. x^2\n2. y"],
        f"{FORMULA} The formulas may come in any order.",
    ),
    (
        "eval_complex_math_formula_with_llm",
        {"formulas": ["x^2", "y"], "ignore_order": False},
        ["[Gold formula(s) in LaTeX]\n1. x^2\n2. y"],
        f"{FORMULA} The formulas must come in this order.",
    ),
]


@pytest.mark.parametrize(("eval_func", "kwargs", "sections", "rule"), AIRQA_PROMPTS)
def test_what_the_airqa_judge_is_asked(eval_func, kwargs, sections, rule):
    judge = ScriptedJudge("```\nTrue\n```")
    assert run_evaluator(eval_func, "the prediction", {**kwargs, "question": "What is asked?"}, llm=judge) == 1
    assert judge.calls == [
        [
            {"role": "system", "content": functions._JUDGE_SYSTEM},
            {"role": "user", "content": _airqa_prompt(sections, rule)},
        ]
    ]


@pytest.mark.parametrize(
    ("eval_func", "kwargs", "name"),
    [
        (
            "eval_candidate_reference_answer_with_llm",
            {"candidate_reference_answers": []},
            "candidate_reference_answers",
        ),
        ("eval_partial_scoring_points_with_llm", {"scoring_points": []}, "scoring_points"),
        (
            "eval_reference_answer_and_scoring_points_with_llm",
            {"reference_answer": "r", "scoring_points": []},
            "scoring_points",
        ),
        ("eval_complex_math_formula_with_llm", {"formulas": []}, "formulas"),
    ],
)
def test_judged_lists_must_hold_strings(eval_func, kwargs, name):
    with pytest.raises(EvaluationError) as error:
        run_evaluator(eval_func, "x", {**kwargs, "question": "q"}, llm=ScriptedJudge("True"))
    assert str(error.value) == f"{eval_func}: {name} must be a non-empty list of strings"


@pytest.mark.parametrize(
    "eval_func",
    [
        "eval_candidate_reference_answer_with_llm",
        "eval_scoring_points_with_llm",
        "eval_partial_scoring_points_with_llm",
        "eval_reference_answer_and_scoring_points_with_llm",
        "eval_complex_math_formula_with_llm",
        "eval_m3sciqa",
        "eval_scidqa",
    ],
)
def test_every_judged_function_names_itself_when_it_has_no_judge(eval_func):
    kwargs = {
        "reference_answer": "r",
        "candidate_reference_answers": ["r"],
        "scoring_points": ["p"],
        "formulas": ["f"],
        "question": "q",
    }
    kwargs = {k: v for k, v in kwargs.items() if k in inspect.signature(EVAL_FUNCTIONS[eval_func]).parameters}
    with pytest.raises(JudgeUnavailable) as error:
        run_evaluator(eval_func, "x", kwargs)
    assert str(error.value).startswith(f"{eval_func} needs an LLM endpoint")


@pytest.mark.parametrize("count", [0, 4, True, 1.0, "2"])
def test_partial_scoring_points_count_is_an_int_up_to_the_number_of_points(count):
    kwargs = {"scoring_points": ["a", "b", "c"], "question": "q", "count": count}
    with pytest.raises(EvaluationError) as error:
        run_evaluator("eval_partial_scoring_points_with_llm", "x", kwargs, llm=ScriptedJudge("True"))
    assert (
        str(error.value) == f"eval_partial_scoring_points_with_llm: count must be an int between 1 and 3, got {count!r}"
    )


def test_what_the_m3sciqa_judge_is_asked():
    judge = ScriptedJudge('{"selection": "1"}')
    kwargs = {"reference_answer": "the reference", "question": "What is asked?"}
    assert run_evaluator("eval_m3sciqa", "the prediction", kwargs, llm=judge) == 1.0
    prompt = (
        "Decide whether the candidate answer means the same as the reference answer, for this question.\n\n"
        "<QUESTION>\nWhat is asked?\n</QUESTION>\n\n<REFERENCE>\nthe reference\n</REFERENCE>\n\n"
        "<CANDIDATE>\nthe prediction\n</CANDIDATE>\n\n"
        'Reply with exactly one JSON object: {"selection": "1"} if they mean the same, {"selection": "0.5"} if the '
        'candidate is partly correct, {"selection": "0"} if it is wrong or unrelated. Nothing else.'
    )
    assert judge.calls == [
        [
            {
                "role": "system",
                "content": "You are an expert reader of scientific papers who grades answers to questions about them.",
            },
            {"role": "user", "content": prompt},
        ]
    ]


def _scidqa_prompt(question: str, gold: str) -> str:
    return (
        "You evaluate a model's answer to a long-form question against the gold answer. Mark it from 1 (poor) to 10 "
        "(excellent) on relevance (does it address the question), accuracy (is it correct and in line with the gold "
        "answer), completeness (does it cover what the gold answer covers) and conciseness (no needless detail), then "
        f"give the mean of the four marks.\n\nQuestion: {question}\n\nModel-generated answer: the prediction\n\n"
        f"Gold answer: {gold}\n\nAnswer in this form:\n\nEvaluation:\n"
        "1. Relevance: [score] - [why not higher, why not lower]\n"
        "2. Accuracy: [score] - [why not higher, why not lower]\n"
        "3. Completeness: [score] - [why not higher, why not lower]\n"
        "4. Conciseness: [score] - [why not higher, why not lower]\n\n"
        "Overall Quality Score: [mean of the four marks]"
    )


@pytest.mark.parametrize(
    ("kwargs", "question", "gold"),
    [
        ({"reference_answer": "A: the gold answer", "question": "Why?"}, "Why?", "the gold answer"),
        ({"reference_answer": "A:x", "question": "Why?"}, "Why?", "x"),
        ({"reference_answer": " Answer: kept whole ", "question": "Why?"}, "Why?", "Answer: kept whole"),
        ({}, "", ""),
    ],
)
def test_what_the_scidqa_judge_is_asked(kwargs, question, gold):
    judge = ScriptedJudge("Overall Quality Score: 6")
    assert run_evaluator("eval_scidqa", "the prediction", kwargs, llm=judge) == 6.0
    assert judge.calls == [[{"role": "user", "content": _scidqa_prompt(question, gold)}]]
