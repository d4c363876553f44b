"""Authors' affiliations and e-mail addresses from page 1's layout, for both parser backends (each passes the author
names it found; the layout is read from the PDF's text layer with PyMuPDF).

The author block is the text between the title and the abstract. Papers print it in three ways, often mixed:

- **markers**: "Eli Schwartz¹, Leshem Choshen²³" then "¹IBM Research, ²MIT-IBM Watson AI Lab, ³MIT" (superscript
  digits or symbols; the definitions may also be footnotes at the bottom of page 1, "† University of X");
- **columns**: each name with its affiliation (and address) printed under it;
- **shared**: one affiliation under all the names.

A superscript is a span at most 80% of its line's size. A marker right after a name is that author's; a marker before
text starts an affiliation, and a line without markers under an affiliation (overlapping it) continues it ("Kensho
Technologies" / "Cambridge, MA"). Unmarked affiliations go to the authors of their column: the authors whose names
lie over them, or every author when they form one column. Footnotes that say "equal contribution", "corresponding
author" and the like are not affiliations.

E-mail addresses are read with their grouped forms ("{a, b}@x.org"); an address goes to the author whose name parts
cover most of its local part, when exactly one does. Everything stays unassigned rather than guessed.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import pymupdf

log = logging.getLogger(__name__)
FRONT_MATTER_COLUMNS = ("affiliations", "author_affiliations", "emails", "email_domains", "front_matter")
_NOT_AFFILIATION = re.compile(
    r"equal(ly)? contribut|contributed equally|corresponding|work (was )?done|during (an |her |his |their )?intern|"
    r"https?://|github|code|project page|these authors|first author|now at|currently at|\bemail\b|undertaken|"
    r"\bvisit|\bsee\b|appendix|\bapp\.",
    re.IGNORECASE,
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_GROUPED_EMAIL = re.compile(r"\{([^{}@]+)\}\s*@\s*([\w-]+(?:\.[\w-]+)+)")
# "{omriuz@post,uvp@cs}.bgu.ac.il", "{a.b@postgrad.,c.d@}manchester.ac.uk": the domain's end shared
_GROUPED_DOMAIN = re.compile(r"\{([^{}]*@[^{}]*)\}(\.?[\w-]+(?:\.[\w-]+)+)")
# a footnote is an affiliation only when it names an organisation (footnotes also explain, credit and point to code)
_ORGANISATION = re.compile(
    r"univ|institut|\blab|college|school|department|\bdept|cent(?:er|re)|research|\binc\b|corp|company|academy|"
    r"hospital|foundation|\bltd|gmbh|google|microsoft|amazon|meta\b|deepmind|openai|ibm|nvidia|apple|allen",
    re.IGNORECASE,
)
_ABSTRACT = re.compile(r"^\s*abstract\s*$", re.IGNORECASE)


@dataclass
class _Span:
    text: str
    size: float
    bbox: tuple[float, float, float, float]
    superscript: bool


@dataclass
class _Affiliation:
    markers: list[str]
    text: str
    x0: float
    x1: float
    y: float


@dataclass
class FrontMatter:
    """Per author (in the order of the names given): affiliations and e-mail; the paper's affiliations in order."""

    author_affiliations: list[list[str]] = field(default_factory=list)
    author_emails: list[str | None] = field(default_factory=list)
    affiliations: list[str] = field(default_factory=list)
    emails: list[str] = field(default_factory=list)

    def text(self, authors: list[str]) -> str | None:
        """One line per author, "Name (Affiliation; Other) <e-mail>", then the addresses no author took."""
        lines = []
        for name, affiliations, email in zip(authors, self.author_affiliations, self.author_emails):
            line = name + (f" ({'; '.join(affiliations)})" if affiliations else "") + (f" <{email}>" if email else "")
            lines.append(line)
        taken = set(self.author_emails)
        rest = [e for e in self.emails if e not in taken]
        unplaced = [a for a in self.affiliations if not any(a in mine for mine in self.author_affiliations)]
        if unplaced:
            lines.append("Affiliations: " + "; ".join(unplaced))
        if rest:
            lines.append("E-mail: " + ", ".join(rest))
        return "\n".join(lines) if any(self.affiliations) or self.emails else None


def _fold(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text).lower() if c.isalnum())


def _lines(page: pymupdf.Page) -> list[list[_Span]]:
    lines = []
    for block in page.get_text("dict")["blocks"]:
        for line in block.get("lines", []):
            spans = [s for s in line["spans"] if s["text"].strip()]
            if not spans or abs(line["dir"][1]) > 0.1:
                continue
            size = max(s["size"] for s in spans)
            lines.append([_Span(s["text"], s["size"], tuple(s["bbox"]), s["size"] <= 0.8 * size) for s in spans])
    lines.sort(key=lambda spans: (round(spans[0].bbox[1]), spans[0].bbox[0]))
    return lines


def _line_text(spans: list[_Span]) -> str:
    return " ".join(" ".join(s.text for s in spans).split())


def _markers(text: str) -> list[str]:
    return [m for m in re.findall(r"\d+|[^\s,\d]", text) if m not in {"*", "∗", ",", "."}]


def _author_block(lines: list[list[_Span]], page_height: float) -> tuple[list[list[_Span]], list[list[_Span]]]:
    """The lines between the title and the abstract, and the footnote lines of the page's bottom fifth."""
    top = [line for line in lines if line[0].bbox[1] < page_height * 0.45]
    end = next((i for i, line in enumerate(top) if _ABSTRACT.match(_line_text(line))), None)
    if end is None:
        return [], []
    head = top[:end]
    title_size = max((max(s.size for s in line) for line in head), default=0)
    start = max((i for i, line in enumerate(head) if max(s.size for s in line) >= title_size - 0.5), default=-1)
    footnotes = [line for line in lines if line[0].bbox[1] > page_height * 0.8 and line[0].superscript]
    return head[start + 1 :], footnotes


def _find_author(text: str, authors: list[str], taken: set[int]) -> int | None:
    folded = _fold(text)
    if not folded:
        return None
    for index, name in enumerate(authors):
        if index not in taken and _fold(name) and (_fold(name) == folded or _fold(name) in folded):
            return index
    return None


def read_front_matter(page: pymupdf.Page, authors: list[str]) -> FrontMatter:
    """The front matter of ``page`` (a paper's first) for the ``authors`` a backend found, in their order."""
    result = FrontMatter([[] for _ in authors], [None] * len(authors))
    block, footnotes = _author_block(_lines(page), page.rect.height)
    if not block or not authors:
        return result
    anchors: dict[int, tuple[float, float, float]] = {}  # author -> (x centre, y, x width)
    author_markers: dict[int, list[str]] = {}
    affiliations: list[_Affiliation] = []
    email_text: list[str] = []
    for line in block:
        text = _line_text(line)
        if "@" in text or text.startswith("{") or (email_text and not email_text[-1].endswith(("}", ".", ","))):
            email_text.append(text)
            continue
        # names: normal-size runs separated by commas or "and", each followed by its superscript markers
        runs: list[tuple[str, list[_Span], str]] = []
        current: list[_Span] = []
        marks = ""
        for span in line:
            if span.superscript and current:
                marks += span.text
            else:
                if marks or (current and span.text.strip().startswith(",")):
                    runs.append((" ".join(s.text for s in current), current, marks))
                    current, marks = [], ""
                current.append(span)
        if current:
            runs.append((" ".join(s.text for s in current), current, marks))
        found = []
        for run_text, spans, marks in runs:
            for piece in re.split(r",|\band\b|&", run_text):
                index = _find_author(piece, authors, set(anchors))
                if index is not None:
                    x0, x1 = spans[0].bbox[0], spans[-1].bbox[2]
                    anchors[index] = ((x0 + x1) / 2, spans[0].bbox[1], x1 - x0)
                    author_markers[index] = _markers(marks)
                    found.append(index)
        if found:
            continue
        affiliations += _affiliation_pieces(line, affiliations)
    defined = {marker for affiliation in affiliations for marker in affiliation.markers}
    used = {marker for markers in author_markers.values() for marker in markers}
    for line in footnotes:  # markers an author carries that the author block does not define
        marker = _markers(line[0].text)
        body = " ".join(s.text for s in line[1:]).strip()
        if not marker or not set(marker) & used - defined or "@" in body:
            continue
        if body and _ORGANISATION.search(body) and not _NOT_AFFILIATION.search(body):
            affiliations.append(_Affiliation(marker, body.strip(" ,;"), line[1].bbox[0], line[-1].bbox[2], 1e9))
    affiliations = [a for a in affiliations if a.text and not _NOT_AFFILIATION.search(a.text)]
    _assign(result, authors, anchors, author_markers, affiliations)
    _assign_emails(result, authors, " ".join(email_text))
    return result


def _affiliation_pieces(line: list[_Span], earlier: list[_Affiliation]) -> list[_Affiliation]:
    """A line of the author block that names no author: marked affiliations ("¹IBM Research, ²MIT"), or unmarked
    text that continues the affiliation printed over it, or starts one."""
    pieces: list[_Affiliation] = []
    for span in line:
        if span.superscript:
            pieces.append(_Affiliation(_markers(span.text), "", span.bbox[0], span.bbox[2], span.bbox[1]))
        elif pieces and (pieces[-1].markers or not pieces[-1].text):
            pieces[-1].text = " ".join(f"{pieces[-1].text} {span.text}".split())
            pieces[-1].x1 = span.bbox[2]
        else:
            pieces.append(_Affiliation([], " ".join(span.text.split()), span.bbox[0], span.bbox[2], span.bbox[1]))
    merged: list[_Affiliation] = []
    for piece in pieces:  # unmarked runs of one line are one affiliation unless set far apart (columns)
        if merged and not piece.markers and not merged[-1].markers and piece.x0 - merged[-1].x1 < 15:
            merged[-1].text = f"{merged[-1].text} {piece.text}"
            merged[-1].x1 = piece.x1
        else:
            merged.append(piece)
    out = []
    for piece in merged:
        piece.text = piece.text.strip(" ,;")
        above = [
            a for a in earlier if not piece.markers and a.y < piece.y and min(a.x1, piece.x1) > max(a.x0, piece.x0)
        ]
        if above and piece.y - max(a.y for a in above) < 20:
            parent = max(above, key=lambda a: a.y)
            parent.text = f"{parent.text}, {piece.text}"
            parent.y = piece.y
        else:
            out.append(piece)
    return out


def _assign(
    result: FrontMatter,
    authors: list[str],
    anchors: dict[int, tuple[float, float, float]],
    author_markers: dict[int, list[str]],
    affiliations: list[_Affiliation],
) -> None:
    marked = [a for a in affiliations if a.markers]
    unmarked = [a for a in affiliations if not a.markers]
    by_marker: dict[str, list[str]] = {}
    for affiliation in marked:
        for marker in affiliation.markers:
            by_marker.setdefault(marker, []).append(affiliation.text)
    for index, markers in author_markers.items():
        for marker in markers:
            for text in by_marker.get(marker, []):
                if text not in result.author_affiliations[index]:
                    result.author_affiliations[index].append(text)
    if unmarked:
        columns = _columns(unmarked)
        for index, (centre, y, _) in anchors.items():
            if result.author_affiliations[index] and any(author_markers.get(index, [])):
                continue
            if len(columns) == 1:
                chosen = columns[0]
            else:
                below = [c for c in columns if min(a.y for a in c) > y]
                chosen = min(below or columns, key=lambda c: _distance(c, centre), default=[])
            for affiliation in chosen:
                if affiliation.y > y and affiliation.text not in result.author_affiliations[index]:
                    result.author_affiliations[index].append(affiliation.text)
    for affiliation in affiliations:
        if affiliation.text not in result.affiliations:
            result.affiliations.append(affiliation.text)


def _columns(affiliations: list[_Affiliation]) -> list[list[_Affiliation]]:
    columns: list[list[_Affiliation]] = []
    for affiliation in sorted(affiliations, key=lambda a: a.x0):
        for column in columns:
            if min(max(a.x1 for a in column), affiliation.x1) > max(min(a.x0 for a in column), affiliation.x0):
                column.append(affiliation)
                break
        else:
            columns.append([affiliation])
    return columns


def _distance(column: list[_Affiliation], centre: float) -> float:
    x0, x1 = min(a.x0 for a in column), max(a.x1 for a in column)
    return 0.0 if x0 <= centre <= x1 else min(abs(centre - x0), abs(centre - x1))


def _assign_emails(result: FrontMatter, authors: list[str], text: str) -> None:
    squeezed = re.sub(r"\s*([{},@])\s*", r"\1", text)
    emails: list[str] = []
    for group, domain in _GROUPED_EMAIL.findall(squeezed):
        emails += [f"{local}@{domain}" for local in re.split(r"[,\s]+", group) if local]
    for group, end in _GROUPED_DOMAIN.findall(squeezed):
        for item in filter(None, re.split(r"[,\s]+", group)):
            joined = item + end.lstrip(".") if item.endswith(("@", ".")) else item + "." + end.lstrip(".")
            emails += _EMAIL.findall(joined)
    emails += _EMAIL.findall(_GROUPED_DOMAIN.sub(" ", _GROUPED_EMAIL.sub(" ", squeezed)))
    result.emails = list(dict.fromkeys(e.strip(".,;") for e in emails))
    names = [[_fold(part) for part in name.split() if len(_fold(part)) >= 3] for name in authors]
    for email in result.emails:
        local = _fold(email.split("@")[0])
        # the author whose name parts cover most of the local part ("kimtaeuk": Taeuk Kim, not the other Kims)
        scores = [sum(len(part) for part in parts if part in local) for parts in names]
        best = max(scores, default=0)
        owners = [i for i, score in enumerate(scores) if score == best]
        if best and len(owners) == 1 and result.author_emails[owners[0]] is None:
            result.author_emails[owners[0]] = email


def front_matter_row(page: Any, authors: list[str]) -> dict[str, Any]:
    """The metadata columns: ``affiliations``, ``author_affiliations`` (aligned with ``authors``, "; "-joined, ""
    when unknown), ``emails``, ``email_domains`` and the searchable ``front_matter`` text."""
    try:
        found = read_front_matter(page, authors)
    except Exception as error:  # page 1's block is a bonus: an odd layout must not cost the paper
        log.warning(
            "front matter not read (%s: %s); the paper keeps its authors without affiliations",
            type(error).__name__,
            error,
        )
        found = FrontMatter([[] for _ in authors], [None] * len(authors))
    return {
        "affiliations": found.affiliations,
        "author_affiliations": ["; ".join(a) for a in found.author_affiliations],
        "emails": found.emails,
        "email_domains": list(dict.fromkeys(e.split("@")[1].lower() for e in found.emails)),
        "front_matter": found.text(authors),
    }
