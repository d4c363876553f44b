"""Vector search over one collection and one view, as the agent's RetrieveFromVectorstore action does it.

Scores are reported larger-is-better whatever the backend returns, and results keep the backend's order:
- BM25: Milvus Lite returns the BM25 score negated as a distance (a Milvus server returns it positive); we report
  ``abs(distance)``, the BM25 score itself.
- COSINE / IP: the similarity as returned. L2: the negated distance.
- hybrid: the fused score Milvus returns (RRF: Σ 1/(k + rank); weighted: Σ wᵢ·normalised scoreᵢ).

Hybrid search runs inside Milvus (``hybrid_search``) on a collection that holds both a BM25 and a dense field
(``text_hybrid``): RRF with k from the config by default, or Milvus' WeightedRanker when ``weights`` are given
(Milvus' RRF takes no weights). ``hybrid=True`` on a single-vector collection searches the configured hybrid
collection instead, and each hit names the collection that answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker

from paperlake.vectors.config import CollectionSpec, VectorFieldSpec
from paperlake.vectors.filters import FilterError, quote_literal, validate_filter
from paperlake.vectors.store import VectorStore

__all__ = ["FilterError", "Hit", "search"]

@dataclass(frozen=True)
class Hit:
    score: float
    pdf_id: str
    page_number: int
    table_name: str
    column_name: str
    primary_key: str
    text: str | None
    bbox: list[float] | None
    collection: str
    entity_id: str = ""


def _score(metric: str, distance: float) -> float:
    if metric == "BM25":
        return abs(distance)
    if metric == "L2":
        return -distance
    return distance


def _query_vector(store: VectorStore, vector: VectorFieldSpec, query: str):
    if vector.kind == "bm25":
        return query
    return store.encoders.get(vector.encoder).encode([query])[0].tolist()


def search(
    store: VectorStore,
    query: str,
    collection: str,
    table_name: str | None = None,
    column_name: str | None = None,
    filter: str = "",
    limit: int = 5,
    hybrid: bool = False,
    weights: Sequence[float] | None = None,
) -> list[Hit]:
    """Top ``limit`` entities of ``collection`` for ``query``, restricted to the view and the (validated) filter."""
    if not query or not query.strip():
        raise ValueError("empty query")
    if limit <= 0:
        raise ValueError("limit must be positive")
    spec = store.config.collection(collection)
    if hybrid and not spec.is_hybrid:
        spec = store.config.collection(store.config.hybrid_collection)
    if not store.is_available(spec):
        raise ValueError(f"collection {spec.name} is not active here: {store.config.inactive_reason(spec)}")
    if weights is not None and len(weights) != len(spec.vectors):
        raise ValueError(f"{spec.name} fuses {len(spec.vectors)} routes "
                         f"({', '.join(v.field for v in spec.vectors)}); got {len(weights)} weights")

    clauses = [f"({validated})"] if (validated := validate_filter(filter)) else []
    if table_name is not None:
        clauses.insert(0, f"table_name == {quote_literal(table_name)}")
    if column_name is not None:
        clauses.insert(1 if table_name is not None else 0, f"column_name == {quote_literal(column_name)}")
    expression = " and ".join(clauses)

    if not store.client.has_collection(spec.name):
        return []
    store.load(spec.name)
    partitions = None
    if table_name is not None and column_name is not None:
        partition = store.view_partition(spec.name, table_name, column_name, create=False)
        if partition is None:
            return []
        partitions = [partition]

    output_fields = list(_output_fields(spec))
    if spec.is_hybrid:
        depth = max(store.config.candidates_per_route, limit)
        requests = [
            AnnSearchRequest(data=[_query_vector(store, v, query)], anns_field=v.field, param={}, limit=depth,
                             expr=expression or None)
            for v in spec.vectors
        ]
        ranker = WeightedRanker(*weights) if weights is not None else RRFRanker(store.config.rrf_k)
        results = store.client.hybrid_search(spec.name, requests, ranker, limit=limit, output_fields=output_fields,
                                             partition_names=partitions)
        metric = "fused"
    else:
        vector = spec.vectors[0]
        results = store.client.search(
            spec.name, data=[_query_vector(store, vector, query)], anns_field=vector.field, filter=expression,
            limit=limit, output_fields=output_fields, partition_names=partitions,
        )
        metric = vector.metric
    return [_hit(spec, metric, raw) for raw in (results[0] if results else [])]


def _output_fields(spec: CollectionSpec) -> tuple[str, ...]:
    content = "text" if spec.modality == "text" else "bbox"
    return ("pdf_id", "page_number", "table_name", "column_name", "primary_key", content)


def _hit(spec: CollectionSpec, metric: str, raw: dict) -> Hit:
    entity = raw.get("entity", raw)
    return Hit(
        score=_score(metric, float(raw["distance"])),
        pdf_id=entity["pdf_id"],
        page_number=int(entity["page_number"]),
        table_name=entity["table_name"],
        column_name=entity["column_name"],
        primary_key=entity["primary_key"],
        text=entity.get("text") if spec.modality == "text" else None,
        bbox=list(entity["bbox"]) if spec.modality == "image" and entity.get("bbox") is not None else None,
        collection=spec.name,
        entity_id=str(raw.get("id", "")),
    )
