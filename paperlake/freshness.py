"""One definition of stale, read from the stores themselves, for `paperlake ingest` and the Dagster sensors alike.

Each stage records what it was built from *inside or beside its outputs, after they are durable*, and a stage is
stale when that record is missing or names other inputs than the current ones:

| stage | inputs | where the record lives |
|---|---|---|
| parse (per paper) | file sha256, manifest row, backend, parser version | the lake record, written after every view |
| warehouse | dbt project digest, lake digest | ``_paperlake.builds`` in the warehouse, swapped in with it |
| formula graph | extractor version, lake equations per paper | ``state.json``, written last, with each output's hash |
| formula models | dbt formula models' digest, formula graph digest | ``_paperlake.builds`` |
| formulas collection | formula graph digest, collection code version | the collection's ``paperlake.synced`` property |
| vector collections (per paper) | expected entities per paper | ``vectors/<collection>/<key>.json`` + the collection |

A process killed at any line leaves each record either absent, or describing outputs that are there: the next
ingest redoes exactly what is stale, whatever a dead run meant to do. A store removed by hand has no record, so it
is stale too. The parse stage's rule is :func:`paperlake.lake.pipeline.needs_parse`; the vector stage's is
:func:`paperlake.vectors.ledger.stale_papers`; the rest is here.
"""

from __future__ import annotations

import json
from typing import Any

from paperlake.config import Settings
from paperlake.formulas.state import (
    NO_GRAPH,
    connect_lake_equations,
    equation_sources,
    equations_changed,
    graph_digest,
    rdf_blocks_problem,
    read_graph_state,
    read_tables,
)
from paperlake.lake.store import Lake
from paperlake.vectors.config import load_config
from paperlake.vectors.onnx_graphs import text_cache_key
from paperlake.warehouse.build import dbt_digest, recorded_builds

SYNCED_PROPERTY = "paperlake.synced"
FORMULA_COLLECTION_CODE_VERSION = "formulas-collection-1"


def formula_dir(settings: Settings):
    return settings.lake / "formulas"


def turtle_path(settings: Settings):
    return settings.home / "formulas" / "formulas.ttl"


def warehouse_inputs(settings: Settings) -> dict[str, str]:
    return {"dbt": dbt_digest("warehouse"), "lake": Lake(settings.lake).digest()}


def formula_model_inputs(settings: Settings) -> dict[str, str]:
    return {"dbt": dbt_digest("formulas"), "graph": graph_digest(formula_dir(settings)) or "none"}


def formula_collection_inputs(settings: Settings) -> str:
    """The graph's digest, the collection's code and the vectors' encoder (model, backend, length): a collection
    synced by another configuration of the encoder is stale, so its vectors never sit beside query vectors of
    another encoder."""
    from paperlake.formulas.collection import FORMULA_ENCODER  # deferred: pymilvus

    spec = load_config().encoders.get(FORMULA_ENCODER)
    encoder = text_cache_key(spec.model_id, spec.backend, spec.max_seq_length) if spec is not None else "none"
    return json.dumps(
        {"code": FORMULA_COLLECTION_CODE_VERSION, "graph": graph_digest(formula_dir(settings)), "encoder": encoder},
        sort_keys=True,
    )


def formula_encoder_available() -> bool:
    """Whether the formulas collection's encoder has its weights here (what the store's encoder registry answers for
    it), without opening the store."""
    from paperlake.formulas.collection import FORMULA_ENCODER  # deferred: pymilvus

    spec = load_config().encoders.get(FORMULA_ENCODER)
    return spec is not None and spec.weights_path() is not None


def _differs(built: dict[str, str] | None, wanted: dict[str, str], what: str) -> str | None:
    if built is None:
        return f"no {what} build recorded in the warehouse"
    changed = sorted(key for key in wanted if built.get(key) != wanted[key])
    return f"{', '.join(changed)} changed since the last {what} build" if changed else None


def warehouse_staleness(settings: Settings) -> str | None:
    """Why dbt must rebuild the warehouse's marts, or None."""
    if not settings.warehouse.exists():
        return "no warehouse"
    return _differs(recorded_builds(settings.warehouse).get("warehouse"), warehouse_inputs(settings), "warehouse")


def lake_formula_graph_staleness(settings: Settings) -> str | None:
    """Why the formula graph must be updated from the lake's equations, or None."""
    reason, _ = _lake_graph_staleness(settings)
    return reason


def _lake_graph_staleness(settings: Settings) -> tuple[str | None, bool]:
    """(why the graph must be updated, whether only its Turtle block cache is). A graph built from exactly the
    equation files there now is current without reading them; otherwise their rows are fingerprinted (a paper
    parsed again with the same equations leaves the graph current). The state is verified once."""
    state = read_graph_state(formula_dir(settings), turtle_path(settings))
    if state is None:
        return NO_GRAPH, False
    if state.get("sources") != equation_sources(settings.lake):
        with connect_lake_equations(settings.lake) as con:
            if changed := equations_changed(con, state):
                return changed, False
    cache = rdf_blocks_problem(turtle_path(settings))
    return cache, cache is not None


def formula_build_staleness(settings: Settings) -> dict[str, str]:
    """What a warehouse build must make of the formulas besides the marts: ``graph`` (from the lake, before dbt) and
    ``models`` (the graph's dbt tables, in the same dbt build), each with its reason."""
    graph, cache_only = _lake_graph_staleness(settings)
    if cache_only:  # a cache rewritten; the outputs stay the same
        return {"graph": graph}
    if graph:
        return {"graph": graph, "models": "the formula graph changes"}
    models = _differs(
        recorded_builds(settings.warehouse).get("formula_models"), formula_model_inputs(settings), "formula models"
    )
    return {"models": models} if models else {}


def formula_staleness(settings: Settings, store: Any | None) -> dict[str, str]:
    """Which formula assets are stale and why: ``graph``, ``models``, ``collection`` (a stale graph makes both
    downstream ones stale). Needs a warehouse; ``store`` (a VectorStore, or None when the collection's encoder is
    unavailable here) is read for the collection's record."""
    if not settings.warehouse.exists():
        return {}
    stale = formula_build_staleness(settings)
    if "graph" in stale and "models" not in stale:  # its block cache only
        return stale
    if "graph" in stale:
        return stale | ({"collection": "the formula graph changes"} if store is not None else {})
    if store is not None and (collection := formula_collection_staleness(settings, store)):
        stale["collection"] = collection
    return stale


def formula_collection_staleness(settings: Settings, store: Any) -> str | None:
    from paperlake.formulas.collection import FORMULA_COLLECTION, formula_entities  # deferred: pymilvus

    if not store.exists(FORMULA_COLLECTION):
        return "no formulas collection"
    if store.properties(FORMULA_COLLECTION).get(SYNCED_PROPERTY) != formula_collection_inputs(settings):
        return "not synced with the current formula graph and encoder"
    expected = len(formula_entities(read_tables(formula_dir(settings))))
    if store.count(FORMULA_COLLECTION) != expected:
        return f"entity count differs from the graph's {expected} formulas"
    return None
