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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from agent import header_match
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
from agent.backends import BackendUnavailable, quote_filter_list
from agent.env import AgentEnv
from agent.evidence import Evidence, snippet
from agent.formats import (
    MAX_RESPONSE_CHARS,
    ActionParseError,
    clip_text,
    count_tokens,
    jsonable,
    parse_action,
    strip_response,
    truncate_tokens,
)
from agent.loop import AgentResult, LoopConfig, ReActLoop, Turn, cite
from agent.prompt import SYSTEM_ROLE, action_space, database_schema, task_prompt, vectorstore_schema
from agent.task import Task
from paperlake.runtime.llm import ChatClient, LLMError, Usage

FULL_TEXT_CUTOFF_TOKENS = 5000
CONTEXT_TOKENS = 12_000
_STOPWORDS = frozenset(
    "a an and are as at be by can could did do does for from has have how in into is it its many much of on or "
    "paper papers that the their them there these this those to was were what when where which who whom whose why "
    "with would according answer proposed used using does than then also between both each other such only".split()
)
_NUMERIC_FORMAT = re.compile(r"\b(float|integer|int|number|numeric|decimal|percentage|percent|ratio)\b", re.I)
_DECIMALS = re.compile(r"(\d+)\s+decimal", re.I)


@dataclass
class ContextItem:
    text: str
    paper_id: str | None
    page_number: int | None
    table_name: str | None = None
    column_name: str | None = None
    row_id: str | None = None
    bbox: tuple[float, ...] | None = None
    score: float | None = None
    source: str = ""

    def evidence(self, source: str) -> Evidence:
        return Evidence(
            self.paper_id,
            self.page_number,
            self.bbox,
            self.table_name,
            self.column_name,
            self.row_id,
            snippet(self.text),
            source,
        )


# ---------------------------------------------------------------------------------------------------------------
# Deterministic first retrievals


def scope_papers(task: Task, env: AgentEnv) -> list[str]:
    """The papers a question is about: its anchor and reference papers, else the papers of its conference."""
    if task.papers:
        return task.papers
    if task.conference and env.table("metadata") is not None:
        wanted = [c.lower() for c in task.conference]
        marks = ", ".join("?" for _ in wanted)
        columns = [c for c in ("venue", "volume") if env.table("metadata").has(c)]  # type: ignore[union-attr]
        if columns:
            where = " or ".join(f"lower({c}) in ({marks})" for c in columns)
            rows = env.query(
                f"select cast(paper_id as varchar) from metadata where {where} order by 1",
                wanted * len(columns),
                max_rows=100_000,
            ).rows
            return [r[0] for r in rows]
    return []


def keywords(question: str, limit: int = 12) -> list[str]:
    words = re.findall(r"[A-Za-z0-9][A-Za-z0-9\-\.]*[A-Za-z0-9]|[A-Za-z0-9]", question.lower())
    chosen = [w for w in words if (len(w) > 2 or w.isdigit()) and w not in _STOPWORDS]
    return list(dict.fromkeys(chosen))[:limit]


def _vector_items(env: AgentEnv, task: Task, views: Sequence[tuple[str, str]], k: int) -> list[ContextItem]:
    if env.vectors is None:
        raise BackendUnavailable("no vector collections: build them with the vector assets (paperlake ingest)")
    collection = env.classic_collection()
    if collection is None:
        raise BackendUnavailable("no text vector collection is built")
    papers = scope_papers(task, env)
    scope = f"pdf_id in {quote_filter_list(papers)}" if papers else ""
    infos = env.collections()
    available = {tuple(v) for c in infos if c.name == collection for v in c.views}
    # a view the collection holds no vectors of (a dense collection configured without the table row lines) is
    # searched by BM25, which holds every encodable cell
    bm25 = next(
        (c for c in infos if c.modality == "text" and c.metric.upper() == "BM25" and c.name != collection), None
    )
    ranked: list[list[ContextItem]] = []
    for table, column in views:
        searched = collection
        if available and (table, column) not in available:
            if bm25 is None or (table, column) not in {tuple(v) for v in bm25.views}:
                continue
            searched = bm25.name
        hits = env.vectors.search(task.question, searched, table, column, scope, k)
        located = env.locate(table, [h.primary_key for h in hits if not h.bbox]) if hits else {}
        ranked.append(
            [
                ContextItem(
                    text=h.text or "",
                    paper_id=str(h.pdf_id),
                    page_number=h.page_number,
                    table_name=h.table_name,
                    column_name=h.column_name,
                    row_id=str(h.primary_key),
                    bbox=tuple(h.bbox) if h.bbox else located.get(str(h.primary_key), (None, None, None))[2],
                    score=float(h.score),
                    source=searched,
                )
                for h in hits
            ]
        )
    return _interleave(ranked, k)


def _interleave(ranked: Sequence[Sequence[ContextItem]], k: int) -> list[ContextItem]:
    """Round-robin by rank across lists (scores of different views or stores are not comparable), deduplicated."""
    result: list[ContextItem] = []
    seen: set[tuple[Any, ...]] = set()
    depth = max((len(r) for r in ranked), default=0)
    for rank in range(depth):
        for items in ranked:
            if rank < len(items):
                item = items[rank]
                key = (item.table_name, item.row_id, item.paper_id, item.page_number)
                if key not in seen:
                    seen.add(key)
                    result.append(item)
                    if len(result) >= k:
                        return result
    return result


_SYMBOLIC_VIEWS = (
    ("chunks", ("text_content",)),
    ("tables", ("table_caption", "table_content")),
    ("images", ("image_caption",)),
)


def _symbolic_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    """Keyword matching in SQL: rows ranked by how many of the question's keywords they contain."""
    terms = keywords(task.question)
    if not terms or env.warehouse is None:
        return []
    papers = scope_papers(task, env)
    selects, params = [], []
    for table_name, text_columns in _SYMBOLIC_VIEWS:
        table = env.table(table_name)
        if table is None or not all(table.has(c) for c in text_columns):
            continue
        text = " || chr(10) || ".join(f"coalesce({c}, '')" for c in text_columns)
        score = " + ".join(f"cast(contains(lower({text}), ?) as integer)" for _ in terms)
        page = "page_number" if table.has("page_number") else "null"
        bbox = "bounding_box" if table.has("bounding_box") else "null"
        conditions = []
        if papers:
            conditions.append("cast(ref_paper_id as varchar) in (" + ", ".join("?" for _ in papers) + ")")
        if table.has("parent_image_id"):  # a figure's panels repeat its caption: match the figure once
            conditions.append("parent_image_id is null")
        where = "where " + " and ".join(conditions) if conditions else ""
        selects.append(
            f"select '{table_name}' as table_name, '{','.join(text_columns)}' as column_name, "
            f"cast({table.primary_key} as varchar) as row_id, cast(ref_paper_id as varchar) as paper_id, "
            f"{page} as page_number, cast({bbox} as double[]) as bbox, {text} as text, ({score}) as score "
            f"from {table_name} {where}"
        )
        params += terms + papers
    if not selects:
        return []
    sql = (
        "with scored as (" + " union all ".join(selects) + ") "
        "select * from scored where score > 0 order by score desc, paper_id, page_number, row_id limit ?"
    )
    rows = env.query(sql, params + [k], max_rows=k).rows
    return [
        ContextItem(
            text=text,
            paper_id=paper,
            page_number=page,
            table_name=table,
            column_name=column,
            row_id=row,
            bbox=tuple(bbox) if bbox else None,
            score=float(score),
            source="sql_keywords",
        )
        for table, column, row, paper, page, bbox, text, score in rows
    ]


def _title_abstract_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    papers = task.anchor_pdf
    if not papers or env.table("metadata") is None:
        return []
    marks = ", ".join("?" for _ in papers)
    rows = env.query(
        f"select cast(paper_id as varchar), title, abstract from metadata where cast(paper_id as varchar) in ({marks})",
        papers,
    ).rows
    order = {p: i for i, p in enumerate(papers)}
    return [
        ContextItem(
            f"[Title]: {title}\n[Abstract]: {abstract or ''}",
            pid,
            1,
            "metadata",
            "title,abstract",
            pid,
            source="metadata",
        )
        for pid, title, abstract in sorted(rows, key=lambda r: order[r[0]])
    ]


def _full_text_items(env: AgentEnv, task: Task, k: int, cutoff: int = FULL_TEXT_CUTOFF_TOKENS) -> list[ContextItem]:
    """The anchor papers' pages in order, cut at ``cutoff`` tokens in all (NeuSym-RAG's full-text baseline)."""
    papers = task.anchor_pdf
    if not papers or env.table("pages") is None:
        return []
    marks = ", ".join("?" for _ in papers)
    rows = env.query(
        f"select cast(page_id as varchar), cast(ref_paper_id as varchar), page_number, page_content from pages "
        f"where cast(ref_paper_id as varchar) in ({marks}) order by page_number",
        papers,
        max_rows=100_000,
    ).rows
    order = {p: i for i, p in enumerate(papers)}
    items, budget = [], cutoff
    for page_id, paper, number, content in sorted(rows, key=lambda r: (order[r[1]], r[2])):
        if budget <= 0:
            break
        text, _ = truncate_tokens(content or "", budget)
        budget -= count_tokens(text)
        items.append(ContextItem(text, paper, number, "pages", "page_content", page_id, source="pages"))
    return items


def _formula_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    if env.formulas is None:
        return []
    items = []
    for record in env.formulas.search_formulas(task.question, limit=k):
        text = f"{record.get('name', '')}: {record.get('latex', '')}".strip(": ")
        items.append(
            ContextItem(
                text,
                record.get("paper_id"),
                record.get("page_number"),
                "formulas",
                "latex",
                str(record.get("formula_id")),
                source="formulas",
            )
        )
    return items


NEURAL_VIEWS = (
    ("chunks", "text_content"),
    ("tables", "table_content"),
    ("tables", "table_caption"),
    ("images", "image_caption"),
    ("equations", "equation_content"),
)
# RECAP computes over header-addressed cells: the row and column lines name each value's headers.
RECAP_VIEWS = (
    ("table_rows", "row_text"),
    ("table_columns", "column_text"),
    ("tables", "table_content"),
    ("chunks", "text_content"),
    ("tables", "table_caption"),
)
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


def _classic(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    return _vector_items(env, task, [("chunks", "text_content")], k)


def _neural(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    return _vector_items(env, task, NEURAL_VIEWS, k)


def _hybrid(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    neural = _neural(env, task, k) if env.vectors is not None else []
    return _interleave([neural, _symbolic_items(env, task, k)], k)


def _math(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    textual = _classic(env, task, k) if env.vectors is not None else _symbolic_items(env, task, k)
    return _interleave([_formula_items(env, task, k), textual], k)


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
        return _symbolic_items(env, task, n)
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


def _hdrag(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    return hdrag_candidates(env, task, max(k, HDRAG_CANDIDATES))[:k]


def _recap(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    if env.vectors is None:
        return _symbolic_items(env, task, k)
    return _vector_items(env, task, RECAP_VIEWS, k)


# ---------------------------------------------------------------------------------------------------------------
# Methods


@dataclass(frozen=True)
class Method:
    name: str
    kind: str  # single | two_stage | iterative | recap
    retrieve: Callable[[AgentEnv, Task, int], list[ContextItem]]
    actions: tuple[type[Action], ...] = ()
    stage_one: tuple[type[Action], ...] = ()
    description: str = ""


def _none(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    return []


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("question_only", "single", _none, description="the question alone"),
        Method("title_with_abstract", "single", _title_abstract_items, description="anchor titles and abstracts"),
        Method("full_text_with_cutoff", "single", _full_text_items, description="anchor full text, token cutoff"),
        Method("classic_rag", "single", _classic, description="top-k chunks by vector search"),
        Method(
            "iterative_classic_rag",
            "iterative",
            _classic,
            (ClassicRetrieve, GenerateAnswer),
            description="repeated chunk retrieval",
        ),
        Method(
            "two_stage_neu_rag",
            "two_stage",
            _neural,
            stage_one=(RetrieveFromVectorstore,),
            description="one model-written vector search, then answer",
        ),
        Method(
            "iterative_neu_rag",
            "iterative",
            _neural,
            (RetrieveFromVectorstore, GenerateAnswer),
            description="ReAct over vector search",
        ),
        Method(
            "two_stage_sym_rag",
            "two_stage",
            _symbolic_items,
            stage_one=(RetrieveFromDatabase,),
            description="one model-written SQL query, then answer",
        ),
        Method(
            "iterative_sym_rag",
            "iterative",
            _symbolic_items,
            (RetrieveFromDatabase, GenerateAnswer),
            description="ReAct over SQL",
        ),
        Method(
            "two_stage_hybrid_rag",
            "two_stage",
            _hybrid,
            stage_one=(RetrieveFromDatabase, RetrieveFromVectorstore),
            description="one model-written SQL query or vector search, then answer",
        ),
        Method("neusym_rag", "iterative", _hybrid, NEUSYM_ACTIONS, description="ReAct with all five actions"),
        Method(
            "mathrag",
            "iterative",
            _math,
            (*MATH_ACTIONS, RetrieveFromDatabase, RetrieveFromVectorstore, CalculateExpr, GenerateAnswer),
            description="ReAct with the formula workflow",
        ),
        Method("recap", "recap", _recap, description="Restate, Extract, Compute, Answer, Present + calculator"),
        Method("hdrag", "hdrag", _hdrag, description="table rows/columns: BM25 + dense ensemble, LLM rerank, RECAP"),
    )
}


def get_method(name: str) -> Method:
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    return METHODS[name]


def first_retrieval(method: str, example: Any, env: AgentEnv, k: int = 5) -> list[ContextItem]:
    """The method's deterministic first retrieval for an example (no LLM involved)."""
    return get_method(method).retrieve(env, Task.from_any(example), k)


def context_text(env: AgentEnv, items: Sequence[ContextItem], max_tokens: int = CONTEXT_TOKENS) -> str:
    if not items:
        return "No context provided."
    titles = env.titles(i.paper_id for i in items if i.paper_id) if env.warehouse is not None else {}
    blocks, budget = [], max_tokens
    for number, item in enumerate(items, start=1):
        where = [titles.get(item.paper_id or "", item.paper_id or "unknown paper")]
        if item.page_number is not None:
            where.append(f"page {item.page_number}")
        if item.table_name:
            where.append(f"{item.table_name}.{item.column_name}")
        header = f"[{number}] ({', '.join(where)})"
        text, cut = truncate_tokens(item.text or "", max(budget - count_tokens(header), 0))
        blocks.append(f"{header}\n{text}" + (" [cut]" if cut else ""))
        budget -= count_tokens(blocks[-1])
        if budget <= 0:
            blocks.append(f"[Note: {len(items) - number} more context item(s) cut at {max_tokens} tokens]")
            break
    return env.redact("\n\n".join(blocks))


_ANSWER_INSTRUCTIONS = (
    "Think step by step, then give only the final answer, following the answer format, in a fenced block:\n"
    "```txt\n<final answer>\n```"
)
_FENCE = re.compile(r"```[ \t]*[A-Za-z]*[^\n]*\n(.*?)```", re.DOTALL)


def extract_answer(response: str) -> str | None:
    """The last fenced block, else the text after an ``[Answer]:`` marker, else the whole response."""
    blocks = _FENCE.findall(response)
    if blocks:
        return blocks[-1].strip() or None
    marker = re.split(r"\[\s*answer\s*\]\s*:?", response, flags=re.I)
    if len(marker) > 1:
        return marker[-1].strip().splitlines()[0].strip() if marker[-1].strip() else None
    return response.strip() or None


def _single_call(llm: ChatClient, messages: list[dict[str, Any]], config: LoopConfig, usage: Usage) -> str:
    reply = llm.complete(messages, max_tokens=config.max_completion_tokens)
    usage.add(reply.usage)
    return reply.text


def _context_evidence(items: Sequence[ContextItem], source: str) -> list[Evidence]:
    return [item.evidence(source) for item in items]


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
        return _recap_method(spec, task, env, llm, config, k)
    if spec.kind == "hdrag":
        return _hdrag_method(spec, task, env, llm, config, k)
    return _single(spec, task, env, llm, config, k)


def _retrieve_or_empty(spec: Method, env: AgentEnv, task: Task, k: int) -> tuple[list[ContextItem], str | None]:
    try:
        return spec.retrieve(env, task, k), None
    except BackendUnavailable as problem:
        return [], str(problem)


def _finish(
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


def _single(spec: Method, task: Task, env: AgentEnv, llm: ChatClient, config: LoopConfig, k: int) -> AgentResult:
    items, unavailable = _retrieve_or_empty(spec, env, task, k)
    usage = Usage()
    trajectory = [
        Turn(
            0,
            "",
            action_type=f"first_retrieval:{spec.name}",
            observation=context_text(env, items),
            evidence=_context_evidence(items, spec.name),
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
        {"role": "user", "content": f"{prompt}\n\n{_ANSWER_INSTRUCTIONS}"},
    ]
    try:
        response = _single_call(llm, messages, config, usage)
    except LLMError as problem:
        return _finish(spec, task, env, trajectory, usage, None, config, str(problem), "llm_error")
    answer = extract_answer(response)
    trajectory.append(Turn(1, response, action_type="answer", observation=""))
    return _finish(spec, task, env, trajectory, usage, answer, config, unavailable)


def _two_stage(
    spec: Method, task: Task, env: AgentEnv, llm: ChatClient, action_format: str, config: LoopConfig, k: int
) -> AgentResult:
    items, unavailable = _retrieve_or_empty(spec, env, task, k)
    usage = Usage()
    trajectory = [
        Turn(
            0,
            "",
            action_type=f"first_retrieval:{spec.name}",
            observation=context_text(env, items),
            evidence=_context_evidence(items, spec.name),
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
        response = strip_response(_single_call(llm, messages, config, usage))
    except LLMError as problem:
        return _finish(spec, task, env, trajectory, usage, None, config, str(problem), "llm_error")
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
    prompt = f"{task_prompt(task, env, show_ids=False)}\n[Context]:\n{context}\n\n{_ANSWER_INSTRUCTIONS}"
    messages = [{"role": "system", "content": SYSTEM_ROLE}, {"role": "user", "content": prompt}]
    try:
        response = _single_call(llm, messages, config, usage)
    except LLMError as problem:
        return _finish(spec, task, env, trajectory, usage, None, config, str(problem), "llm_error")
    trajectory.append(Turn(2, response, action_type="answer"))
    return _finish(spec, task, env, trajectory, usage, extract_answer(response), config, unavailable)


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


# ---------------------------------------------------------------------------------------------------------------
# RECAP


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
    from paperlake.runtime.safe_eval import SafeEvalError, safe_eval

    text = _FENCE.sub(lambda m: m.group(1), expression).strip().strip("`").strip()
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


def _recap_method(spec: Method, task: Task, env: AgentEnv, llm: ChatClient, config: LoopConfig, k: int) -> AgentResult:
    items, unavailable = _retrieve_or_empty(spec, env, task, k)
    usage = Usage()
    trajectory = [
        Turn(
            0,
            "",
            action_type="first_retrieval:recap",
            observation=context_text(env, items),
            evidence=_context_evidence(items, spec.name),
            seeded=True,
        )
    ]
    return _recap_answer(spec, task, env, llm, config, items, usage, trajectory, unavailable)


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


def _hdrag_method(spec: Method, task: Task, env: AgentEnv, llm: ChatClient, config: LoopConfig, k: int) -> AgentResult:
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
            evidence=_context_evidence(candidates, spec.name),
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
            response = _single_call(llm, messages, config, usage)
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
    return _recap_answer(spec, task, env, llm, config, items, usage, trajectory, unavailable)


def _recap_answer(
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
        response = _single_call(llm, messages, config, usage)
    except LLMError as problem:
        return _finish(spec, task, env, trajectory, usage, None, config, str(problem), "llm_error")
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
    return _finish(spec, task, env, trajectory, usage, answer, config, unavailable)
