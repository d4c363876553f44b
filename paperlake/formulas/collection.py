"""The Milvus ``formulas`` collection: one entity per formula entity, over its composite description.

The formula graph merges occurrences across papers, so an entity is a formula, not a warehouse cell: its id is
the formula id (itself uuid5 of the canonical key or the normalised LaTeX), and it carries the label, the status,
the first occurrence's paper and page (``pdf_id``/``page_number``, so the filters every collection understands
work here too) and every occurrence as JSON. ``table_name``/``column_name``/``primary_key`` are
``formulas``/``description``/formula id, the warehouse cell the text comes from.

:func:`sync_formula_collection` makes the collection exactly the graph's formulas: unchanged entities (same
``text_hash`` = sha256 of the encoder fingerprint and everything the entity carries) are skipped without
encoding, changed ones are encoded through the shared embedding cache and upserted, and entities whose formula
left the graph (its last paper was removed) are deleted. The store is a :class:`paperlake.vectors.store.VectorStore`,
so the Milvus URI, the file lock, the encoder registry and the cache are the vector layer's.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from paperlake.vectors import pymilvus_names as milvus  # pymilvus itself on first use of a name
from paperlake.vectors.embedding_cache import encode_cached
from paperlake.vectors.filters import OPERATORS, validate_filter
from paperlake.vectors.store import (
    INCARNATION_PROPERTY,
    SchemaMismatchError,
    create_collection_if_absent,
    ensure_indexes,
)

FORMULA_COLLECTION = "formulas"
FORMULA_ENCODER = "all_minilm_l6_v2"
FORMULA_COLLECTION_DESCRIPTION = (
    "Dense all-MiniLM-L6-v2 embeddings (384-d, normalised) of each formula entity's composite description "
    "(label, normalised LaTeX, parameter meanings, context); one entity per formula, merged across papers."
)
_FIELDS = {
    "id": "entity id: the formula id (uuid5 of its canonical key, or of its normalised LaTeX)",
    "formula_id": "formulas.formula_id",
    "label": "the formula's label (what it computes)",
    "status": "validated | templated | not_computable | failed",
    "pdf_id": "paper id of the formula's first occurrence",
    "page_number": "page of the formula's first occurrence",
    "table_name": "always 'formulas'",
    "column_name": "always 'description'",
    "primary_key": "the formula id (formulas.formula_id)",
    "paper_ids": "every paper the formula occurs in (JSON list)",
    "occurrences": "every occurrence as {pdf_id, page_number, equation_number} (JSON list)",
    "text": "the composite description that is embedded",
}
FILTER_FIELDS: dict[str, type] = {
    "pdf_id": str,
    "page_number": int,
    "status": str,
    "formula_id": str,
    "table_name": str,
    "column_name": str,
    "primary_key": str,
}
_VARCHAR = {
    "id": 64,
    "formula_id": 64,
    "label": 512,
    "status": 32,
    "pdf_id": 64,
    "table_name": 64,
    "column_name": 64,
    "primary_key": 256,
    "text_hash": 64,
}
_TEXT_MAX_BYTES = 65535
_WRITE_BATCH = 500
_QUERY_PAGE = 4096


@dataclass
class FormulaCollectionStats:
    entities: int = 0
    upserted: int = 0
    unchanged: int = 0
    deleted: int = 0
    encoded: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def _truncate(text: str, max_bytes: int) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= max_bytes else data[:max_bytes].decode("utf-8", errors="ignore")


def formula_entities(tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Entity rows (without vectors) from the formula tables as :meth:`FormulaGraph.to_rows` writes them."""
    occurrences: dict[str, list[Mapping[str, Any]]] = {}
    for occurrence in tables.get("formula_occurrences", []):
        occurrences.setdefault(occurrence["formula_id"], []).append(occurrence)
    entities = []
    for formula in tables.get("formulas", []):
        found = sorted(
            occurrences.get(formula["formula_id"], []),
            key=lambda item: (item["paper_id"], item.get("page_number") or 0, item.get("part") or 0),
        )
        if not found:
            continue
        first = found[0]
        entities.append(
            {
                "id": formula["formula_id"],
                "formula_id": formula["formula_id"],
                "label": _truncate(formula.get("label") or "", _VARCHAR["label"] - 4),
                "status": formula.get("status") or "",
                "pdf_id": first["paper_id"],
                "page_number": int(first.get("page_number") or 0),
                "table_name": "formulas",
                "column_name": "description",
                "primary_key": formula["formula_id"],
                "paper_ids": sorted({item["paper_id"] for item in found}),
                "occurrences": [
                    {
                        "pdf_id": item["paper_id"],
                        "page_number": item.get("page_number"),
                        "equation_number": item.get("equation_number"),
                    }
                    for item in found
                ],
                "text": _truncate(formula.get("description") or formula.get("latex") or "", _TEXT_MAX_BYTES),
            }
        )
    return entities


def _encoder_fingerprint(store: Any) -> str:
    """Names the vectors: model, backend (float or int8 graph) and sequence length, so an entity encoded by another
    configuration of the same model is re-encoded, not kept beside query vectors of a different graph."""
    return f"sentence_transformers:{store.encoders.get(FORMULA_ENCODER).cache_key}"


def _entity_hash(fingerprint: str, entity: Mapping[str, Any]) -> str:
    payload = json.dumps({key: value for key, value in entity.items() if key != "id"}, sort_keys=True)
    return hashlib.sha256(f"{fingerprint}\n{payload}".encode("utf-8")).hexdigest()


def collection_available(store: Any) -> bool:
    """The collection exists in the store and its encoder's weights are on this machine."""
    return store.encoders.available(FORMULA_ENCODER) and store.client.has_collection(FORMULA_COLLECTION)


def ensure_formula_collection(store: Any) -> None:
    """Make the collection exist with its indexes and incarnation, and load it; safe against a concurrent writer
    creating it at the same moment and against a writer killed half-way (see ``VectorStore.ensure_collections``)."""
    client = store.client
    dimension = store.config.encoders[FORMULA_ENCODER].dimension
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False, description=FORMULA_COLLECTION_DESCRIPTION)
    schema.add_field("id", milvus.DataType.VARCHAR, max_length=_VARCHAR["id"], is_primary=True)
    for name in ("formula_id", "label", "status", "pdf_id"):
        schema.add_field(name, milvus.DataType.VARCHAR, max_length=_VARCHAR[name])
    schema.add_field("page_number", milvus.DataType.INT64)
    for name in ("table_name", "column_name", "primary_key"):
        schema.add_field(name, milvus.DataType.VARCHAR, max_length=_VARCHAR[name])
    schema.add_field("paper_ids", milvus.DataType.JSON)
    schema.add_field("occurrences", milvus.DataType.JSON)
    schema.add_field("text", milvus.DataType.VARCHAR, max_length=_TEXT_MAX_BYTES)
    schema.add_field("text_hash", milvus.DataType.VARCHAR, max_length=_VARCHAR["text_hash"])
    schema.add_field("vector", milvus.DataType.FLOAT_VECTOR, dim=dimension)
    index_params = client.prepare_index_params()
    index_params.add_index("vector", index_type="AUTOINDEX", metric_type="COSINE")
    for scalar in ("pdf_id", "status", "page_number"):
        index_params.add_index(scalar, index_type="INVERTED")
    create_collection_if_absent(client, FORMULA_COLLECTION, schema)
    fields = {f["name"]: f for f in client.describe_collection(FORMULA_COLLECTION)["fields"]}
    have = int((fields.get("vector", {}).get("params") or {}).get("dim", 0))
    if have != dimension:
        raise SchemaMismatchError(
            f"collection {FORMULA_COLLECTION}.vector is {have}-d, the encoder gives "
            f"{dimension}-d; drop the collection to rebuild it"
        )
    ensure_indexes(client, FORMULA_COLLECTION, index_params)
    properties = client.describe_collection(FORMULA_COLLECTION).get("properties") or {}
    if INCARNATION_PROPERTY not in properties:
        client.alter_collection_properties(FORMULA_COLLECTION, properties={INCARNATION_PROPERTY: uuid.uuid4().hex})
    store.load(FORMULA_COLLECTION)


def _existing_hashes(store: Any) -> dict[str, str]:
    rows: list[dict[str, Any]] = []
    iterator = store.client.query_iterator(
        FORMULA_COLLECTION, batch_size=_QUERY_PAGE, filter="", output_fields=["id", "text_hash"]
    )
    while batch := iterator.next():
        rows.extend(batch)
    iterator.close()
    return {row["id"]: row["text_hash"] for row in rows}


def sync_formula_collection(store: Any, tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> FormulaCollectionStats:
    """Make the collection exactly the graph's formulas (see the module docstring)."""
    started = time.perf_counter()
    stats = FormulaCollectionStats()
    ensure_formula_collection(store)
    fingerprint = _encoder_fingerprint(store)
    current = {entity["id"]: (entity, _entity_hash(fingerprint, entity)) for entity in formula_entities(tables)}
    stats.entities = len(current)
    existing = _existing_hashes(store)
    changed = [(entity, digest) for key, (entity, digest) in current.items() if existing.get(key) != digest]
    stale = sorted(key for key in existing if key not in current)
    stats.unchanged = len(current) - len(changed)
    if changed:
        encoded = encode_cached(
            store.encoders.get(FORMULA_ENCODER), [entity["text"] for entity, _ in changed], store.cache
        )
        stats.encoded, stats.cache_hits = encoded.misses, encoded.hits
        rows = [
            {**entity, "text_hash": digest, "vector": encoded.vectors[position].tolist()}
            for position, (entity, digest) in enumerate(changed)
        ]
        for start in range(0, len(rows), _WRITE_BATCH):
            store.client.upsert(FORMULA_COLLECTION, rows[start : start + _WRITE_BATCH])
    for start in range(0, len(stale), _WRITE_BATCH):
        store.client.delete(FORMULA_COLLECTION, ids=stale[start : start + _WRITE_BATCH])
    if changed or stale:
        store.client.flush(FORMULA_COLLECTION)
    stats.upserted, stats.deleted = len(changed), len(stale)
    stats.seconds = time.perf_counter() - started
    return stats


def search_formula_collection(store: Any, query: str, limit: int = 5, filter: str = "") -> list[dict[str, Any]]:
    """``[{formula_id, score, label, pdf_id, page_number, text}]``, best first (cosine, larger is better)."""
    if not query.strip():
        raise ValueError("empty query")
    store.load(FORMULA_COLLECTION)
    vector = store.encoders.get(FORMULA_ENCODER).encode([query])[0].tolist()
    results = store.client.search(
        FORMULA_COLLECTION,
        data=[vector],
        anns_field="vector",
        filter=validate_filter(filter, FILTER_FIELDS),
        limit=limit,
        output_fields=["formula_id", "label", "status", "pdf_id", "page_number", "paper_ids", "text"],
    )
    hits = []
    for raw in results[0] if results else []:
        entity = raw.get("entity", raw)
        hits.append(
            {
                "formula_id": entity["formula_id"],
                "score": float(raw["distance"]),
                "label": entity["label"],
                "status": entity["status"],
                "pdf_id": entity["pdf_id"],
                "page_number": entity["page_number"],
                "paper_ids": entity.get("paper_ids"),
                "text": entity.get("text"),
            }
        )
    return hits


def describe_formula_collection(store: Any, with_counts: bool = True) -> dict[str, Any]:
    """The collection described in the shape of :func:`paperlake.vectors.describe.describe_collections`' entries,
    so :func:`paperlake.vectors.describe.render_for_prompt` renders it with the others."""
    encoder = store.config.encoders[FORMULA_ENCODER]
    active = store.encoders.available(FORMULA_ENCODER)
    exists = active and store.client.has_collection(FORMULA_COLLECTION)
    count = None
    if exists and with_counts:
        store.load(FORMULA_COLLECTION)
        rows = store.client.query(FORMULA_COLLECTION, filter="", output_fields=["count(*)"])
        count = int(rows[0]["count(*)"]) if rows else 0
    return {
        "name": FORMULA_COLLECTION,
        "description": FORMULA_COLLECTION_DESCRIPTION,
        "modality": "text",
        "active": active,
        "inactive_reason": None if active else encoder.unavailable_reason(),
        "hybrid": False,
        "exists": exists,
        "fields": [{"name": name, "description": about} for name, about in _FIELDS.items()],
        "vectors": [
            {
                "field": "vector",
                "kind": "dense",
                "metric": "COSINE",
                "index": "AUTOINDEX",
                "model": encoder.model_id,
                "dimension": encoder.dimension,
            }
        ],
        "views": [
            {"table_name": "formulas", "column_name": "description", **({"count": count} if count is not None else {})}
        ],
        "count": count,
        "filter": {
            "fields": {name: kind.__name__ for name, kind in FILTER_FIELDS.items()},
            "operators": list(OPERATORS),
            "example": "status == 'validated' and pdf_id == '<paper id>'",
        },
    }


__all__ = [
    "FORMULA_COLLECTION",
    "FORMULA_ENCODER",
    "FormulaCollectionStats",
    "collection_available",
    "describe_formula_collection",
    "ensure_formula_collection",
    "formula_entities",
    "search_formula_collection",
    "sync_formula_collection",
]
