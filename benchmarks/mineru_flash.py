"""MinerU's offline ``flash`` tier, run beside our parser on the same PDFs in the same run.

MinerU 4 (``mineru`` on PyPI) cannot share our environment, so it lives in its own venv:
``$PAPERLAKE_MINERU_EXECUTABLE`` when set, else ``benchmarks/.mineru-venv/bin/mineru``, installed there on first use
(``pip install mineru==4.0.12``; no torch). The flash tier reads the PDF's text layer without models, but asks
modelscope.cn for OCR weights on some pages with raster images: offline, such a PDF fails with MinerU's own error,
reported per PDF. Its CLI talks to a local server; :class:`FlashServer` starts a private one with its own ``HOME``
(no state shared with a user's MinerU; a Unix socket, TCP only on the loopback), telemetry off, and stops it by pid.

Timing is per PDF, wall clock, warm server: ``mineru parse PDF --tier flash --pages all --force``. Each call also
pays the CLI's start and a round trip to the server; that overhead is measured on a call that parses nothing
(``mineru server status``) and reported, and the ratio uses the time net of it (the conservative choice for us).

Pages and elements come from the parse's document JSON in the server's document library, which MinerU writes in
batches of pages (``1-10_<time>.json``, ``11-32_<time>.json``): every batch of the parse counts (an earlier version
read the last batch only and so undercounted MinerU's pages of every PDF longer than ten). Elements are ``table``,
``image`` and ``equation`` blocks with boxes as page fractions, returned in PDF points.

Run alone: ``python benchmarks/mineru_flash.py PDF...`` prints pages/s and the element counts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "benchmarks" / ".mineru-venv"
MINERU_VERSION = "4.0.12"  # the version ENVIRONMENT.md measured; flash tier offline, no models
_KINDS = {"table": "tables", "image": "figures", "equation": "equations"}


class MineruUnavailable(RuntimeError):
    """MinerU could not be installed, started or run; the message says which and why, in one line."""


def locate_or_install() -> Path:
    """The ``mineru`` executable: the configured one, else the benchmark venv's, installing it there if needed."""
    configured = os.environ.get("PAPERLAKE_MINERU_EXECUTABLE")
    if configured:
        path = Path(configured)
        if not path.exists():
            raise MineruUnavailable(f"PAPERLAKE_MINERU_EXECUTABLE={configured} does not exist")
        return path
    executable = VENV / "bin" / "mineru"
    if executable.exists():
        return executable
    python = "python3.11" if _has("python3.11") else sys.executable
    for step in (
        [python, "-m", "venv", str(VENV)],
        [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", f"mineru=={MINERU_VERSION}"],
    ):
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise MineruUnavailable(f"installing mineru failed at `{' '.join(step[:4])}`: {tail[0]}")
    if not executable.exists():
        raise MineruUnavailable(f"pip installed mineru but {executable} is missing")
    return executable


def _has(command: str) -> bool:
    return subprocess.run(["sh", "-c", f"command -v {command}"], capture_output=True).returncode == 0


@dataclass
class FlashResult:
    pdf: Path
    pages: int
    seconds: float  # wall clock of the parse call
    documents: tuple[Path, ...]  # the document JSON batches of this parse (MinerU writes one per page range)


class FlashServer:
    """A private MinerU server for one benchmark run: own HOME, telemetry off, stopped by pid on exit."""

    def __init__(self, executable: Path) -> None:
        self.executable = executable
        self._home = tempfile.TemporaryDirectory(prefix="paperlake-mineru-")
        self.home = Path(self._home.name)
        self.pid: int | None = None
        self.version = ""

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {**os.environ, "HOME": str(self.home), "NO_COLOR": "1"}
        try:
            return subprocess.run(
                [str(self.executable), *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=self.home
            )
        except subprocess.TimeoutExpired as error:
            raise MineruUnavailable(f"`mineru {' '.join(args[:3])}` did not finish in {timeout:.0f} s") from error

    def __enter__(self) -> FlashServer:
        started = self._run("server", "start")
        found = re.search(r"PID (\d+)", started.stdout + started.stderr)
        if started.returncode != 0 or not found:
            raise MineruUnavailable(f"`mineru server start` failed: {(started.stdout + started.stderr).strip()[:300]}")
        self.pid = int(found.group(1))
        try:
            self._run("telemetry", "disable")
            version = self._run("version")
            self.version = " ".join(version.stdout.split())[:120]
            self._check_loopback()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _check_loopback(self) -> None:
        """The server's transports: a Unix socket in our HOME, or TCP on the loopback only."""
        endpoint = self.home / ".mineru" / "doclib.endpoint.json"
        if not endpoint.exists():
            return
        for transport in json.loads(endpoint.read_text()).get("transports", []):
            host = str(transport.get("host", "127.0.0.1"))
            if transport.get("type") != "uds" and host not in {"127.0.0.1", "localhost", "::1"}:
                raise MineruUnavailable(f"the MinerU server listens on {host}, not the loopback")

    def __exit__(self, *exc: object) -> None:
        try:
            self._run("server", "stop", timeout=30)
        except MineruUnavailable:
            pass
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._home.cleanup()

    def overhead_seconds(self, repeats: int = 3) -> float:
        """The cost of one CLI call and server round trip that parses nothing."""
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            self._run("server", "status")
            times.append(time.perf_counter() - started)
        return min(times)

    def parse(self, pdf: Path) -> FlashResult:
        out = self.home / "out" / f"{pdf.stem}.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        done = self._run(
            "parse",
            str(pdf),
            "--tier",
            "flash",
            "--pages",
            "all",
            "--force",
            "--json",
            "--wait",
            "900",
            "-o",
            str(out),
            timeout=960,
        )
        seconds = time.perf_counter() - started
        try:
            status = json.loads(done.stdout)
        except json.JSONDecodeError:
            status = {}
        if done.returncode != 0 or "error" in status or (status.get("parse") or {}).get("status") != "done":
            detail = json.dumps(status.get("error")) if status.get("error") else (done.stdout + done.stderr)[-300:]
            raise MineruUnavailable(f"mineru flash failed on {pdf.name}: {detail.strip()}")
        documents = self._documents(pdf)
        pages = len(
            {
                page["page_idx"]
                for document in documents
                for page in json.loads(document.read_text(encoding="utf-8"))["pages"]
            }
        )
        return FlashResult(pdf, pages, seconds, documents)

    def _documents(self, pdf: Path) -> tuple[Path, ...]:
        """The newest document JSON of each page range (``1-10_<time>.json``, ``11-32_<time>.json``: MinerU writes
        a long PDF in batches of pages, and every parse adds its own files)."""
        digest = hashlib.sha256(pdf.read_bytes()).hexdigest()
        folder = self.home / ".mineru" / "doclib" / "parsed" / digest[:2] / digest / "flash"
        newest: dict[str, Path] = {}
        for path in sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime):
            newest[path.stem.rsplit("_", 1)[0]] = path
        if not newest:
            raise MineruUnavailable(f"mineru flash wrote no document JSON for {pdf.name} under {folder}")
        return tuple(newest.values())


def time_flash(pdfs: list[Path], server: FlashServer, *, warm_up: bool = True) -> dict:
    """Pages/s of the flash tier over ``pdfs`` (warm server: one untimed parse first, unless ``warm_up`` is false for
    a server that has parsed before). A PDF MinerU cannot parse offline is listed under ``failed`` with its error and
    left out of the speed; none parsed is an error."""
    overhead = server.overhead_seconds()
    results, failed = [], {}
    for index, pdf in enumerate(pdfs):
        try:
            if warm_up and index == len(failed) and not results:
                server.parse(pdf)  # warm-up on the first PDF it can parse
            results.append(server.parse(pdf))
        except MineruUnavailable as error:
            failed[str(pdf)] = str(error)[:300]
    if not results:
        first = next(iter(failed.values()))
        raise MineruUnavailable(f"mineru flash parsed none of {len(pdfs)} PDFs; first error: {first}")
    pages = sum(r.pages for r in results)
    seconds = sum(r.seconds for r in results)
    net = max(seconds - overhead * len(results), 1e-9)
    return {
        "mineru_version": server.version,
        "tier": "flash",
        "pdfs": len(results),
        "pages": pages,
        "seconds": round(seconds, 2),
        "pages_per_second": round(pages / seconds, 2),
        "cli_overhead_seconds_per_call": round(overhead, 3),
        "pages_per_second_net_of_cli": round(pages / net, 2),
        "command": f"{server.executable} parse PDF --tier flash --pages all --force --json",
        "failed": failed,
        "results": results,
    }


def elements(documents: tuple[Path, ...]) -> list[tuple[str, int, tuple[float, float, float, float]]]:
    """(kind, page from 1, box in PDF points) for the tables, images and equations of a flash parse (all its
    page batches)."""
    found = []
    for document in documents:
        found += _document_elements(json.loads(document.read_text(encoding="utf-8")))
    return found


def _document_elements(data: dict) -> list[tuple[str, int, tuple[float, float, float, float]]]:
    sizes = {
        p["page_idx"]: (p["width_pt"], p["height_pt"])
        for p in data.get("extensions", {}).get("docvortex_layout", {}).get("pages", [])
    }
    found = []
    for page in data["pages"]:
        width, height = sizes.get(page["page_idx"], (612.0, 792.0))
        for block in page.get("blocks", []):
            kind = _KINDS.get(block.get("type"))
            if kind is None or not block.get("bbox"):
                continue
            x0, y0, x1, y1 = block["bbox"]
            found.append((kind, page["page_idx"] + 1, (x0 * width, y0 * height, x1 * width, y1 * height)))
    return found


def main(argv: list[str] | None = None) -> int:
    pdfs = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    if not pdfs:
        print(__doc__)
        return 2
    with FlashServer(locate_or_install()) as server:
        timing = time_flash(pdfs, server)
        counts: dict[str, int] = {}
        for result in timing.pop("results"):
            for kind, _, _ in elements(result.documents):
                counts[kind] = counts.get(kind, 0) + 1
    print(json.dumps({**timing, "elements": counts}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
