"""ExTrActor (AirQA): questions and agent trajectories synthesised from one's own volume, with an LLM.

Three agents, as in the AirQA paper:

1. the **explorer** reads a context drawn from the warehouse views (a passage, a table's caption and row lines, a
   figure caption, a display equation with its surrounding text, or the titles and abstracts of two papers of the
   volume for a multi-paper question) and writes natural-language question–answer pairs the context answers;
2. the **tracker** rewrites each pair into a well-formed AirQA example: a self-contained question, an answer format,
   tags, and an evaluator built from our evaluation functions. The example is validated as a dataset row, and the
   explorer's own answer must pass its evaluator (an evaluator that rejects its gold is a broken example); one
   retry with the reason, then the pair is dropped with the reason counted;
3. the **actor** runs our agent on the example and keeps the interaction trajectory. An example whose evaluator
   accepts the actor's answer is ``verified``; the others are kept only when asked, marked ``unverified``.

Verified trajectories are exported as chat-format JSONL (``{"messages": [...]}``), the shape fine-tuning tools read:
the AirQA paper's purpose (4,000 such trajectories lifted a 7B model to an untrained 14B's level).

Contexts are drawn deterministically (seeded by the volume), so a re-run with the response cache costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid as uuid_lib
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from agent.env import AgentEnv
from agent.loop import AgentResult, LoopConfig
from agent.run import answer
from paperlake.evaluation.dataset import TAG_GROUPS, DatasetError, Example
from paperlake.evaluation.functions import run_evaluator
from paperlake.runtime.llm import ChatClient, LLMError

EXTRACTOR_VERSION = "extractor-1"
_NAMESPACE = uuid_lib.UUID("0b7d3f8e-8a61-4c1e-9d2f-5b3c8e7a1d44")
CONTEXT_KINDS = ("text", "table", "image", "formula", "multiple")
_CONTEXT_CHARS = 2400

EXPLORER_PROMPT = """[ExTrActor explorer]
You explore research papers to write evaluation questions. Below is a context taken from {where}.
Write up to {count} question-answer pairs that a researcher could ask and that this context answers exactly.
Rules: the answer is short (a number, a name, a short phrase, yes/no, or a short list) and stated in the context;
the question does not copy a sentence of the context; it is answerable by someone who can search the paper(s).
{extra}
Reply with a JSON list only: [{{"question": "...", "answer": ..., "reasoning": "where the context states it"}}]

Context ({kind}):
{context}"""

TRACKER_PROMPT = """[ExTrActor tracker]
Rewrite a question-answer pair into an AirQA evaluation example.
Paper(s): {papers}
Question: {question}
Answer: {answer}
Context kind: {kind}

Make the question self-contained (name the paper by its title when it is about one paper). Choose:
- "answer_format": one sentence telling the model how to format its answer (e.g. "a float with 2 decimal places");
- "tags": one question type of {types}, one element of {elements}, one evaluation of {evaluations};
- "evaluator": {{"eval_func": one of the functions below, "eval_kwargs": {{...}}}} that accepts the answer above.
Functions: {functions}
Examples: {{"eval_func": "eval_float_exact_match", "eval_kwargs": {{"gold": 74.1, "ndigits": 1}}}};
{{"eval_func": "eval_string_fuzzy_match", "eval_kwargs": {{"gold": "BERT-large", "lowercase": true, "threshold": 90}}}}.
{feedback}Reply with one JSON object only: {{"question": ..., "answer_format": ..., "tags": [...], \
"evaluator": {{...}}}}"""

_FUNCTION_HELP = (
    "eval_bool_exact_match(gold), eval_int_exact_match(gold), eval_float_exact_match(gold, ndigits, tolerance), "
    "eval_string_exact_match(gold, lowercase, ignore_blank), eval_string_fuzzy_match(gold, fuzz_method, threshold, "
    "lowercase), eval_structured_object_exact_match(gold, ignore_order, lowercase, ndigits), "
    "eval_element_included(gold_list), eval_element_list_included(gold_list), eval_element_list_overlap(gold_list, "
    "count), eval_reference_answer_with_llm(reference_answer, question), eval_scoring_points_with_llm("
    "scoring_points, question)"
)


@dataclass
class Context:
    kind: str
    paper_ids: list[str]
    titles: list[str]
    text: str
    page_number: int | None = None
    table_name: str | None = None
    row_id: str | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}|{'+'.join(self.paper_ids)}|{self.table_name}|{self.row_id}"


@dataclass
class SynthesisStats:
    contexts: int = 0
    pairs: int = 0
    tracked: int = 0
    verified: int = 0
    unverified: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Synthesis:
    examples: list[dict[str, Any]]  # AirQA rows (verified first; unverified ones only when kept)
    trajectories: list[dict[str, Any]]  # chat-format records of the verified examples
    stats: SynthesisStats
    usage: dict[str, Any]


# ---------------------------------------------------------------------------------------------------------------
# Contexts from the warehouse


def _rows(env: AgentEnv, sql: str, params: Sequence[Any]) -> list[tuple]:
    return [tuple(r) for r in env.query(sql, list(params), max_rows=100_000).rows]


def _order(seed: str, items: list[Any], key: Any) -> list[Any]:
    return sorted(items, key=lambda item: hashlib.sha256(f"{seed}|{key(item)}".encode()).hexdigest())


def draw_contexts(env: AgentEnv, volume: str, limit: int) -> list[Context]:
    """Up to ``limit`` contexts of the volume, cycling over the context kinds and the papers."""
    papers = _rows(
        env, "select paper_id::varchar, title, abstract from metadata where volume = ? order by paper_key", [volume]
    )
    if not papers:
        return []
    pools: dict[str, list[Context]] = {kind: [] for kind in CONTEXT_KINDS}
    for paper_id, title, _ in papers:
        for cid, text, page in _rows(
            env,
            "select chunk_id::varchar, text_content, page_number from chunks "
            "where ref_paper_id = ? and length(text_content) > 400",
            [paper_id],
        ):
            pools["text"].append(Context("text", [paper_id], [title], text[:_CONTEXT_CHARS], page, "chunks", cid))
        for tid, caption, page in _rows(
            env,
            "select table_id::varchar, table_caption, page_number from tables "
            "where ref_paper_id = ? and table_structure = 'ok'",
            [paper_id],
        ):
            lines = [
                r[0]
                for r in _rows(
                    env, "select row_text from table_rows where ref_table_id = ? order by row_index limit 12", [tid]
                )
            ]
            if lines:
                text = (caption or "") + "\n" + "\n".join(lines)
                pools["table"].append(Context("table", [paper_id], [title], text[:_CONTEXT_CHARS], page, "tables", tid))
        for iid, caption, page in _rows(
            env,
            "select image_id::varchar, image_caption, page_number from images "
            "where ref_paper_id = ? and parent_image_id is null and "
            "length(image_caption) > 60",
            [paper_id],
        ):
            pools["image"].append(Context("image", [paper_id], [title], caption[:_CONTEXT_CHARS], page, "images", iid))
        for eid, latex, before, after, page in _rows(
            env,
            "select equation_id::varchar, coalesce(latex_source, equation_text), context, context_after, "
            "page_number from equations where ref_paper_id = ? and context_after is not null",
            [paper_id],
        ):
            text = f"{before or ''}\n[display equation] {latex or ''}\n{after or ''}"
            pools["formula"].append(
                Context("formula", [paper_id], [title], text[:_CONTEXT_CHARS], page, "equations", eid)
            )
    with_abstract = [p for p in papers if p[2]]
    for first, second in zip(with_abstract, with_abstract[1:] + with_abstract[:1]):
        if first[0] != second[0]:
            text = f"Paper A: {first[1]}\n{first[2]}\n\nPaper B: {second[1]}\n{second[2]}"
            pools["multiple"].append(
                Context(
                    "multiple",
                    [first[0], second[0]],
                    [first[1], second[1]],
                    text[:_CONTEXT_CHARS],
                    None,
                    "metadata",
                    f"{first[0]}+{second[0]}",
                )
            )
    ordered = {
        kind: _order(f"{EXTRACTOR_VERSION}|{volume}|{kind}", pool, lambda c: c.key) for kind, pool in pools.items()
    }
    chosen: list[Context] = []
    while len(chosen) < limit and any(ordered.values()):
        for kind in CONTEXT_KINDS:
            if ordered[kind] and len(chosen) < limit:
                chosen.append(ordered[kind].pop(0))
    return chosen


# ---------------------------------------------------------------------------------------------------------------
# The three agents


def read_json(text: str) -> Any:
    """The first JSON value in a model's reply (fenced or bare); ValueError when there is none."""
    fenced = re.search(r"```(?:json)?\s*(.+?)```", text, re.S)
    body = fenced.group(1) if fenced else text
    for match in re.finditer(r"[\[{]", body):  # the outermost value: the first opener that decodes
        try:
            value, _ = json.JSONDecoder().raw_decode(body[match.start() :])
            return value
        except ValueError:
            continue
    raise ValueError("no JSON in the reply")


def explore(llm: ChatClient, context: Context, count: int = 2) -> list[dict[str, Any]]:
    where = (
        f"the paper “{context.titles[0]}”"
        if len(context.titles) == 1
        else " and ".join(f"“{t}”" for t in context.titles)
    )
    extra = "Each question must need both papers (compare or combine them)." if context.kind == "multiple" else ""
    prompt = EXPLORER_PROMPT.format(where=where, count=count, extra=extra, kind=context.kind, context=context.text)
    reply = llm.complete([{"role": "user", "content": prompt}], max_tokens=800)
    pairs = read_json(reply.text)
    if isinstance(pairs, dict):
        pairs = [pairs]
    return [
        p
        for p in pairs
        if isinstance(p, dict) and str(p.get("question", "")).strip() and p.get("answer") not in (None, "")
    ][:count]


def _tracker_prompt(context: Context, pair: dict[str, Any], feedback: str) -> str:
    return TRACKER_PROMPT.format(
        papers="; ".join(context.titles),
        question=pair["question"],
        answer=json.dumps(pair["answer"], ensure_ascii=False),
        kind=context.kind,
        types=list(TAG_GROUPS["question type"]),
        elements=list(TAG_GROUPS["element"]),
        evaluations=list(TAG_GROUPS["evaluation"]),
        functions=_FUNCTION_HELP,
        feedback=f"Your previous reply was rejected: {feedback}\n" if feedback else "",
    )


def track(llm: ChatClient, context: Context, pair: dict[str, Any], volume: str) -> tuple[Example | None, str]:
    """The pair as a validated AirQA example whose evaluator accepts the explorer's answer, or (None, why not)."""
    feedback = ""
    for _ in range(2):
        reply = llm.complete([{"role": "user", "content": _tracker_prompt(context, pair, feedback)}], max_tokens=600)
        try:
            fields = read_json(reply.text)
            if not isinstance(fields, dict):
                raise DatasetError("expected one JSON object")
            uid = uuid_lib.uuid5(_NAMESPACE, f"{EXTRACTOR_VERSION}|{context.key}|{pair['question']}")
            row = {
                "uuid": str(uid),
                "question": fields.get("question") or pair["question"],
                "answer_format": fields.get("answer_format") or "a concise answer in plain text",
                "tags": fields.get("tags") or [],
                "anchor_pdf": list(context.paper_ids),
                "reference_pdf": [],
                "conference": [volume],
                "evaluator": fields.get("evaluator"),
            }
            example = Example.from_dict(row)
            gold_passes = run_evaluator(example.evaluator.eval_func, pair["answer"], example.evaluator.eval_kwargs, llm)
            if not gold_passes:
                raise DatasetError(f"the evaluator rejects the answer {pair['answer']!r} it was built for")
            return example, ""
        except (ValueError, DatasetError, TypeError, KeyError) as problem:
            feedback = " ".join(str(problem).split())[:300]
    return None, feedback.split(":")[0][:80] or "malformed example"


def act(env: AgentEnv, llm: ChatClient, example: Example, method: str, config: LoopConfig) -> tuple[AgentResult, int]:
    """The agent's run on the example, and whether the example's evaluator accepts its answer."""
    result = answer(example, env, llm, method, config=config)
    try:
        score = int(run_evaluator(example.evaluator.eval_func, result.answer, example.evaluator.eval_kwargs, llm))
    except Exception:  # an answer the evaluator cannot read is a wrong answer
        score = 0
    return result, score if result.status == "answered" else 0


def chat_record(example: Example, result: AgentResult) -> dict[str, Any]:
    """A fine-tuning record: the agent's conversation up to its answering turn (trailing observations dropped)."""
    messages = list(result.transcript) or [
        {"role": "user", "content": example.question},
        {"role": "assistant", "content": json.dumps(result.answer, ensure_ascii=False, default=str)},
    ]
    while messages and messages[-1]["role"] != "assistant":
        messages.pop()
    return {
        "uuid": example.uuid,
        "method": result.method,
        "messages": messages,
        "answer": result.answer,
        "tags": example.tags,
    }


def synthesize(
    env: AgentEnv,
    llm: ChatClient,
    volume: str,
    *,
    limit: int = 20,
    pairs_per_context: int = 2,
    method: str = "neusym_rag",
    keep_unverified: bool = False,
    config: LoopConfig | None = None,
) -> Synthesis:
    """Explorer → tracker → actor over ``limit`` contexts of ``volume``. LLM failures cost the item, never the run."""
    config = config or LoopConfig(max_turns=8)
    stats = SynthesisStats()
    verified: list[dict[str, Any]] = []
    unverified: list[dict[str, Any]] = []
    trajectories: list[dict[str, Any]] = []
    for context in draw_contexts(env, volume, limit):
        stats.contexts += 1
        try:
            pairs = explore(llm, context, pairs_per_context)
        except (LLMError, ValueError) as problem:
            stats.reject(f"explorer: {type(problem).__name__}")
            continue
        stats.pairs += len(pairs)
        for pair in pairs:
            try:
                example, why = track(llm, context, pair, volume)
            except LLMError as problem:
                example, why = None, f"tracker: {type(problem).__name__}"
            if example is None:
                stats.reject(why)
                continue
            stats.tracked += 1
            result, score = act(env, llm, example, method, config)
            row = example.to_dict() | {
                "gold_answer": pair["answer"],
                "extractor": {
                    "version": EXTRACTOR_VERSION,
                    "status": "verified" if score else "unverified",
                    "context": {
                        "kind": context.kind,
                        "table": context.table_name,
                        "row_id": context.row_id,
                        "page_number": context.page_number,
                    },
                    "actor": {
                        "method": method,
                        "status": result.status,
                        "answer": result.answer,
                        "turns": len(result.trajectory),
                    },
                },
            }
            if score:
                stats.verified += 1
                verified.append(row)
                trajectories.append(chat_record(example, result))
            else:
                stats.unverified += 1
                unverified.append(row)
    return Synthesis(verified + (unverified if keep_unverified else []), trajectories, stats, llm.usage.to_dict())
