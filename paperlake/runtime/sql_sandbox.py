"""The one SQL sandbox for every surface that runs SQL nobody vetted: the agent's RetrieveFromDatabase and the
``paperlake sql`` command alike.

Fences, each enough on its own for the common attacks and together for the rest:

- **statement whitelist**: DuckDB's own parser must see exactly one statement of a reading kind (SELECT/WITH/FROM,
  DESCRIBE, SHOW, SUMMARIZE, EXPLAIN of those, and the catalogue PRAGMAs);
- **no file or network access**: the file is opened ``read_only`` with external access disabled, extension
  autoloading off and the configuration locked (no ``read_csv``/``read_text``/``glob`` of host files, no
  ``ATTACH``/``INSTALL``/``LOAD``, no ``SET`` to undo any of it);
- **bounded cost, in a separate process**: queries run in a worker process (``python -m paperlake.runtime.sql_sandbox``)
  whose address space the parent caps (``RLIMIT_AS``, before the worker opens anything) above DuckDB's own
  ``memory_limit``, because some work is not
  accounted by DuckDB's buffer manager (``repeat('x', 1500000000)`` builds a 1.5 GB string whatever
  ``memory_limit`` says, and is not interruptible while it does). The worker interrupts its query at the time limit;
  the parent kills the worker if it has not answered shortly after, and starts a new one for the next query. The
  limit covers executing *and* fetching: rows are fetched in batches and the result is capped in rows and in bytes
  inside the worker (a cell larger than what is left of the byte budget is cut, with ``truncated`` and a note), so
  neither process ever holds more than the cap of result data, and formatting downstream works on bounded values.

The worker answers over its stdin/stdout pipes (length-prefixed pickles: the two ends are the same program) and
exits when its stdin closes, so a parent that dies takes its worker with it. Every fence is decided in the parent
(:class:`Fences`); the worker only opens the file with the settings it is sent, and runs queries.
"""

from __future__ import annotations

import os
import pickle
import re
import resource
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import duckdb

_READING_TYPES = {duckdb.StatementType.SELECT}
# EXPLAIN [ANALYZE] [(FORMAT x, ANALYZE)]: what follows must be a SELECT (ANALYZE runs it)
_EXPLAIN_OPTION = r"(format\s+\w+|analyze)"
_EXPLAIN_PREFIX = re.compile(
    rf"^\s*explain\s+(analyze\s+)?(\(\s*{_EXPLAIN_OPTION}(\s*,\s*{_EXPLAIN_OPTION})*\s*\)\s*)?", re.IGNORECASE
)
_PRAGMA = re.compile(r"^\s*pragma\s+([a-z_]+)", re.IGNORECASE)
_READING_PRAGMAS = {"table_info", "show", "show_tables", "show_tables_expanded", "version", "storage_info"}


class SQLRefused(ValueError):
    """The statement is not a single read-only query; the message says what was refused and why."""


class SQLTimeout(RuntimeError):
    """The query ran longer than the sandbox allows and was interrupted."""


class SQLFailed(RuntimeError):
    """DuckDB rejected an allowed statement (unknown column, type error, ...); the message is DuckDB's."""


class SQLTooLarge(SQLFailed):
    """The query needed more memory than the sandbox allows."""


@dataclass
class QueryResult:
    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False  # rows or bytes were cut: ``note`` says which
    elapsed: float = 0.0
    row_cap: int = 0
    byte_cap: int = 0
    cut_bytes: bool = False  # the byte cap cut the result (a cell, or the rows after it)
    note: str = ""

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
        raise SQLRefused(f"only the catalogue PRAGMAs are allowed ({', '.join(sorted(_READING_PRAGMAS))})")
    raise SQLRefused(
        f"{kind.name} statements are not allowed: the warehouse is read-only "
        "(use SELECT/WITH, DESCRIBE, SHOW, SUMMARIZE or EXPLAIN)"
    )


# DuckDB's own limit, and the worker's address space: DuckDB's limit plus room for Python, the DuckDB library,
# thread stacks and one batch of fetched rows. Measured: a 30M-row DISTINCT under a 1 GB memory_limit peaks at
# ~630 MB RSS; the worker idles at ~80 MB.
MEMORY_LIMIT = "1GB"
ADDRESS_SPACE = 3 * 2**30
MAX_ROWS = 1000
MAX_BYTES = 4_000_000  # result data, summed over cells (strings by characters, blobs by bytes, scalars 16)
TIMEOUT = 30.0
_GRACE = 3.0  # how long past the time limit the parent waits for the worker's own interrupt before killing it
_FETCH_BATCH = 64


@dataclass(frozen=True)
class Fences:
    """Which of the sandbox's fences are up: all of them unless a test lowers the others to show that one holds
    alone (tests/unit/test_sandbox_fences.py). Nothing outside tests should lower any."""

    statement_whitelist: bool = True  # check_statement, before the worker sees the SQL
    address_space_limit: bool = True  # RLIMIT_AS on the worker: allocations DuckDB does not account for
    read_only: bool = True  # the warehouse file cannot be written
    no_external_access: bool = True  # no file but the warehouse, no network
    no_extension_autoload: bool = True  # no extension installed or loaded behind a query's back
    locked_configuration: bool = True  # no SET to undo the others
    memory_limit: bool = True  # DuckDB's own memory_limit


@dataclass
class ReadOnlyWarehouse:
    """The warehouse file opened for reading by untrusted SQL. Use as a context manager or call :meth:`close`.

    ``timeout`` bounds execution and fetching; ``max_rows`` and ``max_bytes`` bound what comes back (per query,
    ``max_rows`` may be given to :meth:`query`); ``memory_limit`` is DuckDB's, ``address_space`` the worker's;
    ``fences`` are all up unless a test lowers some."""

    path: Path
    timeout: float = TIMEOUT
    max_rows: int = MAX_ROWS
    max_bytes: int = MAX_BYTES
    memory_limit: str = MEMORY_LIMIT
    address_space: int = ADDRESS_SPACE
    threads: int = 2
    start_timeout: float = 60.0  # a worker that has not opened the file by then is killed
    fences: Fences = Fences()
    _worker: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def query(self, sql: str, params: Sequence[Any] | None = None, max_rows: int | None = None) -> QueryResult:
        """Run one checked reading statement; at most ``max_rows`` rows and ``max_bytes`` of data come back
        (``truncated`` and ``note`` say what was cut)."""
        if self.fences.statement_whitelist:
            check_statement(sql)
        request = {
            "sql": sql,
            "params": list(params) if params is not None else None,
            "max_rows": self.max_rows if max_rows is None else max_rows,
            "max_bytes": self.max_bytes,
            "timeout": self.timeout,
        }
        with self._lock:
            worker = self._start()
            started = time.monotonic()
            try:
                _send(worker.stdin, request)
                answer = _receive(worker.stdout, deadline=started + self.timeout + _GRACE)
            except TimeoutError:
                self._stop(kill=True)
                raise SQLTimeout(
                    f"query stopped after {self.timeout:g} s (the time limit); its worker did not "
                    "answer the interrupt and was restarted"
                ) from None
            except (EOFError, BrokenPipeError, OSError):
                code = self._stop(kill=True)
                raise SQLTooLarge(
                    f"the query's worker died ({_exit_text(code)}); most likely the query needed "
                    f"more than the sandbox's {self.address_space / 2**30:g} GB of memory"
                ) from None
        kind = answer.pop("error", None)
        if kind is not None:
            raise {"refused": SQLRefused, "timeout": SQLTimeout, "memory": SQLTooLarge, "failed": SQLFailed}[kind](
                answer["message"]
            )
        return QueryResult(**answer)

    def _start(self) -> subprocess.Popen:
        if self._worker is not None and self._worker.poll() is None:
            return self._worker
        if not self.path.exists():
            raise FileNotFoundError(f"warehouse {self.path.name} does not exist; run the ingest first")
        worker = subprocess.Popen(
            [sys.executable, "-m", "paperlake.runtime.sql_sandbox"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        try:
            if self.fences.address_space_limit:  # before the worker has been sent anything to open or run
                resource.prlimit(worker.pid, resource.RLIMIT_AS, (self.address_space, self.address_space))
            _send(worker.stdin, self._opening())
            opened = _receive(worker.stdout, deadline=time.monotonic() + self.start_timeout)
        except (TimeoutError, EOFError, BrokenPipeError, OSError) as error:
            _kill(worker)
            raise RuntimeError(f"the SQL sandbox's worker did not start ({type(error).__name__})") from None
        if opened.get("error"):
            _kill(worker)
            raise RuntimeError(opened["message"])
        self._worker = worker
        return worker

    def _opening(self) -> dict:
        """What the worker opens, and with which of DuckDB's settings: the fences that are down are opened wide
        explicitly, whatever DuckDB's defaults."""
        settings: dict[str, Any] = {
            "enable_external_access": not self.fences.no_external_access,
            "autoinstall_known_extensions": not self.fences.no_extension_autoload,
            "autoload_known_extensions": not self.fences.no_extension_autoload,
            "threads": self.threads,
        }
        if self.fences.memory_limit:
            settings["memory_limit"] = self.memory_limit
        settings["lock_configuration"] = self.fences.locked_configuration  # last: it locks what comes before
        return {"path": str(self.path), "read_only": self.fences.read_only, "settings": settings}

    def _stop(self, kill: bool = False) -> int | None:
        worker, self._worker = self._worker, None
        if worker is None:
            return None
        if kill:
            return _kill(worker)
        try:
            worker.stdin.close()  # the worker exits when its stdin closes
            return worker.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            return _kill(worker)
        finally:
            if worker.stdout:
                worker.stdout.close()

    def close(self) -> None:
        with self._lock:
            self._stop()

    def __enter__(self) -> "ReadOnlyWarehouse":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten close must not leave a worker behind
        worker = getattr(self, "_worker", None)
        if worker is not None and worker.poll() is None:
            _kill(worker)


def _kill(worker: subprocess.Popen) -> int | None:
    try:
        worker.kill()
    except OSError:
        pass
    try:
        return worker.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return None


def _exit_text(code: int | None) -> str:
    if code is None:
        return "it did not exit"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit {code}"


def _send(pipe, message: dict) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(struct.pack(">Q", len(payload)) + payload)
    pipe.flush()


def _receive(pipe, deadline: float | None = None) -> dict:
    header = _read_exactly(pipe, 8, deadline)
    return pickle.loads(_read_exactly(pipe, struct.unpack(">Q", header)[0], deadline))


def _read_exactly(pipe, size: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    fd = pipe.fileno()
    while size:
        if deadline is not None:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# -- the worker ---------------------------------------------------------------------------------------------------


def _serve(stdin, stdout) -> None:
    """Open the warehouse as the parent says (:meth:`ReadOnlyWarehouse._opening`), then answer queries until stdin
    closes."""
    config = _receive(stdin)
    try:
        connection = duckdb.connect(config["path"], read_only=config["read_only"], config=config["settings"])
    except duckdb.IOException as error:
        _send(
            stdout,
            {
                "error": "failed",
                "message": f"warehouse {Path(config['path']).name} cannot be opened for "
                f"reading (is an ingest writing it?): {_first_line(error)}",
            },
        )
        return
    except Exception as error:  # reported to the parent, which raises it
        _send(stdout, {"error": "failed", "message": f"{type(error).__name__}: {_first_line(error)}"})
        return
    _send(stdout, {"opened": True})
    while True:
        try:
            request = _receive(stdin)
        except EOFError:
            return
        _send(stdout, _answer(connection, request))


def _answer(connection: duckdb.DuckDBPyConnection, request: dict) -> dict:
    timeout = float(request["timeout"])
    timer = threading.Timer(timeout, connection.interrupt)
    timer.daemon = True
    started = time.monotonic()
    timer.start()
    try:
        cursor = connection.execute(request["sql"], request["params"])
        description = cursor.description or []
        rows, truncated, cut_bytes = (
            _fetch(cursor, int(request["max_rows"]), int(request["max_bytes"]), started + timeout)
            if description
            else ([], False, False)
        )
    except (duckdb.InterruptException, TimeoutError):
        return {"error": "timeout", "message": f"query interrupted after {timeout:g} s (the time limit)"}
    except duckdb.PermissionException as error:
        return {"error": "refused", "message": f"refused by the sandbox: {_first_line(error)}"}
    except duckdb.OutOfMemoryException as error:
        return {
            "error": "memory",
            "message": f"the query needs more memory than the sandbox allows: {_first_line(error)}",
        }
    except MemoryError:
        return {"error": "memory", "message": "the query's result needs more memory than the sandbox allows"}
    except duckdb.Error as error:
        if not timer.is_alive():  # the timer has fired: this error is how the query took its interrupt
            return {"error": "timeout", "message": f"query interrupted after {timeout:g} s (the time limit)"}
        return {"error": "failed", "message": _first_line(error)}
    except Exception as error:  # a value Python cannot hold (a date out of range, ...)
        return {"error": "failed", "message": f"{type(error).__name__}: {_first_line(error)}"}
    finally:
        timer.cancel()
    cap, budget = int(request["max_rows"]), int(request["max_bytes"])
    notes = []
    if truncated:
        notes.append(f"more than {cap} rows: the first {cap} are shown")
    if cut_bytes:
        notes.append(
            f"the result was cut at {budget:,} bytes of data (select fewer rows or columns, or shorten long "
            "values with left(column, n))"
        )
    return {
        "columns": [d[0] for d in description],
        "types": [str(d[1]) for d in description],
        "rows": rows,
        "truncated": truncated or cut_bytes,
        "elapsed": time.monotonic() - started,
        "row_cap": cap,
        "byte_cap": budget,
        "cut_bytes": cut_bytes,
        "note": "; ".join(notes),
    }


def _fetch(cursor, cap: int, budget: int, deadline: float) -> tuple[list[tuple], bool, bool]:
    """Rows in batches until ``cap`` rows, ``budget`` bytes or the deadline; (rows, more rows exist, bytes cut)."""
    rows: list[tuple] = []
    used = 0
    while True:  # each batch asks for one row past the cap, so a full cap is known to be cut or not
        if time.monotonic() > deadline:
            raise TimeoutError
        batch = cursor.fetchmany(min(_FETCH_BATCH, cap + 1 - len(rows)))
        if not batch:
            return rows, False, False
        for row in batch:
            if len(rows) == cap:
                return rows, True, False
            cells = []
            for value in row:
                value, size, cut = _fit(value, budget - used)
                used += size
                cells.append(value)
                if cut:
                    rows.append(tuple(cells) + (None,) * (len(row) - len(cells)))
                    return rows, False, True
            rows.append(tuple(cells))


_SCALAR = 16
_ELLIPSIS = "…"


def _fit(value: Any, budget: int) -> tuple[Any, int, bool]:
    """``value`` cut to at most ``budget`` (its size, whether it was cut). Strings count characters, blobs bytes,
    containers their items, anything else a fixed 16."""
    if isinstance(value, str):
        if len(value) <= budget:
            return value, len(value), False
        return value[: max(budget, 0)] + _ELLIPSIS, max(budget, 0), True
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) <= budget:
            return value, len(value), False
        return bytes(value[: max(budget, 0)]), max(budget, 0), True
    if isinstance(value, (list, tuple)):
        items, used = [], 0
        for item in value:
            item, size, cut = _fit(item, budget - used)
            used += size
            items.append(item)
            if cut:
                return type(value)(items), used, True
        return type(value)(items), used, False
    if isinstance(value, dict):
        out, used = {}, 0
        for key, item in value.items():
            key, key_size, key_cut = _fit(key, budget - used)
            used += key_size
            if key_cut:
                return out, used, True
            item, size, cut = _fit(item, budget - used)
            used += size
            out[key] = item
            if cut:
                return out, used, True
        return out, used, False
    if _SCALAR > budget:
        return None, 0, True
    return value, _SCALAR, False


def _first_line(error: BaseException) -> str:
    """DuckDB's message without the echoed query context (it keeps "Did you mean ..." hints)."""
    kept = []
    for line in str(error).strip().splitlines():
        if line.startswith("LINE "):
            break
        if line.strip():
            kept.append(line.strip())
    return " ".join(kept) or type(error).__name__


if __name__ == "__main__":  # the worker: python -m paperlake.runtime.sql_sandbox
    _serve(sys.stdin.buffer, sys.stdout.buffer)
