"""Ingest benchmark on the sample corpus: pages/s per stage and peak memory, written as JSON.

    python benchmarks/ingest.py [--corpus ../shared/corpus] [--out benchmarks/results/ingest.json]

    python benchmarks/ingest.py --skip-mineru   # where MinerU cannot be installed
    python benchmarks/ingest.py --pdfs A.pdf B.pdf --volume-repeats 1 --out /tmp/ingest.json   # a smoke test

Stages: parse with each backend (library call, no orchestration), MinerU's offline flash tier on the same PDFs in the
same run, timed two ways in its own venv: its Python API in process (``benchmarks/mineru_in_process.py``:
``doc_analyze(pdf_bytes, effort="flash")``, timed after import, MinerU at its fastest and the *anchor* of every ratio)
and its CLI through a private local server (``benchmarks/mineru_flash.py``, net of the CLI's per-call overhead, kept
beside it for comparison with the ratios reported before the anchor), quality gates, then the whole
Dagster ingest (parse, gates, dbt, formula graph, vectors, self-evaluation) of exactly the PDFs MinerU parsed, each
ingest in a new process as `paperlake ingest` runs it, with the PyMuPDF backend, into a fresh PAPERLAKE_HOME: *cold*
(an empty embedding cache), *warm* (a second fresh home sharing the first one's embedding cache, as a re-ingest
elsewhere would), both with the configured encoders (the int8 graph, `backend: onnx-int8`), and *cold float* (the
float graph, `backend: onnx`, with its own empty cache), plus the MinerU-outputs build of the whole sample (what
`./run demo` does), and the smallest volume alone, cold, against MinerU flash on exactly its PDFs (a small volume
pays the same per-ingest fixed costs as the sample), in rounds that interleave MinerU's parse and our ingest. Every
ratio compares speeds measured here and now on the same PDFs (never a number from another machine): the parse stage
against MinerU flash (target 5x), and the end-to-end ingest against MinerU flash, which only parses (target 1x;
"queryable" is the ingest without the self-evaluation that follows it). Each ratio is given against both ways
(``*_in_process``, ``*_cli_server``); ``met`` holds against the in-process anchor.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PARSE_SPEED_TARGET = 5.0  # our parse stage vs MinerU flash, same run, same PDFs
END_TO_END_TARGET = 1.0  # our whole ingest vs MinerU flash's parse alone, same run, same PDFs


def peak_rss_mb() -> dict[str, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"self": round(own, 1), "children": round(children, 1)}


def _versus_mineru_flash(pages: dict[Path, int], our_seconds: dict[Path, float]) -> dict:
    """MinerU flash on the same PDFs, now, both ways: in process (the anchor) and through its CLI and local server.
    Every speed covers the PDFs both ways could parse offline; the CLI's is net of its per-call overhead."""
    ways, errors = _mineru_ways(list(pages), in_process_first=True)
    if not ways:
        print(f"mineru flash: not measured: {errors}", flush=True)
        return {"measured": False, "reason": "; ".join(f"{way}: {error}" for way, error in errors.items())}
    results = {way: {r.pdf: r for r in timed.pop("results")} for way, timed in ways.items()}
    parsed = [pdf for pdf in pages if all(pdf in by_pdf for by_pdf in results.values())]
    if not parsed:
        return {"measured": False, "reason": "no PDF was parsed both ways"}
    speeds = _mineru_speeds(ways, results, parsed)
    ours = sum(pages[pdf] for pdf in parsed) / sum(our_seconds[pdf] for pdf in parsed)
    ratios = {way: round(ours / speed, 1) if speed else None for way, speed in speeds.items()}
    anchor = speeds["in_process"]
    volumes = sorted({pdf.parent.name for pdf in parsed})
    by_volume = {
        volume: {
            "pdfs": [str(pdf) for pdf in parsed if pdf.parent.name == volume],
            "pages": sum(pages[pdf] for pdf in parsed if pdf.parent.name == volume),
            "mineru_flash_pages_per_second": _mineru_speeds(
                ways, results, [pdf for pdf in parsed if pdf.parent.name == volume]
            ),
        }
        for volume in volumes
    }
    print(
        f"mineru flash on {len(parsed)} PDFs ({sum(pages[pdf] for pdf in parsed)} pages): in process {anchor} pages/s, "
        f"CLI+server {speeds['cli_server']} pages/s net of CLI overhead; pymupdf on the same PDFs {ours:.1f} pages/s "
        f"= {ratios['in_process']}x the in-process anchor ({ratios['cli_server']}x the CLI+server path); "
        f"not measured: {errors or 'none'}",
        flush=True,
    )
    return {
        "measured": True,
        "anchor": "in_process",
        "mineru_version": next(iter(ways.values()))["mineru_version"],
        "in_process": ways.get("in_process") or {"measured": False, "reason": errors.get("in_process")},
        "cli_server": ways.get("cli_server") or {"measured": False, "reason": errors.get("cli_server")},
        "parsed_pdfs": [str(pdf) for pdf in parsed],
        "pdfs": len(parsed),
        "pages": sum(pages[pdf] for pdf in parsed),
        "mineru_flash_pages_per_second": speeds,
        "by_volume": by_volume,
        "per_pdf": {
            str(pdf): {
                "pages": pages[pdf],
                "pymupdf_seconds": round(our_seconds[pdf], 3),
                **{f"{way}_seconds": round(by_pdf[pdf].seconds, 3) for way, by_pdf in results.items()},
            }
            for pdf in parsed
        },
        "pymupdf_pages_per_second_same_pdfs": round(ours, 1),
        "ratio": ratios["in_process"],
        "ratio_vs_cli_server": ratios["cli_server"],
        "target": PARSE_SPEED_TARGET,
        "met": ours / anchor >= PARSE_SPEED_TARGET if anchor else None,
    }


def _mineru_ways(pdfs: list[Path], *, in_process_first: bool) -> tuple[dict, dict]:
    """MinerU flash over ``pdfs`` both ways, one after the other: its API in process (``mineru_in_process.py``, a
    new process that warms up after its import) and its CLI through a new private server (``mineru_flash.py``). Returns
    the timings of the ways that ran and the reason for each that did not."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from mineru_flash import FlashServer, MineruUnavailable, locate_or_install, time_flash
    from mineru_in_process import time_in_process

    try:
        executable = locate_or_install()
    except MineruUnavailable as error:
        return {}, {"in_process": str(error), "cli_server": str(error)}

    def cli_server() -> dict:
        with FlashServer(executable) as server:
            return time_flash(pdfs, server)

    runners = {"in_process": lambda: time_in_process(pdfs, executable), "cli_server": cli_server}
    ways, errors = {}, {}
    for way in sorted(runners, reverse=in_process_first):  # "cli_server" sorts before "in_process"
        try:
            ways[way] = runners[way]()
        except MineruUnavailable as error:
            errors[way] = str(error)
            print(f"mineru flash {way}: not measured: {error}", flush=True)
    return ways, errors


def _mineru_speeds(ways: dict, results: dict[str, dict[Path, object]], pdfs: list[Path]) -> dict[str, float | None]:
    """Pages/s of each way on exactly ``pdfs``: in process as timed, the CLI+server net of its per-call overhead."""
    speeds: dict[str, float | None] = {"in_process": None, "cli_server": None}
    for way, by_pdf in results.items():
        rows = [by_pdf[pdf] for pdf in pdfs if pdf in by_pdf]
        if not rows:
            continue
        seconds = sum(row.seconds for row in rows)
        if way == "cli_server":
            seconds -= ways[way]["cli_overhead_seconds_per_call"] * len(rows)
        speeds[way] = round(sum(row.pages for row in rows) / max(seconds, 1e-9), 2)
    return speeds


def _one_volume(volume: str, pdfs: list[Path], work: Path, repeats: int, whole_run: dict) -> dict:
    """The smallest volume alone, cold, against MinerU flash on exactly its PDFs, in rounds: MinerU flash parses the
    volume both ways (in process, the anchor, and through its CLI and server; which goes first alternates by round),
    then we ingest it (its own home and embedding cache each round). A small volume's ingest varies by ~10% from run to
    run on a shared machine, and so does MinerU on the same PDFs: every side is measured the same number of times,
    interleaved so that a slower or faster spell of the machine falls on all, and the figure is our median run against
    each way's median speed. A way MinerU cannot run now is held at its speed on these PDFs in the run over all of them
    (``whole_run``)."""
    from paperlake.lake.pipeline import pdf_page_count

    inbox = _inbox_of(work / "inbox-volume", pdfs)
    pages = sum(pdf_page_count(pdf) for pdf in pdfs)
    runs = []
    speeds: dict[str, list[float]] = {"in_process": [], "cli_server": []}
    for repeat in range(max(1, repeats)):
        ways, _ = _mineru_ways(pdfs, in_process_first=repeat % 2 == 0)
        this_round = dict(whole_run)
        for way, timed in ways.items():
            if not timed["failed"]:
                results = {way: {r.pdf: r for r in timed.pop("results")}}
                this_round[way] = _mineru_speeds(ways, results, pdfs)[way]
                speeds[way].append(this_round[way])
        settings = {
            "home": work / f"volume-{repeat}",
            "backend": "pymupdf",
            "embedding_cache": work / f"v-{repeat}.sqlite",
        }
        runs.append(_timed_ingest(inbox, settings, pages, this_round))
    medians = {way: statistics.median(found) if found else whole_run[way] for way, found in speeds.items()}
    one = dict(sorted(runs, key=lambda run: run["step_seconds"]["total"])[len(runs) // 2])
    # the median run against each way's median speed (each run's own ratios, against its round's MinerU, are listed)
    one |= _ratios(pages, one["step_seconds"], medians)
    return {
        "volume": volume,
        "pdfs": len(pdfs),
        **one,
        "of_runs": len(runs),
        "run_totals": [run["step_seconds"]["total"] for run in runs],
        **{f"run_vs_mineru_flash_{way}": [run.get(f"vs_mineru_flash_{way}") for run in runs] for way in speeds},
        **{f"mineru_flash_{way}_pages_per_second": found or None for way, found in speeds.items()},
        "mineru_flash_median": {way: round(speed, 2) if speed else None for way, speed in medians.items()},
        "mineru_flash_in_the_run_over_all_pdfs": whole_run,
    }


def _ratios(pages: int, steps: dict[str, float], mineru: dict[str, float | None]) -> dict:
    """Our ingest against each way MinerU flash was timed: the whole ingest, the queryable part (without the
    self-evaluation) and the parse stage; ``met`` holds against the in-process anchor."""
    queryable = steps["total"] - steps.get("evaluation", 0.0)
    ratios: dict = {}
    for way, theirs in mineru.items():
        if theirs:
            ratios |= {
                f"vs_mineru_flash_{way}": round(pages / steps["total"] / theirs, 2),
                f"queryable_vs_mineru_flash_{way}": round(pages / queryable / theirs, 2),
                f"parse_stage_vs_mineru_flash_{way}": round(pages / steps["parse"] / theirs, 2),
            }
    if ratios:
        anchor = mineru.get("in_process")
        ratios |= {
            "mineru_flash_pages_per_second": mineru,
            "target": END_TO_END_TARGET,
            "met": pages / steps["total"] / anchor >= END_TO_END_TARGET if anchor else None,
        }
    return ratios


def _inbox_of(root: Path, pdfs: list[Path]) -> list[Path]:
    """An inbox holding exactly ``pdfs`` (links), each volume with its manifest's rows for them."""
    import csv

    volumes = []
    for pdf in pdfs:
        folder = root / pdf.parent.name
        if folder not in volumes:
            folder.mkdir(parents=True)
            volumes.append(folder)
        (folder / pdf.name).symlink_to(pdf.resolve())
    for folder in volumes:
        manifest = next(p.parent for p in pdfs if p.parent.name == folder.name) / "manifest.csv"
        if manifest.exists():
            with open(manifest, newline="", encoding="utf-8") as handle:
                rows = list(csv.DictReader(handle))
            kept = [row for row in rows if (folder / row["file"]).exists()]
            with open(folder / "manifest.csv", "w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(kept)
    return [root]


def _with_backend(collections_yaml: str, backend: str) -> str:
    """The collection config with every sentence-transformers encoder on ``backend``."""
    import yaml

    raw = yaml.safe_load(collections_yaml)
    for encoder in raw["encoders"].values():
        if encoder.get("kind") == "sentence_transformers":
            encoder["backend"] = backend
    return yaml.safe_dump(raw, sort_keys=False)


def _timed_ingest(
    inboxes: list[Path], settings: dict, pages: int, mineru: dict[str, float | None] | None, env: dict | None = None
) -> dict:
    """One ingest in a new process, as `paperlake ingest` runs: every timed ingest pays the same start-up (imports,
    Dagster definitions, model sessions), whatever ran before it, so their order does not favour any. Timed by the
    ingest's own clock (the interpreter's start is reported apart as ``process_seconds``, as MinerU's CLI overhead
    is taken out of its speed)."""
    import os
    import subprocess

    request = {"inboxes": [str(p) for p in inboxes], "settings": {k: str(v) for k, v in settings.items()}}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child-ingest", json.dumps(request)],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
    )
    process_seconds = time.perf_counter() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith(CHILD_MARK)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"ingest of {request} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    child = json.loads(lines[-1][len(CHILD_MARK) :])
    steps = child["step_seconds"]
    queryable = steps["total"] - steps.get("evaluation", 0.0)
    entry = {
        "published": child["published"],
        "failed": child["failed"],
        "pages": pages,
        "step_seconds": steps,
        "process_seconds": round(process_seconds, 2),
        "pages_per_second": round(pages / steps["total"], 2),
        "pages_per_second_queryable": round(pages / queryable, 2),
        "minilm_backend": child["minilm_backend"],
    }
    entry |= _ratios(pages, steps, mineru or {})
    print(f"ingest ({Path(settings['home']).name}): {json.dumps(entry)}", flush=True)
    return entry


CHILD_MARK = "paperlake-bench-ingest: "


def _child_ingest(request: str) -> None:
    """The child of :func:`_timed_ingest`: one ingest, its summary on a marked last line."""
    from orchestration.run import ingest
    from paperlake.config import Settings
    from paperlake.vectors.config import load_config

    spec = json.loads(request)
    paths = ("home", "embedding_cache", "mineru_dir")
    settings = Settings.from_env(**{k: Path(v) if k in paths else v for k, v in spec["settings"].items()})
    summary = ingest([Path(p) for p in spec["inboxes"]], settings)
    print(
        CHILD_MARK
        + json.dumps(
            {
                "published": len(summary.published),
                "failed": len(summary.failed),
                "step_seconds": {k: round(v, 2) for k, v in summary.step_seconds.items()},
                "minilm_backend": load_config().encoders["all_minilm_l6_v2"].backend,
            }
        ),
        flush=True,
    )


def _export_graphs() -> None:
    from paperlake.vectors.config import load_config, model_cache_dir
    from paperlake.vectors.onnx_graphs import onnx_model_path

    spec = load_config().encoders["all_minilm_l6_v2"]
    for backend in ("onnx", "onnx-int8"):
        onnx_model_path(spec.weights_path(), spec.model_id, backend, model_cache_dir() / "onnx")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child-ingest":
        return _child_ingest(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "ingest.json")
    parser.add_argument("--skip-mineru", action="store_true", help="do not install or time MinerU flash")
    parser.add_argument(
        "--volume-repeats", type=int, default=3, help="cold ingests of the smallest volume (the median is reported)"
    )
    parser.add_argument(
        "--pdfs", nargs="+", metavar="NAME", help="only these PDFs of the corpus (file names or stems): a smoke test"
    )
    args = parser.parse_args()

    from orchestration.run import PAPERS_PER_RUN
    from paperlake.lake.inbox import scan_inbox
    from paperlake.lake.pipeline import pdf_page_count
    from paperlake.lake.quality import validate_papers
    from paperlake.parsing import mineru_backend, pymupdf_backend
    from paperlake.vectors.config import default_config_path

    sources = scan_inbox([args.corpus / "inbox"], args.corpus / "mineru")
    if args.pdfs:
        sources = [s for s in sources if {s.pdf_path.name, s.pdf_path.stem} & set(args.pdfs)]
        if len(sources) != len(set(args.pdfs)):
            parser.error(f"--pdfs: {len(sources)} of {len(args.pdfs)} named PDFs are in {args.corpus / 'inbox'}")
    pages = sum(pdf_page_count(s.pdf_path) for s in sources)
    results: dict = {
        "papers": len(sources),
        "pages": pages,
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
    }

    parsed_by_backend = {}
    our_seconds: dict[Path, float] = {}  # per PDF, so MinerU flash is compared on exactly the PDFs it parsed
    for name, module in (("pymupdf", pymupdf_backend), ("mineru", mineru_backend)):
        module.parse(sources[0])  # warm-up: imports, layout tables, tokenizer
        started = time.perf_counter()
        parsed_by_backend[name] = []
        for source in sources:
            one = time.perf_counter()
            parsed_by_backend[name].append(module.parse(source))
            if name == "pymupdf":
                our_seconds[source.pdf_path] = time.perf_counter() - one
        seconds = time.perf_counter() - started
        results[f"parse_{name}"] = {"seconds": round(seconds, 2), "pages_per_second": round(pages / seconds, 1)}
        print(f"parse {name}: {pages} pages in {seconds:.1f}s = {pages / seconds:.1f} pages/s", flush=True)
    if not args.skip_mineru:
        results["pymupdf_vs_mineru_flash"] = _versus_mineru_flash(
            {s.pdf_path: pdf_page_count(s.pdf_path) for s in sources}, our_seconds
        )

    started = time.perf_counter()  # as the parse stage runs the gate: once per run of up to 8 papers
    papers = [(paper, paper.counts()["pages"]) for paper in parsed_by_backend["pymupdf"]]
    for first in range(0, len(papers), PAPERS_PER_RUN):
        validate_papers(papers[first : first + PAPERS_PER_RUN], max_chunk_tokens=512)
    seconds = time.perf_counter() - started
    results["quality_gates"] = {"seconds": round(seconds, 2), "pages_per_second": round(pages / seconds, 1)}

    del parsed_by_backend, papers
    flash = results.get("pymupdf_vs_mineru_flash", {})
    speeds = flash.get("mineru_flash_pages_per_second")  # in process (the anchor) and CLI+server, on these PDFs
    parsed_by_flash = [Path(p) for p in flash.get("parsed_pdfs", [])] or [s.pdf_path for s in sources]
    _export_graphs()  # a first use on this machine exports the ONNX graphs: not part of any timed ingest
    with tempfile.TemporaryDirectory(prefix="paperlake-bench-") as work:
        inbox = _inbox_of(Path(work) / "inbox", parsed_by_flash)
        pages_in = sum(pdf_page_count(pdf) for pdf in parsed_by_flash)
        cache = Path(work) / "embeddings.sqlite"
        for label in ("cold", "warm"):  # warm: a fresh home, the embedding cache of the cold run
            settings = {"home": Path(work) / label, "backend": "pymupdf", "embedding_cache": cache}
            results[f"end_to_end_{label}"] = _timed_ingest(inbox, settings, pages_in, speeds)
        # the float graph (`backend: onnx`, torch's vectors), cold: its own home and embedding cache, same PDFs
        float_config = Path(work) / "collections-float.yaml"
        float_config.write_text(_with_backend(default_config_path().read_text(encoding="utf-8"), "onnx"))
        settings = {"home": Path(work) / "cold-float", "backend": "pymupdf", "embedding_cache": Path(work) / "f.sqlite"}
        results["end_to_end_cold_float"] = _timed_ingest(
            inbox, settings, pages_in, speeds, env={"PAPERLAKE_COLLECTIONS": str(float_config)}
        )
        # the smallest volume alone, cold (its own home and cache): the per-ingest fixed costs (Dagster runs, two dbt
        # builds, the self-evaluation) weigh most on a small volume; MinerU's speed on exactly those PDFs
        by_volume = flash.get("by_volume", {})
        if by_volume:
            volume, theirs = min(by_volume.items(), key=lambda item: item[1]["pages"])
            results["end_to_end_cold_one_volume"] = _one_volume(
                volume,
                [Path(pdf) for pdf in theirs["pdfs"]],
                Path(work),
                args.volume_repeats,
                theirs["mineru_flash_pages_per_second"],
            )
        settings = {"home": Path(work) / "mineru", "backend": "auto", "mineru_dir": (args.corpus / "mineru").resolve()}
        every_pdf = _inbox_of(Path(work) / "inbox-all", [s.pdf_path for s in sources]) if args.pdfs else None
        results["ingest_mineru_outputs"] = _timed_ingest(every_pdf or [args.corpus / "inbox"], settings, pages, None)
    results["peak_rss_mb"] = peak_rss_mb()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
