"""The default parser scored against a synthetic gold set, as benchmarks/parse_fidelity.py scores it (the unit
tests' floors)."""

from __future__ import annotations

from typing import Any

from paperlake.lake.inbox import PaperSource
from paperlake.parsing.gold import GoldDocument, detections_from_parsed, score
from paperlake.parsing.pymupdf_backend import parse


def default_parser_score(gold: list[GoldDocument], volume: str) -> dict[str, Any]:
    found = {}
    for document in gold:
        source = PaperSource(paper_key=document.doc, volume=volume, pdf_path=document.pdf, sha256="0" * 64)
        found[document.doc] = detections_from_parsed(parse(source))
    return score(gold, found)
