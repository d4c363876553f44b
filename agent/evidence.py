"""Evidence the agent saw, and the citations an answer carries.

Every observation records what it showed as :class:`Evidence`: a warehouse row (table, column, row id), a vector
hit, or a viewed page region, each located to a paper, page and, where known, a bounding box. When the agent
answers, :func:`select_citations` cites, in order of strength: evidence the model referred to by id after seeing
it, evidence whose text contains the answer, and the evidence of the last turn that returned any (what the answer
was most likely read from; all of it when nothing else qualifies, else its first few items).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from paperlake.evaluation.needles import answer_needles, contains_needle

_SNIPPET = 300
_SEEN_WITH_OTHERS = 3


@dataclass(frozen=True)
class Evidence:
    paper_id: str | None
    page_number: int | None = None
    bbox: tuple[float, ...] | None = None
    table_name: str | None = None
    column_name: str | None = None
    row_id: str | None = None
    snippet: str = field(default="", compare=False)
    source: str = field(default="", compare=False)

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.paper_id, self.page_number, self.bbox, self.table_name, self.column_name, self.row_id)


@dataclass
class Citation:
    paper_id: str | None
    page_number: int | None
    bbox: list[float] | None
    table_name: str | None
    column_name: str | None
    row_id: str | None
    basis: str  # "referenced" | "contains_answer" | "seen"
    source: str
    title: str | None = None
    snippet: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def label(self) -> str:
        parts = [self.title or self.paper_id or "unknown paper"]
        if self.page_number is not None:
            parts.append(f"p. {self.page_number}")
        if self.bbox:
            parts.append("bbox [" + ", ".join(f"{v:g}" for v in self.bbox) + "]")
        if self.table_name:
            parts.append(f"{self.table_name}.{self.column_name}" if self.column_name else self.table_name)
        if self.row_id:
            parts.append(f"row {self.row_id}")
        return ", ".join(parts)


def snippet(text: Any) -> str:
    value = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    value = re.sub(r"\s+", " ", value or "").strip()
    return value[:_SNIPPET]


def select_citations(
    turns: Sequence[tuple[int, Sequence[Evidence]]],
    model_texts: Sequence[tuple[int, str]],
    answer: Any,
    limit: int = 8,
) -> list[Citation]:
    """``turns``: (turn index, evidence shown at that turn); ``model_texts``: (turn index, what the model wrote)."""
    ordered: list[tuple[int, Evidence]] = []
    seen_keys: set[tuple[Any, ...]] = set()
    for turn, evidence in turns:
        for item in evidence:
            if item.key not in seen_keys:
                seen_keys.add(item.key)
                ordered.append((turn, item))

    def later_text(turn: int) -> str:
        return "\n".join(text for index, text in model_texts if index > turn)

    chosen: list[tuple[str, Evidence]] = []
    picked: set[tuple[Any, ...]] = set()

    def pick(basis: str, items: Iterable[Evidence]) -> None:
        for item in items:
            if item.key not in picked and len(chosen) < limit:
                picked.add(item.key)
                chosen.append((basis, item))

    pick("referenced", [e for t, e in ordered if e.row_id and e.row_id.lower() in later_text(t).lower()])
    needles = answer_needles(answer)
    pick("contains_answer", [e for _, e in ordered if any(contains_needle(e.snippet, n) for n in needles)])
    if ordered:
        last_turn = max(t for t, _ in ordered)
        last_evidence = [e for t, e in ordered if t == last_turn]
        if not any(item.key in picked for item in last_evidence):
            pick("seen", last_evidence if not chosen else last_evidence[:_SEEN_WITH_OTHERS])
    return [
        Citation(
            paper_id=item.paper_id,
            page_number=item.page_number,
            bbox=list(item.bbox) if item.bbox else None,
            table_name=item.table_name,
            column_name=item.column_name,
            row_id=item.row_id,
            basis=basis,
            source=item.source,
            snippet=item.snippet,
        )
        for basis, item in chosen
    ]
