"""A read-only, bounded DuckDB connection for SQL written by a model.

Three fences, each enough on its own for the common attacks and together for the rest:
the file is opened ``read_only`` with external access disabled and the configuration locked (no ``read_csv`` of
host files, no ``ATTACH``/``INSTALL``, no ``SET`` to undo any of it); DuckDB's own parser must see exactly one
statement of a reading kind (SELECT/WITH/FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN of those, and the catalogue
PRAGMAs); and every query runs under a wall-clock timeout (a timer thread interrupts the connection) with a row cap.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import duckdb

_READING_TYPES = {duckdb.StatementType.SELECT}
_EXPLAIN_PREFIX = re.compile(r"^\s*explain\s+(analyze\s+)?", re.IGNORECASE)
_PRAGMA = re.compile(r"^\s*pragma\s+([a-z_]+)", re.IGNORECASE)
_READING_PRAGMAS = {"table_info", "show", "show_tables", "show_tables_expanded", "version", "storage_info"}


class SQLRefused(ValueError):
    """The statement is not a single read-only query; the message says what was refused and why."""


class SQLTimeout(RuntimeError):
    """The query ran longer than the sandbox allows and was interrupted."""


class SQLFailed(RuntimeError):
    """DuckDB rejected an allowed statement (unknown column, type error, ...); the message is DuckDB's."""


@dataclass
class QueryResult:
    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False
    elapsed: float = 0.0
    row_cap: int = 0

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]


def check_statement(sql: str) -> str:
    """Return ``sql`` if it is exactly one reading statement, else raise :class:`SQLRefused`."""
    if not sql or not sql.strip():
        raise SQLRefused("empty SQL statement")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as error:
        raise SQLRefused(f"SQL does not parse: {_first_line(error)}") from error
    if len(statements) != 1:
        raise SQLRefused(f"exactly one statement is allowed, got {len(statements)}")
    kind = statements[0].type
    if kind in _READING_TYPES:
        return sql
    if kind == duckdb.StatementType.EXPLAIN:
        inner = _EXPLAIN_PREFIX.sub("", sql, count=1)
        try:
            inner_kinds = [s.type for s in duckdb.extract_statements(inner)]
        except duckdb.Error as error:
            raise SQLRefused(f"SQL does not parse: {_first_line(error)}") from error
        if inner_kinds == [duckdb.StatementType.SELECT]:
            return sql
        raise SQLRefused("EXPLAIN is allowed only for SELECT queries")
    if kind == duckdb.StatementType.PRAGMA:
        match = _PRAGMA.match(sql)
        if match and match.group(1).lower() in _READING_PRAGMAS:
            return sql
        raise SQLRefused(
            f"only the catalogue PRAGMAs are allowed ({', '.join(sorted(_READING_PRAGMAS))})"
        )
    name = kind.name if hasattr(kind, "name") else str(kind)
    raise SQLRefused(
        f"{name} statements are not allowed: the warehouse is read-only "
        "(use SELECT/WITH, DESCRIBE, SHOW, SUMMARIZE or EXPLAIN)"
    )


@dataclass
class ReadOnlyWarehouse:
    """The warehouse file opened for reading by untrusted SQL. Use as a context manager or call :meth:`close`."""

    path: Path
    timeout: float = 30.0
    max_rows: int = 1000
    memory_limit: str = "2GB"
    threads: int = 2
    _connection: duckdb.DuckDBPyConnection | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        if self._connection is None:
            if not self.path.exists():
                raise FileNotFoundError(f"warehouse {self.path.name} does not exist; run the ingest first")
            config = {
                "enable_external_access": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "memory_limit": self.memory_limit,
                "threads": self.threads,
                "lock_configuration": True,
            }
            try:
                self._connection = duckdb.connect(str(self.path), read_only=True, config=config)
            except duckdb.IOException as error:
                raise RuntimeError(
                    f"warehouse {self.path.name} cannot be opened for reading (is an ingest writing it?): "
                    f"{_first_line(error)}"
                ) from error
        return self._connection

    def query(self, sql: str, params: Sequence[Any] | None = None, max_rows: int | None = None) -> QueryResult:
        """Run one checked reading statement; at most ``max_rows`` rows come back (``truncated`` says if more)."""
        check_statement(sql)
        cap = self.max_rows if max_rows is None else max_rows
        with self._lock:
            connection = self.connection
            timer = threading.Timer(self.timeout, connection.interrupt)
            timer.daemon = True
            started = time.monotonic()
            timer.start()
            try:
                cursor = connection.execute(sql, list(params) if params is not None else None)
                description = cursor.description or []
                rows = cursor.fetchmany(cap + 1) if description else []
            except duckdb.InterruptException as error:
                raise SQLTimeout(f"query interrupted after {self.timeout:g} s (the time limit)") from error
            except duckdb.PermissionException as error:
                raise SQLRefused(f"refused by the sandbox: {_first_line(error)}") from error
            except duckdb.Error as error:
                if not timer.is_alive() and time.monotonic() - started >= self.timeout:
                    raise SQLTimeout(f"query interrupted after {self.timeout:g} s (the time limit)") from error
                raise SQLFailed(_first_line(error)) from error
            finally:
                timer.cancel()
        return QueryResult(
            columns=[d[0] for d in description],
            types=[str(d[1]) for d in description],
            rows=[tuple(r) for r in rows[:cap]],
            truncated=len(rows) > cap,
            elapsed=time.monotonic() - started,
            row_cap=cap,
        )

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __enter__(self) -> "ReadOnlyWarehouse":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(error: BaseException) -> str:
    """DuckDB's message without the echoed query context (it keeps "Did you mean ..." hints)."""
    kept = []
    for line in str(error).strip().splitlines():
        if line.startswith("LINE "):
            break
        if line.strip():
            kept.append(line.strip())
    return " ".join(kept) or type(error).__name__
