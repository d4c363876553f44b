"""RECAP (``--method recap``): one call that Restates, Extracts, Computes, Answers and Presents the computation as
an expression; the calculator evaluates the expression, and a rule picks its value for numeric answer formats and
the model's answer otherwise. HD-RAG (:mod:`agent.hdrag`) answers with the same call over its reranked lines."""

from __future__ import annotations

import re
from typing import Any

from agent.answering import FENCE, Method, context_evidence, extract_answer, finish, retrieve_or_empty, single_call
from agent.env import AgentEnv
from agent.loop import AgentResult, LoopConfig, Turn
from agent.prompt import SYSTEM_ROLE, task_prompt
from agent.retrieval import ContextItem, context_text
from agent.task import Task
from paperlake.runtime.llm import ChatClient, LLMError, Usage
from paperlake.runtime.safe_eval import SafeEvalError, safe_eval

_NUMERIC_FORMAT = re.compile(r"\b(float|integer|int|number|numeric|decimal|percentage|percent|ratio)\b", re.I)
_DECIMALS = re.compile(r"(\d+)\s+decimal", re.I)

_RECAP_INSTRUCTIONS = """Answer in five labelled parts:
[Restate]: the question in your own words, naming the quantities involved.
[Extract]: each value you need from the context, with where it comes from (paper, table/figure, row, column).
[Compute]: the computation in words and numbers.
[Answer]: the final answer, following the answer format.
[Present]: the computation as one arithmetic expression over the extracted numbers (e.g. (71.2 - 68.5) / 68.5 * 100), \
or NONE if no computation is needed."""
_RECAP_PART = re.compile(r"\[\s*(restate|extract|compute|answer|present)\s*\]\s*:?", re.I)


def recap_parts(response: str) -> dict[str, str]:
    parts: dict[str, str] = {}
    matches = list(_RECAP_PART.finditer(response))
    for position, match in enumerate(matches):
        end = matches[position + 1].start() if position + 1 < len(matches) else len(response)
        parts[match.group(1).lower()] = response[match.end() : end].strip()
    return parts


def numeric_format(answer_format: str) -> bool:
    return bool(_NUMERIC_FORMAT.search(answer_format or "")) and not re.search(r"\blist\b|\bdict", answer_format, re.I)


def choose_recap_answer(answer_format: str, llm_answer: str | None, expression: str | None) -> tuple[Any, str]:
    """The rule: for a numeric answer format, the calculator's value of the presented expression (rounded as the
    format asks) wins when it evaluates; otherwise, and whenever it fails, the model's own answer stands."""
    if not numeric_format(answer_format) or not expression or expression.strip().upper().startswith("NONE"):
        return llm_answer, "llm"
    text = FENCE.sub(lambda m: m.group(1), expression).strip().strip("`").strip()
    text = text.splitlines()[0] if text else text
    text = text.split("=")[0].strip() if "=" in text and "==" not in text else text
    try:
        value = safe_eval(text.replace("×", "*").replace("÷", "/").replace("−", "-"))
    except (SafeEvalError, ArithmeticError, ValueError, RecursionError):
        return llm_answer, "llm"
    if isinstance(value, bool):
        return llm_answer, "llm"
    if re.search(r"\b(integer|int)\b", answer_format, re.I):
        return int(round(value)), "calculator"
    decimals = _DECIMALS.search(answer_format)
    if decimals:
        return round(float(value), int(decimals.group(1))), "calculator"
    return value, "calculator"


def recap_method(spec: Method, task: Task, env: AgentEnv, llm: ChatClient, config: LoopConfig, k: int) -> AgentResult:
    items, unavailable = retrieve_or_empty(spec, env, task, k)
    usage = Usage()
    trajectory = [
        Turn(
            0,
            "",
            action_type="first_retrieval:recap",
            observation=context_text(env, items),
            evidence=context_evidence(items, spec.name),
            seeded=True,
        )
    ]
    return recap_answer(spec, task, env, llm, config, items, usage, trajectory, unavailable)


def recap_answer(
    spec: Method,
    task: Task,
    env: AgentEnv,
    llm: ChatClient,
    config: LoopConfig,
    items: list[ContextItem],
    usage: Usage,
    trajectory: list[Turn],
    unavailable: str | None,
) -> AgentResult:
    prompt = (
        f"{task_prompt(task, env, show_ids=False)}\n[Context]:\n{context_text(env, items)}\n\n{_RECAP_INSTRUCTIONS}"
    )
    messages = [{"role": "system", "content": SYSTEM_ROLE}, {"role": "user", "content": prompt}]
    try:
        response = single_call(llm, messages, config, usage)
    except LLMError as problem:
        return finish(spec, task, env, trajectory, usage, None, config, str(problem), "llm_error")
    parts = recap_parts(response)
    llm_answer = extract_answer(parts["answer"]) if parts.get("answer") else extract_answer(response)
    answer, chosen = choose_recap_answer(task.answer_format, llm_answer, parts.get("present"))
    trajectory.append(
        Turn(
            len(trajectory),
            response,
            action_type="recap",
            parameters={"parts": parts, "chosen": chosen},
            observation=f"answer chosen from the {chosen}: {answer!r}",
        )
    )
    return finish(spec, task, env, trajectory, usage, answer, config, unavailable)
