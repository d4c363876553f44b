"""The MinerU backend: read a MinerU run's outputs into a :class:`DocumentLayout`, then assemble the lake views.

MinerU runs elsewhere (a GPU box, its own venv); this module only reads what it wrote, in either layout:

- cloud export: ``<id>_content_list.json`` (+ ``_content_list_v2.json``) and ``layout.json`` or ``layout.json.gz``;
- local CLI: ``<stem>/auto/<stem>_content_list.json`` and ``<stem>_middle.json`` (+ ``_model.json``).

The content list gives reading order, block types, LaTeX and table HTML, with boxes on a 0–1000 scale per page; the
middle JSON (``layout.json`` is the same file) gives each page's size in points and where every caption sits.
Page text and page sizes come from the PDF itself, so the pages view is the same whichever backend parsed the paper.
"""

from __future__ import annotations

import gzip
import html
import json
import os
import re
import signal
import subprocess
import unicodedata
import zlib
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pymupdf

from paperlake.lake.inbox import PaperSource
from paperlake.lake.views import ParsedPaper
from paperlake.parsing import versions
from paperlake.parsing.assemble import assemble
from paperlake.parsing.blocks import Block, DocumentLayout, PageInfo, TableCell
from paperlake.parsing.errors import ParseError
from paperlake.parsing.figure_text import text_inside, word_lines
from paperlake.parsing.front_matter import front_matter_row
from paperlake.parsing.geometry import union as _union
from paperlake.parsing.inline_math import plain_text
from paperlake.parsing.pymupdf import box_words, grid_in_box

PARSER_VERSION = versions.MINERU  # bumped there
BACKEND = "mineru"
STAGE = "mineru"
DEFAULT_TIMEOUT_SECONDS = 3600

_NORMALISED_SCALE = 1000.0
_LAYOUT_NAMES = ("layout.json", "layout.json.gz")
_FLOAT_TYPES = {"table": "table", "image": "figure", "chart": "figure", "code": "code"}
# Which floats a caption may label: a code listing can turn out to be a figure or a table (prompt templates).
_CAPTION_TARGETS = {"figure": {"figure", "code"}, "table": {"table", "code"}}
_ENV_NOT_INHERITED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX")

_CAPTION_LABEL = re.compile(r"^\s*(Figure|Fig\.?|Table|Tab\.?)\s*((?:[A-Z]\.?)?\d+(?:\.\d+)?[a-z]?)(?=\s*(?:$|[:.|]))")
_PARAGRAPH_CAPTION = re.compile(_CAPTION_LABEL.pattern + r"\s*[:.|]")
_NUMBERED_SUBHEADING = re.compile(r"^(?:\d+|[A-Z])(?:\.\d+)+\.?\s+[A-Z]")
_SUBCAPTION = re.compile(r"^\s*\(\s*[a-z0-9]{1,3}\s*\)")
_TAG = re.compile(r"\\tag\*?\s*\{([^{}]*)\}")
_TRAILING_NUMBER = re.compile(r"(?:\\qquad|\\quad|\\hfill|~)\s*\(\s*([0-9](?:\s*[0-9.a-z])*)\s*\)\s*$")
_EQUATION_NUMBER_WORD = re.compile(r"^\(\d+(?:\.\d+)?[a-z]?\)$")
_BIBLIOGRAPHY_TITLES = frozenset({"references", "bibliography", "literaturecited"})
_YEAR = re.compile(r"\b(?:19|20)\d{2}[a-z]?\b")
_INLINE_ABSTRACT = re.compile(r"^\s*abstract\s*[:.—–-]\s*", re.I)
_SUP_SUB = re.compile(r"<(sup|sub)>(.*?)</\1>", re.S)
_MARKERS = re.compile(r"\^\{[^{}]*\}")  # superscripts after _clean_text: affiliation and footnote marks
_NAME_SEPARATORS = re.compile(r",|;|\band\b|&")
# A MinerU table grid is replaced when it keeps less of the text layer inside its box than this (_keep_printed_words)
_MIN_WORDS_KEPT = 0.8
_MIN_NUMBERS = 10
_MIN_NUMBERS_KEPT = 0.9
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_AFFILIATION_WORDS = re.compile(
    r"\b(univ|university|institute|inc|lab|laboratory|research|college|department|dept|school|academy|group|"
    r"centre|center|corporation|company|ltd|technologies)\b",
    re.I,
)


# ---------------------------------------------------------------------------------------------------- public API


def has_outputs(mineru_dir: Path) -> bool:
    """Whether ``mineru_dir`` holds a content list and a layout (middle) JSON, in either layout."""
    try:
        _output_files(Path(mineru_dir), "")
    except ParseError:
        return False
    return True


def read_layout(mineru_dir: Path, pdf_path: Path, *, paper_key: str | None = None) -> DocumentLayout:
    """MinerU outputs + the PDF they came from → pages (from the PDF) and reading-order blocks in PDF points."""
    key = paper_key or Path(pdf_path).stem
    content_path, layout_path = _output_files(Path(mineru_dir), key)
    content = _load_json(content_path, key)
    middle = _load_json(layout_path, key)
    if not isinstance(content, list) or not all(isinstance(item, dict) for item in content):
        raise ParseError(key, STAGE, f"{content_path.name}: expected a list of blocks")
    pages_info = middle.get("pdf_info") if isinstance(middle, dict) else None
    if not isinstance(pages_info, list) or not pages_info:
        raise ParseError(key, STAGE, f"{layout_path.name}: no pdf_info pages")
    try:
        document = pymupdf.open(pdf_path)
    except Exception as exc:  # pymupdf raises its own FileDataError, RuntimeError, FileNotFoundError...
        raise ParseError(key, STAGE, f"cannot open the PDF {pdf_path}: {exc}") from exc
    with document:
        if len(pages_info) != document.page_count:
            raise ParseError(
                key,
                STAGE,
                f"{layout_path.name} has {len(pages_info)} pages but the PDF has {document.page_count}",
            )
        try:
            return _Reader(key, document, pages_info).read(content)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ParseError(key, STAGE, f"malformed MinerU output: {exc!r}") from exc


def parse(source: PaperSource, *, parser_version: str = PARSER_VERSION, max_chunk_tokens: int = 512) -> ParsedPaper:
    """One paper with MinerU outputs → its lake views (backend ``mineru``)."""
    if source.mineru_dir is None:
        raise ParseError(source.paper_key, STAGE, "no MinerU outputs for this PDF (mineru_dir is not set)")
    layout = read_layout(source.mineru_dir, source.pdf_path, paper_key=source.paper_key)
    return assemble(source, layout, BACKEND, parser_version=parser_version, max_chunk_tokens=max_chunk_tokens)


def run_mineru(
    pdf_path: Path,
    out_dir: Path,
    executable: str,
    backend_args: list[str],
    *,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    paper_key: str | None = None,
) -> Path:
    """Run a configured ``mineru`` CLI (``-p <pdf> -o <out_dir>``) and return the folder holding its outputs.

    MinerU lives in its own venv, so this venv's Python variables are not passed on. On timeout the whole process
    group is killed: MinerU starts worker processes of its own.
    """
    key = paper_key or Path(pdf_path).stem
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    command = [executable, "-p", str(pdf_path), "-o", str(out_dir), *backend_args]
    env = {name: value for name, value in os.environ.items() if name not in _ENV_NOT_INHERITED}
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
    except OSError as exc:
        raise ParseError(key, STAGE, f"cannot start {executable!r}: {exc}") from exc
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        raise ParseError(key, STAGE, f"MinerU timed out after {timeout:g} s; stderr: {_tail(stderr)}") from None
    if process.returncode != 0:
        raise ParseError(key, STAGE, f"MinerU exited with {process.returncode}; stderr: {_tail(stderr)}")
    found = _find_run_outputs(out_dir, Path(pdf_path).stem)
    if found is None:
        raise ParseError(
            key,
            STAGE,
            f"MinerU finished but wrote no content list + middle JSON under {out_dir}; stderr: {_tail(stderr)}",
        )
    return found


# ---------------------------------------------------------------------------------------------------- files


def _output_files(mineru_dir: Path, paper_key: str) -> tuple[Path, Path]:
    if not mineru_dir.is_dir():
        raise ParseError(paper_key, STAGE, f"MinerU folder {mineru_dir} does not exist")
    content_lists = sorted(mineru_dir.glob("*_content_list.json"))
    if not content_lists:
        raise ParseError(paper_key, STAGE, f"no *_content_list.json in {mineru_dir}")
    middles = sorted(mineru_dir.glob("*_middle.json"))
    layouts = middles + [mineru_dir / name for name in _LAYOUT_NAMES if (mineru_dir / name).is_file()]
    if not layouts:
        raise ParseError(paper_key, STAGE, f"no *_middle.json, layout.json or layout.json.gz in {mineru_dir}")
    if len(content_lists) == 1:
        return content_lists[0], layouts[0]
    stems = {path.name.removesuffix("_middle.json") for path in middles}
    paired = [path for path in content_lists if path.name.removesuffix("_content_list.json") in stems]
    if len(paired) != 1:
        names = ", ".join(path.name for path in content_lists + layouts)
        raise ParseError(paper_key, STAGE, f"several MinerU outputs in {mineru_dir}: {names}")
    stem = paired[0].name.removesuffix("_content_list.json")
    return paired[0], mineru_dir / f"{stem}_middle.json"


def _find_run_outputs(out_dir: Path, stem: str) -> Path | None:
    """MinerU writes ``<out>/<stem>/<auto|vlm|hybrid_auto|...>/``; any folder with both files will do."""
    for content_list in sorted(out_dir.rglob(f"{stem}_content_list.json")):
        if (content_list.parent / f"{stem}_middle.json").is_file():
            return content_list.parent
    return None


def _load_json(path: Path, paper_key: str) -> Any:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                return json.load(handle)
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParseError(paper_key, STAGE, f"{path.name}: unreadable JSON ({exc})") from exc


def _tail(text: str | None, lines: int = 20, chars: int = 2000) -> str:
    tail = "\n".join((text or "").strip().splitlines()[-lines:])
    return tail[-chars:] or "(empty)"


# ---------------------------------------------------------------------------------------------------- floats


@dataclass
class _Caption:
    text: str
    bbox: tuple[float, float, float, float] | None = None
    label: str | None = None  # "Table 3"
    label_kind: str | None = None  # "table" | "figure"

    def extend(self, text: str, bbox: tuple[float, float, float, float] | None) -> None:
        self.text = f"{self.text} {text}"
        if self.bbox and bbox:
            self.bbox = _union([self.bbox, bbox])


@dataclass
class _Float:
    """A table, figure or code listing with its captions, before captions are checked against the page."""

    kind: str  # "table" | "figure" | "code"
    page_number: int
    bbox: tuple[float, float, float, float]
    captions: list[_Caption] = field(default_factory=list)  # labelled, or one unlabelled
    subcaptions: list[_Caption] = field(default_factory=list)  # "(a) AUROC"
    stray_text: list[str] = field(default_factory=list)  # body text MinerU put in the caption list
    footnotes: list[str] = field(default_factory=list)
    html: str | None = None
    body: str = ""
    merged_into: _Float | None = None

    @property
    def labelled(self) -> list[_Caption]:
        return [caption for caption in self.captions if caption.label]

    def natural_label_kind(self) -> str | None:
        return None if self.kind == "code" else self.kind


def _labelled_caption(text: str, bbox: tuple[float, float, float, float] | None) -> _Caption | None:
    match = _CAPTION_LABEL.match(text)
    if match is None:
        return None
    kind = "figure" if match.group(1).lower().startswith("f") else "table"
    return _Caption(text, bbox, f"{kind.title()} {match.group(2)}", kind)


def _parse_captions(captions: list[tuple[str, Any]], target: _Float) -> None:
    """Sort a float's (text, box or None) captions into labelled ones (+ continuations), subcaptions, stray text."""
    unlabelled: list[str] = []
    for raw, box in captions:
        text = _clean_text(raw)
        if not text:
            continue
        labelled = _labelled_caption(text, box)
        if labelled:
            target.captions.append(labelled)
        elif _SUBCAPTION.match(text):
            target.subcaptions.append(_Caption(text, box))
        elif target.captions:
            target.captions[-1].extend(text, box)
        else:
            unlabelled.append(text)
    if target.captions or target.kind == "code":
        target.stray_text.extend(unlabelled)
    elif unlabelled:
        target.captions.append(_Caption(" ".join(unlabelled)))


def _resolve_page_floats(floats: list[_Float]) -> None:
    """Put MinerU's misplaced captions back where the page shows them, then merge sub-figures into their figure.

    MinerU sometimes hands the caption sitting under one float to the next float, which then has captions on both
    sides (or a caption of the wrong kind above it). Such a caption goes back to the nearest earlier float above it
    that has none. A run of unlabelled figures followed by a labelled one is one figure with sub-figures.
    """
    for position, current in enumerate(floats):
        for caption in list(current.labelled):
            if not _is_intruder(current, caption):
                continue
            receiver = _previous_without_label(floats[:position], caption)
            if receiver is not None:
                current.captions.remove(caption)
                receiver.captions.append(caption)
    for current in floats:
        kinds = [caption.label_kind for caption in current.labelled]
        if kinds and current.kind not in kinds:
            current.kind = kinds[0] or current.kind
    run: list[_Float] = []
    for current in floats:
        if current.kind != "figure":
            run = []
        elif not current.labelled:
            run.append(current)
        else:
            reach = _union([current.bbox, *(c.bbox for c in current.labelled if c.bbox)])
            for member in run:
                if _overlap_x(member.bbox, reach) > 0:
                    member.merged_into = current
            run = []


def _adopt_orphan_captions(entries: list[Block | _Float]) -> list[Block | _Float]:
    """A caption MinerU read as a paragraph joins the unlabelled float next to it, else becomes a caption block."""
    kept: list[Block | _Float] = []
    for index, entry in enumerate(entries):
        is_caption = isinstance(entry, Block) and entry.kind == "text" and _PARAGRAPH_CAPTION.match(entry.text)
        caption = _labelled_caption(entry.text, entry.bbox) if is_caption else None
        if caption is None:
            kept.append(entry)
            continue
        accepts = _CAPTION_TARGETS[caption.label_kind or "figure"]
        neighbours = [_neighbour_float(entries, index, step) for step in (-1, 1)]
        target = next(
            (
                n
                for n in neighbours
                if n is not None and n.page_number == entry.page_number and not n.labelled and n.kind in accepts
            ),
            None,
        )
        if target is None:
            entry.kind = "caption"
            kept.append(entry)
        else:
            target.captions = [caption]
    return kept


def _neighbour_float(entries: list[Block | _Float], index: int, step: int) -> _Float | None:
    """The float just before/after an entry, skipping running heads and footnotes; None if prose comes first."""
    position = index + step
    while 0 <= position < len(entries):
        entry = entries[position]
        if isinstance(entry, _Float):
            return entry
        if entry.kind not in {"page_header", "page_footer", "footnote"}:
            return None
        position += step
    return None


def _is_intruder(owner: _Float, caption: _Caption) -> bool:
    if caption.bbox is None:
        # Without geometry the caption list's order is all there is: of two labels, the first is the foreign one.
        return caption is not owner.labelled[-1]
    foreign = owner.natural_label_kind() not in (None, caption.label_kind)
    above = caption.bbox[3] <= owner.bbox[1] + 2
    below_items = [c for c in owner.captions + owner.subcaptions if c.bbox and c.bbox[1] >= owner.bbox[3] - 2]
    return above and (foreign or bool(below_items))


def _previous_without_label(earlier: list[_Float], caption: _Caption) -> _Float | None:
    accepts = _CAPTION_TARGETS[caption.label_kind or "figure"]
    for candidate in reversed(earlier):
        if candidate.labelled:
            return None
        if candidate.kind not in accepts:
            continue
        if caption.bbox is not None and candidate.bbox[3] > caption.bbox[1] + 2:
            continue
        return candidate
    return None


def _float_blocks(item: _Float, members: list[_Float], image_kind: str | None) -> list[Block]:
    """The blocks one float becomes, in reading order: stray text, the element, its footnotes."""
    blocks = [Block(kind="text", page_number=item.page_number, bbox=item.bbox, text=text) for text in item.stray_text]
    bbox = _union([item.bbox, *(member.bbox for member in members)])
    subcaptions = [c.text for member in [*members, item] for c in member.subcaptions]
    caption = " ".join([*(c.text for c in item.captions), *subcaptions]) or None
    label = item.labelled[0].label if item.labelled else None
    if item.kind == "table":
        html_body = item.html or (_single_cell_table(item.body) if item.body else None)
        cells = table_cells(html_body) if html_body else []
        blocks.append(
            Block(
                kind="table",
                page_number=item.page_number,
                bbox=bbox,
                html=html_body,
                cells=cells,
                detector="mineru",
                caption=caption,
                label=label,
                text=item.body,
            )
        )
    elif item.kind == "figure":
        # A figure's own text (a code listing, chart data) goes in a text block: the figure row holds the caption.
        blocks.append(
            Block(
                kind="figure",
                page_number=item.page_number,
                bbox=bbox,
                caption=caption,
                label=label,
                detector="mineru",
                image_kind=image_kind,
                html=item.html,
            )
        )
        if item.body:
            blocks.append(Block(kind="text", page_number=item.page_number, bbox=bbox, text=item.body))
    elif item.body:  # an unlabelled code listing is prose to us
        blocks.append(Block(kind="text", page_number=item.page_number, bbox=bbox, text=item.body))
    blocks.extend(Block(kind="footnote", page_number=item.page_number, bbox=bbox, text=text) for text in item.footnotes)
    return blocks


def _single_cell_table(text: str) -> str:
    """A boxed block of text the paper calls a table (prompt templates): one cell, lines kept."""
    return "<table><tr><td>" + html.escape(text).replace("\n", "<br>") + "</td></tr></table>"


# ---------------------------------------------------------------------------------------------------- table cells


class _CellParser(HTMLParser):
    """Cells of an HTML table with their grid positions; rowspans reserve the cells below them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[TableCell] = []
        self._occupied: set[tuple[int, int]] = set()
        self._row = -1
        self._col = 0
        self._in_head = False
        self._open: TableCell | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "thead":
            self._in_head = True
        elif tag == "tr":
            self._close_cell()
            self._row += 1
            self._col = 0
        elif tag in {"td", "th"}:
            self._close_cell()
            if self._row < 0:
                self._row = 0
            while (self._row, self._col) in self._occupied:
                self._col += 1
            values = dict(attrs)
            rowspan, colspan = _span(values.get("rowspan")), _span(values.get("colspan"))
            self._open = TableCell(
                row=self._row,
                col=self._col,
                text="",
                rowspan=rowspan,
                colspan=colspan,
                is_header=tag == "th" or self._in_head or self._row == 0,
            )
            for r in range(self._row, self._row + rowspan):
                for c in range(self._col, self._col + colspan):
                    self._occupied.add((r, c))
            self._col += colspan
        elif tag == "br":
            self._text.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in {"td", "th", "tr", "table"}:
            self._close_cell()
        if tag == "thead":
            self._in_head = False

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def _close_cell(self) -> None:
        if self._open is not None:
            self._open.text = " ".join("".join(self._text).split())
            self.cells.append(self._open)
        self._open = None
        self._text = []


def _span(value: str | None) -> int:
    return int(value) if value and value.strip().isdigit() and int(value) > 0 else 1


def table_cells(table_html: str) -> list[TableCell]:
    """Cells of MinerU's table HTML; the first row and ``<th>``/``<thead>`` cells are headers. Inline math in a
    cell is read as the text it prints (:func:`paperlake.parsing.inline_math.plain_text`)."""
    parser = _CellParser()
    parser.feed(table_html)
    parser.close()
    parser._close_cell()
    for cell in parser.cells:
        cell.text = plain_text(cell.text)
    return parser.cells


# ---------------------------------------------------------------------------------------------------- equations


def split_equation(raw: str) -> tuple[str, str | None]:
    """MinerU's display-equation text → (LaTeX without ``$$`` or a number, number like ``"(3)"``)."""
    latex = raw.strip()
    if latex.startswith("$$") and latex.endswith("$$") and len(latex) >= 4:
        latex = latex[2:-2]
    latex = latex.strip()
    number = None
    tag = _TAG.search(latex)
    if tag:
        number = f"({' '.join(tag.group(1).split())})"
        latex = (latex[: tag.start()] + latex[tag.end() :]).strip()
    else:
        trailing = _TRAILING_NUMBER.search(latex)
        if trailing and trailing.start() > 0:
            number = f"({''.join(trailing.group(1).split())})"
            latex = latex[: trailing.start()].strip()
    return latex, number


# ---------------------------------------------------------------------------------------------------- reader


class _Reader:
    """One paper: content-list items → blocks in PDF points, with the PDF at hand for text and geometry."""

    def __init__(self, paper_key: str, document: pymupdf.Document, pages_info: list[dict[str, Any]]) -> None:
        self.paper_key = paper_key
        self.document = document
        self.page_sizes = [self._page_size(i, info) for i, info in enumerate(pages_info)]
        self.caption_boxes = [self._caption_boxes(info) for info in pages_info]
        self.geometry_usable: dict[int, bool] = {}
        self._words: dict[int, list[tuple]] = {}

    def _page_size(self, index: int, info: dict[str, Any]) -> tuple[float, float]:
        width, height = (float(v) for v in info["page_size"])
        if width <= 0 or height <= 0:
            raise ParseError(self.paper_key, STAGE, f"page {index + 1} has no size in the layout JSON")
        return width, height

    @staticmethod
    def _caption_boxes(info: dict[str, Any]) -> list[dict[str, list[tuple[float, float, float, float]]]]:
        """Per float block of the page, in order: the boxes (points) of its caption and footnote lines."""
        boxes = []
        for block in info.get("para_blocks") or []:
            if block.get("type") in _FLOAT_TYPES:
                parts: dict[str, list[tuple[float, float, float, float]]] = {"caption": [], "footnote": []}
                for sub in block.get("blocks") or []:
                    part = str(sub.get("type", "")).rpartition("_")[2]
                    if part in parts:
                        parts[part].append(tuple(float(v) for v in sub["bbox"]))
                boxes.append(parts)
        return boxes

    # -- geometry

    def to_points(self, page_index: int, bbox: list[float]) -> tuple[float, float, float, float]:
        width, height = self.page_sizes[page_index]
        rect = self.document[page_index].rect
        x0, y0, x1, y1 = (float(v) for v in bbox)
        points = (
            x0 * width / _NORMALISED_SCALE,
            y0 * height / _NORMALISED_SCALE,
            x1 * width / _NORMALISED_SCALE,
            y1 * height / _NORMALISED_SCALE,
        )
        return (
            min(max(points[0], 0.0), rect.width),
            min(max(points[1], 0.0), rect.height),
            min(max(points[2], 0.0), rect.width),
            min(max(points[3], 0.0), rect.height),
        )

    def words(self, page_index: int) -> list[tuple]:
        if page_index not in self._words:
            self._words[page_index] = self.document[page_index].get_text("words")
        return self._words[page_index]

    def text_in(self, page_index: int, bbox: tuple[float, float, float, float]) -> str:
        """The PDF's words whose centre is inside ``bbox``, in the PDF's order (get_textbox is 50x slower)."""
        x0, y0, x1, y1 = bbox
        return " ".join(
            word
            for wx0, wy0, wx1, wy1, word, *_ in self.words(page_index)
            if x0 <= (wx0 + wx1) / 2 <= x1 and y0 <= (wy0 + wy1) / 2 <= y1
        )

    # -- the whole paper

    def read(self, content: list[dict[str, Any]]) -> DocumentLayout:
        pages = [
            PageInfo(page_number=i + 1, width=page.rect.width, height=page.rect.height, text=page.get_text())
            for i, page in enumerate(self.document)
        ]
        for item in content:
            page_index = item.get("page_idx")
            if not isinstance(page_index, int) or not 0 <= page_index < len(pages):
                raise ParseError(
                    self.paper_key,
                    STAGE,
                    f"a {item.get('type')!r} block is on page index {page_index!r}; the PDF has {len(pages)} pages",
                )
        floats_per_page: dict[int, int] = {}
        for item in content:
            if item.get("type") in _FLOAT_TYPES:
                floats_per_page[item["page_idx"]] = floats_per_page.get(item["page_idx"], 0) + 1
        # Caption boxes are taken from the middle JSON only where its floats line up one to one with the list's.
        self.geometry_usable = {
            index: len(self.caption_boxes[index]) == count for index, count in floats_per_page.items()
        }
        entries = _adopt_orphan_captions(self._entries(content))
        self._resolve_floats(entries)
        blocks: list[Block] = []
        for entry in entries:
            if isinstance(entry, Block):
                blocks.append(entry)
            elif entry.merged_into is None:
                members = [other for other in entries if isinstance(other, _Float) and other.merged_into is entry]
                image_kind = self._image_kind(entry, members) if entry.kind == "figure" else None
                blocks.extend(_float_blocks(entry, members, image_kind))
        blocks = _merge_split_references(blocks)
        for block in blocks:
            if block.kind == "table":
                self._keep_printed_words(block)
        self._add_figure_text(blocks)
        title, authors, abstract = self._front_matter(blocks)
        layout = DocumentLayout(pages=pages, blocks=blocks, title=title, authors=authors, abstract=abstract)
        layout.front_matter = front_matter_row(self.document[0], authors) if len(self.document) else {}
        return layout

    def _keep_printed_words(self, block: Block) -> None:
        """A table whose MinerU grid lost what the page prints inside its box gets our grid of that box instead.

        MinerU's table model sometimes drops cells, merges a column's numbers into one cell or shifts a block of rows
        by a column (a 50-row table's row labels left empty), and leaves an image-only table (a prompt template) with
        no cells at all; its HTML then holds values the PDF does not put together, and words it does not hold are
        findable nowhere but in the page text. The check is on the text layer inside the table's box: a grid is lost
        when it holds under :data:`_MIN_WORDS_KEPT` of those words, or, with :data:`_MIN_NUMBERS` numbers or more, under
        :data:`_MIN_NUMBERS_KEPT` of the numbers. Then the grid is read from the same box the way the PyMuPDF backend
        reads its own tables (:func:`paperlake.parsing.pymupdf.grid_in_box`); MinerU still found the table, its box and
        caption, so the detector stays ``mineru``. A grid that only writes the printed text differently (LaTeX for a
        symbol, spaces inside ``LLaMA2-7B``) keeps far more than these bars and stays MinerU's."""
        page = self.document[block.page_number - 1]
        printed = unicodedata.normalize("NFKC", " ".join(word[4] for word in box_words(page, block.bbox)))
        held = unicodedata.normalize("NFKC", " ".join(cell.text for cell in block.cells))
        words_kept = _share_kept(_WORD.findall(printed.lower()), _WORD.findall(held.lower()))
        numbers = _NUMBER.findall(printed)
        numbers_kept = _share_kept(numbers, _NUMBER.findall(held))
        if words_kept >= _MIN_WORDS_KEPT and (len(numbers) < _MIN_NUMBERS or numbers_kept >= _MIN_NUMBERS_KEPT):
            return
        cells = grid_in_box(page, block.bbox)
        if cells:
            block.cells, block.html = cells, None

    def _add_figure_text(self, blocks: list[Block]) -> None:
        """A figure's own words from the PDF's text layer (MinerU keeps only an image of it), tables on the same page
        left out."""
        tables: dict[int, list[tuple]] = {}
        for block in blocks:
            if block.kind == "table":
                tables.setdefault(block.page_number, []).append(block.bbox)
        for block in blocks:
            if block.kind == "figure":
                lines = word_lines(self.words(block.page_number - 1))
                block.figure_text = text_inside(lines, block.bbox, tables.get(block.page_number, []))

    def _entries(self, content: list[dict[str, Any]]) -> list[Block | _Float]:
        entries: list[Block | _Float] = []
        float_index_on_page: dict[int, int] = {}
        state = _FrontMatterState()
        for item in content:
            kind = item.get("type")
            page_index = item["page_idx"]
            page_number = page_index + 1
            bbox = self.to_points(page_index, item["bbox"])
            if kind in _FLOAT_TYPES:
                position = float_index_on_page.get(page_index, 0)
                float_index_on_page[page_index] = position + 1
                entries.append(self._float(item, page_index, bbox, position))
            elif kind == "text":
                block = self._text_block(item, page_number, bbox, state)
                if block is not None:
                    entries.append(block)
            elif kind == "equation":
                entries.append(self._equation(item, page_index, bbox))
            elif kind == "list":
                entries.extend(self._list_blocks(item, page_number, bbox))
            elif kind == "ref_text":
                text = _clean_text(item.get("text"))
                if text:
                    entries.append(Block(kind="reference", page_number=page_number, bbox=bbox, text=text))
            elif kind == "header" and _NUMBERED_SUBHEADING.match(_clean_text(item.get("text"))):
                # MinerU sometimes takes a subsection heading at the top of a page for a running head.
                heading = {**item, "text_level": 2}
                entries.append(self._text_block(heading, page_number, bbox, state))
            elif kind in {"page_number", "header", "footer", "page_header", "page_footer"}:
                text = _clean_text(item.get("text"))
                if text:
                    top_half = bbox[1] < self.document[page_index].rect.height / 2
                    entries.append(
                        Block(
                            kind="page_header" if top_half else "page_footer",
                            page_number=page_number,
                            bbox=bbox,
                            text=text,
                        )
                    )
            elif kind in {"page_footnote", "footnote"}:
                text = _clean_text(item.get("text"))
                if text:
                    entries.append(Block(kind="footnote", page_number=page_number, bbox=bbox, text=text))
            else:
                text = _clean_text(item.get("text"))
                if text:
                    entries.append(Block(kind="text", page_number=page_number, bbox=bbox, text=text))
        return entries

    def _resolve_floats(self, entries: list[Block | _Float]) -> None:
        by_page: dict[int, list[_Float]] = {}
        for entry in entries:
            if isinstance(entry, _Float):
                by_page.setdefault(entry.page_number, []).append(entry)
        for floats in by_page.values():
            _resolve_page_floats(floats)

    # -- items

    def _float(self, item: dict[str, Any], page_index: int, bbox: tuple, position: int) -> _Float:
        mineru_type = item["type"]
        result = _Float(kind=_FLOAT_TYPES[mineru_type], page_number=page_index + 1, bbox=bbox)
        texts = {
            part: [str(text) for text in item.get(f"{mineru_type}_{part}") or []] for part in ("caption", "footnote")
        }
        boxes: dict[str, list[Any]] = {part: [None] * len(texts[part]) for part in texts}
        if self.geometry_usable.get(page_index):
            for part, page_boxes in self.caption_boxes[page_index][position].items():
                if len(page_boxes) == len(texts[part]):
                    boxes[part] = [self._clip(page_index, box) for box in page_boxes]
        # MinerU files some captions as footnotes ("Table 6: ..." under the table): a label makes it a caption.
        captions = list(zip(texts["caption"], boxes["caption"]))
        footnotes = []
        for text, box in zip(texts["footnote"], boxes["footnote"]):
            (captions if _CAPTION_LABEL.match(_clean_text(text)) else footnotes).append((text, box))
        _parse_captions(captions, result)
        result.footnotes = [text for text in (_clean_text(text) for text, _ in footnotes) if text]
        if mineru_type == "table":
            result.html = (item.get("table_body") or "").strip() or None
        elif mineru_type == "chart":
            result.body = _clean_text(item.get("content"))
        elif mineru_type == "code":
            result.body = _code_text(item.get("code_body") or "")
        return result

    def _clip(self, page_index: int, box: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
        rect = self.document[page_index].rect
        return (max(box[0], 0.0), max(box[1], 0.0), min(box[2], rect.width), min(box[3], rect.height))

    def _text_block(
        self, item: dict[str, Any], page_number: int, bbox: tuple, state: _FrontMatterState
    ) -> Block | None:
        text = _clean_text(item.get("text"))
        if not text:
            return None
        if item.get("text_level"):
            if not state.title_seen and page_number == 1 and item.get("text_level") == 1:
                state.title_seen = True
                return Block(kind="title", page_number=page_number, bbox=bbox, text=text)
            state.in_front = False
            state.in_abstract = _letters(text) == "abstract"
            state.in_references = _letters(text) in _BIBLIOGRAPHY_TITLES
            return Block(kind="section_header", page_number=page_number, bbox=bbox, text=text)
        if state.in_abstract:
            return Block(kind="abstract", page_number=page_number, bbox=bbox, text=text)
        if state.in_references:
            # MinerU reads most bibliographies as lists, but a page of long entries often as paragraphs.
            return Block(kind="reference", page_number=page_number, bbox=bbox, text=text)
        if state.in_front and page_number == 1:
            if state.title_seen and not state.abstract_seen and _INLINE_ABSTRACT.match(text):
                state.in_front = False
                state.abstract_seen = True
                return Block(kind="abstract", page_number=page_number, bbox=bbox, text=_INLINE_ABSTRACT.sub("", text))
            if state.title_seen:
                return Block(kind="author", page_number=page_number, bbox=bbox, text=text)
        return Block(kind="text", page_number=page_number, bbox=bbox, text=text)

    def _equation(self, item: dict[str, Any], page_index: int, bbox: tuple) -> Block:
        raw = str(item.get("text") or "")
        pdf_text = self.text_in(page_index, bbox)
        if item.get("text_format", "latex") != "latex":
            return Block(
                kind="equation", page_number=page_index + 1, bbox=bbox, text=pdf_text or raw.strip(), detector="mineru"
            )
        latex, number = split_equation(raw)
        return Block(
            kind="equation",
            page_number=page_index + 1,
            bbox=bbox,
            text=pdf_text,
            latex=latex or None,
            detector="mineru",
            equation_number=number or self._number_beside(page_index, bbox),
        )

    def _number_beside(self, page_index: int, bbox: tuple) -> str | None:
        """An equation number MinerU left out of the LaTeX: a "(n)" word on the equation's line, right of centre."""
        page_width = self.document[page_index].rect.width
        right_limit = page_width / 2 + 8 if bbox[2] < page_width / 2 else page_width
        centre_x = (bbox[0] + bbox[2]) / 2
        found = None
        for x0, y0, x1, y1, word, *_ in self.words(page_index):
            middle_y = (y0 + y1) / 2
            if (
                bbox[1] <= middle_y <= bbox[3]
                and x0 >= centre_x
                and x1 <= right_limit
                and _EQUATION_NUMBER_WORD.match(word)
            ):
                found = word
        return found

    def _list_blocks(self, item: dict[str, Any], page_number: int, bbox: tuple) -> list[Block]:
        kind = "reference" if item.get("sub_type") == "ref_text" else "list_item"
        return [
            Block(kind=kind, page_number=page_number, bbox=bbox, text=text)
            for text in map(_clean_text, item.get("list_items") or [])
            if text
        ]

    def _image_kind(self, item: _Float, members: list[_Float]) -> str:
        """raster when embedded images cover most of the figure, vector when none does, mixed in between."""
        bbox = pymupdf.Rect(_union([item.bbox, *(m.bbox for m in members)]))
        if bbox.is_empty:
            return "vector"
        covered = 0.0
        for info in self.document[item.page_number - 1].get_image_info():
            covered += abs(pymupdf.Rect(info["bbox"]) & bbox)
        share = covered / abs(bbox)
        return "raster" if share >= 0.5 else "mixed" if share > 0.05 else "vector"

    # -- title, authors, abstract

    def _front_matter(self, blocks: list[Block]) -> tuple[str | None, list[str], str | None]:
        title_block = next((b for b in blocks if b.kind == "title"), None)
        title = _MARKERS.sub("", title_block.text).strip() if title_block else None
        author_blocks = [b for b in blocks if b.kind == "author"]
        for block in author_blocks:
            block.text = " ".join(_MARKERS.sub(" ", block.text).split())
        authors = self._authors_from_pdf(author_blocks) or _authors_from_text(author_blocks)
        abstract = "\n".join(b.text for b in blocks if b.kind == "abstract") or None
        return title, authors, abstract

    def _authors_from_pdf(self, author_blocks: list[Block]) -> list[str]:
        """Names are the largest bold spans between the title and the abstract (ACL and most templates)."""
        if not author_blocks:
            return []
        clip = pymupdf.Rect(_union([b.bbox for b in author_blocks])) + (-2, -2, 2, 2)
        spans = [
            span
            for block in self.document[0].get_text("dict", clip=clip)["blocks"]
            for line in block.get("lines", [])
            for span in line["spans"]
            if span["text"].strip() and span["flags"] & pymupdf.TEXT_FONT_BOLD
        ]
        if not spans:
            return []
        name_size = max(span["size"] for span in spans) - 1.0
        names: list[str] = []
        for span in spans:
            if span["size"] < name_size:
                continue
            for piece in _NAME_SEPARATORS.split(span["text"]):
                name = " ".join(piece.strip(" *∗†‡§¶").split())
                if re.search(r"[^\W\d_]{2}", name) and not _AFFILIATION_WORDS.search(name) and "@" not in name:
                    names.append(name)
        return names


@dataclass
class _FrontMatterState:
    title_seen: bool = False
    in_front: bool = True
    in_abstract: bool = False
    in_references: bool = False
    abstract_seen: bool = False


def _authors_from_text(author_blocks: list[Block]) -> list[str]:
    """Fallback without bold fonts: comma/"and" separated names from the lines that are neither mail nor address."""
    names: list[str] = []
    for block in author_blocks:
        if "@" in block.text or _AFFILIATION_WORDS.search(block.text):
            continue
        for piece in _NAME_SEPARATORS.split(block.text):
            name = " ".join(piece.strip(" *∗†‡§¶0-9").split())
            words = name.split()
            if 2 <= len(words) <= 4 and all(word[0].isupper() for word in words):
                names.append(name)
    return names


def _continues(entry: str, piece: str) -> bool:
    """Whether ``piece`` is the rest of ``entry``, cut where a column or page broke it."""
    entry = entry.rstrip()
    if entry.endswith((",", ";", "-", "–", " and", "&")) or piece[:1].islower():
        return True
    unfinished = not entry.endswith((".", "?", "!"))
    return unfinished and (_YEAR.search(entry) is None or _YEAR.search(piece) is None)


def _share_kept(printed: list[str], held: list[str]) -> float:
    """The share of ``printed`` (with repeats) that ``held`` also has; 1.0 when nothing is printed."""
    if not printed:
        return 1.0
    have = Counter(held)
    return sum(min(count, have[token]) for token, count in Counter(printed).items()) / len(printed)


def _merge_split_references(blocks: list[Block]) -> list[Block]:
    """MinerU cuts an entry where a column or page breaks it (one list item ends mid-entry); glue the pieces."""
    merged: list[Block] = []
    last: Block | None = None
    for block in blocks:
        if block.kind == "section_header":
            last = None
        elif block.kind == "reference":
            if last is not None and _continues(last.text, block.text):
                last.text = f"{last.text} {block.text}"
                continue
            last = block
        merged.append(block)
    return merged


# ---------------------------------------------------------------------------------------------------- text helpers


def _clean_text(value: Any) -> str:
    """MinerU's text with ``<sup>``/``<sub>`` as LaTeX-style ``^{}``/``_{}`` and whitespace collapsed per line."""
    if not value:
        return ""
    text = _SUP_SUB.sub(lambda m: f"{'^' if m.group(1) == 'sup' else '_'}{{{m.group(2).strip()}}}", str(value))
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return "\n".join(line for line in lines if line).strip()


def _code_text(body: str) -> str:
    lines = [line.rstrip() for line in str(body).splitlines()]
    if lines and lines[0].lstrip().startswith("```"):
        lines = lines[1:]
    if lines and lines[-1].strip() == "```":
        lines = lines[:-1]
    return "\n".join(lines).strip()


def _letters(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())


def _overlap_x(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    return min(a[2], b[2]) - max(a[0], b[0])
