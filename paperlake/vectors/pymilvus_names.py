"""The pymilvus names paperlake uses, imported where a Milvus Lite file may be the configured ``MILVUS_URI``, and
only when one is first used.

pymilvus parses ``MILVUS_URI`` when it is imported and raises on a Milvus Lite file path, which is exactly what
paperlake documents ``MILVUS_URI=./data/milvus.db`` to mean. paperlake always hands the uri to the client itself
(``Settings.milvus_uri``), so pymilvus is imported here, once, with the variable hidden for the length of the import
and then put back. Every module of the library takes pymilvus's names from here.

The import is lazy (a module ``__getattr__``): ``from paperlake.vectors import pymilvus_names as milvus`` costs
nothing, and ``milvus.MilvusClient`` imports pymilvus (over half a second of a core) the first time a name is
asked for. An unchanged ingest, whose vector check is answered from the Milvus Lite folder's record
(:mod:`paperlake.vectors.lite_state`), never asks. ``from paperlake.vectors.pymilvus_names import X`` imports it at
once, as before.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

# name → the pymilvus module that defines it
_MODULES = {
    "AnnSearchRequest": "pymilvus",
    "DataType": "pymilvus",
    "Function": "pymilvus",
    "FunctionType": "pymilvus",
    "MilvusClient": "pymilvus",
    "MilvusException": "pymilvus",
    "RRFRanker": "pymilvus",
    "WeightedRanker": "pymilvus",
    "IndexParams": "pymilvus.milvus_client.index",
}

__all__ = sorted(_MODULES)


def _hidden_file_uri() -> str | None:
    uri = os.environ.get("MILVUS_URI", "")
    if not uri or "://" in uri or "pymilvus" in sys.modules:
        return None
    return os.environ.pop("MILVUS_URI")


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    uri = _hidden_file_uri()
    try:
        value = getattr(importlib.import_module(_MODULES[name]), name)
    finally:
        if uri is not None:
            os.environ["MILVUS_URI"] = uri
    globals()[name] = value  # asked once
    return value
