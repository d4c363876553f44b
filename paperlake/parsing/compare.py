"""How close a parse comes to MinerU's: the yardstick for the fast PyMuPDF backend.

MinerU (layout, table and formula models) is slow but careful, so its boxes serve as the reference: tables,
figures and display equations are matched per page by IoU, section headings by normalised text. This module reads
MinerU's output files itself (middle JSON, or the content list rescaled to points) so that the yardstick does not
depend on the MinerU backend it might one day be used to judge.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

from paperlake.lake.views import ParsedPaper
from paperlake.parsing.geometry import Box, iou

IOU_THRESHOLD = 0.5
HEADING_SIMILARITY = 90  # rapidfuzz ratio, 0-100: tolerates ligatures and stray hyphens in extracted headings
ELEMENT_TYPES = ("tables", "figures", "equations")
FIGURE_REGIONS = "figure regions"  # secondary, recall only: MinerU figures covered by any visual element of ours
# MinerU's block types per element type (charts and images are both figures for us).
_MINERU_TYPES = {"table": "tables", "image": "figures", "chart": "figures", "interline_equation": "equations"}
_CONTENT_LIST_TYPES = {"table": "tables", "image": "figures", "chart": "figures", "equation": "equations"}
_BODY_SUBTYPES = {"table_body", "image_body", "chart_body"}
_CONTENT_LIST_SCALE = 1000.0
_LEADING_NUMBER = re.compile(r"^\s*(?:\d+(?:\.\d+)*|[A-Z](?:\.\d+)*)\.?\s+(?=\S)")


@dataclass
class MineruElements:
    """MinerU's boxes (points, top-left origin, x0 y0 x1 y1) per element type, and its section headings."""

    boxes: dict[str, list[tuple[int, Box]]]
    headings: list[str]


def compare_with_mineru(pymupdf_parsed: ParsedPaper, mineru_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Recall and precision of ``pymupdf_parsed`` against MinerU's output in ``mineru_dir``, per element type.

    Returns ``{type: {"reference", "found", "matched", "recall", "precision"}}`` for tables, figures, equations and
    sections; recall/precision are None when there is nothing to divide by. Figures are matched one to one against
    every images row of ours, whole figures and their panels alike, since MinerU keeps some figures of several
    plots whole and cuts others apart: a MinerU figure is found when either granularity has it. ``found`` counts
    all those rows, so figure precision is lowered by every split figure (its whole and its panels cannot all
    match). A secondary ``"figure regions"``
    entry only reports recall: a MinerU figure counts as found when any figure *or table* of ours covers it with
    IoU ≥ the threshold (not one-to-one). It shows how much of the strict figure shortfall is a question of
    type, as with prompt boxes their authors caption "Table N" that MinerU calls images; it never replaces the
    strict per-type numbers.
    """
    page_sizes = {row["page_number"]: (row["page_width"], row["page_height"]) for row in pymupdf_parsed.rows("pages")}
    reference = read_mineru_elements(mineru_dir, page_sizes)
    ours = {
        "tables": _boxes(pymupdf_parsed.rows("tables")),
        "figures": _boxes(pymupdf_parsed.rows("images")),
        "equations": _boxes(pymupdf_parsed.rows("equations")),
    }
    result = {
        kind: _scores(len(reference.boxes[kind]), len(ours[kind]), _match_boxes(reference.boxes[kind], ours[kind]))
        for kind in ELEMENT_TYPES
    }
    our_headings = [row["section_title"] for row in pymupdf_parsed.rows("sections") if row["section_title"]]
    result["sections"] = _scores(
        len(reference.headings), len(our_headings), _match_headings(reference.headings, our_headings)
    )
    visual = ours["figures"] + ours["tables"]
    result[FIGURE_REGIONS] = _recall_only(
        len(reference.boxes["figures"]), len(visual), _covered(reference.boxes["figures"], visual)
    )
    return result


def combine(results: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Corpus-level scores from per-paper :func:`compare_with_mineru` results (counts summed, then divided)."""
    combined: dict[str, dict[str, Any]] = {}
    for kind in (*ELEMENT_TYPES, "sections", FIGURE_REGIONS):
        totals = [sum(result[kind][field] for result in results) for field in ("reference", "found", "matched")]
        combined[kind] = _recall_only(*totals) if kind == FIGURE_REGIONS else _scores(*totals)
    return combined


def format_table(scores: dict[str, dict[str, Any]]) -> str:
    """The scores as a fixed-width table for logs and reports."""
    lines = [f"{'element':<14} {'MinerU':>7} {'ours':>6} {'matched':>8} {'recall':>7} {'precision':>10}"]
    for kind, score in scores.items():
        recall = f"{score['recall']:.3f}" if score["recall"] is not None else "-"
        precision = f"{score['precision']:.3f}" if score["precision"] is not None else "-"
        lines.append(
            f"{kind:<14} {score['reference']:>7} {score['found']:>6} {score['matched']:>8} {recall:>7} {precision:>10}"
        )
    return "\n".join(lines)


def read_mineru_elements(
    mineru_dir: str | Path, page_sizes: dict[int, tuple[float, float]] | None = None
) -> MineruElements:
    """MinerU's element boxes from ``layout.json(.gz)``; from ``*_content_list.json`` when there is no middle JSON
    (its 0-1000 boxes are rescaled with ``page_sizes``, page number → (width, height) in points)."""
    directory = Path(mineru_dir)
    middle = next((p for p in (directory / "layout.json", directory / "layout.json.gz") if p.exists()), None)
    if middle is not None:
        return _from_middle_json(middle)
    content_lists = sorted(directory.glob("*_content_list.json"))
    if not content_lists:
        raise FileNotFoundError(f"{directory}: neither layout.json(.gz) nor *_content_list.json found")
    if not page_sizes:
        raise ValueError(f"{directory}: the content list needs page sizes to convert its 0-1000 boxes to points")
    return _from_content_list(content_lists[0], page_sizes)


def _from_middle_json(path: Path) -> MineruElements:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        pages = json.load(handle)["pdf_info"]
    boxes: dict[str, list[tuple[int, Box]]] = {kind: [] for kind in ELEMENT_TYPES}
    headings = []
    for page in pages:
        page_number = page["page_idx"] + 1
        for block in page.get("para_blocks", []):
            kind = _MINERU_TYPES.get(block["type"])
            if kind:
                body = next((b["bbox"] for b in block.get("blocks", []) if b["type"] in _BODY_SUBTYPES), None)
                boxes[kind].append((page_number, tuple(map(float, body or block["bbox"]))))
            elif block["type"] == "title" and block.get("level") != 1:
                text = " ".join(
                    span.get("content", "") for line in block.get("lines", []) for span in line.get("spans", [])
                )
                if text.strip():
                    headings.append(text)
    return MineruElements(boxes, headings)


def _from_content_list(path: Path, page_sizes: dict[int, tuple[float, float]]) -> MineruElements:
    with open(path, encoding="utf-8") as handle:
        items = json.load(handle)
    boxes: dict[str, list[tuple[int, Box]]] = {kind: [] for kind in ELEMENT_TYPES}
    headings = []
    for item in items:
        page_number = item["page_idx"] + 1
        kind = _CONTENT_LIST_TYPES.get(item["type"])
        if kind and page_number in page_sizes:
            width, height = page_sizes[page_number]
            x0, y0, x1, y1 = item["bbox"]
            scale_x, scale_y = width / _CONTENT_LIST_SCALE, height / _CONTENT_LIST_SCALE
            boxes[kind].append((page_number, (x0 * scale_x, y0 * scale_y, x1 * scale_x, y1 * scale_y)))
        elif item["type"] == "text" and item.get("text_level", 0) > 1 and item.get("text", "").strip():
            headings.append(item["text"])
    return MineruElements(boxes, headings)


def _boxes(rows: list[dict[str, Any]]) -> list[tuple[int, Box]]:
    boxes = []
    for row in rows:
        x, y, w, h = row["bbox"]
        boxes.append((row["page_number"], (x, y, x + w, y + h)))
    return boxes


def _match_boxes(reference: list[tuple[int, Box]], ours: list[tuple[int, Box]]) -> int:
    """One-to-one matches on the same page with IoU ≥ the threshold, best pairs first."""
    pairs = sorted(
        (
            (iou(ref_box, our_box), i, j)
            for i, (ref_page, ref_box) in enumerate(reference)
            for j, (our_page, our_box) in enumerate(ours)
            if ref_page == our_page
        ),
        reverse=True,
    )
    used_reference: set[int] = set()
    used_ours: set[int] = set()
    for overlap, i, j in pairs:
        if overlap < IOU_THRESHOLD:
            break
        if i not in used_reference and j not in used_ours:
            used_reference.add(i)
            used_ours.add(j)
    return len(used_reference)


def normalise_heading(text: str) -> str:
    """Drop the section number, case, markup and everything but letters and digits."""
    text = re.sub(r"<[^>]+>|\$[^$]*\$", " ", text)
    return re.sub(r"[^a-z0-9]", "", _LEADING_NUMBER.sub("", text).lower())


def _match_headings(reference: list[str], ours: list[str]) -> int:
    remaining = [normalise_heading(text) for text in ours]
    matched = 0
    for heading in map(normalise_heading, reference):
        best = max(range(len(remaining)), key=lambda k: fuzz.ratio(heading, remaining[k]), default=None)
        if best is not None and fuzz.ratio(heading, remaining[best]) >= HEADING_SIMILARITY:
            matched += 1
            remaining.pop(best)
    return matched


def _covered(reference: list[tuple[int, Box]], ours: list[tuple[int, Box]]) -> int:
    """Reference boxes that some box of ours on the same page overlaps with IoU ≥ the threshold."""
    return sum(
        1
        for ref_page, ref_box in reference
        if any(page == ref_page and iou(ref_box, box) >= IOU_THRESHOLD for page, box in ours)
    )


def _recall_only(reference: int, found: int, matched: int) -> dict[str, Any]:
    """Scores where precision means nothing (``found`` counts elements of another type too)."""
    return {**_scores(reference, found, matched), "precision": None}


def _scores(reference: int, found: int, matched: int) -> dict[str, Any]:
    return {
        "reference": reference,
        "found": found,
        "matched": matched,
        "recall": matched / reference if reference else None,
        "precision": matched / found if found else None,
    }
