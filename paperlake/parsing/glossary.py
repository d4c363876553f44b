"""What a table's abbreviated labels stand for, read from the paper that defines them.

Tables are written in abbreviations the paper defines elsewhere: the caption ("ori: original model."), or the prose
that introduces them ("addition (2D+), subtraction (2D-)", "1-digit (1D), 2-digit (2D)", "“inv” denotes the
intervened model"). A reader of the table carries those definitions over; a retriever reading only the grid cannot,
so a question about "two-digit addition" never meets the row labelled ``2D+``. This module finds the definitions of a
table's own labels so its row and column lines can state them (``Row: 2D+ (addition)``).

Only labels of the table are looked up, and only where a definition is written the three ways papers write one:

- **caption**: ``LABEL: long form`` (also ``;``/``=``, the label possibly quoted) after the caption's first
  sentence, or ``LABEL denotes / means / stands for / represents / refers to / indicates long form``;
- **parenthesis** (the paper's paragraphs): ``long form (LABEL)``. As Schwartz and Hearst read abbreviations: when
  the label's letters can be found in order in the words before the parenthesis, the first starting a word, the
  long form is the shortest such run of words (``the original model (ori)`` → ``original model``); otherwise (a
  label led by a digit or a symbol, ``2D+``) it is the word right before the parenthesis (``including addition
  (2D+)`` → ``addition``; a hyphenated word is one, ``3-digit``), or the capitalised name ending there, four words at
  most (``on Movie Reviews (5D)``);
- **denotes** (the paragraphs): ``LABEL denotes / means / … long form``;
- **truncation** (the paragraphs, last): a word-like label the prose never writes as a word (``Params``, ``Acc.``)
  stands for the prose's word it begins, when one word (with its inflections) is most of the prose's words that
  begin so (``parameters``; ``Rec`` is left alone where "recall", "recent" and "recognition" all occur).

A label is one token of 2–12 characters with a letter in it (a caption definition may also name a number label such
as ``1722``); a long form has a word of three letters or more and is not the label again. The caption's definition
wins over the prose's, the first one written over later ones. Nothing here knows a paper or a field.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from os.path import commonprefix
from typing import Iterable

from paperlake.parsing.inline_math import plain_text

MAX_LABEL_CHARS = 12
MAX_LONG_WORDS = 4  # a long form read back from a parenthesis without the label's letters
MAX_DEFINITION_WORDS = 8  # a long form after "LABEL:" or "LABEL denotes"
# Words a long form does not start with (read back from the parenthesis, they end it).
_FUNCTION_WORDS = frozenset(
    "a an and are as at be by for from has have in including include includes into is it its of on or such that the "
    "their these this those to was we were which with our e.g. i.e. eg ie namely called termed denoted".split()
)
# Words a definition is only read from when the label is quoted ("DocHieNet represents the largest dataset" is not
# one; '"imp" represents the importance score' is).
_LOOSE_VERBS = r"means|mean|represents|represent|indicates|indicate"
_STRICT_VERBS = r"denotes|denote|stands\s+for|stand\s+for|refers\s+to|refer\s+to|is\s+short\s+for"
_QUOTES = "\"'“”‘’`"
# A label: letters, digits and the marks abbreviations carry ("2D+", "Sparse-MeZO", "Ambig.", "A&M"); a cell with
# "=" or spaces is a setting or a phrase, not an abbreviation.
_LABEL = re.compile(r"[\w+\-*/.&'’]+")


def is_label(text: str, *, numeric: bool = False) -> bool:
    """A header or stub cell that can be an abbreviation: one token, 2–12 characters, a letter in it (or, for
    caption definitions, ``numeric`` labels of digits too)."""
    text = (text or "").strip()
    if not (2 <= len(text) <= MAX_LABEL_CHARS) or not _LABEL.fullmatch(text):
        return False
    return any(ch.isalpha() for ch in text) or (numeric and any(ch.isdigit() for ch in text))


def _words(text: str) -> list[str]:
    # "3- digit" (a hyphen the line break left) is one word again: "3-digit"
    return re.sub(r"(?<=\w)-\s+(?=\w)", "-", text).split()


def _has_word(text: str) -> bool:
    return re.search(r"[^\W\d_]{3,}", text) is not None


def _clean_long(text: str, label: str) -> str | None:
    long = " ".join(_words(text.strip(_QUOTES + " ,")))
    long = long.strip(_QUOTES + " ,")
    if not long or not _has_word(long) or long.lower() == label.lower() or "respectively" in long.lower():
        return None  # "respectively": one of a parallel list ("A and B denote X and Y, respectively")
    return long


def _letters(text: str) -> str:
    return "".join(ch.lower() for ch in text if ch.isalnum())


def _schwartz_hearst(label: str, words: list[str]) -> str | None:
    """The shortest run of words ending before the parenthesis whose first word starts with the label's first
    letter and which holds the label's letters in order."""
    short = _letters(label)
    if not short or not short[0].isalpha():
        return None
    limit = min(len(short) + 5, 2 * len(short))
    for start in range(len(words) - 1, max(-1, len(words) - 1 - limit), -1):
        if not words[start] or words[start][0].lower() != short[0]:
            continue
        long = _letters(" ".join(words[start:]))
        at = 0
        for letter in short:
            at = long.find(letter, at)
            if at < 0:
                break
            at += 1
        else:
            return " ".join(words[start:])
    return None


def _before_parenthesis(label: str, before: str) -> str | None:
    clause = re.split(r"[,;:.!?()\[\]]", before)[-1]
    words = [w for w in _words(clause) if w]
    if not words:
        return None
    found = _schwartz_hearst(label, words)
    if found is None and label[0].isalpha():
        return None  # a word-like label whose letters are not there: not its definition
    if found is None:
        run: list[str] = []
        for word in reversed(words):
            if word.lower() in _FUNCTION_WORDS or len(run) == MAX_LONG_WORDS:
                break
            if run and not (word[:1].isupper() and all(w[:1].isupper() for w in run)):
                break  # one word ("addition", "3-digit"), or a capitalised name ("Movie Reviews")
            run.insert(0, word)
        found = " ".join(run)
    return _clean_long(found, label)


def _in_a_list(text: str, start: int) -> bool:
    """Whether the label at ``start`` is the last of a list ('"ori" and "inv" denote …'): its definition is a list
    too, and which part is whose is not written."""
    return re.search(r"(?:\band|&|,)\s*$", text[max(0, start - 8) : start]) is not None


def _caption_definitions(caption: str, labels: list[str]) -> dict[str, str]:
    text = " ".join(plain_text(caption or "").split())
    first = re.search(r"(?<=[.!?])\s+", text[12:])  # past "Table 4." / the title sentence
    rest = text[12 + first.end() :] if first else ""
    found: dict[str, str] = {}
    for label in labels:
        quoted = rf"[{_QUOTES}]?\s*{re.escape(label)}\s*[{_QUOTES}]?"
        for pattern in (
            rf"(?:^|(?<=[\s.;,(]))(?:{quoted})(?:\s*[:;=])+\s*(?P<long>[^.;:]+)",
            rf"(?:^|(?<=[\s.;,(])){quoted}\s+(?:{_STRICT_VERBS}|{_LOOSE_VERBS})\s+(?:the\s+)?"
            rf"(?P<long>[^.;:,]+)",
        ):
            match = re.search(pattern, rest)
            if match and not _in_a_list(rest, match.start()):
                long = _clean_long(" ".join(match.group("long").split()[:MAX_DEFINITION_WORDS]), label)
                if long:
                    found.setdefault(label, long)
                    break
    return found


def _prose_definitions(paragraphs: Iterable[str], labels: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    wanted = [label for label in labels if is_label(label)]
    if not wanted:
        return found
    for paragraph in paragraphs:
        text = _readable(paragraph or "")
        for label in wanted:
            if label in found or label not in text:
                continue
            parenthesis = re.search(rf"\(\s*{re.escape(label)}\s*\)", text)
            if parenthesis:
                long = _before_parenthesis(label, text[max(0, parenthesis.start() - 200) : parenthesis.start()])
                if long:
                    found[label] = long
                    continue
            plain, quoted = re.escape(label), rf"[{_QUOTES}]{re.escape(label)}[{_QUOTES}]"
            denotes = re.search(
                rf"(?:^|(?<=[\s(]))(?:(?:{plain}|{quoted})\s+(?:{_STRICT_VERBS})|{quoted}\s+"
                rf"(?:{_LOOSE_VERBS}))\s+(?:the\s+)?(?P<long>[^.;:,()]+)",
                text,
            )
            if denotes and not _in_a_list(text, denotes.start()):
                long = _clean_long(" ".join(denotes.group("long").split()[:MAX_DEFINITION_WORDS]), label)
                if long:
                    found[label] = long
    return found


_TRUNCATED = re.compile(r"[A-Za-z]{3,8}\.?")  # "Params", "Acc.", "Prec": a word cut short
_PROSE_WORD = re.compile(r"[A-Za-z]{3,}")
MIN_EXPANSION_USES = 2  # a word the prose writes once is not what a table's label abbreviates


def _truncation_definitions(paragraphs: Iterable[str], labels: list[str]) -> dict[str, str]:
    stems = {}
    for label in labels:
        if _TRUNCATED.fullmatch(label):
            stem = label.rstrip(".").lower()
            stems[label] = stem[:-1] if len(stem) > 4 and stem.endswith("s") else stem  # "Params": "param"
    if not stems:
        return {}
    counts = Counter(
        word.lower() for paragraph in paragraphs for word in _PROSE_WORD.findall(_readable(paragraph or ""))
    )
    found: dict[str, str] = {}
    for label, stem in stems.items():
        if counts.get(stem) or counts.get(label.rstrip(".").lower()):
            continue  # the prose writes the label as a word: not a word cut short
        begun = {word: n for word, n in counts.items() if word.startswith(stem) and len(word) >= len(stem) + 2}
        if not begun:
            continue
        best = max(begun, key=lambda word: (begun[word], -len(word)))
        family = sum(n for word, n in begun.items() if len(commonprefix([word, best])) >= len(stem) + 2)
        if family >= MIN_EXPANSION_USES and family >= 2 * (sum(begun.values()) - family):
            found[label] = best
    return found


@lru_cache(maxsize=4096)
def _readable(paragraph: str) -> str:
    """A paragraph as printed (inline math read, whitespace collapsed, MinerU's Markdown escapes undone:
    "multiplication (2D\\*)" is "multiplication (2D*)"); memoised, as every table of a paper reads the same ones."""
    return re.sub(r"\\([*_#\[\]()`])", r"\1", " ".join(plain_text(paragraph).split()))


def table_glossary(labels: Iterable[str], caption: str | None, paragraphs: Iterable[str]) -> dict[str, str]:
    """Label → long form for a table's header and stub labels, from its caption first, then the paper's paragraphs
    (definitions, then words a label cuts short)."""
    candidates = list(dict.fromkeys(label.strip() for label in labels if is_label(label, numeric=True)))
    glossary = _caption_definitions(caption or "", candidates)
    rest = [label for label in candidates if label not in glossary]
    paragraphs = list(paragraphs)
    glossary.update(_prose_definitions(paragraphs, rest))
    glossary.update(_truncation_definitions(paragraphs, [label for label in rest if label not in glossary]))
    return {label: glossary[label] for label in candidates if label in glossary}


def glossed(part: str, glossary: dict[str, str]) -> str:
    """A header path part with its definition beside it: ``2D+`` → ``2D+ (addition)``."""
    long = glossary.get(part.strip())
    return f"{part} ({long})" if long else part
