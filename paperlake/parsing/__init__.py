"""PDF parsing backends (pymupdf, mineru) that produce the lake's views through one assembler."""

# Which detector found a table, figure or equation (the ``detector`` column of those views and marts).
DETECTORS: dict[str, tuple[str, ...]] = {
    "tables": ("caption_region", "mineru"),
    "images": ("caption_region", "uncaptioned_raster", "uncaptioned_drawing", "mineru"),
    "equations": ("display_math", "mineru"),
}
