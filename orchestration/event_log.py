"""Dagster's SQLite event log, with its connections kept open between events.

Dagster's ``SqliteEventLogStorage`` creates an engine and opens and closes a SQLite connection for every write: an event
goes to its run's database and, for asset and check events, to the index database, each in its own connection (three or
four per event). Closing the last connection to a database in WAL mode checkpoints the log and deletes the
``-wal``/``-shm`` files, which the next open creates again; closing connections was the largest part of each stored
event's cost (measured on a run of one asset with 40 checks). An ingest of the sample stores ~3,000 events, so the event
log was a large share of a small volume's ingest.

:class:`PooledSqliteEventLogStorage` keeps one engine per database with a small connection pool, so a connection stays
open between events (several times cheaper per event on the same runs), and syncs the WAL at checkpoints rather than at
every commit (``synchronous=NORMAL``: cheaper still; a process crash loses no committed event, a power cut may lose the
last few). Everything else is Dagster's: the same files, schema and WAL mode, the same lock around each use, so the
Dagster UI, the daemon or another ingest using the stock class on the same files work beside it. Engines are bounded
(the least recently used database's is disposed), dropped when the files are wiped, and never reused across a fork (a
forked child opens its own connections; the parent's are left untouched, as SQLite requires).

:func:`orchestration.instance.dagster_instance` uses it when the home's ``dagster.yaml`` configures no storage of
its own.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator

from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine

MAX_OPEN_DATABASES = 8  # an ingest writes to the index and one run's database at a time
_INHERITED: list = []  # engines of a parent process: kept referenced so that a child never closes their connections


def _wal_synchronous_normal(dbapi_connection, _record) -> None:
    """In WAL mode, ``synchronous=NORMAL`` syncs at checkpoints instead of at every commit: a committed event
    survives any process's crash, and an operating-system crash or power cut may lose the last few, never corrupt
    the file (SQLite's documented guarantee). The stores a run writes keep their own recovery; the event log is its
    history."""
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` whose connections outlive one event (see the module's docstring)."""

    def __init__(self, base_dir: str, inst_data=None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._engines_pid = os.getpid()
        self._engines_lock = threading.RLock()  # the engine table only; uses of a connection hold _db_lock
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> "PooledSqliteEventLogStorage":
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        """The open engine of ``shard``'s database."""
        with self._engines_lock:
            return self._engine_locked(shard)

    def _engine_locked(self, shard: str) -> Engine:
        if self._engines_pid != os.getpid():
            _INHERITED.extend(self._engines.values())
            self._engines = OrderedDict()
            self._engines_pid = os.getpid()
        engine = self._engines.get(shard)
        if engine is None:
            engine = create_engine(
                self.conn_string_for_shard(shard),
                pool_size=1,
                max_overflow=2,
                # a pooled connection serves one checkout at a time, whichever thread it comes from
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
            )
            event.listen(engine, "connect", _wal_synchronous_normal)
            self._engines[shard] = engine
            while len(self._engines) > MAX_OPEN_DATABASES:
                _, oldest = self._engines.popitem(last=False)
                oldest.dispose()
        else:
            self._engines.move_to_end(shard)
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn:
                with conn.begin():
                    yield conn

    def has_table(self, table_name: str) -> bool:
        engine = self._engine(INDEX_SHARD_NAME)
        with engine.connect() as conn:
            return bool(engine.dialect.has_table(conn, table_name))

    def _dispose_engines(self) -> None:
        with self._engines_lock:
            if self._engines_pid == os.getpid():
                for engine in self._engines.values():
                    engine.dispose()
            self._engines = OrderedDict()

    def wipe(self) -> None:
        self._dispose_engines()  # the run databases are deleted: no connection may stay open on them
        super().wipe()

    def dispose(self) -> None:
        self._dispose_engines()
        super().dispose()


def storage_overrides(dagster_home: str) -> dict:
    """``DagsterInstance`` config overrides that put :class:`PooledSqliteEventLogStorage` on the default files of
    ``dagster_home`` (where the stock class keeps them: ``history/runs``)."""
    return {
        "event_log_storage": {
            "module": __name__,
            "class": PooledSqliteEventLogStorage.__name__,
            "config": {"base_dir": os.path.join(dagster_home, "history", "runs", "")},
        }
    }
