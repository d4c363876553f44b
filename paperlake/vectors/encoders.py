"""Encoders (sentence-transformers, open_clip), page-region rendering, and an on-disk embedding cache.

Models load lazily from local paths only (``HF_HUB_OFFLINE=1``): no hub is reachable on our machines. The cache
is keyed by (model id, sha256 of the text or image bytes), so a cell whose content did not change is never encoded
twice, whichever collection or process asks.
"""

from __future__ import annotations

import hashlib
import io
import os
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from paperlake.vectors.config import EncoderSpec, VectorConfig

RANDOM_CLIP_TAG = "RANDOM-UNTRAINED"


class EncoderUnavailable(RuntimeError):
    """The weights of an encoder are not on this machine."""


def content_sha256(content: str | bytes) -> str:
    data = content.encode("utf-8") if isinstance(content, str) else content
    return hashlib.sha256(data).hexdigest()


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class TextEncoder:
    """A sentence-transformers model from a local folder; returns L2-normalised float32 vectors."""

    def __init__(self, model_id: str, path: str | Path, dimension: int, batch_size: int = 64, device: str = "cpu"):
        self.model_id = model_id
        self.path = str(path)
        self.dimension = dimension
        self.batch_size = batch_size
        self.device = device
        self._model = None
        self._lock = threading.Lock()

    @property
    def metadata(self) -> dict:
        return {"model_id": self.model_id, "path": self.path, "dimension": self.dimension, "random": False}

    def _load(self):
        with self._lock:
            if self._model is None:
                _offline()
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(self.path, device=self.device)
                measure = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                dimension = measure()
                if dimension != self.dimension:
                    raise EncoderUnavailable(f"{self.model_id} at {self.path} gives {dimension}-d, expected {self.dimension}")
                self._model = model
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        vectors = model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


class ClipImageEncoder:
    """open_clip image (and text, for queries) tower; weights from a local checkpoint.

    ``pretrained=None`` builds a randomly initialised model and is refused unless ``allow_random=True``: that flag
    exists only so tests can exercise the code path on machines without CLIP weights. A random model's
    ``model_id`` and ``metadata`` say so, and its vectors never share a cache entry with real ones.
    """

    def __init__(
        self,
        model_id: str,
        open_clip_model: str,
        pretrained: str | Path | None,
        dimension: int = 512,
        batch_size: int = 32,
        allow_random: bool = False,
        device: str = "cpu",
    ):
        if pretrained is None and not allow_random:
            raise EncoderUnavailable(
                f"{model_id}: no local weights (set PAPERLAKE_CLIP_PATH); a random model needs allow_random=True"
            )
        self.is_random = pretrained is None
        self.base_model_id = model_id
        self.model_id = f"{model_id}/{RANDOM_CLIP_TAG}-seed0" if self.is_random else model_id
        self.open_clip_model = open_clip_model
        self.pretrained = None if pretrained is None else str(pretrained)
        self.dimension = dimension
        self.batch_size = batch_size
        self.device = device
        self._loaded = None
        self._lock = threading.Lock()

    @property
    def metadata(self) -> dict:
        return {
            "model_id": self.model_id,
            "open_clip_model": self.open_clip_model,
            "pretrained": self.pretrained,
            "dimension": self.dimension,
            "random": self.is_random,
            "note": "randomly initialised weights: vectors are meaningless, for tests only" if self.is_random else "",
        }

    def _load(self):
        with self._lock:
            if self._loaded is None:
                _offline()
                import open_clip
                import torch

                if self.is_random:
                    torch.manual_seed(0)
                model, _, preprocess = open_clip.create_model_and_transforms(
                    self.open_clip_model, pretrained=self.pretrained, device=self.device
                )
                model.eval()
                self._loaded = (model, preprocess, open_clip.get_tokenizer(self.open_clip_model))
        return self._loaded

    def encode_images(self, images: Sequence[bytes]) -> np.ndarray:
        """Embed encoded images (PNG/JPEG bytes)."""
        if not images:
            return np.zeros((0, self.dimension), dtype=np.float32)
        import torch
        from PIL import Image

        model, preprocess, _ = self._load()
        out = []
        with torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = [preprocess(Image.open(io.BytesIO(b)).convert("RGB")) for b in images[start:start + self.batch_size]]
                out.append(model.encode_image(torch.stack(batch).to(self.device)).float().cpu().numpy())
        return _normalise(np.concatenate(out))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed text queries with CLIP's text tower (for text → image search)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        import torch

        model, _, tokenizer = self._load()
        with torch.inference_mode():
            vectors = model.encode_text(tokenizer(list(texts)).to(self.device)).float().cpu().numpy()
        return _normalise(vectors)


def render_region(pdf_path: str | Path, page_number: int, bbox: Sequence[float] | None = None, dpi: int = 144) -> bytes:
    """PNG of a page region; ``bbox`` is ``[x0, y0, w, h]`` in PDF points, top-left origin; empty = whole page."""
    import pymupdf

    with pymupdf.open(str(pdf_path)) as document:
        if not 1 <= page_number <= document.page_count:
            raise ValueError(f"{pdf_path}: page {page_number} outside 1..{document.page_count}")
        page = document[page_number - 1]
        clip = page.rect
        if bbox:
            x0, y0, w, h = (float(v) for v in bbox)
            clip = pymupdf.Rect(x0, y0, x0 + w, y0 + h) & page.rect
            if clip.is_empty:
                raise ValueError(f"{pdf_path}: bbox {list(bbox)} lies outside page {page_number}")
        return page.get_pixmap(dpi=dpi, clip=clip, alpha=False).tobytes("png")


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0

    def as_dict(self) -> dict:
        return {"hits": self.hits, "misses": self.misses}


class EmbeddingCache:
    """SQLite file of vectors keyed by (model id, sha256 of content).

    SQLite (WAL, busy timeout) rather than DuckDB because several ingest processes may share one cache, and DuckDB
    allows a single writing process per file.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stats = CacheStats()
        self._local = threading.local()
        with self._connect() as con:
            con.execute(
                "create table if not exists embeddings (model_id text not null, content_sha256 text not null, "
                "dimension integer not null, vector blob not null, primary key (model_id, content_sha256))"
            )

    def _connect(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            con.execute("pragma journal_mode=wal")
            con.execute("pragma synchronous=normal")
            self._local.con = con
        return con

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        con = self._connect()
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            part = unique[start:start + 500]
            marks = ",".join("?" * len(part))
            rows = con.execute(
                f"select content_sha256, dimension, vector from embeddings where model_id = ? and content_sha256 in ({marks})",
                [model_id, *part],
            )
            for sha, dimension, blob in rows:
                found[sha] = np.frombuffer(blob, dtype=np.float32, count=dimension)
        return found

    def put_many(self, model_id: str, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        rows = [(model_id, sha, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for sha, v in items.items()]
        con = self._connect()
        con.execute("begin")
        con.executemany("insert or replace into embeddings values (?, ?, ?, ?)", rows)
        con.execute("commit")

    def __len__(self) -> int:
        return self._connect().execute("select count(*) from embeddings").fetchone()[0]

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None


@dataclass
class EncodeResult:
    vectors: np.ndarray
    hits: int = 0
    misses: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def encode_cached(encoder, contents: Sequence[str | bytes], cache: EmbeddingCache | None) -> EncodeResult:
    """Vectors for ``contents`` (texts, or image bytes for a CLIP encoder), encoding only cache misses."""
    import time

    hashes = [content_sha256(c) for c in contents]
    cached = cache.get_many(encoder.model_id, hashes) if cache is not None else {}
    todo = {}
    for sha, content in zip(hashes, contents):
        if sha not in cached and sha not in todo:
            todo[sha] = content
    started = time.perf_counter()
    fresh: dict[str, np.ndarray] = {}
    if todo:
        items = list(todo.items())
        payload = [c for _, c in items]
        if isinstance(payload[0], bytes):
            vectors = encoder.encode_images(payload)
        else:
            vectors = encoder.encode(payload)
        fresh = {sha: vectors[i] for i, (sha, _) in enumerate(items)}
        if cache is not None:
            cache.put_many(encoder.model_id, fresh)
    seconds = time.perf_counter() - started
    hits = sum(1 for sha in hashes if sha in cached)
    if cache is not None:
        cache.stats.hits += hits
        cache.stats.misses += len(todo)
    dimension = encoder.dimension
    matrix = np.zeros((len(contents), dimension), dtype=np.float32)
    for i, sha in enumerate(hashes):
        matrix[i] = cached[sha] if sha in cached else fresh[sha]
    return EncodeResult(matrix, hits=hits, misses=len(todo), seconds=seconds)


class EncoderRegistry:
    """Builds the configured encoders on first use and keeps one instance of each per process."""

    def __init__(self, config: VectorConfig, *, allow_random_clip: bool = False, device: str = "cpu"):
        self.config = config
        self.allow_random_clip = allow_random_clip
        self.device = device
        self._encoders: dict[str, TextEncoder | ClipImageEncoder] = {}
        self._lock = threading.Lock()

    def available(self, name: str) -> bool:
        spec = self.config.encoders[name]
        if spec.weights_path() is not None:
            return True
        return spec.kind == "open_clip" and self.allow_random_clip

    def get(self, name: str) -> TextEncoder | ClipImageEncoder:
        with self._lock:
            if name not in self._encoders:
                self._encoders[name] = self._build(self.config.encoders[name])
            return self._encoders[name]

    def _build(self, spec: EncoderSpec) -> TextEncoder | ClipImageEncoder:
        path = spec.weights_path()
        if spec.kind == "sentence_transformers":
            if path is None:
                raise EncoderUnavailable(spec.unavailable_reason())
            return TextEncoder(spec.model_id, path, spec.dimension, spec.batch_size, self.device)
        return ClipImageEncoder(
            spec.model_id, spec.open_clip_model, path, spec.dimension, spec.batch_size,
            allow_random=self.allow_random_clip, device=self.device,
        )
