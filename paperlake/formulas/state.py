"""The formula graph's state: which outputs a build vouches for, and whether the graph is stale.

Light on purpose (pyarrow and the standard library only, no sympy): the ingest's and the sensors' checks
(:mod:`paperlake.freshness`) read it on every run, and only a build (:mod:`paperlake.formulas.store`) needs the
LaTeX machinery.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from paperlake.lake.store import CONTRACT_DIR, Lake, files_under, write_table_atomic

_S, _I, _F = pa.string(), pa.int32(), pa.float64()
FORMULA_SCHEMAS: dict[str, pa.Schema] = {
    "formulas": pa.schema(
        [
            ("formula_id", _S),
            ("label", _S),
            ("latex", _S),
            ("normalised_latex", _S),
            ("sympy_str", _S),
            ("template", _S),
            ("output", _S),
            ("status", _S),
            ("reason", _S),
            ("canonical_key", _S),
            ("conversion_step", _S),
            ("units", _S),
            ("template_constants", _S),
            ("notes", pa.list_(_S)),
            ("paper_ids", pa.list_(_S)),
            ("occurrence_count", _I),
            ("description", _S),
        ]
    ),
    "formula_parameters": pa.schema(
        [
            ("formula_id", _S),
            ("position", _I),
            ("name", _S),
            ("latex_symbol", _S),
            ("description", _S),
            ("default_value", _F),
            ("unit", _S),
        ]
    ),
    "constants": pa.schema(
        [
            ("constant_id", _S),
            ("name", _S),
            ("value", _F),
            ("unit", _S),
            ("description", _S),
            ("latex", _S),
            ("source", _S),
            ("evidence", _S),
            ("paper_id", _S),
        ]
    ),
    "formula_occurrences": pa.schema(
        [
            ("occurrence_id", _S),
            ("formula_id", _S),
            ("equation_id", _S),
            ("paper_id", _S),
            ("part", _I),
            ("page_number", _I),
            ("bbox", pa.list_(_F)),
            ("equation_number", _S),
            ("section", _S),
            ("context", _S),
            ("latex", _S),
            ("symbol_map", _S),
            ("matched_by", _S),
            ("similarity", _F),
        ]
    ),
    "formula_relations": pa.schema(
        [("relation_id", _S), ("source", _S), ("target", _S), ("relation_type", _S), ("evidence", _S)]
    ),
}
# The graph reads a relation ``equations`` with the warehouse mart's columns (models/marts/equations.sql): in a build,
# the lake's equation files as that mart derives them (:func:`connect_lake_equations`), so the graph is made in the
# warehouse build's own run, before dbt, and dbt builds its tables with the marts in one invocation.
_EQUATION_COLUMNS = """e.equation_id::varchar as equation_id, e.ref_paper_id::varchar as paper_id, e.page_number,
           case when e.latex_source is not null then e.equation_content end as equation_latex, e.equation_text,
           e.equation_number, e.bounding_box::double[] as bbox, e.context, e.context_after"""
EQUATIONS_SQL = (
    f"select {_EQUATION_COLUMNS} from equations e {{where}} order by e.ref_paper_id, e.page_number, e.ordinal"
)
# Each paper's equation rows, fingerprinted by DuckDB: hashing every paper's rows in Python made each check and each
# build grow with the number of papers, where the build then reads only the changed papers' rows.
FINGERPRINTS_SQL = f"""
    select paper_id, count(*) as equations,
           md5(string_agg(to_json(r)::varchar, chr(10) order by r.page_number, r.ordinal, r.equation_id)) as fingerprint
    from (select {_EQUATION_COLUMNS}, e.ordinal from equations e) r
    group by paper_id
"""

# The lake's equations as the staging view and the mart make them (stg_equations.sql: the ids as uuids;
# equations.sql: the content is the LaTeX unless blank, the box rounded to whole points by the int_bbox macro), over
# the glob dbt reads (contract file included). The same rows the mart holds once the build has loaded the lake.
LAKE_EQUATIONS_SQL = """
    create or replace temp view equations as
    select equation_id::uuid as equation_id, paper_id::uuid as ref_paper_id, page_number, ordinal, equation_number,
           coalesce(nullif(trim(equation_latex), ''), equation_text) as equation_content, equation_text, latex_source,
           [round(bbox[1])::integer, round(bbox[2])::integer, round(bbox[3])::integer,
            round(bbox[4])::integer]::integer[4] as bounding_box,
           context, context_after
    from read_parquet({glob}, union_by_name = true)
"""


@contextlib.contextmanager
def connect_lake_equations(lake_root: Path) -> Iterator[Any]:
    """An in-memory DuckDB connection whose ``equations`` view reads the lake's equation files."""
    import duckdb  # deferred: a check that finds no lake never opens one

    lake = Lake(lake_root)
    lake.ensure_contract()  # the glob always matches, as dbt's does
    glob = lake.glob("equations").replace("'", "''")
    con = duckdb.connect()
    try:
        con.execute(LAKE_EQUATIONS_SQL.format(glob=f"'{glob}'"))
        yield con
    finally:
        con.close()


def equation_sources(lake_root: Path) -> dict[str, str]:
    """Each equation file of the lake (path below the view's folder → "size mtime_ns"), by ``os.scandir``: what a
    graph was built from, recorded in its state, so a check that finds the same files asks DuckDB nothing (reading
    every paper's file to fingerprint its rows grew with the lake: ~2 s at 2,000 papers). Every lake write is an
    atomic replace, so new content is a new entry."""
    base = Lake(lake_root).root / "equations"
    if not base.is_dir():
        return {}
    return {
        relative: f"{stat.st_size} {stat.st_mtime_ns}"
        for relative, stat in files_under(base)
        if CONTRACT_DIR not in relative.split("/")
    }


# Bump when extraction, conversion or merging changes what a paper's equations become: the next update rebuilds the
# graph from every paper instead of only the changed ones.
EXTRACTOR_VERSION = "formulas-4"
STATE_NAME = "state.json"


def equation_fingerprints(equations_con: Any) -> tuple[dict[str, int], dict[str, str]]:
    """(paper id → its number of display equations, paper id → a fingerprint of its equation rows), for the papers
    that have equations."""
    rows = equations_con.execute(FINGERPRINTS_SQL).fetchall()
    return {paper: count for paper, count, _ in rows}, {paper: fingerprint for paper, _, fingerprint in rows}


def file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def output_paths(out_dir: Path, turtle_path: Path) -> dict[str, Path]:
    return {**{name: out_dir / f"{name}.parquet" for name in FORMULA_SCHEMAS}, "turtle": turtle_path}


def read_graph_state(out_dir: Path, turtle_path: Path) -> dict[str, Any] | None:
    """The graph's state when it is whole: written by these extraction rules, and every output file exactly the one
    the state recorded (its sha256). None otherwise: never built, built by other rules, or a build cut short (the
    state is written last, after every output, so a kill in between leaves outputs the state does not vouch for)."""
    try:
        state = json.loads((out_dir / STATE_NAME).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or state.get("extractor_version") != EXTRACTOR_VERSION:
        return None
    files = state.get("files") or {}
    for name, path in output_paths(out_dir, turtle_path).items():
        if files.get(name) is None or files.get(name) != file_digest(path):
            return None
    return state


def graph_digest(out_dir: Path) -> str | None:
    """Names the graph's current state (the state file vouches for every output): downstream builds record it."""
    digest = file_digest(out_dir / STATE_NAME)
    return digest[:16] if digest else None


NO_GRAPH = "no complete formula graph (never built, other extraction rules, or a build cut short)"


def formula_graph_staleness(equations_con: Any, out_dir: Path, turtle_path: Path) -> str | None:
    """Why the graph must be updated from the equations ``equations_con`` reads (:func:`connect_lake_equations`), or
    None when it is up to date."""
    state = read_graph_state(out_dir, turtle_path)
    if state is None:
        return NO_GRAPH
    return equations_changed(equations_con, state) or rdf_blocks_problem(turtle_path)


def equations_changed(equations_con: Any, state: dict[str, Any]) -> str | None:
    """Which papers' equation rows differ from those the graph's ``state`` (:func:`read_graph_state`) was built
    from, as a reason, or None."""
    _, fingerprints = equation_fingerprints(equations_con)
    built = state.get("papers") or {}
    changed = sorted(p for p in fingerprints.keys() | built.keys() if fingerprints.get(p) != built.get(p))
    return f"equations changed in {len(changed)} paper(s)" if changed else None


def rdf_blocks_path(turtle_path: Path) -> Path:
    return turtle_path.with_name(turtle_path.name + ".blocks.parquet")


def rdf_blocks_problem(turtle_path: Path) -> str | None:
    """Why the Turtle document's block cache cannot serve the next build (missing, or unreadable), or None. Only a
    cache, but one the graph's state does not vouch for: a build that finds none serialises every formula anew and
    writes it again, so a damaged one makes the graph stale (the outputs come out the same)."""
    path = rdf_blocks_path(turtle_path)
    if not path.exists() and not path.is_symlink():
        return f"its Turtle block cache {path.name} is missing"
    try:
        columns = _read_parquet(path).column_names
    except Exception as error:  # pyarrow's errors, or a directory: a cache is only ever a cache
        return f"its Turtle block cache {path.name} cannot be read ({type(error).__name__})"
    return None if {"formula_id", "digest", "block"} <= set(columns) else f"{path.name} lacks its columns"


def _read_parquet(path: Path) -> pa.Table:
    """One Parquet file, whole. (``pq.read_table`` goes through ``pyarrow.dataset``, whose import pulls in pandas:
    half a second of an unchanged ingest's staleness check.)"""
    with pq.ParquetFile(path) as parquet:
        return parquet.read()


def read_tables(out_dir: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        name: _read_parquet(out_dir / f"{name}.parquet").to_pylist()
        for name in FORMULA_SCHEMAS
        if (out_dir / f"{name}.parquet").exists()
    }


def ensure_formula_contract(out_dir: Path) -> None:
    """Empty tables, so dbt's formula models build before the first graph exists."""
    for name, schema in FORMULA_SCHEMAS.items():
        path = out_dir / f"{name}.parquet"
        if not path.exists():
            write_table_atomic(schema.empty_table(), path)
