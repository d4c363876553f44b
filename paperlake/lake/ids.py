"""Deterministic identifiers.

Every id is a uuid5 of a stable name, so re-parsing the same paper produces the same ids and every write is an
idempotent upsert. The paper id follows the AirQA rule so the dataset's ``anchor_pdf`` ids match ours.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

_NON_ALNUM = re.compile(r"[^a-z0-9]")


def normalise_title(title: str) -> str:
    """Lower-case the title and drop every character outside ``[a-z0-9]`` (AirQA)."""
    return _NON_ALNUM.sub("", title.lower())


def venue_key(conference: str | None, year: int | str | None) -> str:
    """``acl2023``-style venue key; ``uncategorized`` when unknown."""
    if not conference:
        return "uncategorized"
    key = _NON_ALNUM.sub("", f"{conference}{year or ''}".lower())
    return key or "uncategorized"


def paper_id(title: str, venue: str) -> str:
    """AirQA paper id: uuid5(NAMESPACE_DNS, normalised title + '-' + venue)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{normalise_title(title)}-{venue}"))


def element_id(paper: str, kind: str, *parts: object) -> str:
    """Id of an element of a paper, e.g. ``element_id(pid, "page", 3)`` = uuid5 of ``"{pid}_page_3"``."""
    name = "_".join([paper, kind, *(str(p) for p in parts)])
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, name))


def page_id(paper: str, page_number: int) -> str:
    return element_id(paper, "page", page_number)


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_size), b""):
            digest.update(block)
    return digest.hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
