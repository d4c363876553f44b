"""The parser seam: a backend turns one inbox paper into a :class:`~paperlake.parsing.blocks.DocumentLayout`, and the
one assembler (:func:`paperlake.parsing.assemble.assemble`) turns any layout into the lake's views, so ids, chunks,
sections and table structure are made the same way whichever backend read the PDF.

A backend has a ``name`` (the lake's ``backend`` column), a ``version`` (recorded with each paper: a bump re-parses
exactly the papers it produced) and ``read_layout``. :data:`PARSERS` is the registry the pipeline asks; adding a
backend (a layout model, another converter's outputs) is one class here, with nothing to change in the pipeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from paperlake.config import Settings
from paperlake.lake.inbox import PaperSource
from paperlake.lake.views import ParsedPaper
from paperlake.parsing import versions
from paperlake.parsing.blocks import DocumentLayout
from paperlake.parsing.errors import ParseError


class ParserBackend(Protocol):
    name: str

    @property
    def version(self) -> str: ...

    def read_layout(self, source: PaperSource, settings: Settings) -> DocumentLayout: ...


class PyMuPDFParser:
    """The default: PyMuPDF's glyphs, drawings and images read with layout rules (:mod:`paperlake.parsing.pymupdf`)."""

    name = "pymupdf"

    @property
    def version(self) -> str:
        return versions.PYMUPDF

    def read_layout(self, source: PaperSource, settings: Settings) -> DocumentLayout:
        from paperlake.parsing import pymupdf_backend  # deferred: pymupdf

        return pymupdf_backend.read_layout(source.pdf_path, paper_key=source.paper_key)


class MinerUParser:
    """MinerU's outputs for the PDF (:mod:`paperlake.parsing.mineru_backend`): the ones beside the inbox, else those
    of ``PAPERLAKE_MINERU_EXECUTABLE`` run now into the home's cache."""

    name = "mineru"

    @property
    def version(self) -> str:
        return versions.MINERU

    def read_layout(self, source: PaperSource, settings: Settings) -> DocumentLayout:
        from paperlake.parsing import mineru_backend  # deferred: pymupdf

        outputs: Path | None = source.mineru_dir
        if outputs is None:
            if not settings.mineru_executable:
                raise ParseError(
                    source.paper_key,
                    "mineru",
                    "no MinerU outputs for this PDF and no PAPERLAKE_MINERU_EXECUTABLE configured to produce them",
                )
            outputs = mineru_backend.run_mineru(
                source.pdf_path,
                settings.cache / "mineru" / source.paper_key,
                settings.mineru_executable,
                [],
                paper_key=source.paper_key,
            )
        return mineru_backend.read_layout(outputs, source.pdf_path, paper_key=source.paper_key)


PARSERS: dict[str, ParserBackend] = {parser.name: parser for parser in (PyMuPDFParser(), MinerUParser())}


def auto_parser(source: PaperSource) -> str:
    """``auto``: a paper's MinerU outputs when they exist (a model-based parse someone already paid for), else the
    default parser."""
    return MinerUParser.name if source.mineru_dir is not None else PyMuPDFParser.name


def parse_with(name: str, source: PaperSource, settings: Settings) -> ParsedPaper:
    """One paper through the named backend and the assembler."""
    from paperlake.parsing.assemble import assemble  # deferred: polars

    parser = PARSERS[name]
    return assemble(
        source,
        parser.read_layout(source, settings),
        parser.name,
        parser_version=parser.version,
        max_chunk_tokens=settings.max_chunk_tokens,
    )
