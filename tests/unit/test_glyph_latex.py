"""LaTeX rebuilt from PDF glyphs, on real display equations of the sample corpus (located by MinerU's boxes).

Expected strings are what the page prints, checked by eye against the rendered page; they are compared under
``latex_comparison_key`` (so ``\\mathrm{l n}`` and ``\\ln``, ``\\pmb`` and ``\\boldsymbol`` count alike). Where MinerU's
own LaTeX misreads the page (calligraphic I read as T) the expectation follows the page.
"""

from __future__ import annotations

import gzip
import json
import warnings

import pymupdf
import pytest
from sympy.parsing.latex import parse_latex

from paperlake.parsing.glyph_latex import GlyphLatex, latex_comparison_key, reconstruct_latex
from paperlake.parsing.mineru_backend import split_equation
from support.fixtures import CORPUS_MINERU, corpus_pdf

pytestmark = pytest.mark.usefixtures("corpus")


def _mineru_box(stem: str, page_number: int, *, number: str | None = None, contains: str | None = None):
    """(page, bbox in points) of the MinerU display equation on that page with that number or LaTeX fragment."""
    folder = CORPUS_MINERU / stem
    content = json.loads(next(folder.glob("*_content_list.json")).read_text())
    layout_path = folder / "layout.json"
    layout = (
        json.loads(layout_path.read_text())
        if layout_path.exists()
        else json.loads(gzip.open(folder / "layout.json.gz").read())
    )
    for entry in content:
        if entry.get("type") != "equation" or entry["page_idx"] != page_number - 1:
            continue
        latex, tag = split_equation(entry["text"])
        if (number is not None and tag == number) or (contains is not None and contains in latex.replace(" ", "")):
            width, height = layout["pdf_info"][page_number - 1]["page_size"]
            x0, y0, x1, y1 = entry["bbox"]
            page = pymupdf.open(corpus_pdf(stem))[page_number - 1]
            return page, (x0 * width / 1000, y0 * height / 1000, x1 * width / 1000, y1 * height / 1000)
    raise LookupError(f"no MinerU equation {number or contains!r} on page {page_number} of {stem}")


def _read(stem: str, page_number: int, **which) -> GlyphLatex:
    page, bbox = _mineru_box(stem, page_number, **which)
    return reconstruct_latex(page, bbox)


def _same(ours: str, expected: str) -> bool:
    return latex_comparison_key(ours) == latex_comparison_key(expected)


@pytest.mark.parametrize(
    ("stem", "page_number", "which", "expected", "number"),
    [
        # a fraction and an integral whose limits TeX sets as scripts
        (
            "emnlp2024-018-rank-calibration",
            16,
            {"contains": r"\mathrm{RCE}=\int"},
            r"\mathrm{RCE} = \int_{0}^{1} |1-p| \, \mathrm{d}p = \frac{1}{2}.",
            None,
        ),
        # a sum with its limit centred underneath, a calligraphic letter, nested subscripts in the limit
        (
            "emnlp2024-018-rank-calibration",
            7,
            {"contains": r"\mathrm{crc}_{b}:="},
            r"\mathrm{crc}_b := \frac{1}{|\mathcal{I}_b|} \sum_{i \in \mathcal{I}_b} a_i,",
            None,
        ),
        # blackboard bold, upright words, relations, the number at the right margin
        (
            "emnlp2024-018-rank-calibration",
            5,
            {"number": "(1)"},
            r"\mathbb{P}(U \le u) = \mathbb{P}(\operatorname{reg}(U) \ge \operatorname{reg}(u)).",
            "(1)",
        ),
        # CMEX \Big delimiters built from pieces, a wide hat, a label as the number
        (
            "emnlp2024-018-rank-calibration",
            1,
            {"number": "(ECE)"},
            r"\mathbb{E}_C \Big[ \Big| \mathbb{P}(\widehat{Y} = Y | C) - C \Big| \Big].",
            "(ECE)",
        ),
        # Greek capital, sum with both limits, norm, bold italic vectors, hats, \nabla and \ell
        (
            "emnlp2024-056-adazeta",
            16,
            {"number": "(9)"},
            r"\Lambda^2 = \frac{1}{B-1} \sum_{i=1}^{B} \| \hat{g}(\pmb{w}_k; b_i) - \nabla \ell(\pmb{w}_k) \|^2",
            "(9)",
        ),
        # two sums side by side whose limits touch, scripts of scripts, \min
        (
            "emnlp2024-040-tokenization-compression",
            4,
            {"number": "(5)"},
            r"MI_t = \sum_{d \in \mathcal{C}} \sum_{k=1 | t_k = t}^{K_d} \min(MI_{kd}^b, MI_{kd}^s).",
            "(5)",
        ),
        # a square root in a denominator, three levels of subscripts, an upright function name
        (
            "emnlp2024-065-dochienet",
            6,
            {"number": "(2)"},
            r"a(x_i, C_{k_i}) = \mathrm{softmax}\left(\frac{(W_q x_i) K_{k_i}^T}{\sqrt{d}}\right) V_{k_i}",
            "(2)",
        ),
        # NewTX fonts: Unicode math-alphabet letters (bold italic theta, italic t), an upright subscript word
        (
            "emnlp2024-102-metagpt-merging",
            3,
            {"number": "(2)"},
            r"\boldsymbol{\theta}_{\mathrm{final}} = \boldsymbol{\theta}_0 + "
            r"\sum_{i=1}^{T} \lambda_i \boldsymbol{\tau}_i",
            "(2)",
        ),
    ],
)
def test_reconstructs_real_equations(stem, page_number, which, expected, number):
    result = _read(stem, page_number, **which)
    assert _same(result.latex, expected), (
        f"{result.latex!r}\n  key {latex_comparison_key(result.latex)!r}\n  want {latex_comparison_key(expected)!r}"
    )
    assert result.equation_number == number
    assert 0.0 < result.confidence <= 1.0


def test_multi_line_derivation_becomes_an_aligned_block_of_three_lines():
    result = _read("emnlp2024-056-adazeta", 19, contains=r"\le\displaystyle\frac{R}{K}")
    assert result.latex.startswith(r"\begin{aligned}") and result.latex.count(r"\\") == 2
    first, second, third = result.latex.removeprefix(r"\begin{aligned}").removesuffix(r"\end{aligned}").split(r"\\")
    assert _same(
        second,
        r"&= \frac{R + \epsilon^2 L + C(d,\epsilon) \sum_k \frac{1}{Q_k}}{K}"
        r" + \frac{\eta^2 L \delta}{2} + \frac{B \epsilon^2 L}{2(B-1)}",
    )
    assert _same(third, r"&= \mathcal{O}\left(\frac{R + \epsilon^2 L + C(d,\epsilon) \sum_k \frac{1}{Q_k}}{K}\right),")


def test_matrix_between_tall_brackets():
    result = _read("naacl2024-116-quantum-lindblad-lm", 5, number="(5)")
    assert _same(result.latex, r"\mathrm{Hadamard} = \frac{1}{\sqrt{2}} \begin{bmatrix} 1 & 1 \\ 1 & -1 \end{bmatrix}")


def test_equation_number_dropped_to_the_next_line_is_found():
    result = _read("emnlp2024-018-rank-calibration", 5, number="(RCE)")
    assert result.equation_number == "(RCE)"
    assert "RCE" not in result.latex


def test_plain_equation_parses_with_sympy():
    result = _read("emnlp2024-040-tokenization-compression", 4, number="(6)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expression = parse_latex(result.latex.rstrip(".,"), strict=True)
    assert "Product" in str(expression)


def test_empty_region_gives_an_empty_result_with_a_note():
    page = pymupdf.open(corpus_pdf("emnlp2024-018-rank-calibration"))[0]
    result = reconstruct_latex(page, (2.0, 2.0, 30.0, 20.0))  # the top-left margin: no ink
    assert result == GlyphLatex("", None, 0.0, ["no glyphs in region"])
    degenerate = reconstruct_latex(page, (100.0, 100.0, 100.0, 100.0))
    assert degenerate.latex == "" and degenerate.notes


def test_normalisation_ignores_spacing_wrappers_and_sizes_but_not_structure():
    assert latex_comparison_key(
        r"U _ { \mathrm { N L L } } ( \pmb { x } ) { : = } - \mathrm { l n } ( x ) ."
    ) == latex_comparison_key(r"U_{\mathrm{NLL}}(\boldsymbol{x}) := -\ln(x)")
    assert latex_comparison_key(r"\left| \frac { 1 } { 2 } \right| \cdot \cdot \cdot") == latex_comparison_key(
        r"|\frac12|\cdots"
    )
    assert latex_comparison_key(r"\underset{a\in\mathbb{R}}{\mathrm{argmin}}\, f") == latex_comparison_key(
        r"\operatorname*{argmin}_{a \in \mathbb{R}} f"
    )
    assert latex_comparison_key(r"x^{2}") != latex_comparison_key(r"x_{2}")
    assert latex_comparison_key(r"a \cdot b") != latex_comparison_key(r"a \times b")
