"""The formula graph's three LLM hooks, over any OpenAI-compatible endpoint (:class:`paperlake.runtime.llm.ChatClient`).

- :meth:`FormulaAssistant.describe_parameters` (a :data:`~paperlake.formulas.params.ParameterDescriber`):
  what each symbol means, for the symbols the "where x is …" text did not describe;
- :meth:`FormulaAssistant.same_formula` (a :data:`~paperlake.formulas.graph.Judge`): "same or different formula"
  for pairs in the embedding gray zone;
- :meth:`FormulaAssistant.propose_template` (a :data:`~paperlake.formulas.extract.TemplateProposer`): a Python
  expression for LaTeX the rules reject; the caller keeps it only if it passes the AST whitelist and the
  parameter check (:func:`~paperlake.formulas.template.check_proposed_template`).

Every answer is a JSON object; an answer that is not is recorded in ``errors`` and counts as "no description",
"different" and "no template" respectively, so a bad model can only leave the graph as it would be without one.
Requests run at temperature 0 through the client's response cache, so a rebuild replays instead of paying twice.
Without an endpoint :func:`formula_assistant` returns None and nothing here is called.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from paperlake.config import Settings
from paperlake.runtime.llm import ChatClient, LLMError

if TYPE_CHECKING:
    from paperlake.formulas.model import Formula

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_MAX_CONTEXT = 1500
_DESCRIBE = (
    "You explain the symbols of a formula from a research paper. Formula (LaTeX): {latex}\n"
    "Text around it: {context}\n"
    "Return only a JSON object mapping each symbol of the formula (as written in the LaTeX) to a short description "
    "of what it denotes, using the text. Leave out symbols the text does not let you describe."
)
_JUDGE = (
    "Do these two formulas from different papers state the same mathematical formula (the same quantity computed "
    "the same way, possibly with other symbol names)?\n"
    "Formula A: {a_latex}\nA's description: {a_description}\n"
    "Formula B: {b_latex}\nB's description: {b_description}\n"
    'Return only a JSON object {{"same": true}} or {{"same": false}}, with a "reason".'
)
_PROPOSE = (
    "Write a Python expression that computes this formula from a research paper. Formula (LaTeX): {latex}\n"
    "Text around it: {context}\n"
    "Allowed: numbers, + - * / ** %, parentheses, comparisons and the functions sqrt exp log log2 log10 sin cos "
    "tan tanh abs min max floor ceil, and the constants pi and e; no other calls, no attributes, no indexing.\n"
    'Return only a JSON object {{"output": <the name the formula defines>, "expression": <the expression>, '
    '"parameters": [<every name the expression uses, spelled as the LaTeX symbols with subscripts joined by an '
    "underscore, e.g. d_k for d_{{k}}>]}}."
)


class MalformedAnswer(ValueError):
    """No usable answer: not the JSON object the prompt asked for, or the endpoint failed."""


def json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer (bare, or in a ``json`` fence); :class:`MalformedAnswer` otherwise."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise MalformedAnswer(f"no JSON object in the answer {text[:80]!r}")
    try:
        value = json.loads(body[start : end + 1])
    except json.JSONDecodeError as error:
        raise MalformedAnswer(f"unreadable JSON ({error.msg}) in the answer {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise MalformedAnswer("the answer is not a JSON object")
    return value


class FormulaAssistant:
    """The three hooks over one :class:`ChatClient`; ``errors`` and ``counts`` say what happened."""

    def __init__(self, client: ChatClient):
        self.client = client
        self.errors: list[str] = []
        self.counts: Counter[str] = Counter()

    def _ask(self, prompt: str, task: str) -> dict[str, Any]:
        self.counts[f"{task}_calls"] += 1
        try:
            answer = self.client.complete([{"role": "user", "content": prompt}], temperature=0.0, top_p=1.0)
        except LLMError as error:
            self.errors.append(f"{task}: {error}")
            raise MalformedAnswer(f"the endpoint failed: {error}") from error
        try:
            return json_object(answer.text)
        except MalformedAnswer as error:
            self.counts[f"{task}_malformed"] += 1
            self.errors.append(f"{task}: {error}")
            raise

    def describe_parameters(self, formula_latex: str, context: str) -> dict[str, str]:
        try:
            answer = self._ask(_DESCRIBE.format(latex=formula_latex, context=context[:_MAX_CONTEXT]), "describe")
        except MalformedAnswer:
            return {}
        described = {
            str(symbol): str(text).strip() for symbol, text in answer.items() if isinstance(text, str) and text.strip()
        }
        self.counts["describe_symbols"] += len(described)
        return described

    def same_formula(self, new: Formula, existing: Formula) -> bool:
        from paperlake.formulas.canonical import composite_description  # deferred: sympy

        prompt = _JUDGE.format(
            a_latex=existing.normalised_latex,
            a_description=composite_description(existing),
            b_latex=new.normalised_latex,
            b_description=composite_description(new),
        )
        try:
            verdict = self._ask(prompt, "judge").get("same")
        except MalformedAnswer:
            return False
        if not isinstance(verdict, bool):
            self.counts["judge_malformed"] += 1
            self.errors.append(f"judge: 'same' is {verdict!r}, not true or false")
            return False
        self.counts["judge_same" if verdict else "judge_different"] += 1
        return verdict

    def propose_template(self, latex: str, context: str, reason: str) -> dict[str, Any]:
        answer = self._ask(_PROPOSE.format(latex=latex, context=context[:_MAX_CONTEXT]), "template")
        parameters = answer.get("parameters")
        if not isinstance(parameters, list):
            self.counts["template_malformed"] += 1
            raise MalformedAnswer("'parameters' is not a list")
        return {"output": answer.get("output"), "expression": answer.get("expression"), "parameters": parameters}

    def metadata(self) -> dict[str, Any]:
        """For the asset's materialisation: calls by task, malformed answers, tokens and cost."""
        usage = self.client.usage
        return {
            "llm_model": self.client.model,
            **{f"llm_{key}": value for key, value in sorted(self.counts.items())},
            "llm_cached_calls": usage.cached_calls,
            "llm_tokens": usage.total_tokens,
            "llm_cost_usd": round(usage.cost_usd, 6),
            "llm_errors": len(self.errors),
        }


def formula_assistant(settings: Settings) -> FormulaAssistant | None:
    """The assistant over the configured endpoint, or None when no endpoint is configured."""
    if not settings.llm_configured:
        return None
    return FormulaAssistant(ChatClient.from_settings(settings))


__all__ = ["FormulaAssistant", "MalformedAnswer", "formula_assistant", "json_object"]
