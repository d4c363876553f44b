"""What a Milvus Lite folder looked like when a writer last closed it cleanly, so the next writer can skip its probe.

A writer (:class:`~paperlake.vectors.store.VectorStore` with ``heal=True``) proves a Milvus Lite folder readable by
describing, loading and counting every collection: about 0.05 s a collection on the sample, most of an ingest with
nothing to do. Once it has proved the folder (or trusted it, below) and closed it without an error in flight, its
server stopped and every file written, it records the folder's *state*: each entry's path, type, size and
modification time, hashed. The next writer compares the folder with that record before Milvus Lite opens it; equal
means no byte changed since a clean close, so the probe is skipped. Anything that touches a file (a crash in the
middle of a write, a disk error repaired by hand, a copy cut short, a file replaced by a folder) changes its size or
time, and the folder is probed again. A record that cannot be read counts as none.

What this trades away is noticing a change that keeps every size and time (bits flipped in place by the disk
itself); the collections' counts are still checked against the sync records, by the count record's rule
(:func:`paperlake.vectors.ledger.stale_papers`).

The record also keeps the *facts* of the folder's collections (whether each exists, its properties, its entity
count). A writer that wrote nothing records what it learned (the folder's files at close are the ones it opened); a
writer that wrote asks Milvus Lite just before its server stops, and records what it says: what the clean stop
leaves on disk. A writer that finds the folder as recorded answers those questions from the record and starts no
Milvus Lite server (nor imports pymilvus) until it is asked something else: what makes an unchanged ingest's vector
check cost milliseconds instead of seconds, the first one after an ingest that wrote included. The facts belong to
the state they were recorded with; when Milvus Lite cannot answer at close, the state is recorded alone and the next
writer asks again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path

from paperlake.runtime.healing import is_set_aside, set_aside
from paperlake.vectors.server import MILVUS_LITE_LOCK

RECORD_SUFFIX = ".verified"


def record_path(db_path: Path) -> Path:
    """``<db>.verified``, beside the folder (Milvus Lite keeps the folder to itself)."""
    return db_path.with_name(db_path.name + RECORD_SUFFIX)


def folder_entries(db_path: Path) -> dict[str, list[int]] | None:
    """Each entry of the folder (relative path → type, size, modification time), or None without a folder.
    Milvus Lite's own lock file and anything set aside are left out: taking the lock touches nothing else."""
    if not db_path.is_dir() or db_path.is_symlink():
        return None
    entries = {}
    for root, dirs, files in os.walk(db_path):
        dirs.sort()
        relative = os.path.relpath(root, db_path)
        for name in sorted(dirs + files):
            if (relative == "." and name == MILVUS_LITE_LOCK) or is_set_aside(Path(name)):
                continue
            info = os.lstat(os.path.join(root, name))
            size = 0 if stat.S_ISDIR(info.st_mode) else info.st_size
            entries[os.path.join(relative, name)] = [stat.S_IFMT(info.st_mode), size, info.st_mtime_ns]
    return entries


def folder_state(db_path: Path, entries: dict[str, list[int]] | None = None) -> str | None:
    """The folder's state: a sha256 over its :func:`folder_entries` (given, or read now), or None without a folder."""
    entries = folder_entries(db_path) if entries is None else entries
    if entries is None:
        return None
    return hashlib.sha256(json.dumps(sorted(entries.items())).encode()).hexdigest()


def written_between(before: dict[str, list[int]] | None, after: dict[str, list[int]] | None) -> list[str]:
    """Files that appeared or changed from ``before`` to ``after`` (folders left out)."""
    if before is None or after is None:
        return []
    return sorted(k for k, v in after.items() if not stat.S_ISDIR(v[0]) and before.get(k) != v)


def _record(db_path: Path) -> dict:
    """The record the last clean close wrote, or {} (none, or one that cannot be read: a folder in its place is set
    aside, so the next close can write it)."""
    path = record_path(db_path)
    if os.path.lexists(path) and not path.is_file():
        with contextlib.suppress(OSError):
            set_aside(path, "not a file")
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def recorded_state(db_path: Path) -> str | None:
    """The state the last clean close recorded, or None."""
    state = _record(db_path).get("state")
    return state if isinstance(state, str) else None


def recorded_facts(db_path: Path, state: str | None) -> dict[str, dict] | None:
    """Collection → the facts recorded with ``state`` (see the module docstring), or None: no facts, or recorded
    with another state."""
    record = _record(db_path)
    facts = record.get("facts")
    if state is None or record.get("state") != state or not isinstance(facts, dict):
        return None
    return {name: dict(known) for name, known in facts.items() if isinstance(known, dict)}


def record_state(db_path: Path, facts: dict[str, dict] | None = None) -> None:
    """Record the folder's state now (its server stopped), and the facts of its collections the closing writer
    gives (``facts``). A home this process may only read keeps no record."""
    from paperlake.lake.store import atomic_write_bytes  # deferred: polars and pyarrow, which a reader needs not

    state = folder_state(db_path)
    if state is None:
        return
    payload = json.dumps({"state": state} | ({"facts": facts} if facts else {}), sort_keys=True).encode()
    with contextlib.suppress(OSError):
        atomic_write_bytes(record_path(db_path), lambda handle: handle.write(payload))


def forget_state(db_path: Path) -> None:
    """Drop the record (the folder was set aside: its successor is probed by its first writer)."""
    with contextlib.suppress(OSError):
        record_path(db_path).unlink(missing_ok=True)
