"""Boxes: ``(x0, y0, x1, y1)`` in PDF points, origin top-left, and the measures the layout rules take of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

# the basic measures are the library's (paperlake.parsing.geometry); this package's modules know them by these names
from paperlake.parsing.geometry import Box
from paperlake.parsing.geometry import area as _area  # noqa: F401
from paperlake.parsing.geometry import intersection as _intersection  # noqa: F401
from paperlake.parsing.geometry import iou as _box_iou  # noqa: F401
from paperlake.parsing.geometry import union as _union  # noqa: F401

T = TypeVar("T")


def _contains(outer: Box, inner: Box, tolerance: float = 1.0) -> bool:
    return (
        outer[0] - tolerance <= inner[0]
        and outer[1] - tolerance <= inner[1]
        and inner[2] <= outer[2] + tolerance
        and inner[3] <= outer[3] + tolerance
    )


def _box_gap(a: Box, b: Box) -> float:
    """The white space between two boxes (0 when they touch or overlap)."""
    return max(a[0] - b[2], b[0] - a[2], a[1] - b[3], b[1] - a[3], 0.0)


def _center_box(box: Box) -> Box:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return cx, cy, cx, cy


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] + 2 and b[1] - 2 < a[3]


def _distance(a: Box, b: Box) -> float:
    dx = max(0.0, b[0] - a[2], a[0] - b[2])
    dy = max(0.0, b[1] - a[3], a[1] - b[3])
    return dx + dy


def _projections_overlap(a: Box, b: Box) -> bool:
    x_overlap = min(a[2], b[2]) - max(a[0], b[0])
    y_overlap = min(a[3], b[3]) - max(a[1], b[1])
    return x_overlap > 0.5 * (a[2] - a[0]) or y_overlap > 0.5 * (a[3] - a[1])


def _within_extent(bbox: Box, left: float, right: float) -> bool:
    """Mostly inside the column (or page) span; a vertical rule has no width, so only its position counts."""
    overlap = min(bbox[2], right + 10) - max(bbox[0], left - 10)
    return overlap >= 0 and overlap >= 0.8 * (bbox[2] - bbox[0])


def _vertical_gap(a: Box, b: Box) -> float:
    return max(a[1] - b[3], b[1] - a[3], 0.0)


def _horizontal_gap(a: Box, b: Box) -> float:
    return max(a[0] - b[2], b[0] - a[2], 0.0)


def _inside_any(bbox: Box, areas: list[Box]) -> bool:
    cx, cy = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    return any(a[0] - 1 <= cx <= a[2] + 1 and a[1] - 1 <= cy <= a[3] + 1 for a in areas)


def _chain_groups(
    items: list[T], box: Callable[[T], Box], reach: float, linked: Callable[[T, T], bool]
) -> list[list[T]]:
    """Items joined into groups wherever a chain of linked pairs connects them (union-find). Only pairs within
    ``reach`` of each other vertically are tried: items are visited top to bottom and the scan for partners stops at
    the first one whose top lies more than ``reach`` below the upper item's bottom. Groups keep that order."""
    ordered = sorted(items, key=lambda item: box(item)[1])
    parent = list(range(len(ordered)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, upper in enumerate(ordered):
        for j in range(i + 1, len(ordered)):
            lower = ordered[j]
            if box(lower)[1] > box(upper)[3] + reach:
                break
            if linked(upper, lower):
                parent[root(j)] = root(i)
    groups: dict[int, list[T]] = {}
    for i, item in enumerate(ordered):
        groups.setdefault(root(i), []).append(item)
    return list(groups.values())
