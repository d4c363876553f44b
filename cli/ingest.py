"""`paperlake ingest` and `paperlake enrich`: both run the asset graph over the inboxes with a progress bar, then
print what each store did and the status. Dagster and the lake's pipeline are imported inside the functions, when one
of them runs: every other command starts without them (the library itself never imports Dagster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cli.common import HomeOption, console, err, fail, home_settings
from cli.status import status
from paperlake.config import Settings


def _inboxes(inboxes: list[Path] | None) -> list[Path]:
    if not inboxes:
        inboxes = list(Settings.from_env().inboxes)
    if not inboxes:
        fail("no inbox given: pass a folder (e.g. ../shared/corpus/inbox) or set PAPERLAKE_INBOX")
    missing = [str(p) for p in inboxes if not p.is_dir()]
    if missing:
        fail(f"inbox folder(s) not found: {', '.join(missing)}")
    for folder in inboxes:
        if (why := _a_volume_not_an_inbox(folder)) is not None:
            fail(why)
    return [p.resolve() for p in inboxes]


def _a_volume_not_an_inbox(folder: Path) -> str | None:
    """Why ``folder`` looks like one volume given as the inbox (PDFs in it, no folder beside them), or None. Read as
    an inbox it would hold no paper, and every paper of the home would be removed, so nothing runs."""
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    pdfs = [p for p in entries if p.suffix.lower() == ".pdf" and not p.is_dir()]
    if not pdfs or any(p.is_dir() for p in entries):
        return None
    return (
        f"{folder} holds {len(pdfs)} PDF{'s' if len(pdfs) > 1 else ''} and no volume folder, but an inbox holds "
        f"<volume>/*.pdf: to ingest it as the volume {folder.name!r}, pass the folder that holds it "
        f"({folder.resolve().parent}) if that holds only volumes, or move the PDFs into {folder}/<volume>/"
    )


def _run_ingest(inboxes: list[Path], settings: Settings, rebuild_warehouse: bool = False, **enrich: Any) -> None:
    from orchestration.run import ingest as run_ingest  # deferred: dagster

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

        from paperlake.lake.inbox import scan_volumes  # deferred: polars
        from paperlake.lake.pipeline import plan_ingest  # deferred: polars
        from paperlake.lake.store import Lake  # deferred: polars

        scan = scan_volumes(inboxes, settings.mineru_dir)
        plan = plan_ingest(
            scan.sources, Lake(settings.lake), settings, held=scan.held, removals_held=scan.removals_held is not None
        )
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
        console.print(f"  rebuilt {stage}: {escape(reason)}", soft_wrap=True)
    for line in summary.repaired:
        console.print(f"  rebuilt {escape(line)}", soft_wrap=True)
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
        fail(f"--mineru-dir {mineru_dir} is not a folder")
    settings = home_settings(home, backend=backend, mineru_dir=mineru_dir.resolve() if mineru_dir else None)
    _run_ingest(folders, settings, rebuild_warehouse)


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
    from paperlake.enrichment import dry_run as estimate_run  # deferred: polars
    from paperlake.enrichment import not_configured_reason, resolve_kinds  # deferred: polars
    from paperlake.enrichment.runner import Budget, BudgetError  # deferred: polars

    settings = home_settings(home, mineru_dir=mineru_dir.resolve() if mineru_dir else None)
    try:
        kinds = resolve_kinds(views or settings.enrich_kinds)
        Budget.parse(settings.llm_budget)
    except (ValueError, BudgetError) as problem:
        fail(str(problem))
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
        fail(f"cannot enrich: {reason}")
    _run_ingest(_inboxes(inboxes), settings, enrich_kinds=kinds, enrich_limit=limit, retry_errors=retry_errors)
