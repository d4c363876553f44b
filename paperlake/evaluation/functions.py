"""The AirQA evaluation functions: one prediction against one gold answer.

Names, keywords and semantics follow NeuSym-RAG's evaluator (``evaluation/`` in X-LANCE/NeuSym-RAG; REFERENCE.md,
"Evaluation functions"), so the authors' AirQA, M3SciQA and SciDQA lines run here unchanged: ``eval_kwargs`` names
the gold answer ``gold`` (``reference_answer``, ``scoring_points``, ``formulas`` for the LLM-judged ones).

Contract: a function returns its score (the int 0 or 1; ``eval_m3sciqa`` 0, 0.5 or 1; ``eval_scidqa`` a mark
from 1 to 10, 0 when the judge gives none) and never raises because of the *prediction* (a malformed, empty or
wrongly typed answer scores 0). It raises :class:`EvaluationError` only when the *evaluator* is misconfigured
(unknown function or fuzzy method, a required keyword missing, gold of the wrong type, bad ``count``...), and
:class:`JudgeUnavailable` when an LLM-judged function has no judge or its judge fails: that example is not
scored, it is not wrong. Keywords a function does not take are ignored, as the authors' ``**kwargs`` ignore them
(real lines carry ``nidigits``, ``ignore_case``, ``ignore_order`` on string matchers); the loader counts them.
No score depends on hash order (``PYTHONHASHSEED``) or on which packages are installed.

Deliberate differences from the authors' functions, where theirs is visibly wrong (``authors`` -> ``here``):

=================================  ===========================================  =====================================
case                               example                                      authors -> here
=================================  ===========================================  =====================================
numeric-string gold with ndigits   gold ``"2463.5"``, ndigits 1, pred 2463.5    0 (``round(str)`` raises) -> 1
``bool("false")``                  bool gold ``"false"``, pred ``"no"``          0 (``bool("false")`` is True) -> 1
``int()`` truncation               int gold 3, pred ``3.7``                     1 -> 0; ``"3.0"``: 0 -> 1
empty list "included"              element_list_included, pred ``[]``           1 (``all([])``) -> 0
JSON words in answers              ``'["LaCo", false]'`` (conjunction)          0 (``eval`` fails) -> 1
``eval()`` of the prediction       ``"__import__('os')..."``                    evaluated -> ``ast.literal_eval``
                                                                                then JSON, never ``eval``
bare text where a list is due      structured gold ``["x"]``, pred ``x``        1 (wrapped) -> 0; a *literal*
                                                                                ``'x'`` or ``3`` is a list of one
one-element list gold, string      string_exact, gold ``["0a41...-uuid"]``,     0 (``str(gold)`` is ``"['0a...']"``)
match                              pred ``0a41...-uuid``                        -> 1
set literal prediction             ``"{'mCLIP', 'UC2'}"`` vs ``["UC2",          hash order (varies by
                                   "mCLIP"]``; in a conjunction too             ``PYTHONHASHSEED``) -> any order
the text ``None`` / ``null``       gold null, pred ``"null"``                   0 -> 1 (``"None"``: 1 -> 1)
ndigits rounding                   ``2.675`` to 2 digits                        2.67 (binary float) -> 2.68 (half
                                                                                up on the decimal shown)
float closeness                    gold 0.0, pred ``1e-9``                      0 (relative only) -> 1 (the
                                                                                tolerance is absolute too)
booleans are not ints              int gold 1, pred ``True``                    1 -> 0
booleans inside structures         structured gold ``[true]``, pred ``"[True]"`` int match -> boolean match
``ignore_order`` sort              ``["b", "A"]`` vs ``["a", "B"]``, lowercase  0 (``str()`` sort pairs A with B)
                                                                                -> 1 (normalised sort, a matching)
list overlap count                 ``["a", "A"]`` vs ``["a", "b"]``, lowercase,  1 (two distinct strings) -> 0 (one
                                   count 2                                      gold element hit)
conjunction shape                  pred not a list, or of the wrong length      0, or a crash -> 0; mismatched
                                                                                ``eval_*_list`` lengths: an error
M3SciQA / SciDQA judges            the judge's reply                            SciDQA asks a second LLM call to
                                                                                read the mark -> parsed from the
                                                                                reply (the stated overall mark, or
                                                                                the mean of the four)
=================================  ===========================================  =====================================

Fuzzy matching uses rapidfuzz where the authors use fuzzywuzzy 0.18 with python-Levenshtein: ``ratio`` is the same
Indel similarity, and scores are rounded to a whole number as fuzzywuzzy rounds them (94.6 passes 95 in both).
Two known differences remain: fuzzywuzzy's token methods fold to ASCII by *dropping* other characters ("café" and
"caf" compare equal there) where rapidfuzz keeps them, and fuzzywuzzy's ``partial_ratio`` takes the best of its
matching blocks where rapidfuzz's is the exact optimum, so it can be a point or two higher here. ``ratio`` and
``partial_ratio`` compare the strings as given; the ``token_*`` methods lower-case and strip punctuation first.

The element functions round floats to ``ndigits=2`` by default, as AirQA's do (the other matchers default to no
rounding); any ``element_type`` other than str/int/float/bool is matched as a structured object.

The LLM-judged functions take ``llm``: any object with ``complete(messages) -> str`` (:class:`Judge`). The
AirQA judge is asked to end with ``True`` or ``False`` in a fenced block; we read the last fenced block, else the
last ``true``/``false`` word. Prompts are ours; the verdicts they ask for are the authors'.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Protocol, runtime_checkable

from rapidfuzz import fuzz, utils


class EvaluationError(ValueError):
    """The evaluator is misconfigured (not: the prediction is wrong)."""


class JudgeUnavailable(EvaluationError):
    """An LLM-judged function has no judge, or the judge failed: the example is not scored (it is not wrong)."""


@runtime_checkable
class Judge(Protocol):
    """An LLM endpoint: chat messages in, the assistant's text out (or a response with ``.text``, as
    :class:`paperlake.runtime.llm.ChatClient` returns)."""

    def complete(self, messages: list[dict]) -> str: ...


EvalFunction = Callable[..., int]
EVAL_FUNCTIONS: dict[str, EvalFunction] = {}
LLM_EVAL_FUNCTIONS: set[str] = set()  # the functions that need a judge


def _register(func: EvalFunction) -> EvalFunction:
    EVAL_FUNCTIONS[func.__name__] = func
    return func


def _register_judged(func: EvalFunction) -> EvalFunction:
    """A function that asks the judge itself (the logical combinations only pass it on)."""
    LLM_EVAL_FUNCTIONS.add(func.__name__)
    return _register(func)


def get_eval_function(name: str) -> EvalFunction:
    try:
        return EVAL_FUNCTIONS[name]
    except (KeyError, TypeError):
        raise EvaluationError(f"unknown eval_func {name!r}; known: {', '.join(sorted(EVAL_FUNCTIONS))}") from None


def ignored_keywords(eval_func: str, eval_kwargs: Mapping[str, Any]) -> list[str]:
    """The keywords of ``eval_kwargs`` that ``eval_func`` does not take (and ignores, as the authors' ``**kwargs``
    do): ``nidigits``, ``ignore_order`` on a string matcher... Sorted; ``llm`` is ours to pass, never a keyword."""
    parameters = inspect.signature(get_eval_function(eval_func)).parameters
    return sorted(str(k) for k in eval_kwargs if k not in parameters and k != "llm")


def run_evaluator(
    eval_func: str, pred: Any, eval_kwargs: Mapping[str, Any] | None = None, llm: Judge | None = None
) -> float:
    """Resolve ``eval_func`` by name and score ``pred``; the judge goes only to functions that take one.

    Keywords the function does not take are dropped (the loader reports them); a missing required one is a
    configuration error."""
    func = get_eval_function(eval_func)
    if eval_kwargs is not None and not isinstance(eval_kwargs, Mapping):
        raise EvaluationError(f"{eval_func}: eval_kwargs must be an object, got {type(eval_kwargs).__name__}")
    signature = inspect.signature(func)
    kwargs = {k: v for k, v in (eval_kwargs or {}).items() if k in signature.parameters}
    if "llm" in signature.parameters:
        kwargs["llm"] = llm
    try:
        signature.bind(pred, **kwargs)
    except TypeError as exc:
        raise EvaluationError(f"{eval_func}: bad eval_kwargs {sorted(kwargs)}: {exc}") from None
    return func(pred, **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Scalar conversions: None means "this prediction is not a value of that type" (a wrong answer, not an error).

_TRUE_WORDS = frozenset({"true", "yes", "y", "t", "1"})
_FALSE_WORDS = frozenset({"false", "no", "n", "f", "0"})
_FUZZ_METHODS = ("ratio", "partial_ratio", "token_sort_ratio", "token_set_ratio")
_BLANKS = re.compile(r"\s+")


def _to_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value) if value in (0, 1) else None
    if isinstance(value, str):
        word = value.strip().rstrip(".").strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    return None


def _to_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return None
        return int(number) if number.is_integer() else None
    return None


def _to_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):  # OverflowError: an int too large for a float
        return None


def _round_half_up(value: float, ndigits: int) -> float:
    if not math.isfinite(value):
        return value
    try:
        quantum = Decimal(1).scaleb(-ndigits)
        return float(Decimal(repr(value)).quantize(quantum, rounding=ROUND_HALF_UP))
    except InvalidOperation:  # more digits than Decimal's context holds: the value is far beyond ndigits anyway
        return round(value, ndigits)


def _gold(convert: Callable[[Any], Any], gold: Any, kind: str, func: str) -> Any:
    value = convert(gold)
    if value is None:
        raise EvaluationError(f"{func}: gold {gold!r} is not {kind}")
    return value


def _check_float_options(ndigits: Any, tolerance: Any, func: str) -> None:
    if ndigits is not None and (isinstance(ndigits, bool) or not isinstance(ndigits, int)):
        raise EvaluationError(f"{func}: ndigits must be an int or null, got {ndigits!r}")
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or tolerance < 0:
        raise EvaluationError(f"{func}: tolerance must be a non-negative number, got {tolerance!r}")


def _check_fuzzy_options(fuzz_method: Any, threshold: Any, func: str) -> None:
    """``threshold <= 0`` means exact matching, so the method only matters above 0."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or threshold > 100:
        raise EvaluationError(f"{func}: threshold must be a number on the 0-100 scale, got {threshold!r}")
    if threshold > 0 and fuzz_method not in _FUZZ_METHODS:
        raise EvaluationError(f"{func}: fuzz_method must be one of {', '.join(_FUZZ_METHODS)}, got {fuzz_method!r}")


def _normalise_text(value: Any, lowercase: bool, ignore_blank: bool, blank: str = "") -> str:
    text = str(value).strip()
    if ignore_blank:
        text = _BLANKS.sub(blank, text)
    return text.lower() if lowercase else text


def _floats_close(pred: float, gold: float, ndigits: int | None, tolerance: float) -> bool:
    if ndigits is not None:
        pred, gold = _round_half_up(pred, ndigits), _round_half_up(gold, ndigits)
    return math.isclose(pred, gold, rel_tol=tolerance, abs_tol=tolerance)


def _fuzzy_score(pred: Any, gold: Any, fuzz_method: str, lowercase: bool, ignore_blank: bool) -> float:
    token_based = fuzz_method.startswith("token_")
    # Token methods need the blanks between tokens: ignore_blank collapses them instead of removing them.
    pred_text = _normalise_text(pred, lowercase, ignore_blank, " " if token_based else "")
    gold_text = _normalise_text(gold, lowercase, ignore_blank, " " if token_based else "")
    processor = utils.default_process if token_based else None
    # rounded to a whole number, as fuzzywuzzy reports it: 94.6 passes a threshold of 95 there, so here too
    return float(round(getattr(fuzz, fuzz_method)(pred_text, gold_text, processor=processor)))


# ---------------------------------------------------------------------------------------------------------------
# Scalar matchers


def eval_bool_exact_match(pred: Any, gold: Any) -> int:
    """Booleans, 0/1, or the words true/yes/y/t and false/no/n/f in any case (a trailing full stop is ignored)."""
    expected = _gold(_to_bool, gold, "a boolean", "eval_bool_exact_match")
    return int(_to_bool(pred) is expected)


def eval_int_exact_match(pred: Any, gold: Any) -> int:
    expected = _gold(_to_int, gold, "an integer", "eval_int_exact_match")
    return int(_to_int(pred) == expected)


def eval_float_exact_match(pred: Any, gold: Any, ndigits: int | None = None, tolerance: float = 1e-6) -> int:
    """``|pred - gold| <= max(tolerance * max(|pred|, |gold|), tolerance)`` after optional half-up rounding."""
    _check_float_options(ndigits, tolerance, "eval_float_exact_match")
    expected = _gold(_to_float, gold, "a number", "eval_float_exact_match")
    value = _to_float(pred)
    return int(value is not None and _floats_close(value, expected, ndigits, tolerance))


def _string_golds(gold: Any) -> list[Any]:
    """A string matcher's gold, and for a one-element list gold (real AirQA lines have ``["BART"]``) its element
    too: a scalar counts as a list of one."""
    return [gold, gold[0]] if isinstance(gold, list | tuple) and len(gold) == 1 else [gold]


def eval_string_exact_match(pred: Any, gold: Any, lowercase: bool = False, ignore_blank: bool = False) -> int:
    text = _normalise_text(pred, lowercase, ignore_blank)
    return int(any(text == _normalise_text(g, lowercase, ignore_blank) for g in _string_golds(gold)))


def eval_string_fuzzy_match(
    pred: Any,
    gold: Any,
    fuzz_method: str = "ratio",
    threshold: float = 95,
    lowercase: bool = False,
    ignore_blank: bool = False,
) -> int:
    _check_fuzzy_options(fuzz_method, threshold, "eval_string_fuzzy_match")
    if fuzz_method not in _FUZZ_METHODS:
        raise EvaluationError(f"eval_string_fuzzy_match: fuzz_method must be one of {', '.join(_FUZZ_METHODS)}")
    scores = (_fuzzy_score(pred, g, fuzz_method, lowercase, ignore_blank) for g in _string_golds(gold))
    return int(any(score >= threshold for score in scores))


# ---------------------------------------------------------------------------------------------------------------
# Structured objects

_UNPARSED = object()


def _parse_literal(text: str) -> Any:
    """A Python literal, else JSON (for true/false/null), else :data:`_UNPARSED`."""
    stripped = text.strip()
    try:
        return ast.literal_eval(stripped)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return _UNPARSED


def _as_list(value: Any) -> list | None:
    """A list from a list/tuple/set or a string holding one; a scalar literal becomes a one-element list."""
    if isinstance(value, str):
        value = _parse_literal(value)
        if value is _UNPARSED:
            return None
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=_type_aware_key)
    return [value]


@dataclass(frozen=True)
class _MatchOptions:
    ignore_order: bool = False
    lowercase: bool = False
    ignore_blank: bool = False
    ndigits: int | None = None
    tolerance: float = 1e-6
    threshold: float = -1
    fuzz_method: str = "ratio"

    def text(self, value: Any) -> str:
        return _normalise_text(value, self.lowercase, self.ignore_blank)


def _type_aware_key(value: Any, options: _MatchOptions = _MatchOptions()) -> tuple:
    """Sort key that orders any mix of literals: numbers, booleans, strings, containers, None, then the rest."""
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, int | float):
        return (0, float(value))
    if isinstance(value, str):
        return (2, options.text(value))
    if isinstance(value, list | tuple):
        return (3, tuple(_type_aware_key(item, options) for item in value))
    if isinstance(value, set | frozenset):  # sorted, so that no key depends on hash order
        return (3, tuple(sorted(_type_aware_key(item, options) for item in value)))
    if isinstance(value, dict):
        return (4, tuple(sorted((options.text(k), _type_aware_key(v, options)) for k, v in value.items())))
    if value is None:
        return (5, "")
    return (6, repr(value))


def _max_matching(left: int, right: int, edge: Callable[[int, int], bool]) -> int:
    """Size of a maximum bipartite matching (augmenting paths; the lists here are short)."""
    neighbours = [[j for j in range(right) if edge(i, j)] for i in range(left)]
    owner = [-1] * right

    def assign(i: int, visited: set[int]) -> bool:
        for j in neighbours[i]:
            if j not in visited:
                visited.add(j)
                if owner[j] == -1 or assign(owner[j], visited):
                    owner[j] = i
                    return True
        return False

    return sum(assign(i, set()) for i in range(left))


def _match(pred: Any, gold: Any, options: _MatchOptions) -> bool:
    if isinstance(gold, bool):
        return _to_bool(pred) is gold
    if isinstance(gold, int):
        return _to_int(pred) == gold
    if isinstance(gold, float):
        value = _to_float(pred)
        return value is not None and _floats_close(value, gold, options.ndigits, options.tolerance)
    if isinstance(gold, str):
        if options.threshold > 0:
            score = _fuzzy_score(pred, gold, options.fuzz_method, options.lowercase, options.ignore_blank)
            return score >= options.threshold
        return options.text(pred) == options.text(gold)
    if gold is None:  # JSON's null; the text None or null names it too
        return pred is None or (isinstance(pred, str) and pred.strip() in ("None", "null"))
    if isinstance(gold, list | tuple | set | frozenset):
        return _match_sequence(pred, list(gold), options)
    if isinstance(gold, dict):
        return _match_mapping(pred, gold, options)
    return pred == gold


def _match_sequence(pred: Any, gold: list, options: _MatchOptions) -> bool:
    """A set prediction has no order, so it is paired in any order; a scalar literal is a list of one."""
    if isinstance(pred, str):  # a value inside a structure: a literal it holds, else the string itself
        parsed = _parse_literal(pred)
        pred = pred if parsed is _UNPARSED else parsed
    ordered = not options.ignore_order and not isinstance(pred, set | frozenset)
    if isinstance(pred, set | frozenset):
        pred = sorted(pred, key=_type_aware_key)
    elif not isinstance(pred, list | tuple):
        pred = [pred]
    if len(pred) != len(gold):
        return False
    pred = list(pred)
    if ordered:
        return all(_match(p, g, options) for p, g in zip(pred, gold))
    pred_sorted = sorted(pred, key=lambda v: _type_aware_key(v, options))
    gold_sorted = sorted(gold, key=lambda v: _type_aware_key(v, options))
    if all(_match(p, g, options) for p, g in zip(pred_sorted, gold_sorted)):
        return True
    return _max_matching(len(pred), len(gold), lambda i, j: _match(pred[i], gold[j], options)) == len(gold)


def _match_mapping(pred: Any, gold: dict, options: _MatchOptions) -> bool:
    if isinstance(pred, str):
        pred = _parse_literal(pred)
    if not isinstance(pred, dict) or len(pred) != len(gold):
        return False
    pred_by_key = {options.text(k): v for k, v in pred.items()}
    gold_by_key = {options.text(k): v for k, v in gold.items()}
    if pred_by_key.keys() != gold_by_key.keys():
        return False
    return all(_match(pred_by_key[k], g, options) for k, g in gold_by_key.items())


def _structured_match(pred: Any, gold: Any, options: _MatchOptions) -> int:
    """The prediction's text is parsed here, once: where a list or dict is due, text that is no literal scores 0;
    inside a parsed structure a string is a value (a list of one where a list is due)."""
    if isinstance(pred, str) and isinstance(gold, str):
        parsed = _parse_literal(pred)
        if isinstance(parsed, str):  # a quoted string literal: compare its content
            pred = parsed
    elif isinstance(pred, str) and isinstance(gold, list | tuple | set | frozenset | dict):
        pred = _parse_literal(pred)
        if pred is _UNPARSED:
            return 0
    try:
        return int(_match(pred, gold, options))
    except RecursionError:
        return 0


def eval_structured_object_exact_match(
    pred: Any,
    gold: Any,
    ignore_order: bool = False,
    lowercase: bool = False,
    ignore_blank: bool = False,
    ndigits: int | None = None,
    tolerance: float = 1e-6,
    threshold: float = -1,
    fuzz_method: str = "ratio",
) -> int:
    """The prediction parsed as a Python literal, matched recursively against the gold object.

    Lists: same length, element-wise (any pairing with ``ignore_order``). Dicts: same keys (normalised like
    strings), values matched. Ints, floats, bools and strings use the scalar matchers; strings are fuzzy when
    ``threshold > 0``.
    """
    func = "eval_structured_object_exact_match"
    _check_float_options(ndigits, tolerance, func)
    _check_fuzzy_options(fuzz_method, threshold, func)
    options = _MatchOptions(ignore_order, lowercase, ignore_blank, ndigits, tolerance, threshold, fuzz_method)
    return _structured_match(pred, gold, options)


# ---------------------------------------------------------------------------------------------------------------
# Membership in a gold list

_SCALAR_ELEMENT_TYPES = ("str", "int", "float", "bool")


@dataclass(frozen=True)
class ElementOptions:
    """How one predicted element is compared with one gold element: the keyword options AirQA's three element
    evaluators share (any ``element_type`` other than str/int/float/bool is structured)."""

    element_type: str = "str"
    ndigits: int | None = 2
    tolerance: float = 1e-6
    fuzz_method: str = "ratio"
    threshold: float = -1
    lowercase: bool = False
    ignore_blank: bool = False

    def matcher(self, func: str) -> Callable[[Any, Any], bool]:
        _check_float_options(self.ndigits, self.tolerance, func)
        _check_fuzzy_options(self.fuzz_method, self.threshold, func)
        options = _MatchOptions(
            False, self.lowercase, self.ignore_blank, self.ndigits, self.tolerance, self.threshold, self.fuzz_method
        )
        if self.element_type == "str":
            return lambda p, g: _match(p, str(g), options)
        if self.element_type == "int":
            return lambda p, g: _to_int(p) is not None and _to_int(p) == _to_int(g)
        if self.element_type == "float":
            return lambda p, g: (
                _to_float(p) is not None
                and _to_float(g) is not None
                and _floats_close(_to_float(p), _to_float(g), self.ndigits, self.tolerance)
            )
        if self.element_type == "bool":
            return lambda p, g: _to_bool(p) is not None and _to_bool(p) is _to_bool(g)
        return lambda p, g: bool(_structured_match(p, g, options))


_ELEMENT_OPTIONS = tuple(
    inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default)
    for f in fields(ElementOptions)
)


def _element_evaluator(check: Callable[..., int]) -> EvalFunction:
    """Registers an element evaluator written as ``check(pred, gold_items, matches, *own)``: the registered
    function has AirQA's signature (``pred, gold``, its own parameters, then the :class:`ElementOptions` keywords),
    checks the gold list and builds ``matches`` from the options."""
    own = list(inspect.signature(check).parameters.values())[3:]
    signature = inspect.Signature(
        [
            inspect.Parameter("pred", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Any),
            inspect.Parameter("gold", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Any),
            *own,
            *_ELEMENT_OPTIONS,
        ],
        return_annotation=int,
    )

    @functools.wraps(check)
    def evaluator(*args: Any, **kwargs: Any) -> int:
        return _evaluate_elements(check, signature, args, kwargs)

    evaluator.__signature__ = signature  # type: ignore[attr-defined]
    return _register(evaluator)


def _evaluate_elements(check: Callable[..., int], signature: inspect.Signature, args: tuple, kwargs: dict) -> int:
    """One call of an element evaluator: bind AirQA's keywords, check the gold list, build the matcher. Kept out of
    the wrapper, whose ``functools.wraps`` decoration would keep mutation testing away from it."""
    name = check.__name__
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise EvaluationError(f"{name}: {exc}") from None
    bound.apply_defaults()
    values = dict(bound.arguments)
    gold_items = _gold_list(values.pop("gold"), name)
    options = ElementOptions(**{p.name: values.pop(p.name) for p in _ELEMENT_OPTIONS})
    return check(values.pop("pred"), gold_items, options.matcher(name), *values.values())


def _gold_list(gold: Any, func: str) -> list:
    if not isinstance(gold, list | tuple):
        raise EvaluationError(f"{func}: gold must be a list, got {type(gold).__name__}")
    return list(gold)


# The three element evaluators are written as checks; the registry at the end wraps each in _element_evaluator.


def eval_element_included(pred: Any, gold_items: list, matches: Callable[[Any, Any], bool]) -> int:
    """The prediction matches at least one element of the gold list."""
    return int(any(matches(pred, g) for g in gold_items))


def eval_element_list_included(pred: Any, gold_items: list, matches: Callable[[Any, Any], bool]) -> int:
    """Every predicted element is in the gold list; an empty (or unparseable) prediction scores 0."""
    pred_items = _as_list(pred)
    if not pred_items:
        return 0
    return int(all(any(matches(p, g) for g in gold_items) for p in pred_items))


def eval_element_list_overlap(pred: Any, gold_items: list, matches: Callable[[Any, Any], bool], count: int = 1) -> int:
    """At least ``count`` distinct gold elements are matched, each by a different predicted element."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise EvaluationError(f"eval_element_list_overlap: count must be a positive int, got {count!r}")
    pred_items = _as_list(pred)
    if not pred_items:
        return 0
    overlap = _max_matching(len(pred_items), len(gold_items), lambda i, j: matches(pred_items[i], gold_items[j]))
    return int(overlap >= count)


def eval_paper_relevance_with_reference_answer(
    pred: Any, reference_answer: Any, question: str | None = None, threshold: float = 95
) -> int:
    """The predicted title matches the reference title (or any of a list) by case-insensitive fuzzy ratio.
    ``question`` is taken, as every AirQA retrieval line passes it, and not used."""
    references = [reference_answer] if isinstance(reference_answer, str) else reference_answer
    if not isinstance(references, list | tuple) or not references:
        raise EvaluationError(
            "eval_paper_relevance_with_reference_answer: reference_answer must be a title or a list of titles"
        )
    _check_fuzzy_options("ratio", threshold, "eval_paper_relevance_with_reference_answer")
    return int(any(_fuzzy_score(pred, title, "ratio", True, False) >= threshold for title in references))


# ---------------------------------------------------------------------------------------------------------------
# Logical combinations (sub-evaluators are resolved by name through the registry)


def _sub_evaluations(eval_func_list: Any, eval_kwargs_list: Any, func: str) -> list[tuple[str, dict]]:
    if not isinstance(eval_func_list, list | tuple) or not eval_func_list:
        raise EvaluationError(f"{func}: eval_func_list must be a non-empty list of eval_func names")
    if not isinstance(eval_kwargs_list, list | tuple) or len(eval_kwargs_list) != len(eval_func_list):
        raise EvaluationError(f"{func}: eval_kwargs_list must be a list with one entry per eval_func_list entry")
    for name in eval_func_list:
        get_eval_function(name)
    return list(zip(eval_func_list, eval_kwargs_list))


def _parts(pred: Any, count: int) -> tuple[list | None, bool]:
    """A combination's parts and whether they are in order: a set literal has none, so its parts may stand for
    the sub-evaluations in any order (the authors' ``list(set)`` followed hash order)."""
    if isinstance(pred, str):
        parsed = _parse_literal(pred)
        pred = parsed if isinstance(parsed, set | frozenset) else pred
    ordered = not isinstance(pred, set | frozenset)
    parts = _as_list(pred)
    return (parts if parts is not None and len(parts) == count else None), ordered


def eval_conjunction(
    pred: Any, eval_func_list: list[str], eval_kwargs_list: list[dict], llm: Judge | None = None
) -> int:
    """The prediction is a list with one element per sub-evaluation, and every one passes."""
    subs = _sub_evaluations(eval_func_list, eval_kwargs_list, "eval_conjunction")
    parts, ordered = _parts(pred, len(subs))
    if parts is None:
        return 0
    if ordered:
        return int(all(run_evaluator(name, part, kwargs, llm) for part, (name, kwargs) in zip(parts, subs)))

    def passes(part: int, sub: int) -> bool:
        return bool(run_evaluator(subs[sub][0], parts[part], subs[sub][1], llm))

    return int(_max_matching(len(parts), len(subs), passes) == len(subs))


def eval_disjunction(
    pred: Any, eval_func_list: list[str], eval_kwargs_list: list[dict], llm: Judge | None = None
) -> int:
    """The prediction is a list with one element per sub-evaluation, and at least one passes."""
    subs = _sub_evaluations(eval_func_list, eval_kwargs_list, "eval_disjunction")
    parts, ordered = _parts(pred, len(subs))
    if parts is None:
        return 0
    pairs = zip(parts, subs) if ordered else ((part, sub) for part in parts for sub in subs)
    return int(any(run_evaluator(name, part, kwargs, llm) for part, (name, kwargs) in pairs))


def eval_negation(pred: Any, eval_func: str, eval_kwargs: dict, llm: Judge | None = None) -> int:
    return 1 - run_evaluator(eval_func, pred, eval_kwargs, llm)


# ---------------------------------------------------------------------------------------------------------------
# LLM-judged

_JUDGE_SYSTEM = (
    "You grade answers to questions about research papers. Compare the predicted answer with the gold material "
    "given, judge meaning rather than wording or formatting, reason briefly, and finish with your verdict, "
    "exactly True or False, alone in a fenced block:\n```\nTrue\n```"
)
_FENCED = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)
_VERDICT_WORD = re.compile(r"\b(true|false)\b", re.IGNORECASE)


def parse_judgement(text: str) -> bool | None:
    """The verdict in the last fenced block, else the last true/false word; None if there is none."""
    blocks = _FENCED.findall(text or "")
    if blocks:
        word = re.sub(r"[^a-z]", "", blocks[-1].lower())
        if word in ("true", "false"):
            return word == "true"
    words = _VERDICT_WORD.findall(text or "")
    return words[-1].lower() == "true" if words else None


def _judge_reply(llm: Judge | None, func: str, messages: list[dict]) -> str:
    """The judge's text; no judge, or a judge that fails (unreachable, refused), raises :class:`JudgeUnavailable`."""
    if llm is None:
        raise JudgeUnavailable(
            f"{func} needs an LLM endpoint (set OPENAI_BASE_URL, OPENAI_API_KEY and a model, and pass a judge)"
        )
    try:
        reply = llm.complete(messages)
    except Exception as exc:  # whatever the client raises, the answer was not judged
        raise JudgeUnavailable(f"{func}: the judge failed: {type(exc).__name__}: {exc}") from exc
    return reply if isinstance(reply, str) else getattr(reply, "text", "")  # ChatClient returns an LLMResponse


def _ask_judge(
    llm: Judge | None, func: str, question: str, sections: list[tuple[str, str]], pred: Any, rule: str
) -> int:
    body = [f"[Question]\n{question}"]
    body += [f"[{title}]\n{content}" for title, content in sections]
    body += [f"[Predicted answer]\n{pred}", f"[Rule]\n{rule}\nThink step by step, then give the verdict."]
    messages = [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": "\n\n".join(body)}]
    return int(parse_judgement(_judge_reply(llm, func, messages)) is True)


def _bullets(items: Any, func: str, name: str) -> tuple[list[str], str]:
    values = [items] if isinstance(items, str) else items
    if not isinstance(values, list | tuple) or not values or not all(isinstance(v, str) for v in values):
        raise EvaluationError(f"{func}: {name} must be a non-empty list of strings")
    return list(values), "\n".join(f"{i}. {v.strip()}" for i, v in enumerate(values, 1))


# llm_model and temperature appear in AirQA eval_kwargs; the judge we are given decides both, so they are accepted
# and ignored.


def eval_reference_answer_with_llm(
    pred: Any,
    reference_answer: str,
    question: str,
    llm: Judge | None = None,
    llm_model: str | None = None,
    temperature: float | None = None,
) -> int:
    return _ask_judge(
        llm,
        "eval_reference_answer_with_llm",
        question,
        [("Reference answer", str(reference_answer))],
        pred,
        "True if and only if the predicted answer means the same as the reference answer for this question.",
    )


def eval_candidate_reference_answer_with_llm(
    pred: Any,
    candidate_reference_answers: list[str],
    question: str,
    llm: Judge | None = None,
    llm_model: str | None = None,
    temperature: float | None = None,
) -> int:
    func = "eval_candidate_reference_answer_with_llm"
    candidates, listing = _bullets(candidate_reference_answers, func, "candidate_reference_answers")
    return _ask_judge(
        llm,
        func,
        question,
        [(f"Candidate reference answers ({len(candidates)})", listing)],
        pred,
        "True if and only if the predicted answer means the same as at least one candidate reference answer.",
    )


def eval_scoring_points_with_llm(
    pred: Any,
    scoring_points: list[str],
    question: str,
    ignore_order: bool = True,
    llm: Judge | None = None,
    llm_model: str | None = None,
    temperature: float | None = None,
) -> int:
    func = "eval_scoring_points_with_llm"
    points, listing = _bullets(scoring_points, func, "scoring_points")
    order = "The order of the points does not matter." if ignore_order else "The points must appear in this order."
    return _ask_judge(
        llm,
        func,
        question,
        [(f"Scoring points ({len(points)})", listing)],
        pred,
        f"True if and only if the predicted answer states every scoring point. {order}",
    )


def eval_partial_scoring_points_with_llm(
    pred: Any,
    scoring_points: list[str],
    question: str,
    count: int = 1,
    llm: Judge | None = None,
    llm_model: str | None = None,
    temperature: float | None = None,
) -> int:
    func = "eval_partial_scoring_points_with_llm"
    points, listing = _bullets(scoring_points, func, "scoring_points")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= len(points):
        raise EvaluationError(f"{func}: count must be an int between 1 and {len(points)}, got {count!r}")
    return _ask_judge(
        llm,
        func,
        question,
        [(f"Scoring points ({len(points)})", listing)],
        pred,
        f"True if and only if the predicted answer correctly states at least {count} of the scoring points.",
    )


def eval_reference_answer_and_scoring_points_with_llm(
    pred: Any,
    reference_answer: str,
    scoring_points: list[str],
    question: str,
    ignore_order: bool = True,
    llm: Judge | None = None,
    llm_model: str | None = None,
    temperature: float | None = None,
) -> int:
    func = "eval_reference_answer_and_scoring_points_with_llm"
    points, listing = _bullets(scoring_points, func, "scoring_points")
    order = "The order of the points does not matter." if ignore_order else "The points must appear in this order."
    return _ask_judge(
        llm,
        func,
        question,
        [("Reference answer", str(reference_answer)), (f"Scoring points ({len(points)})", listing)],
        pred,
        "True if and only if the predicted answer agrees with the reference answer and states every scoring "
        f"point. {order}",
    )


def eval_complex_math_formula_with_llm(
    pred: Any,
    formulas: str | list[str],
    question: str,
    ignore_order: bool = True,
    llm: Judge | None = None,
    llm_model: str | None = None,
    temperature: float | None = None,
) -> int:
    func = "eval_complex_math_formula_with_llm"
    items, listing = _bullets(formulas, func, "formulas")
    order = (
        ""
        if len(items) == 1
        else (" The formulas may come in any order." if ignore_order else " The formulas must come in this order.")
    )
    return _ask_judge(
        llm,
        func,
        question,
        [("Gold formula(s) in LaTeX", listing)],
        pred,
        "True if and only if the predicted LaTeX is mathematically equivalent to the gold formula(s): renamed "
        f"bound variables, reordered terms and equivalent notation are fine, a different expression is not.{order}",
    )


# ---------------------------------------------------------------------------------------------------------------
# The judges of the other two datasets NeuSym-RAG reports on. Their scores are graded, as the authors' are:
# M3SciQA's is 0, 0.5 or 1; SciDQA's is a quality mark from 1 to 10 (a report averages it like any score).

_M3SCIQA_SYSTEM = "You are an expert reader of scientific papers who grades answers to questions about them."
_SELECTION = re.compile(r"\{[^{}]*\}")


def parse_selection(text: str) -> float | None:
    """M3SciQA's verdict: the first ``{"selection": ...}`` object whose value is a number from 0 to 1."""
    for candidate in _SELECTION.findall(text or ""):
        try:
            value = float(json.loads(candidate)["selection"])
        except (ValueError, KeyError, TypeError):
            continue
        if 0.0 <= value <= 1.0:
            return value
    return None


def eval_m3sciqa(
    pred: Any,
    question: str,
    reference_answer: str,
    llm: Judge | None = None,
    model: str | None = None,
    temperature: float | None = None,
) -> float:
    """M3SciQA: 1 when the answer means the same as the reference, 0.5 when it is partly right, else 0 (a reply
    without a readable selection scores 0, as in the authors' evaluator)."""
    prompt = (
        "Decide whether the candidate answer means the same as the reference answer, for this question.\n\n"
        f"<QUESTION>\n{question}\n</QUESTION>\n\n<REFERENCE>\n{reference_answer}\n</REFERENCE>\n\n"
        f"<CANDIDATE>\n{pred}\n</CANDIDATE>\n\n"
        'Reply with exactly one JSON object: {"selection": "1"} if they mean the same, {"selection": "0.5"} if the '
        'candidate is partly correct, {"selection": "0"} if it is wrong or unrelated. Nothing else.'
    )
    messages = [{"role": "system", "content": _M3SCIQA_SYSTEM}, {"role": "user", "content": prompt}]
    return parse_selection(_judge_reply(llm, "eval_m3sciqa", messages)) or 0.0


SCIDQA_DIMENSIONS = ("Relevance", "Accuracy", "Completeness", "Conciseness")
_OVERALL = re.compile(r"overall\s+quality\s+score\s*[:=]?\s*\**\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


def parse_quality(text: str) -> float | None:
    """SciDQA's mark: the stated overall quality score, else the mean of the four dimension scores, from 1 to 10."""
    text = text or ""
    overall = _OVERALL.findall(text)
    if overall:
        value = float(overall[-1])
        return round(value, 2) if 1.0 <= value <= 10.0 else None
    marks = []
    for name in SCIDQA_DIMENSIONS:
        found = re.findall(rf"{name}\s*\**\s*[:=]\s*\**\s*(\d+(?:\.\d+)?)", text, re.IGNORECASE)
        if not found or not 1.0 <= float(found[-1]) <= 10.0:
            return None
        marks.append(float(found[-1]))
    return round(sum(marks) / len(marks), 2)


def eval_scidqa(
    pred: Any,
    reference_answer: str = "",
    question: str = "",
    llm: Judge | None = None,
    model: str | None = None,
    temperature: float | None = None,
) -> float:
    """SciDQA: the judge marks relevance, accuracy, completeness and conciseness from 1 to 10 against the gold
    answer (its leading ``A:`` removed); the score is their overall mean, and 0 when the reply has no mark."""
    gold = str(reference_answer).strip()
    gold = gold[2:].strip() if gold.startswith("A:") else gold
    dimensions = "\n".join(
        f"{i}. {name}: [score] - [why not higher, why not lower]" for i, name in enumerate(SCIDQA_DIMENSIONS, 1)
    )
    prompt = (
        "You evaluate a model's answer to a long-form question against the gold answer. Mark it from 1 (poor) to "
        "10 (excellent) on relevance (does it address the question), accuracy (is it correct and in line with the "
        "gold answer), completeness (does it cover what the gold answer covers) and conciseness (no needless "
        "detail), then give the mean of the four marks.\n\n"
        f"Question: {question}\n\nModel-generated answer: {pred}\n\nGold answer: {gold}\n\n"
        f"Answer in this form:\n\nEvaluation:\n{dimensions}\n\nOverall Quality Score: [mean of the four marks]"
    )
    return parse_quality(_judge_reply(llm, "eval_scidqa", [{"role": "user", "content": prompt}])) or 0.0


# ---------------------------------------------------------------------------------------------------------------
# The registry, written out after the functions rather than as decorators: mutmut, which holds this module to a
# mutation score (docs/testing.md), leaves decorated functions unmutated.

for _function in (
    eval_bool_exact_match,
    eval_int_exact_match,
    eval_float_exact_match,
    eval_string_exact_match,
    eval_string_fuzzy_match,
    eval_structured_object_exact_match,
    eval_paper_relevance_with_reference_answer,
    eval_conjunction,
    eval_disjunction,
    eval_negation,
):
    _register(_function)
for _function in (
    eval_reference_answer_with_llm,
    eval_candidate_reference_answer_with_llm,
    eval_scoring_points_with_llm,
    eval_partial_scoring_points_with_llm,
    eval_reference_answer_and_scoring_points_with_llm,
    eval_complex_math_formula_with_llm,
    eval_m3sciqa,
    eval_scidqa,
):
    _register_judged(_function)
eval_element_included = _element_evaluator(eval_element_included)
eval_element_list_included = _element_evaluator(eval_element_list_included)
eval_element_list_overlap = _element_evaluator(eval_element_list_overlap)
