"""The ReAct loop: think, act, observe, until the model answers or the turns or tokens run out.

The prompt is the system part and the task, then a sliding window of the latest turns (shrunk further when it would
exceed the per-call prompt budget; only the most recent images are re-sent). Each call may produce at most
``max_completion_tokens``; the run stops with ``budget_exhausted`` once ``token_budget`` tokens are spent. Running
out of turns is reported as such (``turns_exhausted``, no answer): the last observation is never passed off as an
answer. An answer carries citations chosen from the evidence the turns showed (see :mod:`agent.evidence`).

Only the LLM endpoint failing (:class:`~paperlake.runtime.llm.LLMError`) ends a run early: whatever the model writes, an
action that cannot be read or fails while running costs it a turn and comes back as an error observation. A
response is kept in the history cut to ``MAX_RESPONSE_CHARS`` (a longer one is refused as an action anyway).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from agent.actions import Action, Observation, bounded, describe, error, run_action
from agent.env import AgentEnv
from agent.evidence import Citation, Evidence, select_citations
from agent.formats import (
    MAX_RESPONSE_CHARS,
    ActionParseError,
    clip_text,
    count_tokens,
    jsonable,
    parse_action,
    strip_response,
)
from agent.prompt import system_prompt, task_prompt
from agent.task import Task
from paperlake.runtime.llm import ChatClient, LLMError, Usage, image_part

log = logging.getLogger(__name__)
IMAGE_TOKEN_ESTIMATE = 800


@dataclass
class LoopConfig:
    max_turns: int = 20
    history_window: int = 10
    max_prompt_tokens: int = 60_000
    max_completion_tokens: int = 1500
    token_budget: int | None = None
    image_turns: int = 2
    max_citations: int = 8


@dataclass
class Turn:
    index: int
    response: str
    thought: str = ""
    action_type: str | None = None
    action: str | None = None
    parameters: dict[str, Any] | None = None
    observation: str = ""
    ok: bool = True
    error_type: str | None = None
    images: int = 0
    evidence: list[Evidence] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    seeded: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["evidence"] = [asdict(e) for e in self.evidence]
        return data


@dataclass
class AgentResult:
    question: str
    method: str
    status: str  # answered | turns_exhausted | budget_exhausted | llm_error | no_answer | error
    answer: Any = None
    citations: list[Citation] = field(default_factory=list)
    trajectory: list[Turn] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    uuid: str | None = None
    # the whole conversation as chat messages, text only (images named, not embedded): what a fine-tuning set needs
    transcript: list[dict[str, Any]] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return self.status == "answered"

    def to_dict(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "question": self.question,
            "method": self.method,
            "status": self.status,
            "answer": self.answer,
            "citations": [c.to_dict() for c in self.citations],
            "error": self.error,
            "usage": self.usage.to_dict(),
            "trajectory": [t.to_dict() for t in self.trajectory],
        }

    def prediction(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "answer": self.answer}


def observation_message(env: AgentEnv, observation: Observation, with_images: bool = True) -> dict[str, Any]:
    text = "[Observation]:\n" + env.redact(observation.text)
    if not observation.images:
        return {"role": "user", "content": text}
    if not with_images:
        return {"role": "user", "content": text + "\n(the image is no longer shown; view it again if needed)"}

    return {"role": "user", "content": [{"type": "text", "text": text}, *(image_part(p) for p in observation.images)]}


def message_tokens(message: dict[str, Any]) -> int:
    content = message["content"]
    if isinstance(content, str):
        return count_tokens(content) + 4
    total = 4
    for part in content:
        total += count_tokens(part.get("text", "")) if part.get("type") == "text" else IMAGE_TOKEN_ESTIMATE
    return total


def cite(env: AgentEnv, trajectory: Sequence[Turn], answer: Any, limit: int) -> list[Citation]:
    citations = select_citations(
        [(t.index, t.evidence) for t in trajectory if t.ok],
        [(t.index, t.response) for t in trajectory if not t.seeded],
        answer,
        limit,
    )
    if env.warehouse is not None and citations:
        titles = env.titles(c.paper_id for c in citations if c.paper_id)
        for citation in citations:
            citation.title = titles.get(citation.paper_id or "")
    return citations


class ReActLoop:
    """One question, one environment, one model: ``run()`` returns an :class:`AgentResult`."""

    def __init__(
        self,
        task: Task,
        env: AgentEnv,
        llm: ChatClient,
        actions: Sequence[type[Action]],
        action_format: str = "markdown",
        config: LoopConfig | None = None,
        method: str = "neusym_rag",
        extra_instructions: str = "",
    ) -> None:
        self.task = task
        self.env = env
        self.llm = llm
        self.actions = {a.action_name(): a for a in actions}
        self.action_format = action_format
        self.config = config or LoopConfig()
        self.method = method
        self.system = system_prompt(env, list(actions), action_format)
        self.task_text = task_prompt(task, env) + (f"\n{extra_instructions}" if extra_instructions else "")
        self.pairs: list[tuple[dict[str, Any], dict[str, Any], Observation]] = []
        self.trajectory: list[Turn] = []
        self.usage = Usage()

    def seed(self, action: Action, observation: Observation, thought: str) -> None:
        """A turn the environment ran before the model's first (a method's deterministic first retrieval)."""
        rendered = action.render(self.action_format)
        response = f"[Thought]: {thought}\n[Action]:\n{rendered}"
        self._record(0, response, thought, action, rendered, observation, seeded=True)

    def _record(
        self,
        index: int,
        response: str,
        thought: str,
        action: Action | None,
        action_text: str | None,
        observation: Observation,
        usage: Usage | None = None,
        seeded: bool = False,
    ) -> Turn:
        observation = bounded(observation)
        response = clip_text(response, MAX_RESPONSE_CHARS)
        turn = Turn(
            index=index,
            response=response,
            thought=thought,
            action_type=action.action_name() if action else None,
            action=action_text,
            parameters=jsonable(action.arguments()) if action else None,
            observation=self.env.redact(observation.text),
            ok=observation.ok,
            error_type=observation.error_type,
            images=len(observation.images),
            evidence=list(observation.evidence),
            usage=usage.to_dict() if usage else {},
            seeded=seeded,
        )
        self.trajectory.append(turn)
        self.pairs.append(
            ({"role": "assistant", "content": response}, observation_message(self.env, observation), observation)
        )
        return turn

    def messages(self) -> list[dict[str, Any]]:
        head = [{"role": "system", "content": self.system}]
        pairs = self.pairs[-self.config.history_window :] if self.config.history_window else []
        image_pairs = [i for i, (_, _, obs) in enumerate(pairs) if obs.images][-self.config.image_turns :]

        def build(window: list[tuple[dict, dict, Observation]], offset: int) -> list[dict[str, Any]]:
            omitted = len(self.pairs) - len(window)
            note = f"\n[Note]: the first {omitted} turn(s) are omitted to save space." if omitted else ""
            body: list[dict[str, Any]] = [{"role": "user", "content": self.task_text + note}]
            for position, (assistant, observed, observation) in enumerate(window):
                keep_image = (position + offset) in image_pairs
                body.append(assistant)
                body.append(
                    observed
                    if keep_image or not observation.images
                    else observation_message(self.env, observation, with_images=False)
                )
            return head + body

        offset = 0
        messages = build(pairs, offset)
        while len(pairs) - offset > 1 and sum(map(message_tokens, messages)) > self.config.max_prompt_tokens:
            offset += 1
            messages = build(pairs[offset:], offset)
        return messages

    def run(self) -> AgentResult:
        names = list(self.actions)
        status, answer, failure = "turns_exhausted", None, None
        for index in range(1, self.config.max_turns + 1):
            budget = self.config.token_budget
            if budget is not None and self.usage.total_tokens >= budget:
                status, failure = "budget_exhausted", f"token budget of {budget} spent after {index - 1} turn(s)"
                break
            try:
                reply = self.llm.complete(self.messages(), max_tokens=self.config.max_completion_tokens)
            except LLMError as problem:
                status, failure = "llm_error", str(problem)
                break
            self.usage.add(reply.usage)
            response = strip_response(reply.text)
            action: Action | None = None
            action_text: str | None = None
            thought = ""
            hint = f"[Thought]: ... then [Action]: one of {', '.join(names)} in {self.action_format} format"
            try:
                parsed = parse_action(response, self.action_format, names)
                thought = parsed.thought
                action = self.actions[parsed.action_type].build(parsed)
                action_text = action.render(self.action_format)
            except ActionParseError as problem:
                action, observation = None, error("parse_error", str(problem), hint)
            except Exception as problem:  # a reader's bug costs the model a turn, not the run
                log.exception("could not read the model's action")
                action = None
                observation = error("parse_error", f"the action could not be read ({describe(problem)})", hint)
            else:
                observation = run_action(action, self.env)
            self._record(index, response, thought, action, action_text, observation, reply.usage)
            if observation.is_answer:
                status, answer = "answered", observation.answer
                break
        if status == "turns_exhausted":
            failure = self._why_no_answer()
        citations = cite(self.env, self.trajectory, answer, self.config.max_citations) if status == "answered" else []
        return AgentResult(
            question=self.task.question,
            method=self.method,
            status=status,
            answer=answer,
            citations=citations,
            trajectory=self.trajectory,
            usage=self.usage,
            error=failure,
            uuid=self.task.uuid,
            transcript=self.transcript(),
        )

    def _why_no_answer(self) -> str:
        """What a run that never answered spent its turns on, in a sentence a person can act on."""
        turns = [t for t in self.trajectory if not t.seeded]
        unread = [t for t in turns if t.error_type == "parse_error"]
        if turns and len(unread) == len(turns):
            last = " ".join(unread[-1].response.split())[:120]
            return (
                f"{len(unread)} replies could not be parsed as an action ({self.action_format} format); "
                f"the last began: {last!r}"
            )
        failed = [t for t in turns if not t.ok]
        note = f"; {len(unread)} could not be parsed, {len(failed) - len(unread)} failed" if failed else ""
        return f"no GenerateAnswer in {len(turns)} turns (--max-turns){note}"

    def transcript(self) -> list[dict[str, Any]]:
        """Every turn, none omitted, text only."""
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": self.task_text}]
        for assistant, _, observation in self.pairs:
            messages.append(assistant)
            messages.append(observation_message(self.env, observation, with_images=False))
        return messages
