"""Vector layer: warehouse cells → Milvus collections (BM25, sentence-transformers, CLIP, hybrid) and search."""
