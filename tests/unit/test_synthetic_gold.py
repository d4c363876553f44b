"""The synthetic ground-truth set (tests/data/synthetic, made by benchmarks/synthetic/generate.py) and its scoring.

Three things are checked: the gold is consistent with its PDFs (every gold cell's text is inside its table's box,
every equation box holds glyphs, every figure box holds a drawing or an image), the scorer is right on known
answers (the gold scored against itself, moved boxes, panels, algorithms), and the default parser stays above the
floors measured on this set (raise them when the parser improves; they are not the issue's targets).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pymupdf
import pytest

from paperlake.parsing.gold import Detection, grid_exact, load_gold, normalise_text, score
from support.parser_scores import default_parser_score

SYNTHETIC = Path(__file__).parents[1] / "data" / "synthetic"

# Measured with benchmarks/parse_fidelity.py on this set; a drop below a floor is a regression.
FLOORS = {
    ("tables", "recall"): 0.97,
    ("tables", "precision"): 0.97,
    ("figures", "recall"): 0.95,
    ("figures", "precision"): 0.95,
    ("equations", "recall"): 0.97,
    ("equations", "precision"): 0.97,
}
CAPTION_FLOOR = 0.97
GRID_FLOOR = 0.9


@pytest.fixture(scope="module")
def gold():
    return load_gold(SYNTHETIC)


def _as_detections(document) -> list[Detection]:
    kinds = {"table": "tables", "figure": "figures", "equation": "equations"}
    return [
        Detection(
            kinds[e["type"]],
            e["page"],
            tuple(e["bbox"]),
            e.get("label"),
            (e.get("grid") or {}).get("cells"),
            e.get("latex"),
        )
        for e in document.elements
        if e["type"] in kinds
    ]


def test_the_committed_set_is_large_and_varied(gold) -> None:
    manifest = json.loads((SYNTHETIC / "manifest.json").read_text())
    assert manifest["pages"] == sum(len(d.pages) for d in gold) >= 120
    elements = [e for d in gold for e in d.elements]
    kinds = {(e["type"], e.get("style") or e.get("kind")) for e in elements}
    for needed in [
        ("table", "booktabs"),
        ("table", "ruled"),
        ("table", "plain"),
        ("table", "prompt_box"),
        ("figure", "panels"),
        ("figure", "raster"),
        ("figure", "plot"),
        ("figure", "prompt_box"),
        ("figure", "uncaptioned_diagram"),
        ("equation", "aligned"),
        ("equation", "unnumbered"),
    ]:
        assert needed in kinds, needed
    assert any(e["type"] == "algorithm" for e in elements)
    assert {round(d.pages[0]["width"]) for d in gold} == {595, 612}  # A4 and letter
    assert any(c["rowspan"] > 1 for e in elements for c in (e.get("grid") or {}).get("cells", []))
    assert any(c["colspan"] > 1 for e in elements for c in (e.get("grid") or {}).get("cells", []))


def test_gold_boxes_hold_what_they_claim(gold) -> None:
    """Positions come from TeX, so they must agree with the PDF: cell texts inside the table's box, glyphs inside
    each equation's box, drawings or images inside each figure's box."""
    for document in gold:
        with pymupdf.open(document.pdf) as pdf:
            for element in document.elements:
                page = pdf[element["page"] - 1]
                box = pymupdf.Rect(element["bbox"]) + (-1, -1, 1, 1)
                assert page.rect.contains(pymupdf.Rect(element["bbox"]).irect.rect & page.rect)
                if element["type"] == "table" and element.get("grid"):
                    inside = normalise_text(page.get_text("text", clip=box))
                    for cell in element["grid"]["cells"]:
                        assert normalise_text(cell["text"]) in inside, (document.doc, element["id"], cell)
                elif element["type"] == "equation":
                    assert page.get_text("text", clip=box).strip(), (document.doc, element["id"])
                elif element["type"] == "figure":
                    drawn = any(box.intersects(d["rect"]) for d in page.get_drawings())
                    imaged = any(box.intersects(pymupdf.Rect(i["bbox"])) for i in page.get_image_info())
                    assert drawn or imaged, (document.doc, element["id"])


def test_the_gold_scores_perfectly_against_itself(gold) -> None:
    result = score(gold, {d.doc: _as_detections(d) for d in gold}, latex_equal=lambda a, b: a == b)
    for kind in ("tables", "figures", "equations"):
        assert result[kind]["recall"] == result[kind]["precision"] == 1.0, kind
    assert result["captions"]["right_of_gold"] == 1.0
    assert result["table_grids"]["exact_of_gold"] == 1.0
    assert result["equation_latex"]["equal_of_matched"] == 1.0


def test_the_scorer_counts_misses_alarms_and_wrong_details(gold) -> None:
    document = next(d for d in gold if any(e["type"] == "table" and e.get("grid") for e in d.elements))
    detections = _as_detections(document)
    table = next(d for d in detections if d.kind == "tables" and d.cells)
    # half a box off is a miss and a false alarm; a wrong label and a shifted grid are counted once each
    x0, y0, x1, y1 = table.bbox
    moved = copy.deepcopy(detections)
    shifted = next(d for d in moved if d.bbox == table.bbox)
    shifted.bbox = (x0 + (x1 - x0) * 0.8, y0, x1 + (x1 - x0) * 0.8, y1)
    result = score([document], {document.doc: moved})
    assert result["tables"]["matched"] == result["tables"]["gold"] - 1
    assert len(result["tables"]["misses"]) == len(result["tables"]["false_alarms"]) == 1
    relabelled = copy.deepcopy(detections)
    target = next(d for d in relabelled if d.bbox == table.bbox)
    target.label = "Table 99"
    target.cells = [{**c, "row": c["row"] + 1} for c in target.cells]
    result = score([document], {document.doc: relabelled})
    assert result["captions"]["right"] == result["captions"]["gold"] - 1
    assert result["table_grids"]["exact"] == result["table_grids"]["gold"] - 1
    assert not grid_exact({"n_rows": 1, "n_cols": 1, "cells": [{"row": 0, "col": 0, "text": "a"}]}, [])


def test_algorithms_are_neither_hits_nor_false_alarms(gold) -> None:
    document = next(d for d in gold if any(e["type"] == "algorithm" for e in d.elements))
    algorithm = next(e for e in document.elements if e["type"] == "algorithm")
    detections = _as_detections(document) + [Detection("tables", algorithm["page"], tuple(algorithm["bbox"]))]
    result = score([document], {document.doc: detections})
    assert result["tables"]["ignored"] == 1 and result["tables"]["precision"] == 1.0


def test_the_default_parser_stays_above_its_floors(gold) -> None:
    result = default_parser_score(gold, "synthetic")
    for (kind, measure), floor in FLOORS.items():
        assert result[kind][measure] >= floor, (kind, measure, result[kind][measure], result[kind]["misses"][:5])
    assert result["captions"]["right_of_gold"] >= CAPTION_FLOOR, result["captions"]["wrong"][:5]
    assert result["table_grids"]["exact_of_gold"] >= GRID_FLOOR, result["table_grids"]["wrong"][:5]
