"""The reading commands: `paperlake sql` (the warehouse, in the agent's sandbox), `paperlake ask` (the agent) and
`paperlake search` (the vector store, its hits printed for a person). Each imports the part of the library it drives
inside its function (the sandbox, the agent, Milvus): `paperlake --help` and the other commands start without them."""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from cli.common import PAPER_HELP, HomeOption, console, err, fail, home_settings, print_rows, resolve_paper
from paperlake.config import Settings
from paperlake.warehouse.read import connect_read_only


def sql(
    query: str = typer.Argument(
        ...,
        help="One reading SQL statement over the warehouse (SELECT/WITH, DESCRIBE, "
        "SHOW, SUMMARIZE, EXPLAIN, catalogue PRAGMAs).",
    ),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
    limit: int = typer.Option(1000, "--limit", min=1, max=1_000_000, help="At most this many rows come back."),
    timeout: float = typer.Option(
        30.0, "--timeout", min=0.1, max=3600, help="Seconds for running and fetching the query."
    ),
    max_bytes: int = typer.Option(
        16_000_000,
        "--max-bytes",
        min=1000,
        max=2_000_000_000,
        help="At most this much result data comes back (long values are cut).",
    ),
) -> None:
    """Query the warehouse read-only, in the same sandbox as the agent: no writes, no file or network access, one
    statement, bounded time, memory and result size (works while an ingest is writing)."""
    from paperlake.runtime.sql_sandbox import (  # deferred: cli start-up
        ReadOnlyWarehouse,
        SQLFailed,
        SQLRefused,
        SQLTimeout,
    )

    settings = home_settings(home)
    try:
        with ReadOnlyWarehouse(settings.warehouse, timeout=timeout, max_rows=limit, max_bytes=max_bytes) as warehouse:
            result = warehouse.query(query)
    except FileNotFoundError as error:
        fail(str(error))
    except SQLRefused as error:
        fail(f"refused: {error}")
    except SQLTimeout as error:
        fail(f"{error} (raise it with --timeout)")
    except (SQLFailed, RuntimeError) as error:
        fail(str(error))
    print_rows(result.columns, result.rows, as_json)
    if result.note:
        err.print(f"[yellow]note:[/] {result.note}", soft_wrap=True)


def ask(
    question: str = typer.Argument(..., help="The question."),
    paper: list[str] = typer.Option(None, "--paper", help="Anchor paper(s), repeatable. " + PAPER_HELP),
    method: str = typer.Option("neusym_rag", "--method"),
    action_format: str = typer.Option("markdown", "--action-format", help="markdown | json | xml | yaml"),
    output_format: str = typer.Option("json", "--output-format", help="json | markdown | string | html"),
    answer_format: Optional[str] = typer.Option(None, "--answer-format"),
    max_turns: int = typer.Option(20, "--max-turns"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not reuse cached LLM responses."),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json", help="Print the whole result (trajectory included) as JSON."),
) -> None:
    """Answer a question with the agent; prints the answer and its citations.

    Needs an OpenAI-compatible endpoint: OPENAI_BASE_URL (e.g. http://127.0.0.1:8000/v1 for vLLM, Ollama's
    /v1), OPENAI_API_KEY (any text for a local server) and PAPERLAKE_LLM_MODEL (default gpt-4o-mini).

    Methods (--method): neusym_rag (default: ReAct with SQL, vector search, view image, calculate, answer),
    iterative_sym_rag, iterative_neu_rag, iterative_classic_rag, two_stage_sym_rag, two_stage_neu_rag,
    two_stage_hybrid_rag, classic_rag, question_only, title_with_abstract, full_text_with_cutoff, mathrag (the
    formula tools), recap, hdrag (table questions)."""
    from agent.run import ask as run_ask  # deferred: cli start-up
    from paperlake.runtime.llm import LLMNotConfigured  # deferred: cli start-up

    settings = home_settings(home)
    paper_ids = [resolve_paper(settings, text) for text in paper] if paper else None
    try:
        result = run_ask(
            question,
            settings,
            paper_ids=paper_ids,
            method=method,
            action_format=action_format,
            output_format=output_format,
            max_turns=max_turns,
            answer_format=answer_format,
            use_cache=not no_cache,
        )
    except LLMNotConfigured as error:
        fail(str(error))
    except (ValueError, FileNotFoundError) as error:
        fail(str(error))
    if as_json:
        print(json.dumps(result.to_dict(), default=str, ensure_ascii=False))
        if not result.answered:
            raise typer.Exit(1)
        return
    if not result.answered:
        fail(f"no answer ({result.status}){': ' + result.error if result.error else ''}")
    console.print(f"[bold]answer:[/] {result.answer}")
    for citation in result.citations:
        console.print(f"  [dim]·[/] {citation.label()}")
    usage = result.usage.to_dict()
    console.print(
        f"[dim]{len(result.trajectory)} turns, {usage.get('prompt_tokens', 0)}+"
        f"{usage.get('completion_tokens', 0)} tokens, cost {usage.get('cost', 0)}[/]"
    )


def search(
    query: str = typer.Argument(..., help="What to look for."),
    collection: Optional[str] = typer.Option(
        None,
        "--collection",
        "-c",
        help="Collection (default: the BM25+dense hybrid one, the best route on every measured set; MiniLM dense "
        "where it is not built).",
    ),
    view: Optional[str] = typer.Option(None, "--view", help="Restrict to one warehouse view, table.column."),
    filter_expr: str = typer.Option(
        "",
        "--filter",
        help="Milvus boolean filter on pdf_id, page_number, "
        "table_name, column_name, primary_key: == != < > <= >= in [...] not in [...], "
        "like 'abc%' (strings), and or not, parentheses; e.g. \"pdf_id == '<id>' and "
        'page_number <= 3".',
    ),
    paper: Optional[str] = typer.Option(None, "--paper", help="Only this paper's entities. " + PAPER_HELP),
    limit: int = typer.Option(5, "--limit", "-k", min=1, max=16384),
    hybrid: bool = typer.Option(
        False,
        "--hybrid",
        help="Fuse BM25 and dense results, also for a --collection of one route (the default without --collection: "
        "the fusion of schemas/collections.yaml's hybrid block, by default a convex combination of normalised "
        "scores, BM25/dense weights 0.6/0.4).",
    ),
    fusion: Optional[str] = typer.Option(
        None, "--fusion", help="convex | rrf (here) | milvus-rrf | milvus-weighted (inside Milvus, hybrid_search)."
    ),
    weights: Optional[str] = typer.Option(None, "--weights", help="Fusion weights, e.g. 0.3,0.7 (BM25, dense)."),
    rerank: bool = typer.Option(
        True,
        "--rerank/--no-rerank",
        help="A fused search over every view reorders its candidates after the fusion (docs/retrieval.md); "
        "--no-rerank shows the fused order.",
    ),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Vector search over the Milvus collections; larger scores are better, whatever the backend returns. Hits come
    in the search's order: a fused search over every view is reranked, and each hit keeps its fused score."""
    from paperlake.vectors.config import load_config  # deferred: cli start-up
    from paperlake.vectors.filters import FilterError, validate_filter  # deferred: cli start-up
    from paperlake.vectors.search import SearchFailed  # deferred: pymilvus
    from paperlake.vectors.search import search as run_search  # deferred: pymilvus
    from paperlake.vectors.store import VectorStore  # deferred: pymilvus

    for library in ("pymilvus", "milvus_lite"):  # their error logs would repeat, with a traceback, what fail() says
        logging.getLogger(library).setLevel(logging.CRITICAL)
    settings = home_settings(home)
    config = load_config()
    # without a collection, the hybrid one: above BM25 and dense alone on every question set (docs/retrieval.md)
    fused_by_default = (
        collection is None and not hybrid and any(s.name == config.hybrid_collection for s in config.collections)
    )
    hybrid = hybrid or fused_by_default
    name = collection or (config.hybrid_collection if hybrid else DENSE_COLLECTION)
    table_name = column_name = None
    if view:
        table_name, _, column_name = view.partition(".")
        if not column_name:
            fail(f"--view takes table.column (e.g. chunks.text_content), got {view!r}")
        chosen = next((spec for spec in config.collections if spec.name == name), None)
        if collection is None and not hybrid and chosen is not None and view in chosen.without_views:
            # the default dense collection holds no vectors of this view (the table lines): BM25 holds every cell
            name = next(s.name for s in config.collections if s.modality == "text" and s.has_bm25 and not s.is_hybrid)
            if not as_json:
                typer.echo(f"{view} has no dense vectors (schemas/collections.yaml, without_views): searching {name}")
        elif chosen is not None and not chosen.is_hybrid and view in chosen.without_views:
            fail(
                f"{name} holds no {view} vectors (without_views in schemas/collections.yaml): search it in "
                "text_bm25_en, or with --hybrid"
            )
    try:
        route_weights = [float(w) for w in weights.split(",")] if weights else None
    except ValueError:
        fail(f"--weights takes numbers separated by commas (BM25, dense), got {weights!r}")
    if route_weights and not all(math.isfinite(w) and w >= 0 for w in route_weights):
        fail(f"--weights must be finite and not negative, got {weights!r}")
    try:
        validate_filter(filter_expr)  # a bad filter is reported before any store is opened
    except FilterError as error:
        fail(str(error))
    if paper:
        paper_clause = f"pdf_id == '{resolve_paper(settings, paper)}'"
        filter_expr = f"({filter_expr}) and {paper_clause}" if filter_expr.strip() else paper_clause
    if settings.milvus_uri.endswith(".db") and not Path(settings.milvus_uri).expanduser().exists():
        fail(
            f"nothing has been ingested into {settings.home} yet (no vector store at {settings.milvus_uri}); "
            "run `paperlake ingest` first"
        )
    try:
        store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings)
    except Exception as error:  # a lock held by a running ingest, an unreachable server, …
        fail(f"cannot open the vector store {settings.milvus_uri}: {' '.join(str(error).split())}")
    try:
        if not any(store.client.has_collection(spec.name) for spec in store.active_specs()):
            fail(
                f"nothing has been ingested into the vector store {settings.milvus_uri} yet; "
                "run `paperlake ingest` first"
            )
        if fused_by_default and not store.is_available(config.collection(name)):
            name, hybrid = DENSE_COLLECTION, False  # a configuration without a live hybrid route
        hits = run_search(
            store, query, name, table_name, column_name, filter_expr, limit, hybrid, route_weights, fusion, rerank
        )
    except FilterError as error:
        fail(str(error))
    except KeyError as error:
        fail(str(error.args[0]) if error.args else repr(error))
    except (ValueError, SearchFailed) as error:
        fail(str(error))
    finally:
        store.close()
    columns = ["score", "pdf_id", "page_number", "table_name", "column_name", "primary_key", "content"]
    rows = [
        (
            round(h.score, 4),
            h.pdf_id,
            h.page_number,
            h.table_name,
            h.column_name,
            h.primary_key,
            h.text if h.text is not None else h.bbox,
        )
        for h in hits
    ]
    if as_json:
        print_rows(columns, rows, True)
        return
    _print_hits(name, query, rows, _paper_titles(settings, {str(h.pdf_id) for h in hits}))


DENSE_COLLECTION = "text_sentence_transformers_all_minilm_l6_v2"
SEARCH_CONTENT_LINES = 6  # lines of a hit's content shown before "…"


def _paper_titles(settings: Settings, paper_ids: set[str]) -> dict[str, str]:
    """paper id -> title from the warehouse, for the hits' headings; empty when there is no warehouse yet."""
    if not paper_ids or not settings.warehouse.exists():
        return {}
    try:
        with connect_read_only(settings.warehouse) as con:
            marks = ", ".join("?" for _ in paper_ids)
            return {
                str(pid): title
                for pid, title in con.execute(
                    "select cast(paper_id as varchar), title from metadata "
                    f"where cast(paper_id as varchar) in ({marks})",
                    sorted(paper_ids),
                ).fetchall()
                if title
            }
    except Exception:  # a warehouse being swapped in, or one without metadata: headings fall back to the id
        return {}


def _print_hits(collection: str, query: str, rows: list[tuple], titles: dict[str, str]) -> None:
    """One block per hit, readable at any width: rank, score, paper title, page and view on one line, then the
    content wrapped to the terminal (query words highlighted), at most :data:`SEARCH_CONTENT_LINES` lines."""
    console.print(Text(f"{collection}: {query}", style="bold"))
    if not rows:
        console.print("no hits")
        return
    terms = sorted({w for w in re.findall(r"\w+", query.lower()) if len(w) > 2 or w.isdigit()}, key=len, reverse=True)
    width = max(console.width - 4, 20)
    for rank, (score, pdf_id, page, table, column, key, content) in enumerate(rows, start=1):
        title = titles.get(str(pdf_id)) or str(pdf_id)
        heading = Text(f"{rank}. ", style="bold")
        heading.append(f"{score:.4f}", style="cyan")
        heading.append(f"  {title}", style="bold")
        heading.append(f"  p. {page} · {table}.{column}", style="dim")
        console.print(heading)
        text = Text(" ".join(str(content if content is not None else "").split()))
        text.highlight_words(terms, style="bold yellow", case_sensitive=False)
        lines = text.wrap(console, width)
        if len(lines) > SEARCH_CONTENT_LINES:
            lines = lines[:SEARCH_CONTENT_LINES]
            lines[-1].rstrip()
            lines[-1].truncate(width - 2)
            lines[-1].append(" …")
        block = Text("\n").join(Text("    ").append_text(line) for line in lines)
        console.print(block, soft_wrap=True)
        console.print()
