"""paperlake: the pure library behind the pipeline and the agent (no Dagster imports here)."""

import os as _os
import sys as _sys

__version__ = "0.1.0"


def _import_pymilvus_despite_a_file_uri() -> None:
    """pymilvus parses ``MILVUS_URI`` when it is imported and raises on a Milvus Lite file path, which is exactly what
    paperlake documents ``MILVUS_URI=./data/milvus.db`` to mean. paperlake always passes the uri to the client itself
    (``Settings.milvus_uri``), so pymilvus is imported once with the variable hidden and then restored."""
    uri = _os.environ.get("MILVUS_URI", "")
    if not uri or "://" in uri or "pymilvus" in _sys.modules:
        return
    del _os.environ["MILVUS_URI"]
    try:
        import pymilvus  # noqa: F401
    finally:
        _os.environ["MILVUS_URI"] = uri


_import_pymilvus_despite_a_file_uri()
