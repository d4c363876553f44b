"""Each parser backend's version, importable without the backend: the plan
(:func:`paperlake.lake.pipeline.needs_parse`) and the parse asset's code version compare them in processes that may
parse nothing themselves, where importing both readers would cost far more than the rest of the parse asset module's
imports. Bump a backend's version here (its module re-exports it as ``PARSER_VERSION``)."""

PYMUPDF = "pymupdf-34"
MINERU = "mineru-14"
