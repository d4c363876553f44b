"""Caption labels as papers print them, in both backends: "Table 3", and appendix or chapter numbering ("Figure A.1",
"Table B2", "Figure 3.2", "Table S1"), which used to be read as no caption at all (their objects were then missed, or
came out as unlabelled halves: issue 50's first pattern)."""

from __future__ import annotations

import pytest

from paperlake.parsing.mineru_backend import _CAPTION_LABEL
from paperlake.parsing.pymupdf.captions import _CAPTION

LABELS = [
    ("Table 3: Results on the test set.", "Table", "3"),
    ("Figure 2. Overview of the method.", "Figure", "2"),
    ("Fig. 10: Ablation.", "Fig.", "10"),
    ("Table A.1: Hyper-parameters.", "Table", "A.1"),
    ("Figure B.2. More examples.", "Figure", "B.2"),
    ("Table B2: Prompt used.", "Table", "B2"),
    ("Figure 3.2: A chapter's second figure.", "Figure", "3.2"),
    ("Table S1: Supplementary results.", "Table", "S1"),
]


@pytest.mark.parametrize(("text", "word", "number"), LABELS)
def test_both_backends_read_the_label(text: str, word: str, number: str) -> None:
    pymupdf = _CAPTION.match(text)
    assert pymupdf is not None and (pymupdf.group(1), pymupdf.group(2)) == (word, number)
    mineru = _CAPTION_LABEL.match(text)
    assert mineru is not None and (mineru.group(1), mineru.group(2)) == (word, number)


@pytest.mark.parametrize(
    "text",
    ["Tables 3 and 4 show", "Figure shows the", "Table A: the", "Figure AB.1: x", "Tableau 2: x"],
)
def test_what_is_not_a_caption_label(text: str) -> None:
    assert _CAPTION.match(text) is None
    assert _CAPTION_LABEL.match(text) is None
