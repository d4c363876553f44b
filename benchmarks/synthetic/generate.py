"""Synthetic papers with ground truth by construction: LaTeX written here, positions written by TeX.

Every document varies what real papers vary — one or two columns, body fonts, paper sizes, ``table``/``table*``,
booktabs, fully ruled, horizontally ruled and rule-less tables, two-level headers (``\\multicolumn``) and row groups
(``\\multirow``), captions above and below, pgfplots charts, raster images, subcaption grids, uncaptioned TikZ trees
and flowcharts in the text flow, ``tcolorbox`` prompt boxes captioned as a Figure or a Table, algorithms,
numbered, unnumbered and ``aligned`` display equations, footnotes, three heading levels and a bibliography.

Gold positions are not detected from the PDF. Each element's body is typeset as a box through ``\\goldbox`` /
``\\goldmath``; pdfTeX's ``\\pdfsavepos`` records where the box lands and a ``\\write`` (expanded at shipout) records
page, position, width, height and depth in ``<job>.gold``. A subcaption grid's whole figure is the union of its
panels' boxes. Everything else (type, label, caption, cell grid, equation source) is known when
the source is written.

Run: ``python benchmarks/synthetic/generate.py [--docs 16] [--seed 2026] [--out tests/data/synthetic]``
(needs ``pdflatex`` with TikZ/pgfplots, booktabs, multirow, subcaption, tcolorbox, algorithmicx: Debian's
``texlive-latex-extra texlive-pictures texlive-science texlive-fonts-recommended``). The output folder gets
``syn-NNN.pdf`` and ``syn-NNN.gold.json`` per document and a ``manifest.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pymupdf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from latex_parts import (
    TOPICS,
    Element,
    algorithm,
    diagram,
    equation,
    figure,
    figure_sentence,
    paragraph,
    prompt_box,
    sentence,
    side_by_side,
    table,
    title,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "tests" / "data" / "synthetic"
SP_PER_BP = 65536 * 72.27 / 72  # TeX scaled points per PDF point

PREAMBLE = r"""
\documentclass[%(size)s,%(columns)s]{article}
\usepackage[%(paper)s, margin=%(margin)s]{geometry}
\usepackage[T1]{fontenc}
%(font)s
\usepackage{amsmath,amssymb}
\usepackage{graphicx,booktabs,multirow,subcaption,tcolorbox,xcolor}
\usepackage{pgfplots}
\pgfplotsset{compat=1.17}
\usetikzlibrary{positioning}
\usepackage{algorithm,algpseudocode}
\usepackage[hidelinks]{hyperref}
\captionsetup{font=small}
\makeatletter
\newwrite\gold@out
\immediate\openout\gold@out=\jobname.gold
\newsavebox\gold@box
%% \goldbox{id}{content}: typeset content as a box and record page, position (pdfsavepos) and size at shipout.
%% (the \write whatsit follows the \pdfsavepos whatsit, so at shipout \pdflastxpos is this box's position)
\newcommand\goldbox[2]{\sbox\gold@box{#2}\mbox{\pdfsavepos\usebox\gold@box\gold@record{#1}}}
\newcommand\goldmath[2]{\sbox\gold@box{$\displaystyle #2$}\mbox{\pdfsavepos\usebox\gold@box\gold@record{#1}}}
\newcommand\gold@record[1]{\edef\gold@tmp{\noexpand\write\gold@out{box #1 \the\wd\gold@box\space
  \the\ht\gold@box\space\the\dp\gold@box\space\noexpand\the\noexpand\pdflastxpos\space
  \noexpand\the\noexpand\pdflastypos\space\noexpand\the\noexpand\c@page}}\gold@tmp}
%% \goldgroup{id}{panels}: a whole figure made of \goldbox panels; its box is the union of theirs.
\newcommand\goldgroup[2]{#2}
\makeatother
%(floats)s
\title{%(title)s}
\author{%(authors)s}
\date{}
\begin{document}
\maketitle
"""

FONTS = {
    "cm": "",
    "times": r"\usepackage{mathptmx}",
    "palatino": r"\usepackage{mathpazo}",
    "charter": r"\usepackage{charter}",
}


def raster_images(folder: Path, rng: random.Random, count: int = 4) -> list[str]:
    """Small PNG images (gradients with blocks, like photos or heat maps) written with PyMuPDF."""
    names = []
    for k in range(count):
        width, height = rng.choice(((240, 160), (200, 200), (320, 140)))
        base = [rng.randrange(256) for _ in range(3)]
        blocks = [
            (rng.randrange(width), rng.randrange(height), rng.randint(20, 80), [rng.randrange(256) for _ in range(3)])
            for _ in range(6)
        ]
        samples = bytearray()
        for y in range(height):
            for x in range(width):
                pixel = [(c + (x * 97 + y * 57) // 9) % 256 for c in base]
                for bx, by, side, colour in blocks:
                    if bx <= x < bx + side and by <= y < by + side:
                        pixel = colour
                samples.extend(pixel)
        name = f"image{k}.png"
        pymupdf.Pixmap(pymupdf.csRGB, width, height, bytes(samples), False).save(str(folder / name))
        names.append(name)
    return names


# Floats may take most of a page, as conference styles allow: a tall float is placed near its text, not at the end.
FLOAT_FRACTIONS = r"""
\renewcommand{\topfraction}{0.85}
\renewcommand{\bottomfraction}{0.7}
\renewcommand{\textfraction}{0.1}
\renewcommand{\floatpagefraction}{0.75}
\renewcommand{\dbltopfraction}{0.85}
"""
# Floats set tight against the text around them, as conference styles squeeze them to save space.
TIGHT_FLOATS = r"""
\setlength{\intextsep}{4pt plus 1pt}
\setlength{\textfloatsep}{6pt plus 2pt}
\setlength{\floatsep}{6pt plus 2pt}
\setlength{\dbltextfloatsep}{6pt plus 2pt}
\captionsetup{skip=3pt}
"""


def document(
    rng: random.Random, doc_id: str, images: list[str], *, patterns: bool = True
) -> tuple[str, dict[str, Any], list[Element]]:
    """The LaTeX source of one paper, its settings and its gold elements in source order.

    With ``patterns`` (the default) the paper also holds what real papers print and the first committed set lacked:
    two floats side by side with their own captions, tables with rules inside the body and tall tables without
    rules, figures in two parts far apart, grids captioned as figures, glossed dependency examples, body sentences
    that begin "Figure N." at a line start, floats set tight against the text, and an appendix whose floats are
    numbered "Figure A.1", "Table B.2". Without it, the papers of the first committed set (seed 2026)."""
    two_columns = rng.random() < 0.7
    settings = {
        "columns": "twocolumn" if two_columns else "onecolumn",
        "size": rng.choice(("10pt", "11pt")),
        "paper": rng.choice(("a4paper", "letterpaper")),
        "margin": rng.choice(("2cm", "2.2cm", "2.5cm")) if two_columns else rng.choice(("2.5cm", "3cm")),
        "font": rng.choice(tuple(FONTS)),
    }
    if patterns:
        settings["tight_floats"] = rng.random() < 0.5
    head = PREAMBLE % {
        **settings,
        "floats": (FLOAT_FRACTIONS if patterns else "") + (TIGHT_FLOATS if settings.get("tight_floats") else ""),
        "font": FONTS[settings["font"]],
        "title": title(rng),
        "authors": r" \and ".join(
            f"{rng.choice(('Ana', 'Bo', 'Chen', 'Dara', 'Eli'))} "
            f"{rng.choice(('Ito', 'Kim', 'Lopez', 'Moreau', 'Singh'))}"
            for _ in range(rng.randint(1, 3))
        ),
    }
    body: list[str] = [r"\begin{abstract}", paragraph(rng, (4, 6)), r"\end{abstract}"]
    elements: list[Element] = []
    headings: list[dict[str, Any]] = []
    counters = {"table": 0, "figure": 0, "algorithm": 0, "element": 0}

    def new_id(prefix: str) -> str:
        counters["element"] += 1
        return f"{prefix}{counters['element']}"

    def add_float(element: Element) -> None:
        if appendix["section"]:
            element.gold.setdefault("patterns", []).append("appendix")
        placement = rng.choice(("t", "t", "h", "b", "!t", "tb")) if not element.float_env.endswith("*") else "t"
        body.append(
            rf"\begin{{{element.float_env}}}[{placement}]"
            + "\n"
            + element.source
            + "\n"
            + rf"\end{{{element.float_env}}}"
        )
        elements.append(element)

    def label(kind: str) -> int | str:
        """The next number of a table or figure: 3 in the body, "B.2" in the appendix's second section."""
        counters[kind] += 1
        if appendix["section"]:
            appendix[kind] += 1
            return f"{appendix['section']}.{appendix[kind]}"
        return counters[kind]

    def add_pair() -> None:
        """Two figures, two tables, or a figure and a table side by side, each with its own caption."""
        kinds = rng.choice((("figure", "figure"), ("figure", "figure"), ("table", "table"), ("figure", "table")))
        pair = []
        for kind in kinds:
            if kind == "figure":
                chosen = rng.choice(("plot", "raster", "grid"))
                pair.append(figure(rng, new_id("fig"), label("figure"), wide=False, image_files=images, kind=chosen))
            else:
                pair.append(table(rng, new_id("tab"), label("table"), wide=False, max_columns=3))
        for element in pair:
            element.gold.setdefault("patterns", []).append("side_by_side")
        if appendix["section"]:
            for element in pair:
                element.gold["patterns"].append("appendix")
        env, source = side_by_side(rng, pair, two_columns=two_columns)
        placement = "t" if env.endswith("*") else rng.choice(("t", "h", "b"))
        body.append(rf"\begin{{{env}}}[{placement}]" + "\n" + source + "\n" + rf"\end{{{env}}}")
        elements.extend(pair)

    def add_random_float(wide: bool) -> None:
        roll = rng.random()
        if roll < 0.35:
            add_float(table(rng, new_id("tab"), label("table"), wide=wide, max_columns=None if wide else 4))
        elif roll < 0.7:
            add_float(figure(rng, new_id("fig"), label("figure"), wide=wide, image_files=images))
        elif roll < 0.85:
            add_pair()
        else:
            as_table = rng.random() < 0.5
            kind = "table" if as_table else "figure"
            add_float(prompt_box(rng, new_id("box"), label(kind), as_table, wide=wide))

    appendix = {"section": "", "table": 0, "figure": 0}

    n_sections = rng.randint(4, 6)
    topics = rng.sample(TOPICS, n_sections + 4)
    for s in range(n_sections):
        heading = topics[s]
        body.append(rf"\section{{{heading}}}")
        headings.append({"level": 1, "text": heading})
        for sub in range(rng.choice((0, 1, 2, 2))):
            if sub or rng.random() < 0.5:
                sub_heading = topics[n_sections + (s + sub) % 4] + " " + rng.choice(("I", "II", "Setup", "Results"))
                body.append(rf"\subsection{{{sub_heading}}}")
                headings.append({"level": 2, "text": sub_heading})
                if rng.random() < 0.3:
                    body.append(rf"\subsubsection{{{title(rng)}}}")
            for _ in range(rng.randint(2, 4)):
                if patterns and rng.random() < 0.12 and (counters["figure"] or counters["table"]):
                    word = rng.choice(["Figure"] * bool(counters["figure"]) + ["Table"] * bool(counters["table"]))
                    body.append(figure_sentence(rng, word, str(rng.randint(1, counters[word.lower()]))))
                else:
                    body.append(paragraph(rng, footnote=rng.random() < 0.08))
                if patterns and rng.random() < 0.07:
                    add_pair()
                    continue
                roll = rng.random()
                wide = two_columns and rng.random() < 0.35
                if roll < 0.16:
                    narrow = 4 if patterns and two_columns and not wide else None  # a table that fits its column
                    add_float(
                        table(rng, new_id("tab"), label("table"), wide=wide, patterns=patterns, max_columns=narrow)
                    )
                elif roll < 0.30:
                    element = figure(
                        rng, new_id("fig"), label("figure"), wide=wide, image_files=images, patterns=patterns
                    )
                    add_float(element)
                elif roll < 0.35:
                    as_table = rng.random() < 0.5
                    kind = "table" if as_table else "figure"
                    add_float(prompt_box(rng, new_id("box"), label(kind), as_table, wide=wide))
                elif roll < 0.40:
                    element = diagram(rng, new_id("dia"), patterns=patterns)
                    body.append(element.source)
                    elements.append(element)
                elif roll < 0.43:
                    counters["algorithm"] += 1
                    add_float(algorithm(rng, new_id("alg"), counters["algorithm"]))
                elif roll < 0.75:
                    element = equation(rng, new_id("eq"))
                    body.append(paragraph(rng, (1, 2)) + "\n" + element.source)
                    elements.append(element)
                    if rng.random() < 0.3:
                        second = equation(rng, new_id("eq"))
                        body.append(sentence(rng) + "\n" + second.source)
                        elements.append(second)
    body.append(r"\begin{thebibliography}{99}")
    for k in range(rng.randint(6, 16)):
        body.append(
            rf"\bibitem{{r{k}}} {rng.choice(('A.', 'B.', 'C.'))} {rng.choice(('Smith', 'Wang', 'Garcia'))} "
            rf"and {rng.choice(('D.', 'E.'))} {rng.choice(('Khan', 'Novak', 'Sato'))}. "
            rf"{2015 + rng.randrange(10)}. {title(rng)}. In \emph{{Proceedings of {title(rng)}}}."
        )
    body.append(r"\end{thebibliography}")
    if patterns:  # an appendix whose floats are numbered per section: Figure A.1, Table B.2
        body.append(r"\appendix" + "\n" + r"\counterwithin{figure}{section}" + "\n" + r"\counterwithin{table}{section}")
        for letter in "AB"[: rng.randint(1, 2)]:
            heading = topics[n_sections + rng.randrange(4)] + " Details"
            body.append(rf"\section{{{heading}}}")
            headings.append({"level": 1, "text": heading})
            appendix.update(section=letter, table=0, figure=0)
            for _ in range(rng.randint(2, 3)):
                body.append(paragraph(rng))
                add_random_float(two_columns and rng.random() < 0.3)
        body.append(r"\clearpage")
    source = head + "\n\n".join(body) + "\n\\end{document}\n"
    return source, {**settings, "headings": headings}, elements


def compile_pdf(source: str, build: Path, job: str) -> tuple[Path, list[str]]:
    (build / f"{job}.tex").write_text(source, encoding="utf-8")
    for _ in range(2):  # the second pass settles float placement after the first pass's aux file
        run = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", f"{job}.tex"],
            cwd=build,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if run.returncode != 0:
            log = (build / f"{job}.log").read_text(errors="replace")
            tail = "\n".join(line for line in log.splitlines() if line.startswith("!"))[:2000]
            raise RuntimeError(f"{job}: pdflatex failed:\n{tail or run.stdout[-2000:]}")
    return build / f"{job}.pdf", (build / f"{job}.gold").read_text().splitlines()


def _sp(value: str) -> float:
    return float(value.removesuffix("pt")) * 72 / 72.27 if value.endswith("pt") else int(value) / SP_PER_BP


def positions(lines: list[str], pdf: Path) -> dict[str, dict[str, Any]]:
    """``{id: {"page", "bbox"}}`` from the ``.gold`` records, in PDF points with a top-left origin."""
    with pymupdf.open(pdf) as document:
        heights = [page.rect.height for page in document]
    boxes: dict[str, dict[str, Any]] = {}
    for line in lines:
        ident, width, height, depth, x, y, page = line.split()[1:8]
        x0, baseline = _sp(x), _sp(y)
        page_height = heights[int(page) - 1]
        boxes[ident] = {
            "page": int(page),
            "bbox": [
                round(x0, 2),
                round(page_height - (baseline + _sp(height)), 2),
                round(x0 + _sp(width), 2),
                round(page_height - (baseline - _sp(depth)), 2),
            ],
        }
    return boxes


def union_of_panels(ident: str, panels: list[dict[str, Any]]) -> dict[str, Any]:
    """A subcaption grid's (or a figure in parts') whole figure: the union of its pieces' boxes, on one page."""
    pages = {panel["page"] for panel in panels}
    if len(pages) != 1:
        raise RuntimeError(f"{ident}: panels on several pages {sorted(pages)}")
    boxes = [panel["bbox"] for panel in panels]
    return {
        "page": pages.pop(),
        "bbox": [
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        ],
    }


def build_document(
    rng: random.Random, doc_id: str, out: Path, build: Path, images: list[str], *, patterns: bool = True
) -> dict[str, Any]:
    source, settings, elements = document(rng, doc_id, images, patterns=patterns)
    pdf, gold_lines = compile_pdf(source, build, doc_id)
    placed = positions(gold_lines, pdf)
    records = []
    for element in elements:
        pieces = element.gold.get("panels") or element.gold.get("parts") or []
        for piece in pieces:
            piece.update(placed[piece["id"]])
        where = union_of_panels(element.id, pieces) if pieces else placed.get(element.id)
        if where is None:
            raise RuntimeError(f"{doc_id}: {element.id} has no recorded position")
        records.append({"id": element.id, "type": element.type, **where, **element.gold})
    with pymupdf.open(pdf) as document_pdf:
        pages = [
            {"page": page.number + 1, "width": page.rect.width, "height": page.rect.height} for page in document_pdf
        ]
    shutil.copyfile(pdf, out / f"{doc_id}.pdf")
    gold = {
        "doc": doc_id,
        "settings": {k: v for k, v in settings.items() if k != "headings"},
        "pages": pages,
        "headings": settings["headings"],
        "elements": records,
    }
    (out / f"{doc_id}.gold.json").write_text(json.dumps(gold, indent=1) + "\n", encoding="utf-8")
    (out / f"{doc_id}.tex").write_text(source, encoding="utf-8")
    return {"doc": doc_id, "pages": len(pages), "elements": len(records)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--classic", action="store_true", help="without the patterns of real papers (how the first set was made)"
    )
    args = parser.parse_args(argv)
    if shutil.which("pdflatex") is None:
        parser.error(
            "pdflatex not found: apt-get install texlive-latex-extra texlive-pictures texlive-science "
            "texlive-fonts-recommended"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    summary = []
    with tempfile.TemporaryDirectory(prefix="paperlake-synthetic-") as temp:
        build = Path(temp)
        rng = random.Random(args.seed)
        images = raster_images(build, rng)
        for k in range(args.docs):
            doc_id = f"syn-{k + 1:03d}"
            document_rng = random.Random(f"{args.seed}-{doc_id}")
            summary.append(build_document(document_rng, doc_id, args.out, build, images, patterns=not args.classic))
            print(f"{doc_id}: {summary[-1]['pages']} pages, {summary[-1]['elements']} elements", flush=True)
    manifest = {
        "seed": args.seed,
        "patterns": not args.classic,
        "documents": summary,
        "pages": sum(d["pages"] for d in summary),
        "generator": "benchmarks/synthetic/generate.py",
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    print(f"{len(summary)} documents, {manifest['pages']} pages in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
