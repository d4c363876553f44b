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

A line's match is (words matched, share of its header words matched); the ranking is a third route of the ensemble's
reciprocal-rank fusion. Nothing here knows a paper, a dataset name or a model: the same three rules for every table.
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
MIN_PARTIAL = 3   # letters a prefix or an abbreviation must have before it counts


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric runs (``F1-score`` → ``f1``, ``score``; ``2D+`` → ``2d``)."""
    return [w.lower() for w in _WORD.findall(text or "")]


def header_words(path: Iterable[str]) -> list[str]:
    """The words of a header path that can name it: no common words, no lone letters."""
    seen: dict[str, None] = {}
    for part in path:
        for word in words(part):
            if word in _COMMON or (len(word) == 1 and not word.isdigit()):
                continue
            seen.setdefault(word, None)
    return list(seen)


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
    matched: int       # header words the question states
    share: float       # of the line's header words

    @property
    def key(self) -> tuple[int, float]:
        return self.matched, self.share


def match(path: Iterable[str], question_words: Sequence[str]) -> HeaderMatch:
    """How much of one header path the question states."""
    wanted = header_words(path)
    hits = sum(1 for word in wanted if word_matches(word, question_words))
    return HeaderMatch(hits, hits / len(wanted) if wanted else 0.0)


def rank_lines(question: str, lines: Sequence[tuple[tuple[str, str], Sequence[str], int]]
               ) -> list[tuple[str, str]]:
    """Line keys ordered by their header match, best first; lines whose header the question does not state at all
    are left out. ``lines`` are (key, header path, table rank); ties go to the better-ranked table, then the key."""
    question_words = [w for w in words(question) if w not in _COMMON]
    scored = []
    for key, path, table_rank in lines:
        found = match(path, question_words)
        if found.matched:
            scored.append((-found.matched, -found.share, table_rank, key))
    scored.sort()
    return [key for *_, key in scored]
