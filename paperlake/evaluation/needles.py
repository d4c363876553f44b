"""When a text bears an answer: the needles an answer is looked for as, and number matching as papers print numbers.

Shared by answer-bearing retrieval metrics, the agent's citations and the offline probes' verification, so that
"the evidence states the answer" means the same thing everywhere. A text is read as printed, not as laid out: a line
break is a space ("Three random\nsampled output") and a hyphen between two letters may be a line break's that the
text keeps or drops ("data-\nproduction", "dataproduction" for "data-production").
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any


def answer_needles(answer: Any) -> list[str]:
    """Lower-cased strings whose presence in a snippet means the snippet bears the answer."""
    if answer is None or isinstance(answer, bool):
        return []
    if isinstance(answer, (list, tuple, set)):
        return [needle for item in answer for needle in answer_needles(item)]
    if isinstance(answer, dict):
        return [needle for item in answer.values() for needle in answer_needles(item)]
    if isinstance(answer, float):
        forms = {repr(answer), f"{answer:g}"}
        if answer.is_integer():
            forms.add(str(int(answer)))
        return [f for f in forms if len(f) >= 2 or f.isdigit()]
    text = str(answer).strip().lower()
    if len(text) < 2 and not text.isdigit():
        return []
    return [text]


def contains_needle(snippet_text: str, needle: str) -> bool:
    """Whether the text states the needle; a number matches as printed in papers: ``74.1`` in "74.10", ``4749`` in
    "4,749", ``-2.1`` in "−2.1" and ``−2.1`` in "-2.1", but not inside another number ("174.1", "74.15")."""
    haystack = snippet_text.lower()
    number = re.fullmatch(r"([-−–]?)(\d+)(?:\.(\d+))?", needle)
    if number:
        sign, whole, fraction = number.groups()
        grouped = (
            whole
            if len(whole) <= 3
            else ",?".join(
                [whole[: len(whole) % 3 or 3]] + [whole[i : i + 3] for i in range(len(whole) % 3 or 3, len(whole), 3)]
            )
        )
        pattern = ("[-−–]" if sign else "") + grouped + (rf"\.{fraction}0*" if fraction else r"(?:\.0+)?")
        return re.search(rf"(?<![\d.])(?<!\d,){pattern}(?!\d|\.\d|,\d{{3}}(?!\d))", haystack) is not None
    if needle in haystack:
        return True
    return _text_pattern(needle).search(haystack) is not None


@lru_cache(maxsize=4096)
def _text_pattern(needle: str) -> re.Pattern:
    """A text needle as laid-out text may print it: any run of whitespace for its spaces (or none after a comma,
    semicolon or colon: "7,47" for "7, 47"; and some before one, as MinerU sets a formula: "α = 0.85 , β" for
    "α = 0.85, β"), and for a hyphen between two letters, that hyphen or none, a line break after it or not."""
    parts = []
    for piece in re.split(r"(\s+|(?<=[^\W\d_])-(?=[^\W\d_]))", needle.strip()):
        if not piece:
            continue
        if piece.isspace():
            parts.append(r"\s*" if parts and parts[-1][-1:] in {",", ";", ":"} else r"\s+")
        else:
            parts.append(r"-?\s*" if piece == "-" else re.sub(r"(?<=.)([,;:])", r"\\s*\1", re.escape(piece)))
    return re.compile("".join(parts))
