"""A page's lines: PyMuPDF's glyph lines read once and merged into visual lines, the paper's columns, and which
lines are page margins or running body text."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import pymupdf

from paperlake.parsing.pymupdf.geometry import Box, _inside_any, _union

# get_text("dict") without image bytes: image boxes come from get_image_info, which is several times cheaper.
_TEXT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES
# "Table 3:", and appendix or chapter numbering: "Figure A.1.", "Table B2 |", "Figure 3.2:", "Table S1:"
_CAPTION = re.compile(r"^(Table|Tab\.|Figure|Fig\.)\s*((?:[A-Z]\.?)?\d+(?:\.\d+)?)\s*([:.|])\s*")
_BOTTOM_MARGIN_SHARE = 0.925  # below this share of the page height: page numbers and proceedings footers
_TOP_MARGIN_SHARE = 0.06
_MIN_PLOT_AREA_SIDE = 30.0  # a clip area smaller than this is a bar or a label, not a plot's axes

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

Column = Literal["left", "right", "full"]


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
    # every line of the text layer with its text, rotated ones too (a figure's words: paperlake.parsing.figure_text)
    text_lines: list[tuple[Box, str]] = field(default_factory=list)


def _read_page(page: pymupdf.Page) -> _PageContent:
    width, height = page.rect.width, page.rect.height
    raw_lines: list[_Line] = []
    rotated: list[Box] = []
    text_lines: list[tuple[Box, str]] = []
    for block in page.get_text("dict", flags=_TEXT_FLAGS)["blocks"]:
        for line in block.get("lines", []):
            spans = [s for s in line["spans"] if s["text"].strip()]
            if not spans:
                continue
            rotated_line = abs(line["dir"][1]) > 0.1
            text = " ".join("".join(s["text"] for s in spans).split()) if rotated_line else _join_spans(spans)
            text_lines.append((tuple(line["bbox"]), text))
            if rotated_line:
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
    return _PageContent(
        page.number + 1, width, height, raw_lines, rotated, images, drawings, sorted(clip_areas), text_lines
    )


def _split_stacked(spans: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """PyMuPDF sometimes puts a sentence and the display equation under it into one line; spans that share no
    height with the line so far start a line of their own."""
    parts: list[list[dict[str, Any]]] = []
    for span in spans:
        y0, y1 = span["bbox"][1], span["bbox"][3]
        home = next(
            (
                part
                for part in parts
                if min(max(s["bbox"][3] for s in part), y1) - max(min(s["bbox"][1] for s in part), y0) > 0
            ),
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
        len(s["text"].strip()) if _MATH_FONT.match(s["font"]) else len(_MATH_CHARS.findall(s["text"])) for s in spans
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


# ------------------------------------------------------------------------------------------------ document style


@dataclass
class _DocumentStyle:
    """What holds for the whole paper (body font size, column edges) and, per page, the column gutter:
    a two-column paper can still have one-column pages (appendix tables, prompts)."""

    body_size: float
    gutter: float | None
    columns: dict[Column, tuple[float, float]]
    page_gutters: dict[int, float | None] = field(default_factory=dict)
    # the paper's own way of setting captions: the delimiter after the label and the size, when most captions
    # agree (a body sentence "Table 2. …" set otherwise is no caption)
    caption_style: tuple[str, float] | None = None

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
            page.number: found[page.number]
            if found[page.number] is not None
            else None
            if gutter is None or _is_single_column(page, body_size, gutter)
            else gutter
            for page in pages
        }
        columns = _column_edges(pages, body_size, page_gutters)
        return cls(body_size, gutter, columns, page_gutters, _caption_style(pages))

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


def _caption_style(pages: list[_PageContent]) -> tuple[str, float] | None:
    """The delimiter and size that at least three quarters (and three or more) of the lines starting with a
    caption label share; None when the paper sets its captions in more than one way."""
    styles: Counter[tuple[str, float]] = Counter()
    for page in pages:
        for line in page.raw_lines:
            if match := _CAPTION.match(line.text):
                styles[(match.group(3), round(line.size * 2) / 2)] += 1
    if not styles:
        return None
    style, count = styles.most_common(1)[0]
    return style if count >= 3 and count >= 0.75 * sum(styles.values()) else None


def _text_lines(page: _PageContent, body_size: float) -> list[_Line]:
    """Lines of running text: body size or a little smaller (abstract, captions), never the larger front matter."""
    return [line for line in page.raw_lines if -1.5 <= line.size - body_size <= 0.5 and len(line.text) >= 15]


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
    """A page without a clean gutter of its own is one-column if running text crosses the paper's gutter. Text in
    a drawn frame (a page-wide prompt box) is a float's, not the page's running text."""
    frames = [rect for rect, is_box in page.drawings if is_box and rect[2] - rect[0] > 40 and rect[3] - rect[1] > 20]
    lines = [line for line in _text_lines(page, body_size) if not _inside_any(line.bbox, frames)]
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


# ------------------------------------------------------------------------------------------------ lines and body text


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
        for line in sorted(column_lines, key=lambda column_line: column_line.bbox[1]):
            if line.role or _inside_any(line.bbox, enclosures):
                previous = None
                continue
            continues = (
                _is_plain(line, style)
                and previous is not None
                and previous.role == "body"
                and abs(line.bbox[0] - left) <= 3
                and 0 <= line.bbox[1] - previous.bbox[3] <= 0.6 * line.size
            )
            if id(line) in prose_ids or continues:
                line.role = "body"
            previous = line
        # A paragraph's first line, justified with few words (wide gaps: not prose by itself), right above its body
        following: _Line | None = None
        for line in sorted(column_lines, key=lambda column_line: -column_line.bbox[1]):
            opens = (
                not line.role
                and following is not None
                and following.role == "body"
                and _is_plain(line, style)
                and line.width >= 0.6 * (_column_box(style, column)[1] - left)
                and line.bbox[0] <= left + 20
                and 0 <= following.bbox[1] - line.bbox[3] <= 0.6 * line.size
                and not _inside_any(line.bbox, enclosures)
            )
            # a short line of words that the paragraph under it goes on from (no stop at its end, the next line
            # starting where it starts): "… as we see in" over "Table 1. …"
            goes_on = (
                not line.role
                and following is not None
                and following.role == "body"
                and _is_plain(line, style)
                and abs(following.bbox[0] - line.bbox[0]) <= 3
                and 0 <= following.bbox[1] - line.bbox[3] <= 0.6 * line.size
                and line.widest_gap <= 0.6 * line.size
                and _letter_share(line) >= 0.6
                and not line.text.rstrip().endswith((".", ":"))
                and not _inside_any(line.bbox, enclosures)
            )
            if opens or goes_on:
                line.role = "body"
            following = line


def _flush_prose(lines: list[_Line], style: _DocumentStyle) -> set[int]:
    """Prose lines in runs that touch the column's left edge: a paragraph indents only its first line, while
    text inset on every line (a prompt or an example set in a frame) belongs to a figure. A run whose lines are all
    indented is a paragraph's start too when the line right under it is a plain line that starts at the edge: the
    short last line of a two-line paragraph (the "where …" after an equation)."""
    by_column: dict[Column, list[_Line]] = {}
    for line in lines:
        if _is_prose(line, style):
            by_column.setdefault(line.column, []).append(line)
    plain = [line for line in lines if not line.role and _is_plain(line, style)]
    flush: set[int] = set()
    for column, column_lines in by_column.items():
        left, _ = _column_box(style, column)

        def last_line(run: list[_Line]) -> _Line | None:
            """The paragraph's short last line right under the run, starting at the edge (a short line may be
            counted in one half of a page that has two columns elsewhere)."""
            end = run[-1]
            return next(
                (
                    other
                    for other in plain
                    if abs(other.bbox[0] - left) <= 3
                    and 0 <= other.bbox[1] - end.bbox[3] <= 0.6 * other.size
                    and other.bbox[2] <= end.bbox[2] + 3
                ),
                None,
            )

        run: list[_Line] = []
        for line in sorted(column_lines, key=lambda column_line: column_line.bbox[1]) + [None]:
            if line is not None and run and line.bbox[1] - run[-1].bbox[3] <= 0.8 * line.size:
                run.append(line)
                continue
            if run and any(abs(member.bbox[0] - left) <= 3 for member in run):
                flush |= {id(member) for member in run}
            elif run and (last := last_line(run)) is not None:
                flush |= {id(member) for member in run} | {id(last)}
            run = [line] if line is not None else []
    return flush


def _is_plain(line: _Line, style: _DocumentStyle) -> bool:
    return style.is_body_size(line.size) and line.bold_share < 0.5 and line.math_share < 0.5


def _is_prose(line: _Line, style: _DocumentStyle) -> bool:
    """A line of running text: body size, (nearly) the column's width, no table-like gaps, mostly letters (a row
    of numbers is a table row however wide it is)."""
    left, right = _column_box(style, line.column)
    return (
        _is_plain(line, style)
        and line.width >= 0.6 * (right - left)
        and line.widest_gap <= 0.6 * line.size
        and line.bbox[0] <= left + 20
        and _letter_share(line) >= 0.6
    )


def _letter_share(line: _Line) -> float:
    visible = line.text.replace(" ", "")
    return sum(char.isalpha() for char in visible) / len(visible) if visible else 0.0


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
            (r for r in rules[i + 1 :] if abs(top[0] - r[0]) < 5 and abs(top[2] - r[2]) < 5 and r[1] - top[1] > 4),
            None,
        )
        if bottom is None:
            continue
        zone = (top[0], top[1], top[2], bottom[3])
        if not any(_inside_any(line.bbox, [zone]) for line in prose):
            areas.append(zone)
    return areas
