"""Scoring answers the AirQA way: the evaluation functions, datasets, prediction files and reports."""

from paperlake.evaluation.dataset import (
    TAG_GROUPS,
    DatasetError,
    Evaluator,
    Example,
    Report,
    evaluate,
    load_examples,
    load_predictions,
)
from paperlake.evaluation.functions import (
    EVAL_FUNCTIONS,
    LLM_EVAL_FUNCTIONS,
    EvaluationError,
    Judge,
    get_eval_function,
    run_evaluator,
)

__all__ = [
    "EVAL_FUNCTIONS",
    "LLM_EVAL_FUNCTIONS",
    "TAG_GROUPS",
    "DatasetError",
    "EvaluationError",
    "Evaluator",
    "Example",
    "Judge",
    "Report",
    "evaluate",
    "get_eval_function",
    "load_examples",
    "load_predictions",
    "run_evaluator",
]
