"""MinerU's flash tier the fastest way MinerU offers: its own Python API, in process, in its own venv.

    benchmarks/.mineru-venv/bin/python benchmarks/mineru_in_process.py PDF...   # one JSON line on stdout

``mineru.backend.analyze.doc_analyze(pdf_bytes, effort="flash")`` is the public entry that MinerU's own parser (and
so its CLI's server, for ``--tier flash``) calls. Called directly it pays no CLI start, no server round trip and no
writing of outputs: this is the anchor the ingest benchmark reports its ratios against, with the CLI+server figure of
``mineru_flash.py`` beside it. The clock starts after the import; one untimed call on the first PDF it can parse
warms it (the first call loads the rest of the pipeline and its ONNX sessions, about twice a warm call's time here),
as the CLI path warms its server; then one timed call per PDF, wall clock. A PDF the flash tier cannot parse offline
(it asks modelscope.cn for OCR weights on some pages with raster images) is listed with its error, out of the speed.

This file runs on both sides: under MinerU's venv as a script (standard library and ``mineru`` only), and imported by
``benchmarks/ingest.py`` (:func:`time_in_process` starts the script with a private ``HOME``, as ``FlashServer`` does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CALL = 'mineru.backend.analyze.doc_analyze(pdf_bytes, effort="flash")'
RESULT_MARK = "mineru-in-process: "


@dataclass
class InProcessResult:
    pdf: Path
    pages: int
    seconds: float  # wall clock of the doc_analyze call


def time_in_process(pdfs: list[Path], mineru_executable: Path, *, timeout: float = 3600) -> dict:
    """Pages/s of ``doc_analyze(..., effort="flash")`` over ``pdfs``, run by the python beside ``mineru_executable``
    (MinerU's venv). Raises ``MineruUnavailable`` (of ``mineru_flash``) when the script cannot run or parsed none."""
    from mineru_flash import MineruUnavailable

    python = mineru_executable.parent / "python"
    if not python.exists():
        raise MineruUnavailable(f"no python beside {mineru_executable} to call MinerU's API in process")
    with tempfile.TemporaryDirectory(prefix="paperlake-mineru-api-") as home:
        env = {**os.environ, "HOME": home, "MINERU_HOME": str(Path(home) / ".mineru"), "NO_COLOR": "1"}
        env.pop("PYTHONPATH", None)  # MinerU's venv alone, not ours
        try:
            done = subprocess.run(
                [str(python), str(Path(__file__).resolve()), *(str(pdf) for pdf in pdfs)],
                capture_output=True,
                text=True,
                env=env,
                cwd=home,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as error:
            raise MineruUnavailable(f"MinerU in process did not finish {len(pdfs)} PDFs in {timeout:.0f} s") from error
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if done.returncode != 0 or not lines:
        raise MineruUnavailable(f"MinerU in process failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    report = json.loads(lines[-1][len(RESULT_MARK) :])
    results = [InProcessResult(Path(row["pdf"]), row["pages"], row["seconds"]) for row in report.pop("per_pdf")]
    if not results:
        first = next(iter(report["failed"].values()), "no PDF given")
        raise MineruUnavailable(f"MinerU in process parsed none of {len(pdfs)} PDFs; first error: {first}")
    pages, seconds = sum(r.pages for r in results), sum(r.seconds for r in results)
    return {
        **report,
        "tier": "flash",
        "call": CALL,
        "command": f"{python} benchmarks/{Path(__file__).name} PDF...",
        "pdfs": len(results),
        "pages": pages,
        "seconds": round(seconds, 2),
        "pages_per_second": round(pages / seconds, 2),
        "results": results,
    }


def main(pdfs: list[Path]) -> int:
    """The side that runs in MinerU's venv: import, warm up, time each PDF, print one marked JSON line."""
    started = time.perf_counter()
    from mineru.backend.analyze import doc_analyze
    from mineru.version import __version__

    import_seconds = time.perf_counter() - started
    per_pdf, failed, warm_up_seconds = [], {}, None
    for pdf in pdfs:
        pdf_bytes = pdf.read_bytes()
        try:
            if warm_up_seconds is None:
                started = time.perf_counter()
                doc_analyze(pdf_bytes, effort="flash")
                warm_up_seconds = time.perf_counter() - started
            started = time.perf_counter()
            _, model_json = doc_analyze(pdf_bytes, effort="flash")
            seconds = time.perf_counter() - started
        except Exception as error:  # one PDF's failure (offline OCR weights) must not stop the others
            failed[str(pdf)] = f"{type(error).__name__}: {error}"[:300]
            continue
        per_pdf.append({"pdf": str(pdf), "pages": len(model_json.pages), "seconds": round(seconds, 3)})
        print(f"{pdf.name}: {len(model_json.pages)} pages in {seconds:.2f} s", file=sys.stderr, flush=True)
    report = {
        "mineru_version": f"MinerU version: {__version__} Python version: {sys.version.split()[0]}",
        "import_seconds": round(import_seconds, 2),
        "warm_up_seconds": round(warm_up_seconds, 2) if warm_up_seconds is not None else None,
        "per_pdf": per_pdf,
        "failed": failed,
    }
    print(RESULT_MARK + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        raise SystemExit(2)
    raise SystemExit(main([Path(p) for p in sys.argv[1:]]))
