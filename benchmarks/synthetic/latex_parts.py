"""The pieces of a synthetic paper: prose, headings, tables, figures, prompt boxes, equations, algorithms.

Each builder takes a seeded :class:`random.Random` and returns the LaTeX source of one element plus its gold record
(everything known by construction: type, label, caption, cell grid, equation source). Positions are not known here:
the source wraps the element's body in ``\\goldbox{id}{...}`` (see :mod:`generate`), and TeX writes the box's page,
position and size while shipping the page out.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

WORDS = (
    "model data training learning results performance method approach task language evaluation baseline "
    "accuracy representation dataset benchmark retrieval generation reasoning answer question document paper "
    "token sequence layer attention encoder decoder parameter objective loss gradient sample distribution "
    "context knowledge graph table figure signal feature prompt instruction response human annotation "
    "analysis experiment setting score metric error variance robust efficient simple strong consistent "
    "improves shows reports compares measures observes suggests requires reduces increases remains yields "
    "across between within under over after before while because although however therefore moreover "
    "large small recent prior novel standard common specific general multiple several different similar"
).split()
TOPICS = (
    "Retrieval Augmentation",
    "Evaluation Protocol",
    "Model Architecture",
    "Training Details",
    "Error Analysis",
    "Related Work",
    "Experimental Setup",
    "Main Results",
    "Ablation Study",
    "Data Collection",
    "Annotation",
    "Limitations of Scaling",
    "Qualitative Examples",
    "Efficiency",
    "Robustness Checks",
    "Human Study",
    "Prompt Design",
    "Baselines",
    "Hyperparameters",
    "Discussion",
)
METRICS = ("Acc", "F1", "EM", "BLEU", "ROUGE-L", "P@1", "MRR", "nDCG", "Recall", "Prec.", "Loss", "Time")
SYSTEMS = (
    "BERT",
    "RoBERTa",
    "T5",
    "GPT-2",
    "LLaMA",
    "Mistral",
    "Ours",
    "Baseline",
    "+ retrieval",
    "w/o tables",
    "Oracle",
    "Random",
    "BM25",
    "DPR",
    "ColBERT",
    "Contriever",
)
GROUPS = ("Dev", "Test", "In-domain", "Out-of-domain", "Easy", "Hard", "Seen", "Unseen", "Short", "Long")


def sentence(rng: random.Random, *, math: bool = True) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(7, 18))]
    if math and rng.random() < 0.15:
        words.insert(
            rng.randint(1, len(words) - 1),
            rng.choice([r"$x_i$", r"$\alpha$", r"$k=5$", r"$\mathcal{D}$", r"$n^2$", r"$p(y|x)$", r"$\theta$"]),
        )
    if rng.random() < 0.1:
        words.insert(rng.randint(1, len(words) - 1), f"{rng.uniform(1, 99):.1f}\\%")
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def paragraph(rng: random.Random, sentences: tuple[int, int] = (3, 8), *, footnote: bool = False) -> str:
    parts = [sentence(rng) for _ in range(rng.randint(*sentences))]
    if footnote:
        spot = rng.randrange(len(parts))
        parts[spot] = parts[spot][:-1] + r"\footnote{" + sentence(rng, math=False) + "}."
    return " ".join(parts)


def title(rng: random.Random) -> str:
    return " ".join(w.capitalize() for w in rng.sample(WORDS, rng.randint(4, 9)))


@dataclass
class Element:
    """One gold element: its LaTeX source and what is known about it without looking at the PDF."""

    id: str
    type: str  # table | figure | equation | algorithm | diagram (an uncaptioned figure)
    source: str
    gold: dict[str, Any] = field(default_factory=dict)
    float_env: str | None = None  # table, table*, figure, figure*, algorithm; None: in the text flow


def _number(rng: random.Random) -> str:
    return f"{rng.uniform(0, 100):.{rng.choice((1, 1, 2))}f}"


def _escape(text: str) -> str:
    """Escape TeX's special characters that are not escaped already."""
    return re.sub(r"(?<!\\)([&%#_])", r"\\\1", text)


# ------------------------------------------------------------------------------------------------ tables


def table(
    rng: random.Random,
    ident: str,
    label: int | str,
    *,
    wide: bool,
    style: str | None = None,
    max_columns: int | None = None,
    patterns: bool = True,
) -> Element:
    """A table with one or two header rows (two: \\multicolumn groups), optional \\multirow groups in the first
    column, in one of six rule styles: booktabs, fully ruled, horizontal lines, none, ``grouped`` (booktabs with
    rules inside the body between groups of rows) and ``tall`` (a long list without rules, rows spaced wide apart);
    the gold grid lists every cell with its spans. Without ``patterns`` only the first four, as the first committed set
    was made."""
    styles = ("booktabs", "booktabs", "ruled", "hlines", "plain") + (("grouped", "tall") if patterns else ())
    style = style or rng.choice(styles)
    n_data = rng.randint(2 if max_columns else 3, max_columns or (6 if not wide else 8))
    n_rows = rng.randint(12, 16) if style == "tall" else rng.randint(5, 9) if style == "grouped" else rng.randint(3, 9)
    two_level = n_data >= 4 and style != "tall" and rng.random() < 0.45
    row_groups = n_rows >= 4 and style not in ("grouped", "tall") and rng.random() < 0.3
    first_col = "l"
    col_spec = (first_col + ("c" * n_data)) if style != "ruled" else "|" + "|".join(first_col + "c" * n_data) + "|"
    if style in ("booktabs", "plain", "hlines", "grouped", "tall"):
        col_spec = "@{}" + col_spec + "@{}"
    cells: list[dict[str, Any]] = []
    lines: list[str] = []
    top, mid, bottom = {
        "booktabs": (r"\toprule", r"\midrule", r"\bottomrule"),
        "grouped": (r"\toprule", r"\midrule", r"\bottomrule"),
        "ruled": (r"\hline", r"\hline", r"\hline"),
        "hlines": (r"\hline", r"\hline", r"\hline"),
        "plain": ("", "", ""),
        "tall": ("", "", ""),
    }[style]
    group_breaks = sorted(rng.sample(range(2, n_rows - 1), k=min(2, n_rows - 3))) if style == "grouped" else []
    if top:
        lines.append(top)
    metrics = rng.sample(METRICS, min(len(METRICS), n_data))
    header_rows = 1
    row = 0
    if two_level:
        header_rows = 2
        groups: list[int] = []
        remaining = n_data
        while remaining:
            width = min(remaining, rng.choice((2, 2, 3)))
            groups.append(width)
            remaining -= width
        names = rng.sample(GROUPS, len(groups))
        model_spans_both = rng.random() < 0.5  # \multirow{2}{*}{Model}, or "Model" on the second header row
        parts = [r"\multirow{2}{*}{Model}" if model_spans_both else ""]
        if model_spans_both:
            cells.append({"row": 0, "col": 0, "rowspan": 2, "colspan": 1, "text": "Model", "is_header": True})
        col = 1
        for width, name in zip(groups, names):
            align = "c|" if style == "ruled" else "c"
            parts.append(rf"\multicolumn{{{width}}}{{{align}}}{{{name}}}" if width > 1 else name)
            cells.append({"row": 0, "col": col, "rowspan": 1, "colspan": width, "text": name, "is_header": True})
            col += width
        lines.append(" & ".join(parts) + r" \\")
        if style == "booktabs":
            col = 2
            rules = []
            for width in groups:
                rules.append(rf"\cmidrule(lr){{{col}-{col + width - 1}}}")
                col += width
            lines.append(" ".join(rules))
        elif style == "ruled":
            lines.append(rf"\cline{{2-{n_data + 1}}}")
        lines.append(("" if model_spans_both else "Model") + " & " + " & ".join(metrics) + r" \\")
        if not model_spans_both:
            cells.append({"row": 1, "col": 0, "rowspan": 1, "colspan": 1, "text": "Model", "is_header": True})
        for k, metric in enumerate(metrics):
            cells.append({"row": 1, "col": k + 1, "rowspan": 1, "colspan": 1, "text": metric, "is_header": True})
        row = 2
    else:
        lines.append("Model & " + " & ".join(metrics) + r" \\")
        cells.append({"row": 0, "col": 0, "rowspan": 1, "colspan": 1, "text": "Model", "is_header": True})
        for k, metric in enumerate(metrics):
            cells.append({"row": 0, "col": k + 1, "rowspan": 1, "colspan": 1, "text": metric, "is_header": True})
        row = 1
    if mid:
        lines.append(mid)
    systems = rng.sample(SYSTEMS, min(len(SYSTEMS), n_rows))
    if style == "grouped":
        group_breaks = [k for k in group_breaks if k < len(systems) - 1]
    body_start = row
    group_left = 0
    for index, system in enumerate(systems):
        values = [_number(rng) for _ in range(n_data)]
        best = rng.randrange(n_data) if rng.random() < 0.5 else None
        shown = [rf"\textbf{{{v}}}" if k == best else v for k, v in enumerate(values)]
        first = system
        if row_groups and group_left == 0:
            span = min(len(systems) - index, rng.choice((2, 3)))
            group_left = span
            name = rng.choice(GROUPS)
            cells.append({"row": row, "col": 0, "rowspan": span, "colspan": 1, "text": name, "is_header": False})
            first = rf"\multirow{{{span}}}{{*}}{{{name}}}" if span > 1 else name
        elif row_groups:
            first = ""
        if not row_groups:
            cells.append({"row": row, "col": 0, "rowspan": 1, "colspan": 1, "text": system, "is_header": False})
        for k, value in enumerate(values):
            cells.append({"row": row, "col": k + 1, "rowspan": 1, "colspan": 1, "text": value, "is_header": False})
        if row_groups:
            group_left -= 1
        lines.append(first if first.startswith("\\multirow") else _escape(first))
        lines[-1] += " & " + " & ".join(shown) + r" \\"
        if style == "ruled" or (style == "hlines" and index == len(systems) - 1):
            if not (style == "ruled" and row_groups and group_left > 0):
                lines.append(r"\hline")
            else:
                lines.append(rf"\cline{{2-{n_data + 1}}}")
        if index + 1 in group_breaks:  # a rule between groups of rows, as far from the top as from the bottom
            lines.append(r"\midrule")
        if style == "tall" and index < len(systems) - 1:
            lines[-1] += rf"[{rng.choice((4, 6, 8))}pt]"  # rows spaced apart: gaps wider than a line's height
        row += 1
    if bottom and style in ("booktabs", "grouped"):
        lines.append(bottom)
    n_cols = n_data + 1
    size = rng.choice((r"\small", r"\footnotesize", "")) if not wide else rng.choice((r"\small", ""))
    tabular = rf"{size}\begin{{tabular}}{{{col_spec}}}" + "\n" + "\n".join(lines) + "\n" + r"\end{tabular}"
    caption_text = title(rng) + ". " + sentence(rng, math=False)
    above = rng.random() < 0.6
    body = rf"\goldbox{{{ident}}}{{{tabular}}}"
    caption = rf"\caption{{{caption_text}}}"
    source = "\\centering\n" + (caption + "\n" + body if above else body + "\n" + caption)
    gold = {
        "label": f"Table {label}",
        "caption": caption_text,
        "caption_position": "above" if above else "below",
        "style": style,
        "grid": {"n_rows": row, "n_cols": n_cols, "header_rows": header_rows, "body_start": body_start, "cells": cells},
    }
    return Element(ident, "table", source, gold, "table*" if wide else "table")


# ------------------------------------------------------------------------------------------------ figures


def _pgfplot(rng: random.Random, width: str, height: str) -> str:
    kind = rng.choice(("line", "line", "bar", "scatter"))
    n = rng.randint(4, 9)
    xs = list(range(1, n + 1))
    series = []
    for _ in range(rng.randint(1, 3)):
        ys = [round(rng.uniform(10, 90), 1) for _ in xs]
        coords = " ".join(f"({x},{y})" for x, y in zip(xs, ys))
        if kind == "bar":
            series.append(rf"\addplot coordinates {{{coords}}};")
        elif kind == "scatter":
            series.append(rf"\addplot+[only marks] coordinates {{{coords}}};")
        else:
            series.append(rf"\addplot coordinates {{{coords}}};")
    options = [
        f"width={width}",
        f"height={height}",
        f"xlabel={{{rng.choice(WORDS)}}}",
        f"ylabel={{{rng.choice(METRICS)}}}",
        "tick label style={font=\\tiny}",
        "label style={font=\\scriptsize}",
    ]
    if kind == "bar":
        options.append("ybar")
    if rng.random() < 0.5 and len(series) > 1:
        legend = ",".join(rng.sample(SYSTEMS[:6], len(series)))
        options.append(f"legend entries={{{legend}}}")
        options.append("legend style={font=\\tiny}")
    return (
        r"\begin{tikzpicture}\begin{axis}["
        + ", ".join(options)
        + "]\n"
        + "\n".join(series)
        + "\n"
        + r"\end{axis}\end{tikzpicture}"
    )


def _flowchart(rng: random.Random) -> str:
    names = rng.sample(WORDS, rng.randint(3, 5))
    nodes = []
    for k, name in enumerate(names):
        where = "" if k == 0 else f", right=6mm of n{k - 1}"
        nodes.append(rf"\node[draw, rounded corners, font=\small{where}] (n{k}) {{{name}}};")
    arrows = [rf"\draw[->] (n{k}) -- (n{k + 1});" for k in range(len(names) - 1)]
    return r"\begin{tikzpicture}" + "\n".join(nodes + arrows) + r"\end{tikzpicture}"


def _tree(rng: random.Random) -> str:
    def subtree(depth: int) -> str:
        if depth == 0 or rng.random() < 0.3:
            return f"child {{node {{{rng.choice(WORDS)}}}}}"
        return (
            f"child {{node {{{rng.choice(('NP', 'VP', 'PP', 'S', 'DT', 'NN'))}}} "
            + " ".join(subtree(depth - 1) for _ in range(rng.randint(1, 3)))
            + "}"
        )

    children = " ".join(subtree(2) for _ in range(rng.randint(2, 3)))
    return (
        r"\begin{tikzpicture}[level distance=8mm, level 1/.style={sibling distance=26mm}, "
        r"level 2/.style={sibling distance=11mm}, every node/.style={font=\small}]"
        rf"\node {{S}} {children};\end{{tikzpicture}}"
    )


def _legend_strip(rng: random.Random) -> str:
    """A row of coloured keys with their names, as a figure's shared legend is drawn."""
    names = rng.sample(SYSTEMS[:8], rng.randint(2, 4))
    colours = rng.sample(("blue", "red", "teal", "orange", "violet", "olive"), len(names))
    keys = [
        rf"\node[fill={colour}!60, minimum size=2.2mm, inner sep=0pt{'' if k == 0 else f', right=5mm of t{k - 1}'}] "
        rf"(k{k}) {{}}; \node[right=1mm of k{k}, font=\scriptsize, inner sep=1pt] (t{k}) {{{_escape(name)}}};"
        for k, (name, colour) in enumerate(zip(names, colours))
    ]
    return r"\begin{tikzpicture}" + " ".join(keys) + r"\end{tikzpicture}"


def _grid(rng: random.Random) -> str:
    """A small ruled grid of numbers (a confusion matrix): what its authors may well caption a figure."""
    n = rng.randint(2, 4)
    names = rng.sample(("pos", "neg", "neu", "yes", "no", "other", "A", "B"), n)
    rows = [" & ".join(["", *names]) + r" \\ \hline"]
    for name in names:
        rows.append(" & ".join([name, *(str(rng.randint(0, 99)) for _ in names)]) + r" \\ \hline")
    return r"\begin{tabular}{|c|" + "c|" * n + r"}\hline " + "\n".join(rows) + r"\end{tabular}"


def figure(
    rng: random.Random,
    ident: str,
    label: int | str,
    *,
    wide: bool,
    image_files: list[str],
    patterns: bool = True,
    kind: str | None = None,
) -> Element:
    """A captioned figure: one pgfplots chart, one raster image, a TikZ flowchart, or a subcaption grid of panels;
    with ``patterns`` also a figure in two parts far apart (a chart, white space wider than a line, then the legend
    strip over the caption: ``split``) and a ruled grid of numbers captioned as a figure (``grid``)."""
    kinds = ("plot", "raster", "diagram", "panels", "panels") + (("split", "grid") if patterns else ())
    kind = kind or rng.choice(kinds)
    full = r"\textwidth" if wide else r"\columnwidth"
    panels: list[dict[str, Any]] = []
    pieces: list[dict[str, Any]] = []
    if kind == "split":
        top = (
            _pgfplot(rng, "0.9" + full, rng.choice(("4cm", "4.5cm")))
            if rng.random() < 0.6
            else rf"\includegraphics[width=0.8{full}]{{{rng.choice(image_files)}}}"
        )
        pieces = [{"id": f"{ident}a"}, {"id": f"{ident}b"}]
        gap = rng.choice((24, 28, 34))
        body = (
            rf"\goldgroup{{{ident}}}{{\goldbox{{{ident}a}}{{{top}}}\par\vspace{{{gap}pt}}"
            rf"\goldbox{{{ident}b}}{{{_legend_strip(rng)}}}}}"
        )
    elif kind == "grid":
        body = rf"\goldbox{{{ident}}}{{{_grid(rng)}}}"
    elif kind == "panels":
        count = rng.choice((2, 2, 3, 4)) if wide else 2
        share = round(0.96 / count - 0.02, 2)
        parts = []
        for k in range(count):
            pid = f"{ident}p{k}"
            raster = rng.random() < 0.3
            inner = (
                rf"\includegraphics[width=\linewidth]{{{rng.choice(image_files)}}}"
                if raster
                else _pgfplot(rng, r"\linewidth", "3.6cm")
            )
            sub = rng.choice(SYSTEMS) + " " + rng.choice(WORDS)
            parts.append(
                rf"\begin{{subfigure}}[t]{{{share}{full}}}\centering\goldbox{{{pid}}}{{{inner}}}"
                rf"\caption{{{_escape(sub)}}}\end{{subfigure}}"
            )
            panels.append({"id": pid, "subcaption": f"({chr(97 + k)}) {sub}", "kind": "raster" if raster else "vector"})
        body = r"\hfill".join(parts)
        body = rf"\goldgroup{{{ident}}}{{{body}}}"
    elif kind == "plot":
        body = rf"\goldbox{{{ident}}}{{{_pgfplot(rng, '0.9' + full, rng.choice(('4.5cm', '5cm', '5.5cm')))}}}"
    elif kind == "raster":
        width = rng.choice(("0.7", "0.85", "0.95"))
        body = rf"\goldbox{{{ident}}}{{\includegraphics[width={width}{full}]{{{rng.choice(image_files)}}}}}"
    else:
        body = rf"\goldbox{{{ident}}}{{{_flowchart(rng)}}}"
    caption_text = title(rng) + ". " + sentence(rng, math=False)
    above = rng.random() < 0.15
    caption = rf"\caption{{{caption_text}}}"
    source = "\\centering\n" + (caption + "\n" + body if above else body + "\n" + caption)
    gold = {
        "label": f"Figure {label}",
        "caption": caption_text,
        "caption_position": "above" if above else "below",
        "kind": kind,
        "panels": panels,
    }
    if pieces:
        gold["parts"] = pieces  # the whole figure is their union
    return Element(ident, "figure", source, gold, "figure*" if wide else "figure")


def prompt_box(rng: random.Random, ident: str, label: int, as_table: bool, *, wide: bool) -> Element:
    """A framed prompt (tcolorbox) of monospaced instructions; its authors caption it a Figure or a Table, and the
    gold type follows the caption's word."""
    lines = [
        rf"\textbf{{{rng.choice(('System', 'User', 'Instruction', 'Input', 'Output'))}:}} "
        + _escape(sentence(rng, math=False))
        for _ in range(rng.randint(3, 7))
    ]
    width = r"0.95\textwidth" if wide else r"\columnwidth"
    box = (
        rf"\begin{{minipage}}{{{width}}}\begin{{tcolorbox}}[colback=gray!5, colframe=gray!60, boxrule=0.5pt, "
        r"left=3pt, right=3pt, top=2pt, bottom=2pt]\small\ttfamily "
        + r"\\ ".join(lines)
        + r"\end{tcolorbox}\end{minipage}"
    )
    word = "Table" if as_table else "Figure"
    caption_text = "Prompt used for " + " ".join(rng.sample(WORDS, 3)) + ". " + sentence(rng, math=False)
    source = "\\centering\n" + rf"\goldbox{{{ident}}}{{{box}}}" + "\n" + rf"\caption{{{caption_text}}}"
    env = ("table" if as_table else "figure") + ("*" if wide else "")
    gold = {"label": f"{word} {label}", "caption": caption_text, "caption_position": "below", "kind": "prompt_box"}
    return Element(ident, "table" if as_table else "figure", source, gold, env)


_RELATIONS = ("nsubj", "obj", "det", "amod", "advmod", "case", "nmod", "aux", "mark", "conj")
_GLOSSES = ("DET", "N", "V.PST", "ADJ", "PREP", "PRON.3SG", "N.PL", "AUX", "ADV", "COMP")


def _dependency(rng: random.Random) -> str:
    """A sentence with its dependency arcs drawn over the words, a gloss under each word and a free translation under
    the line: a linguistic example whose words are as much the figure as its lines are."""
    words = [word for word in rng.sample(WORDS, 8) if len(word) <= 8][: rng.randint(3, 5)]
    nodes = []
    for k, word in enumerate(words):
        where = "" if k == 0 else f", right=2mm of w{k - 1}.east, anchor=west"
        nodes.append(rf"\node[font=\small, inner sep=1pt{where}] (w{k}) {{{word}}};")
        gloss = rng.choice(_GLOSSES)
        nodes.append(rf"\node[below=0.5mm of w{k}, font=\scriptsize\scshape, inner sep=1pt] (g{k}) {{{gloss}}};")
    root = rng.randrange(len(words))
    arcs = []
    for k in range(len(words)):
        if k == root:
            continue
        head = root if rng.random() < 0.3 else k + 1 if k < root else k - 1  # mostly a neighbour towards the root
        bend = "left" if k > head else "right"
        arcs.append(
            rf"\draw[->, thin] (w{head}.north) to[bend {bend}=45] "
            rf"node[above, font=\tiny, inner sep=1pt] {{{rng.choice(_RELATIONS)}}} (w{k}.north);"
        )
    translation = "`" + " ".join(rng.sample([w for w in WORDS if len(w) <= 7], rng.randint(3, 5))) + "'"
    middle = f"g{len(words) // 2}"
    nodes.append(rf"\node[below=1mm of {middle}, font=\small\itshape, inner sep=1pt] {{{translation}}};")
    return r"\begin{tikzpicture}" + "\n".join(nodes + arcs) + r"\end{tikzpicture}"


def diagram(rng: random.Random, ident: str, *, patterns: bool = True) -> Element:
    """An uncaptioned drawn example (a syntax tree, a flowchart or, with ``patterns``, a glossed sentence with its
    dependency arcs) in the text flow: a figure without a caption, its words included."""
    if patterns and rng.random() < 0.35:
        drawing, kind = _dependency(rng), "uncaptioned_dependency"
    else:
        drawing, kind = (_tree(rng) if rng.random() < 0.6 else _flowchart(rng)), "uncaptioned_diagram"
    source = "\\begin{center}\n" + rf"\goldbox{{{ident}}}{{{drawing}}}" + "\n\\end{center}"
    return Element(ident, "figure", source, {"label": None, "caption": None, "kind": kind})


def side_by_side(rng: random.Random, elements: list[Element], *, two_columns: bool) -> tuple[str, str]:
    """Two floats in one environment, each in its own minipage with its own caption (two figures, two tables, or a
    figure beside a table): the float environment and its body. Across the page in a two-column paper."""
    kinds = {element.type for element in elements}
    env = ("table" if kinds == {"table"} else "figure") + ("*" if two_columns else "")
    width = rng.choice(("0.48", "0.46", "0.44"))
    boxes = []
    for element in elements:
        body = element.source
        if element.type != env.rstrip("*"):  # a table in a figure environment (or the reverse) captions itself
            body = body.replace(r"\caption{", rf"\captionof{{{element.type}}}{{")
        boxes.append(rf"\begin{{minipage}}[t]{{{width}\textwidth}}" + "\n" + body + "\n" + r"\end{minipage}")
    return env, "\\centering\n" + "\\hfill\n".join(boxes)


def figure_sentence(rng: random.Random, word: str, number: str) -> str:
    """A paragraph in which a sentence begins with "Figure N." at the start of a line, the line before ending in "in"
    or "see" (a ragged break, so that no line is stretched): body text, not a caption."""
    lead = sentence(rng, math=False)[:-1]
    return (
        f"{lead} {rng.choice(('as summarised in', 'as we see in', 'with the numbers in', 'compare'))}"
        rf"\newline {word} {number}. " + paragraph(rng, (2, 4))
    )


def algorithm(rng: random.Random, ident: str, label: int) -> Element:
    steps = [rf"\State {_escape(sentence(rng, math=False))}" for _ in range(rng.randint(3, 6))]
    body = (
        r"\begin{algorithmic}[1]"
        + "\n"
        + rf"\Require {rng.choice(WORDS)} $\mathcal{{D}}$"
        + "\n"
        + r"\For{$t = 1, \dots, T$}"
        + "\n"
        + "\n".join(steps)
        + "\n"
        + r"\EndFor"
        + "\n"
        + r"\State \Return $\theta$"
        + "\n"
        + r"\end{algorithmic}"
    )
    caption_text = title(rng)
    source = rf"\caption{{{caption_text}}}" + "\n" + rf"\goldbox{{{ident}}}{{\begin{{minipage}}{{\linewidth}}{body}"
    source += r"\end{minipage}}"
    return Element(ident, "algorithm", source, {"label": f"Algorithm {label}", "caption": caption_text}, "algorithm")


# ------------------------------------------------------------------------------------------------ equations

_VARS = ("x", "y", "z", "h", "s", "q", "u", "v", "w")
_GREEK = (r"\alpha", r"\beta", r"\gamma", r"\lambda", r"\mu", r"\sigma", r"\tau", r"\eta")


def _expression(rng: random.Random) -> str:
    a, b, c = rng.sample(_VARS, 3)
    g, g2 = rng.sample(_GREEK, 2)
    i = rng.choice("ijk")
    n = rng.choice("NnMTK")
    templates = [
        rf"{a}_{{{i}}} = {g} {b}_{{{i}}} + (1 - {g}) {c}_{{{i}}}",
        rf"\mathcal{{L}} = -\sum_{{{i}=1}}^{{{n}}} \log p({a}_{{{i}}} \mid {b}_{{<{i}}})",
        rf"{a} = \frac{{\exp({b}_{{{i}}} / {g})}}{{\sum_{{j=1}}^{{{n}}} \exp({b}_{{j}} / {g})}}",
        rf"{g} = \frac{{1}}{{{n}}} \sum_{{{i}=1}}^{{{n}}} ({a}_{{{i}}} - {g2})^{{2}}",
        rf"{a}^{{*}} = \arg\max_{{{b}}} \; {g} \cdot f({b}) - {g2} \lVert {b} \rVert_{{2}}^{{2}}",
        rf"\mathrm{{score}}({a}, {b}) = \frac{{{a} \cdot {b}}}{{\lVert {a} \rVert \, \lVert {b} \rVert}}",
        rf"{a}_{{t+1}} = {a}_{{t}} - {g} \nabla_{{{a}}} \mathcal{{L}}({a}_{{t}})",
        rf"P({a} \mid {b}) = \frac{{P({b} \mid {a}) P({a})}}{{P({b})}}",
        rf"{a} = \sqrt{{{b}^{{2}} + {c}^{{2}}}}",
        rf"F_{{1}} = \frac{{2 \cdot {a} \cdot {b}}}{{{a} + {b}}}",
        rf"{a}_{{{i}}} = \max(0, {b}_{{{i}}} - {g})",
        rf"\hat{{{a}}} = \mathbb{{E}}_{{{b} \sim p}} [ f({b}) ] + {g2}",
    ]
    return rng.choice(templates)


def equation(rng: random.Random, ident: str) -> Element:
    """A display equation: numbered (``equation``), unnumbered (``\\[ \\]``) or a two-line ``aligned`` block.

    The gold box is the math itself (without the equation number, as MinerU and our parser report it)."""
    style = rng.choice(("numbered", "numbered", "numbered", "unnumbered", "aligned"))
    if style == "aligned":
        first, second = _expression(rng), _expression(rng)
        left1, right1 = first.split(" = ", 1)
        left2, right2 = second.split(" = ", 1)
        latex = rf"\begin{{aligned}} {left1} &= {right1} \\ {left2} &= {right2} \end{{aligned}}"
    else:
        latex = _expression(rng)
    math = rf"\goldmath{{{ident}}}{{{latex}}}"
    if style == "unnumbered":
        source = r"\[ " + math + r" \]"
    else:
        source = r"\begin{equation} " + math + r" \end{equation}"
    return Element(ident, "equation", source, {"latex": latex, "numbered": style != "unnumbered", "style": style})
