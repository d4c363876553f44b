"""A question for the agent, in the AirQA shape (an evaluation example or a question typed at the CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

DEFAULT_ANSWER_FORMAT = "a concise answer in plain text"


@dataclass
class Task:
    question: str
    answer_format: str = DEFAULT_ANSWER_FORMAT
    anchor_pdf: list[str] = field(default_factory=list)
    reference_pdf: list[str] = field(default_factory=list)
    conference: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    uuid: str | None = None

    @classmethod
    def from_any(cls, example: Any) -> "Task":
        """From a :class:`Task`, an ``paperlake.evaluation.Example`` or a dict with the AirQA fields."""
        if isinstance(example, Task):
            return example
        if isinstance(example, Mapping):
            get = example.get
        else:

            def get(name: str, default: Any = None) -> Any:
                return getattr(example, name, default)

        return cls(
            question=str(get("question")),
            answer_format=get("answer_format") or DEFAULT_ANSWER_FORMAT,
            anchor_pdf=[str(p) for p in get("anchor_pdf", None) or []],
            reference_pdf=[str(p) for p in get("reference_pdf", None) or []],
            conference=[str(c) for c in get("conference", None) or []],
            tags=[str(t) for t in get("tags", None) or []],
            uuid=get("uuid"),
        )

    @property
    def papers(self) -> list[str]:
        return list(dict.fromkeys(self.anchor_pdf + self.reference_pdf))
