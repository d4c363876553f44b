"""Boxes: ``(x0, y0, x1, y1)`` in PDF points, origin top-left, and the measures every parser backend, the glyph
reader and the parse comparisons take of them (one definition of each)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Box = tuple[float, float, float, float]


def union(boxes: Iterable[Sequence[float]]) -> Box:
    """The smallest box holding every box (at least one)."""
    boxes = list(boxes)
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def area(box: Sequence[float]) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def intersection(a: Sequence[float], b: Sequence[float]) -> Box:
    return max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union; 0 for boxes that do not overlap or have no area."""
    inter = area(intersection(a, b))
    total = area(a) + area(b) - inter
    return inter / total if total > 0 else 0.0
