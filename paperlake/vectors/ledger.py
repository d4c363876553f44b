"""Which cells each collection holds for each paper: the vector stage's sync records and its definition of stale.

A paper's entities in a collection are *fresh* when they are exactly the entities its warehouse cells call for:
same ids, same ``text_hash`` (the encoder fingerprint and the encoded content). :func:`expected_digest` names that
set; a sync writes it, with the paper id and the collection's incarnation, to ``<home>/vectors/<collection>/<paper
key>.json`` only after Milvus has flushed the entities, so a record never claims a sync that did not finish. Beside
it, ``<paper key>.entities`` lists those entities (id → text_hash; the record holds its sha256).

The records are also how a sync knows what a collection holds without asking it (a filtered query or count scans
every entity in Milvus Lite, which made a paper's sync grow with the collection): before its first write a sync
leaves ``<paper key>.pending``, and removes it once the record is written. So, for one paper and collection, with no
``.pending`` marker: a record of the collection's current incarnation whose entities file matches it lists exactly
what the collection holds; no such record means the collection holds nothing of the paper (every write of this
incarnation would have left a record or a marker). A marker, or a record of this incarnation without its entities
file (an older paperlake), means a sync was cut short (or is unknown): the collection itself is asked.

:func:`stale_papers` compares the records with the warehouse (new, changed, re-identified or departed papers) and
with the collection itself: a collection dropped or recreated (another incarnation), or whose entity count differs
from what the records add up to (entities deleted by hand, a record lost), is scanned entity by entity, and the
papers whose stored entities differ from their expected ones are stale. Entities of papers that no record and no
warehouse row knows (``orphans``) are returned for deletion. Counting is a pass over the collection in Milvus Lite,
so a count that matched stands for up to ``PAPERLAKE_VECTOR_RECOUNT_HOURS`` (24) while every record it covered is
still there (:func:`_count_stands` says what that trades away).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from paperlake.lake.store import atomic_write_bytes
from paperlake.runtime.failpoints import fault_point
from paperlake.runtime.healing import set_aside
from paperlake.vectors.config import default_config_path, load_config, read_yaml
from paperlake.vectors.entities import (
    POOLING_VERSION,
    PRIMARY_KEYS,
    Cell,
    collect_cells,
    default_encodable,
    paper_filter,
)
from paperlake.warehouse.read import connect_read_only

# Bump when what a paper's entities are made of changes without the config changing (new cells, new fields).
VECTORS_CODE_VERSION = "vectors-2"


def stage_fingerprint() -> str:
    """The vector stage's code version, its active collections and what of their config shapes entities: the
    assets' code version. Search-time settings (the ``hybrid`` block) and comments do not count."""
    config = load_config()
    active = ",".join(sorted(spec.name for spec in config.active_collections()))
    raw = read_yaml(default_config_path()) or {}
    raw.pop("hybrid", None)
    canonical = json.dumps(raw, sort_keys=True, default=str)
    code = VECTORS_CODE_VERSION + (f"-pooling-{POOLING_VERSION}" if POOLING_VERSION > 1 else "")
    return hashlib.sha256(f"{code}\n{active}\n{canonical}".encode()).hexdigest()[:16]


def ledger_path(home: Path, collection: str, paper_key: str) -> Path:
    return home / "vectors" / collection / f"{paper_key}.json"


def entities_path(home: Path, collection: str, paper_key: str) -> Path:
    return home / "vectors" / collection / f"{paper_key}.entities"


def pending_path(home: Path, collection: str, paper_key: str) -> Path:
    return home / "vectors" / collection / f"{paper_key}.pending"


def pending_keys(home: Path, collection: str) -> list[str]:
    """Papers whose last sync into ``collection`` was cut short (a ``.pending`` marker is left)."""
    root = home / "vectors" / collection
    if not root.exists():
        return []
    return sorted(path.relative_to(root).with_suffix("").as_posix() for path in root.rglob("*.pending"))


def known_entities(home: Path, collection: str, paper_key: str, incarnation: str | None) -> dict[str, str] | None:
    """The paper's entities in the collection by its records (module docstring): id → text_hash, ``{}`` for
    none, or None when the records cannot vouch for them (the collection must be asked)."""
    if incarnation is None or pending_path(home, collection, paper_key).exists():
        return None
    try:
        record = json.loads(ledger_path(home, collection, paper_key).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("incarnation") != incarnation:
        return {}
    try:
        listed = entities_path(home, collection, paper_key).read_bytes()
    except OSError:
        return None
    if hashlib.sha256(listed).hexdigest() != record.get("entities_sha256"):
        return None
    try:
        entities = json.loads(listed)
    except ValueError:
        return None
    return entities if isinstance(entities, dict) else None


def read_ledger(home: Path, collection: str) -> dict[str, dict[str, Any]]:
    """paper key → its sync record; unreadable records count as missing (the paper is synced again)."""
    root = home / "vectors" / collection
    records: dict[str, dict[str, Any]] = {}
    if not root.exists():
        return records
    for path in root.rglob("*.json"):
        if path.name.startswith("."):
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            record = {}
        records[path.relative_to(root).with_suffix("").as_posix()] = record if isinstance(record, dict) else {}
    return records


def _digest(pairs: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(pairs)).encode()).hexdigest()[:32]


def expected_hashes(store: Any, collection: str, cells: Iterable[Cell]) -> dict[str, str]:
    """entity id → text_hash the paper's cells call for in ``collection``."""
    spec = store.config.collection(collection)
    fingerprint = store.fingerprint(spec)
    return {cell.entity_id: store.cell_hash(spec, fingerprint, cell) for cell in cells if spec.holds(cell)}


def expected_digest(store: Any, collection: str, cells: Iterable[Cell]) -> tuple[str, int]:
    hashes = expected_hashes(store, collection, cells)
    return _digest(f"{key}:{value}" for key, value in hashes.items()), len(hashes)


class PaperSyncError(RuntimeError):
    """Some papers of a batch could not be synced; the others were (and are recorded)."""

    def __init__(self, collection: str, failures: dict[str, str]):
        self.failures = failures
        super().__init__(f"{collection}: " + "; ".join(f"{key}: {why}" for key, why in failures.items()))


VERSIONS_TABLE = "_paperlake.content_versions"  # paper id → content version, stored with the warehouse's tables


def _content_tables(con: Any) -> list[str]:

    tables = sorted({table for table, _, _ in default_encodable()} & set(PRIMARY_KEYS))
    present = {
        name
        for (name,) in con.execute(
            "select table_name from information_schema.tables where table_schema = current_schema()"
        ).fetchall()
    }
    return [t for t in tables if t in present]


def _computed_versions(con: Any, tables: list[str], paper_ids: list[str] | None) -> dict[str, str]:
    parts: dict[str, list[str]] = {}
    for table in tables:
        column = "paper_id" if table == "metadata" else "ref_paper_id"
        where, params = paper_filter(column, paper_ids)
        query = (
            f"select cast({column} as varchar), cast(sum(hash(t)) as varchar) || ':' || count(*) "
            f"from {table} t {where} group by 1"
        )
        for paper, digest in con.execute(query, params).fetchall():
            parts.setdefault(paper, []).append(f"{table}:{digest}")
    return {paper: _digest(items) for paper, items in parts.items()}


def _stored_versions(con: Any, tables: list[str]) -> dict[str, str] | None:
    """The versions the warehouse build stored (:func:`record_content_versions`), if made over these tables."""
    try:
        rows = con.execute(f"select paper_id, version, tables from {VERSIONS_TABLE}").fetchall()
    except Exception:  # an older warehouse, or one not built by the warehouse asset
        return None
    signature = ",".join(tables)
    if any(made_over != signature for _, _, made_over in rows):
        return None
    return {paper: version for paper, version, _ in rows}


def content_versions(con: Any, paper_ids: list[str] | None = None) -> dict[str, str]:
    """paper id → a digest of every warehouse row its cells are made from (whole rows of the encodable tables, so
    the texts and what pooling reads: chunk pages, section titles, row order), computed by DuckDB from its own row
    hashes (a DuckDB upgrade that changes them only makes every paper's cells be read once more). A sync record
    keeps it: a paper whose rows and collection fingerprint are the ones recorded needs no cells collected, which
    keeps the staleness check from growing with the whole warehouse (only changed papers are read in Python).

    The warehouse build stores them beside its tables for the papers it built (:func:`record_content_versions`):
    hashing every row of the warehouse made each ingest's staleness check grow with it. Papers the stored
    versions lack (a warehouse built otherwise, another encodable set) are computed."""
    tables = _content_tables(con)
    stored = _stored_versions(con, tables)
    if stored is None:
        return _computed_versions(con, tables, paper_ids)
    wanted = list(stored) if paper_ids is None else [paper for paper in paper_ids if paper in stored]
    versions = {paper: stored[paper] for paper in wanted}
    if paper_ids is not None and (missing := [paper for paper in paper_ids if paper not in stored]):
        versions |= _computed_versions(con, tables, missing)
    return versions


def record_content_versions(con: Any, changed: list[str] | None) -> None:
    """Store :func:`content_versions` in the warehouse being built (``con``: its side file, before the swap, so the
    versions and the rows they digest are published together): every paper's after a full build (``changed`` None)
    or when none is stored yet, else those of the papers the build changed (a paper it removed loses its row)."""
    tables = _content_tables(con)
    if changed is not None and _stored_versions(con, tables) is None:
        changed = None
    con.execute("create schema if not exists _paperlake")
    con.execute(
        f"create table if not exists {VERSIONS_TABLE} (paper_id varchar primary key, version varchar, tables varchar)"
    )
    if changed is None:
        con.execute(f"delete from {VERSIONS_TABLE}")
    else:
        con.execute(f"delete from {VERSIONS_TABLE} where paper_id in (select unnest(?::varchar[]))", [changed])
    versions = _computed_versions(con, tables, changed) if changed != [] else {}
    if not versions:  # nothing built, or only papers removed
        return
    signature = ",".join(tables)
    con.executemany(
        f"insert into {VERSIONS_TABLE} values (?, ?, ?)",
        [(paper, version, signature) for paper, version in versions.items()],
    )


def sync_paper_keys(settings: Any, collection: str, paper_keys: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Make ``collection`` hold exactly the warehouse cells of each paper behind ``paper_keys`` (none, if it left
    the warehouse; the entities of the paper id it was last synced as go too), recording each paper's sync as soon
    as its entities are flushed; the store is opened once for the batch. Returns per paper what was done; raises
    :class:`PaperSyncError` naming the papers that failed, after every other paper was synced."""
    from paperlake.vectors.store import VectorStore  # deferred: pymilvus

    keys = list(paper_keys)
    identity = _warehouse_identity(settings.warehouse)  # before it is opened: see _batch_cells
    with connect_read_only(settings.warehouse) as con:
        ids = dict(
            con.execute(
                "select paper_key, paper_id::varchar from metadata where paper_key in (select unnest(?::varchar[]))",
                [keys],
            ).fetchall()
        )
        found = [ids[key] for key in keys if key in ids]
        cells = _batch_cells(settings.warehouse, identity, con, found)
        versions = content_versions(con, found) if found else {}
    # The `milvus` pool queues collection steps so that they seldom wait here; what makes writes to a Milvus Lite
    # file exclusive is the store's file lock (Dagster's SQLite storage can hand one pool slot to two runs that claim
    # it at the same instant), so the wait is long and the hold is reported.
    waited = time.time()
    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings, lock_timeout=600.0, heal=True)
    held_from = time.time()
    results: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}
    try:
        # every paper's entities are made, then written together and flushed once (Milvus Lite's cost is mostly per
        # call, a flush far more than an insert), then each paper is confirmed and recorded: until then its `.pending`
        # marker says the sync may be cut short
        written: dict[str, _Written] = {}
        for key in keys:
            try:
                paper_id = ids.get(key)
                outcome = _write_one(
                    store, settings, collection, key, paper_id, cells.get(paper_id, []), versions.get(paper_id, "")
                )
            except Exception as error:  # one paper's failure must not stop the others
                failures[key] = _one_line(error)
                continue
            if isinstance(outcome, _Written):
                written[key] = outcome
            else:
                results[key] = outcome
        try:
            if any(one.stats.unflushed for one in written.values()):
                store.flush_collection(collection)
        except Exception as error:  # nothing written is vouched for: each paper stays pending, and fails here
            failures |= {key: f"flush: {_one_line(error)}" for key in written}
            written = {}
        for key, one in written.items():
            try:
                results[key] = _confirm_one(store, settings, collection, key, one)
            except Exception as error:
                failures[key] = _one_line(error)
    finally:
        store.close()
        held_until = time.time()
    for result in results.values():
        result |= {
            "store_wait_seconds": round(held_from - waited, 3),
            "store_held_from": held_from,
            "store_held_until": held_until,
        }
    if failures:
        raise PaperSyncError(collection, failures)
    return results


def write_sync_record(
    home: Path,
    store: Any,
    collection: str,
    paper_key: str,
    paper_id: str,
    cells: list[Cell],
    content: str,
    entities: int,
    hashes: dict[str, str] | None = None,
) -> int:
    """Record that ``collection`` holds the paper's ``entities`` made from ``cells`` (whose rows have the content
    version ``content``), and list them; call only once they are flushed. ``hashes``: the cells'
    :func:`expected_hashes` in ``collection``, when the caller has them. Returns how many entities the cells call
    for."""
    if hashes is None:
        hashes = expected_hashes(store, collection, cells)
    digest = _digest(f"{key}:{value}" for key, value in hashes.items())
    listed = json.dumps(hashes, sort_keys=True).encode()
    atomic_write_bytes(entities_path(home, collection, paper_key), lambda handle: handle.write(listed))
    payload = json.dumps(
        {
            "paper_id": paper_id,
            "digest": digest,
            "entities": entities,
            "incarnation": store.incarnation(collection),
            "content": content,
            "fingerprint": store.fingerprint(store.config.collection(collection)),
            "entities_sha256": hashlib.sha256(listed).hexdigest(),
        }
    ).encode()
    atomic_write_bytes(ledger_path(home, collection, paper_key), lambda handle: handle.write(payload))
    return len(hashes)


def forget_sync(home: Path, collection: str, paper_key: str) -> None:
    """The paper left the collection: its record and list go (the record first: a list without a record vouches
    for nothing)."""
    ledger_path(home, collection, paper_key).unlink(missing_ok=True)
    entities_path(home, collection, paper_key).unlink(missing_ok=True)


def _one_line(error: Exception) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"


@dataclass
class _Written:
    """A paper whose entities a sync made (left in the store to be written with the batch's others), not yet
    flushed, confirmed or recorded (its `.pending` marker stands)."""

    paper_id: str
    cells: list[Cell]
    content: str
    known: dict[str, str] | None
    stats: Any
    seconds: float
    deleted_previous: int


def _write_one(
    store: Any, settings: Any, collection: str, paper_key: str, paper_id: str | None, cells: list[Cell], content: str
) -> _Written | dict[str, Any]:
    """The first half of a paper's sync: its entities made and its stale ones deleted (the store writes the
    entities with the batch's others at its flush), or, for a paper that left the warehouse, its removal done and
    its records gone (the result)."""
    home = settings.home
    ledger = ledger_path(home, collection, paper_key)
    try:
        previous = json.loads(ledger.read_text()).get("paper_id") if ledger.exists() else None
    except (OSError, ValueError):
        previous = None
    known = known_entities(home, collection, paper_key, store.incarnation(collection))
    pending = pending_path(home, collection, paper_key)
    atomic_write_bytes(pending, lambda handle: handle.write((paper_id or "").encode()))  # before any write
    deleted_previous = 0
    if previous and previous != paper_id:  # removed, or re-identified (new title): drop the old entities
        if known is None:
            deleted_previous = sum(store.delete_paper(previous, [collection]).values())
        else:
            deleted_previous = store.delete_ids(collection, sorted(known))
        known = {}
        fault_point("vectors.previous_deleted")
    if paper_id is None:
        forget_sync(home, collection, paper_key)
        pending.unlink(missing_ok=True)
        return {"status": "removed", "deleted": deleted_previous, "entities": 0}
    report = store.sync_paper(
        paper_id, cells, [collection], known=None if known is None else {collection: known}, flush=False
    )
    fault_point("vectors.synced")
    return _Written(paper_id, cells, content, known, report.collections[collection], report.seconds, deleted_previous)


def _confirm_one(store: Any, settings: Any, collection: str, paper_key: str, written: _Written) -> dict[str, Any]:
    """The second half, once the collection is flushed: the entities checked and the sync recorded."""
    home, paper_id, cells = settings.home, written.paper_id, written.cells
    hashes = expected_hashes(store, collection, cells)
    expected_ids = sorted(hashes)
    if written.known is None:
        entities = store.count(collection, f"pdf_id == '{paper_id}'")
    else:  # what the records vouch for, and every entity the cells call for is there (looked up by id)
        entities = store.present(collection, expected_ids)
        if entities != len(expected_ids):
            raise RuntimeError(
                f"{collection} holds {entities} of the {len(expected_ids)} entities just written for {paper_id}"
            )
    expected = write_sync_record(
        home, store, collection, paper_key, paper_id, cells, written.content, entities, hashes=hashes
    )
    pending_path(home, collection, paper_key).unlink(missing_ok=True)
    return {
        "status": "synced",
        "paper_id": paper_id,
        "entities": entities,
        "expected": expected,
        "cells": len(cells),
        "encoded": written.stats.encoded,
        "skipped_unchanged": written.stats.unchanged,
        "deleted": written.stats.deleted + written.deleted_previous,
        "seconds": round(written.seconds, 3),
    }


@dataclass
class VectorPlan:
    """What the vector stage must do: paper key → {collection: why}, and entities no paper owns any more."""

    stale: dict[str, dict[str, str]] = field(default_factory=dict)
    orphans: dict[str, list[str]] = field(default_factory=dict)  # collection → paper ids

    def mark(self, paper_key: str, collection: str, reason: str) -> None:
        self.stale.setdefault(paper_key, {}).setdefault(collection, reason)

    @property
    def empty(self) -> bool:
        return not self.stale and not any(self.orphans.values())


def _stored_hashes(store: Any, collection: str) -> dict[str, dict[str, str]]:
    """pdf id → {entity id: text_hash} of everything in the collection (the slow path, after a count mismatch)."""
    store.load(collection)
    by_paper: dict[str, dict[str, str]] = {}
    iterator = store.client.query_iterator(
        collection, batch_size=4096, filter="", output_fields=["id", "pdf_id", "text_hash"]
    )
    try:
        while batch := iterator.next():
            for row in batch:
                by_paper.setdefault(row["pdf_id"], {})[row["id"]] = row["text_hash"]
    finally:
        iterator.close()
    return by_paper


def stale_papers(settings: Any, store: Any, collections: list[str]) -> VectorPlan:
    """The vector stage's plan, from the warehouse, the sync records and the collections themselves."""

    plan = VectorPlan()
    if not settings.warehouse.exists():
        return plan
    with connect_read_only(settings.warehouse) as con:
        papers = dict(con.execute("select paper_key, paper_id::varchar from metadata").fetchall())
        versions = content_versions(con)
        records = {collection: read_ledger(settings.home, collection) for collection in collections}
        fingerprints = {
            collection: store.fingerprint(store.config.collection(collection)) for collection in collections
        }
        # a paper whose rows and fingerprint are the recorded ones has the recorded digest; the others are read
        unsure = sorted(
            {
                pid
                for collection in collections
                for key, pid in papers.items()
                if (r := records[collection].get(key) or {}).get("content") != versions.get(pid)
                or r.get("fingerprint") != fingerprints[collection]
            }
        )
        cells_by_paper = _cells_by_paper(con, unsure)
        # Milvus Lite counts by a pass over the collection (run side by side, counts take as long: its server serves
        # them one after another): a recent count that no lost record contradicts stands
        now = time.time()
        recount_hours = float(getattr(settings, "vector_recount_hours", 0.0))
        recorded = {c: sum(int(r.get("entities") or 0) for r in records[c].values()) for c in collections}
        counted: dict[str, int | None] = {}
        for collection in collections:
            incarnation = store.incarnation(collection)
            probed = store.take_probed_count(collection)
            if incarnation is None:
                counted[collection] = None
            elif probed is not None:  # counted as the store opened (it loaded the collection to check it)
                counted[collection] = probed
                _read_count_record(settings.home, collection)  # (only to set a damaged one aside)
                if probed == recorded[collection]:
                    _record_count(settings.home, collection, incarnation, records[collection], now)
            elif _count_stands(settings.home, collection, incarnation, records[collection], recount_hours, now):
                counted[collection] = recorded[collection]
            else:
                counted[collection] = store.count(collection)
                if counted[collection] == recorded[collection]:
                    _record_count(settings.home, collection, incarnation, records[collection], now)
        if any(count is not None and count != recorded[c] for c, count in counted.items()):
            # the slow path below needs every paper's cells
            cells_by_paper = _cells_by_paper(con, sorted(set(papers.values())))
    for collection in collections:
        ledger = records[collection]
        incarnation = store.incarnation(collection)

        def expected(key: str) -> str:
            paper_id = papers[key]
            if paper_id in cells_by_paper:
                return expected_digest(store, collection, cells_by_paper[paper_id])[0]
            return ledger[key]["digest"]  # its rows are the ones recorded: so is its digest

        for key, paper_id in papers.items():
            record = ledger.get(key)
            if record is None:
                plan.mark(key, collection, "never synced")
            elif not record:
                plan.mark(key, collection, "its sync record cannot be read")
            elif record.get("paper_id") != paper_id:
                plan.mark(key, collection, "the file now holds another paper")
            elif incarnation is None or record.get("incarnation") != incarnation:
                plan.mark(key, collection, "the collection was dropped or recreated")
            elif record.get("digest") != expected(key):
                plan.mark(key, collection, "its cells changed")
        for key in ledger.keys() - papers.keys():
            plan.mark(key, collection, "left the warehouse")
        for key in pending_keys(settings.home, collection):
            plan.mark(key, collection, "a sync of it was cut short" if key in papers else "left the warehouse")
        if incarnation is None:
            continue
        if counted[collection] == recorded[collection]:
            continue
        # Entities that no record explains: compare every paper's stored entities with its expected ones.
        stored = _stored_hashes(store, collection)
        owners = {pid: key for key, pid in papers.items()}
        for key, paper_id in papers.items():
            hashes = stored.get(paper_id, {})
            if _digest(f"{k}:{v}" for k, v in hashes.items()) != expected(key):
                plan.mark(key, collection, "its stored entities differ from its cells")
                # its records no longer vouch for what the collection holds: its sync will ask the collection
                entities_path(settings.home, collection, key).unlink(missing_ok=True)
        departed = {ledger[k].get("paper_id") for k in ledger.keys() - papers.keys()}
        plan.orphans[collection] = sorted(pid for pid in stored if pid not in owners and pid not in departed)
    return plan


def count_record_path(home: Path, collection: str) -> Path:
    return home / "vectors" / collection / ".counted.json"


def _record_count(home: Path, collection: str, incarnation: str, ledger: dict[str, dict], now: float) -> None:
    """The collection was just counted and held what its records add up to: note when, and which papers' records
    made up that sum."""
    payload = json.dumps({"incarnation": incarnation, "counted_at": now, "papers": sorted(ledger)}).encode()
    try:
        atomic_write_bytes(count_record_path(home, collection), lambda handle: handle.write(payload))
    except OSError:  # a home this check may only read: the next check counts again
        pass


def _read_count_record(home: Path, collection: str) -> Any:
    """The collection's count record, or None; a damaged one is set aside (the collection is counted again, and the
    record rewritten if the count holds)."""
    path = count_record_path(home, collection)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        with contextlib.suppress(OSError):
            set_aside(path, f"{type(error).__name__}: {error}")
        return None


def _count_stands(
    home: Path, collection: str, incarnation: str, ledger: dict[str, dict], recount_hours: float, now: float
) -> bool:
    """Whether the last count of ``collection`` still vouches for it, so :func:`stale_papers` need not count again:
    it matched the records, was made less than ``recount_hours`` ago in this incarnation, and every paper whose
    record it covered still has one.

    What changed the collection since was a sync, and each sync checks the entities it wrote before writing its
    record (``present`` by id, or a count of the paper) and leaves a ``.pending`` marker while it runs: so the records'
    sum still stands for the collection. A record gone since (a paper removed, or a record lost by hand) could hide
    entities no record explains: then the collection is counted. What this trades away is noticing, until the next
    count, entities inserted or deleted in Milvus by hand; ``PAPERLAKE_VECTOR_RECOUNT_HOURS=0`` counts every time."""
    if recount_hours <= 0:
        return False
    record = _read_count_record(home, collection)
    if not isinstance(record, dict) or record.get("incarnation") != incarnation:
        return False
    counted_at, papers = record.get("counted_at"), record.get("papers")
    if not isinstance(counted_at, (int, float)) or not 0 <= now - counted_at < recount_hours * 3600:
        return False
    return isinstance(papers, list) and set(papers) <= ledger.keys()


# The cells of the last batch read, with the warehouse file they were read from: a run syncs each of its
# collections for the same papers, one step after another, from the same warehouse.
_BATCH_CELLS: list[tuple[tuple, dict[str, list[Cell]]]] = []
_BATCH_CELLS_LOCK = threading.Lock()


def _warehouse_identity(warehouse: Path) -> tuple | None:
    try:
        stat = warehouse.stat()  # a build is swapped in by a rename: a new inode, a new file
    except OSError:  # opening it says what is wrong
        return None
    return (str(warehouse.resolve()), stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _batch_cells(warehouse: Path, identity: tuple | None, con: Any, paper_ids: list[str]) -> dict[str, list[Cell]]:
    """:func:`_cells_by_paper`, read once for the collections of one batch. ``identity`` is the warehouse file's
    from before ``con`` opened it; the cells are kept only if it is still the same after they were read (a build
    swapped in meanwhile could have been the file read)."""
    encodable = tuple(tuple(column) for column in default_encodable())
    key = (identity, tuple(paper_ids), encodable)
    with _BATCH_CELLS_LOCK:
        if _BATCH_CELLS and _BATCH_CELLS[0][0] == key:
            return {paper: list(cells) for paper, cells in _BATCH_CELLS[0][1].items()}
    cells = _cells_by_paper(con, paper_ids)
    if identity is not None and _warehouse_identity(warehouse) == identity:
        with _BATCH_CELLS_LOCK:
            _BATCH_CELLS[:] = [(key, {paper: list(found) for paper, found in cells.items()})]
    return cells


def _cells_by_paper(con: Any, paper_ids: list[str]) -> dict[str, list[Cell]]:
    cells: dict[str, list[Cell]] = {paper: [] for paper in paper_ids}
    for cell in collect_cells(con, default_encodable(), paper_ids) if paper_ids else []:
        cells[cell.pdf_id].append(cell)
    return cells


def delete_orphans(store: Any, plan: VectorPlan) -> int:
    """Delete the entities of papers that neither the warehouse nor any sync record knows (a store edited by hand)."""
    deleted = 0
    for collection, paper_ids in plan.orphans.items():
        for paper_id in paper_ids:
            deleted += store.delete_paper(paper_id, [collection]).get(collection, 0)
    return deleted
