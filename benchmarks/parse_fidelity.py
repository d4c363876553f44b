"""Parse fidelity per element class against ground truth, detectors side by side.

Gold sets: a folder of synthetic papers with ground truth by construction (``tests/data/synthetic``, the committed
set; a held-out set is generated with another seed, see ``benchmarks/synthetic/generate.py``), or the by-eye gold of
the sample corpus (``tests/data/sample_objects_gold.json``: figures and tables only, so only those are scored).

Detectors, all run here on the same PDFs:
- ``paperlake``: the default parser (:mod:`paperlake.parsing.pymupdf_backend`), whole pipeline to views; a figure's
  panels are parts of it, not figures, and are left out;
- ``layout``: PyMuPDF's layout model alone (``page.get_layout()``: ``table``, ``picture``, ``formula`` boxes);
- ``mineru``: MinerU's offline flash tier (``benchmarks/mineru_flash.py``: installed in its own venv on first use,
  or ``$PAPERLAKE_MINERU_EXECUTABLE``), timed per PDF through its CLI and a private local server;
- ``mineru_outputs``: MinerU's own outputs of its model pipeline where they exist (``--mineru-dir``, one folder per
  PDF stem, as ``../shared/corpus/mineru`` holds for the sample): read, not run, so it has no speed; its caption
  blocks give the labels.

Scores come from :func:`paperlake.parsing.gold.score`: recall/precision per class (IoU ≥ 0.5, same page, one to
one), caption label attached to the right element, exact table cell grids, equation LaTeX equal to the gold
source (normalised-equal or sympy-equivalent). Pages per second are timed per detector. The headline figures are
also written as top-level numbers (``<detector>_<class>_<measure>``) so that a results page can show them as is.

Run: ``python benchmarks/parse_fidelity.py [--gold tests/data/synthetic | tests/data/sample_objects_gold.json]
[--detectors paperlake mineru_outputs] [--docs syn-001 ...] [--out benchmarks/results/parse_fidelity.json]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
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
DEFAULT_MINERU_DIR = ROOT.parent / "shared" / "corpus" / "mineru"
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


_MINERU_BLOCKS = {"table": "tables", "image": "figures", "chart": "figures", "interline_equation": "equations"}
_LABEL = re.compile(r"^\s*(Table|Tab\.|Figure|Fig\.)\s*([A-Z]?\.?\d+(?:\.\d+)?)")
_MINERU_OUTPUTS: dict[str, Path] = {"dir": DEFAULT_MINERU_DIR}


def run_mineru_outputs(document: GoldDocument) -> list[Detection]:
    """MinerU's pipeline outputs for this PDF (its middle JSON): body boxes, and the label its caption block starts
    with. Nothing when there are no outputs for the PDF."""
    folder = _MINERU_OUTPUTS["dir"] / document.pdf.stem
    middle = next((p for p in (folder / "layout.json", folder / "layout.json.gz") if p.exists()), None)
    if middle is None:
        return []
    with (gzip.open if middle.suffix == ".gz" else open)(middle, "rt", encoding="utf-8") as handle:
        pages = json.load(handle)["pdf_info"]
    found = []
    for page in pages:
        for block in page.get("para_blocks", []):
            kind = _MINERU_BLOCKS.get(block["type"])
            if kind is None:
                continue
            parts = block.get("blocks", [])
            body = next((b["bbox"] for b in parts if b["type"].endswith("_body")), block["bbox"])
            caption = " ".join(
                span.get("content", "")
                for b in parts
                if b["type"].endswith("_caption")
                for line in b.get("lines", [])
                for span in line.get("spans", [])
            )
            match = _LABEL.match(caption)
            label = f"{'Table' if match.group(1).startswith('Tab') else 'Figure'} {match.group(2)}" if match else None
            box = tuple(map(float, body))
            found.append(Detection(kind, page["page_idx"] + 1, box, label, detector="mineru_outputs"))
    return found


DETECTORS = {
    "paperlake": run_paperlake,
    "layout": run_layout,
    "mineru": run_mineru,
    "mineru_outputs": run_mineru_outputs,
}


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
    parser.add_argument("--detectors", nargs="+", default=["paperlake", "layout", "mineru"], choices=list(DETECTORS))
    parser.add_argument("--docs", nargs="*")
    parser.add_argument("--mineru-dir", type=Path, default=DEFAULT_MINERU_DIR, help="MinerU outputs, a folder per PDF")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--show", type=int, default=8, help="failures listed per class in the printout")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    _MINERU_OUTPUTS["dir"] = args.mineru_dir
    documents = [d for d in load_gold(args.gold) if not args.docs or d.doc in args.docs]
    pages = sum(len(d.pages) for d in documents)
    classes = [kind for kind in CLASSES if any(kind in d.classes for d in documents)]
    gold = args.gold.resolve()
    gold_name = str(gold.relative_to(ROOT)) if gold.is_relative_to(ROOT) else str(gold)
    results: dict[str, Any] = {"gold": gold_name, "documents": len(documents), "pages": pages}
    manifest = gold / "manifest.json"
    if manifest.exists():  # a generated set: the seed makes it again (a held-out set is not committed)
        results["seed"] = json.loads(manifest.read_text())["seed"]
    loads = [os.getloadavg()[0]]  # the machine is shared: its load says how far to trust the speeds
    summary: dict[str, Any] = {}
    results["detectors"] = {}
    for name in args.detectors:
        detect = DETECTORS[name]
        detect(documents[0])  # warm-up: imports, models
        started = time.perf_counter()
        found = {document.doc: detect(document) for document in documents}
        seconds = time.perf_counter() - started
        loads.append(os.getloadavg()[0])
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
        for kind in classes:
            summary[f"{name}_{kind}_recall"] = scores[kind]["recall"]
            summary[f"{name}_{kind}_precision"] = scores[kind]["precision"]
        summary[f"{name}_captions_right"] = scores["captions"]["right_of_gold"]
        if name != "mineru_outputs":
            summary[f"{name}_pages_per_second"] = scores["pages_per_second"]
        for kind in classes:
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
        if "equation_latex" in scores and "equations" in classes:
            e = scores["equation_latex"]
            print(f"equation LaTeX equal {e['equal']}/{e['matched']} = {e['equal_of_matched']}")
    if "paperlake" in results["detectors"] and "mineru" in results["detectors"]:
        ours, theirs = results["detectors"]["paperlake"], results["detectors"]["mineru"]
        summary["paperlake_vs_mineru_flash_speed"] = round(ours["pages_per_second"] / theirs["pages_per_second"], 1)
    results = {
        **{k: results[k] for k in ("gold", "seed", "documents", "pages") if k in results},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "environment": {
            "load_average_1min_during_run": {"mean": round(sum(loads) / len(loads), 2), "max": round(max(loads), 2)}
        },
        **summary,
        "detectors": results["detectors"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
