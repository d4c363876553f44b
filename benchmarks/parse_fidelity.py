"""Parse fidelity per element class against ground truth by construction, detectors side by side.

Detectors, all run here on the same PDFs:
- ``paperlake``: the default parser (:mod:`paperlake.parsing.pymupdf_backend`), whole pipeline to views;
- ``layout``: PyMuPDF's layout model alone (``page.get_layout()``: ``table``, ``picture``, ``formula`` boxes);
- ``mineru``: MinerU's offline flash tier (``benchmarks/mineru_flash.py``: installed in its own venv on first use,
  or ``$PAPERLAKE_MINERU_EXECUTABLE``), timed per PDF through its CLI and a private local server.

Scores come from :func:`paperlake.parsing.gold.score`: recall/precision per class (IoU ≥ 0.5, same page, one to
one), caption label attached to the right element, exact table cell grids, equation LaTeX equal to the gold
source (normalised-equal or sympy-equivalent). Pages per second are timed per detector.

Run: ``python benchmarks/parse_fidelity.py [--gold tests/data/synthetic] [--detectors paperlake layout]
[--docs syn-001 ...] [--out benchmarks/results/parse_fidelity.json]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from paperlake.parsing.gold import (  # noqa: E402
    CLASSES,
    Detection,
    GoldDocument,
    detections_from_parsed,
    load_gold,
    score,
)

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "parse_fidelity.json"
_LAYOUT_CLASSES = {"table": "tables", "picture": "figures", "formula": "equations"}


def run_paperlake(document: GoldDocument) -> list[Detection]:
    from paperlake.lake.inbox import PaperSource
    from paperlake.parsing.pymupdf_backend import parse

    source = PaperSource(paper_key=document.doc, volume="synthetic", pdf_path=document.pdf, sha256="0" * 64)
    return detections_from_parsed(parse(source), "paperlake")


def run_layout(document: GoldDocument) -> list[Detection]:
    from paperlake import allow_pymupdf_layout

    allow_pymupdf_layout()  # paperlake keeps PyMuPDF's layout model out of its processes
    import pymupdf.layout  # activates the ONNX layout model

    found = []
    with pymupdf.open(document.pdf) as pdf:
        for page in pdf:
            page.get_layout()
            for x0, y0, x1, y1, kind in page.layout_information or []:
                if kind in _LAYOUT_CLASSES:
                    found.append(Detection(_LAYOUT_CLASSES[kind], page.number + 1, (x0, y0, x1, y1), detector="layout"))
    return found


_FLASH: dict = {}  # the one MinerU server of this run, started on first use


def run_mineru(document: GoldDocument) -> list[Detection]:
    """MinerU's flash tier (benchmarks/mineru_flash.py: its own venv, a private server stopped at exit)."""
    import atexit

    from mineru_flash import FlashServer, MineruUnavailable, elements, locate_or_install

    if "server" not in _FLASH:
        server = FlashServer(locate_or_install()).__enter__()
        atexit.register(server.__exit__)
        _FLASH["server"] = server
    started = time.perf_counter()
    try:
        result = _FLASH["server"].parse(document.pdf)
    except MineruUnavailable as error:  # one document failed offline (flash wants OCR models for some pages)
        _FLASH.setdefault("failures", {})[document.doc] = str(error)[:300]
        _FLASH["failed_seconds"] = _FLASH.get("failed_seconds", 0.0) + time.perf_counter() - started
        return []
    return [Detection(kind, page, box, detector="mineru") for kind, page, box in elements(result.documents)]


DETECTORS = {"paperlake": run_paperlake, "layout": run_layout, "mineru": run_mineru}


def latex_equal(gold: str, ours: str) -> bool:
    from latex import sympy_equivalent  # benchmarks/latex.py
    from paperlake.parsing.glyph_latex import latex_comparison_key

    if latex_comparison_key(gold) == latex_comparison_key(ours):
        return True
    equivalent, _ = sympy_equivalent(gold, ours)
    return bool(equivalent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gold", type=Path, default=ROOT / "tests" / "data" / "synthetic")
    parser.add_argument("--detectors", nargs="+", default=list(DETECTORS), choices=list(DETECTORS))
    parser.add_argument("--docs", nargs="*")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--show", type=int, default=8, help="failures listed per class in the printout")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    documents = [d for d in load_gold(args.gold) if not args.docs or d.doc in args.docs]
    pages = sum(len(d.pages) for d in documents)
    results: dict[str, Any] = {"gold": str(args.gold), "documents": len(documents), "pages": pages, "detectors": {}}
    for name in args.detectors:
        detect = DETECTORS[name]
        detect(documents[0])  # warm-up: imports, models
        started = time.perf_counter()
        found = {document.doc: detect(document) for document in documents}
        seconds = time.perf_counter() - started
        scores = score(documents, found, latex_equal if name == "paperlake" else None)
        scores["seconds"] = round(seconds, 2)
        done = pages
        if name == "mineru" and _FLASH.get("failures"):  # scored as finding nothing in those documents
            failed = _FLASH["failures"]
            scores["failed_documents"] = failed
            done = sum(len(d.pages) for d in documents if d.doc not in failed)
            seconds -= _FLASH.get("failed_seconds", 0.0)  # speed over the documents it did parse
            parsed = [d for d in documents if d.doc not in failed]
            scores["on_parsed_documents"] = {
                kind: {k: v for k, v in part.items() if k in ("gold", "found", "matched", "recall", "precision")}
                for kind, part in score(parsed, {d.doc: found[d.doc] for d in parsed}).items()
                if kind in CLASSES
            }
            print(f"\nmineru failed on {len(failed)} document(s) (scored as finding nothing): {sorted(failed)}")
            for kind, part in scores["on_parsed_documents"].items():
                print(
                    f"  on the {len(parsed)} it parsed, {kind}: recall {part['recall']} precision {part['precision']}"
                )
        scores["pages_per_second"] = round(done / seconds, 2)  # pages parsed, not pages attempted
        results["detectors"][name] = scores
        print(f"\n== {name}: {done} pages in {seconds:.1f}s = {done / seconds:.1f} pages/s")
        for kind in ("tables", "figures", "equations"):
            s = scores[kind]
            print(
                f"{kind:<10} gold {s['gold']:>4} found {s['found']:>4} matched {s['matched']:>4} "
                f"recall {s['recall']} precision {s['precision']} (ignored {s['ignored']})"
            )
            for line in s["misses"][: args.show]:
                print(f"    miss   {line}")
            for line in s["false_alarms"][: args.show]:
                print(f"    extra  {line}")
        c, g = scores["captions"], scores["table_grids"]
        print(f"captions right {c['right']}/{c['gold']} = {c['right_of_gold']} (of matched {c['right_of_matched']})")
        print(f"table grids exact {g['exact']}/{g['gold']} = {g['exact_of_gold']} (of matched {g['exact_of_matched']})")
        if "equation_latex" in scores:
            e = scores["equation_latex"]
            print(f"equation LaTeX equal {e['equal']}/{e['matched']} = {e['equal_of_matched']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
