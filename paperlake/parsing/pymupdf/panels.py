"""Figures of several plots: where a figure is cut into one panel per plot, and what belongs to no single plot."""

from __future__ import annotations

from dataclasses import dataclass

from paperlake.parsing.pymupdf.captions import _SUBCAPTION
from paperlake.parsing.pymupdf.geometry import (
    Box,
    _area,
    _box_gap,
    _box_iou,
    _center_box,
    _contains,
    _distance,
    _intersection,
    _projections_overlap,
    _union,
)
from paperlake.parsing.pymupdf.page import _Line

_MIN_FIGURE_SIDE = 40.0  # an uncaptioned image smaller than this is an icon, not a figure
_PANEL_GAP = 4.0  # points of white space that separate two plots of one figure
_FINE_PANEL_GAP = 1.5  # ... or that separate plots packed tightly in a grid
_MIN_PLOT_SIDE = 70.0  # a plot cut at the fine gap must be at least this big
_MIN_PLOT_AREA_SHARE = 0.25  # the plot areas of a figure of plots cover at least this share of it
_FACET_GAP = 8.0  # plot areas closer than this are facets of one chart sharing its axes
_SHARED_REACH = 0.15  # an element reaching this share across two plots' extents belongs to both


@dataclass
class _Element:
    bbox: Box
    line: _Line | None = None
    is_image: bool = False


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
    if any(
        _area(_intersection(a, b)) > 0.1 * min(_area(a), _area(b)) or _box_gap(a, b) < _FACET_GAP
        for i, a in enumerate(plots)
        for b in plots[i + 1 :]
    ):
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
        reached = [
            p
            for p in plots
            if min(bbox[axis + 2], p[axis + 2]) - max(bbox[axis], p[axis]) > _SHARED_REACH * (p[axis + 2] - p[axis])
        ]
        if any(_apart(a, b, axis) for i, a in enumerate(reached) for b in reached[i + 1 :]):
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
    subcaptions = {id(e) for e in elements if best_axis == 1 and e.line is not None and _SUBCAPTION.match(e.line.text)}
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
