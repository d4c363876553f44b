"""The AirQA evaluation functions, pinned case by case (including where we deliberately differ from the reference)."""

from __future__ import annotations

import pytest

from paperlake.evaluation import EVAL_FUNCTIONS, LLM_EVAL_FUNCTIONS, EvaluationError, run_evaluator
from paperlake.evaluation.functions import parse_judgement

# (eval_func, prediction, eval_kwargs, expected score)
CASES = [
    # booleans: bools, 0/1 and the words, any case
    ("eval_bool_exact_match", True, {"gold": True}, 1),
    ("eval_bool_exact_match", "yes", {"gold": True}, 1),
    ("eval_bool_exact_match", "Y", {"gold": True}, 1),
    ("eval_bool_exact_match", "t", {"gold": True}, 1),
    ("eval_bool_exact_match", " TRUE ", {"gold": True}, 1),
    ("eval_bool_exact_match", "No.", {"gold": False}, 1),
    ("eval_bool_exact_match", "f", {"gold": False}, 1),
    ("eval_bool_exact_match", 1, {"gold": True}, 1),
    ("eval_bool_exact_match", 0, {"gold": False}, 1),
    ("eval_bool_exact_match", "true", {"gold": False}, 0),
    ("eval_bool_exact_match", 2, {"gold": True}, 0),
    ("eval_bool_exact_match", "maybe", {"gold": True}, 0),
    ("eval_bool_exact_match", None, {"gold": False}, 0),
    # ints: int() equality, but a non-integral float is not truncated into a match
    ("eval_int_exact_match", "12", {"gold": 12}, 1),
    ("eval_int_exact_match", " 7 ", {"gold": 7}, 1),
    ("eval_int_exact_match", 12.0, {"gold": 12}, 1),
    ("eval_int_exact_match", "12.0", {"gold": 12}, 1),
    ("eval_int_exact_match", 12.7, {"gold": 12}, 0),
    ("eval_int_exact_match", "12 tables", {"gold": 12}, 0),
    ("eval_int_exact_match", True, {"gold": 1}, 0),
    ("eval_int_exact_match", None, {"gold": 3}, 0),
    # floats: half-up rounding of both sides, then relative closeness with the same absolute floor
    ("eval_float_exact_match", "0.125", {"gold": 0.13, "ndigits": 2}, 1),
    ("eval_float_exact_match", 0.13, {"gold": 0.125, "ndigits": 2}, 1),
    ("eval_float_exact_match", 0.124, {"gold": 0.13, "ndigits": 2}, 0),
    ("eval_float_exact_match", 2.675, {"gold": 2.68, "ndigits": 2}, 1),
    ("eval_float_exact_match", "97.20", {"gold": 97.2, "ndigits": 2}, 1),
    ("eval_float_exact_match", -0.5, {"gold": -0.5}, 1),
    ("eval_float_exact_match", 100.00005, {"gold": 100.0}, 1),
    ("eval_float_exact_match", 100.01, {"gold": 100.0}, 0),
    ("eval_float_exact_match", 0.0, {"gold": 0.0}, 1),
    ("eval_float_exact_match", 1e-9, {"gold": 0.0}, 1),
    ("eval_float_exact_match", 0.01, {"gold": 0.0}, 0),
    ("eval_float_exact_match", 0.004, {"gold": 0.0, "ndigits": 2}, 1),
    ("eval_float_exact_match", 0.05, {"gold": 0.0, "tolerance": 0.1}, 1),
    ("eval_float_exact_match", "abc", {"gold": 1.0}, 0),
    ("eval_float_exact_match", "nan", {"gold": 1.0}, 0),
    ("eval_float_exact_match", None, {"gold": 1.0}, 0),
    ("eval_float_exact_match", True, {"gold": 1.0}, 0),
    # exact strings: stripped; lowercase and ignore_blank on request
    ("eval_string_exact_match", " Hello ", {"gold": "Hello"}, 1),
    ("eval_string_exact_match", "hello", {"gold": "Hello"}, 0),
    ("eval_string_exact_match", "hello", {"gold": "Hello", "lowercase": True}, 1),
    ("eval_string_exact_match", "Hel lo\n", {"gold": "Hello", "ignore_blank": True}, 1),
    ("eval_string_exact_match", 3, {"gold": "3"}, 1),
    # fuzzy strings: 0-100 scale, threshold inclusive
    ("eval_string_fuzzy_match", "helo world", {"gold": "hello world"}, 1),
    ("eval_string_fuzzy_match", "helo world", {"gold": "hello world", "threshold": 96}, 0),
    ("eval_string_fuzzy_match", "hallo welt", {"gold": "hello world", "threshold": 60}, 1),
    ("eval_string_fuzzy_match", "hallo welt", {"gold": "hello world", "threshold": 70}, 0),
    ("eval_string_fuzzy_match", "HELLO WORLD", {"gold": "hello world"}, 0),
    ("eval_string_fuzzy_match", "HELLO WORLD", {"gold": "hello world", "lowercase": True}, 1),
    (
        "eval_string_fuzzy_match",
        "world hello!",
        {"gold": "Hello World", "fuzz_method": "token_sort_ratio", "threshold": 100},
        1,
    ),
    (
        "eval_string_fuzzy_match",
        "Transformer",
        {"gold": "the Transformer model", "fuzz_method": "partial_ratio", "threshold": 100},
        1,
    ),
    ("eval_string_fuzzy_match", "h e l l o", {"gold": "hello", "ignore_blank": True, "threshold": 100}, 1),
    # structured objects: parsed literals, element-wise, recursive
    ("eval_structured_object_exact_match", "[1, 2, 3]", {"gold": [1, 2, 3]}, 1),
    ("eval_structured_object_exact_match", [1, 2, 3], {"gold": [1, 2, 3]}, 1),
    ("eval_structured_object_exact_match", "(1, 2, 3)", {"gold": [1, 2, 3]}, 1),
    ("eval_structured_object_exact_match", "[3, 2, 1]", {"gold": [1, 2, 3]}, 0),
    ("eval_structured_object_exact_match", "[3, 2, 1]", {"gold": [1, 2, 3], "ignore_order": True}, 1),
    ("eval_structured_object_exact_match", "[1, 2]", {"gold": [1, 2, 3]}, 0),
    ("eval_structured_object_exact_match", "[]", {"gold": []}, 1),
    ("eval_structured_object_exact_match", "[]", {"gold": [1]}, 0),
    ("eval_structured_object_exact_match", "[[1, 2], [3, 4]]", {"gold": [[1, 2], [3, 4]]}, 1),
    ("eval_structured_object_exact_match", "[[4, 3], [2, 1]]", {"gold": [[1, 2], [3, 4]]}, 0),
    ("eval_structured_object_exact_match", "[[4, 3], [2, 1]]", {"gold": [[1, 2], [3, 4]], "ignore_order": True}, 1),
    (
        "eval_structured_object_exact_match",
        "{'a': 1, 'b': [1.234, 'X']}",
        {"gold": {"a": 1, "b": [1.23, "x"]}, "ndigits": 2, "lowercase": True},
        1,
    ),
    ("eval_structured_object_exact_match", "{'a': 1, 'b': [1.234, 'X']}", {"gold": {"a": 1, "b": [1.23, "x"]}}, 0),
    ("eval_structured_object_exact_match", "{'a': 1}", {"gold": {"a": 1, "b": 2}}, 0),
    ("eval_structured_object_exact_match", "{'A': 1}", {"gold": {"a": 1}, "lowercase": True}, 1),
    ("eval_structured_object_exact_match", '{"x": true, "y": null}', {"gold": {"x": True, "y": None}}, 1),
    ("eval_structured_object_exact_match", "['True', 'no']", {"gold": [True, False]}, 1),
    ("eval_structured_object_exact_match", "[3.7]", {"gold": [3]}, 0),
    ("eval_structured_object_exact_match", "[-1.904, -0.896]", {"gold": [-1.9, -0.9], "ndigits": 2}, 1),
    (
        "eval_structured_object_exact_match",
        "['b', 1, 'A', None, True]",
        {"gold": ["a", "B", 1, None, True], "ignore_order": True, "lowercase": True},
        1,
    ),
    ("eval_structured_object_exact_match", "['2', 1]", {"gold": [2, "1"], "ignore_order": True}, 1),
    (
        "eval_structured_object_exact_match",
        "['Llama-3', 'mixtral']",
        {"gold": ["Mixtral", "Llama3"], "ignore_order": True, "lowercase": True, "threshold": 80},
        1,
    ),
    (
        "eval_structured_object_exact_match",
        "['Llama-3', 'mixtral-8x7b']",
        {"gold": ["Mixtral", "Llama3"], "ignore_order": True, "lowercase": True, "threshold": 80},
        0,
    ),
    ("eval_structured_object_exact_match", "'hello'", {"gold": "hello"}, 1),
    ("eval_structured_object_exact_match", "hello", {"gold": "hello"}, 1),
    # malformed predictions score 0 and never raise
    ("eval_structured_object_exact_match", "not a list", {"gold": ["not a list"]}, 0),
    ("eval_structured_object_exact_match", "[1, 2", {"gold": [1, 2]}, 0),
    ("eval_structured_object_exact_match", "[" * 5000, {"gold": [1]}, 0),
    ("eval_structured_object_exact_match", None, {"gold": [1]}, 0),
    ("eval_structured_object_exact_match", "__import__('os').getcwd()", {"gold": ["x"]}, 0),
    # membership
    ("eval_element_included", "2/d", {"gold": ["2/d", "\\frac{2}{d}"]}, 1),
    ("eval_element_included", "\\frac{2}{d}", {"gold": ["2/d", "\\frac{2}{d}"]}, 1),
    ("eval_element_included", "3/d", {"gold": ["2/d", "\\frac{2}{d}"]}, 0),
    ("eval_element_included", "3", {"gold": [1, 2, 3], "element_type": "int"}, 1),
    ("eval_element_included", 0.333, {"gold": [0.33], "element_type": "float", "ndigits": 2}, 1),
    ("eval_element_included", 0.333, {"gold": [0.33], "element_type": "float"}, 1),
    ("eval_element_included", 0.333, {"gold": [0.33], "element_type": "float", "ndigits": None}, 0),
    ("eval_element_included", "Lukas Edmann", {"gold": ["Lukas Edman"], "threshold": 90}, 1),
    ("eval_element_included", "[1, 2]", {"gold": [[2, 1]], "element_type": "list"}, 0),
    ("eval_element_list_included", "['a']", {"gold": ["a", "b"]}, 1),
    ("eval_element_list_included", "('a', 'b')", {"gold": ["a", "b"]}, 1),
    ("eval_element_list_included", "'a'", {"gold": ["a", "b"]}, 1),
    ("eval_element_list_included", "['a', 'c']", {"gold": ["a", "b"]}, 0),
    ("eval_element_list_included", "[]", {"gold": ["a", "b"]}, 0),
    ("eval_element_list_included", [], {"gold": ["a", "b"]}, 0),
    ("eval_element_list_included", "a, b", {"gold": ["a", "b"]}, 0),
    ("eval_element_list_overlap", "['a', 'b', 'c']", {"gold": ["d", "a", "b"], "count": 2}, 1),
    ("eval_element_list_overlap", "['a', 'b', 'c']", {"gold": ["d", "a", "b"], "count": 3}, 0),
    ("eval_element_list_overlap", "['a', 'A']", {"gold": ["a", "b"], "count": 2, "lowercase": True}, 0),
    ("eval_element_list_overlap", "['a', 'B']", {"gold": ["a", "b"], "count": 2, "lowercase": True}, 1),
    ("eval_element_list_overlap", "[]", {"gold": ["a"]}, 0),
    # paper titles: case-insensitive fuzzy ratio, one title or any of several
    (
        "eval_paper_relevance_with_reference_answer",
        "tokenization is more than compression",
        {"reference_answer": "Tokenization Is More Than Compression"},
        1,
    ),
    (
        "eval_paper_relevance_with_reference_answer",
        "CUTE: Measuring LLMs' Understanding of Their Tokens",
        {"reference_answer": ["Other paper", "CUTE: Measuring LLMs’ Understanding of Their Tokens"]},
        1,
    ),
    (
        "eval_paper_relevance_with_reference_answer",
        "Tokenization",
        {"reference_answer": "Tokenization Is More Than Compression"},
        0,
    ),
    (
        "eval_paper_relevance_with_reference_answer",
        "",
        {"reference_answer": "Tokenization Is More Than Compression"},
        0,
    ),
    # logical combinations, with names resolved through the registry
    (
        "eval_conjunction",
        "[1, 'a']",
        {
            "eval_func_list": ["eval_int_exact_match", "eval_string_exact_match"],
            "eval_kwargs_list": [{"gold": 1}, {"gold": "a"}],
        },
        1,
    ),
    (
        "eval_conjunction",
        [1, "b"],
        {
            "eval_func_list": ["eval_int_exact_match", "eval_string_exact_match"],
            "eval_kwargs_list": [{"gold": 1}, {"gold": "a"}],
        },
        0,
    ),
    (
        "eval_conjunction",
        "[1]",
        {
            "eval_func_list": ["eval_int_exact_match", "eval_string_exact_match"],
            "eval_kwargs_list": [{"gold": 1}, {"gold": "a"}],
        },
        0,
    ),
    (
        "eval_conjunction",
        "[1, 'a', 'extra']",
        {
            "eval_func_list": ["eval_int_exact_match", "eval_string_exact_match"],
            "eval_kwargs_list": [{"gold": 1}, {"gold": "a"}],
        },
        0,
    ),
    (
        "eval_conjunction",
        "1 and a",
        {
            "eval_func_list": ["eval_int_exact_match", "eval_string_exact_match"],
            "eval_kwargs_list": [{"gold": 1}, {"gold": "a"}],
        },
        0,
    ),
    (
        "eval_disjunction",
        "[2, 'a']",
        {
            "eval_func_list": ["eval_int_exact_match", "eval_string_exact_match"],
            "eval_kwargs_list": [{"gold": 1}, {"gold": "a"}],
        },
        1,
    ),
    (
        "eval_disjunction",
        "[2, 'b']",
        {
            "eval_func_list": ["eval_int_exact_match", "eval_string_exact_match"],
            "eval_kwargs_list": [{"gold": 1}, {"gold": "a"}],
        },
        0,
    ),
    (
        "eval_disjunction",
        "[1]",
        {
            "eval_func_list": ["eval_int_exact_match", "eval_string_exact_match"],
            "eval_kwargs_list": [{"gold": 1}, {"gold": "a"}],
        },
        0,
    ),
    ("eval_negation", "3", {"eval_func": "eval_int_exact_match", "eval_kwargs": {"gold": 4}}, 1),
    ("eval_negation", "4", {"eval_func": "eval_int_exact_match", "eval_kwargs": {"gold": 4}}, 0),
    (
        "eval_conjunction",
        "[[2, 1], 'x']",
        {
            "eval_func_list": ["eval_structured_object_exact_match", "eval_negation"],
            "eval_kwargs_list": [
                {"gold": [1, 2], "ignore_order": True},
                {"eval_func": "eval_string_exact_match", "eval_kwargs": {"gold": "y"}},
            ],
        },
        1,
    ),
]


@pytest.mark.parametrize(("eval_func", "pred", "kwargs", "expected"), CASES)
def test_eval_function(eval_func, pred, kwargs, expected):
    score = run_evaluator(eval_func, pred, kwargs)
    assert score == expected and type(score) is int


def test_every_function_is_registered():
    assert len(EVAL_FUNCTIONS) == 21
    assert LLM_EVAL_FUNCTIONS == {
        "eval_m3sciqa",
        "eval_scidqa",
        "eval_reference_answer_with_llm",
        "eval_candidate_reference_answer_with_llm",
        "eval_scoring_points_with_llm",
        "eval_partial_scoring_points_with_llm",
        "eval_reference_answer_and_scoring_points_with_llm",
        "eval_complex_math_formula_with_llm",
    }


BAD_CONFIGURATIONS = [
    ("eval_nonexistent", {"gold": 1}, "unknown eval_func"),
    ("eval_int_exact_match", {"gld": 1}, "bad eval_kwargs"),
    ("eval_int_exact_match", {"gold": "many"}, "is not an integer"),
    ("eval_float_exact_match", {"gold": 1.0, "ndigits": 1.5}, "ndigits"),
    ("eval_float_exact_match", {"gold": 1.0, "tolerance": -1}, "tolerance"),
    ("eval_string_fuzzy_match", {"gold": "a", "fuzz_method": "WRatio"}, "fuzz_method"),
    ("eval_string_fuzzy_match", {"gold": "a", "threshold": 950}, "threshold"),
    ("eval_element_included", {"gold": "not a list"}, "gold must be a list"),
    ("eval_element_list_overlap", {"gold": ["a"], "count": 0}, "count"),
    ("eval_paper_relevance_with_reference_answer", {"reference_answer": []}, "reference_answer"),
    ("eval_conjunction", {"eval_func_list": ["eval_int_exact_match"], "eval_kwargs_list": []}, "one entry per"),
    ("eval_conjunction", {"eval_func_list": ["eval_missing"], "eval_kwargs_list": [{}]}, "unknown eval_func"),
    ("eval_negation", {"eval_func": "eval_missing", "eval_kwargs": {}}, "unknown eval_func"),
    ("eval_reference_answer_with_llm", {"reference_answer": "x", "question": "q"}, "needs an LLM endpoint"),
    ("eval_partial_scoring_points_with_llm", {"scoring_points": ["a"], "question": "q", "count": 2}, "count"),
]


@pytest.mark.parametrize(("eval_func", "kwargs", "message"), BAD_CONFIGURATIONS)
def test_misconfigured_evaluator_raises(eval_func, kwargs, message):
    with pytest.raises(EvaluationError, match=message):
        run_evaluator(eval_func, "[1]", kwargs)


# ---------------------------------------------------------------------------------------------------------------
# LLM-judged functions, with a scripted judge in place of the HTTP client


class ScriptedJudge:
    def __init__(self, reply: str):
        self.reply = reply
        self.calls: list[list[dict]] = []

    def complete(self, messages: list[dict]) -> str:
        self.calls.append(messages)
        return self.reply


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("The prediction matches.\n```\nTrue\n```", True),
        ("```txt\nFalse\n```", False),
        ("First I thought\n```\nFalse\n```\nbut on reflection\n```\nTrue\n```", True),
        ("```text\n**True.**\n```", True),
        ("It is true that A, but the answer is false", False),
        ("no verdict at all", None),
        ("", None),
    ],
)
def test_parse_judgement(reply, verdict):
    assert parse_judgement(reply) is verdict


LLM_CASES = [
    ("eval_reference_answer_with_llm", {"reference_answer": "about 30%"}, ["about 30%"]),
    (
        "eval_candidate_reference_answer_with_llm",
        {"candidate_reference_answers": ["BPE", "byte-pair encoding"]},
        ["BPE", "byte-pair encoding"],
    ),
    ("eval_scoring_points_with_llm", {"scoring_points": ["uses PPI", "three judges"]}, ["uses PPI", "three judges"]),
    (
        "eval_partial_scoring_points_with_llm",
        {"scoring_points": ["uses PPI", "three judges"], "count": 1},
        ["at least 1"],
    ),
    (
        "eval_reference_answer_and_scoring_points_with_llm",
        {"reference_answer": "ARES", "scoring_points": ["PPI"]},
        ["ARES", "PPI"],
    ),
    ("eval_complex_math_formula_with_llm", {"formulas": ["\\frac{2}{d}"]}, ["\\frac{2}{d}"]),
]


@pytest.mark.parametrize(("eval_func", "kwargs", "expected_in_prompt"), LLM_CASES)
@pytest.mark.parametrize(("reply", "expected"), [("ok\n```\nTrue\n```", 1), ("```\nFalse\n```", 0), ("unsure", 0)])
def test_llm_judged_functions(eval_func, kwargs, expected_in_prompt, reply, expected):
    judge = ScriptedJudge(reply)
    kwargs = {**kwargs, "question": "What is asked?", "llm_model": "ignored", "temperature": 0.0}
    assert run_evaluator(eval_func, "the predicted answer", kwargs, llm=judge) == expected
    (messages,) = judge.calls
    assert [m["role"] for m in messages] == ["system", "user"]
    prompt = messages[1]["content"]
    for text in ["What is asked?", "the predicted answer", *expected_in_prompt]:
        assert text in prompt


def test_combinations_pass_the_judge_down():
    judge = ScriptedJudge("```\nTrue\n```")
    kwargs = {
        "eval_func_list": ["eval_int_exact_match", "eval_reference_answer_with_llm"],
        "eval_kwargs_list": [{"gold": 3}, {"reference_answer": "three judges", "question": "How many judges?"}],
    }
    assert run_evaluator("eval_conjunction", "[3, 'three LM judges']", kwargs, llm=judge) == 1
    assert len(judge.calls) == 1
    with pytest.raises(EvaluationError, match="needs an LLM endpoint"):
        run_evaluator("eval_conjunction", "[3, 'three LM judges']", kwargs)


def test_judge_may_return_a_response_object():
    """``paperlake.runtime.llm.ChatClient.complete`` returns a response with ``.text``; it serves as a judge as is."""

    class Response:
        text = "```\nTrue\n```"

    class Client:
        def complete(self, messages):
            return Response()

    kwargs = {"reference_answer": "x", "question": "q"}
    assert run_evaluator("eval_reference_answer_with_llm", "x", kwargs, llm=Client()) == 1
