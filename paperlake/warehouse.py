"""The DuckDB warehouse: built by dbt into a side file, swapped in atomically, read without locks.

DuckDB allows one writer per file and nobody else while it writes. dbt therefore builds into
``warehouse.build.duckdb`` (a copy of the live file, so a partial selection keeps the other tables) and the result
replaces ``warehouse.duckdb`` with ``os.replace``; readers (``paperlake sql``, the agent, the vector and formula
assets) open the live file read-only and never meet a lock, even mid-build. A reader holding the old file keeps
reading the old snapshot until it reconnects.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb

DBT_PROJECT_DIR = Path(__file__).resolve().parents[1] / "dbt_project"


def build_path(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.stem + ".build" + warehouse.suffix)


def dbt_env(lake: Path, warehouse: Path) -> dict[str, str]:
    """Environment for a dbt invocation that builds the side file from this lake."""
    return {
        "PAPERLAKE_LAKE": str(lake),
        "PAPERLAKE_DBT_TARGET_PATH": str(build_path(warehouse)),
        "DBT_PROFILES_DIR": str(DBT_PROJECT_DIR),
    }


def prepare_build(warehouse: Path) -> Path:
    """Start the side file from the live one (or empty)."""
    target = build_path(warehouse)
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in (target, target.with_name(target.name + ".wal")):
        stale.unlink(missing_ok=True)
    if warehouse.exists():
        shutil.copyfile(warehouse, target)
    return target


def publish_build(warehouse: Path) -> None:
    """Swap the side file in. dbt has closed it; checkpoint so no WAL is left behind."""
    target = build_path(warehouse)
    with duckdb.connect(str(target)) as con:
        con.execute("checkpoint")
    os.replace(target, warehouse)


@contextmanager
def connect_read_only(warehouse: Path, *, sandboxed: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    if not warehouse.exists():
        raise FileNotFoundError(f"no warehouse at {warehouse}: run `paperlake ingest` first")
    config = {"access_mode": "READ_ONLY"}
    if sandboxed:
        config |= {"enable_external_access": "false", "lock_configuration": "true"}
    con = duckdb.connect(str(warehouse), read_only=True, config=config)
    try:
        yield con
    finally:
        con.close()
