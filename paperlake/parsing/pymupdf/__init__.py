"""The default parser: PyMuPDF's glyphs, drawings and image boxes read with layout rules, no models.

Speed is the point (the whole corpus must parse several times faster than MinerU), so each page is read once with
``get_text("dict")`` plus its drawings and image boxes, and everything else — columns, reading order, headings,
captions, float regions, display equations, bibliography entries — is inferred from fonts and geometry.
``find_tables`` only runs inside table regions found from a "Table N" caption, clipped to that region.

Glyph-level LaTeX reconstruction happens later and elsewhere: :func:`equation_spans` returns the raw glyph spans
(with per-character boxes, fonts and origins) inside an equation's bbox, so that work reads the same PDF again by
page number and bbox instead of re-running this parser; :func:`grid_in_box` reads a table's grid the same way, for a
table another backend found.

The stages, each a module, in the order a page goes through them: :mod:`.page` (lines, columns, margins, body
text), :mod:`.captions`, :mod:`.regions` (tables and figures grown from their captions, cut into plots by
:mod:`.panels`), :mod:`.equations`, :mod:`.structure` (reading order and typed blocks) and :mod:`.tables` (cells);
:mod:`.backend` runs them, :mod:`.geometry` holds the box helpers they share.
"""

from paperlake.parsing.pymupdf.backend import BACKEND, PARSER_VERSION, parse, read_layout
from paperlake.parsing.pymupdf.equations import equation_spans
from paperlake.parsing.pymupdf.tables import box_words, grid_in_box

__all__ = ["BACKEND", "PARSER_VERSION", "box_words", "equation_spans", "grid_in_box", "parse", "read_layout"]
