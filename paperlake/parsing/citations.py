"""In-text citations linked to their bibliography entries: ``reference.citing_context`` holds the sentences that cite
an entry, ``reference.cited_count`` how often it is cited. A question names a cited work by what the citing paper does
with it ("the benchmark whose splits they reuse"); those words are in the citing sentence, not in the entry.

Two citation styles, decided per paper:

- **author-year** (ACL, EMNLP, NeurIPS…): "Vaswani et al. (2017)", "(Devlin et al., 2019; Liu and Lapata, 2019a)".
  A citation names its first author's surname and a year; it is linked to the one entry whose author list (the text
  before the entry's first year) has that surname as a word and whose year is the same (the letter too, when either
  has one). Two entries that fit equally are both left unlinked: a wrong link is worse than none.
- **numeric** ("[12]", "[3, 5–7]"), only when most entries start with their number ("[12]" or "12."), so an
  equation or a dataset split in brackets is not read as a citation; entries without a printed number get their
  position.

Sentences are the body's (abstract, paragraphs, list items, footnotes), each kept once per entry, in reading order,
at most :data:`MAX_SENTENCES` per entry and :data:`MAX_CHARS` in all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_SENTENCES = 6
MAX_CHARS = 2000

_NAME = r"[A-Z][\w'’\-]*[^\W\d_]"
_AUTHOR_YEAR = re.compile(
    rf"(?P<name>{_NAME})(?:\s+(?P<second>{_NAME}))?(?:\s+et\s+al\.?|\s+(?:and|&)\s+(?:{_NAME}\s+)?{_NAME})?"
    r"(?:\s*,\s*|\s+)\(?(?P<year>(?:19|20)\d{2}[a-z]?)\b"
)
# any in-text citation, either style (to leave citations out of a sentence's words)
CITATION = re.compile(rf"\(?(?:{_AUTHOR_YEAR.pattern})\)?|\[\d[\d,;\s–-]*\]")
_YEAR = re.compile(r"\b(?P<year>(?:19|20)\d{2}[a-z]?)\b")
_NUMERIC = re.compile(r"\[(\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*)\]")
_NUMBERED_ENTRY = re.compile(r"^\s*(?:\[(\d{1,3})\]|(\d{1,3})\.\s)")


@dataclass
class _Entry:
    number: int
    authors: str  # the entry's text before its first year
    first_author: str
    year: str | None
    sentences: list[str] = field(default_factory=list)
    count: int = 0


def _entry(content: str, position: int) -> _Entry:
    numbered = _NUMBERED_ENTRY.match(content)
    number = int(numbered.group(1) or numbered.group(2)) if numbered else position + 1
    year = _YEAR.search(content)
    authors = content[: year.start()] if year else content[:200]
    first = re.split(r",| and | & ", authors, maxsplit=1)[0]
    return _Entry(number, authors, first, year.group("year") if year else None)


def _same_year(cited: str, printed: str | None) -> bool:
    if printed is None:
        return False
    if cited[-1].isalpha() and printed[-1].isalpha():
        return cited == printed
    return cited[:4] == printed[:4]


def _author_year_match(entries: list[_Entry], name: str, year: str) -> _Entry | None:
    word = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
    fitting = [e for e in entries if _same_year(year, e.year) and word.search(e.authors)]
    if len(fitting) > 1:  # the first author's surname decides; the exact letter too
        fitting = [e for e in fitting if word.search(e.first_author)] or fitting
        exact = [e for e in fitting if e.year == year]
        fitting = exact if len(exact) == 1 else fitting
    return fitting[0] if len(fitting) == 1 else None


def _numbers(group: str) -> list[int]:
    numbers: list[int] = []
    for part in re.split(r"\s*[,;]\s*", group):
        low, _, high = part.replace("–", "-").partition("-")
        if high and low.strip().isdigit() and high.strip().isdigit() and 0 < int(high) - int(low) <= 30:
            numbers += range(int(low), int(high) + 1)
        elif low.strip().isdigit():
            numbers.append(int(low))
    return numbers


def link_citations(references: list[dict], sentences: Iterable[str]) -> None:
    """Set ``citing_context`` and ``cited_count`` on each row of ``references`` (reference rows in order, with
    ``reference_content``) from the body ``sentences`` in reading order."""
    entries = [_entry(row.get("reference_content") or "", i) for i, row in enumerate(references)]
    numbered = sum(bool(_NUMBERED_ENTRY.match(row.get("reference_content") or "")) for row in references)
    numeric = bool(references) and numbered >= 0.5 * len(references)
    by_number = {e.number: e for e in entries}
    for sentence in sentences:
        cited: list[_Entry] = []
        if numeric:
            for match in _NUMERIC.finditer(sentence):
                cited += [by_number[n] for n in _numbers(match.group(1)) if n in by_number]
        else:
            for match in _AUTHOR_YEAR.finditer(sentence):
                # "Following Vaswani et al. (2017)": the name may be the second capitalised word
                for name in filter(None, (match.group("name"), match.group("second"))):
                    entry = _author_year_match(entries, name, match.group("year"))
                    if entry is not None:
                        cited.append(entry)
                        break
        for entry in cited:
            entry.count += 1
            if sentence not in entry.sentences:
                entry.sentences.append(sentence)
    for row, entry in zip(references, entries):
        kept: list[str] = []
        size = 0
        for sentence in entry.sentences[:MAX_SENTENCES]:
            if kept and size + len(sentence) > MAX_CHARS:
                break
            kept.append(sentence[:MAX_CHARS])
            size += len(sentence) + 1
        row["citing_context"] = "\n".join(kept) or None
        row["cited_count"] = entry.count
