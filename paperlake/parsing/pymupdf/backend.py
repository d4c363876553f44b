"""The parser's entry points: open and check a PDF, run the stages over its pages in order, and name the paper in
any failure."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from paperlake.lake.inbox import PaperSource
from paperlake.lake.views import ParsedPaper
from paperlake.parsing import versions
from paperlake.parsing.assemble import assemble
from paperlake.parsing.blocks import DocumentLayout
from paperlake.parsing.errors import ParseError
from paperlake.parsing.front_matter import front_matter_row
from paperlake.parsing.pymupdf.equations import _add_glyph_latex
from paperlake.parsing.pymupdf.page import _DocumentStyle, _PageContent, _read_page
from paperlake.parsing.pymupdf.structure import _analyse_page, _build_layout
from paperlake.parsing.pymupdf.tables import _fill_table_cells

PARSER_VERSION = versions.PYMUPDF  # bumped there
BACKEND = "pymupdf"

_MIN_TEXT_CHARS = 50  # fewer characters than this on the first pages: a scan without a text layer
_TEXT_CHECK_PAGES = 3


def parse(source: PaperSource, *, parser_version: str = PARSER_VERSION, max_chunk_tokens: int = 512) -> ParsedPaper:
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
            layout.front_matter = front_matter_row(document[0], layout.authors) if len(document) else {}
            stage = "latex"
            _add_glyph_latex(document, layout)
            return layout
        except ParseError:
            raise
        except Exception as error:  # a malformed page must name the paper, not crash the run
            raise ParseError(key, stage, f"{type(error).__name__}: {error}") from error


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
            key,
            "text layer",
            f"only {chars} characters of text on the first {min(len(pages), _TEXT_CHECK_PAGES)} pages: "
            "a scanned PDF without a text layer needs OCR (use the MinerU backend)",
        )
