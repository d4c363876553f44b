"""HD-RAG's table pipeline (``--method hdrag``): an ensemble retriever over the row, column and table entities of
its hierarchical table representation (a BM25, a dense and a header route, fused by weighted reciprocal rank), an
LLM rerank of the candidates, then RECAP (:mod:`agent.recap`) over the best ``k``.

The fusion's constant and weights are module globals: benchmarks/table_questions.py measures other values."""

from __future__ import annotations

import re

from agent import header_match
from agent.answering import Method, context_evidence, single_call
from agent.backends import BackendUnavailable, quote_filter_list
from agent.env import AgentEnv
from agent.formats import clip_text
from agent.loop import AgentResult, LoopConfig, Turn
from agent.prompt import SYSTEM_ROLE, task_prompt
from agent.recap import recap_answer
from agent.retrieval import ContextItem, context_text, scope_papers, symbolic_items
from agent.task import Task
from paperlake.runtime.llm import ChatClient, LLMError, Usage

# HD-RAG's ensemble retrieves over the row, column and table entities of its hierarchical table representation:
# the row and column lines and the table's caption (not the whole table's HTML, which holds every value of the
# table and would stand in for the line that answers).
HDRAG_VIEWS = (
    ("table_rows", "row_text"),
    ("table_columns", "column_text"),
    ("tables", "table_caption"),
    ("table_rows", "row_summary"),
    ("table_columns", "column_summary"),
)  # summaries: when enriched
HDRAG_CANDIDATES = 20  # per route, and how many the reranker sees
# Route weights: the ensemble's own, BM25 0.8, dense 0.2. They were the text hybrid's weights when the ensemble was
# built, and the table questions were measured with them; the text hybrid's convex fusion re-chooses its weights
# when its dense route changes (schemas/collections.yaml: 0.6/0.4 since pooled vectors), and 0.6/0.4 here took
# hdrag's recall@1 on the 44 table questions from .773 to .568 (MinerU home, same stores): the two fusions differ
# in formula (weighted RRF over table lines here, min-max convex over text there) and in what they fuse, so each
# keeps the weights measured for it. RRF's constant is 20, not the usual 60:
# each route returns only 20 candidates, and with 60 the first and the twentieth differ by a factor of 1.3, which
# turns the fusion into a vote count (chosen on half of tests/data/airqa_tables.jsonl; see benchmarks/README.md
# for the other half).
HDRAG_WEIGHTS = {"bm25": 0.8, "dense": 0.2}
_RRF_K = 20
# The header route (agent/header_match.py): how many of the best tables it reads whole, and its weight beside the
# BM25 and dense routes' (which sum to 1).
HDRAG_HEADER_TABLES = 3
HDRAG_HEADER_WEIGHT = 0.25


def _route_collections(env: AgentEnv) -> dict[str, str]:
    """The text collections of the ensemble's two routes: BM25 (sparse) and the classic dense one."""
    routes: dict[str, str] = {}
    texts = [c for c in env.collections() if c.modality == "text"]
    bm25 = next((c.name for c in texts if c.metric.upper() == "BM25" and len(c.views)), None)
    if bm25:
        routes["bm25"] = bm25
    dense = env.classic_collection()
    dense_info = next((c for c in texts if c.name == dense), None)
    if dense_info is None or dense_info.metric.upper() == "BM25":
        dense_info = next((c for c in texts if c.metric.upper() in {"COSINE", "IP", "L2"}), None)
    if dense_info is not None:
        routes["dense"] = dense_info.name
    return routes


def hdrag_candidates(env: AgentEnv, task: Task, n: int = HDRAG_CANDIDATES) -> list[ContextItem]:
    """HD-RAG's ensemble retriever: a BM25 and a dense route over the row, column and table entities.

    Each route searches every table view (one collection, so its scores compare across views) and keeps its best
    ``n``; the two rankings are fused by weighted reciprocal rank (Σ wᵣ / (60 + rankᵣ)), the ensemble HD-RAG uses,
    because BM25 and cosine scores live on different scales. Falls back to keyword SQL when no vectors are built.
    """
    if env.vectors is None:
        return symbolic_items(env, task, n)
    routes = _route_collections(env)
    if not routes:
        raise BackendUnavailable("no text vector collection is built")
    papers = scope_papers(task, env)
    scope = f"pdf_id in {quote_filter_list(papers)}" if papers else ""
    weights = _ensemble_weights()
    fused: dict[tuple[str, str], float] = {}
    found: dict[tuple[str, str], ContextItem] = {}
    texts: dict[tuple[str, str], dict[str, str]] = {}
    for route, collection in routes.items():
        available = {tuple(v) for c in env.collections() if c.name == collection for v in c.views}
        hits = []
        for table, column in HDRAG_VIEWS:
            if available and (table, column) not in available:
                continue
            hits += env.vectors.search(task.question, collection, table, column, scope, n)
        hits.sort(key=lambda h: -float(h.score))
        for rank, hit in enumerate(hits[:n], start=1):
            key = (hit.table_name, str(hit.primary_key))
            fused[key] = fused.get(key, 0.0) + weights[route] / (_RRF_K + rank)
            texts.setdefault(key, {})[hit.column_name] = hit.text or ""
            found.setdefault(
                key,
                ContextItem(
                    text="",
                    paper_id=str(hit.pdf_id),
                    page_number=hit.page_number,
                    table_name=hit.table_name,
                    column_name=hit.column_name,
                    row_id=str(hit.primary_key),
                    bbox=tuple(hit.bbox) if hit.bbox else None,
                    source=f"hdrag:{route}",
                ),
            )
    header_ranked = _header_route(env, task, sorted(fused, key=lambda key: (-fused[key], key))[:n], found, texts)
    for rank, key in enumerate(header_ranked[:n], start=1):
        fused[key] = fused.get(key, 0.0) + HDRAG_HEADER_WEIGHT / (_RRF_K + rank)
    ranked = sorted(fused, key=lambda key: (-fused[key], key))[:n]
    shown = _line_texts(env, ranked, texts)
    items = []
    for key in ranked:
        item = found[key]
        item.score = round(fused[key], 6)
        item.text, item.column_name = shown[key]
        items.append(item)
    _locate_boxes(env, items)
    return items


def _header_route(
    env: AgentEnv,
    task: Task,
    ranked: list[tuple[str, str]],
    found: dict[tuple[str, str], ContextItem],
    texts: dict[tuple[str, str], dict[str, str]],
) -> list[tuple[str, str]]:
    """The ensemble's third route, HD-RAG's second level: every row and column line of the
    :data:`HDRAG_HEADER_TABLES` tables ranked highest, ordered by how much of its header path the question states
    (:mod:`agent.header_match`). Lines no route found are added to ``found``/``texts``."""
    rows_info, columns_info = env.table("table_rows"), env.table("table_columns")
    if rows_info is None or columns_info is None or not ranked:
        return []
    line_ids = {"table_rows": "row_id", "table_columns": "column_id"}
    tables: list[str] = []
    by_view: dict[str, list[str]] = {}
    for view, row_id in ranked:
        by_view.setdefault(view, []).append(row_id)
    owner: dict[tuple[str, str], str] = {(view, row_id): row_id for view, row_id in ranked if view == "tables"}
    for view, id_column in line_ids.items():
        wanted = by_view.get(view, [])
        if wanted:
            marks = ", ".join("?" for _ in wanted)
            for row_id, table_id in env.query(
                f"select cast({id_column} as varchar), cast(ref_table_id as varchar) from {view} "
                f"where cast({id_column} as varchar) in ({marks})",
                wanted,
            ).rows:
                owner[(view, row_id)] = table_id
    for key in ranked:
        table_id = owner.get(key)
        if table_id and table_id not in tables:
            tables.append(table_id)
    tables = tables[:HDRAG_HEADER_TABLES]
    if not tables:
        return []
    marks = ", ".join("?" for _ in tables)
    lines = []
    for view, (id_column, text_column, path_column) in {
        "table_rows": ("row_id", "row_text", "row_header_path"),
        "table_columns": ("column_id", "column_text", "column_header_path"),
    }.items():
        info = rows_info if view == "table_rows" else columns_info
        # a warehouse built before labels were glossed has no header_glossary: the paths alone, then
        glossary = "header_glossary" if "header_glossary" in {c.name for c in info.columns} else "null"
        for row_id, table_id, text, path, paper_id, page, defined in env.query(
            f"select cast({id_column} as varchar), cast(ref_table_id as varchar), {text_column}, {path_column}, "
            f"cast(ref_paper_id as varchar), page_number, {glossary} from {view} "
            f"where cast(ref_table_id as varchar) in ({marks})",
            tables,
            max_rows=100_000,
        ).rows:
            key = (view, row_id)
            lines.append((key, list(path or []), tables.index(table_id), list(defined or [])))
            texts.setdefault(key, {}).setdefault(text_column, text or "")
            found.setdefault(
                key,
                ContextItem(
                    text="",
                    paper_id=paper_id,
                    page_number=page,
                    table_name=view,
                    column_name=text_column,
                    row_id=row_id,
                    source="hdrag:header",
                ),
            )
    return header_match.rank_lines(task.question, lines)


_LINE_TEXT = {
    "table_rows": ("row_text", "row_summary", "row_id"),
    "table_columns": ("column_text", "column_summary", "column_id"),
}


def _line_texts(
    env: AgentEnv, keys: list[tuple[str, str]], seen: dict[tuple[str, str], dict[str, str]]
) -> dict[tuple[str, str], tuple[str, str]]:
    """(text, column) per entity: a row or column line shows its values and its LLM summary when it has one (a hit
    on the summary alone still shows the values: they are what the answer is computed from); others as found."""
    stored: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for table, (text_column, summary_column, id_column) in _LINE_TEXT.items():
        info = env.table(table)
        wanted = [row for (name, row) in keys if name == table]
        if not wanted or info is None or not info.has(summary_column):
            continue
        marks = ", ".join("?" for _ in wanted)
        for row_id, text, summary in env.query(
            f"select cast({id_column} as varchar), {text_column}, {summary_column} from {table} "
            f"where cast({id_column} as varchar) in ({marks})",
            wanted,
        ).rows:
            stored[(table, row_id)] = (text, summary)
    result = {}
    for key in keys:
        table = key[0]
        if table not in _LINE_TEXT:
            column = next(iter(seen[key]))
            result[key] = (seen[key][column], column)
            continue
        text_column, summary_column, _ = _LINE_TEXT[table]
        text, summary = stored.get(key, (None, None))
        text = seen[key].get(text_column) or text
        summary = seen[key].get(summary_column) or summary
        result[key] = (f"{text}\n[Summary]: {summary}" if text and summary else text or summary or "", text_column)
    return result


def _ensemble_weights() -> dict[str, float]:
    """BM25 and dense weights of the ensemble's fusion: :data:`HDRAG_WEIGHTS` (not the text hybrid's; see there)."""
    return dict(HDRAG_WEIGHTS)


def _locate_boxes(env: AgentEnv, items: list[ContextItem]) -> None:
    """Give row/column/table items their table's box, so a citation can point at the region."""
    tables = env.table("tables")
    if tables is None or not items:
        return
    by_view: dict[str, list[ContextItem]] = {}
    for item in items:
        if item.bbox is None and item.table_name:
            by_view.setdefault(item.table_name, []).append(item)
    for view, members in by_view.items():
        if view == "tables":
            located = env.locate("tables", [m.row_id for m in members if m.row_id])
            for member in members:
                member.bbox = located.get(str(member.row_id), (None, None, None))[2]
            continue
        table = env.table(view)
        key = table.primary_key if table is not None else None
        if table is None or not table.has("ref_table_id"):
            continue
        marks = ", ".join("?" for _ in members)
        rows = env.query(
            f"select cast(v.{key} as varchar), t.bounding_box from {view} v join tables t on t.table_id = "
            f"v.ref_table_id where cast(v.{key} as varchar) in ({marks})",
            [m.row_id for m in members],
        ).rows
        boxes = {row_id: box for row_id, box in rows}
        for member in members:
            box = boxes.get(str(member.row_id))
            member.bbox = tuple(float(v) for v in box) if box else None


def hdrag_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    return hdrag_candidates(env, task, max(k, HDRAG_CANDIDATES))[:k]


_RERANK_INSTRUCTIONS = """\
Above are candidate table rows, table columns and tables, numbered. Rank them by how useful each is
for answering the question: the ones holding the values the question asks for first. Reply with one line:
[Ranking]: the numbers of the {k} most useful candidates, best first, comma-separated (e.g. [Ranking]: 4, 1, 9)."""
_RERANK_LINE = re.compile(r"\[\s*ranking\s*\]\s*:?\s*([^\n]*)", re.I)
_RERANK_ITEM_CHARS = 700


def rerank_order(response: str, n: int) -> list[int]:
    """0-based candidate indices in the order the model ranked them; unknown or repeated numbers are dropped."""
    match = _RERANK_LINE.search(response or "")
    text = match.group(1) if match else (response or "")
    numbers = [int(x) for x in re.findall(r"\d+", text)]
    return [x - 1 for x in dict.fromkeys(numbers) if 1 <= x <= n]


def hdrag_method(spec: Method, task: Task, env: AgentEnv, llm: ChatClient, config: LoopConfig, k: int) -> AgentResult:
    """HD-RAG: ensemble retrieval over row/column/table entities, an LLM rerank of the candidates, then RECAP."""
    usage = Usage()
    try:
        candidates, unavailable = hdrag_candidates(env, task, max(k, HDRAG_CANDIDATES)), None
    except BackendUnavailable as problem:
        candidates, unavailable = [], str(problem)
    items = candidates[:k]
    trajectory = [
        Turn(
            0,
            "",
            action_type="first_retrieval:hdrag",
            observation=context_text(env, candidates),
            evidence=context_evidence(candidates, spec.name),
            seeded=True,
            ok=unavailable is None,
            error_type="unavailable" if unavailable else None,
        )
    ]
    if len(candidates) > 1:  # HD-RAG reranks what the ensemble found, then keeps the best k
        listing = "\n".join(
            f"({i}) [{c.table_name}] {clip_text(c.text, _RERANK_ITEM_CHARS)}" for i, c in enumerate(candidates, start=1)
        )
        prompt = (
            f"{task_prompt(task, env, show_ids=False)}\n[Candidates]:\n{env.redact(listing)}\n\n"
            f"{_RERANK_INSTRUCTIONS.format(k=k)}"
        )
        messages = [{"role": "system", "content": SYSTEM_ROLE}, {"role": "user", "content": prompt}]
        try:
            response = single_call(llm, messages, config, usage)
        except LLMError as problem:  # the rerank is an improvement, not a requirement: keep the ensemble's order
            trajectory.append(
                Turn(
                    1,
                    "",
                    action_type="rerank",
                    ok=False,
                    error_type="llm_error",
                    observation=f"rerank failed ({problem}); the ensemble's order is kept",
                )
            )
        else:
            order = rerank_order(response, len(candidates))
            chosen = [candidates[i] for i in order][:k]
            chosen += [c for c in candidates if c not in chosen][: k - len(chosen)]
            items = chosen
            trajectory.append(
                Turn(
                    1,
                    response,
                    action_type="rerank",
                    parameters={"order": [i + 1 for i in order]},
                    observation=f"kept candidates {[candidates.index(c) + 1 for c in items]}",
                )
            )
    return recap_answer(spec, task, env, llm, config, items, usage, trajectory, unavailable)
