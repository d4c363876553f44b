"""The on-disk embedding cache: one SQLite file of vectors keyed by (encoder cache key, sha256 of the content), so
a cell whose content did not change is never encoded twice, whichever collection or process asks, and vectors of
different encoders or backends never mix. A cache is only a cache: a file that cannot be read is set aside and
started again, a failing read is a miss, a failing write is logged (:mod:`paperlake.runtime.healing`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from paperlake.runtime.healing import set_aside

log = logging.getLogger(__name__)


def content_sha256(content: str | bytes) -> str:
    data = content.encode("utf-8") if isinstance(content, str) else content
    return hashlib.sha256(data).hexdigest()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0

    def as_dict(self) -> dict:
        return {"hits": self.hits, "misses": self.misses}


class EmbeddingCache:
    """SQLite file of vectors keyed by (encoder cache key, sha256 of content); the key names model, backend and
    sequence length, so vectors of different encoders never mix.

    SQLite (WAL, busy timeout) rather than DuckDB because several ingest processes may share one cache, and DuckDB
    allows a single writing process per file.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stats = CacheStats()
        self._local = threading.local()
        self.in_memory = False  # a home this process cannot write (read-only): the cache lives for the process
        try:
            self._create()
        except (sqlite3.DatabaseError, OSError) as error:  # damaged: a cache is only a cache, it starts again
            self.close()
            if _cannot_write(error, self.path):
                log.info("embedding cache %s cannot be written (%s): kept in memory", self.path, error)
                self.in_memory = True
                self._create()
                return
            for damaged in (self.path, *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm"))):
                if os.path.lexists(damaged):
                    set_aside(damaged, f"{type(error).__name__}: {error}")
            self._create()

    def _create(self) -> None:
        with self._connect() as con:
            con.execute(
                "create table if not exists embeddings (model_id text not null, content_sha256 text not null, "
                "dimension integer not null, vector blob not null, primary key (model_id, content_sha256))"
            )
            con.execute("select count(*) from embeddings where rowid < 0").fetchone()

    def _connect(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            if self.in_memory:
                con = self._local.con = sqlite3.connect(":memory:", isolation_level=None)
                return con
            con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            con.execute("pragma journal_mode=wal")
            con.execute("pragma synchronous=normal")
            self._local.con = con
        return con

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors; a part of the file damaged since it opened reads as misses (the vectors are computed)."""
        try:
            return self._get_many(model_id, hashes)
        except sqlite3.DatabaseError as error:
            log.warning("embedding cache %s: %s: reading as misses", self.path, error)
            return {}

    def _get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        con = self._connect()
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = con.execute(
                "select content_sha256, dimension, vector from embeddings where model_id = ? "
                f"and content_sha256 in ({marks})",
                [model_id, *part],
            )
            for sha, dimension, blob in rows:
                found[sha] = np.frombuffer(blob, dtype=np.float32, count=dimension)
        return found

    def put_many(self, model_id: str, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        rows = [(model_id, sha, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for sha, v in items.items()]
        con = self._connect()
        try:
            con.execute("begin")
            con.executemany("insert or replace into embeddings values (?, ?, ?, ?)", rows)
            con.execute("commit")
        except sqlite3.DatabaseError as error:  # not kept this time: the vectors are in the store all the same
            log.warning("embedding cache %s: %s: vectors not cached", self.path, error)
            if con.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    con.execute("rollback")

    def __len__(self) -> int:
        return self._connect().execute("select count(*) from embeddings").fetchone()[0]

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None


def _cannot_write(error: BaseException, path: Path) -> bool:
    """Whether ``error`` says the cache's file or folder may not be written (a read-only home), not that it is
    damaged: a damaged file is set aside, which a read-only folder would refuse anyway."""
    if isinstance(error, OSError) and error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return True
    said = str(error).lower()
    if "readonly" in said or "read-only" in said:
        return True
    return "unable to open" in said and not os.access(path.parent, os.W_OK)


@dataclass
class EncodeResult:
    vectors: np.ndarray
    hits: int = 0
    misses: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def encode_cached(encoder, contents: Sequence[str | bytes], cache: EmbeddingCache | None) -> EncodeResult:
    """Vectors for ``contents`` (texts, or image bytes for a CLIP encoder), encoding only cache misses."""
    hashes = [content_sha256(c) for c in contents]
    cached = cache.get_many(encoder.cache_key, hashes) if cache is not None else {}
    todo = {}
    for sha, content in zip(hashes, contents):
        if sha not in cached and sha not in todo:
            todo[sha] = content
    started = time.perf_counter()
    fresh: dict[str, np.ndarray] = {}
    if todo:
        items = list(todo.items())
        payload = [c for _, c in items]
        if isinstance(payload[0], bytes):
            vectors = encoder.encode_images(payload)
        else:
            vectors = encoder.encode(payload)
        fresh = {sha: vectors[i] for i, (sha, _) in enumerate(items)}
        if cache is not None:
            cache.put_many(encoder.cache_key, fresh)
    seconds = time.perf_counter() - started
    hits = sum(1 for sha in hashes if sha in cached)
    if cache is not None:
        cache.stats.hits += hits
        cache.stats.misses += len(todo)
    dimension = encoder.dimension
    matrix = np.zeros((len(contents), dimension), dtype=np.float32)
    for i, sha in enumerate(hashes):
        matrix[i] = cached[sha] if sha in cached else fresh[sha]
    return EncodeResult(matrix, hits=hits, misses=len(todo), seconds=seconds)
