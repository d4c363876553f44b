"""Floats: how far each table and figure reaches from its caption (which side, which graphics and text), and which
uncaptioned images are figures."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Literal

from paperlake.parsing.blocks import TableCell
from paperlake.parsing.pymupdf.captions import _caption_kind, _caption_label, _captions
from paperlake.parsing.pymupdf.geometry import (
    Box,
    _area,
    _box_gap,
    _chain_groups,
    _contains,
    _inside_any,
    _intersection,
    _union,
    _within_extent,
)
from paperlake.parsing.pymupdf.page import (
    _BOTTOM_MARGIN_SHARE,
    _column_box,
    _DocumentStyle,
    _join_lines,
    _letter_share,
    _Line,
    _PageContent,
)
from paperlake.parsing.pymupdf.panels import _MIN_FIGURE_SIDE, _Element, _split_panels

_FLOAT_GAP = 20.0  # points: the widest gap between two parts of one figure or table
_CAPTION_GAP = 26.0  # points: the widest gap between a caption and its figure or table
_BESIDE = 20.0  # points: how far apart in height the captions of two floats side by side may start

_DIGIT_HEADING = re.compile(r"^(\d+(?:\.\d+){0,3})\.?\s+(\S.*)$")


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
    detector: str = "caption_region"  # or uncaptioned_raster, uncaptioned_drawing
    text: str | None = None  # a figure's own words (paperlake.parsing.figure_text), set with the page's floats

    @property
    def caption(self) -> str | None:
        return _join_lines(self.caption_lines) or None

    @property
    def outer_bbox(self) -> Box:
        return _union([self.bbox, *(line.bbox for line in self.caption_lines)])


def _find_regions(lines: list[_Line], page: _PageContent, style: _DocumentStyle) -> list[_Region]:
    """Tables and figures, each grown from its caption over the graphics and non-body text next to it."""
    captions = _captions(lines, style)
    caption_ids = {id(line) for caption in captions for line in caption}
    elements = [_Element(line.bbox, line=line) for line in lines if id(line) not in caption_ids]
    elements += [_Element(box, is_image=True) for box in page.images]
    elements += [_Element(rect) for rect, _ in page.drawings]
    elements += [_Element(box) for box in page.rotated_text]
    algorithms = _algorithm_zones(lines, page)
    elements = [e for e in elements if not any(_contains(zone, e.bbox, 1.0) for zone in algorithms)]
    claimed: set[int] = set()
    regions = []
    # Figure captions sit under their figure almost always, table captions on either side: figures claim what is
    # above them first, so a table whose caption is on top cannot grow down into the figure below it.
    # Tables go in order of how close their content sits, so a caption between two tables gets the nearer one.
    passes: list[tuple[Literal["table", "figure"], tuple[str, ...]]] = [
        ("figure", ("up",)),
        ("table", ("up", "down")),
        ("figure", ("down",)),
        # a figure caption still without content: the text right above it (a small grid of numbers captioned as
        # a figure), now that every table has taken its own
        ("figure", ("up", "text")),
    ]
    placed: set[int] = set()
    for wanted, directions in passes:
        pending = [c for c in captions if _caption_kind(c) == wanted and id(c[0]) not in placed]
        if directions == ("up", "text"):  # not a second "Figure 5" (a body sentence that starts with the label)
            pending = [c for c in pending if _caption_label(c) not in {region.label for region in regions}]
        while pending:
            if wanted == "table":  # the order is settled anew after each table: what it claimed changes the rest
                pending.sort(key=lambda c: _nearest_content_gap(c, elements, claimed, captions, style))
            caption = pending.pop(0)
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


_ALGORITHM_CAPTION = re.compile(r"^Algorithm\s+\d+\b")


def _algorithm_zones(lines: list[_Line], page: _PageContent) -> list[Box]:
    """Ruled algorithms (``algorithm`` with ``algorithmic``): from the rule over "Algorithm N" to the second rule
    under it. No table or figure grows into one, however close it sits."""
    rules = sorted(
        (rect for rect, _ in page.drawings if rect[3] - rect[1] <= 2 and rect[2] - rect[0] >= 60),
        key=lambda rect: rect[1],
    )
    zones = []
    for line in lines:
        if not (_ALGORITHM_CAPTION.match(line.text) and line.spans and _is_bold_span(line.spans[0])):
            continue
        below = [
            rect
            for rect in rules
            if rect[1] >= line.bbox[3] - 1 and min(rect[2], line.bbox[2]) - max(rect[0], line.bbox[0]) > 0
        ]
        if len(below) >= 2:
            bottom = below[1]
            zones.append((min(line.bbox[0], bottom[0]), line.bbox[1] - 4, max(line.bbox[2], bottom[2]), bottom[3]))
    return zones


def _is_bold_span(span: dict) -> bool:
    return bool(span["flags"] & 16) or "bold" in span["font"].lower()


def _both_sides(
    caption: list[_Line],
    elements: list[_Element],
    claimed: set[int],
    captions: list[list[_Line]],
    style: _DocumentStyle,
    directions: tuple[str, ...] = ("up", "down"),
) -> tuple[list[_Element], list[_Element]]:
    """What a caption could claim above and below it, within its column (or the page width), and within its half of
    the row when another caption sits beside it (side-by-side floats, each captioned)."""
    caption_box = _union([line.bbox for line in caption])
    left, right = _side_by_side(
        caption_box, captions, *_own_half(caption, *_column_box(style, style.column_of(caption_box)))
    )
    candidates = [e for e in elements if id(e) not in claimed and _within_extent(e.bbox, left, right)]
    other_boxes = [_union([line.bbox for line in other]) for other in captions if other is not caption]
    other_boxes = [box for box in other_boxes if min(box[2], right) - max(box[0], left) > 0]
    table = _caption_kind(caption) == "table"
    above = (
        _collect(candidates, caption_box, "up", other_boxes, style, table, (left, right)) if "up" in directions else []
    )
    below = (
        _collect(candidates, caption_box, "down", other_boxes, style, table, (left, right))
        if "down" in directions
        else []
    )
    return (above if _substantive(above) else []), (below if _substantive(below) else [])


def _own_half(caption: list[_Line], left: float, right: float) -> tuple[float, float]:
    """The column span narrowed to one half for a caption wrapped within that half (two lines or more): a float set
    in a minipage beside another, whether or not the other's caption is on the same rows (one captioned above its
    float, the other below)."""
    if len(caption) < 2:
        return left, right
    middle = (left + right) / 2
    if all(line.bbox[2] <= middle + 10 for line in caption):
        return left, middle
    if all(line.bbox[0] >= middle - 10 for line in caption):
        return middle, right
    return left, right


def _side_by_side(caption_box: Box, captions: list[list[_Line]], left: float, right: float) -> tuple[float, float]:
    """The column span narrowed to this caption's share: another caption on the same rows, to one side, owns what is
    nearer to it (the boundary is midway between the two captions). Captions of floats set side by side start at
    different heights when the floats do: a caption to one side that ends within :data:`_BESIDE` of this one's rows
    counts as on them."""
    for other in captions:
        box = _union([line.bbox for line in other])
        if box == caption_box or min(box[3], caption_box[3]) - max(box[1], caption_box[1]) < -_BESIDE:
            continue
        if box[2] <= caption_box[0] and box[2] > left:
            left = max(left, (box[2] + caption_box[0]) / 2)
        elif box[0] >= caption_box[2] and box[0] < right:
            right = min(right, (caption_box[2] + box[0]) / 2)
    return left, right


def _substantive(taken: list[_Element]) -> bool:
    """Text, an image or a real shape: a lone rule (a footnote separator, an underline) is not a float."""
    return any(e.line is not None or e.is_image or _area(e.bbox) > 100 for e in taken)


def _next_caption_beyond(
    taken: list[_Element], direction: str, caption: list[_Line], captions: list[list[_Line]], style: _DocumentStyle
) -> bool:
    """Whether another caption sits right past the far end of this content, i.e. the content is probably its."""
    return _caption_beyond(taken, direction, caption, captions) is not None


def _caption_beyond(
    taken: list[_Element], direction: str, caption: list[_Line], captions: list[list[_Line]]
) -> list[_Line] | None:
    box = _union([e.bbox for e in taken])
    for other in captions:
        if other is caption:
            continue
        other_box = _union([line.bbox for line in other])
        if min(other_box[2], box[2]) - max(other_box[0], box[0]) <= 0:
            continue
        gap = box[1] - other_box[3] if direction == "up" else other_box[1] - box[3]
        if 0 <= gap <= _CAPTION_GAP:
            return other
    return None


def _has_graphics(elements: list[_Element]) -> bool:
    return any(e.line is None and (e.is_image or _area(e.bbox) > 100) for e in elements)


def _close_at_frame(
    chosen: list[_Element], caption: list[_Line], direction: str, style: _DocumentStyle
) -> list[_Element]:
    """A framed float (a prompt box, a listing in a frame; stacked frames too) ends where its frames end: text
    beyond the last frame, however close (a reference list, a heading), is not the float's. Graphics beyond it
    are: the frame is then one part of a larger figure. Frames are drawn boxes at least 60% of the column wide,
    so a flowchart's nodes are not; the content next to the caption must be framed for the rule to apply. Text
    past the frames ends the float unless it is small and right at a frame (a plot's tick labels)."""
    caption_box = _union([line.bbox for line in caption])
    left, right = _column_box(style, style.column_of(caption_box))
    frames = [e.bbox for e in chosen if e.line is None and not e.is_image and _is_frame(e.bbox, right - left)]
    if not frames:
        return chosen
    ordered = sorted(chosen, key=lambda e: -e.bbox[3] if direction == "up" else e.bbox[1])
    kept = []
    for element in ordered:
        if not any(_contains(frame, element.bbox, 2.0) for frame in frames):
            # text past the frames ends the float; graphics past them mean the frame is one part of a figure, and
            # so does small text right at a frame (an axis's tick labels under a plot's frame)
            line = element.line
            ticks = line is not None and not style.is_body_size(line.size) and _near_any(line.bbox, frames, 6.0)
            return kept if kept and line is not None and not ticks else chosen
        kept.append(element)
    return chosen


def _near_any(box: Box, frames: list[Box], distance: float) -> bool:
    return any(
        max(frame[0] - box[2], box[0] - frame[2], frame[1] - box[3], box[1] - frame[3]) <= distance for frame in frames
    )


def _is_frame(box: Box, column_width: float) -> bool:
    return box[2] - box[0] >= 0.6 * column_width and box[3] - box[1] >= 20


def _runs_into_caption(
    chosen: list[_Element],
    direction: str,
    caption: list[_Line],
    captions: list[list[_Line]],
    elements: list[_Element],
    claimed: set[int],
    style: _DocumentStyle,
) -> bool:
    """The content runs up to another caption that has nothing of its own on its far side: part of the content is
    that caption's (a table under a figure, ``Table 1`` on top and ``Table 2`` under two stacked tables). A caption
    with its own float beyond it (a table above its caption) only happens to sit near."""
    other = _caption_beyond(chosen, direction, caption, captions)
    if other is None:
        return False
    # What the other caption holds already counts as its own: a placed caption is no contender.
    other_above, other_below = _both_sides(other, elements, {id(e) for e in chosen}, captions, style)
    return not (other_below if direction == "down" else other_above)


def _nearer_its_caption(
    other: list[_Line],
    direction: str,
    elements: list[_Element],
    claimed: set[int],
    captions: list[list[_Line]],
    style: _DocumentStyle,
) -> bool:
    """``other``, a caption the content runs up to, has content on its far side too, but nearer on this side: that
    caption's float is the part next to it (a table captioned on top, over a figure whose caption is below)."""
    toward = "down" if direction == "up" else "up"
    above, below = _both_sides(other, elements, claimed, captions, style)
    far, near = (above, below) if direction == "up" else (below, above)
    return _first_gap(other, near, toward) + 3 <= _first_gap(other, far, direction)


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
    caption: list[_Line],
    elements: list[_Element],
    claimed: set[int],
    captions: list[list[_Line]],
    style: _DocumentStyle,
) -> tuple[bool, float]:
    """The order tables are placed in: captions with content on one side only first (their table is certain, and
    claiming it settles a caption between two tables), then the nearest content first."""
    above, below = _both_sides(caption, elements, claimed, captions, style)
    return bool(above) and bool(below), min(_first_gap(caption, above, "up"), _first_gap(caption, below, "down"))


def _grow_region(
    kind: Literal["table", "figure"],
    caption: list[_Line],
    elements: list[_Element],
    claimed: set[int],
    captions: list[list[_Line]],
    style: _DocumentStyle,
    directions: tuple[str, ...],
    clip_areas: list[Box],
) -> _Region | None:
    above, below = _both_sides(caption, elements, claimed, captions, style, directions)
    # a framed float ends at its frame before anything is weighed: what lies past it is not its content
    above, below = _close_at_frame(above, caption, "up", style), _close_at_frame(below, caption, "down", style)
    gap_above, gap_below = _first_gap(caption, above, "up"), _first_gap(caption, below, "down")
    contested_above = above and _runs_into_caption(above, "up", caption, captions, elements, claimed, style)
    contested_below = below and _runs_into_caption(below, "down", caption, captions, elements, claimed, style)
    span = _column_box(style, style.column_of(_union([line.bbox for line in caption])))
    text_above, text_below = _mostly_text(above, span, style), _mostly_text(below, span, style)
    if above and below and contested_above != contested_below:
        chosen = below if contested_above else above  # the other side's content has its own caption
    elif above and below and text_above != text_below:
        chosen = below if text_above else above  # running text on one side (a reference list), the float beyond
    elif abs(gap_above - gap_below) >= 3:
        chosen = above if gap_above < gap_below else below
    else:
        chosen = above if _content_weight(above) >= _content_weight(below) else below
    if not chosen:
        return None
    if directions == ("up", "text") and not _grid_of_text(chosen, style.body_size):
        return None
    if kind == "figure" and directions == ("up",) and not _has_graphics(chosen):  # ("up", "text"): text will do
        _, below = _both_sides(caption, elements, claimed, captions, style, ("down",))
        grid_above = _grid_of_text(chosen, style.body_size)
        grid_nearer = grid_above and _first_gap(caption, chosen, "up") + 5 <= _first_gap(caption, below, "down")
        if _has_graphics(below) and not grid_nearer:
            return None  # text above, the graphics below: a caption set above its figure; try below later
        grid_below = below and not _has_graphics(below) and _grid_of_text(below, style.body_size)
        if grid_below and not grid_above and _caption_beyond(below, "down", caption, captions) is None:
            return None  # a few words above (another figure's legend), a grid of text below: the caption's
    direction = "up" if chosen is above else "down"
    table_captions = [other for other in captions if _caption_kind(other) == "table"]
    if kind == "figure" and (
        _runs_into_caption(chosen, direction, caption, table_captions, elements, claimed, style)
        or (beyond := _caption_beyond(chosen, direction, caption, table_captions)) is not None
        and _nearer_its_caption(beyond, direction, elements, claimed, captions, style)
    ):
        nearer = _nearer_part(chosen, direction)  # figures claim first; leave a table its rows
        if len(nearer) == len(chosen) and directions == ("up",):
            return None  # all of it runs up to a table's caption: the table's; try below this caption later
        chosen = nearer
    elif kind == "figure" and _runs_into_caption(chosen, direction, caption, captions, elements, claimed, style):
        # up to another figure's caption with nothing beyond it (one captioned above its panels): that figure's
        chosen = _nearer_part(chosen, direction)
    elif kind == "table" and _runs_into_caption(chosen, direction, caption, captions, elements, claimed, style):
        chosen = _nearer_part(chosen, direction)
    chosen = _close_at_frame(chosen, caption, direction, style)
    claimed |= {id(e) for e in chosen}
    region = _region_of(kind, caption, chosen)
    panels = _split_panels(chosen, clip_areas) if kind == "figure" else []
    if len(panels) >= 2:
        region.panels = [_region_of(kind, caption, panel) for panel in panels]
    return region


def _grid_of_text(elements: list[_Element], body_size: float) -> bool:
    """Text that can be a figure without graphics: two rows or more, none of them prose (a small grid of numbers,
    not the end of a paragraph)."""
    box = _union([e.bbox for e in elements])
    lines = [e.line for e in elements if e.line is not None]
    return box[3] - box[1] >= 1.5 * body_size and not any(_reads_as_prose(line) for line in lines)


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


def _collect(
    candidates: list[_Element],
    caption_box: Box,
    direction: str,
    other_captions: list[Box],
    style: _DocumentStyle,
    table: bool,
    span: tuple[float, float],
) -> list[_Element]:
    """Walk away from the caption, taking elements until a gap wider than a float's or running body text, and
    none past another caption over it (a caption beside the way, over other columns, leaves the way open). A table
    also ends, once it has rows, at prose reaching past them (the last line of a paragraph, a footnote); a figure
    with graphics at a line of text run across its whole span at the body's size (a reference list's entry).
    """
    body_size = style.body_size

    def limit(element: _Element) -> float:
        over = [box for box in other_captions if min(box[2], element.bbox[2]) - max(box[0], element.bbox[0]) >= 0]
        if direction == "up":
            return max((box[3] for box in over if box[3] <= caption_box[1]), default=-1.0)
        return min((box[1] for box in over if box[1] >= caption_box[3]), default=1e9)

    if direction == "up":
        side = [e for e in candidates if e.bbox[3] <= caption_box[1] + 2]
        side.sort(key=lambda e: -e.bbox[3])
    else:
        side = [e for e in candidates if e.bbox[1] >= caption_box[3] - 2]
        side.sort(key=lambda e: e.bbox[1])
    edge = caption_box[1] if direction == "up" else caption_box[3]
    row_edge, row_start = edge, None  # the edge before the row now being taken began, and what began it
    taken: list[_Element] = []
    x_lo, x_hi = float("inf"), float("-inf")  # what is taken, kept as it grows (the walk is long in a big table)
    graphics, cells_only = False, True
    for element in side:
        gap = edge - element.bbox[3] if direction == "up" else element.bbox[1] - edge
        if gap > (_FLOAT_GAP if taken else _CAPTION_GAP):
            break
        beyond_caption = element.bbox[1] < limit(element) if direction == "up" else element.bbox[3] > limit(element)
        if beyond_caption:
            continue
        line = element.line
        inside = gap < 0  # within the height the figure already covers, e.g. a legend inside the axes
        if line is not None and (line.role in {"footer", "header"} or line.role == "body" and not inside):
            break
        if (
            line is not None
            and (_looks_like_heading(line, body_size) or _is_section_title(line, body_size))
            and not inside
        ):
            break
        # a line on the row just begun (by a piece on its row, after other rows) is checked as if that row were not
        # taken yet
        begun = line is not None and (
            not inside
            or row_start is not None
            and _same_row(row_start, line.bbox)
            and (line.bbox[3] <= row_edge + 1 if direction == "up" else line.bbox[1] >= row_edge - 1)
        )
        if table:
            ends = begun and len(taken) >= 4 and _beyond_rows(line, (x_lo, x_hi), style)
        else:
            ends = begun and bool(taken) and (graphics or cells_only) and _spans_as_text(line, span, style)
        if ends:
            # the row's pieces taken before this line are the same running text
            while taken and taken[-1].line is not None and _same_row(taken[-1].bbox, line.bbox):
                taken.pop()
            break
        if not inside:
            row_edge, row_start = edge, (element.bbox if taken else None)
        taken.append(element)
        edge = min(edge, element.bbox[1]) if direction == "up" else max(edge, element.bbox[3])
        x_lo, x_hi = min(x_lo, element.bbox[0]), max(x_hi, element.bbox[2])
        graphics = graphics or element.line is None and (element.is_image or _area(element.bbox) > 100)
        cells_only = cells_only and (line is None or line.width <= 0.5 * (span[1] - span[0]))
    return taken


def _same_row(a: Box, b: Box) -> bool:
    return min(a[3], b[3]) - max(a[1], b[1]) >= 0.5 * min(a[3] - a[1], b[3] - b[1])


_STOP_SPACE = re.compile(r"([.;:,])\s{2,}")
_PROSE_WORD = re.compile(r"^[A-Za-z][a-z]+[,.;:]?$|^[a-z]+-$")


def _mostly_text(elements: list[_Element], span: tuple[float, float], style: _DocumentStyle) -> bool:
    """Most of the lines are running text (:func:`_spans_as_text`) and nothing else is drawn but rules."""
    lines = [e.line for e in elements if e.line is not None]
    if not lines or _has_graphics(elements):
        return False
    return sum(_spans_as_text(line, span, style) for line in lines) >= 0.6 * len(lines)


def _spans_as_text(line: _Line, span: tuple[float, float], style: _DocumentStyle) -> bool:
    """A line of text across (nearly) the whole span at the body's size, set as one run, or one that reads as a
    sentence or its end: running text, not a figure's label or a row of legend entries."""
    if not style.is_body_size(line.size):
        return False
    across = line.width >= 0.85 * (span[1] - span[0]) and line.widest_gap <= 0.6 * line.size
    return across and _letter_share(line) >= 0.6 or _reads_as_prose(line)


def _beyond_rows(line: _Line, extent: tuple[float, float], style: _DocumentStyle) -> bool:
    """Prose (:func:`_reads_as_prose`, or text run across its own column) reaching past the table's rows taken so
    far (their ``extent`` across), on either side: a paragraph, a footnote or a reference list beside the table, not
    one of its text cells (which lie within its columns)."""
    x0, x1 = extent
    if not (line.bbox[0] < x0 - 5 or line.bbox[2] > x1 + 5):
        return False
    return _reads_as_prose(line) or _spans_as_text(line, _column_box(style, line.column), style)


def _reads_as_prose(line: _Line) -> bool:
    """Set as one run (not a row of cells) and either six words or more, nearly all of them lower-case words (a
    sentence), four or more words ending in a hyphenated break, or the end of a sentence: lower-case words only,
    the first lower-case too, and a full stop (a paragraph's last line)."""
    text = _STOP_SPACE.sub(r"\1 ", line.text)  # a justified line's wide space after a full stop
    words = text.split()
    if len(words) < 2 or "  " in text:
        return False
    prose = [bool(_PROSE_WORD.match(word)) for word in words]
    if len(words) >= 6:
        return sum(prose) >= 0.85 * len(words)
    if len(words) >= 4 and all(prose) and re.search(r"[a-z]-$", text.rstrip()):
        return True  # words broken at the line's end: a paragraph's line, which a cell never is
    return all(prose) and words[0][0].islower() and line.text.rstrip().endswith(".")


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
            figures.append(_Region("figure", box, [], None, has_image=True, detector="uncaptioned_raster"))
            covered.append(box)
    return figures


_APPENDIX_HEADING = re.compile(r"^[A-Z](?:\.\d+){0,3}\.?\s+[A-Z]\S*")  # "C Quantitative Analysis", "B.2 Data"


def _is_section_title(line: _Line, body_size: float) -> bool:
    """An unnumbered heading ("References", "Acknowledgments"): short, bold and larger than the body text."""
    return line.bold_share >= 0.9 and line.size >= body_size + 1 and len(line.text) < 60


def _looks_like_heading(line: _Line, body_size: float | None = None) -> bool:
    """A numbered heading ("3.2 Results", "B Baselines"): bold, or (given the body's size) set well above it."""
    numbered = _DIGIT_HEADING.match(line.text) or _APPENDIX_HEADING.match(line.text)
    larger = body_size is not None and line.size >= body_size + 2
    return (line.bold_share >= 0.9 or larger) and bool(numbered) and len(line.text) < 80


# ------------------------------------------------------------------------------------------------ diagrams

_DIAGRAM_LINK_GAP = 12.0  # points: drawn parts of one diagram (nodes, the edges between them) are this close
_DIAGRAM_LABEL_REACH = 6.0  # points: a node's label sits on or right beside its drawing
_MIN_DIAGRAM_PARTS = 3
_MIN_DIAGRAM_WIDTH, _MIN_DIAGRAM_HEIGHT = 40.0, 10.0
_MAX_DIAGRAM_WORDS = 30  # node labels are a few words each; more is a framed passage of text
_WORD = re.compile(r"[A-Za-z]{3,}")


def _uncaptioned_diagrams(
    page: _PageContent, regions: list[_Region], equation_boxes: list[Box], free: list[_Line], body_size: float
) -> list[_Region]:
    """Vector drawings no caption claimed (a tree, a flowchart, an example drawn in the text flow) are figures
    too: drawn parts a few points apart form one diagram, and the free text on them (node labels) is its text.
    What is not a diagram: rules alone (a table's or a footnote's lines, all horizontal or vertical), drawing
    under running text (a shaded paragraph, highlighted words), a fraction bar or a root's sign in an equation,
    and anything a region already holds."""
    taken = [region.bbox for region in regions] + equation_boxes
    parts = [
        rect
        for rect, _ in page.drawings
        if not any(_contains(area, rect, 2.0) for area in taken) and _area(rect) < 0.5 * page.width * page.height
    ]
    body = [line for line in free if line.role == "body"]
    # what may not lie between a figure and a drawing for them to be one: text that is not a label, other floats
    blockers = [line.bbox for line in free if line.role in {"body", "caption"}] + [r.outer_bbox for r in regions]
    labels = [  # node labels: free text at most the body's size, not a heading (bold and larger)
        line for line in free if not line.role and not _looks_like_heading(line) and line.size <= body_size + 0.5
    ]
    label_boxes = [line.bbox for line in labels]
    # An image no caption reached, right above a figure whose caption did (its legend alone between them): the
    # figure's upper part, as a drawing would be (below). ``regions`` loses it.
    for raster in [r for r in regions if r.detector == "uncaptioned_raster"]:
        others = [box for box in blockers if box != raster.outer_bbox]
        figure = next(
            (r for r in regions if r.kind == "figure" and _split_above(r, raster.bbox, others, label_boxes, body_size)),
            None,
        )
        if figure is not None:
            figure.bbox = _union([figure.bbox, raster.bbox])
            figure.has_image = True
            held = {id(line) for line in figure.lines}
            figure.lines += [x for x in labels if id(x) not in held and _contains(figure.bbox, x.bbox, 1.0)]
            regions.remove(raster)
    found: list[tuple[Box, list[_Line], list[Box]]] = []
    for cluster in _link(parts, _DIAGRAM_LINK_GAP):
        box = _union(cluster)
        if any(_area(_intersection(box, line.bbox)) > 0.3 * _area(line.bbox) for line in body):
            continue  # running text over the drawing: a shaded paragraph, not a diagram
        found.append((box, [], cluster))
    # Labels join the drawing they sit on, and parts that labels connect (a tree's subtrees) join each other.
    changed = True
    while changed:
        changed = False
        for index, (box, inside, rects) in enumerate(found):
            reach = (
                box[0] - 2 * _DIAGRAM_LABEL_REACH,
                box[1] - _DIAGRAM_LABEL_REACH,
                box[2] + 2 * _DIAGRAM_LABEL_REACH,
                box[3] + _DIAGRAM_LABEL_REACH,
            )
            taken = {id(line) for _, lines, _ in found for line in lines}
            new = [line for line in labels if id(line) not in taken and _inside_any(line.bbox, [reach])]
            if new:
                found[index] = (_union([box, *(line.bbox for line in new)]), inside + new, rects)
                changed = True
        for i, j in itertools.combinations(range(len(found)), 2):
            if _box_gap(found[i][0], found[j][0]) <= _DIAGRAM_LABEL_REACH:
                (box_i, lines_i, rects_i), (box_j, lines_j, rects_j) = found[i], found[j]
                found[i] = (_union([box_i, box_j]), lines_i + lines_j, rects_i + rects_j)
                del found[j]
                changed = True
                break
    diagrams = []
    for box, inside, rects in found:
        figure = next(
            (
                region
                for region in regions
                if region.kind == "figure"
                and (
                    _continues(region.bbox, box)
                    # (rules alone are another float's frame, an algorithm's or a table's, not a plot)
                    or (
                        not all(_is_rule(rect) for rect in rects)
                        and _split_above(region, box, blockers, label_boxes, body_size)
                    )
                )
            ),
            None,
        )
        if figure is not None:  # a drawing that runs on past its figure's column edge is still that figure
            figure.bbox = _union([figure.bbox, box])
            taken = {id(line) for line in figure.lines}
            figure.lines += [line for line in inside if id(line) not in taken]
            taken |= {id(line) for line in inside}
            # and the labels between its parts (an axis's title and ticks between a plot and its legend)
            figure.lines += [x for x in labels if id(x) not in taken and _contains(figure.bbox, x.bbox, 1.0)]
            continue
        words = sum(len(_WORD.findall(line.text)) for line in inside)
        if (
            len(rects) >= _MIN_DIAGRAM_PARTS
            and not all(_is_rule(rect) for rect in rects)
            and box[2] - box[0] >= _MIN_DIAGRAM_WIDTH
            and box[3] - box[1] >= _MIN_DIAGRAM_HEIGHT
            and words <= _MAX_DIAGRAM_WORDS  # a frame around running text (an example, a quote) stays text
        ):
            diagrams.append(
                _Region(
                    kind="figure",
                    bbox=box,
                    caption_lines=[],
                    label=None,
                    lines=inside,
                    has_drawing=True,
                    detector="uncaptioned_drawing",
                )
            )
    return diagrams


_SPLIT_GAP = 50.0  # points: the widest blank between the parts of a figure that its caption's region left apart
_STRIP_LINES = 3.0  # body sizes: the tallest a legend strip that a caption's region reached alone can be


def _split_above(
    figure: _Region, part: Box, blockers: list[Box], labels: list[Box] = (), body_size: float = 10.0
) -> bool:
    """A drawing or image right above a captioned figure whose caption is under it, over the same columns, with
    nothing between (no running text, caption or other float): the figure's upper part (a plot set apart from its
    legend, which alone reached the caption). The caption under the figure is what makes it one: a caption above
    would sit between the two. The figure is then a strip (a legend's row or two): a whole figure under an
    uncaptioned drawing (a parse tree between two paragraphs) is two objects. Labels between them (an axis's ticks
    and title) bridge the blank: what may not exceed :data:`_SPLIT_GAP` is the widest blank left between the part,
    the labels and the figure."""
    if not figure.caption_lines or min(line.bbox[1] for line in figure.caption_lines) < figure.bbox[3] - 2:
        return False
    if figure.bbox[3] - figure.bbox[1] > _STRIP_LINES * body_size:
        return False
    gap = figure.bbox[1] - part[3]
    overlap = min(figure.bbox[2], part[2]) - max(figure.bbox[0], part[0])
    narrower = min(figure.bbox[2] - figure.bbox[0], part[2] - part[0])
    if gap < -2 or overlap < 0.5 * narrower:
        return False
    between = (max(figure.bbox[0], part[0]), part[3], min(figure.bbox[2], part[2]), figure.bbox[1])
    if any(_area(_intersection(between, box)) > 0 for box in blockers):
        return False
    edge, widest = part[3], 0.0
    for label in sorted((b for b in labels if _area(_intersection(between, b)) > 0), key=lambda b: b[1]):
        widest, edge = max(widest, label[1] - edge), max(edge, label[3])
    return max(widest, figure.bbox[1] - edge) <= _SPLIT_GAP


def _continues(figure: Box, part: Box) -> bool:
    """Side by side and touching, on the same rows: one drawing cut in two by a column edge."""
    rows = min(figure[3], part[3]) - max(figure[1], part[1])
    return _box_gap(figure, part) <= _DIAGRAM_LABEL_REACH and rows >= 0.5 * (part[3] - part[1])


def _is_rule(rect: Box) -> bool:
    return rect[2] - rect[0] <= 2 or rect[3] - rect[1] <= 2


def _link(boxes: list[Box], gap: float) -> list[list[Box]]:
    """Boxes joined into groups where a chain of boxes at most ``gap`` apart connects them."""
    return _chain_groups(boxes, lambda box: box, gap, lambda a, b: _box_gap(a, b) <= gap)
