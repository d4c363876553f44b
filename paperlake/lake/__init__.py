"""The lake: the inbox and paper identity, the Parquet views of each paper, and the parse stage that
fills them (parse, validate, publish)."""
