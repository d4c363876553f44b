"""Reading order and structure: the order of a page's floats, equations and lines, then the typed blocks they
become (title, authors, headings, paragraphs, abstract, footnotes, bibliography entries)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from paperlake.parsing.blocks import Block, BlockKind, DocumentLayout, PageInfo
from paperlake.parsing.figure_text import text_inside
from paperlake.parsing.pymupdf.equations import _Equation, _equation_text, _find_equations
from paperlake.parsing.pymupdf.geometry import Box, _union
from paperlake.parsing.pymupdf.page import (
    _CAPTION,
    Column,
    _column_box,
    _DocumentStyle,
    _join_lines,
    _join_lines_text,
    _join_paragraphs,
    _Line,
    _mark_body_text,
    _mark_margins,
    _PageContent,
    _visual_lines,
)
from paperlake.parsing.pymupdf.regions import _DIGIT_HEADING, _find_regions, _Region, _uncaptioned_diagrams

_LETTER_HEADING = re.compile(r"^([A-Z](?:\.\d+){0,3})\.?\s+(\S.*)$")
_UNNUMBERED_SECTIONS = frozenset(
    {
        "abstract",
        "introduction",
        "references",
        "bibliography",
        "acknowledgments",
        "acknowledgements",
        "acknowledgment",
        "acknowledgement",
        "limitations",
        "limitation",
        "ethicsstatement",
        "ethicalconsiderations",
        "ethicsconsiderations",
        "broaderimpact",
        "broaderimpacts",
        "conclusion",
        "conclusions",
        "appendix",
        "appendices",
        "relatedwork",
        "supplementarymaterial",
        "impactstatement",
        "ethics",
    }
)
_REFERENCE_HEADINGS = frozenset({"references", "bibliography", "referencesandnotes"})

_LIST_BULLET = re.compile(r"^(?:[•◦▪‣∙·●○■□–—\-*]|\(?\d{1,2}[.)]|\(?[a-z][.)]|\([ivx]+\))\s+")
_SCRIPT_MARKS = re.compile(r"[\d*∗†‡§¶#♠♣♥♦⋆★✝,]+")
_AUTHOR_SEPARATORS = re.compile(r"\s*(?:,|;|\band\b|&|\|)\s*")
_EMAIL_OR_URL = re.compile(r"@|https?://|www\.|\.com\b|\.edu\b|\.org\b")


# ------------------------------------------------------------------------------------------------ reading order


@dataclass
class _PageAnalysis:
    content: _PageContent
    style: _DocumentStyle
    regions: list[_Region]
    free_lines: list[_Line]  # lines in no region or equation, in reading order
    order: list[Any]  # regions, equations and free lines, in reading order


def _analyse_page(page: _PageContent, style: _DocumentStyle) -> _PageAnalysis:
    lines = _visual_lines(page.raw_lines, style)
    _mark_margins(lines, page)
    _mark_body_text(lines, page, style)
    regions = _find_regions(lines, page, style)
    claimed = {id(line) for region in regions for line in (*region.lines, *region.caption_lines)}
    remaining = [line for line in lines if id(line) not in claimed]
    equations = _find_equations(remaining, page, style)
    claimed |= {id(line) for equation in equations for line in (*equation.lines, *equation.number_lines)}
    diagrams = _uncaptioned_diagrams(
        page,
        regions,
        [equation.bbox for equation in equations],
        [line for line in lines if id(line) not in claimed],
        style.body_size,
    )
    regions += diagrams
    claimed |= {id(line) for region in regions for line in region.lines}  # a figure may have taken a drawing's
    free = [line for line in lines if id(line) not in claimed]
    prose = [line.bbox for line in free if line.role == "body"]  # a figure's box may reach over running text
    _set_figure_text(regions, page, prose)
    order = _reading_order([*regions, *equations, *free], style)
    free_in_order = [item for item in order if isinstance(item, _Line)]
    return _PageAnalysis(page, style, regions, free_in_order, order)


def _set_figure_text(regions: list[_Region], page: _PageContent, body: list[Box]) -> None:
    """Each figure's and panel's words; captions, tables (a table set inside a figure's box is its own row) and the
    running text ``body`` a box may overlap left out."""
    captions = [line.bbox for region in regions for line in region.caption_lines] + body
    tables = [region.bbox for region in regions if region.kind == "table"]
    for region in regions:
        if region.kind != "figure":
            continue
        exclude = captions + [box for box in tables if not _holds(box, region.bbox)]
        for figure in (region, *region.panels):
            figure.text = text_inside(page.text_lines, figure.bbox, exclude)


def _holds(box: Box, inner: Box) -> bool:
    """Whether ``inner`` lies inside ``box`` (a table box holding the whole figure is no table inside it)."""
    return box[0] <= inner[0] and box[1] <= inner[1] and box[2] >= inner[2] and box[3] >= inner[3]


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
    infos = [PageInfo(page.number, page.width, page.height, builder.page_text.get(page.number, "")) for page in pages]
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
            line
            for line in first.free_lines
            if line.bbox[3] < 0.4 * page.height and line.role not in {"header", "footer"}
        ]
        if not top_lines:
            return None, []
        largest = max(line.size for line in top_lines)
        if largest < self.style.body_size + 1.5:
            return None, []
        title_lines = sorted((line for line in top_lines if line.size >= largest - 0.5), key=lambda line: line.bbox[1])
        title_lines = [line for line in title_lines if line.bbox[1] - title_lines[0].bbox[3] < 3 * largest]
        title_bottom = max(line.bbox[3] for line in title_lines)
        end = min(
            (
                line.bbox[1]
                for line in first.free_lines
                if line.bbox[1] > title_bottom and self._ends_front_matter(line)
            ),
            default=0.4 * page.height,
        )
        author_lines = sorted(
            (
                line
                for line in top_lines
                if title_bottom < line.bbox[1] < end and id(line) not in {id(t) for t in title_lines}
            ),
            key=lambda line: (round((line.bbox[1] + line.bbox[3]) / 8), line.bbox[0]),  # rows of names, left to right
        )
        self.title_ids = {id(line) for line in title_lines}
        self.front_ids = self.title_ids | {id(line) for line in author_lines}
        title = " ".join(line.text for line in title_lines)
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
                page_blocks.append(
                    Block(
                        kind="equation",
                        page_number=number,
                        bbox=item.bbox,
                        text=_equation_text(item.lines),
                        equation_number=item.number,
                        detector="display_math",
                    )
                )
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
        return Block(
            kind="section_header",
            page_number=page_number,
            bbox=line.bbox,
            text=line.text,
            level=level,
            section_number=number,
        )

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
        self.last_reference = Block(
            kind="reference", page_number=paragraph.page_number, bbox=paragraph.bbox, text=paragraph.text
        )
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
            previous is not None
            and block.kind == previous.kind == "section_header"
            and block.section_number is None
            and previous.page_number == block.page_number
            and -3 <= block.bbox[1] - previous.bbox[3] <= 4
            and abs(block.bbox[0] - previous.bbox[0]) < 30
            and previous.level == block.level
        ):
            previous.text = f"{previous.text} {block.text}"
            previous.bbox = _union([previous.bbox, block.bbox])
            continue
        merged.append(block)
    return merged


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
        return [
            Block(
                kind="table",
                page_number=page_number,
                bbox=region.bbox,
                cells=region.cells,
                caption=region.caption,
                label=region.label,
                detector=region.detector,
            )
        ]
    whole = _figure_block(region, page_number, parent=None)
    return [whole, *(_figure_block(panel, page_number, parent=whole) for panel in region.panels)]


def _figure_block(region: _Region, page_number: int, parent: Block | None) -> Block:
    image_kind = "mixed" if region.has_image and region.has_drawing else "raster" if region.has_image else "vector"
    return Block(
        kind="figure",
        page_number=page_number,
        bbox=region.bbox,
        caption=region.caption,
        label=region.label,
        image_kind=image_kind,
        parent=parent,
        detector=region.detector,
        figure_text=region.text,
    )


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
