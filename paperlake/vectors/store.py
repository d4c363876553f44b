"""Milvus collections of warehouse cells: create them from the specs, and keep each paper's entities in sync.

``VectorStore(uri)`` takes a file path ending in ``.db`` (Milvus Lite, in this process, guarded by a file lock) or
``http://host:port`` (a Milvus Lite server or any Milvus ≥ 2.5): the client code is the same.

Layout decisions:
- one partition per view (``<table>__<column>``): a retrieval always names one view, and Milvus Lite scans every
  row of the searched partitions in Python, so searching one partition is what keeps search fast at 100k entities;
- every entity carries ``text_hash`` = sha256 of (the collection's encoder fingerprint, the encoded content), so a
  re-sync skips unchanged cells without encoding and a model swap re-encodes everything;
- entity ids are uuid5 of ``table.column.row_id``: writes are idempotent upserts, a replay never duplicates.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
import time
import uuid
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence
from urllib.parse import urlparse

from paperlake.config import Settings, is_server_uri
from paperlake.runtime.failpoints import fault_point
from paperlake.runtime.healing import DAMAGED_SUFFIX, set_aside
from paperlake.runtime.healing import log as healing_log
from paperlake.vectors import pymilvus_names as milvus  # pymilvus itself on first use of a name
from paperlake.vectors.config import CollectionSpec, VectorConfig, load_config
from paperlake.vectors.embedding_cache import EmbeddingCache, encode_cached
from paperlake.vectors.encoders import (
    EncoderRegistry,
    encode_pooled,
    encoder_registry,
    render_region,
)
from paperlake.vectors.entities import POOLING_VERSION, Cell, Encodable, collect_cells
from paperlake.vectors.filters import quote_literal, validate_filter
from paperlake.vectors.lite_state import (
    folder_entries,
    folder_state,
    forget_state,
    record_state,
    recorded_facts,
    recorded_state,
    written_between,
)
from paperlake.vectors.server import MILVUS_LITE_LOCK, FileLockGuard, lock_path_for

log = logging.getLogger(__name__)
_UNKNOWN = object()  # a fact the Lite folder's record does not hold

SPEC_PROPERTY = "paperlake.spec"
INCARNATION_PROPERTY = "paperlake.incarnation"
INDEXES_PROPERTY = "paperlake.indexes"  # the index parameters, recorded once every index exists (ensure_indexes)
SCALAR_FIELDS = ("pdf_id", "page_number", "table_name", "column_name", "primary_key")
OUTPUT_FIELDS = ("id", *SCALAR_FIELDS, "text", "bbox")
_WRITE_BATCH = 500
_QUERY_LIMIT = 16384  # Milvus' default cap on offset + limit of one query
_QUERY_MEMO = 20000  # query vectors a store keeps (an evaluation's questions; ~30 MB of MiniLM vectors)


class VectorSyncError(RuntimeError):
    """Syncing one paper failed; names the paper, the stage and the reason."""

    def __init__(self, paper_id: str, stage: str, reason: str):
        self.paper_id, self.stage, self.reason = paper_id, stage, reason
        super().__init__(f"paper {paper_id}: {stage}: {reason}")


class SchemaMismatchError(RuntimeError):
    """An existing collection's vector fields differ from its spec."""


@dataclass
class CollectionSyncStats:
    collection: str
    cells: int = 0
    upserted: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: int = 0
    encoded: int = 0
    cache_hits: int = 0
    encode_seconds: float = 0.0
    write_seconds: float = 0.0
    unflushed: bool = False  # left to the caller's flush_collection (``sync_paper(..., flush=False)``)
    notes: list[str] = field(default_factory=list)


@dataclass
class SyncReport:
    paper_id: str
    collections: dict[str, CollectionSyncStats] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def encoded(self) -> int:
        return sum(s.encoded for s in self.collections.values())

    @property
    def upserted(self) -> int:
        return sum(s.upserted for s in self.collections.values())

    @property
    def deleted(self) -> int:
        return sum(s.deleted for s in self.collections.values())


@dataclass
class WarehouseSyncReport:
    papers: dict[str, SyncReport] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def partition_name(table: str, column: str) -> str:
    """The partition that holds the view ``table.column``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{table}__{column}")


def _default_cache_dir(uri: str) -> Path:
    """``cache/`` beside a Milvus Lite file (its home: PAPERLAKE_HOME/milvus.db → PAPERLAKE_HOME/cache), so a store
    opened by path alone never writes into another home's cache; for a server, ``$PAPERLAKE_HOME/cache``."""
    if is_server_uri(uri):
        return Settings.from_env().cache
    return Path(uri).expanduser().resolve().parent / "cache"


def create_collection_if_absent(client: milvus.MilvusClient, name: str, schema) -> bool:
    """Create the collection unless it exists; True when this call created it. Two writers that both saw it
    missing (concurrent steps against one Milvus server) both succeed: the loser's "already exists" is success,
    and the caller checks that the existing schema is the one it wants."""
    if client.has_collection(name):
        return False
    try:
        client.create_collection(name, schema=schema)
    except milvus.MilvusException:
        if client.has_collection(name):
            return False
        raise
    return True


def ensure_indexes(client: milvus.MilvusClient, name: str, index_params) -> None:
    """Create each index of ``index_params`` whose field has none yet (a writer killed between creating the
    collection and its indexes left it without them; a concurrent writer may be creating them right now).

    Once every index is there, the collection records the index parameters (:data:`INDEXES_PROPERTY`), and later
    calls end at that record: listing indexes costs Milvus Lite a pass over the collection, which grows
    with it, paid by every sync step. The record is written only after the indexes exist, so a writer killed
    before it leaves the next call to list them again."""
    wanted = hashlib.sha256("\n".join(sorted(str(index) for index in index_params)).encode()).hexdigest()[:16]
    properties = client.describe_collection(name).get("properties") or {}
    if properties.get(INDEXES_PROPERTY) == wanted:
        return
    existing = set(client.list_indexes(name))
    for index in index_params:
        if index.field_name in existing or index.index_name in existing:
            continue
        try:
            # sync=False: pymilvus would otherwise poll index state with AllocTimestamp, which Milvus Lite lacks.
            client.create_index(name, milvus.IndexParams([index]), sync=False)
        except milvus.MilvusException:
            if index.field_name not in set(client.list_indexes(name)):
                raise
    client.alter_collection_properties(name, properties={INDEXES_PROPERTY: wanted})


# Milvus Lite's server (in process for a .db file, or `milvus-lite server` on loopback) is a grpcio server with gRPC's
# default ping policy: at most one ping per 5 minutes on a connection sending no data, GOAWAY "too many pings" at the
# third. pymilvus pings every 10 s even when idle, so a store left idle for ~30 s (an ingest's vector store while
# parse, dbt and formulas run) is cut off, and pymilvus's recovery then fails on the same channel ("Fail connecting to
# server"): the formula stage of a first `./run demo` failed that way. On loopback there is no NAT to keep open: ping
# only during calls, less often than the policy allows.
LOOPBACK_GRPC_OPTIONS = {"grpc.keepalive_time_ms": 330_000, "grpc.keepalive_permit_without_calls": False}


def _keepalive(uri: str | None) -> dict:
    """``grpc_options`` for a Milvus Lite file (``uri`` None) or a server on loopback; a remote server keeps
    pymilvus's defaults."""
    if uri is not None:
        host = (urlparse(uri).hostname or "").lower()
        if host not in ("127.0.0.1", "localhost", "::1"):
            return {}
    return {"grpc_options": dict(LOOPBACK_GRPC_OPTIONS)}


@contextlib.contextmanager
def _quiet(*loggers: str):
    """The named loggers silenced for the block (their levels restored after)."""
    saved = {name: logging.getLogger(name).level for name in loggers}
    for name in loggers:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def _lockable(path: Path) -> bool:
    """Whether this process can take the locks on a Milvus Lite folder (ours beside it, Milvus Lite's inside it):
    False on a read-only home."""
    for lock in (lock_path_for(path), path / MILVUS_LITE_LOCK):
        try:
            os.close(os.open(lock, os.O_RDWR | os.O_CREAT, 0o644))
        except FileNotFoundError:  # no folder yet: Milvus Lite makes it
            continue
        except IsADirectoryError:  # a damaged lock: the guard sets it aside
            continue
        except OSError as error:
            if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                return False
            raise
    return True


def _unlisted_collection_folders(path: Path, listed: list[str]) -> list[str]:
    """Folders of Milvus Lite's default database (``<db>/collections/<name>``, the layout its ``db`` module
    documents) that it does not list as collections: one whose schema is gone, which it would then refuse to create
    again ("File exists")."""
    root = path / "collections"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name not in listed)


class VectorStore:
    """Milvus collections of paperlake; see the module docstring."""

    def __init__(
        self,
        uri: str | Path,
        *,
        config: VectorConfig | None = None,
        encoders: EncoderRegistry | None = None,
        cache: EmbeddingCache | None = None,
        cache_path: str | Path | None = None,
        use_cache: bool = True,
        allow_random_clip: bool = False,
        lock_timeout: float = 30.0,
        token: str = "",
        heal: bool = False,
    ):
        self.uri = str(uri)
        self.config = config or load_config()
        if cache is None and use_cache:
            cache = EmbeddingCache(cache_path or _default_cache_dir(self.uri) / "embeddings.sqlite")
        self.cache = cache
        # exported ONNX graphs are shared by every home on the machine (config.model_cache_dir)
        self.encoders = encoders or encoder_registry(self.config, allow_random_clip=allow_random_clip)
        self._guard: FileLockGuard | None = None
        self.db_path: Path | None = None
        self.healed = None  # the SetAside of a damaged Milvus Lite file this store replaced (heal=True)
        self._scratch: Path | None = None  # a read-only home's Milvus Lite folder is read from a copy made here
        self._record_on_close = False  # it proved (or trusted) the Lite folder: a clean close records its state
        self._loaded: set[str] = set()
        # collection → its entity count, taken by the heal probe (it loaded the collection: counting is then cheap)
        self.probed_counts: dict[str, int] = {}
        self._client: milvus.MilvusClient | None = None
        # A Lite folder as the last clean close left it, with that close's facts (lite_state): the client opens on
        # first use, and what the facts know is answered from them until then
        self._deferred: Path | None = None
        self._facts: dict[str, dict] = {}
        self._facts_taken = 0  # the lock's FileLockGuard.taken when the facts were read: another store voids them
        self._opened_entries: dict[str, list[int]] | None = None  # the folder as this sole writer opened it
        self._observed: dict[str, dict] = {}  # collection → what the client told this store (recorded at close)
        if is_server_uri(self.uri):
            self._client = milvus.MilvusClient(self.uri, token=token, **_keepalive(self.uri))
        else:
            path = Path(self.uri).expanduser().resolve()
            if path.suffix != ".db":
                raise ValueError(f"Milvus Lite path must end in .db (pymilvus' rule), got {self.uri}")
            path.parent.mkdir(parents=True, exist_ok=True)
            if not heal and not _lockable(path):
                path = self._read_only_copy(path)
            self._guard = FileLockGuard(path, timeout=lock_timeout).acquire()
            self.db_path = path
            try:
                self._client = self._open_lite(path, heal)
            except Exception:
                self._guard.release()
                raise
        self._partitions: dict[str, set[str]] = {}
        self._query_vectors: dict[tuple[str, str], list[float]] = {}  # (encoder, query) → vector, bounded
        # collection → (partition, replacing) → rows that syncs with flush=False left for flush_collection to write
        self._unwritten: dict[str, dict[tuple[str, bool], list[dict]]] = {}

    # ── lifecycle ────────────────────────────────────────────────────────────────────────────────────────────────

    @property
    def client(self) -> milvus.MilvusClient:
        """The pymilvus client; a deferred Milvus Lite client is opened now (the folder was proved unchanged when
        this store took its lock, which it has held since)."""
        if self._client is None:
            self._client = milvus.MilvusClient(str(self._deferred), **_keepalive(None))
        return self._client

    def _open_lite(self, path: Path, heal: bool) -> milvus.MilvusClient | None:
        """The Milvus Lite client of ``path``. With ``heal`` (the writers: syncs, sensors, formula builds) every
        collection is described, loaded (which reads its segments and their scalar and vector indexes) and counted
        (:attr:`probed_counts`: a manifest Milvus Lite fell back from shows as fewer entities than the sync records
        hold, and those papers are synced again); a file Milvus Lite cannot read sets
        the whole ``.db`` aside (:func:`paperlake.runtime.healing.set_aside`; its entities are derived from the
        warehouse) and an empty one is opened: the collections come back with new incarnations, so every paper's
        ledger record is stale and the same run syncs it again. Only the lock's sole holder heals; another holder
        of this process keeps its client on the files it opened. A folder no byte of which changed since the last
        writer proved it and closed it cleanly is not probed again (:mod:`paperlake.vectors.lite_state`); when that
        writer also recorded its collections' facts, none is opened yet (None: :attr:`client` opens it on use)."""
        sole = heal and self._guard.holders == 1
        entries = folder_entries(path) if sole else None
        state = folder_state(path, entries) if sole else None
        unchanged = sole and state is not None and state == recorded_state(path)
        self._opened_entries = entries
        if unchanged and (facts := recorded_facts(path, state)) is not None:
            self._deferred, self._facts, self._facts_taken = path, facts, self._guard.taken
            self._record_on_close = True
            return None
        try:
            client = milvus.MilvusClient(str(path), **_keepalive(None))
        except Exception as error:
            if not sole or not path.exists():
                raise
            return self._reopen_aside(None, path, error)
        self._deferred = path
        if not sole:
            return client
        self._record_on_close = True
        if unchanged:  # as the last clean close left it (paperlake.vectors.lite_state): proved then
            return client
        try:
            with _quiet("pymilvus", "milvus_lite"):  # their loggers print the damage as tracebacks; it is said once
                listed = client.list_collections()
                if stray := _unlisted_collection_folders(path, listed):  # e.g. its schema.json gone
                    raise RuntimeError(f"collection folders Milvus Lite does not list: {', '.join(stray)}")
                for name in listed:
                    client.describe_collection(name)
                    client.load_collection(name)
                    self._loaded.add(name)
                    rows = client.query(name, filter="", output_fields=["count(*)"])
                    self.probed_counts[name] = int(rows[0]["count(*)"]) if rows else 0
        except Exception as error:  # pymilvus wraps Milvus Lite's (pyarrow, numpy, json, os) errors; any is damage
            self._loaded.clear()
            self.probed_counts.clear()
            return self._reopen_aside(client, path, error)
        if written := written_between(entries, folder_entries(path)):  # a sound folder's probe writes nothing
            healing_log.warning(  # the ingest prints what is logged there as `healed` lines
                "%s: Milvus Lite rebuilt %d file(s) it found missing or damaged while loading it (%s)",
                path,
                len(written),
                ", ".join(written[:3]) + (", ..." if len(written) > 3 else ""),
            )
        return client

    def _read_only_copy(self, path: Path) -> Path:
        """Milvus Lite takes a lock inside its folder, which a read-only home (a read-only mount, an archive) cannot
        give: a reader opens a copy in a temporary folder instead, removed when it closes."""
        self._scratch = Path(tempfile.mkdtemp(prefix="paperlake-milvus-read-only-"))
        weakref.finalize(self, shutil.rmtree, self._scratch, True)  # also at exit, for a store never closed
        copy = self._scratch / path.name
        shutil.copytree(path, copy, ignore=shutil.ignore_patterns(MILVUS_LITE_LOCK, f"*{DAMAGED_SUFFIX}*"))
        for root, dirs, files in os.walk(copy):  # the copy took the read-only modes along: Milvus Lite writes in it
            for name in [*dirs, *files, "."]:
                target = os.path.join(root, name)
                os.chmod(target, os.stat(target).st_mode | stat.S_IWUSR)
        log.info("%s cannot be locked (a read-only home): reading a copy in %s", path, self._scratch)
        return copy

    def _reopen_aside(self, client: milvus.MilvusClient | None, path: Path, error: Exception) -> milvus.MilvusClient:
        from milvus_lite.server_manager import server_manager_instance  # deferred: milvus_lite

        if client is not None:
            client.close()
        server_manager_instance.release_server(str(path))
        reason = getattr(error, "message", None) or str(error)
        self.healed = set_aside(path, f"{type(error).__name__}: {reason}")
        forget_state(path)
        self._opened_entries = None  # a new folder: this store learns nothing to record of it
        self._record_on_close = True
        return milvus.MilvusClient(str(path), **_keepalive(None))

    def close(self) -> None:
        """Close the client; for a Milvus Lite file also stop its in-process server and release the lock."""
        if self._guard is None:
            self.client.close()
            return
        last = self._guard.holders == 1
        clean = sys.exc_info()[0] is None  # not closed on the way out of an error
        # (a process where no client of the folder opened has started no Milvus Lite server to stop, and left the
        # folder and its record as they were)
        untouched = self._client is None and self._guard.taken == self._facts_taken
        recording = last and self._record_on_close and clean and not untouched
        facts = self._facts_to_record() if recording else None  # asked before the server stops
        if self._client is not None:
            self._client.close()
        if last:
            if "milvus_lite.server_manager" in sys.modules:
                from milvus_lite.server_manager import server_manager_instance  # deferred: milvus_lite

                server_manager_instance.release_server(str(self.db_path))
            if recording:
                record_state(self.db_path, facts)
        self._guard.release()
        self._guard = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def _facts_to_record(self) -> dict[str, dict] | None:
        """The facts of the collections to record with the state this close leaves (:mod:`lite_state`).

        If the folder's files are still the ones this store opened (nothing written, by it or by another store of
        this process): the facts it was given and what it asked since. Otherwise Milvus Lite is asked now, before
        its server stops: each collection it lists exists, with its properties, and its entity count when it is
        loaded (a sync loaded what it wrote; loading another would read its segments); each collection this store
        asked about or is configured with that it does not list does not exist. None when Milvus Lite cannot answer:
        the state is recorded alone, and the next writer asks."""
        if self._opened_entries is not None and not written_between(self._opened_entries, folder_entries(self.db_path)):
            facts = {name: dict(known) for name, known in self._facts.items()}
            for name, known in self._observed.items():
                facts.setdefault(name, {}).update(known)
            return facts or None
        try:
            with _quiet("pymilvus", "milvus_lite"):
                client = self.client
                listed = set(client.list_collections())
                facts: dict[str, dict] = {}
                for name in sorted(listed):
                    known = {
                        "exists": True,
                        "properties": dict(client.describe_collection(name).get("properties") or {}),
                    }
                    if "Loaded" in str(client.get_load_state(name).get("state")):
                        rows = client.query(name, filter="", output_fields=["count(*)"])
                        known["count"] = int(rows[0]["count(*)"]) if rows else 0
                    facts[name] = known
        except Exception as error:  # the state alone: the next writer asks Milvus Lite what this one could not
            log.info("%s: no facts recorded at close (%s: %s)", self.db_path, type(error).__name__, error)
            return None
        asked = {*self._facts, *self._observed, *(spec.name for spec in self.config.collections)}
        return facts | {name: {"exists": False} for name in sorted(asked - listed)} or None

    def _fact(self, name: str, key: str) -> Any:
        """A fact of collection ``name`` from the last clean close's record (:mod:`paperlake.vectors.lite_state`),
        while the client is deferred and no other store of this process has taken the lock since; else _UNKNOWN."""
        if self._client is not None or self._guard is None or self._guard.taken != self._facts_taken:
            return _UNKNOWN
        return self._facts.get(name, {}).get(key, _UNKNOWN)

    def _observe(self, name: str, key: str, value: Any) -> Any:
        self._observed.setdefault(name, {})[key] = value
        return value

    def __enter__(self) -> "VectorStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ── collections ──────────────────────────────────────────────────────────────────────────────────────────────

    def is_available(self, spec: CollectionSpec) -> bool:
        return spec.enabled and all(self.encoders.available(e) for e in spec.encoders)

    def active_specs(self) -> list[CollectionSpec]:
        """Configured collections whose encoders are available in this store."""
        return [s for s in self.config.collections if self.is_available(s)]

    def pools(self, spec: CollectionSpec) -> bool:
        """Whether the collection's dense vectors pool windows (then a page's vector depends on its chunks too)."""
        return spec.modality == "text" and any(
            v.kind == "dense" and self.config.encoders[v.encoder].long_text == "pool" for v in spec.vectors
        )

    def cell_hash(self, spec: CollectionSpec, fingerprint: str, cell: Cell) -> str:
        """The entity's ``text_hash``: what its vectors are computed from, under the collection's fingerprint."""
        return _text_hash(fingerprint, cell.pooled_key if self.pools(spec) else cell.content_key)

    def fingerprint(self, spec: CollectionSpec) -> str:
        parts = []
        for vector in spec.vectors:
            if vector.kind == "bm25":
                parts.append(f"bm25:{json.dumps(self.config.bm25_analyzer, sort_keys=True)}")
            else:
                encoder_spec = self.config.encoders[vector.encoder]
                encoder = self.encoders.get(vector.encoder)
                extra = f"@{encoder_spec.dpi}dpi" if encoder_spec.kind == "open_clip" else ""
                if getattr(encoder, "long_text", None) == "pool" and POOLING_VERSION > 1:
                    extra += f"/pooling-{POOLING_VERSION}"
                parts.append(f"{encoder_spec.kind}:{getattr(encoder, 'vector_key', encoder.cache_key)}{extra}")
        return "|".join(parts)

    def ensure_collections(
        self, specs: Iterable[CollectionSpec | str] | None = None, *, recreate: bool = False
    ) -> list[str]:
        """Make each collection exist with its schema, indexes and recorded spec, and load it; returns the names.

        Safe against concurrent writers and against a crash half-way: every piece (collection, each index, the spec
        property, the incarnation) is created only if absent, a lost creation race counts as success once the
        schema checks out, and a collection left without its indexes or properties by a killed writer is completed.
        """
        names = []
        for spec in self._specs(specs):
            if recreate and self.client.has_collection(spec.name):
                self.client.drop_collection(spec.name)
                self._loaded.discard(spec.name)
                self._partitions.pop(spec.name, None)
            schema, index_params = self._schema(spec)
            create_collection_if_absent(self.client, spec.name, schema)
            self._check_schema(spec)
            ensure_indexes(self.client, spec.name, index_params)
            properties = self.client.describe_collection(spec.name).get("properties") or {}
            missing = {}
            if SPEC_PROPERTY not in properties:
                missing[SPEC_PROPERTY] = json.dumps(self._spec_record(spec))
            if INCARNATION_PROPERTY not in properties:
                missing[INCARNATION_PROPERTY] = uuid.uuid4().hex
            if missing:
                self.client.alter_collection_properties(spec.name, properties=missing)
            self._partitions[spec.name] = set(self.client.list_partitions(spec.name))
            self.load(spec.name)
            names.append(spec.name)
        return names

    def _specs(self, specs: Iterable[CollectionSpec | str] | None) -> list[CollectionSpec]:
        if specs is None:
            return self.active_specs()
        return [self.config.collection(s) if isinstance(s, str) else s for s in specs]

    def _schema(self, spec: CollectionSpec):
        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False, description=spec.description)
        schema.add_field("id", milvus.DataType.VARCHAR, max_length=64, is_primary=True)
        schema.add_field("pdf_id", milvus.DataType.VARCHAR, max_length=64)
        schema.add_field("page_number", milvus.DataType.INT64)
        schema.add_field("table_name", milvus.DataType.VARCHAR, max_length=64)
        schema.add_field("column_name", milvus.DataType.VARCHAR, max_length=64)
        schema.add_field("primary_key", milvus.DataType.VARCHAR, max_length=256)
        text_options = {"enable_analyzer": True, "analyzer_params": self.config.bm25_analyzer} if spec.has_bm25 else {}
        schema.add_field("text", milvus.DataType.VARCHAR, max_length=self.config.text_max_bytes, **text_options)
        schema.add_field("bbox", milvus.DataType.JSON)
        schema.add_field("text_hash", milvus.DataType.VARCHAR, max_length=64)
        index_params = self.client.prepare_index_params()
        for vector in spec.vectors:
            if vector.kind == "bm25":
                schema.add_field(vector.field, milvus.DataType.SPARSE_FLOAT_VECTOR)
                schema.add_function(
                    milvus.Function(
                        name=f"{vector.field}_bm25",
                        function_type=milvus.FunctionType.BM25,
                        input_field_names=["text"],
                        output_field_names=[vector.field],
                    )
                )
            else:
                schema.add_field(
                    vector.field, milvus.DataType.FLOAT_VECTOR, dim=self.config.encoders[vector.encoder].dimension
                )
            index_params.add_index(
                vector.field, index_type=vector.index, metric_type=vector.metric, params=dict(vector.index_params)
            )
        for scalar in ("pdf_id", "table_name", "column_name", "page_number"):
            index_params.add_index(scalar, index_type="INVERTED")
        return schema, index_params

    def incarnation(self, name: str) -> str | None:
        """A token drawn when the collection was created: a collection dropped and recreated (by hand, or a new
        Milvus Lite file) has another, so sync records made against the old one no longer count. None when the
        collection does not exist."""
        if not self.exists(name):
            return None
        return self.properties(name).get(INCARNATION_PROPERTY)

    def properties(self, name: str) -> dict[str, str]:
        """The collection's properties (what paperlake records on it: spec, incarnation, indexes, sync inputs)."""
        if (known := self._fact(name, "properties")) is not _UNKNOWN:
            return dict(known)
        properties = dict(self.client.describe_collection(name).get("properties") or {})
        return dict(self._observe(name, "properties", properties))

    def _spec_record(self, spec: CollectionSpec) -> dict:
        return {
            "modality": spec.modality,
            "fingerprint": self.fingerprint(spec),
            "vectors": [
                {
                    "field": v.field,
                    "kind": v.kind,
                    "metric": v.metric,
                    "encoder": self.encoders.get(v.encoder).metadata if v.encoder else None,
                }
                for v in spec.vectors
            ],
        }

    def stored_spec(self, name: str) -> dict:
        """What ``ensure_collections`` recorded about a collection (models, fingerprint)."""
        properties = self.client.describe_collection(name).get("properties") or {}
        try:
            return json.loads(properties.get(SPEC_PROPERTY, "{}"))
        except ValueError:
            return {}

    def _check_schema(self, spec: CollectionSpec) -> None:
        fields = {f["name"]: f for f in self.client.describe_collection(spec.name)["fields"]}
        for vector in spec.vectors:
            found = fields.get(vector.field)
            if found is None:
                raise SchemaMismatchError(
                    f"collection {spec.name} has no vector field {vector.field!r}; "
                    "call ensure_collections(recreate=True) to rebuild it"
                )
            if vector.kind == "dense":
                want = self.config.encoders[vector.encoder].dimension
                have = int((found.get("params") or {}).get("dim", 0))
                if have != want:
                    raise SchemaMismatchError(
                        f"collection {spec.name}.{vector.field} is {have}-d, its spec says "
                        f"{want}-d; call ensure_collections(recreate=True) to rebuild it"
                    )
        if spec.has_bm25 and "text" in fields:
            if str((fields["text"].get("params") or {}).get("enable_analyzer", "")).lower() != "true":
                raise SchemaMismatchError(f"collection {spec.name}.text has no analyzer; recreate it")

    def exists(self, name: str) -> bool:
        """Whether collection ``name`` exists: asked of Milvus until this store has loaded it (a loaded collection
        stays, but for this store's own drop, which forgets the load; one dropped by another process fails the next
        call on it, saying so). A search asked it every time, which cost Milvus Lite as much as the search."""
        if name in self._loaded:
            return True
        if (known := self._fact(name, "exists")) is not _UNKNOWN:
            return bool(known)
        return self._observe(name, "exists", bool(self.client.has_collection(name)))

    def take_probed_count(self, name: str) -> int | None:
        """The entity count the heal probe took when this store opened, once (what is written after makes it old);
        None when there was no probe."""
        return self.probed_counts.pop(name, None)

    def load(self, name: str) -> None:
        """Load a collection once per store: a reopened Milvus Lite file starts with its collections released."""
        if name not in self._loaded:
            self.client.load_collection(name)
            self._loaded.add(name)

    def view_partition(self, name: str, table: str, column: str, create: bool = False) -> str | None:
        """The partition of a view in collection ``name`` (created on demand); None when absent and not created."""
        known = self._partitions.get(name)
        if known is None:
            known = self._partitions[name] = set(self.client.list_partitions(name))
        partition = partition_name(table, column)
        if partition not in known:
            if not create:
                known.update(self.client.list_partitions(name))
                return partition if partition in known else None
            if not self.client.has_partition(name, partition):
                try:
                    self.client.create_partition(name, partition)
                except Exception:
                    if not self.client.has_partition(name, partition):  # lost a race with another writer: fine
                        raise
            known.add(partition)
        return partition

    # ── queries ──────────────────────────────────────────────────────────────────────────────────────────────────

    def query_vector(self, encoder_name: str, query: str) -> list[float]:
        """The query's dense vector: a question searched in several views or collections is encoded once."""
        key = (encoder_name, query)
        if key not in self._query_vectors:
            self.prepare_queries([query], [encoder_name])
        return self._query_vectors[key]

    def prepare_queries(self, queries: Sequence[str], encoders: Sequence[str] | None = None) -> None:
        """Encode ``queries`` in batches ahead of their searches (an evaluation's questions, say) with the dense text
        encoders of the active collections (or ``encoders``)."""
        if encoders is None:
            texts = [spec for spec in self.active_specs() if spec.modality == "text"]
            encoders = sorted({v.encoder for spec in texts for v in spec.vectors if v.encoder})
        for name in encoders:
            todo = list(dict.fromkeys(q for q in queries if (name, q) not in self._query_vectors))
            if not todo:
                continue
            if len(self._query_vectors) + len(todo) > _QUERY_MEMO:
                self._query_vectors.clear()
            vectors = self.encoders.get(name).encode(todo)
            self._query_vectors.update(((name, q), v.tolist()) for q, v in zip(todo, vectors))

    # ── sync ─────────────────────────────────────────────────────────────────────────────────────────────────────

    def sync_paper(
        self,
        paper_id: str,
        cells: Sequence[Cell],
        collections: Iterable[CollectionSpec | str] | None = None,
        *,
        known: dict[str, dict[str, str]] | None = None,
        flush: bool = True,
    ) -> SyncReport:
        """Make the paper's entities in each collection exactly ``cells``.

        Writes new and changed cells (changed = a different ``text_hash``), skips unchanged ones without encoding,
        deletes the paper's entities whose ids are no longer present, and flushes (``flush=False``: the rows are
        kept, and the caller writes them and flushes with :meth:`flush_collection` for the collections whose stats
        say ``unflushed``, once for several papers). ``known``: per collection, the paper's entities (id →
        text_hash) as the caller's records vouch for them (``{}``: none), so the collection is not queried for them
        (a filtered query scans every entity in Milvus Lite); collections not named there are queried.
        """
        started = time.perf_counter()
        report = SyncReport(paper_id)
        foreign = {c.pdf_id for c in cells if c.pdf_id != paper_id}
        if foreign:
            raise VectorSyncError(paper_id, "collect", f"cells of other papers passed in: {sorted(foreign)[:3]}")
        for spec in self._specs(collections):
            try:
                self._load_or_create(spec)
                report.collections[spec.name] = self._sync_collection(
                    spec, paper_id, cells, (known or {}).get(spec.name), flush
                )
            except VectorSyncError:
                raise
            except Exception as error:
                raise VectorSyncError(paper_id, f"sync {spec.name}", f"{type(error).__name__}: {error}") from error
        report.seconds = time.perf_counter() - started
        return report

    def _load_or_create(self, spec: CollectionSpec) -> None:
        if spec.name not in self._loaded:
            self.ensure_collections([spec])

    def existing_hashes(self, collection: str, paper_id: str) -> dict[str, str]:
        """Entity id → text_hash of the paper's entities in ``collection``."""
        self.load(collection)
        expression = f"pdf_id == {quote_literal(paper_id)}"
        if self.count(collection, expression) == 0:  # a new paper: counting scans a third as long as fetching
            return {}
        rows = self.client.query(collection, filter=expression, output_fields=["id", "text_hash"], limit=_QUERY_LIMIT)
        if len(rows) >= _QUERY_LIMIT:
            rows = []
            iterator = self.client.query_iterator(
                collection, batch_size=4096, filter=expression, output_fields=["id", "text_hash"]
            )
            while batch := iterator.next():
                rows.extend(batch)
            iterator.close()
        return {row["id"]: row["text_hash"] for row in rows}

    def _sync_collection(
        self,
        spec: CollectionSpec,
        paper_id: str,
        cells: Sequence[Cell],
        known: dict[str, str] | None = None,
        flush: bool = True,
    ) -> CollectionSyncStats:
        stats = CollectionSyncStats(spec.name)
        fingerprint = self.fingerprint(spec)
        current: dict[str, tuple[Cell, str]] = {}
        for cell in cells:
            if spec.holds(cell):
                current[cell.entity_id] = (cell, self.cell_hash(spec, fingerprint, cell))
        stats.cells = len(current)
        existing = self.existing_hashes(spec.name, paper_id) if known is None else known
        changed = [(cell, digest) for eid, (cell, digest) in current.items() if existing.get(eid) != digest]
        stats.unchanged = len(current) - len(changed)
        stale = [eid for eid in existing if eid not in current]

        rows = self._rows(spec, changed, stats)
        started = time.perf_counter()
        by_partition: dict[tuple[str, bool], list[dict]] = defaultdict(list)
        for row in rows:
            partition = self.view_partition(spec.name, row["table_name"], row["column_name"], create=True)
            by_partition[(partition, row["id"] in existing)].append(row)
        if flush:
            self._write(spec.name, by_partition)
        else:  # written with the other papers' rows (one insert per partition, not one per paper and partition)
            unwritten = self._unwritten.setdefault(spec.name, {})
            for key, part_rows in by_partition.items():
                unwritten.setdefault(key, []).extend(part_rows)
        # this paper's ids only (every element id is named after its paper: paperlake.lake.ids), so these deletes and
        # the other papers' rows written later touch different entities
        for start in range(0, len(stale), _WRITE_BATCH):
            self.client.delete(spec.name, ids=stale[start : start + _WRITE_BATCH])
        if (rows or stale) and flush:
            self.client.flush(spec.name)
        stats.unflushed = bool(rows or stale) and not flush
        stats.upserted = len(rows)
        stats.deleted = len(stale)
        stats.write_seconds = time.perf_counter() - started
        return stats

    def _write(self, collection: str, by_partition: dict[tuple[str, bool], list[dict]]) -> None:
        for (partition, replacing), part_rows in by_partition.items():
            # an id the collection does not hold is inserted: an upsert first looks each id up (Milvus Lite: in
            # every segment), which is what made a new paper's sync grow with the collection
            write = self.client.upsert if replacing else self.client.insert
            for start in range(0, len(part_rows), _WRITE_BATCH):
                write(collection, part_rows[start : start + _WRITE_BATCH], partition_name=partition)
        fault_point("vectors.upserted")

    def flush_collection(self, collection: str) -> None:
        """Write the rows that syncs with ``flush=False`` left for ``collection`` (several papers' rows in one insert
        per partition: Milvus Lite's cost is mostly per call), then flush it."""
        self._write(collection, self._unwritten.pop(collection, {}))
        self.client.flush(collection)

    def _rows(self, spec: CollectionSpec, changed: list[tuple[Cell, str]], stats: CollectionSyncStats) -> list[dict]:
        """Entity rows for the changed cells, with dense vectors from the encoders (through the cache)."""
        if not changed:
            return []
        payloads: list[str | bytes] = []
        kept: list[tuple[Cell, str]] = []
        if spec.modality == "image":
            dpi = max(self.config.encoders[e].dpi for e in spec.encoders)
            for cell, digest in changed:
                try:
                    if not cell.pdf_path:
                        raise FileNotFoundError("the paper has no pdf_path in the warehouse")
                    payloads.append(render_region(cell.pdf_path, cell.page_number, cell.bbox, dpi=dpi))
                    kept.append((cell, digest))
                except Exception as error:
                    stats.skipped += 1
                    stats.notes.append(f"render {cell.view} {cell.primary_key} (page {cell.page_number}): {error}")
        else:
            payloads = [cell.text for cell, _ in changed]
            kept = changed
        vectors = {}
        for vector in spec.vectors:
            if vector.kind != "dense":
                continue
            encoder = self.encoders.get(vector.encoder)
            if spec.modality == "text" and getattr(encoder, "long_text", "truncate") == "pool":
                # every token encoded once: a page or section is pooled from windows encoded for the chunks it
                # holds, a reference entry or equation is a piece of its chunk's window; a column line reads its head
                result = encode_pooled(
                    encoder,
                    [cell.parts or (cell.text,) for cell, _ in kept],
                    self.cache,
                    heads=[cell.head_tokens for cell, _ in kept],
                    within=[cell.within for cell, _ in kept],
                    hosts=[cell.hosts for cell, _ in kept],
                )
            else:
                result = encode_cached(encoder, payloads, self.cache)
            vectors[vector.field] = result.vectors
            stats.encoded += result.misses
            stats.cache_hits += result.hits
            stats.encode_seconds += result.seconds
        rows = []
        for i, (cell, digest) in enumerate(kept):
            row = {
                "id": cell.entity_id,
                "pdf_id": cell.pdf_id,
                "page_number": int(cell.page_number),
                "table_name": cell.table_name,
                "column_name": cell.column_name,
                "primary_key": cell.primary_key,
                "text": cell.text if spec.modality == "text" else "",
                "bbox": list(cell.bbox) if cell.bbox else [],
                "text_hash": digest,
            }
            for name, matrix in vectors.items():
                row[name] = matrix[i].tolist()
            rows.append(row)
            if cell.note:
                stats.notes.append(f"{cell.view} {cell.primary_key}: {cell.note}")
        return rows

    def present(self, collection: str, ids: Sequence[str]) -> int:
        """How many of ``ids`` the collection holds (looked up by primary key, not by a scan)."""
        self.load(collection)
        found = 0
        for start in range(0, len(ids), _WRITE_BATCH):
            found += len(self.client.get(collection, ids=list(ids[start : start + _WRITE_BATCH]), output_fields=["id"]))
        return found

    def delete_ids(self, collection: str, ids: Sequence[str]) -> int:
        """Delete the entities ``ids`` (by primary key) and flush; returns how many ids were given."""
        self.load(collection)
        for start in range(0, len(ids), _WRITE_BATCH):
            self.client.delete(collection, ids=list(ids[start : start + _WRITE_BATCH]))
        if ids:
            self.client.flush(collection)
        return len(ids)

    def delete_paper(self, paper_id: str, collections: Iterable[CollectionSpec | str] | None = None) -> dict[str, int]:
        """Remove every entity of the paper; returns how many were deleted per collection."""
        deleted = {}
        expression = f"pdf_id == {quote_literal(paper_id)}"
        for spec in self._specs(collections):
            if not self.client.has_collection(spec.name):
                continue
            self.load(spec.name)
            count = self.count(spec.name, expression)
            if count:
                self.client.delete(spec.name, filter=expression)
                self.client.flush(spec.name)
            deleted[spec.name] = count
        return deleted

    def count(self, collection: str, expr: str = "") -> int:
        """Number of entities in ``collection`` matching the (validated) filter."""
        if not expr and (known := self._fact(collection, "count")) is not _UNKNOWN:
            return int(known)
        self.load(collection)
        rows = self.client.query(collection, filter=validate_filter(expr), output_fields=["count(*)"])
        count = int(rows[0]["count(*)"]) if rows else 0
        return self._observe(collection, "count", count) if not expr else count


def _text_hash(fingerprint: str, content_key: str) -> str:
    return hashlib.sha256(f"{fingerprint}\n{content_key}".encode("utf-8")).hexdigest()


def sync_warehouse(
    store: VectorStore,
    warehouse_con,
    encodable: Iterable[Encodable] | None = None,
    paper_ids: Sequence[str] | None = None,
    collections: Iterable[CollectionSpec | str] | None = None,
    pdf_root: str | Path | None = None,
    pooling: int | None = None,
) -> WarehouseSyncReport:
    """Sync every paper of the warehouse (or ``paper_ids``); one paper's failure is recorded, the rest go on.
    ``pooling``: an earlier pooling scheme, for side-by-side benchmarks (default: the current one)."""
    started = time.perf_counter()
    report = WarehouseSyncReport()
    cells = collect_cells(
        warehouse_con,
        encodable,
        paper_ids,
        max_text_bytes=store.config.text_max_bytes,
        pdf_root=pdf_root,
        pooling=pooling,
    )
    by_paper: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_paper[cell.pdf_id].append(cell)
    if paper_ids is not None:
        papers = [str(p) for p in paper_ids]
    else:
        rows = warehouse_con.execute("select cast(paper_id as varchar) from metadata order by 1").fetchall()
        papers = sorted({r[0] for r in rows} | set(by_paper))
    specs = store._specs(collections)
    store.ensure_collections(specs)
    for paper in papers:
        try:
            report.papers[paper] = store.sync_paper(paper, by_paper.get(paper, []), specs)
        except VectorSyncError as error:
            log.error("%s", error)
            report.failures[paper] = str(error)
    report.seconds = time.perf_counter() - started
    return report
