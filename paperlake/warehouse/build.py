"""The DuckDB warehouse: built by dbt into a side file, swapped in atomically, read without locks.

DuckDB allows one writer per file and nobody else while it writes. dbt therefore builds into
``warehouse.build.duckdb`` (a copy of the live file, so a partial selection keeps the other tables) and the result
replaces ``warehouse.duckdb`` with ``os.replace``; readers (``paperlake sql``, the agent, the vector and formula
assets) open the live file read-only and never meet a lock, even mid-build. A reader holding the old file keeps
reading the old snapshot until it reconnects.

Each build records what it was built from (the dbt project's digest, the lake's or the formula graph's digest) in
``_paperlake.builds`` inside the side file, before the swap: the record and the tables it describes are replaced by
one ``os.replace``, so a process killed at any line leaves either the old warehouse with its old record or the new
one with its new record, never a record that claims more than the file holds (see ``paperlake.freshness``).

Incremental builds. The warehouse build also records each paper's lake files (``_paperlake.papers``: key, paper id,
digest; :meth:`paperlake.lake.store.Lake.paper_digests`). The next build compares them with the lake: when the dbt
project and the lake's contracts are the ones recorded, only the papers whose files changed are rebuilt
(:func:`plan_build` writes them to ``_paperlake.build_delta`` in the side file: each per-paper mart deletes their
rows and loads theirs, and dbt's tests read those rows: ``dbt_project/macros/paper_delta.sql``); otherwise every
mart is rebuilt (``--full-refresh``). So adding a paper to a large warehouse costs about what it costs to a small
one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import duckdb
import pyarrow as pa

from paperlake.lake.store import Lake
from paperlake.lake.views import VIEWS
from paperlake.runtime.healing import SetAside, StoreUnreadable, set_aside
from paperlake.warehouse.dbt_launcher import WORKDIR_VAR
from paperlake.warehouse.read import connect_read_only

DBT_PROJECT_DIR = Path(__file__).resolve().parents[2] / "dbt_project"
# The project's shared parse (orchestration.run.prepare_dbt_manifest): the lock it is made under, and the record of
# the profile it was made under (the dbt_env values that enter dbt's profile), which a home's must equal to start
# from its partial-parse state.
SHARED_PARSE_DIR = DBT_PROJECT_DIR / "target"
SHARED_PARSE_LOCK = ".parse.lock"
SHARED_PARSE_ENV = "parse_env.json"
PARSE_ENV_KEYS = ("PAPERLAKE_DBT_TARGET_PATH",)
BUILDS_TABLE = "_paperlake.builds"
PAPERS_TABLE = "_paperlake.papers"  # paper key → paper id and lake digest, as the per-paper marts hold them
DELTA_TABLE = "_paperlake.build_delta"  # during an incremental build: the papers whose rows it replaces
MODE_TABLE = "_paperlake.build_mode"  # during a build: whether it is incremental
FILES_TABLE = "_paperlake.build_files"  # during an incremental build: the lake files of the papers it loads
LAKE_SCHEMA = "_lake"  # the lake's sources as dbt reads them (dbt_project/macros/lake_views.sql)


@dataclass
class BuildScope:
    """What one warehouse build rebuilds: every paper (``full``), or the papers in ``delta`` (paper id, whether its
    rows are loaded again: False for a paper that left or changed its id). ``papers`` and ``contracts`` are the lake
    state the build records."""

    full: bool
    papers: dict[str, tuple[str | None, str]]
    contracts: str
    delta: list[tuple[str, bool]] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)  # (view, path) of the papers loaded again
    reason: str = ""


def plan_build(target: Path, lake_root: Path, dbt: str) -> BuildScope:
    """The scope of the next warehouse build into the side file ``target`` (a copy of the live warehouse), written
    into it for dbt (:data:`DELTA_TABLE`, :data:`MODE_TABLE`, and :data:`FILES_TABLE`: every view file of the papers
    an incremental build loads, the only files its lake sources read)."""

    lake = Lake(lake_root)
    contracts, digests = lake.paper_digests()
    previous = _recorded_papers(target)
    papers = {}
    for key, digest in digests.items():
        recorded = (previous or {}).get(key)
        if recorded is not None and recorded[1] == digest:  # same files, the record among them: same paper id
            papers[key] = recorded
        else:
            record = lake.record(key)
            papers[key] = (record.paper_id if record is not None else None, digest)
    scope = BuildScope(full=True, papers=papers, contracts=contracts)
    built = recorded_builds(target).get("warehouse") or {}
    if previous is None:
        scope.reason = "no per-paper record in the warehouse"
    elif built.get("dbt") != dbt:
        scope.reason = "the dbt project changed"
    elif built.get("contracts") != contracts:
        scope.reason = "the lake's contracts changed"
    else:
        scope.full = False
        for key in sorted(papers.keys() | previous.keys()):
            new, old = papers.get(key), previous.get(key)
            if new == old:
                continue
            if old is not None and old[0]:
                scope.delta.append((old[0], False))
            if new is not None and new[0]:
                scope.delta.append((new[0], True))
                paths = [(view, lake.view_path(view, key)) for view in VIEWS]
                scope.files += [(view, str(path)) for view, path in paths if path.exists()]
        scope.reason = f"{len({paper for paper, _ in scope.delta})} paper(s) changed"
    with duckdb.connect(str(target)) as con:
        con.execute("create schema if not exists _paperlake")
        con.execute(f"create or replace table {MODE_TABLE} as select ? as incremental", [not scope.full])
        con.execute(f"create or replace table {DELTA_TABLE} (paper_id uuid, load boolean)")
        if scope.delta:
            con.executemany(f"insert into {DELTA_TABLE} values (?, ?)", scope.delta)
        con.execute(f"create or replace table {FILES_TABLE} (view varchar, path varchar)")
        if scope.files:
            con.executemany(f"insert into {FILES_TABLE} values (?, ?)", scope.files)
    return scope


def _recorded_papers(warehouse: Path) -> dict[str, tuple[str | None, str]] | None:
    if not warehouse.exists():
        return None
    try:
        with duckdb.connect(str(warehouse), read_only=True) as con:
            rows = con.execute(f"select paper_key, paper_id::varchar, digest from {PAPERS_TABLE}").fetchall()
    except duckdb.Error:
        return None
    return {key: (paper_id, digest) for key, paper_id, digest in rows}


def _dbt_sources() -> list[Path]:
    """The files a dbt build's result depends on: models, macros, data tests, the project file and the profile."""
    files = [DBT_PROJECT_DIR / "dbt_project.yml", DBT_PROJECT_DIR / "profiles.yml"]
    for folder in ("models", "macros", "tests"):
        files += [p for p in (DBT_PROJECT_DIR / folder).rglob("*") if p.suffix in (".sql", ".yml", ".yaml")]
    return sorted(p for p in files if p.is_file())


def dbt_digest(part: str) -> str:
    """Digest of the dbt files that shape one build: ``warehouse`` (everything but ``models/formulas``) or
    ``formulas`` (``models/formulas``); both include the macros, data tests, ``dbt_project.yml`` and the profile."""
    if part not in ("warehouse", "formulas"):
        raise ValueError(f"unknown dbt part {part!r}")
    files = _dbt_sources()
    signature = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    return _dbt_digest(part, signature)


@lru_cache(maxsize=8)
def _dbt_digest(part: str, signature: tuple) -> str:
    digest = hashlib.sha256(part.encode())
    for name, _, _ in signature:
        relative = Path(name).relative_to(DBT_PROJECT_DIR)
        in_formulas = relative.parts[:2] == ("models", "formulas")
        if relative.parts[0] == "models" and in_formulas != (part == "formulas"):
            continue
        digest.update(relative.as_posix().encode() + b"\0" + Path(name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def dbt_target_path(home: Path, stage: str) -> Path:
    """dbt's target folder for one build stage of one home, emptied before each build (dagster-dbt would otherwise
    leave a new folder per run inside the project) but for dbt's partial-parse state (:func:`empty_dbt_target`)."""
    return home / "dbt-target" / stage


def empty_dbt_target(target: Path, env: dict[str, str] | None = None, shared: Path | None = None) -> None:
    """Empty a build's dbt target folder, keeping ``partial_parse.msgpack``, else seeding one (:func:`seed_parse_state`
    with the build's ``env``): without partial-parse state a build parses the whole project again. dbt
    checks the file against the project, profile and versions, and parses in full whenever it does not match or
    cannot be read."""
    state = _starting_state(target, env, shared)
    shutil.rmtree(target, ignore_errors=True)
    if state is not None:
        _write_state(target, state)


def seed_parse_state(target: Path, env: dict[str, str], shared: Path | None = None) -> bool:
    """Give a build stage's target folder without partial-parse state one to start from, and say whether it has one.

    First another stage's state of the same home (same profile, environment and project): a fresh home parses in
    full at most once, not once per stage. Else the project's shared parse (:data:`SHARED_PARSE_ENV`), when it was
    made under the same profile: dbt runs in the warehouse's folder with the side file named relative to it
    (:func:`dbt_env`), so every home of the default layout renders the same profile and the shared state holds for
    all of them: nothing the parse renders names the home (the lake's and the formula graph's files are named by
    views made at run time, macros/lake_views.sql), so dbt re-parses nothing. A home with another side-file name gets
    nothing here (its profile differs, which dbt counts as a change: a full parse)."""
    if (target / "partial_parse.msgpack").is_file():
        return True
    state = _starting_state(target, env, shared)
    if state is None:
        return False
    _write_state(target, state)
    return True


def _starting_state(target: Path, env: dict[str, str] | None, shared: Path | None) -> bytes | None:
    """The partial-parse state a build in ``target`` starts from: its own, else another stage's of the same home,
    else (given the build's ``env``) the project's shared one made under the same profile; None if there is none."""
    keep = target / "partial_parse.msgpack"
    state = keep.read_bytes() if keep.is_file() else None
    if state is None:
        state = _sibling_parse_state(target)
    if state is None and env is not None:
        state = _shared_parse_state(env, shared)
    return state


def _write_state(target: Path, state: bytes) -> None:
    target.mkdir(parents=True, exist_ok=True)
    keep = target / "partial_parse.msgpack"
    scratch = keep.with_name(f"{keep.name}.{uuid.uuid4().hex}.tmp")
    scratch.write_bytes(state)
    os.replace(scratch, keep)


def _shared_parse_state(env: dict[str, str], shared: Path | None = None) -> bytes | None:
    """The shared partial-parse state (in ``shared``, by default the project's :data:`SHARED_PARSE_DIR`) if it was
    made under ``env``'s profile, else None. Read under the parse lock, so a shared parse being rewritten is never
    read half-written."""
    shared = shared or SHARED_PARSE_DIR
    try:
        with open(shared / SHARED_PARSE_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
            made_under = json.loads((shared / SHARED_PARSE_ENV).read_text(encoding="utf-8"))
            state = (shared / "partial_parse.msgpack").read_bytes()
            if made_under != shared_parse_record(env, state):
                return None  # another profile, or a parse since by another hand (`dagster dev` parses here too)
            return state
    except (OSError, ValueError):
        return None


def shared_parse_record(env: dict[str, str], state: bytes | None) -> dict[str, str | None]:
    """What :data:`SHARED_PARSE_ENV` records of the shared parse: the environment keys its profile depends on, and
    the sha256 of the partial-parse state it left. A parse in that folder by anything else (dagster-dbt's
    ``prepare_if_dev`` under `dagster dev`, a plain ``dbt`` run in the project) leaves another state, which then
    seeds nothing and is made again by the next ingest."""
    digest = hashlib.sha256(state).hexdigest() if state is not None else None
    return {**{key: env.get(key) for key in PARSE_ENV_KEYS}, "state_sha256": digest}


def _sibling_parse_state(target: Path) -> bytes | None:
    """The newest partial-parse state of another build stage of the same home, or None (another stage's build may
    be emptying its folder right now: what vanishes is skipped)."""
    found = []
    for path in target.parent.glob("*/partial_parse.msgpack"):
        try:
            found.append((path.stat().st_mtime, path))
        except OSError:
            continue
    for _, path in sorted(found, reverse=True):
        try:
            return path.read_bytes()
        except OSError:
            continue
    return None


def build_path(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.stem + ".build" + warehouse.suffix)


def dbt_env(lake: Path, warehouse: Path, *, relative: bool = True) -> dict[str, str]:
    """Environment for a dbt invocation that builds the side file from this lake.

    ``relative``: dbt is to run in the warehouse's folder (:data:`WORKDIR_VAR`; ``paperlake-dbt`` moves there
    itself, a direct ``dbt`` call must be given it as its working directory) and the profile names the side file
    relative to it. The profile is then the same in every home, so dbt's partial-parse state carries from the
    project's shared parse to a new home (:func:`seed_parse_state`); with the side file's absolute path in it, dbt
    sees a changed profile and parses the whole project. Without ``relative`` (a plain ``dbt`` that stays in the
    project folder) the path is absolute."""
    side_file = build_path(warehouse)
    return {
        "PAPERLAKE_LAKE": str(lake),
        "PAPERLAKE_DBT_TARGET_PATH": side_file.name if relative else str(side_file),
        WORKDIR_VAR: str(side_file.parent),
        "DBT_PROJECT_DIR": str(DBT_PROJECT_DIR),
        "DBT_PROFILES_DIR": str(DBT_PROJECT_DIR),
        # no usage events sent from an ingest (dbt's default is to send them to dbt Labs)
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        # dbt's own file log (dbt.log in the target folder) at info, not dbt's default debug: megabytes per build of
        # the project, and writing them was a measurable share of a small ingest; set it to debug to see
        # every query and dbt's parsing decisions
        "DBT_LOG_LEVEL_FILE": os.environ.get("DBT_LOG_LEVEL_FILE", "info"),
    }


def prepare_build(warehouse: Path) -> Path:
    """Start the side file from the live one (or empty; a live one that cannot be read is set aside first)."""
    target = build_path(warehouse)
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in (target, target.with_name(target.name + ".wal")):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale)
        stale.unlink(missing_ok=True)
    heal_warehouse(warehouse)
    if warehouse.exists():
        shutil.copyfile(warehouse, target)
    return target


# A DuckDB file begins with three 4 KiB headers, then its blocks (DuckDB's storage format, versions 1.x)
DUCKDB_HEADER_BYTES = 3 * 4096


def warehouse_problem(warehouse: Path) -> str | None:
    """Why DuckDB cannot read the live warehouse, or None (None too when there is none)."""
    if not os.path.lexists(warehouse):
        return None
    if not warehouse.is_file():
        return "not a file"
    try:
        with duckdb.connect(str(warehouse), read_only=True) as con:
            con.execute("select count(*) from duckdb_tables()").fetchone()
            block_size, used = con.execute(
                "select block_size, used_blocks from pragma_database_size() where database_name = current_database()"
            ).fetchone()
            last = -1
            for schema, table in con.execute("select schema_name, table_name from duckdb_tables()").fetchall():
                name = f'"{schema.replace(chr(34), chr(34) * 2)}"."{table.replace(chr(34), chr(34) * 2)}"'
                block = con.execute("select max(block_id) from pragma_storage_info(?)", [name]).fetchone()[0]
                last = max(last, -1 if block is None else int(block))
    except duckdb.Error as error:
        return f"{type(error).__name__}: {error}"
    # DuckDB reads a data block only when a query needs it: a file cut short opens, then fails a later query. The
    # file must reach past the last block a table's segments name, and hold every block in use (free ones at its end
    # may be cut off), so it is measured against both, which the catalogue gives without reading the data.
    blocks = max(int(used), last + 1)
    least = DUCKDB_HEADER_BYTES + blocks * int(block_size)
    size = warehouse.stat().st_size
    if size < least:
        return f"{size} bytes where its {blocks} blocks need at least {least}: the file was cut short"
    return None


def heal_warehouse(warehouse: Path) -> list[SetAside]:
    """Set aside what keeps the live warehouse from being read: a stray write-ahead log first (the warehouse is
    built in a side file and checkpointed, so the live one never needs one), then the file itself; the next build
    then starts from nothing (:func:`paperlake.freshness.warehouse_staleness`: "no warehouse")."""
    moved: list[SetAside] = []
    problem = warehouse_problem(warehouse)
    wal = warehouse.with_name(warehouse.name + ".wal")
    if problem and os.path.lexists(wal):
        moved.append(set_aside(wal, f"beside a warehouse that cannot be read: {problem}"))
        problem = warehouse_problem(warehouse)
    if problem:
        moved.append(set_aside(warehouse, problem))
    return moved


def publish_build(warehouse: Path, records: dict[str, dict[str, str]], scope: BuildScope | None = None) -> None:
    """Record what the side file was built from (``records``: for each part the build made, ``warehouse`` and/or
    ``formula_models``, its inputs; with ``scope``, each paper's lake state), then swap it in. dbt has closed it;
    checkpoint so no WAL is left behind."""
    stage = " and ".join(records)
    target = build_path(warehouse)
    with duckdb.connect(str(target)) as con:
        narrowed = con.execute(
            "select view_name from duckdb_views() where schema_name = ? and view_name like '%\\_\\_full' escape '\\'",
            [LAKE_SCHEMA],
        ).fetchall()
        if narrowed:  # dbt's on-run-end puts them back; a side file without that step is not a warehouse to publish
            raise RuntimeError(
                f"the {stage} build left lake views narrowed to one build's papers ({', '.join(n for (n,) in narrowed)}"
                " set aside); not publishing it"
            )
        con.execute("create schema if not exists _paperlake")
        con.execute(
            f"create table if not exists {BUILDS_TABLE} (stage varchar primary key, inputs varchar, "
            "built_at timestamptz)"
        )
        if scope is not None:
            records = {**records, "warehouse": {**records["warehouse"], "contracts": scope.contracts}}
            keys = sorted(scope.papers)
            papers = pa.table(  # one insert of a table: row by row grew with the number of papers
                {
                    "paper_key": pa.array(keys, pa.string()),
                    "paper_id": pa.array([scope.papers[key][0] for key in keys], pa.string()),
                    "digest": pa.array([scope.papers[key][1] for key in keys], pa.string()),
                }
            )
            con.register("_paperlake_papers", papers)
            con.execute(
                f"create or replace table {PAPERS_TABLE} as "
                "select paper_key, paper_id::uuid as paper_id, digest from _paperlake_papers"
            )
            con.unregister("_paperlake_papers")
        for part, inputs in records.items():
            con.execute(
                f"insert or replace into {BUILDS_TABLE} values (?, ?, now())",
                [part, json.dumps(inputs, sort_keys=True)],
            )
        for table in (DELTA_TABLE, MODE_TABLE, FILES_TABLE):
            con.execute(f"drop table if exists {table}")
        con.execute("checkpoint")
    os.replace(target, warehouse)


def recorded_builds(warehouse: Path) -> dict[str, dict[str, str]]:
    """stage → the inputs its last build recorded; empty when the warehouse (or the record) is missing or unreadable."""
    try:
        with connect_read_only(warehouse) as con:
            rows = con.execute(f"select stage, inputs from {BUILDS_TABLE}").fetchall()
    except (FileNotFoundError, duckdb.Error, StoreUnreadable):
        return {}
    builds = {}
    for stage, inputs in rows:
        try:
            builds[stage] = json.loads(inputs)
        except ValueError:
            continue
    return builds
