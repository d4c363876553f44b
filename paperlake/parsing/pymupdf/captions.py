"""Captions: which lines start a "Table N" / "Figure N" caption, which lines continue it, and its kind and label."""

from __future__ import annotations

import re
from typing import Literal

from paperlake.parsing.pymupdf.page import _CAPTION, _column_box, _DocumentStyle, _Line

_SUBCAPTION = re.compile(r"^\((?:[a-z]|[ivx]{1,4})\)\s")


def _captions(lines: list[_Line], style: _DocumentStyle) -> list[list[_Line]]:
    """Lines starting "Table 3:" / "Figure 2." at a paragraph start, with the lines that continue them."""
    ordered = sorted(lines, key=lambda line: (line.column, line.bbox[1]))
    captions = []
    used: set[int] = set()
    for line in ordered:
        if id(line) in used or line.role in {"footer", "header"} or not _CAPTION.match(line.text):
            continue
        left, right = _column_box(style, line.column)
        centred = abs((line.bbox[0] + line.bbox[2]) / 2 - (left + right) / 2) < 20
        if (
            line.bbox[0] > left + 25
            and not centred
            and line.column != "full"
            and not _half_caption(line, lines, left, right)
            and not _block_start(line, lines)
        ):
            continue
        if _set_otherwise(line, style):
            continue  # "Table 2. Metric several …" at the body's size, where the paper's captions say "Table 5:"
        if any(_continues_prose(other, line, lines) for other in _lines_above(line, lines)):
            continue  # "... as shown in / Figure 11. In particular ..." is a sentence, not a caption
        caption = [line]
        followers = sorted(
            (
                other
                for other in lines
                if other is not line
                and other.bbox[1] >= line.bbox[1] - 1
                and id(other) not in used
                and (other.column == line.column or line.column == "full" and _under(other, line))
                # under the caption (not a float beside it), or the rest of its first line
                and (
                    min(other.bbox[2], line.bbox[2]) - max(other.bbox[0], line.bbox[0]) > 0
                    or other.bbox[0] >= line.bbox[2] - 1
                    and other.bbox[1] < line.bbox[3] - 0.5 * line.height
                )
            ),
            key=lambda other: other.bbox[1],
        )
        for follower in followers:
            last = caption[-1]
            if follower.bbox[1] - last.bbox[3] > 0.45 * last.size:
                break
            if follower.bbox[1] < last.bbox[3] - 0.5 * last.height:
                # on the last line's row: the rest of a justified caption line that a wide space cut off (after
                # it, within the caption's width or two ems after its first line), or something beside the
                # caption (another float's caption, a cell), which is passed over
                if last is line:  # the caption's width is not known yet: a justified space is at most two ems
                    rest = 0 <= follower.bbox[0] - line.bbox[2] + 1 <= 2 * line.size and follower.bbox[2] <= right + 3
                else:
                    rest = follower.bbox[0] >= last.bbox[2] - 1 and follower.bbox[2] <= line.bbox[2] + 3
                if rest and abs(follower.size - line.size) <= 0.6 and not _CAPTION.match(follower.text):
                    caption.append(follower)
                continue
            if abs(follower.size - line.size) > 0.6 or _CAPTION.match(follower.text):
                break
            caption.append(follower)
        used |= {id(part) for part in caption}
        captions.append(caption)
    return captions


def _half_caption(line: _Line, lines: list[_Line], left: float, right: float) -> bool:
    """The caption of the right one of two floats side by side in one column: it starts in the column's right half
    and runs to its right edge, and no running text shares its row on the left (a line cut at a wide space)."""
    if line.bbox[0] < (left + right) / 2 - 5 or right - line.bbox[2] > 25:
        return False
    return not any(
        other.role == "body"
        and other.bbox[2] <= line.bbox[0]
        and other.bbox[1] < line.bbox[3]
        and line.bbox[1] < other.bbox[3]
        for other in lines
    )


def _block_start(line: _Line, lines: list[_Line]) -> bool:
    """The first line of a block set at its own left edge, inside the column (a caption in a minipage): the next
    line starts where it starts, at its size."""
    return any(
        abs(other.bbox[0] - line.bbox[0]) <= 2
        and abs(other.size - line.size) <= 0.6
        and 0 <= other.bbox[1] - line.bbox[3] <= 0.6 * line.size
        for other in lines
    )


def _under(line: _Line, caption_line: _Line) -> bool:
    """A short last line of a page-wide caption reads as one column's: it starts under the caption's start."""
    return abs(line.bbox[0] - caption_line.bbox[0]) <= 3 and line.bbox[2] <= caption_line.bbox[2] + 3


def _lines_above(line: _Line, lines: list[_Line]) -> list[_Line]:
    """The lines right above this one that it could continue: over its start, ending at most a line above."""
    return [
        other
        for other in lines
        if other.bbox[0] <= line.bbox[0] + 20
        and other.bbox[2] > line.bbox[0]
        and -1 <= line.bbox[1] - other.bbox[3] <= line.size
    ]


def _continues_prose(previous: _Line, line: _Line, lines: list[_Line]) -> bool:
    """The line goes on with the paragraph above: body text at its size, right under it, not ended by a stop. The
    line above may also be the end of a paragraph carried over from the previous column or page, or past a float:
    alone at the top of its text, starting where this line starts."""
    return (
        -3 <= previous.bbox[0] - line.bbox[0] <= 20  # the paragraph's first line may be indented
        and (previous.role == "body" or _carried_over(previous, line, lines))
        and abs(previous.size - line.size) < 0.5
        and 0 <= line.bbox[1] - previous.bbox[3] <= 0.5 * line.size
        and not previous.text.rstrip().endswith((".", ":"))
    )


def _set_otherwise(line: _Line, style: _DocumentStyle) -> bool:
    """Both the delimiter after the label and the size differ from how the paper sets its captions."""
    if style.caption_style is None:
        return False
    delimiter, size = style.caption_style
    return _CAPTION.match(line.text).group(3) != delimiter and abs(line.size - size) >= 0.5


def _carried_over(previous: _Line, line: _Line, lines: list[_Line]) -> bool:
    return (
        not previous.role
        and abs(previous.bbox[0] - line.bbox[0]) <= 3
        and previous.bold_share < 0.5
        and previous.math_share < 0.5
        and not any(
            other is not previous
            and min(other.bbox[2], previous.bbox[2]) - max(other.bbox[0], previous.bbox[0]) > 0
            and -1 <= previous.bbox[1] - other.bbox[3] <= previous.size
            for other in lines
        )
    )


def _caption_kind(caption: list[_Line]) -> Literal["table", "figure"]:
    return "table" if _CAPTION.match(caption[0].text).group(1).startswith("Tab") else "figure"


def _caption_label(caption: list[_Line]) -> str:
    """ "Table 3" / "Figure 2", whatever the caption's own spelling ("Tab. 3", "Fig. 2")."""
    number = _CAPTION.match(caption[0].text).group(2)
    return f"{'Table' if _caption_kind(caption) == 'table' else 'Figure'} {number}"
