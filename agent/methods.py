"""The answering methods (``--method``): NeuSym-RAG's baselines and agent, MathRAG's formula workflow, HD-RAG's RECAP.

Every method starts from a deterministic first retrieval (:func:`first_retrieval`, no LLM needed, used by the
retrieval-only metrics), then:

- ``question_only`` / ``title_with_abstract`` / ``full_text_with_cutoff`` / ``classic_rag``: one call with that
  context;
- ``two_stage_{neu,sym,hybrid}_rag``: the model writes one retrieval action (vector, SQL, or either), which runs;
  a second call answers from the first retrieval plus that result;
- ``iterative_classic_rag`` / ``iterative_{neu,sym}_rag`` / ``neusym_rag`` / ``mathrag``: the ReAct loop with the
  method's actions, its first turn being the first retrieval, run by the environment;
- ``recap``: one call that Restates, Extracts, Computes, Answers and Presents the computation as an expression; the
  calculator evaluates the expression, and a rule picks the calculator's value for numeric answer formats and the
  model's answer otherwise; its first retrieval reads the table row and column lines first (header-addressed
  values);
- ``hdrag``: HD-RAG's table pipeline: an ensemble (BM25 and dense, fused by weighted reciprocal rank) over the row,
  column and table entities (the row and column lines have BM25 vectors only: the dense route finds captions), an
  LLM rerank of the candidates, then RECAP over the best ``k``.

Here: the registry (:data:`METHODS`) and the single-call, two-stage and iterative runners. The first retrievals are
in :mod:`agent.retrieval`, RECAP in :mod:`agent.recap`, HD-RAG in :mod:`agent.hdrag`, and what the methods that
call the model directly share in :mod:`agent.answering`.
"""

from __future__ import annotations

from typing import Any

from agent.actions import (
    MATH_ACTIONS,
    NEUSYM_ACTIONS,
    Action,
    CalculateExpr,
    ClassicRetrieve,
    GenerateAnswer,
    Observation,
    RetrieveFromDatabase,
    RetrieveFromVectorstore,
    describe,
    error,
    run_action,
)
from agent.answering import (
    ANSWER_INSTRUCTIONS,
    Method,
    context_evidence,
    extract_answer,
    finish,
    retrieve_or_empty,
    single_call,
)
from agent.backends import quote_filter_list
from agent.env import AgentEnv
from agent.formats import MAX_RESPONSE_CHARS, ActionParseError, clip_text, jsonable, parse_action, strip_response
from agent.hdrag import hdrag_items, hdrag_method
from agent.loop import AgentResult, LoopConfig, ReActLoop, Turn
from agent.prompt import SYSTEM_ROLE, action_space, database_schema, task_prompt, vectorstore_schema
from agent.recap import recap_method
from agent.retrieval import (
    ContextItem,
    classic_items,
    context_text,
    full_text_items,
    hybrid_items,
    keywords,
    math_items,
    neural_items,
    recap_items,
    scope_papers,
    symbolic_items,
    title_abstract_items,
)
from agent.task import Task
from paperlake.runtime.llm import ChatClient, LLMError, Usage


def _none(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    return []


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("question_only", "single", _none, description="the question alone"),
        Method("title_with_abstract", "single", title_abstract_items, description="anchor titles and abstracts"),
        Method("full_text_with_cutoff", "single", full_text_items, description="anchor full text, token cutoff"),
        Method("classic_rag", "single", classic_items, description="top-k chunks by vector search"),
        Method(
            "iterative_classic_rag",
            "iterative",
            classic_items,
            (ClassicRetrieve, GenerateAnswer),
            description="repeated chunk retrieval",
        ),
        Method(
            "two_stage_neu_rag",
            "two_stage",
            neural_items,
            stage_one=(RetrieveFromVectorstore,),
            description="one model-written vector search, then answer",
        ),
        Method(
            "iterative_neu_rag",
            "iterative",
            neural_items,
            (RetrieveFromVectorstore, GenerateAnswer),
            description="ReAct over vector search",
        ),
        Method(
            "two_stage_sym_rag",
            "two_stage",
            symbolic_items,
            stage_one=(RetrieveFromDatabase,),
            description="one model-written SQL query, then answer",
        ),
        Method(
            "iterative_sym_rag",
            "iterative",
            symbolic_items,
            (RetrieveFromDatabase, GenerateAnswer),
            description="ReAct over SQL",
        ),
        Method(
            "two_stage_hybrid_rag",
            "two_stage",
            hybrid_items,
            stage_one=(RetrieveFromDatabase, RetrieveFromVectorstore),
            description="one model-written SQL query or vector search, then answer",
        ),
        Method("neusym_rag", "iterative", hybrid_items, NEUSYM_ACTIONS, description="ReAct with all five actions"),
        Method(
            "mathrag",
            "iterative",
            math_items,
            (*MATH_ACTIONS, RetrieveFromDatabase, RetrieveFromVectorstore, CalculateExpr, GenerateAnswer),
            description="ReAct with the formula workflow",
        ),
        Method("recap", "recap", recap_items, description="Restate, Extract, Compute, Answer, Present + calculator"),
        Method(
            "hdrag", "hdrag", hdrag_items, description="table rows/columns: BM25 + dense ensemble, LLM rerank, RECAP"
        ),
    )
}


def get_method(name: str) -> Method:
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    return METHODS[name]


def first_retrieval(method: str, example: Any, env: AgentEnv, k: int = 5) -> list[ContextItem]:
    """The method's deterministic first retrieval for an example (no LLM involved)."""
    return get_method(method).retrieve(env, Task.from_any(example), k)


def run_method(
    method: str,
    example: Any,
    env: AgentEnv,
    llm: ChatClient,
    action_format: str = "markdown",
    config: LoopConfig | None = None,
    k: int = 5,
) -> AgentResult:
    """Answer one question with one method; the environment is reset and scoped to the question's papers."""
    spec = get_method(method)
    task = Task.from_any(example)
    config = config or LoopConfig()
    env.action_format = action_format
    env.reset(scope_papers(task, env) if env.warehouse is not None else task.papers)
    if spec.kind == "iterative":
        return _iterative(spec, task, env, llm, action_format, config, k)
    if spec.kind == "two_stage":
        return _two_stage(spec, task, env, llm, action_format, config, k)
    if spec.kind == "recap":
        return recap_method(spec, task, env, llm, config, k)
    if spec.kind == "hdrag":
        return hdrag_method(spec, task, env, llm, config, k)
    return _single(spec, task, env, llm, config, k)


def _single(spec: Method, task: Task, env: AgentEnv, llm: ChatClient, config: LoopConfig, k: int) -> AgentResult:
    items, unavailable = retrieve_or_empty(spec, env, task, k)
    usage = Usage()
    trajectory = [
        Turn(
            0,
            "",
            action_type=f"first_retrieval:{spec.name}",
            observation=context_text(env, items),
            evidence=context_evidence(items, spec.name),
            seeded=True,
            ok=unavailable is None,
            error_type="unavailable" if unavailable else None,
        )
    ]
    prompt = task_prompt(task, env, show_ids=False)
    if spec.name != "question_only":
        prompt += "\n[Context]:\n" + context_text(env, items)
    messages = [
        {"role": "system", "content": SYSTEM_ROLE},
        {"role": "user", "content": f"{prompt}\n\n{ANSWER_INSTRUCTIONS}"},
    ]
    try:
        response = single_call(llm, messages, config, usage)
    except LLMError as problem:
        return finish(spec, task, env, trajectory, usage, None, config, str(problem), "llm_error")
    answer = extract_answer(response)
    trajectory.append(Turn(1, response, action_type="answer", observation=""))
    return finish(spec, task, env, trajectory, usage, answer, config, unavailable)


def _two_stage(
    spec: Method, task: Task, env: AgentEnv, llm: ChatClient, action_format: str, config: LoopConfig, k: int
) -> AgentResult:
    items, unavailable = retrieve_or_empty(spec, env, task, k)
    usage = Usage()
    trajectory = [
        Turn(
            0,
            "",
            action_type=f"first_retrieval:{spec.name}",
            observation=context_text(env, items),
            evidence=context_evidence(items, spec.name),
            seeded=True,
        )
    ]
    schemas = []
    if RetrieveFromDatabase in spec.stage_one:
        schemas.append(database_schema(env))
    if RetrieveFromVectorstore in spec.stage_one:
        schemas.append(vectorstore_schema(env))
    stage_one = "\n\n".join(
        [
            SYSTEM_ROLE,
            action_space(spec.stage_one, action_format),
            "Write one retrieval action that will find the evidence for this question: [Thought]: ... then "
            "[Action]: the action.",
            *schemas,
        ]
    )
    messages = [
        {"role": "system", "content": env.redact(stage_one)},
        {"role": "user", "content": task_prompt(task, env)},
    ]
    try:
        response = strip_response(single_call(llm, messages, config, usage))
    except LLMError as problem:
        return finish(spec, task, env, trajectory, usage, None, config, str(problem), "llm_error")
    observation: Observation
    action: Action | None = None
    try:
        parsed = parse_action(response, action_format, [a.action_name() for a in spec.stage_one])
        action = {a.action_name(): a for a in spec.stage_one}[parsed.action_type].build(parsed)
    except ActionParseError as problem:
        observation = error("parse_error", str(problem))
    except Exception as problem:  # a reader's bug leaves the first retrieval to answer from
        observation = error("parse_error", f"the action could not be read ({describe(problem)})")
    else:
        observation = run_action(action, env)
    trajectory.append(
        Turn(
            1,
            clip_text(response, MAX_RESPONSE_CHARS),
            action_type=action.action_name() if action else None,
            action=action.render(action_format) if action else None,
            parameters=jsonable(action.arguments()) if action else None,
            observation=env.redact(observation.text),
            ok=observation.ok,
            error_type=observation.error_type,
            evidence=observation.evidence,
        )
    )
    context = context_text(env, items)
    if observation.ok:
        context += "\n\n[Retrieved by your action]:\n" + env.redact(observation.text)
    prompt = f"{task_prompt(task, env, show_ids=False)}\n[Context]:\n{context}\n\n{ANSWER_INSTRUCTIONS}"
    messages = [{"role": "system", "content": SYSTEM_ROLE}, {"role": "user", "content": prompt}]
    try:
        response = single_call(llm, messages, config, usage)
    except LLMError as problem:
        return finish(spec, task, env, trajectory, usage, None, config, str(problem), "llm_error")
    trajectory.append(Turn(2, response, action_type="answer"))
    return finish(spec, task, env, trajectory, usage, extract_answer(response), config, unavailable)


def _seed_action(spec: Method, task: Task, env: AgentEnv, k: int) -> tuple[Action, Observation] | None:
    """The first retrieval as an action the model could have written, with its observation."""
    papers = env.scope_paper_ids
    if spec.name == "iterative_classic_rag":
        action: Action = ClassicRetrieve(task.question, k)
        return action, run_action(action, env)
    if RetrieveFromVectorstore in spec.actions and env.vectors is not None and env.classic_collection():
        scope = f"pdf_id in {quote_filter_list(papers)}" if papers else ""
        action = RetrieveFromVectorstore(
            task.question, env.classic_collection() or "", "chunks", "text_content", scope, k
        )
        return action, run_action(action, env)
    if RetrieveFromDatabase in spec.actions and env.warehouse is not None:
        terms = keywords(task.question)
        if not terms:
            return None
        where = " or ".join("contains(lower(text_content), " + _sql_string(t) + ")" for t in terms)
        if papers:
            where = f"({where}) and cast(ref_paper_id as varchar) in ({', '.join(_sql_string(p) for p in papers)})"
        matches = " + ".join("cast(contains(lower(text_content), " + _sql_string(t) + ") as integer)" for t in terms)
        action = RetrieveFromDatabase(
            f"SELECT chunk_id, ref_paper_id, page_number, text_content FROM chunks WHERE {where} "
            f"ORDER BY ({matches}) DESC, "
            f"ref_paper_id, page_number LIMIT {k}"
        )
        return action, run_action(action, env)
    return None


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _iterative(
    spec: Method, task: Task, env: AgentEnv, llm: ChatClient, action_format: str, config: LoopConfig, k: int
) -> AgentResult:
    loop = ReActLoop(task, env, llm, spec.actions, action_format, config, spec.name)
    seeded = _seed_action(spec, task, env, k)
    if seeded is not None and seeded[1].ok:
        loop.seed(*seeded, thought="The environment ran a first retrieval for the question; its result follows.")
    return loop.run()
