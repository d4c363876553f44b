"""The default parser's original import path, kept for callers: the parser lives in :mod:`paperlake.parsing.pymupdf`.

``PARSER_VERSION`` is re-exported from :mod:`paperlake.parsing.versions`, where the pipeline reads it (and tests patch
it)."""

from paperlake.parsing.pymupdf.backend import BACKEND, PARSER_VERSION, parse, read_layout
from paperlake.parsing.pymupdf.equations import equation_spans
from paperlake.parsing.pymupdf.panels import _Element, _whitest_cut

__all__ = ["BACKEND", "PARSER_VERSION", "equation_spans", "parse", "read_layout", "_Element", "_whitest_cut"]
