"""Stores that heal: a derived file that cannot be read is set aside and rebuilt from its source by the same run.

Every store under ``PAPERLAKE_HOME`` is derived from something else (the warehouse from the lake, the vectors from
the warehouse, the caches from the encoders, the probes from the warehouse...), so damage (a disk error, an
interrupted copy, a file replaced by hand) never needs a person: the file is renamed to
``<name>.damaged-<UTC time>`` beside itself (kept for a post-mortem; a directory where a file belongs is moved the
same way), the run says so in one line, and the store's own staleness rule (:mod:`paperlake.freshness`) finds it
missing and rebuilds it. A cache is only ever a cache: damage means recomputing, never failing.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

log = logging.getLogger(__name__)

DAMAGED_SUFFIX = ".damaged-"


@dataclass(frozen=True)
class SetAside:
    """One damaged file moved out of the way, and why."""

    path: Path
    moved_to: Path
    reason: str

    def line(self) -> str:
        return f"{self.path} could not be read ({self.reason}); set aside as {self.moved_to.name}, rebuilt"


def set_aside(path: Path, reason: str) -> SetAside:
    """Rename ``path`` (file, link or directory) to ``<name>.damaged-<UTC time>`` beside it, and log one line."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}{DAMAGED_SUFFIX}{stamp}")
    os.replace(path, target)
    moved = SetAside(path, target, " ".join(reason.split())[:300])
    log.warning("%s", moved.line())
    return moved


def open_lock_file(path: Path) -> int:
    """A descriptor on the lock file ``path`` for ``fcntl.flock``, made if missing. A lock file holds no data, so
    anything else found under its name (a folder, a socket) is set aside and a new file made: damage to a lock never
    blocks its store."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(path) and not path.is_file():
        set_aside(path, "a lock file's name taken by something that is not a file")
    return os.open(path, os.O_CREAT | os.O_RDWR, 0o644)


def is_set_aside(path: Path) -> bool:
    return DAMAGED_SUFFIX in path.name


class StoreUnreadable(RuntimeError):
    """A reader met a damaged store: the message names it and says that the next ingest rebuilds it."""

    def __init__(self, what: str, path: Path, reason: str) -> None:
        super().__init__(
            f"the {what} at {path} cannot be read ({' '.join(reason.split())[:200]}); "
            "`paperlake ingest` sets it aside and rebuilds it"
        )
        self.path = path


def sqlite_problem(path: Path) -> str | None:
    """Why SQLite cannot read ``path`` (a quick integrity check), or None (None too when it is missing)."""
    if not os.path.lexists(path):
        return None
    if not path.is_file():
        return "not a file"
    if path.stat().st_size == 0:  # SQLite reads it as a database without tables, which its owner does not make
        return "empty: no database in it"
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, timeout=30)  # no journal made
        try:
            verdict = con.execute("pragma quick_check").fetchone()
        finally:
            con.close()
    except sqlite3.Error as error:
        return f"{type(error).__name__}: {error}"
    return None if verdict and verdict[0] == "ok" else f"integrity check: {verdict[0] if verdict else 'no answer'}"


def heal_sqlite(paths: list[Path]) -> list[SetAside]:
    """Each SQLite file that cannot be read set aside, with its journal files (its owner makes a new one)."""
    moved = []
    for path in paths:
        problem = sqlite_problem(path)
        if problem:
            moved.append(set_aside(path, problem))
            for journal in (path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal")):
                if os.path.lexists(journal):
                    moved.append(set_aside(journal, f"the journal of {path.name}"))
    return moved
