"""paperlake: the pure library behind the pipeline and the agent (no Dagster imports here)."""

import os
import sys

from paperlake.config import pymupdf_layout_wanted

__version__ = "0.1.0"

# PyMuPDF 2.0 imports its bundled layout package (``pymupdf.layout``) whenever it can, and that import loads an ONNX
# layout model: CPU time and memory in every process that imports pymupdf (the ingest, its parse
# workers, the agent). paperlake's parser never asks for it (tables are found by line detection inside caption
# regions, ``find_tables(use_layout=False)``; text extraction does not read it), so it is kept out unless
# PAPERLAKE_PYMUPDF_LAYOUT=1. Code that wants the model calls :func:`allow_pymupdf_layout`, then imports it.
_LAYOUT_MODULE = "pymupdf.layout"
if not pymupdf_layout_wanted() and "pymupdf" not in sys.modules:
    sys.modules.setdefault(_LAYOUT_MODULE, None)  # `import pymupdf.layout` then raises ImportError, which pymupdf skips
    # ... and would then print, once, on stdout, that the layout package is worth installing
    os.environ.setdefault("PYMUPDF_SUGGEST_LAYOUT_ANALYZER", "0")


def allow_pymupdf_layout() -> None:
    """Let ``import pymupdf.layout`` load PyMuPDF's layout model (it activates itself on import)."""
    if sys.modules.get(_LAYOUT_MODULE, ...) is None:
        del sys.modules[_LAYOUT_MODULE]
