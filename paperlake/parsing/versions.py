"""Each parser backend's version, importable without the backend: the plan (:func:`paperlake.pipeline.needs_parse`),
the parse asset's code version and the parse-ahead worker's check compare them in processes that may parse nothing
themselves, where importing PyMuPDF's or MinerU's reader would cost ~0.6 s. Bump a backend's version here (its
module re-exports it as ``PARSER_VERSION``)."""

PYMUPDF = "pymupdf-18"
MINERU = "mineru-7"
