"""The `paperlake` command. Dagster is imported only inside `ingest` (the library itself never imports it)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from cli.render import render_rows
from paperlake.config import Settings
from paperlake.warehouse.read import connect_read_only

app = typer.Typer(
    help="paperlake: conference volumes → a queryable, trustworthy knowledge base.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 1) -> None:
    """One line whatever the terminal's width; the message (often quoting the user's input) is never read as markup."""
    _one_line(message)
    raise typer.Exit(code)


def _settings(home: Optional[Path] = None, **overrides: Any) -> Settings:
    return Settings.from_env(home=home.resolve() if home else None, **overrides)


def _print_rows(columns: list[str], rows: list[tuple], as_json: bool, title: str | None = None) -> None:
    if as_json:
        print(json.dumps([dict(zip(columns, row)) for row in rows], default=str, ensure_ascii=False))
        return
    render_rows(console, columns, rows, title)


HomeOption = typer.Option(None, "--home", help="PAPERLAKE_HOME (default ./data).")
PAPER_HELP = "A paper: its id, its key as the Dagster UI shows it (volume/file-stem), or words of its title."


def _inboxes(inboxes: list[Path] | None) -> list[Path]:
    if not inboxes:
        inboxes = list(Settings.from_env().inboxes)
    if not inboxes:
        _fail("no inbox given: pass a folder (e.g. ../shared/corpus/inbox) or set PAPERLAKE_INBOX")
    missing = [str(p) for p in inboxes if not p.is_dir()]
    if missing:
        _fail(f"inbox folder(s) not found: {', '.join(missing)}")
    return [p.resolve() for p in inboxes]


def _run_ingest(inboxes: list[Path], settings: Settings, rebuild_warehouse: bool = False, **enrich: Any) -> None:
    from orchestration.run import ingest as run_ingest

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=err,
        transient=False,
    ) as progress:
        task = progress.add_task("papers", total=None, last="planning…")

        def notify(key: str, status: str) -> None:
            progress.update(task, advance=1, last=f"{key}: {status}")

        from paperlake.lake.inbox import scan_volumes  # the plan's size sets the bar's total
        from paperlake.lake.pipeline import plan_ingest
        from paperlake.lake.store import Lake

        scan = scan_volumes(inboxes, settings.mineru_dir)
        plan = plan_ingest(scan.sources, Lake(settings.lake), settings, held=scan.held)
        progress.update(task, total=len(plan.to_parse) + len(plan.removed), last=plan.summary())
        summary = run_ingest(inboxes, settings, progress=notify, rebuild_warehouse=rebuild_warehouse, **enrich)
    console.print(f"[bold]plan:[/] {summary.plan.summary()}")
    console.print(
        f"parsed {len(summary.published)}, removed {len(summary.removed)}; "
        f"warehouse {'rebuilt' if summary.warehouse_built else 'unchanged'}; "
        f"formulas {', '.join(summary.formulas_built) or 'unchanged'}; "
        f"vectors {len(summary.vectors_synced)} paper(s) synced; "
        f"{len(summary.failures)} failure(s) ({summary.step_seconds.get('total', 0):.1f}s)"
    )
    if summary.enrichment_skipped:
        console.print(f"enrichment skipped: {escape(summary.enrichment_skipped)}")
    elif summary.enriched or summary.enrichment_pending or summary.enrichment_usage.get("calls"):
        usage = summary.enrichment_usage
        console.print(
            f"enrichment: {len(summary.enriched)} paper(s) enriched, {len(summary.enrichment_pending)} "
            f"pending; {usage.get('calls', 0)} call(s) ({usage.get('cached_calls', 0)} from the cache), "
            f"{usage.get('tokens', 0)} tokens, ${usage.get('cost_usd', 0.0):.4f}, "
            f"{usage.get('errors', 0)} refused answer(s)"
        )
        for key, why in sorted(summary.enrichment_pending.items()):
            console.print(f"  pending {key}: {escape(why)}")
    for line in summary.healed:
        err.print(f"[yellow]healed[/] {escape(line)}", soft_wrap=True)
    for stage, reason in summary.stale.items():
        console.print(f"  rebuilt {stage}: {reason}")
    if summary.orphans_deleted:
        console.print(f"  deleted {summary.orphans_deleted} vector entities of papers no store knows any more")
    for volume, report in sorted(summary.quality.items()):
        line = (
            f"retrieval quality {volume} ({report['method']}, {report['probes']} probes): answer@1 "
            f"{report['answer_at_1']:.3f}, answer@5 {report['answer_at_5']:.3f}, page@5 {report['page_at_5']:.3f}"
        )
        if report.get("passed"):
            console.print(line)
        else:
            err.print(
                f"[yellow]warning[/] {line}: below the threshold {report['threshold']} "
                f"{escape('; '.join(report.get('problems') or []))}",
                soft_wrap=True,
            )
    for failure in summary.failures:
        err.print(f"[yellow]failed[/] {failure.line()}", soft_wrap=True)
    if settings.warehouse.exists():
        status(home=settings.home, as_json=False)
    if not summary.ok:
        raise typer.Exit(1)


@app.command()
def ingest(
    inboxes: list[Path] = typer.Argument(None, help="Inbox folders holding <volume>/*.pdf (default $PAPERLAKE_INBOX)."),
    backend: str = typer.Option(None, "--backend", help="auto | pymupdf | mineru (default auto)."),
    mineru_dir: Optional[Path] = typer.Option(None, "--mineru-dir", help="Folder of MinerU outputs, one per PDF stem."),
    home: Optional[Path] = HomeOption,
    rebuild_warehouse: bool = typer.Option(False, "--rebuild-warehouse", help="Run dbt even if nothing changed."),
) -> None:
    """Ingest new, changed and removed papers (runs the Dagster asset graph in process); with an LLM endpoint
    configured, also enriches them (summaries, tl;dr, tags) within PAPERLAKE_LLM_BUDGET."""
    folders = _inboxes(inboxes)
    if mineru_dir is not None and not mineru_dir.is_dir():
        _fail(f"--mineru-dir {mineru_dir} is not a folder")
    settings = _settings(home, backend=backend, mineru_dir=mineru_dir.resolve() if mineru_dir else None)
    _run_ingest(folders, settings, rebuild_warehouse)


@app.command()
def enrich(
    inboxes: list[Path] = typer.Argument(
        None,
        help="Inbox folders (default $PAPERLAKE_INBOX): new papers are "
        "ingested first, then the lake's papers are enriched.",
    ),
    views: Optional[str] = typer.Option(
        None,
        "--views",
        help="Kinds or views to enrich, comma-separated: "
        "page_summary, section_summary, table_summary, image_summary, tldr, tags, "
        "row_summary, column_summary (or pages, tables, table_rows, …).",
    ),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="At most this many papers."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the calls and the worst-case tokens and cost; call nothing."
    ),
    retry_errors: bool = typer.Option(False, "--retry-errors", help="Ask again the items whose answer was refused."),
    mineru_dir: Optional[Path] = typer.Option(None, "--mineru-dir", help="Folder of MinerU outputs, one per PDF stem."),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json", help="With --dry-run: the estimate as JSON."),
) -> None:
    """LLM/VLM enrichment of ingested papers: NeuSym-RAG's summaries, tl;dr and tags (HD-RAG's row/column summaries
    with --views), only for items whose content, prompt or model changed, then the warehouse and vectors."""
    from paperlake.enrichment import dry_run as estimate_run
    from paperlake.enrichment import not_configured_reason, resolve_kinds
    from paperlake.enrichment.runner import Budget, BudgetError

    settings = _settings(home, mineru_dir=mineru_dir.resolve() if mineru_dir else None)
    try:
        kinds = resolve_kinds(views or settings.enrich_kinds)
        Budget.parse(settings.llm_budget)
    except (ValueError, BudgetError) as problem:
        _fail(str(problem))
    if dry_run:
        plan = estimate_run(settings, kinds, retry_errors=retry_errors)
        papers = sorted(plan["papers"])[:limit] if limit else sorted(plan["papers"])
        if as_json:
            print(json.dumps(plan | {"papers": {k: plan["papers"][k] for k in papers}}, default=str))
            return
        total = plan["total"]
        console.print(
            f"would ask {total['calls']} item(s) of {len(plan['papers'])} paper(s) "
            f"({', '.join(f'{k} {n}' for k, n in total['by_kind'].items()) or 'nothing'}): at most "
            f"{total['prompt_tokens']} prompt + {total['completion_tokens']} completion tokens, "
            f"${total['cost_usd']:.4f} at PAPERLAKE_LLM_PRICES; models {plan['models']['text']} / "
            f"{plan['models']['vision']} (vision)"
        )
        return
    reason = not_configured_reason(settings)
    if reason:
        _fail(f"cannot enrich: {reason}")
    _run_ingest(_inboxes(inboxes), settings, enrich_kinds=kinds, enrich_limit=limit, retry_errors=retry_errors)


@app.command()
def status(home: Optional[Path] = HomeOption, as_json: bool = typer.Option(False, "--json")) -> None:
    """Volumes, papers, failures and the formula graph in the warehouse."""
    import duckdb

    settings = _settings(home)
    try:
        with connect_read_only(settings.warehouse) as con:
            volumes = con.execute(
                "select volume, venue, num_papers, num_pages, num_failed, llm_calls, llm_tokens, "
                "round(llm_cost_usd, 4), llm_errors from volumes order by volume"
            ).fetchall()
            enriched = dict(
                con.execute(
                    "select 'page_summary', count(page_summary) from pages union all "
                    "select 'section_summary', count(section_summary) from sections union all "
                    "select 'table_summary', count(table_summary) from tables union all "
                    "select 'image_summary', count(image_summary) from images "
                    "where parent_image_id is null union all "
                    "select 'tldr', count(tldr) from metadata union all "
                    "select 'tags', count(tags) from metadata union all "
                    "select 'row_summary', count(row_summary) from table_rows union all "
                    "select 'column_summary', count(column_summary) from table_columns"
                ).fetchall()
            )
            counts = {
                t: con.execute(f'select count(*) from "{t}"').fetchone()[0]
                for t in (
                    "metadata",
                    "pages",
                    "sections",
                    "chunks",
                    "tables",
                    "table_cells",
                    "table_rows",
                    "table_columns",
                    "images",
                    "equations",
                    "reference",
                )
            }
            errors = con.execute("select paper_key, stage, reason from ingest_errors order by paper_key").fetchall()
            backends = dict(con.execute("select backend, count(*) from metadata group by backend").fetchall())
            try:
                formulas = dict(
                    zip(
                        ("equations", "formulas", "templated", "validated", "merged_groups", "cross_paper_groups"),
                        con.execute(
                            "select (select count(*) from equations), count(*), count(template), "
                            "count(*) filter (where status = 'validated'), "
                            "count(*) filter (where occurrence_count > 1), "
                            "count(*) filter (where len(paper_ids) > 1) from formulas"
                        ).fetchone(),
                    )
                )
            except duckdb.CatalogException:
                formulas = {}
    except FileNotFoundError as error:
        _fail(str(error))
    report = {
        "home": str(settings.home),
        "volumes": [
            dict(
                zip(
                    (
                        "volume",
                        "venue",
                        "papers",
                        "pages",
                        "failed",
                        "llm_calls",
                        "llm_tokens",
                        "llm_cost_usd",
                        "llm_errors",
                    ),
                    v,
                )
            )
            for v in volumes
        ],
        "rows": counts,
        "backends": backends,
        "formulas": formulas,
        "enriched": enriched,
        "ingest_errors": [dict(zip(("paper_key", "stage", "reason"), e)) for e in errors],
    }
    if as_json:
        print(json.dumps(report, default=str))
        return
    columns = ["volume", "venue", "papers", "pages", "failed", "llm calls", "llm tokens", "llm $", "llm errors"]
    if not any(v[5] for v in volumes):  # nothing enriched yet: the LLM columns would be all zero
        columns, volumes = columns[:5], [v[:5] for v in volumes]
    _print_rows(columns, volumes, False, title="volumes")
    console.print("rows: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if any(enriched.values()):
        console.print("enriched: " + ", ".join(f"{k} {v}" for k, v in enriched.items()))
    console.print("backends: " + ", ".join(f"{k} {v}" for k, v in backends.items()))
    if formulas:
        console.print("formula graph: " + ", ".join(f"{k} {v}" for k, v in formulas.items()))
    if errors:
        _print_rows(["paper_key", "stage", "reason"], errors, False, title="ingest errors")


@app.command()
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
    from paperlake.runtime.sql_sandbox import ReadOnlyWarehouse, SQLFailed, SQLRefused, SQLTimeout

    settings = _settings(home)
    try:
        with ReadOnlyWarehouse(settings.warehouse, timeout=timeout, max_rows=limit, max_bytes=max_bytes) as warehouse:
            result = warehouse.query(query)
    except FileNotFoundError as error:
        _fail(str(error))
    except SQLRefused as error:
        _fail(f"refused: {error}")
    except SQLTimeout as error:
        _fail(f"{error} (raise it with --timeout)")
    except (SQLFailed, RuntimeError) as error:
        _fail(str(error))
    _print_rows(result.columns, result.rows, as_json)
    if result.note:
        err.print(f"[yellow]note:[/] {result.note}", soft_wrap=True)


def main() -> None:  # pragma: no cover - console entry
    """The console entry: a failure a user can act on is one line; anything else is one line too, its traceback
    written to ``$PAPERLAKE_HOME/logs/cli-errors.log`` for a bug report."""
    from paperlake.runtime.healing import StoreUnreadable

    quiet_third_party()
    try:
        code = app(sys.argv[1:], standalone_mode=False)  # click returns an Exit's code instead of exiting
    except KeyboardInterrupt:
        err.print("interrupted")
        code = 130
    except StoreUnreadable as problem:
        code = _one_line(str(problem))
    except OSError as problem:  # a full disk, a read-only home, a file that cannot be opened
        where = f" ({problem.filename})" if getattr(problem, "filename", None) else ""
        code = _one_line(
            f"{problem.strerror or problem}{where}: check free space, permissions or the path, then run again"
        )
    except Exception as problem:
        if hasattr(problem, "show") and hasattr(problem, "exit_code"):  # click's usage errors, as click shows them
            problem.show()
            code = problem.exit_code
        else:  # the last guard between a bug and the user's terminal
            code = _one_line(f"{type(problem).__name__}: {problem} (a bug: the traceback is in {_log_traceback()})")
    raise SystemExit(code if isinstance(code, int) else 0)


def _one_line(message: str) -> int:
    err.print(f"[bold red]error:[/] {escape(' '.join(str(message).split()))}", soft_wrap=True)
    return 1


def _log_traceback() -> str:
    import traceback

    try:
        logs = Settings.from_env().home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        path = logs / "cli-errors.log"
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"$ paperlake {' '.join(sys.argv[1:])}\n{traceback.format_exc()}\n")
        return str(path)
    except OSError:
        traceback.print_exc()
        return "the output above"


def quiet_third_party() -> None:
    """The console entry hides what the libraries print that a user cannot act on (tests call ``app`` and see it
    all): Dagster's beta/preview notices for the APIs this project chose deliberately, pymilvus's note that Milvus
    Lite has no server timestamp, and Hugging Face's progress bars and advice. paperlake's own warnings, errors and
    every library's errors still print."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", message=r".*is currently in (beta|preview)")
    warnings.filterwarnings("ignore", message=r".*(Beta|Preview)Warning")
    # pymilvus configures its loggers when imported (dictConfig: levels reset, children included), which keeps a
    # logger's filters only: errors pass, warnings and below do not.
    for name in (
        "pymilvus.client.iterator.query_iterator",
        "pymilvus.client.iterator.search_iterator",
        "milvus_lite",
        "sentence_transformers",
        "transformers",
        "huggingface_hub",
    ):
        logging.getLogger(name).addFilter(lambda record: record.levelno >= logging.ERROR)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@app.command()
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
    from agent.run import ask as run_ask
    from paperlake.runtime.llm import LLMNotConfigured

    settings = _settings(home)
    paper_ids = [_resolve_paper(settings, text) for text in paper] if paper else None
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
        _fail(str(error))
    except (ValueError, FileNotFoundError) as error:
        _fail(str(error))
    if as_json:
        print(json.dumps(result.to_dict(), default=str, ensure_ascii=False))
        if not result.answered:
            raise typer.Exit(1)
        return
    if not result.answered:
        _fail(f"no answer ({result.status}){': ' + result.error if result.error else ''}")
    console.print(f"[bold]answer:[/] {result.answer}")
    for citation in result.citations:
        console.print(f"  [dim]·[/] {citation.label()}")
    usage = result.usage.to_dict()
    console.print(
        f"[dim]{len(result.trajectory)} turns, {usage.get('prompt_tokens', 0)}+"
        f"{usage.get('completion_tokens', 0)} tokens, cost {usage.get('cost', 0)}[/]"
    )


class _EvalGroup(typer.core.TyperGroup):
    """`paperlake eval FILE …` scores a set (the `run` command, kept as the default so the AirQA habit works);
    `paperlake eval synthesize …` and `paperlake eval quality` are the self-evaluation commands."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


eval_app = typer.Typer(
    cls=_EvalGroup,
    no_args_is_help=True,
    help="Evaluate on AirQA-format sets (`paperlake eval FILE`), score a predictions file (`eval score`), "
    "synthesise sets from a volume, and show each volume's retrieval quality.",
)
app.add_typer(eval_app, name="eval")


@eval_app.command("run")
def evaluate_cmd(
    data: Path = typer.Argument(..., help="AirQA-format examples (.jsonl)."),
    method: str = typer.Option("neusym_rag", "--method"),
    limit: Optional[int] = typer.Option(None, "--limit"),
    out: Optional[Path] = typer.Option(None, "--out", help="Output folder (default $PAPERLAKE_HOME/eval/<method>)."),
    retrieval_only: bool = typer.Option(
        False, "--retrieval-only", help="No LLM: score each method's first retrieval (answer-bearing recall@k, Hit@k)."
    ),
    k: int = typer.Option(5, "--k"),
    action_format: str = typer.Option("markdown", "--action-format"),
    output_format: str = typer.Option("json", "--output-format"),
    max_turns: int = typer.Option(20, "--max-turns"),
    home: Optional[Path] = HomeOption,
) -> None:
    """Evaluate a method on an AirQA-format set: trajectories, predictions, and a report per tag."""
    from agent.loop import LoopConfig
    from agent.run import answer, open_env
    from agent.run import retrieval_only as run_retrieval_only
    from paperlake.evaluation.dataset import evaluate, load_dataset
    from paperlake.runtime.llm import ChatClient, LLMNotConfigured

    settings = _settings(home)
    try:
        dataset = load_dataset(data)
    except OSError as error:
        _fail(f"cannot read: {error}")
    for line in dataset.warnings():
        err.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True)
    examples = dataset.examples[: limit or None]
    if not examples:
        _fail(f"no example of {data} could be read")
    out = out or settings.home / "eval" / method
    out.mkdir(parents=True, exist_ok=True)
    if retrieval_only:
        try:
            metrics = run_retrieval_only(examples, settings, method, k)
        except (ValueError, FileNotFoundError) as error:
            _fail(str(error))
        report = metrics.to_dict()
        (out / "retrieval.json").write_text(json.dumps(report, indent=2, default=str))
        if metrics.error:
            _fail(f"{method}: {metrics.error}")
        rows = [
            (tag, f"{v.get('hit_at_k', 0):.3f}", f"{v.get('recall_at_k', 0):.3f}", v.get("count", ""))
            for tag, v in sorted(metrics.by_tag().items())
        ]
        _print_rows(
            ["tag", f"hit@{k}", f"recall@{k}", "n"],
            [("overall", f"{metrics.hit_at_k:.3f}", f"{metrics.recall_at_k:.3f}", len(metrics.scored)), *rows],
            False,
            title=f"{method}: first retrieval, k={k}",
        )
        console.print(f"written: {out / 'retrieval.json'}")
        return
    try:
        llm = ChatClient.from_settings(settings)
    except LLMNotConfigured as error:
        _fail(str(error))
    predictions: dict[str, Any] = {}
    (out / "trajectories").mkdir(exist_ok=True)
    with (
        open_env(settings, output_format, action_format) as env,
        Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
        ) as progress,
    ):
        task = progress.add_task(method, total=len(examples))
        for example in examples:
            result = answer(example, env, llm, method, action_format, LoopConfig(max_turns=max_turns))
            predictions[example.uuid] = result.answer
            (out / "trajectories" / f"{example.uuid}.json").write_text(
                json.dumps(result.to_dict(), indent=1, default=str, ensure_ascii=False)
            )
            progress.advance(task)
    with open(out / "predictions.jsonl", "w") as handle:
        for uuid, prediction in predictions.items():
            handle.write(json.dumps({"uuid": uuid, "answer": prediction}, default=str, ensure_ascii=False) + "\n")
    report = evaluate(examples, predictions, judge=llm)
    (out / "report.json").write_text(report.to_json())
    (out / "report.md").write_text(report.to_markdown())
    report.to_png(out / "report.png")
    console.print(report.to_markdown())
    console.print(f"written: {out}")


@eval_app.command("score")
def eval_score(
    data: Path = typer.Argument(..., help="AirQA, M3SciQA or SciDQA examples (.jsonl)."),
    predictions: Path = typer.Argument(..., help='Predictions (.jsonl): one {"uuid": ..., "answer": ...} per line.'),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Write result.json, scores.jsonl, wrong.jsonl (gold beside predicted) and report.md here."
    ),
    as_json: bool = typer.Option(False, "--json", help='The authors\' result: {"all": {...}, "<tag>": {...}}.'),
    home: Optional[Path] = HomeOption,
) -> None:
    """Score a predictions file (from any system) the way NeuSym-RAG does: matched by uuid, a missing prediction
    counts as wrong. LLM-judged examples use the configured endpoint (OPENAI_BASE_URL, OPENAI_API_KEY,
    PAPERLAKE_LLM_MODEL); without one they are reported as not scored."""
    from paperlake.evaluation.scoring import score_file, write_outputs
    from paperlake.runtime.llm import ChatClient

    for path in (data, predictions):
        if not path.is_file():
            _fail(f"not a file: {path}")
    settings = _settings(home)
    judge = ChatClient.from_settings(settings, temperature=0.0) if settings.llm_configured else None
    try:
        scored = score_file(data, predictions, judge)
    except OSError as error:
        _fail(f"cannot read: {error}")
    for line in scored.warnings():
        err.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True)
    if not scored.dataset.examples:
        _fail(f"no example of {data} could be read (see the warnings above)")
    if out is not None:
        written = write_outputs(scored, out)
        err.print(f"written: {', '.join(str(p) for p in written)}", soft_wrap=True, markup=False, highlight=False)
    results = scored.report.results()
    if as_json:
        print(json.dumps(results, ensure_ascii=False))
        return
    report = scored.report
    columns = ["tag", "correct", "count", "score"] + (["not scored"] if report.not_scored else [])
    rows = [
        (tag, value["correct"], value["count"], report.format_score(value["score"]))
        + ((value.get("not_scored", 0),) if report.not_scored else ())
        for tag, value in [*list(results.items())[1:], ("all", results["all"])]
    ]
    _print_rows(columns, rows, False, title=f"{data.name}: {len(scored.dataset.examples)} examples")


@eval_app.command("synthesize")
def eval_synthesize(
    volume: Optional[str] = typer.Argument(None, help="Volume (e.g. emnlp2024); default: every volume."),
    with_llm: bool = typer.Option(
        False,
        "--with-llm",
        help="ExTrActor: explorer, tracker and actor through the "
        "configured endpoint (else: the offline probes, no LLM).",
    ),
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        help="Write the AirQA set here (.jsonl); with --with-llm the "
        "trajectories go beside it as <name>.trajectories.jsonl.",
    ),
    limit: int = typer.Option(20, "--limit", help="--with-llm: contexts per volume."),
    method: str = typer.Option("neusym_rag", "--method", help="--with-llm: the actor's agent method."),
    keep_unverified: bool = typer.Option(
        False,
        "--keep-unverified",
        help="--with-llm: keep examples the actor did not answer correctly, marked extractor.status = unverified.",
    ),
    max_turns: int = typer.Option(8, "--max-turns"),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Questions generated from a volume: offline probes (default) or ExTrActor's LLM-written, agent-verified ones."""
    from paperlake.evaluation.sets import volumes as warehouse_volumes
    from paperlake.evaluation.sets import write_volume_set

    settings = _settings(home)
    if not settings.warehouse.exists():
        _fail(f"no warehouse in {settings.home}: run `paperlake ingest` first")
    known = warehouse_volumes(settings)
    if volume and volume not in known:
        _fail(f"unknown volume {volume!r}; the warehouse has {', '.join(sorted(known)) or 'none'}")
    chosen = [volume] if volume else sorted(known)
    if not with_llm:
        infos = [write_volume_set(settings, v) for v in chosen]
        rows = [
            line
            for info in infos
            for line in Path(info["path"]).read_text(encoding="utf-8").splitlines()
            if info.get("path")
        ]
        if out:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("".join(line + "\n" for line in rows), encoding="utf-8")
        if as_json:
            console.print_json(json.dumps({"volumes": infos, "out": str(out) if out else None}))
            return
        _print_rows(
            ["volume", "papers", "probes", "min/paper", "kinds", "file"],
            [
                (
                    i["volume"],
                    i["papers"],
                    i["count"],
                    i.get("min_per_paper", 0),
                    ", ".join(f"{k} {n}" for k, n in (i.get("by_kind") or {}).items()),
                    i.get("path", ""),
                )
                for i in infos
            ],
            False,
            title="offline probes",
        )
        if out:
            console.print(f"written: {out} ({len(rows)} probes)")
        return
    from agent.extractor import synthesize
    from agent.loop import LoopConfig
    from agent.methods import get_method
    from agent.run import open_env
    from paperlake.runtime.llm import ChatClient, LLMNotConfigured

    try:
        get_method(method)
        llm = ChatClient.from_settings(settings)
    except (ValueError, LLMNotConfigured) as error:
        _fail(str(error))
    results = {}
    with open_env(settings) as env:
        for name in chosen:
            results[name] = synthesize(
                env,
                llm,
                name,
                limit=limit,
                method=method,
                keep_unverified=keep_unverified,
                config=LoopConfig(max_turns=max_turns),
            )
    target = out or settings.evaluation / "extractor" / (f"{volume}.jsonl" if volume else "all.jsonl")
    target.parent.mkdir(parents=True, exist_ok=True)
    trajectories = target.with_name(target.stem + ".trajectories.jsonl")
    target.write_text(
        "".join(
            json.dumps(r, ensure_ascii=False, default=str) + "\n"
            for result in results.values()
            for r in result.examples
        ),
        encoding="utf-8",
    )
    trajectories.write_text(
        "".join(
            json.dumps(r, ensure_ascii=False, default=str) + "\n"
            for result in results.values()
            for r in result.trajectories
        ),
        encoding="utf-8",
    )
    summary = {name: {"stats": r.stats.to_dict(), "usage": r.usage} for name, r in results.items()}
    if as_json:
        console.print_json(json.dumps({"volumes": summary, "out": str(target), "trajectories": str(trajectories)}))
        return
    _print_rows(
        ["volume", "contexts", "pairs", "tracked", "verified", "unverified", "rejected"],
        [
            (
                name,
                r.stats.contexts,
                r.stats.pairs,
                r.stats.tracked,
                r.stats.verified,
                r.stats.unverified,
                ", ".join(f"{k} {n}" for k, n in r.stats.rejected.items()) or "0",
            )
            for name, r in results.items()
        ],
        False,
        title=f"ExTrActor ({method})",
    )
    console.print(f"written: {target}\n         {trajectories}")


@eval_app.command("quality")
def eval_quality(
    volume: Optional[str] = typer.Argument(None, help="One volume; default: all."),
    history: bool = typer.Option(False, "--history", help="Every recorded report, oldest first."),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Each volume's retrieval quality on its offline probes (what the retrieval_quality check recorded)."""
    from paperlake.evaluation.sets import quality_path, read_jsonl, read_quality

    settings = _settings(home)
    reports = read_quality(settings)
    if volume:
        reports = {k: v for k, v in reports.items() if k == volume}
    if history:
        rows = [
            r
            for name in reports
            for r in read_jsonl(quality_path(settings, name).with_suffix(".history.jsonl"), skip_damaged=True)
        ]
    else:
        rows = list(reports.values())
    fields = ("volume", "at", "method", "probes", "answer_at_1", "answer_at_5", "page_at_5", "threshold", "passed")
    rows = [r for r in rows if all(field in r for field in fields)]  # a damaged record is not shown
    if as_json:
        console.print_json(json.dumps(rows, default=str))
        return
    if not rows:
        _fail("no retrieval-quality report yet: `paperlake ingest` writes one per volume")
    _print_rows(
        ["volume", "at", "method", "probes", "answer@1", "answer@5", "page@5", "threshold", "passed"],
        [
            (
                r["volume"],
                str(r["at"])[:16].replace("T", " "),
                r["method"],
                r["probes"],
                f"{r['answer_at_1']:.3f}",
                f"{r['answer_at_5']:.3f}",
                f"{r['page_at_5']:.3f}",
                r["threshold"],
                "yes" if r["passed"] else "no",
            )
            for r in rows
        ],
        False,
        title="retrieval quality",
    )


@app.command()
def search(
    query: str = typer.Argument(..., help="What to look for."),
    collection: Optional[str] = typer.Option(
        None,
        "--collection",
        "-c",
        help="Collection (default: MiniLM dense; with --hybrid: the BM25+dense hybrid collection).",
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
        help="Fuse BM25 and dense results (the fusion of schemas/collections.yaml's hybrid block: by default a "
        "convex combination of normalised scores, BM25/dense weights 0.6/0.4).",
    ),
    fusion: Optional[str] = typer.Option(
        None, "--fusion", help="convex | rrf (here) | milvus-rrf | milvus-weighted (inside Milvus, hybrid_search)."
    ),
    weights: Optional[str] = typer.Option(None, "--weights", help="Fusion weights, e.g. 0.3,0.7 (BM25, dense)."),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Vector search over the Milvus collections; larger scores are better, whatever the backend returns."""
    import logging
    import math

    from paperlake.vectors.config import load_config
    from paperlake.vectors.filters import FilterError, validate_filter
    from paperlake.vectors.search import SearchFailed
    from paperlake.vectors.search import search as run_search
    from paperlake.vectors.store import VectorStore

    fail = _fail
    for library in ("pymilvus", "milvus_lite"):  # their error logs would repeat, with a traceback, what fail() says
        logging.getLogger(library).setLevel(logging.CRITICAL)
    settings = _settings(home)
    config = load_config()
    name = collection or (config.hybrid_collection if hybrid else "text_sentence_transformers_all_minilm_l6_v2")
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
        paper_clause = f"pdf_id == '{_resolve_paper(settings, paper)}'"
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
        hits = run_search(
            store, query, name, table_name, column_name, filter_expr, limit, hybrid, route_weights, fusion
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
        _print_rows(columns, rows, True)
        return
    _print_hits(name, query, rows, _paper_titles(settings, {str(h.pdf_id) for h in hits}))


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


tables_app = typer.Typer(
    help="Tables with their header structure (header paths, parsed numbers).", no_args_is_help=True
)
app.add_typer(tables_app, name="tables")


def _warehouse_rows(home: Optional[Path], sql: str, params: list[Any]) -> tuple[list[str], list[tuple]]:
    settings = _settings(home)
    try:
        with connect_read_only(settings.warehouse) as con:
            cursor = con.execute(sql, params)
            return [d[0] for d in cursor.description], cursor.fetchall()
    except FileNotFoundError as error:
        _fail(str(error))
    except Exception as error:  # duckdb BinderException/CatalogException: a warehouse built before table structure
        _fail(
            f"the warehouse has no table structure ({' '.join(str(error).split())[:200]}); "
            "run `paperlake ingest` to rebuild it"
        )
    raise AssertionError("unreachable")


def _resolve_paper(settings: Settings, text: str) -> str:
    """The one paper ``text`` names (:func:`paperlake.warehouse.build.find_papers`): its id. None found, or several,
    is a message and a non-zero exit (several are listed)."""
    from paperlake.warehouse.read import find_papers

    try:
        with connect_read_only(settings.warehouse) as con:
            matches = find_papers(con, text)
    except FileNotFoundError as error:
        _fail(str(error))
    if not matches:
        _fail(f"no paper matches {text!r} (by id, by volume/file-stem, or by every word of its title)")
    if len(matches) > 1:
        _print_rows(["paper_id", "paper_key", "title"], [(m.paper_id, m.paper_key, m.title) for m in matches], False)
        _fail(f"{len(matches)} papers match {text!r}: give one of the ids or keys above")
    return matches[0].paper_id


@tables_app.command("list")
def tables_list(
    paper: Optional[str] = typer.Option(None, "--paper", help=PAPER_HELP),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The tables of the warehouse (or of one paper): id, label, shape and structure flag."""
    where, params = "", []
    if paper:
        where = "where cast(m.paper_id as varchar) = ?"
        params = [_resolve_paper(_settings(home), paper)]
    columns, rows = _warehouse_rows(
        home,
        "select cast(t.table_id as varchar) as table_id, m.title, t.page_number, t.table_label, t.num_rows, "
        "t.num_cols, t.header_rows, t.stub_columns, t.table_structure from tables t join metadata m on "
        f"m.paper_id = t.ref_paper_id {where} order by m.title, t.page_number, t.ordinal",
        params,
    )
    _print_rows(columns, rows, as_json, title=f"{len(rows)} tables")


@tables_app.command("show")
def tables_show(
    table_id: str = typer.Argument(..., help="A table id (tables.table_id; see `paperlake tables list`)."),
    cells: bool = typer.Option(
        False,
        "--cells",
        help="Also one line per data cell: its row and column header paths, text, parsed number, flags and unit.",
    ),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """One table as a grid whose column titles are the full header paths, with its structure flag."""
    columns, rows = _warehouse_rows(
        home,
        "select cast(t.table_id as varchar) as table_id, m.title, t.page_number, t.table_label, "
        "t.table_caption, t.num_rows, t.num_cols, t.header_rows, t.stub_columns, t.table_structure, t.detector, "
        "t.backend from tables t join metadata m on m.paper_id = t.ref_paper_id "
        "where cast(t.table_id as varchar) = ?",
        [table_id.strip()],
    )
    if not rows:
        _fail(f"no table {table_id!r}; find ids with `paperlake tables list`")
    table = dict(zip(columns, rows[0]))
    cell_columns, cell_rows = _warehouse_rows(
        home,
        "select row_index, col_index, rowspan, colspan, cell_text, is_header, is_stub, row_header_path, "
        "column_header_path, number_value, number_flags, unit from table_cells "
        "where cast(ref_table_id as varchar) = ? order by row_index, col_index",
        [table_id.strip()],
    )
    grid = [dict(zip(cell_columns, row)) for row in cell_rows]
    glossary = _table_glossary(home, table_id.strip())
    if as_json:
        print(json.dumps({"table": table, "cells": grid, "glossary": glossary}, default=str, ensure_ascii=False))
        return
    console.print(
        Text(f"{table['table_label'] or 'Table'} · {table['title']} · page {table['page_number']}", style="bold")
    )
    if table["table_caption"]:
        console.print(Text(table["table_caption"]))
    console.print(
        Text(
            f"structure: {table['table_structure']} · {table['header_rows']} header row(s) · "
            f"{table['stub_columns']} stub column(s) · {table['num_rows']}×{table['num_cols']} · "
            f"{table['detector']} ({table['backend']})",
            style="dim",
        )
    )
    console.print(_structured_grid(grid, int(table["header_rows"] or 0)))
    if glossary:
        console.print(
            Text("defined in the paper: " + "; ".join(f"{k} = {v}" for k, v in glossary.items()), style="dim")
        )
    if cells:
        data = [c for c in grid if not c["is_header"] and not c["is_stub"] and c["cell_text"]]
        _print_rows(
            ["row header path", "column header path", "text", "number", "flags", "unit"],
            [
                (
                    " > ".join(c["row_header_path"] or []),
                    " > ".join(c["column_header_path"] or []),
                    c["cell_text"],
                    c["number_value"],
                    ",".join(c["number_flags"] or []),
                    c["unit"],
                )
                for c in data
            ],
            False,
            title="data cells",
        )


def _table_glossary(home: Optional[Path], table_id: str) -> dict[str, str]:
    """What the paper defines the table's labels to mean (its lines' ``header_glossary``); empty for a warehouse
    built before labels were glossed."""
    settings = _settings(home)
    try:
        with connect_read_only(settings.warehouse) as con:
            entries = con.execute(
                "select distinct unnest(header_glossary) from (select header_glossary from table_rows "
                "where cast(ref_table_id as varchar) = $1 union all select header_glossary from table_columns "
                "where cast(ref_table_id as varchar) = $1) order by 1",
                [table_id],
            ).fetchall()
    except Exception:  # duckdb BinderException: no header_glossary column yet
        return {}
    return dict(str(entry).partition(": ")[::2] for (entry,) in entries if entry)


def _structured_grid(grid: list[dict[str, Any]], header_rows: int) -> Table:
    """The body rows under column titles that are whole header paths; a row label spanning rows is repeated."""
    n_cols = max((c["col_index"] + (c["colspan"] or 1) for c in grid), default=0)
    n_rows = max((c["row_index"] + (c["rowspan"] or 1) for c in grid), default=0)
    titles: list[list[str]] = [[] for _ in range(n_cols)]
    for cell in grid:  # header cells, top to bottom, spanning cells once per column they cover
        if cell["row_index"] < header_rows and cell["cell_text"]:
            for col in range(cell["col_index"], cell["col_index"] + (cell["colspan"] or 1)):
                if cell["cell_text"] not in titles[col]:
                    titles[col].append(cell["cell_text"])
    body = [["" for _ in range(n_cols)] for _ in range(max(n_rows - header_rows, 0))]
    for cell in grid:
        if cell["row_index"] < header_rows:
            continue
        rows = (
            range(cell["row_index"], cell["row_index"] + (cell["rowspan"] or 1))
            if cell["is_stub"]
            else [cell["row_index"]]
        )
        for row in rows:
            if 0 <= row - header_rows < len(body):
                body[row - header_rows][cell["col_index"]] = cell["cell_text"] or ""
    out = Table(show_lines=False)
    for col in range(n_cols):
        out.add_column(Text(" > ".join(titles[col]) or f"col {col}"), overflow="fold")
    for row in body:
        if any(row):
            out.add_row(*[Text(v) for v in row])
    return out


formulas_app = typer.Typer(help="The formula graph: search, inspect and run formula tools.", no_args_is_help=True)
app.add_typer(formulas_app, name="formulas")


def _formula_layer(home: Optional[Path], with_collection: bool = False):
    from paperlake.formulas.store import WarehouseFormulas, minilm_embedder, open_formula_collection

    settings = _settings(home)
    try:
        with connect_read_only(settings.warehouse) as con:

            def query(sql: str) -> list[dict[str, Any]]:
                cursor = con.execute(sql)
                names = [d[0] for d in cursor.description]
                return [dict(zip(names, row)) for row in cursor.fetchall()]

            collection = open_formula_collection(settings.milvus_uri, settings.embeddings) if with_collection else None
            return WarehouseFormulas.from_connection(query, embed=minilm_embedder(), collection=collection)
    except FileNotFoundError as error:
        _fail(str(error))
    except Exception as error:  # duckdb CatalogException: an older warehouse without formula tables
        _fail(f"no formula tables in the warehouse ({type(error).__name__}); run `paperlake ingest` first")


@formulas_app.command("search")
def formulas_search(
    query: str,
    limit: int = typer.Option(5, "--limit", "-k"),
    home: Optional[Path] = HomeOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Formulas by meaning (their composite descriptions): in the Milvus `formulas` collection when it exists,
    else with in-process embeddings."""
    layer = _formula_layer(home, with_collection=True)
    try:
        hits = layer.search_formulas(query, limit)
    finally:
        layer.close()
    columns = ["formula_id", "name", "status", "latex", "paper_id", "page_number", "equation_number"]
    _print_rows(
        columns,
        [tuple(h.get(c) for c in columns) for h in hits],
        as_json,
        title=f"{query} (searched by {layer.searched_by})",
    )


@formulas_app.command("show")
def formulas_show(
    formula_id: str, home: Optional[Path] = HomeOption, as_json: bool = typer.Option(False, "--json")
) -> None:
    """One formula with its template, parameters, constants, occurrences and relations."""
    layer = _formula_layer(home)
    rows = {
        name: [
            r
            for r in layer.tables[name]
            if r.get("formula_id") == formula_id or r.get("source") == formula_id or r.get("target") == formula_id
        ]
        for name in ("formulas", "formula_parameters", "formula_occurrences", "formula_relations")
    }
    if not rows["formulas"]:
        _fail(f"no formula {formula_id!r}; find ids with `paperlake formulas search`")
    if as_json:
        print(json.dumps(rows, default=str, ensure_ascii=False))
        return
    formula = rows["formulas"][0]
    for field_name in (
        "formula_id",
        "label",
        "status",
        "reason",
        "latex",
        "sympy_str",
        "output",
        "template",
        "canonical_key",
        "paper_ids",
        "occurrence_count",
    ):
        if formula.get(field_name) not in (None, "", []):
            console.print(f"[bold]{field_name}:[/] {formula[field_name]}")
    _print_rows(
        ["name", "latex_symbol", "description"],
        [(p["name"], p["latex_symbol"], p["description"]) for p in rows["formula_parameters"]],
        False,
        "parameters",
    )
    _print_rows(
        ["paper_id", "page_number", "equation_number", "matched_by"],
        [(o["paper_id"], o["page_number"], o["equation_number"], o["matched_by"]) for o in rows["formula_occurrences"]],
        False,
        "occurrences",
    )
    if rows["formula_relations"]:
        _print_rows(
            ["source", "relation_type", "target"],
            [(r["source"], r["relation_type"], r["target"]) for r in rows["formula_relations"]],
            False,
            "relations",
        )


@formulas_app.command("run")
def formulas_run(
    formula_id: str,
    assignments: list[str] = typer.Argument(None, help="name=value …"),
    home: Optional[Path] = HomeOption,
) -> None:
    """Evaluate a formula's validated template with the given parameter values (safe evaluator, no eval)."""
    values: dict[str, Any] = {}
    for item in assignments or []:
        name, sep, raw = item.partition("=")
        if not sep:
            _fail(f"arguments are name=value, got {item!r}")
        try:
            values[name.strip()] = float(raw)
        except ValueError:
            _fail(f"{name} must be a number, got {raw!r}")
    try:
        tool = _formula_layer(home).create_tool(formula_id)
    except KeyError as error:
        _fail(str(error.args[0]))
    except Exception as error:  # a formula without a template
        _fail(f"{formula_id}: {error}")
    result = tool(**values)
    if not result.ok:
        _fail(result.error)
    console.print(f"{tool.name} = {result.value}")
