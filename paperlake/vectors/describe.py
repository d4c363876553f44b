"""Collection descriptions as data, for the agent's prompt (and for people): fields, model, dimension, metric,
the encodable views present with their counts, and the filter syntax."""

from __future__ import annotations

from typing import Iterable

from paperlake.vectors.entities import Encodable, default_encodable
from paperlake.vectors.filters import FIELD_TYPES, OPERATORS, quote_literal
from paperlake.vectors.store import VectorStore

_FIELD_DOCS = {
    "id": "entity id: uuid5 of 'table.column.row_id'",
    "pdf_id": "paper id (metadata.paper_id)",
    "page_number": "1-based page of the cell (metadata rows: 1; sections: first page)",
    "table_name": "warehouse table of the cell",
    "column_name": "warehouse column of the cell",
    "primary_key": "the row's id in its warehouse table",
    "text": "the cell's text (truncated to the VARCHAR limit in UTF-8 bytes)",
    "bbox": "[x0, y0, w, h] in PDF points, top-left origin (image collections)",
    "text_hash": "sha256 of encoder fingerprint + content; unchanged cells are not re-encoded",
}


def describe_collections(
    store: VectorStore, encodable: Iterable[Encodable] | None = None, with_counts: bool = True
) -> list[dict]:
    """One dict per configured collection; inactive ones say why."""
    encodable = list(encodable if encodable is not None else default_encodable())
    descriptions = []
    for spec in store.config.collections:
        active = store.is_available(spec)
        exists = active and store.client.has_collection(spec.name)
        vectors = []
        for vector in spec.vectors:
            entry = {"field": vector.field, "kind": vector.kind, "metric": vector.metric, "index": vector.index}
            if vector.kind == "bm25":
                entry.update(model="Milvus BM25 function", dimension="sparse", analyzer=store.config.bm25_analyzer)
            else:
                encoder = store.config.encoders[vector.encoder]
                entry.update(model=encoder.model_id, dimension=encoder.dimension)
                if active:
                    entry["encoder"] = store.encoders.get(vector.encoder).metadata
            vectors.append(entry)
        content_field = "text" if spec.modality == "text" else "bbox"
        views = []
        for table, column, kind in encodable:
            if kind != spec.modality or f"{table}.{column}" in spec.without_views:
                continue  # a view the collection is configured without (the table lines in the dense ones)
            view = {"table_name": table, "column_name": column}
            if exists and with_counts:
                view["count"] = store.count(
                    spec.name, f"table_name == {quote_literal(table)} and column_name == {quote_literal(column)}"
                )
            views.append(view)
        descriptions.append(
            {
                "name": spec.name,
                "description": spec.description,
                "modality": spec.modality,
                "active": active,
                "inactive_reason": None if active else store.config.inactive_reason(spec),
                "hybrid": spec.is_hybrid,
                "fields": [
                    {"name": name, "description": _FIELD_DOCS[name]}
                    for name in (
                        "id",
                        "pdf_id",
                        "page_number",
                        "table_name",
                        "column_name",
                        "primary_key",
                        content_field,
                    )
                ],
                "vectors": vectors,
                "views": views,
                "count": store.count(spec.name) if exists and with_counts else None,
                "filter": {
                    "fields": {name: kind.__name__ for name, kind in FIELD_TYPES.items()},
                    "operators": list(OPERATORS),
                    "example": "pdf_id == '<paper id>' and page_number in [1, 2]",
                },
            }
        )
    return descriptions


def render_for_prompt(descriptions: list[dict]) -> str:
    """Compact text of the active collections for an agent's system prompt."""
    lines = []
    for d in descriptions:
        if not d["active"]:
            continue
        models = "; ".join(
            f"{v['field']}: {v['model']} "
            f"({v['dimension']}{'-d' if isinstance(v['dimension'], int) else ''}, {v['metric']})"
            for v in d["vectors"]
        )
        lines.append(f"- {d['name']} ({d['modality']}{', hybrid' if d['hybrid'] else ''}): {d['description']}")
        lines.append(f"  vectors: {models}")
        views = ", ".join(
            f"{v['table_name']}.{v['column_name']}" + (f" ({v['count']})" if v.get("count") is not None else "")
            for v in d["views"]
            if v.get("count", 1)
        )
        lines.append(f"  views (table_name.column_name): {views}")
    if descriptions:
        flt = descriptions[0]["filter"]
        fields = ", ".join(f"{k} ({v})" for k, v in flt["fields"].items())
        lines.append(f"Filters: fields {fields}; operators {' '.join(flt['operators'])}; e.g. {flt['example']}")
    return "\n".join(lines)
