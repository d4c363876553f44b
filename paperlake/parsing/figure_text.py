"""The words printed inside a figure (value labels, axis titles and ticks, legend entries, panel titles, a diagram's
boxes), as one string in reading order: ``images.image_text``. Captions are stored apart (``image_caption``), and the
page text leaves a figure's region out, so without this column a question about what a plot shows has nothing to
find. Both parser backends give it the lines of the PDF's text layer; a scanned figure has none and gets ``None``.

Reading order: lines are gathered into rows (a line belongs to the row whose vertical centre is within half a line
height of its own), rows go top to bottom, and a row's lines left to right, joined by two spaces, since the parts of a
row are separate labels (ticks, legend entries) rather than one phrase. Rotated lines (a y-axis title) sort by their
centre like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from paperlake.parsing.geometry import Box

# A figure's text is for finding the figure and reading its labels, not a second copy of a page: a framed example or
# a screenshot of a document stops here (at a line boundary).
MAX_CHARS = 4000


def _inside(box: Sequence[float], region: Sequence[float], tolerance: float = 1.0) -> bool:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return region[0] - tolerance <= cx <= region[2] + tolerance and region[1] - tolerance <= cy <= region[3] + tolerance


def text_inside(lines: Iterable[tuple[Box, str]], region: Box, exclude: Sequence[Box] = ()) -> str | None:
    """The text of ``lines`` (each a box and its text) whose centre lies in ``region`` and in none of ``exclude``
    (captions, or another float's box), in reading order; ``None`` when there is none."""
    taken = [
        (box, " ".join(text.split()))
        for box, text in lines
        if text.strip() and _inside(box, region) and not any(_inside(box, other, 0.0) for other in exclude)
    ]
    if not taken:
        return None
    taken.sort(key=lambda item: (item[0][1] + item[0][3]) / 2)
    rows: list[list[tuple[Box, str]]] = []
    row_centre = 0.0
    for box, text in taken:
        centre, height = (box[1] + box[3]) / 2, max(1.0, min(box[3] - box[1], box[2] - box[0]))
        if rows and abs(centre - row_centre) <= height / 2:
            rows[-1].append((box, text))
        else:
            rows.append([(box, text)])
            row_centre = centre
    out: list[str] = []
    size = 0
    for row in rows:
        line = "  ".join(text for _, text in sorted(row, key=lambda item: item[0][0]))
        if out and size + len(line) > MAX_CHARS:
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)[:MAX_CHARS]


def word_lines(words: Iterable[Sequence]) -> list[tuple[Box, str]]:
    """PyMuPDF's ``get_text("words")`` tuples grouped back into their lines (same block and line number)."""
    grouped: dict[tuple[int, int], list[Sequence]] = {}
    for word in words:
        grouped.setdefault((word[5], word[6]), []).append(word)
    lines = []
    for members in grouped.values():
        members.sort(key=lambda w: w[7])
        box = (
            min(w[0] for w in members),
            min(w[1] for w in members),
            max(w[2] for w in members),
            max(w[3] for w in members),
        )
        lines.append((box, " ".join(w[4] for w in members)))
    return lines
