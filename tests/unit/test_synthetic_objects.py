"""Figures and tables as real papers print them (issue 50): the synthetic set that holds their patterns
(tests/data/synthetic/patterns, made by benchmarks/synthetic/generate.py with seed 2027) is consistent with its PDFs
and has every pattern in it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pymupdf
import pytest

from paperlake.parsing.gold import load_gold, normalise_text

PATTERNS = Path(__file__).parents[1] / "data" / "synthetic" / "patterns"


@pytest.fixture(scope="module")
def gold():
    return load_gold(PATTERNS)


def test_the_set_holds_every_pattern(gold) -> None:
    manifest = json.loads((PATTERNS / "manifest.json").read_text())
    assert manifest["patterns"] and manifest["pages"] == sum(len(d.pages) for d in gold) >= 150
    elements = [e for d in gold for e in d.elements]
    tags = {(e["type"], tag) for e in elements for tag in [e.get("style") or e.get("kind"), *e.get("patterns", [])]}
    for needed in [
        ("table", "grouped"),  # rules inside the body
        ("table", "tall"),  # a long list without rules, rows far apart
        ("table", "side_by_side"),
        ("table", "appendix"),
        ("table", "prompt_box"),  # boxed text captioned as a table
        ("figure", "side_by_side"),
        ("figure", "appendix"),
        ("figure", "split"),  # two parts further apart than a line
        ("figure", "grid"),  # a grid of numbers captioned as a figure
        ("figure", "panels"),
        ("figure", "uncaptioned_dependency"),  # arcs over words, glosses under them
        ("figure", "uncaptioned_diagram"),
    ]:
        assert needed in tags, needed
    labels = [e["label"] for e in elements if e.get("label")]
    assert any(re.fullmatch(r"Figure [A-Z]\.\d+", label) for label in labels)
    assert any(re.fullmatch(r"Table [A-Z]\.\d+", label) for label in labels)
    sources = [(PATTERNS / f"{d.doc}.tex").read_text() for d in gold]
    assert sum(len(re.findall(r"\\newline (?:Figure|Table) \d+\. ", source)) for source in sources) >= 20
    assert any(json.loads((PATTERNS / f"{d.doc}.gold.json").read_text())["settings"]["tight_floats"] for d in gold)


def test_gold_boxes_hold_what_they_claim(gold) -> None:
    """Cell texts inside each table's box, drawings or images inside each figure's, and a figure in parts spans
    both parts."""
    for document in gold:
        with pymupdf.open(document.pdf) as pdf:
            for element in document.elements:
                page = pdf[element["page"] - 1]
                box = pymupdf.Rect(element["bbox"]) + (-1, -1, 1, 1)
                if element["type"] == "table" and element.get("grid"):
                    inside = normalise_text(page.get_text("text", clip=box))
                    for cell in element["grid"]["cells"]:
                        assert normalise_text(cell["text"]) in inside, (document.doc, element["id"], cell)
                elif element["type"] == "figure":
                    drawn = any(
                        box.intersects(d["rect"] + (-1, -1, 1, 1)) for d in page.get_drawings()
                    )  # rules: no area
                    imaged = any(box.intersects(pymupdf.Rect(i["bbox"])) for i in page.get_image_info())
                    assert drawn or imaged, (document.doc, element["id"])
                for part in element.get("parts", []):
                    assert part["page"] == element["page"] and box.contains(pymupdf.Rect(part["bbox"]))
