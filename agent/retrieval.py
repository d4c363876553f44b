"""The first retrievals: what each method reads before (or instead of) asking the model, deterministic and
without an LLM (the retrieval-only metrics score them), and their items written out as a prompt's context.

The views of one collection are ranked together by score (:func:`neural_items`); lists of different collections or
stores are interleaved by rank (their scores do not compare); a view the method's collection holds no vectors of is
searched by BM25; without vectors, some fall back to keyword matching in SQL. HD-RAG's
ensemble over table lines is :mod:`agent.hdrag`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from agent.backends import BackendUnavailable, quote_filter_list
from agent.env import AgentEnv
from agent.evidence import Evidence, snippet
from agent.formats import count_tokens, truncate_tokens
from agent.task import Task

FULL_TEXT_CUTOFF_TOKENS = 5000
CONTEXT_TOKENS = 12_000
_STOPWORDS = frozenset(
    "a an and are as at be by can could did do does for from has have how in into is it its many much of on or "
    "paper papers that the their them there these this those to was were what when where which who whom whose why "
    "with would according answer proposed used using does than then also between both each other such only".split()
)


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
        ranked.append([_item(h, searched, located.get(str(h.primary_key), (None, None, None))[2]) for h in hits])
    return _interleave(ranked, k)


def _item(hit: Any, source: str, located_bbox: tuple | None) -> ContextItem:
    return ContextItem(
        text=hit.text or "",
        paper_id=str(hit.pdf_id),
        page_number=hit.page_number,
        table_name=hit.table_name,
        column_name=hit.column_name,
        row_id=str(hit.primary_key),
        bbox=tuple(hit.bbox) if hit.bbox else located_bbox,
        score=float(hit.score),
        source=source,
    )


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
    ("images", ("image_caption", "image_text")),
)


def symbolic_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
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


def title_abstract_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
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


def full_text_items(env: AgentEnv, task: Task, k: int, cutoff: int = FULL_TEXT_CUTOFF_TOKENS) -> list[ContextItem]:
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


# RECAP computes over header-addressed cells: the row and column lines name each value's headers.
RECAP_VIEWS = (
    ("table_rows", "row_text"),
    ("table_columns", "column_text"),
    ("tables", "table_content"),
    ("chunks", "text_content"),
    ("tables", "table_caption"),
)


def classic_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    return _vector_items(env, task, [("chunks", "text_content")], k)


def neural_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    """One ranking over every encodable text view of one collection (chunks, tables, figures and their words,
    equations, references with their citing sentences, the front matter): within a collection and a query the
    scores compare, so a view earns its place by its score, not by its turn. The configured collection if one is
    set, else the hybrid one (BM25 and dense fused), else the classic one."""
    if env.vectors is None:
        raise BackendUnavailable("no vector collections: build them with the vector assets (paperlake ingest)")
    collection = env.classic_collection() if env.default_collection else None
    collection = collection or _hybrid_collection(env) or env.classic_collection()
    if collection is None:
        raise BackendUnavailable("no text vector collection is built")
    papers = scope_papers(task, env)
    scope = f"pdf_id in {quote_filter_list(papers)}" if papers else ""
    # a figure's caption and words, a table's caption and content are one row each: ask for more, keep k rows, a
    # row's cells as one item (its best-ranked cell's place, their texts joined)
    hits = env.vectors.search(task.question, collection, None, None, scope, 2 * k)
    items: list[ContextItem] = []
    rows: dict[tuple[str, str], ContextItem] = {}
    for hit in hits:
        row = (hit.table_name, str(hit.primary_key))
        if row in rows:
            item = rows[row]
            if hit.text and hit.text not in item.text:
                item.text = f"{item.text}\n{hit.text}"
                item.column_name = f"{item.column_name},{hit.column_name}"
            continue
        if len(items) == k:
            continue
        rows[row] = _item(hit, collection, None)
        items.append(rows[row])
    for table in {item.table_name for item in items if item.bbox is None}:
        located = env.locate(table, [item.row_id for item in items if item.table_name == table and not item.bbox])
        for item in items:
            if item.table_name == table and item.bbox is None and item.row_id in located:
                item.bbox = located[item.row_id][2]
    return items


def _hybrid_collection(env: AgentEnv) -> str | None:
    """The text collection that fuses a BM25 and a dense route, when one is built."""
    for info in env.collections():
        metrics = {m.strip().upper() for m in info.metric.split(",")}
        if info.modality == "text" and "BM25" in metrics and len(metrics) > 1:
            return info.name
    return None


def hybrid_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    neural = neural_items(env, task, k) if env.vectors is not None else []
    return _interleave([neural, symbolic_items(env, task, k)], k)


def math_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    textual = classic_items(env, task, k) if env.vectors is not None else symbolic_items(env, task, k)
    return _interleave([_formula_items(env, task, k), textual], k)


def recap_items(env: AgentEnv, task: Task, k: int) -> list[ContextItem]:
    if env.vectors is None:
        return symbolic_items(env, task, k)
    return _vector_items(env, task, RECAP_VIEWS, k)


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
