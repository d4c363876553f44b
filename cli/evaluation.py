"""`paperlake eval`: run a method over an AirQA-format set (the group's default command), score a predictions file,
synthesise sets from a volume (offline probes, or ExTrActor with an LLM) and show each volume's retrieval quality.
The agent and the evaluation modules are imported inside the commands, when one runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cli.common import HomeOption, console, err, fail, home_settings, print_rows


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
    from agent.loop import LoopConfig  # deferred: cli start-up
    from agent.run import answer, open_env  # deferred: cli start-up
    from agent.run import retrieval_only as run_retrieval_only  # deferred: cli start-up
    from paperlake.evaluation.dataset import evaluate, load_dataset  # deferred: cli start-up
    from paperlake.runtime.llm import ChatClient, LLMNotConfigured  # deferred: cli start-up

    settings = home_settings(home)
    try:
        dataset = load_dataset(data)
    except OSError as error:
        fail(f"cannot read: {error}")
    for line in dataset.warnings():
        err.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True)
    examples = dataset.examples[: limit or None]
    if not examples:
        fail(f"no example of {data} could be read")
    out = out or settings.home / "eval" / method
    out.mkdir(parents=True, exist_ok=True)
    if retrieval_only:
        try:
            metrics = run_retrieval_only(examples, settings, method, k)
        except (ValueError, FileNotFoundError) as error:
            fail(str(error))
        report = metrics.to_dict()
        (out / "retrieval.json").write_text(json.dumps(report, indent=2, default=str))
        if metrics.error:
            fail(f"{method}: {metrics.error}")
        rows = [
            (tag, f"{v.get('hit_at_k', 0):.3f}", f"{v.get('recall_at_k', 0):.3f}", v.get("count", ""))
            for tag, v in sorted(metrics.by_tag().items())
        ]
        print_rows(
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
        fail(str(error))
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
    from paperlake.evaluation.scoring import score_file, write_outputs  # deferred: cli start-up
    from paperlake.runtime.llm import ChatClient  # deferred: cli start-up

    for path in (data, predictions):
        if not path.is_file():
            fail(f"not a file: {path}")
    settings = home_settings(home)
    judge = ChatClient.from_settings(settings, temperature=0.0) if settings.llm_configured else None
    try:
        scored = score_file(data, predictions, judge)
    except OSError as error:
        fail(f"cannot read: {error}")
    for line in scored.warnings():
        err.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True)
    if not scored.dataset.examples:
        fail(f"no example of {data} could be read (see the warnings above)")
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
    print_rows(columns, rows, False, title=f"{data.name}: {len(scored.dataset.examples)} examples")


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
    from paperlake.evaluation.sets import volumes as warehouse_volumes  # deferred: polars
    from paperlake.evaluation.sets import write_volume_set  # deferred: polars

    settings = home_settings(home)
    if not settings.warehouse.exists():
        fail(f"no warehouse in {settings.home}: run `paperlake ingest` first")
    known = warehouse_volumes(settings)
    if volume and volume not in known:
        fail(f"unknown volume {volume!r}; the warehouse has {', '.join(sorted(known)) or 'none'}")
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
        print_rows(
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
    from agent.extractor import synthesize  # deferred: cli start-up
    from agent.loop import LoopConfig  # deferred: cli start-up
    from agent.methods import get_method  # deferred: cli start-up
    from agent.run import open_env  # deferred: cli start-up
    from paperlake.runtime.llm import ChatClient, LLMNotConfigured  # deferred: cli start-up

    try:
        get_method(method)
        llm = ChatClient.from_settings(settings)
    except (ValueError, LLMNotConfigured) as error:
        fail(str(error))
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
    _write_jsonl(target, (r for result in results.values() for r in result.examples))
    _write_jsonl(trajectories, (r for result in results.values() for r in result.trajectories))
    summary = {name: {"stats": r.stats.to_dict(), "usage": r.usage} for name, r in results.items()}
    if as_json:
        console.print_json(json.dumps({"volumes": summary, "out": str(target), "trajectories": str(trajectories)}))
        return
    print_rows(
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
    from paperlake.evaluation.sets import quality_path, read_jsonl, read_quality  # deferred: polars

    settings = home_settings(home)
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
        fail("no retrieval-quality report yet: `paperlake ingest` writes one per volume")
    print_rows(
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


def _write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows), encoding="utf-8")
