"""Scoring a parse against ground truth: by construction (the synthetic papers of ``benchmarks/synthetic``) or by eye
(the sample corpus, ``tests/data/sample_objects_gold.json``).

A synthetic gold document (``syn-NNN.gold.json``) lists every table, figure, display equation and algorithm with its
page and box as TeX placed it, and what the source said: label, caption, the table's cell grid, the equation's LaTeX.
The by-eye gold lists the figures and tables of real papers (page, label, box) and scores those two classes only.
A detector's output is reduced to :class:`Detection` rows, and :func:`score` matches them per class one to one on the
same page (IoU ≥ 0.5, best pairs first), then checks what rides on a match: the caption's label, the cell grid,
the equation's LaTeX.

Rules that keep the numbers honest:
- a framed prompt box is a table or a figure as its caption says (the gold type follows the caption's word);
- a whole figure is scored, not its panels: detections that are panels of another detection are left out;
- algorithms are nobody's tables or figures: a detection covering an algorithm is neither a hit nor a false alarm;
- a cell grid is exact when the non-empty cells agree in row, column, spans and normalised text, and the grid has
  the same number of rows and columns.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paperlake.parsing.geometry import iou

IOU_THRESHOLD = 0.5
CLASSES = ("tables", "figures", "equations")
_GOLD_CLASS = {"table": "tables", "figure": "figures", "equation": "equations"}
_IGNORED_COVER = 0.6  # a detection this much inside an algorithm's box is not counted either way

Box = tuple[float, float, float, float]


@dataclass
class Detection:
    """One element a detector reports: class, page (from 1), box in points (top-left origin, x0 y0 x1 y1)."""

    kind: str  # tables | figures | equations
    page: int
    bbox: Box
    label: str | None = None  # "Table 3", "Figure 2" when the detector attached a caption
    cells: list[dict[str, Any]] | None = None  # row, col, rowspan, colspan, text
    latex: str | None = None
    detector: str | None = None


@dataclass
class GoldDocument:
    doc: str
    pdf: Path
    pages: list[dict[str, Any]]
    elements: list[dict[str, Any]]
    headings: list[dict[str, Any]] = field(default_factory=list)
    classes: tuple[str, ...] = CLASSES  # the classes this gold lists completely; others are not scored


def load_gold(folder: str | Path) -> list[GoldDocument]:
    """Every ``*.gold.json`` in ``folder`` with its PDF, in name order; or, given a ``.json`` file, the papers of a
    by-eye gold (:func:`load_objects_gold`)."""
    if Path(folder).suffix == ".json":
        return load_objects_gold(folder)
    documents = []
    for path in sorted(Path(folder).glob("*.gold.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        pdf = path.with_name(path.name.removesuffix(".gold.json") + ".pdf")
        if not pdf.exists():
            raise FileNotFoundError(f"{path}: no PDF beside it ({pdf.name})")
        documents.append(GoldDocument(data["doc"], pdf, data["pages"], data["elements"], data.get("headings", [])))
    if not documents:
        raise FileNotFoundError(f"{folder}: no *.gold.json files")
    return documents


def load_objects_gold(path: str | Path) -> list[GoldDocument]:
    """The papers of a by-eye gold of figures and tables (``{"papers": {doc: {"pdf", "pages", "objects"}}}``, boxes
    ``[x, y, w, h]``, PDF paths relative to the gold file); only figures and tables are scored against it."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    documents = []
    for doc, paper in data["papers"].items():
        pdf = (path.parent / paper["pdf"]).resolve()
        if not pdf.exists():
            raise FileNotFoundError(f"{path}: {doc}: no PDF at {pdf}")
        elements = []
        for index, item in enumerate(paper["objects"]):
            x, y, width, height = item["box"]
            elements.append(
                {
                    "id": f"{item['kind']}{index + 1}",
                    "type": item["kind"],
                    "page": item["page"],
                    "bbox": [x, y, x + width, y + height],
                    "label": item["label"],
                    "kind": "captioned" if item["label"] else "uncaptioned",
                }
            )
        pages = [{"page": number} for number in range(1, paper["pages"] + 1)]
        documents.append(GoldDocument(doc, pdf, pages, elements, classes=("tables", "figures")))
    return documents


def normalise_text(text: str | None) -> str:
    text = unicodedata.normalize("NFKC", text or "").replace("−", "-").replace("–", "-")
    return re.sub(r"\s+", "", text).lower()


def grid_key(cells: Iterable[dict[str, Any]]) -> set[tuple[int, int, int, int, str]]:
    return {
        (
            int(c["row"]),
            int(c["col"]),
            int(c.get("rowspan") or 1),
            int(c.get("colspan") or 1),
            normalise_text(c["text"]),
        )
        for c in cells
        if normalise_text(c.get("text"))
    }


def grid_exact(gold_grid: dict[str, Any], cells: list[dict[str, Any]] | None) -> bool:
    if not cells:
        return False
    rows = max(int(c["row"]) + int(c.get("rowspan") or 1) for c in cells)
    cols = max(int(c["col"]) + int(c.get("colspan") or 1) for c in cells)
    return (rows, cols) == (gold_grid["n_rows"], gold_grid["n_cols"]) and grid_key(cells) == grid_key(
        gold_grid["cells"]
    )


def _match(gold: list[tuple[int, dict]], found: list[tuple[int, Detection]]) -> list[tuple[int, int]]:
    pairs = sorted(
        ((iou(tuple(g["bbox"]), d.bbox), i, j) for i, g in gold for j, d in found if g["page"] == d.page),
        key=lambda pair: pair[0],
        reverse=True,
    )
    used_gold: set[int] = set()
    used_found: set[int] = set()
    matches = []
    for overlap, i, j in pairs:
        if overlap < IOU_THRESHOLD:
            break
        if i not in used_gold and j not in used_found:
            used_gold.add(i)
            used_found.add(j)
            matches.append((i, j))
    return matches


def _inside_share(inner: Box, outer: Box) -> float:
    width = min(inner[2], outer[2]) - max(inner[0], outer[0])
    height = min(inner[3], outer[3]) - max(inner[1], outer[1])
    area = (inner[2] - inner[0]) * (inner[3] - inner[1])
    return width * height / area if width > 0 and height > 0 and area > 0 else 0.0


def score(
    documents: list[GoldDocument],
    detections: dict[str, list[Detection]],
    latex_equal: Callable[[str, str], bool] | None = None,
) -> dict[str, Any]:
    """Per-class recall/precision, caption attachment, exact cell grids and equation LaTeX, summed over documents.

    ``detections`` maps a document id to its detections; ``latex_equal(gold, ours)`` judges equation LaTeX (when
    None, LaTeX is not scored). Also returns ``misses``/``false_alarms`` per class (doc, page, id or box) so that a
    reader can look at the failures.
    """
    totals: dict[str, dict[str, Any]] = {
        kind: {"gold": 0, "found": 0, "matched": 0, "ignored": 0, "misses": [], "false_alarms": []} for kind in CLASSES
    }
    caption = {"gold": 0, "matched": 0, "right": 0, "wrong": []}
    grids = {"gold": 0, "matched": 0, "exact": 0, "wrong": []}
    latex = {"matched": 0, "equal": 0, "wrong": []}
    by_style: dict[str, dict[str, int]] = {}
    for document in documents:
        found_all = detections.get(document.doc, [])
        algorithms = [(e["page"], tuple(e["bbox"])) for e in document.elements if e["type"] == "algorithm"]
        for kind in document.classes:
            gold = [(i, e) for i, e in enumerate(document.elements) if _GOLD_CLASS.get(e["type"]) == kind]
            found = []
            for j, d in enumerate(found_all):
                if d.kind != kind:
                    continue
                if any(page == d.page and _inside_share(d.bbox, box) >= _IGNORED_COVER for page, box in algorithms):
                    totals[kind]["ignored"] += 1
                    continue
                found.append((j, d))
            matches = dict(_match(gold, found))
            found_by_index = dict(found)
            totals[kind]["gold"] += len(gold)
            totals[kind]["found"] += len(found)
            totals[kind]["matched"] += len(matches)
            matched_found = set(matches.values())
            for i, element in gold:
                styles = [element.get("style") or element.get("kind") or "-", *element.get("patterns", [])]
                for style in styles:  # a pattern (side by side, appendix numbering) is counted beside the style
                    counts = by_style.setdefault(f"{kind}:{style}", {"gold": 0, "matched": 0})
                    counts["gold"] += 1
                    counts["matched"] += i in matches
                if i not in matches:
                    totals[kind]["misses"].append(
                        f"{document.doc} p{element['page']} {element['id']}"
                        f" ({element.get('style') or element.get('kind') or ''})"
                    )
            for j, d in found:
                if j not in matched_found:
                    totals[kind]["false_alarms"].append(
                        f"{document.doc} p{d.page} {[round(v) for v in d.bbox]} {d.detector or ''}".strip()
                    )
            for i, element in gold:
                detection = found_by_index.get(matches.get(i)) if i in matches else None
                if kind in ("tables", "figures") and element.get("label"):
                    caption["gold"] += 1
                    if detection is not None:
                        caption["matched"] += 1
                        if normalise_text(detection.label) == normalise_text(element["label"]):
                            caption["right"] += 1
                        else:
                            caption["wrong"].append(
                                f"{document.doc} {element['id']} {element['label']!r} got {detection.label!r}"
                            )
                if kind == "tables" and element.get("grid"):
                    grids["gold"] += 1
                    if detection is not None:
                        grids["matched"] += 1
                        if grid_exact(element["grid"], detection.cells):
                            grids["exact"] += 1
                        else:
                            grids["wrong"].append(f"{document.doc} {element['id']} ({element.get('style')})")
                if kind == "equations" and detection is not None and latex_equal is not None:
                    latex["matched"] += 1
                    if detection.latex and latex_equal(element["latex"], detection.latex):
                        latex["equal"] += 1
                    else:
                        latex["wrong"].append(
                            {
                                "doc": document.doc,
                                "id": element["id"],
                                "gold": element["latex"],
                                "ours": detection.latex,
                            }
                        )
    result: dict[str, Any] = {}
    for kind, t in totals.items():
        result[kind] = {
            "gold": t["gold"],
            "found": t["found"],
            "matched": t["matched"],
            "ignored": t["ignored"],
            "recall": _ratio(t["matched"], t["gold"]),
            "precision": _ratio(t["matched"], t["found"]),
            "misses": t["misses"],
            "false_alarms": t["false_alarms"],
        }
    result["captions"] = {
        **caption,
        "right_of_gold": _ratio(caption["right"], caption["gold"]),
        "right_of_matched": _ratio(caption["right"], caption["matched"]),
    }
    result["table_grids"] = {
        **grids,
        "exact_of_gold": _ratio(grids["exact"], grids["gold"]),
        "exact_of_matched": _ratio(grids["exact"], grids["matched"]),
    }
    if latex_equal is not None:
        result["equation_latex"] = {**latex, "equal_of_matched": _ratio(latex["equal"], latex["matched"])}
    result["recall_by_style"] = {
        k: {**v, "recall": _ratio(v["matched"], v["gold"])} for k, v in sorted(by_style.items())
    }
    return result


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def detections_from_parsed(parsed: Any, detector: str = "paperlake") -> list[Detection]:
    """A :class:`~paperlake.lake.views.ParsedPaper`'s tables, whole figures and equations as detections."""
    cells_by_table: dict[str, list[dict[str, Any]]] = {}
    for cell in parsed.rows("table_cells"):
        cells_by_table.setdefault(cell["table_id"], []).append(
            {
                "row": cell["row_index"],
                "col": cell["col_index"],
                "rowspan": cell["rowspan"],
                "colspan": cell["colspan"],
                "text": cell["cell_text"],
                "is_header": cell["is_header"],
            }
        )
    found = []

    def box(row: dict[str, Any]) -> Box:
        x, y, w, h = row["bbox"]
        return (x, y, x + w, y + h)

    def by(row: dict[str, Any]) -> str:  # "paperlake:uncaptioned_drawing": the parser and its element detector
        return f"{detector}:{row['detector']}" if row.get("detector") else detector

    for row in parsed.rows("tables"):
        found.append(
            Detection(
                "tables",
                row["page_number"],
                box(row),
                row.get("table_label"),
                cells_by_table.get(row["table_id"], []),
                detector=by(row),
            )
        )
    for row in parsed.rows("images"):
        if row.get("parent_image_id"):
            continue
        found.append(Detection("figures", row["page_number"], box(row), row.get("image_label"), detector=by(row)))
    for row in parsed.rows("equations"):
        found.append(
            Detection(
                "equations", row["page_number"], box(row), latex=row.get("equation_latex") or None, detector=by(row)
            )
        )
    return found
