"""What every method is, and what the methods that ask the model without the ReAct loop share: one call with its
usage counted, the final answer read from the response, the first retrieval's items as evidence, and the result
with its citations."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from agent.actions import Action
from agent.backends import BackendUnavailable
from agent.env import AgentEnv
from agent.evidence import Evidence
from agent.loop import AgentResult, LoopConfig, Turn, cite
from agent.retrieval import ContextItem
from agent.task import Task
from paperlake.runtime.llm import ChatClient, Usage


@dataclass(frozen=True)
class Method:
    name: str
    kind: str  # single | two_stage | iterative | recap
    retrieve: Callable[[AgentEnv, Task, int], list[ContextItem]]
    actions: tuple[type[Action], ...] = ()
    stage_one: tuple[type[Action], ...] = ()
    description: str = ""


ANSWER_INSTRUCTIONS = (
    "Think step by step, then give only the final answer, following the answer format, in a fenced block:\n"
    "```txt\n<final answer>\n```"
)
FENCE = re.compile(r"```[ \t]*[A-Za-z]*[^\n]*\n(.*?)```", re.DOTALL)


def extract_answer(response: str) -> str | None:
    """The last fenced block, else the text after an ``[Answer]:`` marker, else the whole response."""
    blocks = FENCE.findall(response)
    if blocks:
        return blocks[-1].strip() or None
    marker = re.split(r"\[\s*answer\s*\]\s*:?", response, flags=re.I)
    if len(marker) > 1:
        return marker[-1].strip().splitlines()[0].strip() if marker[-1].strip() else None
    return response.strip() or None


def single_call(llm: ChatClient, messages: list[dict[str, Any]], config: LoopConfig, usage: Usage) -> str:
    reply = llm.complete(messages, max_tokens=config.max_completion_tokens)
    usage.add(reply.usage)
    return reply.text


def context_evidence(items: Sequence[ContextItem], source: str) -> list[Evidence]:
    return [item.evidence(source) for item in items]


def retrieve_or_empty(spec: Method, env: AgentEnv, task: Task, k: int) -> tuple[list[ContextItem], str | None]:
    try:
        return spec.retrieve(env, task, k), None
    except BackendUnavailable as problem:
        return [], str(problem)


def finish(
    spec: Method,
    task: Task,
    env: AgentEnv,
    trajectory: list[Turn],
    usage: Usage,
    answer: Any,
    config: LoopConfig,
    failure: str | None = None,
    status: str | None = None,
) -> AgentResult:
    status = status or ("answered" if answer is not None else "no_answer")
    citations = cite(env, trajectory, answer, config.max_citations) if status == "answered" else []
    return AgentResult(task.question, spec.name, status, answer, citations, trajectory, usage, failure, task.uuid)
