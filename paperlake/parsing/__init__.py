"""PDF parsing backends (pymupdf, mineru) that produce the lake's views through one assembler."""
