"""images.image_text: the words printed inside a figure, from both parser backends, in reading order."""

from __future__ import annotations

import re

import pytest

from paperlake.lake.inbox import scan_inbox
from paperlake.parsing import mineru_backend, pymupdf_backend
from paperlake.parsing.figure_text import MAX_CHARS, text_inside, word_lines

STEM = "naacl2024-174-loretta"


def test_rows_read_top_down_and_labels_left_to_right():
    lines = [
        ((200.0, 100.0, 240.0, 110.0), "RoBERTa"),  # legend, right
        ((100.0, 100.5, 140.0, 110.5), "BERT"),  # legend, left, a hair lower
        ((100.0, 300.0, 300.0, 310.0), "Number  of   layers"),
        ((90.0, 150.0, 100.0, 250.0), "Accuracy"),  # a rotated axis title: tall and thin
        ((100.0, 400.0, 300.0, 410.0), "Figure 1: the caption"),
        ((500.0, 150.0, 540.0, 160.0), "outside"),
    ]
    text = text_inside(lines, (80.0, 90.0, 320.0, 320.0), exclude=[(100.0, 395.0, 300.0, 415.0)])
    assert text == "BERT  RoBERTa\nAccuracy\nNumber of layers"
    assert text_inside(lines, (0.0, 0.0, 10.0, 10.0)) is None


def test_an_excluded_box_keeps_its_words_out_and_long_text_stops_at_a_line():
    caption = ((100.0, 200.0, 300.0, 210.0), "Figure 2: the caption")
    assert text_inside([caption], (0.0, 0.0, 400.0, 400.0), exclude=[caption[0]]) is None
    many = [((0.0, 12.0 * i, 100.0, 12.0 * i + 10.0), f"line {i} " + "x" * 90) for i in range(200)]
    text = text_inside(many, (0.0, 0.0, 100.0, 12.0 * 200))
    assert len(text) <= MAX_CHARS and text.endswith("x") and text.startswith("line 0 ")


def test_words_regroup_into_their_lines():
    words = [(10, 10, 20, 20, "b", 0, 0, 1), (0, 10, 9, 20, "a", 0, 0, 0), (0, 30, 9, 40, "c", 0, 1, 0)]
    assert sorted(word_lines(words)) == [((0, 10, 20, 20), "a b"), ((0, 30, 9, 40), "c")]


@pytest.fixture(scope="module")
def figures(corpus):
    """The real paper's figures from each backend (MinerU from its released outputs for this paper)."""
    by_backend = {}
    source = next(s for s in scan_inbox([corpus / "inbox"]) if s.paper_key.endswith(STEM))
    by_backend["pymupdf"] = pymupdf_backend.parse(source).rows("images")
    mineru = next(s for s in scan_inbox([corpus / "inbox"], corpus / "mineru") if s.paper_key.endswith(STEM))
    by_backend["mineru"] = mineru_backend.parse(mineru).rows("images")
    return by_backend


@pytest.mark.parametrize("backend", ["pymupdf", "mineru"])
def test_a_plot_s_axis_legend_and_tick_labels_are_its_text_and_a_raster_has_none(figures, backend):
    by_label = {row["image_label"]: row for row in figures[backend] if row["parent_image_id"] is None}
    memory = by_label["Figure 5"]  # a bar chart drawn as vectors: its labels are in the text layer
    for label in ("Memory Storage (KB)", "DeBERTa-Base", "LLaMA2-7B", "LoRA", "Adapter"):
        assert label in memory["image_text"], (label, memory["image_text"])
        assert label not in (memory["image_caption"] or ""), label
    # the y-axis title is printed rotated, and still read
    assert "Performance Percentage" in by_label["Figure 1"]["image_text"]
    assert by_label["Figure 4"]["image_text"] is None  # a pasted raster plot has no text layer
    for row in figures[backend]:  # a caption is never read as the figure's words
        if row["image_text"] and row["image_caption"]:
            assert not re.search(r"\bFigure \d+:", row["image_text"]), row["image_text"]
