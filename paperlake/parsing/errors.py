"""The one error a parser raises, so a failed paper is reported with its key and stage and never stops the others."""

from __future__ import annotations


class ParseError(Exception):
    """A paper could not be parsed: which paper, at which stage, and why (reads ``key: stage: reason``)."""

    def __init__(self, paper_key: str, stage: str, reason: str) -> None:
        super().__init__(f"{paper_key}: {stage}: {reason}")
        self.paper_key = paper_key
        self.stage = stage
        self.reason = reason
