"""What the agent needs from the vector layer and the formula graph, as small protocols.

The agent depends on these shapes, not on Milvus or on the formula code, so its tests run with fakes and the real
stores plug in through the adapters at the bottom. Vector filters are validated here before any backend sees
them: a filter is a boolean expression over the entity fields every collection carries, in Milvus syntax.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from paperlake import formulas
from paperlake.vectors.filters import FilterError
from paperlake.vectors.filters import validate_filter as validate

FILTER_FIELDS = {"pdf_id": str, "page_number": int, "table_name": str, "column_name": str, "primary_key": str}
FILTER_OPERATORS = ("==", "!=", ">", ">=", "<", "<=", "in", "not in", "like", "and", "or", "not")


class BackendUnavailable(RuntimeError):
    """A store the method needs is not built or not installed; the message names it and how to build it."""


class InvalidFilter(ValueError):
    """A vector filter that is not a valid boolean expression over the entity fields."""


@dataclass
class Hit:
    score: float
    pdf_id: str
    page_number: int | None
    table_name: str
    column_name: str
    primary_key: str
    text: str | None = None
    bbox: Sequence[float] | None = None


@dataclass
class CollectionInfo:
    name: str
    modality: str  # "text" | "image"
    model: str
    metric: str
    dimension: int | None = None
    views: list[tuple[str, str]] = field(default_factory=list)  # (table_name, column_name) pairs encoded
    fields: list[str] = field(default_factory=lambda: list(FILTER_FIELDS))
    description: str = ""


@runtime_checkable
class VectorBackend(Protocol):
    def collections(self) -> list[CollectionInfo]: ...

    def search(
        self,
        query: str,
        collection: str,
        table_name: str | None,
        column_name: str | None,
        filter: str = "",
        limit: int = 5,
    ) -> list[Hit]:
        """Top ``limit`` cells of ``collection``: of one view, or of every view when both names are None."""
        ...


@dataclass
class ToolOutcome:
    ok: bool
    value: Any = None
    error: str | None = None


@runtime_checkable
class FormulaTool(Protocol):
    name: str
    parameter_schema: Mapping[str, Any]

    def __call__(self, **parameters: Any) -> Any: ...


@runtime_checkable
class FormulaBackend(Protocol):
    def search_formulas(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Formulas as dicts with at least ``formula_id``, ``name``, ``latex``; optionally ``parameters``,
        ``description``, ``paper_id``, ``page_number``."""
        ...

    def search_constants(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Constants as dicts with at least ``name`` and ``value``; optionally ``symbol``, ``unit``, ``paper_id``."""
        ...

    def create_tool(self, formula_id: str) -> FormulaTool: ...


def tool_outcome(result: Any) -> ToolOutcome:
    """A formula tool's result (``ok``/``value``/``error`` attributes, a mapping, or a bare value) normalised."""
    if isinstance(result, ToolOutcome):
        return result
    if hasattr(result, "ok"):
        return ToolOutcome(bool(result.ok), getattr(result, "value", None), getattr(result, "error", None))
    if isinstance(result, Mapping) and "ok" in result:
        return ToolOutcome(bool(result["ok"]), result.get("value"), result.get("error"))
    return ToolOutcome(True, result)


# ---------------------------------------------------------------------------------------------------------------
# Filter validation: one parser for every surface, paperlake.vectors.filters (iterative, depth- and size-limited).


def validate_filter(expression: str) -> str:
    """The filter, normalised, if valid (empty is valid), else :class:`InvalidFilter` saying why in one line."""
    try:
        return validate(expression, fields=FILTER_FIELDS)
    except FilterError as problem:
        raise InvalidFilter(" ".join(str(problem).split())) from None


def quote_filter_list(values: Sequence[str]) -> str:
    """``['a', 'b']`` for ``pdf_id in [...]`` (values are ids we produced, quoted defensively)."""
    return "[" + ", ".join("'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'" for v in values) + "]"


# ---------------------------------------------------------------------------------------------------------------
# Adapters to the real stores (imported lazily: the agent works without them and says so).


def open_vector_backend(milvus_uri: str) -> VectorBackend | None:
    """The Milvus collections through ``paperlake.vectors``; None when no collection has been built yet."""
    from paperlake.vectors.store import VectorStore  # deferred: pymilvus

    store = VectorStore(milvus_uri)
    if not any(store.client.has_collection(spec.name) for spec in store.active_specs()):
        store.close()
        return None
    return MilvusVectors(store)


class MilvusVectors:
    """Adapter from ``paperlake.vectors`` (store, search, descriptions) to the agent's vector backend."""

    def __init__(self, store: Any) -> None:
        from paperlake.vectors import describe, filters, search  # deferred: pymilvus

        self._store = store
        self._describe = describe.describe_collections
        self._search = search.search
        self._filter_error = filters.FilterError

    def close(self) -> None:
        self._store.close()

    def collections(self) -> list[CollectionInfo]:
        infos = []
        # no counts: a collection's description here is its name, fields and views (~60 count queries otherwise)
        for item in self._describe(self._store, with_counts=False):
            if not item["active"]:
                continue
            dense = [v for v in item["vectors"] if v["kind"] != "bm25"]
            infos.append(
                CollectionInfo(
                    name=item["name"],
                    modality=item["modality"],
                    model=", ".join(str(v["model"]) for v in item["vectors"]),
                    metric=", ".join(str(v["metric"]) for v in item["vectors"]),
                    dimension=dense[0]["dimension"] if dense else None,
                    views=[(v["table_name"], v["column_name"]) for v in item["views"]],
                    fields=[f["name"] for f in item["fields"] if f["name"] != "id"],
                    description=str(item.get("description") or ""),
                )
            )
        return infos

    def prepare(self, queries: list[str]) -> None:
        """Encode the questions of a batch of searches at once (an evaluation's)."""
        self._store.prepare_queries(queries)

    def search(
        self,
        query: str,
        collection: str,
        table_name: str | None,
        column_name: str | None,
        filter: str = "",
        limit: int = 5,
    ) -> list[Hit]:
        try:
            hits = self._search(
                self._store,
                query,
                collection,
                table_name=table_name,
                column_name=column_name,
                filter=filter,
                limit=limit,
            )
        except self._filter_error as error:
            raise InvalidFilter(str(error)) from error
        return [
            Hit(
                score=float(getattr(h, "score", 0.0)),
                pdf_id=str(getattr(h, "pdf_id")),
                page_number=getattr(h, "page_number", None),
                table_name=str(getattr(h, "table_name", table_name)),
                column_name=str(getattr(h, "column_name", column_name)),
                primary_key=str(getattr(h, "primary_key")),
                text=getattr(h, "text", None),
                bbox=getattr(h, "bbox", None),
            )
            for h in hits
        ]


def open_formula_backend(warehouse: Any, milvus_uri: str | None = None) -> FormulaBackend | None:
    """The formula graph through ``paperlake.formulas``, or None when the warehouse has no formula tables yet; with
    ``milvus_uri`` its search uses the Milvus ``formulas`` collection when that exists."""
    return formulas.agent_backend(warehouse, milvus_uri)
