"""What a backend hands to the assembler: page facts and a reading-order stream of typed blocks.

Backends differ in how they find things (PyMuPDF glyphs and drawings, MinerU's layout models); everything after
that — sections, chunks, ids, ordinals, the views — is built once, in :mod:`paperlake.parsing.assemble`.
Coordinates are PDF points, top-left origin, ``(x0, y0, x1, y1)``; pages are numbered from 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

BlockKind = Literal[
    "title",  # the paper title (page 1)
    "author",  # author / affiliation lines (page 1)
    "abstract",  # abstract body text
    "section_header",  # a heading; ``level`` 1 = section, 2 = subsection, ...
    "text",  # body paragraph
    "list_item",
    "caption",  # a caption that could not be attached to a table/figure
    "footnote",
    "equation",  # display equation; ``latex`` when known, ``equation_number`` like "(3)"
    "table",  # ``html`` + ``cells`` + ``caption`` + ``label`` ("Table 3")
    "figure",  # raster or vector figure; ``caption`` + ``label`` ("Figure 2"); ``image_kind``; a panel
    # (one plot of a figure of several) names its whole figure in ``parent``
    "reference",  # one bibliography entry
    "page_header",
    "page_footer",
]


@dataclass
class TableCell:
    row: int
    col: int
    text: str
    rowspan: int = 1
    colspan: int = 1
    is_header: bool = False


@dataclass
class Block:
    kind: BlockKind
    page_number: int
    bbox: tuple[float, float, float, float]
    text: str = ""
    level: int | None = None
    section_number: str | None = None
    latex: str | None = None
    equation_number: str | None = None
    html: str | None = None
    cells: list[TableCell] = field(default_factory=list)
    caption: str | None = None
    label: str | None = None
    image_kind: str | None = None  # "raster" | "vector" | "mixed"
    # Which detector found a table, figure or equation (see paperlake.parsing.DETECTORS); None for text blocks.
    detector: str | None = None
    # A panel's whole figure: an earlier figure block on the same page whose box holds the panel's. The whole
    # figure is one row (for counting figures), each panel another (for finding one plot).
    parent: Block | None = field(default=None, repr=False, compare=False)
    # A figure's (or panel's) own words in reading order: labels, ticks, legend (paperlake.parsing.figure_text)
    figure_text: str | None = None


@dataclass
class PageInfo:
    page_number: int
    width: float
    height: float
    text: str


@dataclass
class DocumentLayout:
    """Everything a backend found in one PDF, before assembly."""

    pages: list[PageInfo]
    blocks: list[Block]
    title: str | None = None
    authors: list[str] = field(default_factory=list)
    abstract: str | None = None
    # page 1's affiliations and e-mail addresses (paperlake.parsing.front_matter.front_matter_row's columns)
    front_matter: dict = field(default_factory=dict)
