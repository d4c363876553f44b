"""Figures cut into their plots (panels) by the PyMuPDF backend, on real corpus pages, plus the pure helpers.

A figure of several plots is one whole-figure block followed by one block per plot, each naming the whole as its
``parent``; a figure that is not cut is a whole figure alone."""

from __future__ import annotations

from functools import cache

import pymupdf
import pytest

from paperlake.parsing.blocks import Block
from paperlake.parsing.pymupdf_backend import _Element, _whitest_cut, read_layout
from support.fixtures import corpus_pdf

pytestmark = pytest.mark.usefixtures("corpus")

Box = tuple[float, float, float, float]


@cache
def figure_blocks(stem: str) -> tuple[Block, ...]:
    return tuple(block for block in read_layout(corpus_pdf(stem)).blocks if block.kind == "figure")


def labelled(stem: str, page: int, label: str) -> list[Block]:
    return [block for block in figure_blocks(stem) if block.page_number == page and block.label == label]


def whole(stem: str, page: int, label: str) -> Block:
    (figure,) = [block for block in labelled(stem, page, label) if block.parent is None]
    return figure


def panels(stem: str, page: int, label: str) -> list[Box]:
    return [block.bbox for block in labelled(stem, page, label) if block.parent is not None]


def area(box: Box) -> float:
    return (box[2] - box[0]) * (box[3] - box[1])


def overlap_area(a: Box, b: Box) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def assert_apart(boxes: list[Box]) -> None:
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert overlap_area(a, b) < 0.02 * min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))


@pytest.mark.parametrize(
    ("stem", "page", "label", "count"),
    [
        # Bar charts whose tick labels touch their neighbours': no white gap, but one clip area per plot.
        ("emnlp2024-177-cute-token-understanding", 9, "Figure 4", 8),
        ("emnlp2024-177-cute-token-understanding", 9, "Figure 5", 7),
        # Two included plots above a wider third one, each with its own axes.
        ("emnlp2024-018-rank-calibration", 8, "Figure 4", 3),
        # Four sub-figures "(a)".."(d)" of two plots each: eight plots.
        ("emnlp2024-018-rank-calibration", 24, "Figure 10", 8),
        # Four screenshots in a 2x2 grid (raster images, cut at white space).
        ("emnlp2024-065-dochienet", 4, "Figure 2", 4),
    ],
)
def test_figures_of_several_plots_become_one_panel_per_plot(stem, page, label, count):
    found = panels(stem, page, label)
    assert len(found) == count
    assert_apart(found)
    assert len(labelled(stem, page, label)) == count + 1  # and the whole figure


def test_panels_follow_their_whole_figure_and_lie_inside_it():
    """CUTE's Figure 4 (page 9): a 2x4 grid of bar charts is one whole figure and eight panels, all pointing at it."""
    blocks = labelled("emnlp2024-177-cute-token-understanding", 9, "Figure 4")
    figure = whole("emnlp2024-177-cute-token-understanding", 9, "Figure 4")
    assert blocks[0] is figure and len(blocks) == 9
    assert all(block.parent is figure for block in blocks[1:])
    assert all(block.caption == figure.caption and block.caption.startswith("Figure 4") for block in blocks)
    for block in blocks[1:]:
        assert overlap_area(block.bbox, figure.bbox) == pytest.approx(area(block.bbox))
    assert figure.bbox == pytest.approx(
        tuple(f(block.bbox[i] for block in blocks[1:]) for i, f in enumerate((min, min, max, max))), abs=15
    )
    positions = [
        i for i, block in enumerate(figure_blocks("emnlp2024-177-cute-token-understanding")) if block in blocks
    ]
    assert positions == list(range(positions[0], positions[0] + 9))  # the panels come right after their figure


def test_a_plot_keeps_its_axis_labels_rather_than_losing_them_to_its_neighbour():
    """The y-axis title of each right-hand plot sits closer to the left-hand plot's axes than to its own; every
    panel of this grid of alike plots must still come out the same width (axes plus their labels)."""
    widths = [box[2] - box[0] for box in panels("emnlp2024-018-rank-calibration", 24, "Figure 10")]
    assert min(widths) >= 100 and max(widths) - min(widths) <= 5


def test_a_sub_caption_goes_with_the_panel_above_it():
    page = pymupdf.open(corpus_pdf("emnlp2024-065-dochienet"))[3]
    (subcaption,) = page.search_for("(b) Labels in E-periodica")  # between the rows, under the top-right shot
    found = panels("emnlp2024-065-dochienet", 4, "Figure 2")
    holders = [box for box in found if overlap_area(box, tuple(subcaption)) > 0]
    assert len(holders) == 1
    assert holders[0][1] < subcaption.y0 - 100  # the screenshot above it, not the one below


def test_a_facet_grid_stays_one_figure():
    """ggplot facets share their axes and sit a few points apart: one chart, not 33."""
    assert len(labelled("emnlp2024-179-reading-time-context", 5, "Figure 1")) == 1
    assert panels("emnlp2024-179-reading-time-context", 5, "Figure 1") == []


def test_plots_inside_one_raster_image_stay_one_figure():
    assert len(labelled("emnlp2024-056-adazeta", 2, "Figure 1")) == 1
    assert panels("emnlp2024-056-adazeta", 2, "Figure 1") == []


def test_whitest_cut_takes_the_widest_empty_stretch():
    def element(x0: float, x1: float) -> _Element:
        return _Element((x0, 0.0, x1, 10.0))

    # Between plots ending at 100 and starting at 140: an overflowing tick label (98-103), the next plot's
    # axis title (106-112) and tick labels (111-139). The empty stretch 103-106 is the widest.
    crowded = [element(98, 103), element(106, 112), element(111, 139)]
    assert 103 < _whitest_cut(crowded, 0, 100, 140) < 106
    # Nothing empty: the cut crosses as few elements as possible.
    packed = [element(95, 120), element(118, 145), element(119, 121)]
    assert 121 <= _whitest_cut(packed, 0, 100, 140) <= 140


def test_a_paragraphs_justified_first_line_under_a_table_is_not_the_tables():
    """loretta p13: "Subsequently, we selected both SuperGLUE" opens the paragraph under Table 8, justified with wide
    word gaps (so not prose by itself); it was taken into the table's box, which then ran across the column."""
    (table,) = [
        block
        for block in read_layout(corpus_pdf("naacl2024-174-loretta")).blocks
        if block.kind == "table" and block.page_number == 13 and block.label == "Table 8"
    ]
    assert table.bbox[3] < 440 and table.bbox[2] - table.bbox[0] < 140, table.bbox
