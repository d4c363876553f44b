"""The pymilvus names paperlake uses, imported where a Milvus Lite file may be the configured ``MILVUS_URI``.

pymilvus parses ``MILVUS_URI`` when it is imported and raises on a Milvus Lite file path, which is exactly what
paperlake documents ``MILVUS_URI=./data/milvus.db`` to mean. paperlake always hands the uri to the client itself
(``Settings.milvus_uri``), so pymilvus is imported here, once, with the variable hidden for the length of the import
and then put back. Every module of the library takes pymilvus's names from here, so only code that uses Milvus pays
for it (importing ``paperlake`` alone does not import pymilvus).
"""

from __future__ import annotations

import os
import sys


def _hidden_file_uri() -> str | None:
    uri = os.environ.get("MILVUS_URI", "")
    if not uri or "://" in uri or "pymilvus" in sys.modules:
        return None
    return os.environ.pop("MILVUS_URI")


_uri = _hidden_file_uri()
try:
    from pymilvus import (
        AnnSearchRequest,
        DataType,
        Function,
        FunctionType,
        MilvusClient,
        MilvusException,
        RRFRanker,
        WeightedRanker,
    )
    from pymilvus.milvus_client.index import IndexParams
finally:
    if _uri is not None:
        os.environ["MILVUS_URI"] = _uri

__all__ = [
    "AnnSearchRequest",
    "DataType",
    "Function",
    "FunctionType",
    "IndexParams",
    "MilvusClient",
    "MilvusException",
    "RRFRanker",
    "WeightedRanker",
]
