"""Each parser backend's version, importable without the backend: the plan (:func:`paperlake.pipeline.needs_parse`),
the parse asset's code version and the parse-ahead worker's check compare them in processes that may parse nothing
themselves, where importing both readers cost ~0.5 s (the parse asset module: 541 -> 30 ms of imports). Bump a
backend's version here (its module re-exports it as ``PARSER_VERSION``)."""

PYMUPDF = "pymupdf-18"
MINERU = "mineru-7"
