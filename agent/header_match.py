"""HD-RAG's hierarchical step: within the tables the ensemble found, which rows and columns does the question name?

The ensemble's routes score a row or column *line* (caption, header path and every value), so a line whose header
the question names outright ("ELMo", "MPQA") competes with its neighbours on the caption and the values, which the
question shares with all of them. HD-RAG retrieves hierarchically: the table first, then the row and the column
within it. This module is the second level: it reads every row and column line of the few tables ranked highest and
ranks the lines by how much of their *header path alone* the question states, with the matching a reader does with
headers, which are abbreviated:

- a header word equal to a question word (``mpqa``; numbers only ever match exactly);
- a header word that begins a question word (``ori`` for *original*, ``acc`` for *accuracy*), three letters at least;
- an abbreviation of one or two consecutive question words, read as Schwartz and Hearst read abbreviations: every
  letter in order, the first one starting the long form (``sqrt`` for *square roots*), three letters at least.

A label the paper defines (the line's ``header_glossary``: ``2D+: addition``, ``ori: original model``, from
:mod:`paperlake.parsing.glossary`) is stated when its own words are or when its definition's are, whichever more
(``two-digit addition`` states ``2D+``). Numbers are compared as numbers are spoken and printed: ``three`` is ``3``,
``22nd`` and ``22th`` are ``22``.

A line's match is (words matched, share of its header words matched); the ranking is a third route of the ensemble's
reciprocal-rank fusion. Nothing here knows a paper, a dataset name or a model: the same rules for every table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Words a header shares with almost any question: they say nothing about which row or column is meant.
_COMMON = frozenset(
    "a an and are as at by for from in into is it of on or the to with w o vs all avg average total mean "
    "model models method methods dataset datasets data table results result score scores ours".split()
)
MIN_PARTIAL = 3  # letters a prefix or an abbreviation must have before it counts


_NUMBER_WORDS = {
    word: str(i)
    for i, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
    if i >= 2
}  # not "one": "which one", "no one"
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")


def _normal(word: str) -> str:
    ordinal = _ORDINAL.match(word)
    return ordinal.group(1) if ordinal else _NUMBER_WORDS.get(word, word)


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric runs (``F1-score`` → ``f1``, ``score``; ``2D+`` → ``2d``), numbers as digits
    (``three`` → ``3``, ``22nd`` → ``22``)."""
    return [_normal(w.lower()) for w in _WORD.findall(text or "")]


def header_words(path: Iterable[str]) -> list[str]:
    """The words of a header path that can name it: no common words, no lone letters."""
    seen: dict[str, None] = {}
    for part in path:
        for word in words(part):
            if word in _COMMON or (len(word) == 1 and not word.isdigit()):
                continue
            seen.setdefault(word, None)
    return list(seen)


def glossary_of(entries: Iterable[str] | None) -> dict[str, str]:
    """``["2D+: addition"]`` (a line's ``header_glossary``) → ``{"2D+": "addition"}``."""
    glossary = {}
    for entry in entries or []:
        label, _, long = str(entry).partition(": ")
        if label and long:
            glossary[label.strip()] = long.strip()
    return glossary


def _abbreviates(short: str, long: str) -> bool:
    """Every letter of ``short`` in order in ``long``, the first at ``long``'s start (Schwartz & Hearst)."""
    if not short or not long or short[0] != long[0]:
        return False
    at = 1
    for letter in short[1:]:
        at = long.find(letter, at)
        if at < 0:
            return False
        at += 1
    return True


def word_matches(header_word: str, question: Sequence[str]) -> bool:
    """Whether one header word is stated by the question's words (see the module docstring for the three rules)."""
    if header_word in question:
        return True
    if any(c.isdigit() for c in header_word) or len(header_word) < MIN_PARTIAL:
        return False
    for i, word in enumerate(question):
        if word.startswith(header_word):
            return True
        if len(header_word) < len(word) and _abbreviates(header_word, word):
            return True
        if i + 1 < len(question) and _abbreviates(header_word, word + question[i + 1]):
            return True
    return False


@dataclass(frozen=True)
class HeaderMatch:
    matched: int  # header words the question states
    share: float  # of the line's header words

    @property
    def key(self) -> tuple[int, float]:
        return self.matched, self.share


def match(path: Iterable[str], question_words: Sequence[str], glossary: dict[str, str] | None = None) -> HeaderMatch:
    """How much of one header path the question states; a part the ``glossary`` defines counts by its own words or
    its definition's, whichever the question states more of."""
    glossary = glossary or {}
    hits = total = 0
    seen: set[str] = set()
    for part in path:
        readings = [header_words([part])]
        if part.strip() in glossary:
            readings.append(header_words([glossary[part.strip()]]))
        readings = [[w for w in reading if w not in seen] for reading in readings]
        scored = [(sum(1 for w in reading if word_matches(w, question_words)), len(reading)) for reading in readings]
        best = max(scored, key=lambda hit_count: (hit_count[0], -hit_count[1]))
        hits, total = hits + best[0], total + best[1]
        seen.update(w for reading in readings for w in reading)
    return HeaderMatch(hits, hits / total if total else 0.0)


def rank_lines(
    question: str,
    lines: Sequence[
        tuple[tuple[str, str], Sequence[str], int] | tuple[tuple[str, str], Sequence[str], int, Sequence[str]]
    ],
) -> list[tuple[str, str]]:
    """Line keys ordered by their header match, best first; lines whose header the question does not state at all
    are left out. ``lines`` are (key, header path, table rank[, header glossary]); ties go to the better-ranked
    table, then the key."""
    question_words = [w for w in words(question) if w not in _COMMON]
    scored = []
    for key, path, table_rank, *glossary in lines:
        found = match(path, question_words, glossary_of(glossary[0] if glossary else None))
        if found.matched:
            scored.append((-found.matched, -found.share, table_rank, key))
    scored.sort()
    return [key for *_, key in scored]
