"""Encode ahead: the windows the vector stage will ask for, encoded while the stages before it run.

The vector stage reads its cells from the warehouse, so it cannot start before dbt has built it; but the texts of
those cells are in the lake as soon as a paper is parsed. Parsing, dbt and the formula graph keep about one core
busy (PyMuPDF and sympy are single-threaded, dbt is mostly start-up), so on a 2-core machine half of it idles for
most of an ingest while the encoder, which uses every core, waits for them. :class:`EncodeAhead` is a few threads
(one per core, up to the encoder's lanes), each encoding single-threaded and taking whole papers, that take each
paper's cells as soon as it is parsed, from its views in memory
(:func:`offer_parsed`, called by the parse step in the ingest's process: :func:`parsed_cells`), or once it is
published, from the lake (:meth:`EncodeAhead.submit`: :func:`lake_cells`), under the warehouse's table and column
names, through the vector stage's own :func:`~paperlake.vectors.entities.collect_cells`; it puts the vectors of
their windows into the embedding cache, which is content-addressed: the vector stage then finds them there. Taking
a paper from memory starts the encoder while the rest of its run is parsed, instead of after the run; at most
``_IN_MEMORY`` parsed papers wait in memory, the others are read from the lake.

Nothing here is a store: a window encoded ahead that the stage does not ask for costs time, never correctness, and
the threads are stopped before the stage starts (they would compete with the stage's own encoder for the cores). A
failure is recorded and ends the threads; the stage encodes what is missing.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import duckdb

from paperlake.lake.store import CONTRACT_DIR
from paperlake.lake.views import VIEWS, ParsedPaper, to_arrow
from paperlake.vectors.entities import Cell, collect_cells, default_encodable

log = logging.getLogger(__name__)

# warehouse table -> (lake view, the select that gives the lake's rows the warehouse's column names). The marts
# (dbt_project/models/marts) rename the paper, page and table references and fill LLM columns later; the equations
# mart takes the LaTeX, else the text. A mart that drifts from this only makes the stage encode what was not
# encoded ahead (tests/integration/test_vectors.py compares the two on the sample).
LAKE_AS_WAREHOUSE: dict[str, tuple[str, str]] = {
    "metadata": ("metadata", "*, null::varchar as tldr"),
    "pages": ("pages", "*, paper_id as ref_paper_id, null::varchar as page_summary"),
    "sections": ("sections", "*, paper_id as ref_paper_id, null::varchar as section_summary"),
    "chunks": ("chunks", "*, paper_id as ref_paper_id, page_id as ref_page_id"),
    "tables": ("tables", "*, paper_id as ref_paper_id, page_id as ref_page_id, null::varchar as table_summary"),
    "images": ("images", "*, paper_id as ref_paper_id, page_id as ref_page_id, null::varchar as image_summary"),
    "equations": (
        "equations",
        "*, paper_id as ref_paper_id, page_id as ref_page_id, "
        "coalesce(nullif(trim(equation_latex), ''), equation_text) as equation_content",
    ),
    "reference": ("references", "*, paper_id as ref_paper_id, page_id as ref_page_id"),
    "table_rows": (
        "table_rows",
        "*, table_id as ref_table_id, paper_id as ref_paper_id, page_id as ref_page_id, null::varchar as row_summary, "
        "array_to_string(row_header_path, ' > ') as row_header",
    ),
    "table_columns": (
        "table_columns",
        "*, table_id as ref_table_id, paper_id as ref_paper_id, page_id as ref_page_id, "
        "null::varchar as column_summary, array_to_string(column_header_path, ' > ') as column_header",
    ),
}
# windows per encode call, which is what the thread finishes after it is asked to stop: the vector stage waits for
# it (one core idle), so a small batch makes a short wait (32 made it several times longer). The single-threaded
# encoder is no slower for it: a smaller batch's attention scores stay in cache.
_BATCH = 8
# how much nicer the thread is than the ingest (Linux: per thread): the stages on the ingest's way to a queryable
# warehouse (the parse and its gate, dbt, the formula graph) get the cores first, the encoder what they leave; what it
# has not encoded when the vector stage starts, that stage encodes on every core. In alternated cold ingests of a
# small volume this shortened both the warehouse stage and the whole ingest.
_NICENESS = 10
_IN_MEMORY = 4  # parsed papers waiting in memory at most (a paper's views: a few MB to a few tens of MB)


def lake_cells(lake_root: Path, paper_keys: Iterable[str]) -> list[Cell]:
    """The text cells the warehouse will hold for ``paper_keys``, read from their lake files."""
    keys = list(paper_keys)

    def source(con: duckdb.DuckDBPyConnection, view: str) -> str | None:
        files = [lake_root / view / CONTRACT_DIR / "schema.parquet"]  # the columns, even with no paper's file
        files += [path for key in keys if (path := lake_root / view / f"{key}.parquet").exists()]
        if not files[0].exists():
            return None
        paths = ", ".join("'" + str(path).replace("'", "''") + "'" for path in files)
        return f"read_parquet([{paths}], union_by_name=true)"

    return _cells_from(source)


def parsed_cells(parsed: ParsedPaper) -> list[Cell]:
    """The text cells the warehouse will hold for one parsed paper, read from its views in memory: what
    :func:`lake_cells` reads once the paper is published (the lake files are these views, written as they are)."""
    tables = {view: to_arrow(view, parsed.rows(view)) for view in VIEWS}

    def source(con: duckdb.DuckDBPyConnection, view: str) -> str | None:
        if view not in tables:
            return None
        con.register(f"parsed_{view}", tables[view])
        return f'"parsed_{view}"'

    return _cells_from(source)


def _cells_from(source: Callable[[duckdb.DuckDBPyConnection, str], str | None]) -> list[Cell]:
    """The encodable text cells of the lake views that ``source`` names (the relation to select from, or None for a
    view it does not have), under the warehouse's table and column names."""
    encodable = [(t, c, k) for t, c, k in default_encodable() if k == "text" and t in LAKE_AS_WAREHOUSE]
    with duckdb.connect() as con:
        for table in sorted({t for t, _, _ in encodable}):
            view, select = LAKE_AS_WAREHOUSE[table]
            relation = source(con, view)
            if relation is None:
                encodable = [e for e in encodable if e[0] != table]
                continue
            con.execute(f'create view "{table}" as select {select} from {relation}')
        return collect_cells(con, encodable)


@dataclass
class AheadStats:
    papers: int = 0
    windows: int = 0  # encoded ahead (not in the cache before)
    cached: int = 0  # already in the cache
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


class EncodeAhead:
    """Background threads that encode the windows of papers as they are parsed (:meth:`offer`, from memory) or
    published (:meth:`submit`, from the lake) until :meth:`close`: ``lanes`` of them (default: one per core, at
    most the encoder's :data:`~paperlake.vectors.encoders.MAX_LANES`; one on a GPU), each with ``threads`` ONNX
    threads and all nicer than the ingest, so they take what the stages before the vector stage leave of the cores.
    A second thread encodes more windows ahead, and the vector stage is shorter for it (alternated cold ingests)."""

    def __init__(
        self, lake_root: Path, cache_path: Path, *, threads: int = 1, device: str = "cpu", lanes: int | None = None
    ):
        from paperlake.vectors.config import load_config
        from paperlake.vectors.encoders import MAX_LANES, EmbeddingCache, EncoderRegistry, cpu_cores

        self.lake_root = lake_root
        config = load_config()
        dense = [
            (vector.encoder, spec)
            for spec in config.active_collections()
            if spec.modality == "text"
            for vector in spec.vectors
            if vector.kind == "dense"
        ]
        names = sorted({name for name, _ in dense})
        registry = EncoderRegistry(config, device=device, threads=threads)
        self.encoders = [registry.get(name) for name in names]
        # per encoder, the collections it encodes for: a cell none of them holds is not encoded
        self._specs = {name: [spec for n, spec in dense if n == name] for name in names}
        self.cache = EmbeddingCache(cache_path)
        self.stats = AheadStats()
        self._queue: queue.Queue[list[str] | ParsedPaper | None] = queue.Queue()
        self._offered: set[str] = set()  # papers taken from memory (:meth:`offer`): submit() skips them
        # papers held in memory while they wait for the thread: bounded, so a long ingest whose parse outruns the
        # encoder does not hold every parsed paper; a paper offered past the bound is read from the lake later
        self._memory_slots = threading.BoundedSemaphore(_IN_MEMORY)
        self._stop = threading.Event()
        self._stats_lock = threading.Lock()
        # one thread per lane, each taking whole papers (a session runs calls from several threads at once)
        count = lanes or (min(cpu_cores(), MAX_LANES) if device != "cuda" else 1)
        self._threads = [
            threading.Thread(target=self._run, name=f"paperlake-encode-ahead-{n}", daemon=True) for n in range(count)
        ]
        for thread in self._threads:
            thread.start()
        with _LISTENING_LOCK:
            _LISTENING.append(self)

    def submit(self, paper_keys: Iterable[str]) -> None:
        """Encode these published papers' windows, read from their lake files (a paper already :meth:`offer`-ed is
        skipped: its files are the views it was offered with)."""
        keys = [key for key in paper_keys if key not in self._offered]
        if keys and not self._stop.is_set():
            self._queue.put(keys)

    def offer(self, parsed: ParsedPaper) -> None:
        """Encode a paper's windows from its views in memory, as soon as it is parsed: before the quality gate and
        the rest of its run, so the encoder starts while the run's other papers are parsed. A paper the gate then
        refuses cost encoder time, never correctness (nothing encoded here is a store)."""
        if self._stop.is_set() or not self._memory_slots.acquire(blocking=False):
            return
        self._offered.add(parsed.paper_key)
        # a snapshot of the row lists: the thread reads them while the run goes on
        snapshot = ParsedPaper(
            parsed.paper_id, parsed.paper_key, parsed.backend, {v: list(r) for v, r in parsed.views.items()}
        )
        self._queue.put(snapshot)

    def close(self, finish: bool = False) -> AheadStats:
        """Stop after the batch of windows being encoded (``finish``: after every paper submitted), and wait for the
        thread."""
        with _LISTENING_LOCK:
            if self in _LISTENING:
                _LISTENING.remove(self)
        if not finish:
            self._stop.set()
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
        self.cache.close()
        return self.stats

    def _run(self) -> None:
        try:  # relative to the ingest's own niceness (one started with `nice` stays below the rest of the machine)
            thread = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, thread, min(os.getpriority(os.PRIO_PROCESS, thread) + _NICENESS, 19))
        except (AttributeError, OSError):  # no per-thread priority here: the thread competes as an equal
            pass
        try:
            while not self._stop.is_set():
                item = self._queue.get()
                if item is None:
                    break
                started = time.perf_counter()
                try:
                    if isinstance(item, ParsedPaper):
                        cells = parsed_cells(item)
                        self._memory_slots.release()  # the views are read: the slot is free while the windows encode
                        self._encode(cells)
                    else:
                        self._encode(lake_cells(self.lake_root, item))
                except Exception as error:  # never the ingest's failure: the vector stage encodes what is missing
                    with self._stats_lock:
                        self.stats.errors.append(f"{type(error).__name__}: {' '.join(str(error).split())[:300]}")
                    log.warning("encode ahead stopped: %s", self.stats.errors[-1])
                    self._stop.set()  # nothing more is queued (nor held in memory) for threads that have ended
                    break
                finally:
                    with self._stats_lock:
                        self.stats.seconds += time.perf_counter() - started
                with self._stats_lock:
                    self.stats.papers += 1 if isinstance(item, ParsedPaper) else len(item)
        finally:
            self.cache.close()  # this thread's connection

    def _encode(self, cells: list[Cell]) -> None:
        from paperlake.vectors.encoders import Window, missing_runs, pooled_windows, run_windows

        for name, encoder in zip(sorted(self._specs), self.encoders):
            held = [c for c in cells if any(spec.holds(c) for spec in self._specs[name])]
            if getattr(encoder, "long_text", "truncate") == "pool":
                windows = [
                    w for c in held for w in pooled_windows(encoder, c.parts or (c.text,), c.head_tokens, c.within)
                ]
            else:
                windows = [Window(c.text, 1) for c in held]
            windows = list({w.key: w for w in windows}.values())
            cached = self.cache.get_many(encoder.cache_key, [w.key for w in windows])
            # by length, as the encoder batches: a batch of similar lengths pads little; a chunk's window and the
            # pieces of it wanted by reference entries and equations are one run
            todo = sorted(missing_runs(windows, cached), key=lambda run: len(run.text))
            with self._stats_lock:
                self.stats.cached += len(windows) - sum(1 for w in windows if w.key not in cached)
            for start in range(0, len(todo), _BATCH):
                if self._stop.is_set():
                    return
                batch = todo[start : start + _BATCH]
                self.cache.put_many(encoder.cache_key, run_windows(encoder, batch))
                with self._stats_lock:
                    self.stats.windows += len(batch)


# The encode-ahead threads of this process that take parsed papers from memory (:func:`offer_parsed`): the ingest's
# own, while its parse runs execute in its process (the in-process executor); a step in another process finds none.
_LISTENING: list[EncodeAhead] = []
_LISTENING_LOCK = threading.Lock()


def offer_parsed(parsed: ParsedPaper) -> None:
    """Hand a freshly parsed paper to this process's encode-ahead threads, if any (a no-op otherwise)."""
    with _LISTENING_LOCK:
        listening = list(_LISTENING)
    for ahead in listening:
        ahead.offer(parsed)
