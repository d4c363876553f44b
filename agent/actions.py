"""The agent's actions: NeuSym-RAG's five (plus ClassicRetrieve) and MathRAG's formula workflow.

Each action is a dataclass whose docstring and field metadata *are* the action space the prompt shows, so the
prompt cannot drift from the code. Actions never raise on bad input from the model: every parameter is checked into
its declared type when the action is built (:class:`~agent.formats.ActionParseError` otherwise), and every problem
while running becomes an error observation (a JSON object with the error type, the message and, where there is one,
the next valid step). :func:`run_action` is the one way to run an action for the model: whatever it raises becomes
an observation too, and the observation's text is cut to ``MAX_OBSERVATION_CHARS``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import re
import uuid
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, get_type_hints

from agent.backends import InvalidFilter, quote_filter_list, tool_outcome, validate_filter
from agent.env import AgentEnv
from agent.evidence import Evidence, snippet
from agent.formats import (
    MAX_OBSERVATION_CHARS,
    ActionParseError,
    ParsedAction,
    TextValue,
    check_size,
    clip_text,
    decode_json,
    format_table,
    jsonable,
    literal_value,
    preview,
    render_action,
)
from paperlake.runtime.safe_eval import SafeEvalError, safe_eval
from paperlake.runtime.sql_sandbox import SQLFailed, SQLRefused, SQLTimeout

log = logging.getLogger(__name__)
MAX_VECTOR_LIMIT = 50
MAX_SEARCH_TERMS = 10
MAX_WHOLE_NUMBER_DIGITS = 18  # whole-number parameters (pages, limits) fit a 64-bit integer
_DIGITS = re.compile(r"[+-]?[0-9]+")


@dataclass
class Observation:
    text: str
    ok: bool = True
    error_type: str | None = None
    next_step: str | None = None
    images: list[bytes] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    is_answer: bool = False
    answer: Any = None


def error(error_type: str, message: str, next_step: str | None = None) -> Observation:
    payload: dict[str, Any] = {"status": "error", "error_type": error_type, "message": message}
    if next_step:
        payload["next_valid_step"] = next_step
    return Observation(json.dumps(payload, ensure_ascii=False), False, error_type, next_step)


def describe(problem: BaseException) -> str:
    """An unexpected exception as one short line for the model."""
    return f"{type(problem).__name__}: {clip_text(' '.join(str(problem).split()), 300)}"


def bounded(observation: Observation) -> Observation:
    """The observation with its text cut to ``MAX_OBSERVATION_CHARS``, saying so."""
    if len(observation.text) <= MAX_OBSERVATION_CHARS:
        return observation
    cut = len(observation.text) - MAX_OBSERVATION_CHARS
    observation.text = (
        f"{observation.text[:MAX_OBSERVATION_CHARS]}\n[Note: the observation was cut at "
        f"{MAX_OBSERVATION_CHARS} characters ({cut} characters cut); ask for less at a time]"
    )
    return observation


def run_action(action: "Action", env: AgentEnv) -> Observation:
    """Run an action for the model: a failure of a backend or of the action itself is the model's observation,
    never the end of the run."""
    try:
        return bounded(action.execute(env))
    except Exception as problem:
        log.exception("action %s failed", action.action_name())
        return error("internal_error", f"{action.action_name()} failed: {describe(problem)}")


@dataclass(frozen=True)
class Param:
    name: str
    annotation: Any
    type_name: str
    required: bool
    default: Any
    doc: str


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


class Action:
    """Base class: subclasses are dataclasses with a docstring and documented fields."""

    examples: ClassVar[tuple[dict[str, Any], ...]] = ()

    @classmethod
    def action_name(cls) -> str:
        return cls.__name__

    @classmethod
    def description(cls) -> str:
        paragraphs = inspect.cleandoc(cls.__doc__ or "").split("\n\n")
        return "\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)

    @classmethod
    def params(cls) -> list[Param]:
        hints = get_type_hints(cls)
        result = []
        for item in fields(cls):  # type: ignore[arg-type]
            if not item.init:
                continue
            if item.default is not MISSING:
                default, required = item.default, False
            elif item.default_factory is not MISSING:
                default, required = item.default_factory(), False
            else:
                default, required = None, True
            annotation = hints[item.name]
            type_name = getattr(annotation, "__name__", None) if not hasattr(annotation, "__origin__") else None
            result.append(
                Param(
                    item.name,
                    annotation,
                    str(type_name or annotation).replace("typing.", ""),
                    required,
                    default,
                    item.metadata.get("doc", ""),
                )
            )
        return result

    @classmethod
    def build(cls, parsed: ParsedAction) -> "Action":
        """Check names, count and types of the parameters, coercing the obvious (``"5"`` for an int); anything else
        is an :class:`ActionParseError` for the model."""
        params = cls.params()
        by_name = {p.name: p for p in params}
        values: dict[str, Any] = {}
        if len(parsed.positional) > len(params):
            raise ActionParseError(f"{cls.action_name()} takes at most {len(params)} parameters")
        for param, value in zip(params, parsed.positional):
            values[param.name] = value
        for name, value in parsed.keywords.items():
            if name not in by_name:
                raise ActionParseError(
                    f"{cls.action_name()} has no parameter {preview(name)}; its parameters are "
                    f"{', '.join(p.name for p in params)}"
                )
            if name in values:
                raise ActionParseError(f"{cls.action_name()}: parameter {preview(name)} is given twice")
            values[name] = value
        missing = [p.name for p in params if p.required and p.name not in values]
        if missing:
            raise ActionParseError(f"{cls.action_name()} needs the parameter(s) {', '.join(missing)}")
        coerced = {name: _coerce(cls.action_name(), by_name[name], value) for name, value in values.items()}
        return cls(**coerced)

    def arguments(self) -> dict[str, Any]:
        return {p.name: getattr(self, p.name) for p in self.params()}

    def render(self, action_format: str) -> str:
        return render_action(self.action_name(), self.arguments(), action_format)

    @classmethod
    def specification(cls, action_format: str) -> str:
        params = cls.params()
        lines = [f"### {cls.action_name()}"]
        if action_format == "markdown":
            signature = ", ".join(
                f"{p.name}: {p.type_name}" + ("" if p.required else f" = {p.default!r}") for p in params
            )
            lines.append(f"Syntax: {cls.action_name()}({signature})")
        lines.append(f"Description: {cls.description()}")
        lines.append("Parameters:")
        for p in params:
            need = "required" if p.required else f"optional, default {p.default!r}"
            lines.append(f"- {p.name} ({p.type_name}, {need}): {p.doc}")
        for example in cls.examples:
            lines.append(f"Example:\n{render_action(cls.action_name(), example, action_format)}")
        return "\n".join(lines)

    def execute(self, env: AgentEnv) -> Observation:
        raise NotImplementedError


def _coerce(action: str, param: Param, value: Any) -> Any:
    """``value`` as the parameter's declared type, or an :class:`ActionParseError` naming the parameter."""
    annotation = param.annotation
    origin = getattr(annotation, "__origin__", annotation)
    where = f"{action}: {param.name}"
    if annotation is Any:
        if isinstance(value, TextValue):
            try:
                return literal_value(value.strip(), where)
            except ActionParseError:
                raise
            except ValueError:  # not a literal: the text itself is the value
                return str(value)
        check_size(value, where)
        return value
    if origin is str:
        if isinstance(value, str):
            return str(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise ActionParseError(f"{where} must be a string, got {preview(value)}")
    if origin is int:
        return _whole_number(where, value)
    if origin in (list, dict):
        if isinstance(value, str):
            text = value.strip()
            if not text:
                return [] if origin is list else {}
            try:
                value = decode_json(text, where)
            except json.JSONDecodeError:
                try:
                    value = literal_value(text, where)
                except ActionParseError:
                    raise
                except ValueError:
                    raise ActionParseError(
                        f"{where} must be a {origin.__name__} literal, got {preview(text)}"
                    ) from None
        if origin is list and isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, origin):
            raise ActionParseError(f"{where} must be a {origin.__name__}, got {preview(value)}")
        check_size(value, where)
        return value
    raise TypeError(f"{where}: parameters of type {param.type_name} are not supported")


def _whole_number(where: str, value: Any) -> int:
    """Integers, integral floats and ASCII digit strings, of at most ``MAX_WHOLE_NUMBER_DIGITS`` digits."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        text = value.strip()
        if len(text.lstrip("+-")) > MAX_WHOLE_NUMBER_DIGITS:  # before int(): a long digit string is costly
            raise _too_many_digits(where)
        value = int(text)
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) < 10**MAX_WHOLE_NUMBER_DIGITS:
            return value
        raise _too_many_digits(where)
    raise ActionParseError(f"{where} must be a whole number, got {preview(value)}")


def _too_many_digits(where: str) -> ActionParseError:
    return ActionParseError(f"{where} must be a whole number of at most {MAX_WHOLE_NUMBER_DIGITS} digits")


# ---------------------------------------------------------------------------------------------------------------
# NeuSym-RAG actions


@dataclass
class RetrieveFromDatabase(Action):
    """Run one read-only SQL query (DuckDB dialect) against the warehouse whose schema is given below, and see
    the rows. Only SELECT/WITH, DESCRIBE, SHOW, SUMMARIZE and EXPLAIN are allowed; results are capped in rows and
    tokens, so select the columns you need and use LIMIT. Ids are UUIDs; join on ref_paper_id / ref_page_id."""

    sql: str = field(metadata=_doc("a single SQL query"))
    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {
            "sql": "SELECT table_id, table_caption, page_number FROM tables WHERE ref_paper_id = "
            "'00000000-0000-0000-0000-000000000000' ORDER BY page_number, ordinal LIMIT 10"
        },
    )

    def execute(self, env: AgentEnv) -> Observation:
        if env.warehouse is None:
            return error("unavailable", "no warehouse is open")
        try:
            result = env.warehouse.query(self.sql)
        except SQLRefused as problem:
            return error("sql_refused", str(problem), "a single SELECT query")
        except SQLTimeout as problem:
            return error("sql_timeout", f"{problem}; narrow the query (WHERE on ref_paper_id, LIMIT)")
        except SQLFailed as problem:
            return error("sql_error", str(problem))
        cut_bytes = getattr(result, "cut_bytes", False)  # the sandbox's byte cap: its note says so, not "more rows"
        formatted = format_table(
            result.columns,
            result.rows,
            env.output_format,
            env.max_rows,
            env.max_tokens,
            result.truncated and not cut_bytes,
            [result.note] if cut_bytes else (),
        )
        shown = result.rows[: formatted.shown_rows]
        return Observation(
            env.redact(formatted.text), evidence=env.evidence_from_rows(result.columns, shown, self.action_name())
        )


@dataclass
class RetrieveFromVectorstore(Action):
    """Semantic or keyword search over one encoded view (table_name, column_name) of one vector collection; returns
    the most similar cells with their paper (pdf_id), page and row id (primary_key). The filter is a boolean
    expression over the fields pdf_id, page_number, table_name, column_name, primary_key (operators ==, !=, <, <=,
    >, >=, in [...], not in [...], like, and, or, not), e.g. "pdf_id in ['<id>'] and page_number <= 3"."""

    query: str = field(metadata=_doc("what to search for"))
    collection_name: str = field(metadata=_doc("one of the collections in the vectorstore schema"))
    table_name: str = field(metadata=_doc("the table of the encoded view, e.g. chunks"))
    column_name: str = field(metadata=_doc("the column of the encoded view, e.g. text_content"))
    filter: str = field(default="", metadata=_doc("a boolean filter expression; empty for none"))
    limit: int = field(default=5, metadata=_doc(f"how many results, 1 to {MAX_VECTOR_LIMIT}"))
    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {
            "query": "ablation results on the validation set",
            "collection_name": "text_bm25_en",
            "table_name": "chunks",
            "column_name": "text_content",
            "filter": "pdf_id == '00000000-0000-0000-0000-000000000000'",
            "limit": 5,
        },
    )

    def execute(self, env: AgentEnv) -> Observation:
        if env.vectors is None:
            return error("unavailable", "no vector collections are available here", "RetrieveFromDatabase(sql=...)")
        collections = {c.name: c for c in env.collections()}
        collection = collections.get(self.collection_name)
        if collection is None:
            return error(
                "invalid_parameter",
                f"unknown collection {self.collection_name!r}; available: {', '.join(sorted(collections)) or 'none'}",
            )
        views = collection.views or env.encodable_views(collection.modality)
        if (self.table_name, self.column_name) not in [tuple(v) for v in views]:
            listed = ", ".join(f"{t}.{c}" for t, c in views)
            return error(
                "invalid_parameter",
                f"{self.table_name}.{self.column_name} is not encoded in {self.collection_name}; "
                f"encoded views: {listed}",
            )
        if not 1 <= self.limit <= MAX_VECTOR_LIMIT:
            return error("invalid_parameter", f"limit must be between 1 and {MAX_VECTOR_LIMIT}, got {self.limit}")
        try:
            expression = validate_filter(self.filter)
            hits = env.vectors.search(
                self.query, self.collection_name, self.table_name, self.column_name, expression, self.limit
            )
        except InvalidFilter as problem:
            return error(
                "invalid_filter",
                f"invalid filter {self.filter!r}: {problem}",
                "a filter such as pdf_id == '<paper id>' and page_number in [1, 2]",
            )
        return hits_observation(env, hits, collection.modality, self.action_name())


def hits_observation(env: AgentEnv, hits: list[Any], modality: str, source: str) -> Observation:
    needs_box = [h.primary_key for h in hits if not h.bbox]
    located: dict[str, tuple] = {}
    if needs_box and hits and env.warehouse is not None:
        located = env.locate(hits[0].table_name, needs_box)
    evidence = []
    for hit in hits:
        bbox = hit.bbox or (located.get(str(hit.primary_key), (None, None, None))[2])
        evidence.append(
            Evidence(
                paper_id=str(hit.pdf_id),
                page_number=hit.page_number,
                bbox=tuple(float(v) for v in bbox) if bbox else None,
                table_name=hit.table_name,
                column_name=hit.column_name,
                row_id=str(hit.primary_key),
                snippet=snippet(hit.text or ""),
                source=source,
            )
        )
    content = "bbox" if modality == "image" else "text"
    columns = ["primary_key", "pdf_id", "page_number", "score", content]
    rows = [
        (
            h.primary_key,
            h.pdf_id,
            h.page_number,
            round(float(h.score), 4),
            jsonable(list(h.bbox)) if content == "bbox" and h.bbox else h.text,
        )
        for h in hits
    ]
    formatted = format_table(columns, rows, env.output_format, env.max_rows, env.max_tokens)
    return Observation(env.redact(formatted.text), evidence=evidence[: formatted.shown_rows])


@dataclass
class ClassicRetrieve(Action):
    """Retrieve the passages (chunks of paper text) most similar to the query, from the papers in scope."""

    query: str = field(metadata=_doc("what to search for"))
    limit: int = field(default=5, metadata=_doc(f"how many passages, 1 to {MAX_VECTOR_LIMIT}"))
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"query": "number of training examples", "limit": 5},)

    def execute(self, env: AgentEnv) -> Observation:
        collection = env.classic_collection()
        if collection is None:
            return error("unavailable", "no text collection is available here")
        scope = f"pdf_id in {quote_filter_list(env.scope_paper_ids)}" if env.scope_paper_ids else ""
        return RetrieveFromVectorstore(self.query, collection, "chunks", "text_content", scope, self.limit).execute(env)


@dataclass
class ViewImage(Action):
    """Look at a page of a paper, or a region of it, as an image (for figures, charts and table layouts). The
    page is rendered and attached to the observation. bounding_box is [x0, y0, w, h] in PDF points from the
    top-left corner, as stored in the tables/images bounding_box columns; an empty list shows the whole page."""

    paper_id: str = field(metadata=_doc("the paper's id (metadata.paper_id, a UUID)"))
    page_number: int = field(metadata=_doc("the page, from 1"))
    bounding_box: list = field(default_factory=list, metadata=_doc("[x0, y0, w, h] or [] for the whole page"))
    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"paper_id": "00000000-0000-0000-0000-000000000000", "page_number": 3, "bounding_box": [72, 90, 451, 210]},
    )
    MAX_POINTS: ClassVar[float] = 14_400.0  # the largest PDF page (200 inches): no real box reaches past it
    _file_hashes: ClassVar[dict[tuple[str, int, int], str]] = {}  # (path, mtime_ns, size) -> sha256

    def execute(self, env: AgentEnv) -> Observation:
        try:
            canonical = str(uuid.UUID(str(self.paper_id)))
        except ValueError:
            return error("invalid_parameter", f"paper_id must be a paper's UUID, got {self.paper_id!r}")
        if canonical != str(self.paper_id).strip().lower():
            return error("invalid_parameter", f"paper_id must be a paper's UUID, got {self.paper_id!r}")
        if not isinstance(self.page_number, int) or isinstance(self.page_number, bool):
            return error("invalid_parameter", f"page_number must be a whole number, got {self.page_number!r}")
        if self.page_number < 1:
            return error("invalid_parameter", "page_number starts at 1")
        box = self.bounding_box
        if box and (
            not isinstance(box, (list, tuple))
            or len(box) != 4
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in box)
        ):
            return error("invalid_parameter", "bounding_box must be [x0, y0, w, h] (four finite numbers), or []")
        if box and not all(abs(v) <= self.MAX_POINTS for v in box):
            return error(
                "invalid_parameter",
                f"bounding_box values are PDF points and lie within ±{self.MAX_POINTS:g}"
                f" (the largest PDF page), got [{', '.join(f'{v:.4g}' for v in box)}]",
            )
        if box and (box[2] < 1 or box[3] < 1):
            return error(
                "invalid_parameter", f"bounding_box must be at least 1 x 1 points, got w={box[2]:.4g}, h={box[3]:.4g}"
            )
        if env.warehouse is None:
            return error("unavailable", "no warehouse is open")
        located = env.pdf_path(canonical)
        if located is None:
            return error("not_found", f"no paper with id {canonical} (or no PDF recorded for it)")
        path, num_pages = located
        if num_pages and self.page_number > num_pages:
            return error("invalid_parameter", f"paper {canonical} has {num_pages} pages")
        if path.suffix.lower() != ".pdf" or not path.is_file():
            return error("not_found", f"the PDF of paper {canonical} is not available on this machine")
        try:
            recorded = env.query(
                "select sha256 from metadata where cast(paper_id as varchar) = ?", [canonical], max_rows=1
            ).rows
            found = self._sha256(path)
        except (SQLFailed, SQLTimeout) as problem:
            return error("unavailable", f"cannot read the sha256 of paper {canonical} from the warehouse: {problem}")
        except OSError:
            return error("not_found", f"the PDF of paper {canonical} is not available on this machine")
        # a warehouse built by the pipeline always records it (metadata.sha256 is NOT NULL in the mart's contract)
        if recorded and recorded[0][0] and str(recorded[0][0]).lower() != found:
            return error(
                "file_changed",
                f"the PDF of paper {canonical} on this machine is not the file that was "
                "ingested (its sha256 differs); re-ingest it before viewing its pages",
            )
        try:
            png, shown = render_region(path, self.page_number, list(box), env.image_dpi, env.image_max_pixels)
        except ValueError as problem:
            return error("invalid_parameter", str(problem))
        region = "the whole page" if not box else "region [" + ", ".join(f"{v:g}" for v in shown) + "]"
        evidence = Evidence(canonical, self.page_number, tuple(shown) if box else None, source=self.action_name())
        text = f"Page {self.page_number} of paper {canonical}, {region}, is attached as an image."
        figures = self._figures_shown(env, canonical, list(shown) if box else None)
        return Observation(text + figures, images=[png], evidence=[evidence])

    FIGURE_TEXT_CHARS: ClassVar[int] = 1200  # per figure: the labels a reader would look for, not a page of text

    def _figures_shown(self, env: AgentEnv, paper_id: str, box: list | None) -> str:
        """The caption and printed words (images.image_text) of each figure whose box's centre is in the shown
        region (every whole figure of the page when it is shown whole): what the image says in text, for a model
        that cannot read small labels, or none. Nothing when the warehouse predates the column."""
        try:
            rows = env.query(
                "select image_label, image_caption, image_text, bounding_box, parent_image_id is not null "
                "from images where cast(ref_paper_id as varchar) = ? and page_number = ? order by ordinal",
                [paper_id, self.page_number],
                max_rows=200,
            ).rows
        except (SQLFailed, SQLTimeout, SQLRefused):
            return ""
        lines = []
        for label, caption, text, bbox, is_panel in rows:
            if not bbox or (box is None and is_panel):
                continue
            cx, cy = bbox[0] + bbox[2] / 2, bbox[1] + bbox[3] / 2
            if box is not None and not (box[0] <= cx <= box[0] + box[2] and box[1] <= cy <= box[1] + box[3]):
                continue
            name = ("a panel of " if is_panel else "") + (label or "an unlabelled figure")
            words = " / ".join((text or "").split("\n"))
            if len(words) > self.FIGURE_TEXT_CHARS:
                words = words[: self.FIGURE_TEXT_CHARS].rsplit(" ", 1)[0] + " …"
            lines.append(
                f"- {name} at [{', '.join(str(v) for v in bbox)}]: caption: {snippet(caption or '(none)')}; "
                f"words inside: {words or '(none in the text layer)'}"
            )
        return ("\nFigures in view (images rows):\n" + "\n".join(lines)) if lines else ""

    @classmethod
    def _sha256(cls, path: Any) -> str:
        """The file's sha256, hashed once per (path, mtime, size): viewing more pages of a paper does not re-read it."""
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        if key not in cls._file_hashes:
            if len(cls._file_hashes) >= 1024:
                cls._file_hashes.clear()
            with open(path, "rb") as handle:
                cls._file_hashes[key] = hashlib.file_digest(handle, "sha256").hexdigest()
        return cls._file_hashes[key]


def render_region(path: Any, page_number: int, box: list[float], dpi: int, max_pixels: int) -> tuple[bytes, list]:
    """PNG of a page or a clipped region, scaled so its longer side is at most ``max_pixels``."""
    import pymupdf  # deferred: pymupdf

    with pymupdf.open(str(path)) as document:
        if page_number > document.page_count:
            raise ValueError(f"the paper has {document.page_count} pages")
        page = document[page_number - 1]
        clip = page.rect
        if box:
            x0, y0, w, h = box
            clip = pymupdf.Rect(x0, y0, x0 + w, y0 + h) & page.rect
            if clip.is_empty or clip.width < 1 or clip.height < 1:
                raise ValueError(
                    f"bounding_box {box} lies outside the page ({page.rect.width:g} x {page.rect.height:g})"
                )
        zoom = min(dpi / 72, max_pixels / max(clip.width, clip.height))
        pixmap = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), clip=clip, alpha=False)
        return pixmap.tobytes("png"), [clip.x0, clip.y0, clip.width, clip.height]


@dataclass
class CalculateExpr(Action):
    """Evaluate an arithmetic expression exactly (do not compute in your head): numbers, + - * / // % **,
    comparisons, and functions such as abs, round, min, max, sqrt, log, exp."""

    expr: str = field(metadata=_doc("the expression, e.g. (71.2 - 68.5) / 68.5 * 100"))
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"expr": "round((71.2 - 68.5) / 68.5 * 100, 2)"},)

    def execute(self, env: AgentEnv) -> Observation:
        try:
            value = safe_eval(self.expr)
        except (SafeEvalError, ArithmeticError, ValueError, RecursionError) as problem:
            return error("calculation_refused", str(problem) or type(problem).__name__)
        return Observation(f"{self.expr} = {value!r}")


@dataclass
class GenerateAnswer(Action):
    """Give the final answer and stop. The answer must follow the requested answer format (a Python literal
    such as a number, a string, a list or a dict when the format asks for one)."""

    answer: Any = field(metadata=_doc("the final answer"))
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"answer": 42.1},)

    def execute(self, env: AgentEnv) -> Observation:
        value = jsonable(self.answer)
        return Observation(f"Answer: {json.dumps(value, ensure_ascii=False)}", is_answer=True, answer=value)


# ---------------------------------------------------------------------------------------------------------------
# MathRAG actions: retrieve formulas, build a verified tool from one, call it


def _formula_evidence(record: dict[str, Any], source: str) -> Evidence | None:
    paper = record.get("paper_id") or record.get("pdf_id")
    if not paper:
        return None
    bbox = record.get("bbox") or record.get("bounding_box")
    return Evidence(
        str(paper),
        record.get("page_number"),
        tuple(bbox) if bbox else None,
        "formulas",
        "latex",
        str(record.get("formula_id") or record.get("constant_id") or record.get("name") or ""),
        snippet(record.get("latex") or record.get("value") or ""),
        source,
    )


@dataclass
class RetrieveMathKnowledge(Action):
    """Find formulas (definitions, metrics, equations from the papers) relevant to the question; returns each
    formula's id, name, LaTeX and parameters. Give a query, or a list of search terms."""

    query: str = field(default="", metadata=_doc("a description of the formula you need"))
    search_terms: list = field(default_factory=list, metadata=_doc("alternatively, a list of keywords"))
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"query": "F1 score from precision and recall"},)

    def execute(self, env: AgentEnv) -> Observation:
        if env.formulas is None:
            return error("unavailable", "no formula graph is available here")
        if len(self.search_terms) > MAX_SEARCH_TERMS:
            return error(
                "invalid_parameter", f"give at most {MAX_SEARCH_TERMS} search_terms, got {len(self.search_terms)}"
            )
        terms = [str(t) for t in self.search_terms if str(t).strip()]
        if not self.query.strip() and not terms:
            return error("invalid_parameter", "give a query or search_terms")
        queries = [self.query] if self.query.strip() else terms
        found: dict[str, dict[str, Any]] = {}
        for query in queries:
            for record in env.formulas.search_formulas(query, limit=env.max_rows):
                found.setdefault(str(record["formula_id"]), record)
        env.retrieved_formulas.update(found)
        if not found:
            return Observation("No formulas matched; try other terms.")
        columns = ["formula_id", "name", "latex", "parameters", "description"]
        rows = [[jsonable(r.get(c)) for c in columns] for r in found.values()]
        evidence = [e for e in (_formula_evidence(r, self.action_name()) for r in found.values()) if e]
        return Observation(env.redact(env.table_text(columns, rows)), evidence=evidence)


@dataclass
class RetrieveConstant(Action):
    """Look up a named constant or reported value (with its unit) used in formulas."""

    query: str = field(metadata=_doc("the constant's name or description"))
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"query": "speed of light"},)

    def execute(self, env: AgentEnv) -> Observation:
        if env.formulas is None:
            return error("unavailable", "no formula graph is available here")
        records = env.formulas.search_constants(self.query, limit=env.max_rows)
        if not records:
            return Observation("No constants matched; try other terms.")
        columns = ["name", "symbol", "value", "unit", "description"]
        rows = [[jsonable(r.get(c)) for c in columns] for r in records]
        evidence = [e for e in (_formula_evidence(r, self.action_name()) for r in records) if e]
        return Observation(env.redact(env.table_text(columns, rows)), evidence=evidence)


@dataclass
class CreateDynamicTool(Action):
    """Turn a retrieved formula into a callable, verified calculator tool. Only formulas returned by
    RetrieveMathKnowledge in this session can be used; the observation gives the tool's name and parameters."""

    formula_id: str = field(metadata=_doc("a formula_id from RetrieveMathKnowledge"))
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"formula_id": "00000000-0000-0000-0000-000000000000"},)

    def execute(self, env: AgentEnv) -> Observation:
        if env.formulas is None:
            return error("unavailable", "no formula graph is available here")
        if not env.retrieved_formulas:
            return error(
                "workflow",
                "no formula has been retrieved yet, so there is nothing to build a tool from",
                env.step("RetrieveMathKnowledge", query="<what the formula computes>"),
            )
        if self.formula_id not in env.retrieved_formulas:
            known = ", ".join(sorted(env.retrieved_formulas))
            return error(
                "workflow",
                f"formula {self.formula_id!r} was not retrieved in this session; retrieved: {known}",
                env.step("CreateDynamicTool", formula_id=sorted(env.retrieved_formulas)[0]),
            )
        try:
            tool = env.formulas.create_tool(self.formula_id)
        except (KeyError, ValueError) as problem:
            return error("tool_error", f"cannot build a tool from formula {self.formula_id}: {problem}")
        env.tools[tool.name] = tool
        schema = json.dumps(jsonable(dict(tool.parameter_schema)), ensure_ascii=False)
        example = {name: "<value>" for name in _schema_names(tool.parameter_schema)}
        return Observation(
            f"Created tool {tool.name!r} with parameters {schema}. "
            f"Call it with {env.step('CallTool', tool_name=tool.name, parameters=example)}"
        )


def _schema_names(schema: Any) -> list[str]:
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        return list(schema["properties"])
    return list(schema) if isinstance(schema, dict) else []


@dataclass
class CallTool(Action):
    """Call a tool made by CreateDynamicTool with values for its parameters; returns the computed value."""

    tool_name: str = field(metadata=_doc("the name CreateDynamicTool returned"))
    parameters: dict = field(default_factory=dict, metadata=_doc("parameter name -> number"))
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"tool_name": "f1_score", "parameters": {"p": 0.8, "r": 0.6}},)

    def execute(self, env: AgentEnv) -> Observation:
        if not env.tools:
            if not env.retrieved_formulas:
                step = env.step("RetrieveMathKnowledge", query="<what the formula computes>")
                message = "no tool exists yet: retrieve a formula, then create a tool from it"
            else:
                step = env.step("CreateDynamicTool", formula_id=sorted(env.retrieved_formulas)[0])
                message = "no tool exists yet: create one from a retrieved formula first"
            return error("workflow", message, step)
        tool = env.tools.get(self.tool_name)
        if tool is None:
            return error(
                "workflow",
                f"no tool named {self.tool_name!r}; created tools: {', '.join(sorted(env.tools))}",
                env.step("CallTool", tool_name=sorted(env.tools)[0], parameters={}),
            )
        try:
            outcome = tool_outcome(tool(**{str(name): value for name, value in self.parameters.items()}))
        except (TypeError, ValueError, ArithmeticError) as problem:
            return error("tool_error", f"{self.tool_name}: {describe(problem)}")
        if not outcome.ok:
            return error("tool_error", f"{self.tool_name}: {outcome.error}")
        return Observation(f"{self.tool_name}({json.dumps(jsonable(self.parameters))}) = {outcome.value!r}")


NEUSYM_ACTIONS: tuple[type[Action], ...] = (
    RetrieveFromDatabase,
    RetrieveFromVectorstore,
    ViewImage,
    CalculateExpr,
    GenerateAnswer,
)
MATH_ACTIONS: tuple[type[Action], ...] = (RetrieveMathKnowledge, RetrieveConstant, CreateDynamicTool, CallTool)
ALL_ACTIONS: tuple[type[Action], ...] = (*NEUSYM_ACTIONS, ClassicRetrieve, *MATH_ACTIONS)
