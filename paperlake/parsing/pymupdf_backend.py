"""The default parser: PyMuPDF's glyphs, drawings and image boxes read with layout rules, no models.

Speed is the point (the whole corpus must parse several times faster than MinerU), so each page is read once with
``get_text("dict")`` plus its drawings and image boxes, and everything else — columns, reading order, headings,
captions, float regions, display equations, bibliography entries — is inferred from fonts and geometry.
``find_tables`` only runs inside table regions found from a "Table N" caption, clipped to that region.

Glyph-level LaTeX reconstruction happens later and elsewhere: :func:`equation_spans` returns the raw glyph spans
(with per-character boxes, fonts and origins) inside an equation's bbox, so that work reads the same PDF again by
page number and bbox instead of re-running this parser.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pymupdf

from paperlake.inbox import PaperSource
from paperlake.parsing.assemble import assemble
from paperlake.parsing.blocks import Block, BlockKind, DocumentLayout, PageInfo, TableCell
from paperlake.parsing.errors import ParseError
from paperlake.views import ParsedPaper

PARSER_VERSION = "pymupdf-5"
BACKEND = "pymupdf"

# get_text("dict") without image bytes: image boxes come from get_image_info, which is several times cheaper.
_TEXT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES
_MIN_TEXT_CHARS = 50          # fewer characters than this on the first pages: a scan without a text layer
_TEXT_CHECK_PAGES = 3
_BOTTOM_MARGIN_SHARE = 0.925  # below this share of the page height: page numbers and proceedings footers
_TOP_MARGIN_SHARE = 0.06
_FLOAT_GAP = 20.0             # points: the widest gap between two parts of one figure or table
_CAPTION_GAP = 26.0           # points: the widest gap between a caption and its figure or table
_MIN_FIGURE_SIDE = 40.0       # an uncaptioned image smaller than this is an icon, not a figure
_PANEL_GAP = 4.0              # points of white space that separate two plots of one figure
_FINE_PANEL_GAP = 1.5         # ... or that separate plots packed tightly in a grid
_MIN_PLOT_SIDE = 70.0         # a plot cut at the fine gap must be at least this big
_MIN_PLOT_AREA_SIDE = 30.0    # a clip area smaller than this is a bar or a label, not a plot's axes
_MIN_PLOT_AREA_SHARE = 0.25   # the plot areas of a figure of plots cover at least this share of it
_FACET_GAP = 8.0              # plot areas closer than this are facets of one chart sharing its axes
_SHARED_REACH = 0.15          # an element reaching this share across two plots' extents belongs to both

_BOLD_FONT = re.compile(r"bold|medi|semibold|demi|black|heavy", re.I)
_MATH_FONT = re.compile(
    r"^(?:[A-Z]{6}\+)?(?:cmmi|cmsy|cmex|cmbsy|cmmib|msbm|msam|eufm|rsfs|stmary|esint|txsy|txmi|txex|newtxmi|"
    r"newtxbmi|ntxmi|ntxsy|stix.*math|.*math|symbol|mnsymbol|lmmath|cambriamath)",
    re.I,
)
# Greek, operators, arrows, relations and the Mathematical Alphanumeric Symbols block (𝑥, 𝜽, …).
_MATH_CHARS = re.compile(
    "[=<>+±×÷¬|\u0391-\u03c9\u2190-\u21ff\u2200-\u22ff\u27c0-\u27ef\u2980-\u2aff\U0001d400-\U0001d7ff]"
)
_CAPTION = re.compile(r"^(Table|Tab\.|Figure|Fig\.)\s*([A-Z]?\d+)\s*[:.|]\s*")
_SUBCAPTION = re.compile(r"^\((?:[a-z]|[ivx]{1,4})\)\s")
_EQUATION_NUMBER = re.compile(r"^\(\s*((?:[A-Z]\.)?\d+[a-z]?(?:\.\d+)?)\s*\)$")
_ALGORITHM_STEP = re.compile(r"^\d{1,2}:\s")  # numbered pseudo-code lines are not display equations
_DIGIT_HEADING = re.compile(r"^(\d+(?:\.\d+){0,3})\.?\s+(\S.*)$")
_LETTER_HEADING = re.compile(r"^([A-Z](?:\.\d+){0,3})\.?\s+(\S.*)$")
_UNNUMBERED_SECTIONS = frozenset(
    {"abstract", "introduction", "references", "bibliography", "acknowledgments", "acknowledgements",
     "acknowledgment", "acknowledgement", "limitations", "limitation", "ethicsstatement", "ethicalconsiderations",
     "ethicsconsiderations", "broaderimpact", "broaderimpacts", "conclusion", "conclusions", "appendix",
     "appendices", "relatedwork", "supplementarymaterial", "impactstatement", "ethics"}
)
_REFERENCE_HEADINGS = frozenset({"references", "bibliography", "referencesandnotes"})
_LIST_BULLET = re.compile(r"^(?:[•◦▪‣∙·●○■□–—\-*]|\(?\d{1,2}[.)]|\(?[a-z][.)]|\([ivx]+\))\s+")
_SCRIPT_MARKS = re.compile(r"[\d*∗†‡§¶#♠♣♥♦⋆★✝,]+")
_AUTHOR_SEPARATORS = re.compile(r"\s*(?:,|;|\band\b|&|\|)\s*")
_EMAIL_OR_URL = re.compile(r"@|https?://|www\.|\.com\b|\.edu\b|\.org\b")

Box = tuple[float, float, float, float]
Column = Literal["left", "right", "full"]


# ------------------------------------------------------------------------------------------------ public API


def parse(
    source: PaperSource, *, parser_version: str = PARSER_VERSION, max_chunk_tokens: int = 512
) -> ParsedPaper:
    """Parse one inbox PDF into the lake's views."""
    layout = read_layout(source.pdf_path, paper_key=source.paper_key)
    return assemble(source, layout, BACKEND, parser_version=parser_version, max_chunk_tokens=max_chunk_tokens)


def read_layout(pdf_path: str | Path, *, paper_key: str | None = None) -> DocumentLayout:
    """Read a PDF into pages and reading-order blocks; any failure is a :class:`ParseError` naming the paper."""
    key = paper_key or Path(pdf_path).name
    document = _open_checked(Path(pdf_path), key)
    with document:
        stage = "read pages"
        try:
            pages = [_read_page(page) for page in document]
            _check_text_layer(pages, key)
            stage = "layout"
            style = _DocumentStyle.measure(pages)
            analysed = [_analyse_page(page, style.for_page(page.number)) for page in pages]
            stage = "tables"
            for page, analysis in zip(document, analysed):
                _fill_table_cells(page, analysis)
            stage = "structure"
            layout = _build_layout(pages, analysed, style)
            stage = "latex"
            _add_glyph_latex(document, layout)
            return layout
        except ParseError:
            raise
        except Exception as error:  # a malformed page must name the paper, not crash the run
            raise ParseError(key, stage, f"{type(error).__name__}: {error}") from error


def _add_glyph_latex(document: pymupdf.Document, layout: DocumentLayout) -> None:
    """LaTeX for every display equation, rebuilt from its glyphs and drawings (see paperlake.latex_glyphs)."""
    from paperlake.latex_glyphs import reconstruct_latex

    for block in layout.blocks:
        if block.kind != "equation":
            continue
        rebuilt = reconstruct_latex(document[block.page_number - 1], block.bbox)
        if rebuilt.latex:
            block.latex = rebuilt.latex
            block.equation_number = block.equation_number or rebuilt.equation_number


def equation_spans(page: pymupdf.Page, bbox: Box) -> list[dict[str, Any]]:
    """The glyph spans of a display equation, each with ``chars`` (per-glyph bbox, origin, character), font,
    size and flags, in PDF order: the input for rebuilding LaTeX from glyphs. ``page`` is
    ``document[block.page_number - 1]`` and ``bbox`` the equation block's ``(x0, y0, x1, y1)``."""
    raw = page.get_text("rawdict", flags=_TEXT_FLAGS, clip=pymupdf.Rect(bbox))
    return [span for block in raw["blocks"] for line in block.get("lines", []) for span in line["spans"]]


# ------------------------------------------------------------------------------------------------ opening


def _open_checked(path: Path, key: str) -> pymupdf.Document:
    if not path.is_file():
        raise ParseError(key, "open", f"{path} does not exist")
    try:
        document = pymupdf.open(path, filetype="pdf")
    except Exception as error:  # PyMuPDF raises FileDataError or RuntimeError for anything it cannot read
        raise ParseError(key, "open", f"not a readable PDF ({error})") from error
    if document.needs_pass:
        document.close()
        raise ParseError(key, "open", "the PDF is encrypted and needs a password")
    if document.page_count == 0:
        document.close()
        raise ParseError(key, "open", "the PDF has no pages")
    return document


def _check_text_layer(pages: list[_PageContent], key: str) -> None:
    chars = sum(len(line.text.strip()) for page in pages[:_TEXT_CHECK_PAGES] for line in page.raw_lines)
    if chars < _MIN_TEXT_CHARS:
        raise ParseError(
            key, "text layer",
            f"only {chars} characters of text on the first {min(len(pages), _TEXT_CHECK_PAGES)} pages: "
            "a scanned PDF without a text layer needs OCR (use the MinerU backend)",
        )


# ------------------------------------------------------------------------------------------------ raw page content


@dataclass
class _Line:
    """A line of text: PyMuPDF's own line, or several of them on one baseline merged into a visual line."""

    bbox: Box
    spans: list[dict[str, Any]]
    text: str
    size: float
    bold_share: float
    math_share: float
    widest_gap: float = 0.0  # between the PyMuPDF lines merged into this one: wide in table rows, small in prose
    column: Column = "full"
    role: str = ""  # set by page analysis: body, caption, equation, footer, header; "" for other free text

    @property
    def width(self) -> float:
        return self.bbox[2] - self.bbox[0]

    @property
    def height(self) -> float:
        return self.bbox[3] - self.bbox[1]


@dataclass
class _PageContent:
    number: int
    width: float
    height: float
    raw_lines: list[_Line]
    rotated_text: list[Box]
    images: list[Box]
    drawings: list[tuple[Box, bool]]  # (rect, is a visible box outline or fill)
    clips: list[Box]  # the areas drawing was clipped to: a plot's axes, an included graphic's frame


def _read_page(page: pymupdf.Page) -> _PageContent:
    width, height = page.rect.width, page.rect.height
    raw_lines: list[_Line] = []
    rotated: list[Box] = []
    for block in page.get_text("dict", flags=_TEXT_FLAGS)["blocks"]:
        for line in block.get("lines", []):
            spans = [s for s in line["spans"] if s["text"].strip()]
            if not spans:
                continue
            if abs(line["dir"][1]) > 0.1:
                rotated.append(tuple(line["bbox"]))
                continue
            raw_lines += [_line_from_spans(part) for part in _split_stacked(spans)]
    images = [tuple(info["bbox"]) for info in page.get_image_info() if _inside_page(info["bbox"], width, height)]
    drawings = []
    page_rect = page.rect
    clips: dict[int, pymupdf.Rect] = {}
    clip_areas: set[Box] = set()
    for path in page.get_drawings(extended=True):  # extended: clip paths, since plots overdraw and clip
        level = path.get("level", 0)
        for deeper in [lvl for lvl in clips if lvl >= level]:
            del clips[deeper]  # left the group that clip belonged to
        if path["type"] == "clip":
            clips[level] = pymupdf.Rect(path["scissor"]) & clips.get(level - 1, page_rect)
            if clips[level].width >= _MIN_PLOT_AREA_SIDE and clips[level].height >= _MIN_PLOT_AREA_SIDE:
                clip_areas.add(tuple(round(v, 1) for v in clips[level]))
            continue
        if path["type"] not in {"f", "s", "fs"}:
            continue
        rect = pymupdf.Rect(path["rect"]) & clips.get(level - 1, page_rect)
        if rect.x1 < rect.x0 or rect.y1 < rect.y0 or (rect.x1 == rect.x0 and rect.y1 == rect.y0):
            continue  # clipped away
        if rect.width >= 0.9 * width and rect.height >= 0.9 * height:
            continue  # page background
        fill = path.get("fill")
        invisible = path.get("color") is None and (fill is None or tuple(fill) == (1.0, 1.0, 1.0))
        if invisible:
            continue
        drawings.append(((rect.x0, rect.y0, rect.x1, rect.y1), rect.width > 2 and rect.height > 2))
    return _PageContent(page.number + 1, width, height, raw_lines, rotated, images, drawings, sorted(clip_areas))


def _split_stacked(spans: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """PyMuPDF sometimes puts a sentence and the display equation under it into one line; spans that share no
    height with the line so far start a line of their own."""
    parts: list[list[dict[str, Any]]] = []
    for span in spans:
        y0, y1 = span["bbox"][1], span["bbox"][3]
        home = next(
            (part for part in parts
             if min(max(s["bbox"][3] for s in part), y1) - max(min(s["bbox"][1] for s in part), y0) > 0),
            None,
        )
        if home is None:
            parts.append([span])
        else:
            home.append(span)
    return parts


def _inside_page(bbox: Any, width: float, height: float) -> bool:
    x0, y0, x1, y1 = bbox
    return x1 - x0 > 1 and y1 - y0 > 1 and x1 > 0 and y1 > 0 and x0 < width and y0 < height


def _is_bold(span: dict[str, Any]) -> bool:
    return bool(span["flags"] & pymupdf.TEXT_FONT_BOLD) or bool(_BOLD_FONT.search(span["font"]))


def _line_from_spans(spans: list[dict[str, Any]]) -> _Line:
    spans = sorted(spans, key=lambda s: s["bbox"][0])
    weights = [len(s["text"].strip()) for s in spans]
    main_size = max(zip(weights, [s["size"] for s in spans]))[1]
    body_spans = [(s, w) for s, w in zip(spans, weights) if s["size"] >= 0.8 * main_size]
    total = sum(w for _, w in body_spans) or 1
    bold = sum(w for s, w in body_spans if _is_bold(s)) / total
    math_chars = sum(
        len(s["text"].strip()) if _MATH_FONT.match(s["font"]) else len(_MATH_CHARS.findall(s["text"]))
        for s in spans
    )
    x0 = min(s["bbox"][0] for s in spans)
    y0 = min(s["bbox"][1] for s in spans)
    x1 = max(s["bbox"][2] for s in spans)
    y1 = max(s["bbox"][3] for s in spans)
    text = _join_spans(spans)
    return _Line((x0, y0, x1, y1), spans, text, main_size, bold, math_chars / max(sum(weights), 1))


def _join_spans(spans: list[dict[str, Any]]) -> str:
    """Span texts in x order, with a space where the glyphs leave a visible gap and the PDF wrote none."""
    parts: list[str] = []
    previous: dict[str, Any] | None = None
    for span in spans:
        text = span["text"]
        if previous is not None and parts and not parts[-1].endswith(" ") and not text.startswith(" "):
            if span["bbox"][0] - previous["bbox"][2] > 0.2 * span["size"]:
                parts.append(" ")
        parts.append(text)
        previous = span
    return " ".join("".join(parts).split())


# ------------------------------------------------------------------------------------------------ document style


@dataclass
class _DocumentStyle:
    """What holds for the whole paper (body font size, column edges) and, per page, the column gutter:
    a two-column paper can still have one-column pages (appendix tables, prompts)."""

    body_size: float
    gutter: float | None
    columns: dict[Column, tuple[float, float]]
    page_gutters: dict[int, float | None] = field(default_factory=dict)

    @classmethod
    def measure(cls, pages: list[_PageContent]) -> _DocumentStyle:
        sizes: Counter[float] = Counter()
        for page in pages[: max(4, min(10, len(pages) // 2))]:  # the main text, before long appendices
            for line in page.raw_lines:
                if len(line.text) >= 40:  # running text; table cells and labels are shorter
                    sizes[round(line.size * 2) / 2] += len(line.text)
        body_size = sizes.most_common(1)[0][0] if sizes else 10.0
        found = {page.number: _find_gutter(page, body_size) for page in pages}
        common = Counter(round(g) for g in found.values() if g is not None).most_common(1)
        gutter = float(common[0][0]) if common else None
        page_gutters = {
            page.number: found[page.number] if found[page.number] is not None
            else None if gutter is None or _is_single_column(page, body_size, gutter) else gutter
            for page in pages
        }
        columns = _column_edges(pages, body_size, page_gutters)
        return cls(body_size, gutter, columns, page_gutters)

    def for_page(self, page_number: int) -> _DocumentStyle:
        return replace(self, gutter=self.page_gutters.get(page_number, self.gutter))

    def column_of(self, bbox: Box) -> Column:
        if self.gutter is None:
            return "full"
        if bbox[2] <= self.gutter + 2:
            return "left"
        if bbox[0] >= self.gutter - 2:
            return "right"
        return "full"

    def is_body_size(self, size: float) -> bool:
        return abs(size - self.body_size) <= 1.0


def _text_lines(page: _PageContent, body_size: float) -> list[_Line]:
    """Lines of running text: body size or a little smaller (abstract, captions), never the larger front matter."""
    return [
        line for line in page.raw_lines if -1.5 <= line.size - body_size <= 0.5 and len(line.text) >= 15
    ]


def _find_gutter(page: _PageContent, body_size: float) -> float | None:
    """The x between two text columns that (almost) no column-wide text line crosses; None when the page has no
    such gap. Lines wider than a column (title, authors, a one-column page) say nothing about the gutter."""
    lines = [line for line in _text_lines(page, body_size) if line.width < 0.55 * page.width]
    lo, hi = int(page.width * 0.3), int(page.width * 0.7)
    middle = page.width / 2
    left = sum(1 for line in lines if line.bbox[2] < middle)
    right = sum(1 for line in lines if line.bbox[0] > middle)
    if left < 3 or right < 3:
        return None
    coverage = [0] * (hi - lo + 2)
    for line in lines:
        start, end = max(int(line.bbox[0]) - lo, 0), min(int(line.bbox[2]) - lo, hi - lo)
        if start <= end:
            coverage[start] += 1
            coverage[end + 1] -= 1
    running, counts = 0, []
    for delta in coverage[:-1]:
        running += delta
        counts.append(running)
    least = min(counts)
    if least > max(3, 0.08 * len(lines)):
        return None
    best_start = best_length = run_start = 0
    for i, count in enumerate(counts):
        if count == least:
            if i == 0 or counts[i - 1] != least:
                run_start = i
            if i - run_start + 1 > best_length:
                best_start, best_length = run_start, i - run_start + 1
    return lo + best_start + best_length / 2


def _is_single_column(page: _PageContent, body_size: float, gutter: float) -> bool:
    """A page without a clean gutter of its own is one-column if running text crosses the paper's gutter."""
    lines = _text_lines(page, body_size)
    return sum(1 for line in lines if line.bbox[0] < gutter - 5 and line.bbox[2] > gutter + 5) >= 5


def _column_edges(
    pages: list[_PageContent], body_size: float, page_gutters: dict[int, float | None]
) -> dict[Column, tuple[float, float]]:
    """Left and right edges of each column (and of the full text width) where running text starts and ends."""
    starts: dict[Column, Counter[int]] = {"left": Counter(), "right": Counter(), "full": Counter()}
    ends: dict[Column, Counter[int]] = {"left": Counter(), "right": Counter(), "full": Counter()}
    for page in pages:
        gutter = page_gutters.get(page.number)
        for line in page.raw_lines:
            if abs(line.size - body_size) > 1.0 or len(line.text) < 30:
                continue
            if gutter is None:
                side: Column = "full"
            elif line.bbox[2] <= gutter + 2:
                side = "left"
            elif line.bbox[0] >= gutter - 2:
                side = "right"
            else:
                continue
            starts[side][round(line.bbox[0])] += 1
            ends[side][round(line.bbox[2])] += 1
    edges: dict[Column, tuple[float, float]] = {}
    for side in ("left", "right", "full"):
        if starts[side]:
            # Of the most frequent line starts and ends, the outermost: first-line indents are frequent too.
            edges[side] = (float(min(starts[side].most_common(3))[0]), float(max(ends[side].most_common(3))[0]))
    if "left" in edges and "right" in edges:  # the text width spans both columns and any one-column page
        spans = [edges[side] for side in ("left", "right", "full") if side in edges]
        edges["full"] = (min(span[0] for span in spans), max(span[1] for span in spans))
    elif "full" not in edges:
        width = max(page.width for page in pages)
        edges["full"] = (0.1 * width, 0.9 * width)
    return edges


# ------------------------------------------------------------------------------------------------ page analysis


@dataclass
class _Region:
    """A figure or table: its box, caption lines and what was found inside; a figure of several plots also has
    one region per plot (its panels, each inside the figure's box)."""

    kind: Literal["table", "figure"]
    bbox: Box
    caption_lines: list[_Line]
    label: str | None
    lines: list[_Line] = field(default_factory=list)
    has_image: bool = False
    has_drawing: bool = False
    cells: list[TableCell] = field(default_factory=list)
    panels: list[_Region] = field(default_factory=list)

    @property
    def caption(self) -> str | None:
        return _join_lines(self.caption_lines) or None

    @property
    def outer_bbox(self) -> Box:
        return _union([self.bbox, *(line.bbox for line in self.caption_lines)])


@dataclass
class _Equation:
    bbox: Box
    lines: list[_Line]
    number_lines: list[_Line]
    number: str | None


@dataclass
class _PageAnalysis:
    content: _PageContent
    style: _DocumentStyle
    regions: list[_Region]
    free_lines: list[_Line]  # lines in no region or equation, in reading order
    order: list[Any]         # regions, equations and free lines, in reading order


def _analyse_page(page: _PageContent, style: _DocumentStyle) -> _PageAnalysis:
    lines = _visual_lines(page.raw_lines, style)
    _mark_margins(lines, page)
    _mark_body_text(lines, page, style)
    regions = _find_regions(lines, page, style)
    claimed = {id(line) for region in regions for line in (*region.lines, *region.caption_lines)}
    remaining = [line for line in lines if id(line) not in claimed]
    equations = _find_equations(remaining, page, style)
    claimed |= {id(line) for equation in equations for line in (*equation.lines, *equation.number_lines)}
    free = [line for line in lines if id(line) not in claimed]
    order = _reading_order([*regions, *equations, *free], style)
    free_in_order = [item for item in order if isinstance(item, _Line)]
    return _PageAnalysis(page, style, regions, free_in_order, order)


@dataclass
class _LineGroup:
    """PyMuPDF lines being merged into one visual line, with the running box that merging tests against."""

    parts: list[_Line]
    box: Box
    column: Column
    main_height: float


def _visual_lines(raw_lines: list[_Line], style: _DocumentStyle) -> list[_Line]:
    """Merge PyMuPDF lines that sit on one baseline ("3.1" + "Setup", table cells) or are scripts of a line."""
    groups: list[_LineGroup] = []
    for raw in sorted(raw_lines, key=lambda line: (line.bbox[1], line.bbox[0])):
        column = style.column_of(raw.bbox)
        target = None
        for group in reversed(groups):
            if group.box[3] < raw.bbox[1] - 30:
                break
            if _belongs_to(raw, column, group, style):
                target = group
                break
        if target is None:
            groups.append(_LineGroup([raw], raw.bbox, column, raw.height))
        else:
            target.parts.append(raw)
            target.box = _union([target.box, raw.bbox])
            target.column = style.column_of(target.box)
            target.main_height = max(target.main_height, raw.height)
    visual = []
    for group in groups:
        if len(group.parts) == 1:
            line = group.parts[0]
        else:
            parts = sorted(group.parts, key=lambda part: part.bbox[0])
            line = _line_from_spans([span for part in parts for span in part.spans])
            line.widest_gap = max(0.0, *(b.bbox[0] - a.bbox[2] for a, b in zip(parts, parts[1:])))
        line.column = group.column
        visual.append(line)
    return visual


def _belongs_to(raw: _Line, column: Column, group: _LineGroup, style: _DocumentStyle) -> bool:
    box = group.box
    if group.column != column and "full" not in (group.column, column):
        return False
    overlap = min(box[3], raw.bbox[3]) - max(box[1], raw.bbox[1])
    if overlap <= 0:
        return False
    is_script = raw.height < 0.8 * group.main_height and raw.bbox[1] >= box[1] - 1 and raw.bbox[3] <= box[3] + 1
    gap = max(raw.bbox[0] - box[2], box[0] - raw.bbox[2])
    if is_script:
        return gap <= raw.size
    return overlap >= 0.6 * min(raw.height, group.main_height) and -1 <= gap <= 1.2 * max(raw.size, 8)


def _mark_margins(lines: list[_Line], page: _PageContent) -> None:
    for line in lines:
        if line.bbox[1] >= _BOTTOM_MARGIN_SHARE * page.height:
            line.role = "footer"
        elif line.bbox[3] <= _TOP_MARGIN_SHARE * page.height:
            line.role = "header"


def _column_box(style: _DocumentStyle, column: Column) -> tuple[float, float]:
    return style.columns.get(column) or style.columns["full"]


def _mark_body_text(lines: list[_Line], page: _PageContent, style: _DocumentStyle) -> None:
    """Body text is what stops a float region from growing: full-width running prose at the body size, plus the
    short last lines of its paragraphs. Lines inside ruled tables, drawn boxes or images never are."""
    prose_ids = _flush_prose(lines, style)
    enclosures = _enclosures(page, [line for line in lines if id(line) in prose_ids])
    by_column: dict[Column, list[_Line]] = {}
    for line in lines:
        by_column.setdefault(line.column, []).append(line)
    for column, column_lines in by_column.items():
        left, _ = _column_box(style, column)
        previous: _Line | None = None
        for line in sorted(column_lines, key=lambda l: l.bbox[1]):
            if line.role or _inside_any(line.bbox, enclosures):
                previous = None
                continue
            continues = (
                _is_plain(line, style) and previous is not None and previous.role == "body"
                and abs(line.bbox[0] - left) <= 3 and 0 <= line.bbox[1] - previous.bbox[3] <= 0.6 * line.size
            )
            if id(line) in prose_ids or continues:
                line.role = "body"
            previous = line


def _flush_prose(lines: list[_Line], style: _DocumentStyle) -> set[int]:
    """Prose lines in runs that touch the column's left edge: a paragraph indents only its first line, while
    text inset on every line (a prompt or an example set in a frame) belongs to a figure."""
    by_column: dict[Column, list[_Line]] = {}
    for line in lines:
        if _is_prose(line, style):
            by_column.setdefault(line.column, []).append(line)
    flush: set[int] = set()
    for column, column_lines in by_column.items():
        left, _ = _column_box(style, column)
        run: list[_Line] = []
        for line in sorted(column_lines, key=lambda l: l.bbox[1]) + [None]:
            if line is not None and run and line.bbox[1] - run[-1].bbox[3] <= 0.8 * line.size:
                run.append(line)
                continue
            if any(abs(member.bbox[0] - left) <= 3 for member in run):
                flush |= {id(member) for member in run}
            run = [line] if line is not None else []
    return flush


def _is_plain(line: _Line, style: _DocumentStyle) -> bool:
    return style.is_body_size(line.size) and line.bold_share < 0.5 and line.math_share < 0.5


def _is_prose(line: _Line, style: _DocumentStyle) -> bool:
    """A line of running text: body size, (nearly) the column's width, no table-like gaps, mostly letters (a row
    of numbers is a table row however wide it is)."""
    left, right = _column_box(style, line.column)
    visible = line.text.replace(" ", "")
    letters = sum(char.isalpha() for char in visible)
    return (
        _is_plain(line, style) and line.width >= 0.6 * (right - left) and line.widest_gap <= 0.6 * line.size
        and line.bbox[0] <= left + 20 and letters >= 0.6 * len(visible)
    )


def _enclosures(page: _PageContent, prose: list[_Line]) -> list[Box]:
    """Areas whose text is never body text: images, drawn boxes, and the span between two consecutive rules of
    equal width (a booktabs table) unless running prose lies between them (two tables one above the other)."""
    areas = list(page.images)
    areas += [rect for rect, is_box in page.drawings if is_box and rect[2] - rect[0] > 40 and rect[3] - rect[1] > 20]
    rules = sorted(
        (rect for rect, is_box in page.drawings if rect[3] - rect[1] <= 2 and rect[2] - rect[0] >= 30),
        key=lambda r: r[1],
    )
    for i, top in enumerate(rules):
        bottom = next(
            (r for r in rules[i + 1:] if abs(top[0] - r[0]) < 5 and abs(top[2] - r[2]) < 5 and r[1] - top[1] > 4),
            None,
        )
        if bottom is None:
            continue
        zone = (top[0], top[1], top[2], bottom[3])
        if not any(_inside_any(line.bbox, [zone]) for line in prose):
            areas.append(zone)
    return areas


def _inside_any(bbox: Box, areas: list[Box]) -> bool:
    cx, cy = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    return any(a[0] - 1 <= cx <= a[2] + 1 and a[1] - 1 <= cy <= a[3] + 1 for a in areas)


# ------------------------------------------------------------------------------------------------ floats


@dataclass
class _Element:
    bbox: Box
    line: _Line | None = None
    is_image: bool = False


def _find_regions(lines: list[_Line], page: _PageContent, style: _DocumentStyle) -> list[_Region]:
    """Tables and figures, each grown from its caption over the graphics and non-body text next to it."""
    captions = _captions(lines, style)
    caption_ids = {id(line) for caption in captions for line in caption}
    elements = [_Element(line.bbox, line=line) for line in lines if id(line) not in caption_ids]
    elements += [_Element(box, is_image=True) for box in page.images]
    elements += [_Element(rect) for rect, _ in page.drawings]
    elements += [_Element(box) for box in page.rotated_text]
    claimed: set[int] = set()
    regions = []
    # Figure captions sit under their figure almost always, table captions on either side: figures claim what is
    # above them first, so a table whose caption is on top cannot grow down into the figure below it.
    # Tables go in order of how close their content sits, so a caption between two tables gets the nearer one.
    passes: list[tuple[Literal["table", "figure"], tuple[str, ...]]] = [
        ("figure", ("up",)), ("table", ("up", "down")), ("figure", ("down",))
    ]
    placed: set[int] = set()
    for wanted, directions in passes:
        pending = [c for c in captions if _caption_kind(c) == wanted and id(c[0]) not in placed]
        if wanted == "table":
            pending.sort(key=lambda c: _nearest_content_gap(c, elements, claimed, captions, style))
        for caption in pending:
            grown = _grow_region(wanted, caption, elements, claimed, captions, style, directions, page.clips)
            if grown is not None:
                placed.add(id(caption[0]))
                regions.append(grown)
    for caption in captions:
        if id(caption[0]) not in placed:
            for line in caption:
                line.role = "caption"
    regions += _uncaptioned_figures(page, regions, style)
    return regions


def _captions(lines: list[_Line], style: _DocumentStyle) -> list[list[_Line]]:
    """Lines starting "Table 3:" / "Figure 2." at a paragraph start, with the lines that continue them."""
    ordered = sorted(lines, key=lambda l: (l.column, l.bbox[1]))
    captions = []
    used: set[int] = set()
    for i, line in enumerate(ordered):
        if id(line) in used or line.role in {"footer", "header"} or not _CAPTION.match(line.text):
            continue
        left, right = _column_box(style, line.column)
        centred = abs((line.bbox[0] + line.bbox[2]) / 2 - (left + right) / 2) < 20
        if line.bbox[0] > left + 25 and not centred and line.column != "full":
            continue
        if i > 0 and _continues_prose(ordered[i - 1], line):
            continue  # "... as shown in / Figure 11. In particular ..." is a sentence, not a caption
        caption = [line]
        for follower in ordered[i + 1:]:
            last = caption[-1]
            if follower.column != line.column or follower.bbox[1] - last.bbox[3] > 0.45 * last.size:
                break
            if abs(follower.size - line.size) > 0.6 or follower.bbox[1] < last.bbox[3] - 0.5 * last.height:
                break
            if _CAPTION.match(follower.text):
                break
            caption.append(follower)
        used |= {id(part) for part in caption}
        captions.append(caption)
    return captions


def _continues_prose(previous: _Line, line: _Line) -> bool:
    return (
        previous.column == line.column and previous.role == "body" and abs(previous.size - line.size) < 0.5
        and 0 <= line.bbox[1] - previous.bbox[3] <= 0.3 * line.size
        and not previous.text.rstrip().endswith((".", ":"))
    )


def _caption_kind(caption: list[_Line]) -> Literal["table", "figure"]:
    return "table" if _CAPTION.match(caption[0].text).group(1).startswith("Tab") else "figure"


def _caption_label(caption: list[_Line]) -> str:
    """ "Table 3" / "Figure 2", whatever the caption's own spelling ("Tab. 3", "Fig. 2")."""
    number = _CAPTION.match(caption[0].text).group(2)
    return f"{'Table' if _caption_kind(caption) == 'table' else 'Figure'} {number}"


def _both_sides(
    caption: list[_Line], elements: list[_Element], claimed: set[int], captions: list[list[_Line]],
    style: _DocumentStyle, directions: tuple[str, ...] = ("up", "down"),
) -> tuple[list[_Element], list[_Element]]:
    """What a caption could claim above and below it, within its column (or the page width)."""
    caption_box = _union([line.bbox for line in caption])
    left, right = _column_box(style, style.column_of(caption_box))
    candidates = [e for e in elements if id(e) not in claimed and _within_extent(e.bbox, left, right)]
    other_boxes = [_union([l.bbox for l in other]) for other in captions if other is not caption]
    other_boxes = [box for box in other_boxes if min(box[2], right) - max(box[0], left) > 0]
    above = _collect(candidates, caption_box, "up", [b[3] for b in other_boxes]) if "up" in directions else []
    below = _collect(candidates, caption_box, "down", [b[1] for b in other_boxes]) if "down" in directions else []
    return (above if _substantive(above) else []), (below if _substantive(below) else [])


def _substantive(taken: list[_Element]) -> bool:
    """Text, an image or a real shape: a lone rule (a footnote separator, an underline) is not a float."""
    return any(e.line is not None or e.is_image or _area(e.bbox) > 100 for e in taken)


def _next_caption_beyond(
    taken: list[_Element], direction: str, caption: list[_Line], captions: list[list[_Line]], style: _DocumentStyle
) -> bool:
    """Whether another caption sits right past the far end of this content, i.e. the content is probably its."""
    box = _union([e.bbox for e in taken])
    for other in captions:
        if other is caption:
            continue
        other_box = _union([line.bbox for line in other])
        if min(other_box[2], box[2]) - max(other_box[0], box[0]) <= 0:
            continue
        gap = box[1] - other_box[3] if direction == "up" else other_box[1] - box[3]
        if 0 <= gap <= _CAPTION_GAP:
            return True
    return False


def _nearer_part(taken: list[_Element], direction: str) -> list[_Element]:
    """Content that runs up to a table's caption is shared: keep what lies before its widest internal gap, the
    rest belongs to that table (a figure under a table whose caption is on top)."""
    ordered = sorted(taken, key=lambda e: -e.bbox[3] if direction == "up" else e.bbox[1])
    edge = ordered[0].bbox[1] if direction == "up" else ordered[0].bbox[3]
    widest, cut = 0.0, len(ordered)
    for index, element in enumerate(ordered[1:], start=1):
        gap = edge - element.bbox[3] if direction == "up" else element.bbox[1] - edge
        if gap > widest:
            widest, cut = gap, index
        edge = min(edge, element.bbox[1]) if direction == "up" else max(edge, element.bbox[3])
    return ordered[:cut] if widest >= 6 else taken


def _first_gap(caption: list[_Line], taken: list[_Element], direction: str) -> float:
    if not taken:
        return float("inf")
    caption_box = _union([line.bbox for line in caption])
    if direction == "up":
        return caption_box[1] - max(e.bbox[3] for e in taken)
    return min(e.bbox[1] for e in taken) - caption_box[3]


def _nearest_content_gap(
    caption: list[_Line], elements: list[_Element], claimed: set[int], captions: list[list[_Line]],
    style: _DocumentStyle,
) -> float:
    above, below = _both_sides(caption, elements, claimed, captions, style)
    return min(_first_gap(caption, above, "up"), _first_gap(caption, below, "down"))


def _grow_region(
    kind: Literal["table", "figure"], caption: list[_Line], elements: list[_Element], claimed: set[int],
    captions: list[list[_Line]], style: _DocumentStyle, directions: tuple[str, ...], clip_areas: list[Box],
) -> _Region | None:
    above, below = _both_sides(caption, elements, claimed, captions, style, directions)
    gap_above, gap_below = _first_gap(caption, above, "up"), _first_gap(caption, below, "down")
    contested_above = above and _next_caption_beyond(above, "up", caption, captions, style)
    contested_below = below and _next_caption_beyond(below, "down", caption, captions, style)
    if above and below and contested_above != contested_below:
        chosen = below if contested_above else above  # the other side's content has its own caption
    elif abs(gap_above - gap_below) >= 3:
        chosen = above if gap_above < gap_below else below
    else:
        chosen = above if _content_weight(above) >= _content_weight(below) else below
    if not chosen:
        return None
    direction = "up" if chosen is above else "down"
    table_captions = [other for other in captions if _caption_kind(other) == "table"]
    if kind == "figure" and _next_caption_beyond(chosen, direction, caption, table_captions, style):
        chosen = _nearer_part(chosen, direction)  # figures claim first; leave a table its rows
    claimed |= {id(e) for e in chosen}
    region = _region_of(kind, caption, chosen)
    panels = _split_panels(chosen, clip_areas) if kind == "figure" else []
    if len(panels) >= 2:
        region.panels = [_region_of(kind, caption, panel) for panel in panels]
    return region


def _region_of(kind: Literal["table", "figure"], caption: list[_Line], elements: list[_Element]) -> _Region:
    return _Region(
        kind=kind,
        bbox=_union([e.bbox for e in elements]),
        caption_lines=caption,
        label=_caption_label(caption),
        lines=[e.line for e in elements if e.line is not None],
        has_image=any(e.is_image for e in elements),
        has_drawing=any(e.line is None and not e.is_image for e in elements),
    )


def _split_panels(elements: list[_Element], clip_areas: list[Box]) -> list[list[_Element]]:
    """The plots of a figure made of separate plots, each a panel (a row of its own, under the whole figure's,
    sharing its caption), so that a question about one plot can point at it; one panel (all the elements) when
    the figure is not cut. What belongs to several plots (a shared legend) is in no panel, only in the whole.

    Plotting libraries clip each plot's data to its axes, so the innermost clip areas inside the figure mark its
    plots even where tick labels of neighbours touch (see :func:`_panels_on_plot_areas`). Without them, cuts
    follow white space (recursive XY-cut); pieces without graphics, like a shared legend, join the panel they
    line up with. Plots packed closer than the panel gap are cut at a finer gap only when that yields a grid of
    alike plots big enough to be charts."""
    on_plot_areas = _panels_on_plot_areas(elements, clip_areas)
    if on_plot_areas is not None:
        return on_plot_areas
    coarse = _panels_at(elements, _PANEL_GAP, _MIN_FIGURE_SIDE) or [elements]
    return [fine for panel in coarse for fine in (_panels_at(panel, _FINE_PANEL_GAP, _MIN_PLOT_SIDE) or [panel])]


def _panels_on_plot_areas(elements: list[_Element], clip_areas: list[Box]) -> list[list[_Element]] | None:
    """One panel per plot area (an innermost clip area holding graphics), with the labels, ticks and legends on
    its side of the cuts between plots; what belongs to several plots (a shared legend, the sub-caption under a
    pair of plots) belongs to no single panel. None when the figure has fewer than two plot areas, when they
    overlap or sit edge to edge, or when they cover too little of it to be what the figure is made of (a diagram
    with a clipped screenshot in it)."""
    box = _union([e.bbox for e in elements])
    inside = [area for area in clip_areas if _area(_intersection(area, box)) >= 0.8 * _area(area)]
    distinct: list[Box] = []
    for area in sorted(inside, key=_area):
        if not any(_box_iou(area, kept) > 0.9 for kept in distinct):
            distinct.append(area)
    innermost = [area for area in distinct if not any(o is not area and _contains(area, o) for o in distinct)]
    graphics = [e for e in elements if e.line is None]
    plots = [area for area in innermost if any(_contains(area, _center_box(e.bbox)) for e in graphics)]
    if len(plots) < 2 or sum(_area(area) for area in plots) < _MIN_PLOT_AREA_SHARE * _area(box):
        return None
    if any(_area(_intersection(a, b)) > 0.1 * min(_area(a), _area(b)) or _box_gap(a, b) < _FACET_GAP
           for i, a in enumerate(plots) for b in plots[i + 1:]):
        return None  # overlapping clips say nothing; facets packed edge to edge share their axes: one figure
    pieces: list[_Element] = []
    for element in elements:  # a visual line can join the tick labels of neighbouring plots: take its spans
        line = element.line
        if line is not None and len(line.spans) > 1 and _belongs_to_several(element.bbox, plots):
            pieces += [_Element(tuple(span["bbox"]), line=line) for span in line.spans]
        else:
            pieces.append(element)
    own = [e for e in pieces if not _belongs_to_several(e.bbox, plots)]
    return _cut_between_plots(plots, own)


def _belongs_to_several(bbox: Box, plots: list[Box]) -> bool:
    """Centred outside every plot area, and either reaching across two plots that sit side by side (or one above
    the other), like a legend over a row of plots, or centred on the gap between two plots in the white band past
    their ends, like the sub-caption under a pair of plots."""
    if any(_contains(plot, _center_box(bbox)) for plot in plots):
        return False
    for axis in (0, 1):
        other = 1 - axis
        reached = [p for p in plots if min(bbox[axis + 2], p[axis + 2]) - max(bbox[axis], p[axis])
                   > _SHARED_REACH * (p[axis + 2] - p[axis])]
        if any(_apart(a, b, axis) for i, a in enumerate(reached) for b in reached[i + 1:]):
            return True
        center = (bbox[axis] + bbox[axis + 2]) / 2
        if any(p[axis] <= center <= p[axis + 2] or _extents_overlap(bbox, p, other) for p in plots):
            continue  # centred on a plot, or beside one: that plot's label
        if any(a[axis + 2] <= center <= b[axis] for a in plots for b in plots):
            return True
    return False


def _extents_overlap(a: Box, b: Box, axis: int) -> bool:
    return min(a[axis + 2], b[axis + 2]) > max(a[axis], b[axis])


def _apart(a: Box, b: Box, axis: int) -> bool:
    return a[axis + 2] <= b[axis] or b[axis + 2] <= a[axis]


def _cut_between_plots(plots: list[Box], elements: list[_Element]) -> list[list[_Element]]:
    """One group of elements per plot area: the areas are split into rows or columns (whichever gives more),
    each cut runs through the whitest stretch of the gap between them (so a y-axis label stays with the plot it
    labels, not with the neighbour it nearly touches), and each element goes to the side its centre is on; a
    sub-caption in the gap between two rows goes with the row above it."""
    if len(plots) == 1:
        return [elements]
    best_axis, best_groups = 0, [plots]
    for axis in (0, 1):
        groups = _plot_bands(plots, axis)
        if len(groups) > len(best_groups):
            best_axis, best_groups = axis, groups
    if len(best_groups) == 1:  # plots in a pinwheel: no straight cut separates them; the nearest plot wins
        nearest: list[list[_Element]] = [[] for _ in plots]
        for element in elements:
            nearest[min(range(len(plots)), key=lambda i: _distance(element.bbox, plots[i]))].append(element)
        return nearest
    gaps = [
        (max(p[best_axis + 2] for p in before), min(p[best_axis] for p in after))
        for before, after in zip(best_groups, best_groups[1:])
    ]
    subcaptions = {
        id(e) for e in elements if best_axis == 1 and e.line is not None and _SUBCAPTION.match(e.line.text)
    }
    plain = [e for e in elements if id(e) not in subcaptions]
    cuts = [_whitest_cut(plain, best_axis, low, high) for low, high in gaps]
    sides: list[list[_Element]] = [[] for _ in best_groups]
    for element in elements:
        center = (element.bbox[best_axis] + element.bbox[best_axis + 2]) / 2
        if id(element) in subcaptions:  # "(b) ..." under a plot names the plot above it
            sides[sum(1 for _, high in gaps if center > high)].append(element)
        else:
            sides[sum(1 for cut in cuts if center > cut)].append(element)
    return [panel for group, side in zip(best_groups, sides) for panel in _cut_between_plots(group, side)]


def _plot_bands(plots: list[Box], axis: int) -> list[list[Box]]:
    """Plot areas grouped along x (axis 0) or y (axis 1) wherever no area spans the gap."""
    bands: list[list[Box]] = []
    reach = None
    for plot in sorted(plots, key=lambda p: p[axis]):
        if reach is None or plot[axis] >= reach:
            bands.append([])
        bands[-1].append(plot)
        reach = plot[axis + 2] if reach is None else max(reach, plot[axis + 2])
    return bands


def _whitest_cut(elements: list[_Element], axis: int, low: float, high: float) -> float:
    """The position between low and high that the fewest elements straddle, in the middle of the widest such
    stretch."""
    spans = [(e.bbox[axis], e.bbox[axis + 2]) for e in elements if e.bbox[axis] < high and e.bbox[axis + 2] > low]
    stops = sorted({low, high, *(v for span in spans for v in span if low < v < high)})
    stretches: list[list[float]] = []  # [elements straddling, start, stop], equal neighbours merged
    for start, stop in zip(stops, stops[1:]):
        middle = (start + stop) / 2
        straddling = sum(1 for x0, x1 in spans if x0 < middle < x1)
        if stretches and stretches[-1][0] == straddling:
            stretches[-1][2] = stop
        else:
            stretches.append([straddling, start, stop])
    best = min(stretches, key=lambda s: (s[0], s[1] - s[2]), default=None)
    return (best[1] + best[2]) / 2 if best is not None else (low + high) / 2


def _panels_at(elements: list[_Element], gap: float, min_side: float) -> list[list[_Element]]:
    """The panels of a figure cut at this white-space gap, or [] when the cut does not give alike panels."""
    leaves = _xy_cut(elements, gap)
    panels = [leaf for leaf in leaves if _is_panel(leaf, min_side)]
    if len(panels) < 2 or not _alike([_union([e.bbox for e in panel]) for panel in panels]):
        return []
    for leaf in leaves:
        if any(leaf is panel for panel in panels):
            continue
        box = _union([e.bbox for e in leaf])
        aligned = [panel for panel in panels if _projections_overlap(box, _union([e.bbox for e in panel]))]
        if aligned:
            nearest = min(aligned, key=lambda panel: _distance(box, _union([e.bbox for e in panel])))
            nearest.extend(leaf)
    return panels


def _xy_cut(elements: list[_Element], gap: float) -> list[list[_Element]]:
    best: list[list[_Element]] = [elements]
    for axis in (0, 1):
        groups = _split_on_gaps(elements, axis, gap)
        if len(groups) > len(best):
            best = groups
    if len(best) == 1:
        return best
    return [leaf for group in best for leaf in _xy_cut(group, gap)]


def _split_on_gaps(elements: list[_Element], axis: int, gap: float) -> list[list[_Element]]:
    """Elements grouped along x (axis 0) or y (axis 1) wherever no element covers a stretch wider than gap."""
    ordered = sorted(elements, key=lambda e: e.bbox[axis])
    groups: list[list[_Element]] = []
    reach = None
    for element in ordered:
        if reach is None or element.bbox[axis] > reach + gap:
            groups.append([])
        groups[-1].append(element)
        reach = element.bbox[axis + 2] if reach is None else max(reach, element.bbox[axis + 2])
    return groups


def _alike(boxes: list[Box]) -> bool:
    """Plots of one figure come in a grid of similar sizes; parts of a diagram do not."""
    widths = [b[2] - b[0] for b in boxes]
    heights = [b[3] - b[1] for b in boxes]
    return min(widths) >= 0.6 * max(widths) and min(heights) >= 0.6 * max(heights)


def _is_panel(elements: list[_Element], min_side: float) -> bool:
    box = _union([e.bbox for e in elements])
    graphic = any(e.line is None for e in elements)
    return graphic and box[2] - box[0] >= min_side and box[3] - box[1] >= min_side


def _projections_overlap(a: Box, b: Box) -> bool:
    x_overlap = min(a[2], b[2]) - max(a[0], b[0])
    y_overlap = min(a[3], b[3]) - max(a[1], b[1])
    return x_overlap > 0.5 * (a[2] - a[0]) or y_overlap > 0.5 * (a[3] - a[1])


def _distance(a: Box, b: Box) -> float:
    dx = max(0.0, b[0] - a[2], a[0] - b[2])
    dy = max(0.0, b[1] - a[3], a[1] - b[3])
    return dx + dy


def _within_extent(bbox: Box, left: float, right: float) -> bool:
    """Mostly inside the column (or page) span; a vertical rule has no width, so only its position counts."""
    overlap = min(bbox[2], right + 10) - max(bbox[0], left - 10)
    return overlap >= 0 and overlap >= 0.8 * (bbox[2] - bbox[0])


def _collect(candidates: list[_Element], caption_box: Box, direction: str, other_captions: list[float]
             ) -> list[_Element]:
    """Walk away from the caption, taking elements until a gap wider than a float's or running body text."""
    if direction == "up":
        side = [e for e in candidates if e.bbox[3] <= caption_box[1] + 2]
        side.sort(key=lambda e: -e.bbox[3])
        limit = max((y for y in other_captions if y <= caption_box[1]), default=-1.0)
    else:
        side = [e for e in candidates if e.bbox[1] >= caption_box[3] - 2]
        side.sort(key=lambda e: e.bbox[1])
        limit = min((y for y in other_captions if y >= caption_box[3]), default=1e9)
    edge = caption_box[1] if direction == "up" else caption_box[3]
    taken: list[_Element] = []
    for element in side:
        gap = edge - element.bbox[3] if direction == "up" else element.bbox[1] - edge
        if gap > (_FLOAT_GAP if taken else _CAPTION_GAP):
            break
        beyond_caption = element.bbox[1] < limit if direction == "up" else element.bbox[3] > limit
        if beyond_caption:
            continue
        line = element.line
        inside = gap < 0  # within the height the figure already covers, e.g. a legend inside the axes
        if line is not None and (line.role in {"footer", "header"} or line.role == "body" and not inside):
            break
        if line is not None and _looks_like_heading(line) and not inside:
            break
        taken.append(element)
        edge = min(edge, element.bbox[1]) if direction == "up" else max(edge, element.bbox[3])
    return taken


def _content_weight(elements: list[_Element]) -> float:
    return sum((e.bbox[2] - e.bbox[0]) * (e.bbox[3] - e.bbox[1]) for e in elements if e.line is not None) + len(
        elements
    )


def _uncaptioned_figures(page: _PageContent, regions: list[_Region], style: _DocumentStyle) -> list[_Region]:
    """Large raster images that no caption claimed are figures too (without a caption)."""
    covered = [region.bbox for region in regions]
    figures = []
    for box in page.images:
        big = box[2] - box[0] >= _MIN_FIGURE_SIDE and box[3] - box[1] >= _MIN_FIGURE_SIDE
        if big and not _inside_any(box, covered) and box[1] < _BOTTOM_MARGIN_SHARE * page.height:
            figures.append(_Region("figure", box, [], None, has_image=True))
            covered.append(box)
    return figures


def _looks_like_heading(line: _Line) -> bool:
    return line.bold_share >= 0.9 and bool(_DIGIT_HEADING.match(line.text)) and len(line.text) < 80


# ------------------------------------------------------------------------------------------------ table cells


def _fill_table_cells(page: pymupdf.Page, analysis: _PageAnalysis) -> None:
    for region in analysis.regions:
        if region.kind != "table":
            continue
        words = page.get_text("words", clip=pymupdf.Rect(region.bbox), flags=_TEXT_FLAGS)
        ruled = _cells_from_ruled_grid(page, region, words, analysis)
        region.cells = ruled or _cells_from_text(words, region, analysis)


def _cells_from_ruled_grid(
    page: pymupdf.Page, region: _Region, words: list[tuple], analysis: _PageAnalysis
) -> list[TableCell]:
    """Cells from PyMuPDF's table finder when the table draws a grid; texts from our word boxes.

    Booktabs tables (horizontal rules only, the norm in ACL papers) give the line finder nothing to work with
    and cost it up to a second per page, so it only runs where vertical rules exist."""
    vertical_rules = [
        rect for rect, _ in analysis.content.drawings
        if rect[2] - rect[0] <= 2 and rect[3] - rect[1] >= 8 and _overlaps(rect, region.bbox)
    ]
    boxes_drawn = [rect for rect, is_box in analysis.content.drawings if is_box and _overlaps(rect, region.bbox)]
    if len(vertical_rules) < 2 and len(boxes_drawn) < 4:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = page.find_tables(clip=pymupdf.Rect(region.bbox), use_layout=False)
    tables = [t for t in found.tables if t.row_count >= 2 and t.col_count >= 2]
    if not tables:
        return []
    table = max(tables, key=lambda t: _area(t.bbox))
    if _area(table.bbox) < 0.6 * _area(region.bbox):
        return []
    boxes = [cell for row in table.rows for cell in row.cells if cell is not None]
    xs = _cluster_edges([b[0] for b in boxes])
    ys = _cluster_edges([b[1] for b in boxes])
    cells = []
    for box in boxes:
        row, col = _edge_index(ys, box[1]), _edge_index(xs, box[0])
        colspan = max(1, sum(1 for x in xs if box[0] - 1 <= x < box[2] - 1))
        rowspan = max(1, sum(1 for y in ys if box[1] - 1 <= y < box[3] - 1))
        text = " ".join(w[4] for w in words if _center_inside(w, box))
        cells.append(TableCell(row, col, text, rowspan, colspan, is_header=row == 0))
    return cells


def _cluster_edges(values: list[float], tolerance: float = 2.0) -> list[float]:
    edges: list[float] = []
    for value in sorted(values):
        if not edges or value - edges[-1] > tolerance:
            edges.append(value)
    return edges


def _edge_index(edges: list[float], value: float) -> int:
    return min(range(len(edges)), key=lambda i: abs(edges[i] - value))


def _center_inside(word: tuple, box: Any) -> bool:
    cx, cy = (word[0] + word[2]) / 2, (word[1] + word[3]) / 2
    return box[0] - 1 <= cx <= box[2] + 1 and box[1] - 1 <= cy <= box[3] + 1


def _cells_from_text(words: list[tuple], region: _Region, analysis: _PageAnalysis) -> list[TableCell]:
    """Cells from word positions: rows by baseline, columns by the gaps that the fullest rows share."""
    if not words:
        return []
    rows = _word_rows(words)
    segments_per_row = [_row_segments(row) for row in rows]
    typical = Counter(len(segments) for segments in segments_per_row).most_common(1)[0][0]
    reference_rows = [segments for segments in segments_per_row if len(segments) >= typical]
    boundaries = _column_boundaries(reference_rows)
    header_rows = _header_row_count(rows, region, analysis)
    cells = []
    for row_index, segments in enumerate(segments_per_row):
        occupied: dict[int, TableCell] = {}
        for x0, x1, text in segments:
            first = _column_at(boundaries, x0 + 0.5)
            last = max(first, _column_at(boundaries, x1 - 0.5))
            if first in occupied:
                occupied[first].text = f"{occupied[first].text} {text}"
                continue
            occupied[first] = TableCell(row_index, first, text, colspan=last - first + 1,
                                        is_header=row_index < header_rows)
        covered = {c for cell in occupied.values() for c in range(cell.col, cell.col + cell.colspan)}
        for col in range(len(boundaries) + 1):
            if col not in covered:
                occupied[col] = TableCell(row_index, col, "", is_header=row_index < header_rows)
        cells.extend(occupied[col] for col in sorted(occupied))
    return _drop_overlapping_spans(cells)


def _drop_overlapping_spans(cells: list[TableCell]) -> list[TableCell]:
    """A colspan that runs into a later cell of the same row is shortened, so the HTML grid stays rectangular."""
    by_row: dict[int, list[TableCell]] = {}
    for cell in cells:
        by_row.setdefault(cell.row, []).append(cell)
    for row_cells in by_row.values():
        row_cells.sort(key=lambda c: c.col)
        for cell, following in zip(row_cells, row_cells[1:]):
            cell.colspan = max(1, min(cell.colspan, following.col - cell.col))
    return cells


def _word_rows(words: list[tuple]) -> list[list[tuple]]:
    rows: list[list[tuple]] = []
    for word in sorted(words, key=lambda w: ((w[1] + w[3]) / 2, w[0])):
        center = (word[1] + word[3]) / 2
        if rows:
            last = rows[-1]
            top = min(w[1] for w in last)
            bottom = max(w[3] for w in last)
            if center <= bottom - 0.25 * (bottom - top) and center >= top:
                last.append(word)
                continue
        rows.append([word])
    return [sorted(row, key=lambda w: w[0]) for row in rows]


def _row_segments(row: list[tuple]) -> list[tuple[float, float, str]]:
    """Words of one row grouped into cell texts: a gap wider than about two spaces separates cells."""
    segments: list[list[Any]] = []
    for word in row:
        height = word[3] - word[1]
        if segments and word[0] - segments[-1][1] <= 0.55 * height:
            segments[-1][1] = max(segments[-1][1], word[2])
            segments[-1][2] += " " + word[4]
        else:
            segments.append([word[0], word[2], word[4]])
    return [(s[0], s[1], s[2]) for s in segments]


def _column_boundaries(rows: list[list[tuple[float, float, str]]]) -> list[float]:
    """x positions that separate columns: the middles of gaps no reference-row segment covers."""
    spans = sorted((x0, x1) for segments in rows for x0, x1, _ in segments)
    boundaries = []
    reach = None
    for x0, x1 in spans:
        if reach is not None and x0 > reach:
            boundaries.append((reach + x0) / 2)
        reach = x1 if reach is None else max(reach, x1)
    return boundaries


def _column_at(boundaries: list[float], x: float) -> int:
    return sum(1 for boundary in boundaries if x > boundary)


def _header_row_count(rows: list[list[tuple]], region: _Region, analysis: _PageAnalysis) -> int:
    """Rows above the first rule below the table's top rule are the header (booktabs); else the first row."""
    rules = sorted(
        rect[1] for rect, _ in analysis.content.drawings
        if rect[3] - rect[1] <= 2 and rect[2] - rect[0] >= 20 and _overlaps(rect, region.bbox)
    )
    tops = [min(w[1] for w in row) for row in rows]
    first_text = tops[0] if tops else 0
    inner = [y for y in rules if y > first_text + 2]
    if inner:
        count = sum(1 for top in tops if top < inner[0])
        if 0 < count < len(rows):
            return count
    return 1 if len(rows) > 1 else 0


# ------------------------------------------------------------------------------------------------ equations


_NOT_EQUATION_ROLES = frozenset({"body", "footer", "header", "caption"})


def _find_equations(lines: list[_Line], page: _PageContent, style: _DocumentStyle) -> list[_Equation]:
    """Display equations, one per row of a multi-line display: math lines set apart from the text, the pieces
    on their baseline, the parts of their fractions, and the "(N)" at the column's right edge."""
    numbers = [line for line in lines if _EQUATION_NUMBER.match(line.text) and not line.role]
    number_ids = {id(line) for line in numbers}
    free = [
        line for line in lines
        if id(line) not in number_ids and line.role not in _NOT_EQUATION_ROLES and not _ALGORITHM_STEP.match(line.text)
    ]
    body = [line for line in lines if line.role == "body"]
    candidates = [line for line in free if _is_display_math(line, style) and not _within_text_line(line, body)]
    for number in numbers:  # a numbered display whose text happens to use few math glyphs
        if not any(_same_row(number, line) for line in candidates):
            candidates += [
                line for line in free
                if _same_row(number, line) and line.column == number.column and not _looks_like_heading(line)
                and line not in candidates
            ]
    rows = _equation_rows(candidates, _fraction_bars(page))
    taken = {id(line) for row in rows for line in row}
    for row in rows:  # pieces of the row set apart by wide spaces ("Model A:  y = β0 + ...")
        box = _union([line.bbox for line in row])
        column = style.column_of(box)
        row += [line for line in free if id(line) not in taken and _beside(line, box, column)]
        taken |= {id(line) for line in row}
    equations = []
    for row in sorted(rows, key=lambda r: _union([line.bbox for line in r])[1]):
        box = _union([line.bbox for line in row])
        attached = [n for n in numbers if box[1] - 2 <= (n.bbox[1] + n.bbox[3]) / 2 <= box[3] + 2
                    and _horizontal_gap(n.bbox, box) < 0.6 * page.width]
        number = _EQUATION_NUMBER.match(attached[-1].text).group(1) if attached else None
        for line in row:
            line.role = "equation"
        equations.append(_Equation(box, row, attached, f"({number})" if number else None))
    return equations


def _within_text_line(line: _Line, body: list[_Line]) -> bool:
    """Inline math that PyMuPDF split off its sentence sits on the baseline band of a body line."""
    center = (line.bbox[1] + line.bbox[3]) / 2
    return any(
        other.bbox[1] + 1 <= center <= other.bbox[3] - 1 and _horizontal_gap(line.bbox, other.bbox) < 2
        for other in body
    )


def _beside(line: _Line, box: Box, column: Column) -> bool:
    """A label or a piece of the same display on its baseline ("Model A:", "+ ε"), not a run of words."""
    center = (line.bbox[1] + line.bbox[3]) / 2
    same_column = line.column == column or (column != "full" and line.column == "full")
    piece = line.math_share >= 0.2 or len(line.text) <= 25
    return box[1] - 2 <= center <= box[3] + 2 and _horizontal_gap(line.bbox, box) < 80 and same_column and piece


def _equation_rows(candidates: list[_Line], bars: list[Box]) -> list[list[_Line]]:
    """Candidate lines joined into rows: side by side on one baseline, or numerator and denominator across a
    fraction bar. Narrow lines (the limits of a sum, a lone script) then join the one row nearest to them, so
    they cannot chain the rows of a multi-line display into one."""
    narrow = {id(line) for line in candidates if _is_narrow(line, candidates)}
    wide = sorted((line for line in candidates if id(line) not in narrow), key=lambda line: line.bbox[1])
    parent = list(range(len(wide)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, upper in enumerate(wide):
        for j in range(i + 1, len(wide)):
            lower = wide[j]
            if lower.bbox[1] > upper.bbox[3] + 4:
                break
            if _same_equation_row(upper, lower, bars):
                parent[root(j)] = root(i)
    grouped: dict[int, list[_Line]] = {}
    for i, line in enumerate(wide):
        grouped.setdefault(root(i), []).append(line)
    rows = list(grouped.values())
    for line in candidates:
        if id(line) not in narrow:
            continue
        near = [(_vertical_gap(line.bbox, _union([l.bbox for l in row])), row) for row in rows
                if _horizontal_gap(line.bbox, _union([l.bbox for l in row])) < 10]
        near = [(gap, row) for gap, row in near if gap <= 6]
        if near:
            min(near, key=lambda pair: pair[0])[1].append(line)
        else:
            rows.append([line])
    return rows


def _is_narrow(line: _Line, candidates: list[_Line]) -> bool:
    neighbours = [
        other.width for other in candidates
        if _vertical_gap(other.bbox, line.bbox) < 30 and _horizontal_gap(other.bbox, line.bbox) < 10
    ]
    return line.width < 0.35 * max(neighbours, default=line.width)


def _same_equation_row(upper: _Line, lower: _Line, bars: list[Box]) -> bool:
    overlap = min(upper.bbox[3], lower.bbox[3]) - max(upper.bbox[1], lower.bbox[1])
    if overlap >= 0.5 * min(upper.height, lower.height) and _horizontal_gap(upper.bbox, lower.bbox) < 80:
        return True
    x_overlap = min(upper.bbox[2], lower.bbox[2]) - max(upper.bbox[0], lower.bbox[0])
    if x_overlap <= 0 or lower.bbox[1] - upper.bbox[3] > 3:
        return False
    return any(
        upper.bbox[3] - 3 <= bar[1] <= lower.bbox[1] + 3
        and min(bar[2], upper.bbox[2], lower.bbox[2]) - max(bar[0], upper.bbox[0], lower.bbox[0]) > 0
        for bar in bars
    )


def _vertical_gap(a: Box, b: Box) -> float:
    return max(a[1] - b[3], b[1] - a[3], 0.0)


def _fraction_bars(page: _PageContent) -> list[Box]:
    return [rect for rect, _ in page.drawings if rect[3] - rect[1] <= 1.5 and 3 <= rect[2] - rect[0] <= 300]


def _horizontal_gap(a: Box, b: Box) -> float:
    return max(a[0] - b[2], b[0] - a[2], 0.0)


def _same_row(a: _Line, b: _Line) -> bool:
    center = (a.bbox[1] + a.bbox[3]) / 2
    return b.bbox[1] - 2 <= center <= b.bbox[3] + 2


def _is_display_math(line: _Line, style: _DocumentStyle) -> bool:
    left, right = _column_box(style, line.column)
    indented = line.bbox[0] - left >= 12 and right - line.bbox[2] >= 12
    if line.math_share >= 0.6 and len(line.text) >= 3:
        return True
    return indented and line.math_share >= 0.3 and not _CAPTION.match(line.text)


# ------------------------------------------------------------------------------------------------ reading order


def _item_box(item: Any) -> Box:
    if isinstance(item, _Region):
        return item.outer_bbox
    return item.bbox


def _item_column(item: Any, style: _DocumentStyle) -> Column:
    return style.column_of(_item_box(item))


def _reading_order(items: list[Any], style: _DocumentStyle) -> list[Any]:
    """Full-width items cut the page into bands; inside a band the left column is read before the right."""
    full = sorted((i for i in items if _item_column(i, style) == "full"), key=lambda i: _item_box(i)[1])
    sided = [i for i in items if _item_column(i, style) != "full"]
    ordered: list[Any] = []
    band_top = -1.0
    for cut in [*full, None]:
        band_bottom = _item_box(cut)[1] if cut is not None else 1e9
        in_band = [i for i in sided if band_top <= _center_y(i) < band_bottom]
        for column in ("left", "right"):
            ordered += sorted((i for i in in_band if _item_column(i, style) == column), key=lambda i: _item_box(i)[1])
        if cut is not None:
            ordered.append(cut)
            band_top = _item_box(cut)[1]
    placed = {id(i) for i in ordered}
    ordered += [i for i in items if id(i) not in placed]
    return ordered


def _center_y(item: Any) -> float:
    box = _item_box(item)
    return (box[1] + box[3]) / 2


# ------------------------------------------------------------------------------------------------ structure


@dataclass
class _Paragraph:
    lines: list[_Line]
    page_number: int

    @property
    def bbox(self) -> Box:
        return _union([line.bbox for line in self.lines])

    @property
    def text(self) -> str:
        return _join_lines(self.lines)


def _build_layout(pages: list[_PageContent], analysed: list[_PageAnalysis], style: _DocumentStyle) -> DocumentLayout:
    builder = _StructureBuilder(style)
    title, authors = builder.front_matter(analysed[0])
    for analysis in analysed:
        builder.add_page(analysis)
    infos = [
        PageInfo(page.number, page.width, page.height, builder.page_text.get(page.number, ""))
        for page in pages
    ]
    abstract = _join_paragraphs([b.text for b in builder.blocks if b.kind == "abstract"]) or None
    return DocumentLayout(pages=infos, blocks=builder.blocks, title=title, authors=authors, abstract=abstract)


class _StructureBuilder:
    """Walks the pages in reading order and turns lines into typed blocks, remembering where it is in the paper
    (front matter, abstract, body, bibliography)."""

    def __init__(self, style: _DocumentStyle) -> None:
        self.style = style
        self.blocks: list[Block] = []
        self.page_text: dict[int, str] = {}
        self.front_ids: set[int] = set()
        self.title_ids: set[int] = set()
        self.in_abstract = False
        self.in_references = False
        self.after_references = False
        self.last_reference: Block | None = None
        self.page_height = 0.0
        self.section_size = style.body_size + 1.0

    # --- page 1: title and authors

    def front_matter(self, first: _PageAnalysis) -> tuple[str | None, list[str]]:
        page = first.content
        top_lines = [
            line for line in first.free_lines
            if line.bbox[3] < 0.4 * page.height and line.role not in {"header", "footer"}
        ]
        if not top_lines:
            return None, []
        largest = max(line.size for line in top_lines)
        if largest < self.style.body_size + 1.5:
            return None, []
        title_lines = sorted((l for l in top_lines if l.size >= largest - 0.5), key=lambda l: l.bbox[1])
        title_lines = [l for l in title_lines if l.bbox[1] - title_lines[0].bbox[3] < 3 * largest]
        title_bottom = max(l.bbox[3] for l in title_lines)
        end = min(
            (l.bbox[1] for l in first.free_lines if l.bbox[1] > title_bottom and self._ends_front_matter(l)),
            default=0.4 * page.height,
        )
        author_lines = sorted(
            (l for l in top_lines if title_bottom < l.bbox[1] < end and id(l) not in {id(t) for t in title_lines}),
            key=lambda l: (round((l.bbox[1] + l.bbox[3]) / 8), l.bbox[0]),  # rows of names, left to right
        )
        self.title_ids = {id(l) for l in title_lines}
        self.front_ids = self.title_ids | {id(l) for l in author_lines}
        title = " ".join(l.text for l in title_lines)
        return title or None, _author_names(author_lines)

    def _ends_front_matter(self, line: _Line) -> bool:
        """The abstract heading, a numbered heading or running text: where the author block is over."""
        if line.role == "body" or re.sub(r"[^a-z]", "", line.text.lower()) == "abstract":
            return True
        parts = self._heading_parts(line)
        return parts is not None and parts[0] is not None

    # --- every page

    def add_page(self, analysis: _PageAnalysis) -> None:
        number = analysis.content.number
        self.style = analysis.style
        self.page_height = analysis.content.height
        page_blocks: list[Block] = []
        paragraph: _Paragraph | None = None
        for item in analysis.order:
            if isinstance(item, _Line) and self._continues(paragraph, item):
                paragraph.lines.append(item)
                continue
            if paragraph is not None:
                page_blocks += self._paragraph_blocks(paragraph)
                paragraph = None
            if isinstance(item, _Region):
                page_blocks += _region_blocks(item, number)
            elif isinstance(item, _Equation):
                page_blocks.append(Block(kind="equation", page_number=number, bbox=item.bbox,
                                         text=_equation_text(item.lines), equation_number=item.number))
            elif isinstance(item, _Line):
                heading = self._heading_block(item, number)
                if heading is not None:
                    page_blocks.append(heading)
                else:
                    paragraph = _Paragraph([item], number)
        if paragraph is not None:
            page_blocks += self._paragraph_blocks(paragraph)
        page_blocks = _merge_wrapped_headings(page_blocks)
        self.blocks += page_blocks
        self.page_text[number] = "\n\n".join(dict.fromkeys(filter(None, map(_page_text_of, page_blocks))))

    def _continues(self, paragraph: _Paragraph | None, line: _Line) -> bool:
        if paragraph is None:
            return False
        last = paragraph.lines[-1]
        if id(line) in self.front_ids or id(last) in self.front_ids:
            return False
        if _flow_role(line) != _flow_role(last) or line.column != last.column:
            return False
        if line.role == "caption" and _CAPTION.match(line.text):
            return False
        if abs(line.size - last.size) > 1.0 or not 0 <= line.bbox[1] - last.bbox[3] + 2 <= 0.7 * line.size + 2:
            return False
        if self._heading_parts(line) is not None:
            return False
        left, right = _column_box(self.style, line.column)
        if self.in_references:
            return line.bbox[0] > left + 2  # hanging indent: an entry's first line starts at the column edge
        if _LIST_BULLET.match(line.text) and line.bbox[0] <= last.bbox[0] + 2:
            return False
        in_list = bool(_LIST_BULLET.match(paragraph.lines[0].text))  # list items hang their later lines
        indented = not in_list and line.bbox[0] - left > 6 and line.bbox[0] - last.bbox[0] > 6
        ended = last.bbox[2] < right - 0.15 * (right - left) and last.text.rstrip().endswith((".", ":", "?", "!"))
        return not (indented or ended)

    def _heading_parts(self, line: _Line) -> tuple[str | None, str, int] | None:
        """(number, title, level) when the line is a section heading."""
        text = line.text.strip()
        if line.role in {"footer", "header", "caption", "equation"} or id(line) in self.title_ids:
            return None
        if not 2 <= len(text) <= 120 or line.bold_share < 0.85 or line.size < self.style.body_size - 0.6:
            return None
        if text.endswith((".", ",", ";")) or _CAPTION.match(text) or "@" in text:
            return None
        digit = _DIGIT_HEADING.match(text)
        if digit and len(digit.group(1).split(".")[0]) <= 2 and digit.group(2)[0].isupper():
            number = digit.group(1)
            return number, digit.group(2), number.count(".") + 1
        letter = _LETTER_HEADING.match(text)  # appendices: "B Proofs" only after the bibliography, "B.2 ..." anywhere
        if letter and (self.after_references or "." in letter.group(1)) and letter.group(2)[0].isupper():
            number = letter.group(1)
            return number, letter.group(2), number.count(".") + 1
        key = re.sub(r"[^a-z]", "", text.lower())
        if key in _UNNUMBERED_SECTIONS:
            return None, text, 1
        if text[0].isupper() and len(text.split()) <= 10 and not text.endswith(":"):
            level = 1 if line.size >= self.section_size - 0.3 else 2
            return None, text, level
        return None

    def _heading_block(self, line: _Line, page_number: int) -> Block | None:
        if id(line) in self.front_ids:
            return None
        parts = self._heading_parts(line)
        if parts is None:
            return None
        number, title, level = parts
        if number is not None and number.isdigit():
            self.section_size = max(self.section_size, line.size)
        key = re.sub(r"[^a-z]", "", title.lower())
        self.in_abstract = key == "abstract"
        self.last_reference = None
        if key in _REFERENCE_HEADINGS:
            self.in_references = self.after_references = True
        elif number is not None or (level == 1 and key in _UNNUMBERED_SECTIONS):
            self.in_references = False  # an appendix or a known section closes the bibliography
        return Block(kind="section_header", page_number=page_number, bbox=line.bbox, text=line.text,
                     level=level, section_number=number)

    def _paragraph_blocks(self, paragraph: _Paragraph) -> list[Block]:
        first = paragraph.lines[0]
        number = paragraph.page_number
        if id(first) in self.title_ids:
            return [Block(kind="title", page_number=number, bbox=paragraph.bbox, text=paragraph.text)]
        if id(first) in self.front_ids:
            return [Block(kind="author", page_number=number, bbox=paragraph.bbox, text=paragraph.text)]
        kind: BlockKind
        if first.role == "footer":
            kind = "page_footer"
        elif first.role == "header":
            kind = "page_header"
        elif first.role == "caption":
            kind = "caption"
        elif self.in_references:
            return self._reference_blocks(paragraph)
        elif first.size <= self.style.body_size - 1.5 and self._is_footnote(paragraph):
            kind = "footnote"
        elif self.in_abstract:
            kind = "abstract"
        elif _LIST_BULLET.match(first.text):
            kind = "list_item"
        else:
            kind = "text"
        return [Block(kind=kind, page_number=number, bbox=paragraph.bbox, text=paragraph.text)]

    def _reference_blocks(self, paragraph: _Paragraph) -> list[Block]:
        """One block per bibliography entry; an entry cut by a column or page break continues with an indented
        line, which joins the entry it belongs to."""
        first = paragraph.lines[0]
        left, _ = _column_box(self.style, first.column)
        if self.last_reference is not None and first.bbox[0] > left + 2:
            self.last_reference.text = _join_lines_text([self.last_reference.text, paragraph.text])
            return []
        self.last_reference = Block(kind="reference", page_number=paragraph.page_number, bbox=paragraph.bbox,
                                    text=paragraph.text)
        return [self.last_reference]

    def _is_footnote(self, paragraph: _Paragraph) -> bool:
        first = paragraph.lines[0]
        first_span = first.spans[0]
        starts_with_mark = first_span["size"] < first.size - 0.5 or bool(re.match(r"^[\d*∗†‡§]", first.text))
        return starts_with_mark and first.bbox[1] > 0.5 * self.page_height


def _flow_role(line: _Line) -> str:
    """Body text and other free text flow into one paragraph; margins, captions and equations do not."""
    return "" if line.role == "body" else line.role


def _merge_wrapped_headings(blocks: list[Block]) -> list[Block]:
    """A heading that wrapped onto a second bold line arrives as two headings; the second has no number."""
    merged: list[Block] = []
    for block in blocks:
        previous = merged[-1] if merged else None
        if (
            previous is not None and block.kind == previous.kind == "section_header"
            and block.section_number is None and previous.page_number == block.page_number
            and -3 <= block.bbox[1] - previous.bbox[3] <= 4 and abs(block.bbox[0] - previous.bbox[0]) < 30
            and previous.level == block.level
        ):
            previous.text = f"{previous.text} {block.text}"
            previous.bbox = _union([previous.bbox, block.bbox])
            continue
        merged.append(block)
    return merged


def _equation_text(lines: list[_Line]) -> str:
    """An equation's lines top to bottom (scripts are already merged into their lines)."""
    return " ".join(line.text for line in sorted(lines, key=lambda l: (l.bbox[1], l.bbox[0])))


def _page_text_of(block: Block) -> str:
    if block.kind == "table":
        rows: dict[int, list[str]] = {}
        for cell in block.cells:
            rows.setdefault(cell.row, []).append(cell.text)
        return "\n".join(filter(None, [block.caption or "", *(" | ".join(r) for _, r in sorted(rows.items()))]))
    if block.kind == "figure":
        return block.caption or ""
    return block.text


def _region_blocks(region: _Region, page_number: int) -> list[Block]:
    """A table, or a figure followed by its panels (each pointing back at it)."""
    if region.kind == "table":
        return [Block(kind="table", page_number=page_number, bbox=region.bbox, cells=region.cells,
                      caption=region.caption, label=region.label)]
    whole = _figure_block(region, page_number, parent=None)
    return [whole, *(_figure_block(panel, page_number, parent=whole) for panel in region.panels)]


def _figure_block(region: _Region, page_number: int, parent: Block | None) -> Block:
    image_kind = "mixed" if region.has_image and region.has_drawing else "raster" if region.has_image else "vector"
    return Block(kind="figure", page_number=page_number, bbox=region.bbox, caption=region.caption,
                 label=region.label, image_kind=image_kind, parent=parent)


def _author_names(lines: list[_Line]) -> list[str]:
    """Names from the bold author lines (affiliations and e-mails are set in regular type in ACL-style papers);
    superscript marks and commas separate the names."""
    bold = [line for line in lines if line.bold_share >= 0.6 and not _EMAIL_OR_URL.search(line.text)]
    candidates = bold or [line for line in lines[:1] if not _EMAIL_OR_URL.search(line.text)]
    names: list[str] = []
    for line in candidates:
        pieces: list[str] = []
        for span in line.spans:
            if span["size"] < 0.8 * line.size:
                pieces.append("|")
            else:
                pieces.append(span["text"])
        for name in _AUTHOR_SEPARATORS.split(" ".join("".join(pieces).split())):
            name = _SCRIPT_MARKS.sub(" ", name)
            name = " ".join(name.replace("|", " ").split()).strip(" ,;")
            if len(name) > 2 and any(c.isalpha() for c in name) and name not in names:
                names.append(name)
    return names


# ------------------------------------------------------------------------------------------------ small helpers


def _union(boxes: list[Box] | Any) -> Box:
    boxes = list(boxes)
    return (
        min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes)
    )


def _area(box: Any) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _intersection(a: Box, b: Box) -> Box:
    return max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])


def _box_iou(a: Box, b: Box) -> float:
    inter = _area(_intersection(a, b))
    union = _area(a) + _area(b) - inter
    return inter / union if union > 0 else 0.0


def _contains(outer: Box, inner: Box, tolerance: float = 1.0) -> bool:
    return (outer[0] - tolerance <= inner[0] and outer[1] - tolerance <= inner[1]
            and inner[2] <= outer[2] + tolerance and inner[3] <= outer[3] + tolerance)


def _box_gap(a: Box, b: Box) -> float:
    """The white space between two boxes (0 when they touch or overlap)."""
    return max(a[0] - b[2], b[0] - a[2], a[1] - b[3], b[1] - a[3], 0.0)


def _center_box(box: Box) -> Box:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return cx, cy, cx, cy


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] + 2 and b[1] - 2 < a[3]


def _join_lines(lines: list[_Line]) -> str:
    return _join_lines_text([line.text for line in lines])


def _join_lines_text(texts: list[str]) -> str:
    """Lines of one paragraph as running text, re-joining words hyphenated at a line end."""
    out = ""
    for text in texts:
        text = text.strip()
        if not text:
            continue
        if out.endswith("-") and len(out) > 1 and out[-2].isalpha() and text[:1].islower():
            out = out[:-1] + text
        else:
            out = f"{out} {text}" if out else text
    return out


def _join_paragraphs(texts: list[str]) -> str:
    return "\n\n".join(t for t in texts if t)
