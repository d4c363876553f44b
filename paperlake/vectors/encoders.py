"""Encoders (sentence-transformers, open_clip) and page-region rendering.

Models load lazily from local paths only (``HF_HUB_OFFLINE=1``): no hub is reachable on our machines. The text
encoder's ONNX graphs (float, and the ``onnx-int8`` rewrite) are built by :mod:`paperlake.vectors.onnx_graphs`; vectors
are kept in :mod:`paperlake.vectors.embedding_cache`, keyed by each encoder's ``cache_key`` (model id, backend and max
sequence length), so vectors of different backends never mix.
"""

from __future__ import annotations

import io
import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from paperlake.config import Settings
from paperlake.vectors.config import TEXT_BACKENDS, EncoderSpec, EncoderUnavailable, VectorConfig, model_cache_dir
from paperlake.vectors.embedding_cache import EmbeddingCache, EncodeResult, content_sha256
from paperlake.vectors.onnx_graphs import onnx_model_path, text_cache_key

log = logging.getLogger(__name__)

RANDOM_CLIP_TAG = "RANDOM-UNTRAINED"


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


_WINDOW_MEMO = 50_000  # texts whose windows a TextEncoder remembers (a batch of papers holds ~10k)
# texts whose token spans a TextEncoder remembers: the hosts of the pieces it reads from their windows (a paper's
# references and equations lie in a few of its chunks, each piece asks its host's spans) and the texts it cuts heads
# of; a few thousand host texts of ~300 tokens are a few MB
_SPAN_MEMO = 2_048


class _TextMemo:
    """Text → what the tokenizer of one model made of it, shared by that model's encoders in this process (the
    collections of one model, e.g. MiniLM's and the hybrid one, cut the same texts), and bounded: past ``limit`` texts
    it starts afresh. A reader keeps the dict it looked in, so a thread that starts afresh never takes from another
    thread what that one found."""

    def __init__(self, limit: int):
        self.limit = limit
        self.data: dict[str, Any] = {}

    def get_many(self, texts: Sequence[str], compute: Callable[[list[str]], Sequence[Any]]) -> list[Any]:
        data = self.data
        missing = list(dict.fromkeys(t for t in texts if t not in data))
        if not missing:
            return [data[t] for t in texts]
        fresh = dict(zip(missing, compute(missing)))
        result = [fresh[t] if t in fresh else data[t] for t in texts]
        if len(data) + len(fresh) > self.limit:
            self.data = data = {}
        if len(fresh) <= self.limit:
            data.update(fresh)
        return result


_MEMOS: dict[tuple, _TextMemo] = {}
_MEMOS_LOCK = threading.Lock()


def _text_memo(kind: str, model: tuple, limit: int) -> _TextMemo:
    with _MEMOS_LOCK:
        return _MEMOS.setdefault((kind, *model), _TextMemo(limit))


@dataclass(frozen=True)
class Window:
    """One input the model sees whole: ``text`` (at most a window of tokens) and ``tokens``, its weight when vectors
    are pooled. With ``span`` (start, end characters of ``text``) the unit is a piece of that window, late chunked:
    its vector is the mean of the states of its own tokens in the window's encoding (``tokens`` of them), so it
    costs no encoding of its own beyond the window's, which its host (a chunk) needs anyway."""

    text: str
    tokens: int
    span: tuple[int, int] | None = None

    @property
    def key(self) -> str:
        """The embedding cache's key: the window's text, and the span when it is a piece of it."""
        if self.span is None:
            return content_sha256(self.text)
        return content_sha256(f"{self.text}\x1fspan:{self.span[0]}:{self.span[1]}")


def _window_bounds(spans: Sequence[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """Token ranges [start, end) of the windows of a text of token character ``spans``: every ``size`` tokens,
    backing off to the start of a word when one begins in the window's last 32 tokens."""
    if len(spans) <= size:
        return [(0, len(spans))]
    bounds, start = [], 0
    while start < len(spans):
        end = min(start + size, len(spans))
        if end < len(spans):
            end = _word_start(spans, start, end)
        bounds.append((start, end))
        start = end
    return bounds


class TextEncoder:
    """A sentence-transformers model from a local folder; returns L2-normalised float32 vectors.

    ``backend`` runs it with torch (sentence-transformers) or with ONNX Runtime on a graph exported locally from the
    same torch weights (``onnx``: float32, fused attention; ``onnx-int8``: its weights dynamically quantised). The
    export is cached under ``onnx_dir``, keyed by model, weights digest and backend. ``max_seq_length`` caps the
    tokens per cell (None: the model's own setting). Both change the vectors, so both are part of ``cache_key``.
    """

    def __init__(
        self,
        model_id: str,
        path: str | Path,
        dimension: int,
        batch_size: int = 64,
        device: str = "cpu",
        backend: str = "torch",
        max_seq_length: int | None = None,
        onnx_dir: str | Path | None = None,
        long_text: str = "truncate",
        threads: int | None = None,
    ):
        if backend not in TEXT_BACKENDS:
            raise ValueError(f"{model_id}: backend must be one of {TEXT_BACKENDS}, got {backend!r}")
        if backend != "torch" and onnx_dir is None:
            raise ValueError(f"{model_id}: the {backend} backend needs a folder for its exported graph")
        self.model_id = model_id
        self.path = str(path)
        self.dimension = dimension
        self.batch_size = batch_size
        self.device = device
        self.threads = threads  # ONNX Runtime's intra-op threads (None: one per core)
        self.backend = backend
        self.max_seq_length = max_seq_length
        self.long_text = long_text
        self.onnx_dir = None if onnx_dir is None else Path(onnx_dir)
        self._model = None
        self._lock = threading.Lock()
        # text → its windows: the two dense collections of one model (MiniLM's and the hybrid one) cut the same texts
        model = (self.path, backend, max_seq_length)
        self._windows = _text_memo("windows", model, _WINDOW_MEMO)
        # text → its tokens' character spans (every reference in a chunk asked the tokenizer for the whole chunk)
        self._spans = _text_memo("spans", model, _SPAN_MEMO)
        self._mean_pooling: bool | None = None  # supports_spans, read once

    @property
    def cache_key(self) -> str:
        """Identifies the vectors this encoder produces: embedding caches and collection fingerprints use it."""
        return text_cache_key(self.model_id, self.backend, self.max_seq_length)

    @property
    def vector_key(self) -> str:
        """Identifies a cell's vector: the encoder's, plus how a text longer than its window is read (pooling its
        windows gives other vectors than truncating it, from the same cached window encodings)."""
        return self.cache_key + ("|long_text=pool" if self.long_text == "pool" else "")

    @property
    def metadata(self) -> dict:
        return {
            "model_id": self.model_id,
            "path": self.path,
            "dimension": self.dimension,
            "random": False,
            "backend": self.backend,
            "max_seq_length": self.max_seq_length,
            "long_text": self.long_text,
        }

    def windows(self, texts: Sequence[str]) -> list[list[tuple[str, int]]]:
        """Each text as consecutive windows the model sees whole: (window text, tokens). A text that fits is one
        window, itself, so its vector is the plain encoding (and the same cache entry). Longer texts are cut every
        ``window - 2`` tokens (room for the special tokens), backing off to the start of a word when one begins in
        the window's last 32 tokens; the windows cover every token once."""
        return self._windows.get_many(texts, self._cut_windows)

    def _token_spans(self, texts: Sequence[str], remember: bool = True) -> tuple[int, list[list[tuple[int, int]]]]:
        """(tokens a window holds besides the special tokens, each text's token character spans); remembered for
        the next call unless ``remember`` is false (texts cut into windows once, whose windows are remembered)."""
        model = self._load()
        isonnx = isinstance(model, OnnxTextModel)
        size = (model.tokenizer.truncation["max_length"] if isonnx else model.max_seq_length) - 2

        def read(missing: list[str]) -> list[list[tuple[int, int]]]:
            if isonnx:
                return [e.offsets for e in model.full_tokenizer.encode_batch(missing, add_special_tokens=False)]
            encoded = model.tokenizer(missing, add_special_tokens=False, truncation=False, return_offsets_mapping=True)
            return [list(map(tuple, o)) for o in encoded["offset_mapping"]]

        return size, self._spans.get_many(texts, read) if remember else read(list(texts))

    def _cut_windows(self, texts: Sequence[str]) -> list[list[tuple[str, int]]]:
        size, offsets = self._token_spans(texts, remember=False)
        result = []
        for text, spans in zip(texts, offsets):
            if len(spans) <= size:
                result.append([(text, max(1, len(spans)))])
                continue
            result.append([(text[spans[a][0] : spans[b - 1][1]], b - a) for a, b in _window_bounds(spans, size)])
        return result

    @property
    def supports_spans(self) -> bool:
        """Whether a piece of a window can take its vector from the window's token states (late chunking): the
        model's sentence vector must be the mean of its token states, as the onnx backends require and
        sentence-transformers models with mean pooling are."""
        if self._mean_pooling is None:
            pooling = Path(self.path) / "1_Pooling" / "config.json"
            self._mean_pooling = self.backend != "torch" or (
                pooling.is_file()
                and bool(json.loads(pooling.read_text(encoding="utf-8")).get("pooling_mode_mean_tokens"))
            )
        return self._mean_pooling

    def span_windows(self, text: str, start: int, end: int) -> list[Window]:
        """Characters ``start:end`` of ``text`` as pieces of the windows :meth:`windows` cuts ``text`` into: per
        window holding some of their tokens, the window's text, the span within it and the tokens of the span there.
        Their vectors come from encoding those windows (:meth:`encode_spans`), which a text that ``text`` is the
        content of (a chunk) encodes anyway."""
        size, (spans,) = self._token_spans([text])
        out = []
        for a, b in _window_bounds(spans, size):
            whole = len(spans) <= size
            left = 0 if whole else spans[a][0]
            window = text if whole else text[left : spans[b - 1][1]]
            own = sum(1 for s, e in spans[a:b] if e > s and s >= start and e <= end)
            if own:
                out.append(Window(window, own, (max(start, left) - left, min(end, left + len(window)) - left)))
        return out

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[list[np.ndarray]]]:
        """Each text's vector (as :meth:`encode`) and, from the same forward pass, one vector per span of it: the
        mean of the states of the tokens that lie within the span, normalised (the text's own vector when none
        does). Needs :attr:`supports_spans`."""
        if not self.supports_spans:
            raise EncoderUnavailable(f"{self.model_id}: its sentence vector is not a mean of token states")
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32), []
        model = self._load()
        if isinstance(model, OnnxTextModel):
            return model.encode_spans(list(texts), self.batch_size, spans)
        states = model.encode(
            list(texts),
            batch_size=self.batch_size,
            output_value="token_embeddings",
            convert_to_numpy=False,
            show_progress_bar=False,
        )
        encoded = model.tokenizer(
            list(texts), truncation=True, max_length=model.max_seq_length, return_offsets_mapping=True
        )
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        pieces: list[list[np.ndarray]] = []
        for i, (hidden, offsets) in enumerate(zip(states, encoded["offset_mapping"])):
            hidden = np.asarray(hidden.float().cpu().numpy(), dtype=np.float32)
            vectors[i] = hidden.mean(axis=0)
            pieces.append(_span_means(hidden, [tuple(o) for o in offsets], spans[i], vectors[i]))
        return _normalise(vectors), pieces

    def head(self, text: str, tokens: int) -> tuple[str, int]:
        """The first ``tokens`` tokens of ``text`` (at most one window), cut before a word that does not fit:
        (head text, its tokens). A text that fits is itself, so its vector is its plain encoding."""
        size, (spans,) = self._token_spans([text])
        limit = min(tokens, size)
        if len(spans) <= limit:
            return text, max(1, len(spans))
        end = _word_start(spans, 0, limit)
        return text[spans[0][0] : spans[end - 1][1]], end

    def _load(self):
        with self._lock:
            if self._model is None:
                _offline()
                if self.backend == "torch":
                    self._model = self._load_torch()
                else:
                    self._model = OnnxTextModel(
                        onnx_model_path(self.path, self.model_id, self.backend, self.onnx_dir),
                        self.path,
                        self.max_seq_length or _model_max_seq_length(self.path),
                        device=self.device,
                        threads=self.threads,
                    )
        return self._model

    def _load_torch(self):
        from sentence_transformers import SentenceTransformer  # deferred: sentence_transformers

        model = SentenceTransformer(self.path, device=self.device)
        measure = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dimension = measure()
        if dimension != self.dimension:
            raise EncoderUnavailable(f"{self.model_id} at {self.path} gives {dimension}-d, expected {self.dimension}")
        if self.max_seq_length:
            model.max_seq_length = self.max_seq_length
        return model

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text after truncation, as the model sees them (special tokens included)."""
        model = self._load()
        if isinstance(model, OnnxTextModel):
            return [len(e.ids) for e in model.tokenizer.encode_batch(list(texts))]
        limit = model.max_seq_length
        return [min(len(ids), limit) for ids in model.tokenizer(list(texts))["input_ids"]]

    def seen_fractions(self, texts: Sequence[str]) -> list[float]:
        """Share of each text (in characters, up to the end of the last token kept) that fits in the model's window:
        1.0 for a text the vector covers whole, ~0.25 for a 1,000-token page under a 256-token window.

        Only a prefix of 8 characters per window token is tokenized (tokenizing whole pages would cost more than the
        search): when the prefix already fills the window, the end of the window is the same as in the whole text;
        otherwise the whole text is tokenized."""
        model = self._load()
        texts = list(texts)
        window = model.tokenizer.truncation["max_length"] if isinstance(model, OnnxTextModel) else model.max_seq_length
        prefix = 8 * window
        ends = self._window_ends(model, [text[:prefix] for text in texts])
        for i, (text, (end, full)) in enumerate(zip(texts, ends)):
            if len(text) > prefix and not full:
                ends[i] = self._window_ends(model, [text])[0]
        return [min(1.0, end / len(text.rstrip())) if text.strip() else 1.0 for text, (end, _) in zip(texts, ends)]

    @staticmethod
    def _window_ends(model, texts: list[str]) -> list[tuple[int, bool]]:
        """(character offset where the model's window ends, whether the window is full) per text."""
        if isinstance(model, OnnxTextModel):
            window = model.tokenizer.truncation["max_length"]
            return [
                (max((end for _, end in e.offsets), default=0), len(e.ids) >= window)
                for e in model.tokenizer.encode_batch(texts)
            ]
        encoded = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length, return_offsets_mapping=True)
        return [
            (max((end for _, end in offsets), default=0), len(offsets) >= model.max_seq_length)
            for offsets in encoded["offset_mapping"]
        ]

    def token_states(self, text: str) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """The model's last hidden states for one window of ``text`` (cut at the window like :meth:`encode`), one
        row per token with the special tokens, and each token's character span in ``text`` ((0, 0) for the special
        tokens). Their mean, normalised, is the text's vector. For measuring span vectors inside a window (late
        chunking, ``benchmarks/late_chunking.py``); the onnx backends only."""
        model = self._load()
        if not isinstance(model, OnnxTextModel):
            raise EncoderUnavailable(f"{self.model_id}: token states come from the onnx backends only")
        return model.token_states(text)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        if isinstance(model, OnnxTextModel):
            vectors = model.encode(list(texts), self.batch_size)
            if vectors.shape[1] != self.dimension:
                raise EncoderUnavailable(
                    f"{self.model_id} ({self.backend}) gives {vectors.shape[1]}-d, expected {self.dimension}"
                )
            return vectors
        vectors = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _word_start(spans: Sequence[tuple[int, int]], start: int, end: int) -> int:
    """Where to end a window of tokens ``start:end``: backing off to a token that begins a word when one begins in
    the window's last 32 tokens, so a word is not cut between two windows."""
    for cut in range(end, max(end - 32, start + 1), -1):
        if spans[cut][0] > spans[cut - 1][1]:  # token ``cut`` begins a word
            return cut
    return end


def _model_max_seq_length(path: str | Path) -> int:
    config = Path(path) / "sentence_bert_config.json"
    if config.is_file():
        return int(json.loads(config.read_text(encoding="utf-8")).get("max_seq_length", 256))
    return 256


# Sessions that run batches side by side on a CPU (lanes), each with a share of the cores. ONNX Runtime's own
# threads split one batch's matrix products and scale poorly on a model this small: on 2 cores, two 1-thread sessions
# side by side encoded the same windows sooner, and in less CPU time, than one 2-thread session. A lane costs a session
# (~25 MB for MiniLM int8), made the first time a call has batches for it.
MAX_LANES = 4


def cpu_cores() -> int:
    """The cores this process may run on (its affinity, where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class OnnxTextModel:
    """Mean-pooled, normalised sentence embeddings from an exported BERT-style graph (the MiniLM pipeline:
    Transformer → mean pooling → normalise). Texts are sorted by length and batched, so padding stays small; on a CPU
    with ``threads`` unset, the batches of a call run on :data:`MAX_LANES` sessions at most, side by side, each with
    its share of the cores (a text's vector is the same on any lane and in any batch)."""

    def __init__(
        self,
        onnx_path: Path,
        model_dir: str | Path,
        max_seq_length: int,
        device: str = "cpu",
        threads: int | None = None,
    ):
        import onnxruntime  # deferred: onnxruntime
        from tokenizers import Tokenizer  # deferred: onnx path

        pooling = Path(model_dir) / "1_Pooling" / "config.json"
        if pooling.is_file() and not json.loads(pooling.read_text(encoding="utf-8")).get("pooling_mode_mean_tokens"):
            raise EncoderUnavailable(f"{model_dir}: the onnx backends implement mean pooling only")
        self.tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_seq_length)
        self.full_tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))  # for cutting windows
        self.full_tokenizer.no_padding()
        self.full_tokenizer.no_truncation()
        providers = ["CPUExecutionProvider"]
        if device == "cuda" and "CUDAExecutionProvider" in onnxruntime.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        cores = cpu_cores()
        if threads or providers[0] != "CPUExecutionProvider" or cores < 2:
            # one session; `threads` given: several encoding processes on one machine share its cores instead of
            # each taking them all
            self.lanes, lane_threads = 1, threads
        else:
            self.lanes = min(cores, MAX_LANES)
            lane_threads = cores // self.lanes

        def session() -> Any:
            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            # idle threads sleep instead of spinning: our cores are shared (ingest, tests), and spinning workers
            # that lose their core stall every call; the cost when idle is negligible on a one-query encode
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            if lane_threads:
                options.intra_op_num_threads = lane_threads
            return onnxruntime.InferenceSession(str(onnx_path), options, providers=providers)

        self._new_session = session
        self.session = session()  # lane 0: a single batch, a query, token states
        self.inputs = {i.name for i in self.session.get_inputs()}
        self._free = [self.session]  # sessions no lane is running (the others are made on first use)
        self._free_lock = threading.Lock()
        self._pool: Any = None
        self._pool_pid = 0

    def _hidden(self, ids: np.ndarray, mask: np.ndarray, session: Any = None) -> np.ndarray:
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return (session or self.session).run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]

    def _lanes(self) -> Any:
        """The thread pool that runs batches on :attr:`lanes` sessions at once (made again in a forked child, where
        the parent's threads are gone)."""
        with self._free_lock:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = ThreadPoolExecutor(self.lanes, thread_name_prefix="paperlake-encoder")
                self._pool_pid = os.getpid()
            return self._pool

    def _on_a_lane(self, work: Callable[[Any], Any]) -> Any:
        """``work(session)`` with a session no other batch is running (one is made when none is free: at most one
        per lane, since the pool runs that many batches at once)."""
        with self._free_lock:
            session = self._free.pop() if self._free else None
        if session is None:
            session = self._new_session()
        try:
            return work(session)
        finally:
            with self._free_lock:
                self._free.append(session)

    def token_states(self, text: str) -> tuple[np.ndarray, list[tuple[int, int]]]:
        encoding = self.tokenizer.encode(text)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        return self._hidden(ids, np.ones_like(ids))[0], list(encoding.offsets)

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.encode_spans(texts, batch_size, None)[0]

    def encode_spans(
        self, texts: list[str], batch_size: int, spans: Sequence[Sequence[tuple[int, int]]] | None
    ) -> tuple[np.ndarray, list[list[np.ndarray]]]:
        """The texts' vectors and, per text, one vector per character span of ``spans`` from the same hidden states
        (:meth:`TextEncoder.encode_spans`; none without ``spans``)."""
        encodings = self.tokenizer.encode_batch(texts)
        order = np.argsort([len(e.ids) for e in encodings], kind="stable")
        # a call with fewer texts than the lanes' batches would fill is cut so that every lane gets some
        size = max(1, min(batch_size, -(-len(order) // self.lanes)))
        batches = [order[start : start + size] for start in range(0, len(order), size)]

        def run(rows: np.ndarray, session: Any = None) -> tuple[np.ndarray, np.ndarray, list]:
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(rows):
                ids[r, : len(encodings[i].ids)] = encodings[i].ids
                mask[r, : len(encodings[i].ids)] = 1
            hidden = self._hidden(ids, mask, session)
            pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            spanned = [
                _span_means(hidden[r], encodings[i].offsets, spans[i], pooled[r])
                if spans is not None and spans[i]
                else []
                for r, i in enumerate(rows)
            ]
            return rows, pooled, spanned

        if self.lanes > 1 and len(batches) > 1:  # batches on the lanes at once; the vectors do not depend on which
            pool = self._lanes()
            done = list(pool.map(lambda rows: self._on_a_lane(lambda session: run(rows, session)), batches))
        else:
            done = [run(rows) for rows in batches]
        out: np.ndarray | None = None
        pieces: list[list[np.ndarray]] = [[] for _ in texts]
        for rows, pooled, spanned in done:
            if out is None:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
            out[rows] = pooled
            for r, i in enumerate(rows):
                pieces[i] = spanned[r]
        return _normalise(out), pieces


def _span_means(
    hidden: np.ndarray, offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]], whole: np.ndarray
) -> list[np.ndarray]:
    """Per character span, the normalised mean of the states of the tokens within it (special tokens have empty
    offsets and belong to none); ``whole``, normalised, for a span no token lies in."""
    result = []
    for start, end in spans:
        own = [i for i, (s, e) in enumerate(offsets) if e > s and s >= start and e <= end and i < len(hidden)]
        vector = hidden[own].mean(axis=0) if own else whole
        result.append(_normalise(vector[None, :])[0])
    return result


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
    def cache_key(self) -> str:
        return self.model_id

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
                try:
                    import open_clip  # deferred: optional clip
                except ImportError as error:  # the lean install (./run demo) has no CLIP stack
                    raise EncoderUnavailable(
                        f"{self.model_id}: open_clip is not installed ({error}); install the CLIP extra: "
                        "pip install -e '.[clip]' (it brings the torch/torchvision pair, see docs/install.md)"
                    ) from error
                import torch  # deferred: torch

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
        import torch  # deferred: torch
        from PIL import Image  # deferred: optional clip

        model, preprocess, _ = self._load()
        out = []
        with torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = [
                    preprocess(Image.open(io.BytesIO(b)).convert("RGB"))
                    for b in images[start : start + self.batch_size]
                ]
                out.append(model.encode_image(torch.stack(batch).to(self.device)).float().cpu().numpy())
        return _normalise(np.concatenate(out))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed text queries with CLIP's text tower (for text → image search)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        import torch  # deferred: torch

        model, _, tokenizer = self._load()
        with torch.inference_mode():
            vectors = model.encode_text(tokenizer(list(texts)).to(self.device)).float().cpu().numpy()
        return _normalise(vectors)


def render_region(pdf_path: str | Path, page_number: int, bbox: Sequence[float] | None = None, dpi: int = 144) -> bytes:
    """PNG of a page region; ``bbox`` is ``[x0, y0, w, h]`` in PDF points, top-left origin; empty = whole page."""
    import pymupdf  # deferred: pymupdf

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


def pooled_windows(
    encoder: TextEncoder,
    texts: Sequence[str],
    head: int | None = None,
    within: tuple[str, int, int] | None = None,
    hosts: Sequence[tuple[str, int, int] | None] | None = None,
) -> list[Window]:
    """What :func:`encode_pooled` encodes for one item: the windows of its texts; with ``head`` the first ``head``
    tokens of its first text; with ``within`` (host text, start, end: where the item's text lies in a text that is
    encoded for its own cell, a chunk) the pieces of the host's windows that hold it (late chunking), when the
    encoder can give a piece a vector (:attr:`TextEncoder.supports_spans`), else its own windows. ``hosts``: the
    same per text of ``texts`` (None for a text no chunk holds, which gives its own windows)."""
    spans = getattr(encoder, "supports_spans", False)
    if within is not None and spans:
        pieces = encoder.span_windows(*within)
        if pieces:
            return pieces
    if hosts is not None and spans:
        out: list[Window] = []
        for text, host in zip(texts, hosts):
            pieces = encoder.span_windows(*host) if host is not None else []
            out += pieces or [Window(window, n) for window, n in encoder.windows([text])[0]]
        return out
    if head:
        return [Window(*encoder.head(texts[0], head))]
    return [Window(text, n) for per_text in encoder.windows(list(texts)) for text, n in per_text]


@dataclass
class WindowRun:
    """A window to run through the model, and the pieces of it (character spans) whose vectors are wanted too."""

    text: str
    spans: list[tuple[int, int]] = field(default_factory=list)


def missing_runs(windows: Sequence[Window], cached: dict[str, np.ndarray] | set[str]) -> list[WindowRun]:
    """The forward passes that give every window and piece of ``windows`` not in ``cached`` (keys): one per window
    text, carrying the spans wanted of it, so a chunk's window and the references within it are one encoding."""
    runs: dict[str, WindowRun] = {}
    for window in windows:
        if window.key in cached:
            continue
        run = runs.setdefault(window.text, WindowRun(window.text))
        if window.span is not None and window.span not in run.spans:
            run.spans.append(window.span)
    return list(runs.values())


def run_windows(encoder: TextEncoder, runs: Sequence[WindowRun]) -> dict[str, np.ndarray]:
    """Encode the runs (each window once): cache key → vector, for the windows and for the pieces asked of them."""
    if not runs:
        return {}
    texts = [run.text for run in runs]
    if any(run.spans for run in runs):
        vectors, pieces = encoder.encode_spans(texts, [run.spans for run in runs])
    else:
        vectors, pieces = encoder.encode(texts), [[] for _ in runs]
    fresh: dict[str, np.ndarray] = {}
    for run, vector, span_vectors in zip(runs, vectors, pieces):
        fresh[Window(run.text, 0).key] = vector
        for span, span_vector in zip(run.spans, span_vectors):
            fresh[Window(run.text, 0, span).key] = span_vector
    return fresh


def encode_pooled(
    encoder: TextEncoder,
    segments: Sequence[Sequence[str]],
    cache: EmbeddingCache | None,
    heads: Sequence[int | None] | None = None,
    within: Sequence[tuple[str, int, int] | None] | None = None,
    hosts: Sequence[Sequence[tuple[str, int, int] | None] | None] | None = None,
) -> EncodeResult:
    """One vector per item from its windows (:func:`pooled_windows`): the token-weighted mean of the window
    vectors, normalised. Windows are encoded through the cache, so a text shared by several items (a chunk, and the
    page and section it belongs to) is encoded once; the pieces of a window (an item ``within`` a chunk) come from
    the window's forward pass. ``segments``: per item, the texts it is made of (a cell's own text, or for a page or
    section the chunks it holds). ``heads``: per item, a number of tokens when its vector reads only the head of its
    first text (:meth:`TextEncoder.head`), else None. ``within``: per item, where its text lies in a chunk's, or
    None; ``hosts``: per item, the same per text (LINE_VIEWS), or None. ``misses`` counts the windows run through
    the model."""
    started = time.perf_counter()
    heads = list(heads) if heads is not None else [None] * len(segments)
    within = list(within) if within is not None else [None] * len(segments)
    hosts = list(hosts) if hosts is not None else [None] * len(segments)
    plan = [
        pooled_windows(encoder, item, head, inside, held) if item else []
        for item, head, inside, held in zip(segments, heads, within, hosts)
    ]
    flat = list({window.key: window for windows in plan for window in windows}.values())
    cached = cache.get_many(encoder.cache_key, [w.key for w in flat]) if cache is not None else {}
    runs = missing_runs(flat, cached)
    fresh = run_windows(encoder, runs)
    if cache is not None:
        cache.put_many(encoder.cache_key, fresh)
        cache.stats.hits += sum(1 for w in flat if w.key in cached)
        cache.stats.misses += len(runs)
    found = {**cached, **fresh}
    vectors = np.zeros((len(segments), encoder.dimension), dtype=np.float32)
    for index, windows in enumerate(plan):
        if windows:
            block = np.stack([found[w.key] for w in windows])
            vectors[index] = (block * np.asarray([w.tokens for w in windows], dtype=np.float32)[:, None]).sum(axis=0)
    return EncodeResult(
        _normalise(vectors),
        hits=sum(1 for w in flat if w.key in cached),
        misses=len(runs),
        seconds=time.perf_counter() - started,
    )


DEVICES = ("auto", "cpu", "cuda")
_BYTES_PER_BATCH_ITEM = 64 * 2**20  # activations of one 256-token MiniLM/CLIP input with headroom, measured ~40 MB


def resolve_device(requested: str = "auto", *, runtime: str = "onnx") -> str:
    """``auto``: CUDA when the encoder's runtime can use a GPU here (``onnx``: onnxruntime-gpu's CUDA provider;
    ``torch``: torch sees a GPU), else the CPU. An ONNX encoder never imports torch to decide. Vectors agree across
    devices within float tolerance, so the embedding cache is shared by them."""
    if requested not in DEVICES:
        raise ValueError(f"the encoder device must be one of {', '.join(DEVICES)}, got {requested!r}")
    if requested == "cuda" and not _cuda_available(runtime):
        needs = "onnxruntime-gpu's CUDAExecutionProvider" if runtime == "onnx" else "torch.cuda.is_available()"
        raise RuntimeError(
            f"PAPERLAKE_DEVICE=cuda, but this {runtime} runtime sees no GPU ({needs} is missing): "
            "use auto to fall back to the CPU"
        )
    if requested != "auto":
        return requested
    return "cuda" if _cuda_available(runtime) else "cpu"


def _cuda_available(runtime: str) -> bool:
    try:
        if runtime == "onnx":
            import onnxruntime  # deferred: onnxruntime

            return "CUDAExecutionProvider" in onnxruntime.get_available_providers()
        import torch  # deferred: torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def gpu_batch_size(configured: int, free_bytes: int | None = None, ceiling: int = 1024) -> int:
    """The batch for a GPU: as many inputs as half its free memory holds (at least the configured batch, at most
    ``ceiling``); the configured one when the free memory cannot be read."""
    if free_bytes is None:
        try:
            import torch  # deferred: torch

            free_bytes = int(torch.cuda.mem_get_info()[0])
        except Exception:  # no torch, or no CUDA context: keep what the config says
            return configured
    return max(configured, min(ceiling, free_bytes // 2 // _BYTES_PER_BATCH_ITEM))


_SHARED_ENCODERS: dict[tuple, "TextEncoder | ClipImageEncoder"] = {}
_SHARED_LOCK = threading.Lock()


def encoder_registry(config: VectorConfig, **kwargs) -> "EncoderRegistry":
    """A registry with the environment's device and threads (:class:`paperlake.config.Settings`): every store of
    the process asks for the same encoders, so they load once."""
    settings = Settings.from_env()
    return EncoderRegistry(config, device=settings.encoder_device, threads=settings.encoder_threads, **kwargs)


class EncoderRegistry:
    """Builds the configured encoders on first use and keeps one instance of each per process."""

    def __init__(
        self,
        config: VectorConfig,
        *,
        allow_random_clip: bool = False,
        device: str = "auto",
        onnx_dir: str | Path | None = None,
        threads: int | None = None,
    ):
        self.config = config
        self.threads = threads
        self.allow_random_clip = allow_random_clip
        self.device = device  # resolved per encoder, by its runtime (resolve_device)
        self.onnx_dir = Path(onnx_dir) if onnx_dir is not None else model_cache_dir() / "onnx"
        self._encoders: dict[str, TextEncoder | ClipImageEncoder] = {}
        self._lock = threading.Lock()

    def available(self, name: str) -> bool:
        spec = self.config.encoders[name]
        if spec.weights_path() is not None:
            return True
        return spec.kind == "open_clip" and self.allow_random_clip

    def get(self, name: str) -> TextEncoder | ClipImageEncoder:
        """The encoder, shared by every registry of the process with the same spec: a store opened per paper (one
        per Dagster step) does not load the model again."""
        with self._lock:
            if name not in self._encoders:
                spec = self.config.encoders[name]
                key = (
                    spec,
                    str(spec.weights_path()),
                    self.device,
                    str(self.onnx_dir),
                    self.allow_random_clip,
                    self.threads,
                )
                with _SHARED_LOCK:
                    if key not in _SHARED_ENCODERS:
                        _SHARED_ENCODERS[key] = self._build(spec)
                    self._encoders[name] = _SHARED_ENCODERS[key]
            return self._encoders[name]

    def _build(self, spec: EncoderSpec) -> TextEncoder | ClipImageEncoder:
        path = spec.weights_path()
        if spec.kind == "sentence_transformers":
            if path is None:
                raise EncoderUnavailable(spec.unavailable_reason())
            device = resolve_device(self.device, runtime="torch" if spec.backend == "torch" else "onnx")
            batch = gpu_batch_size(spec.batch_size) if device == "cuda" else spec.batch_size
            if device == "cuda" and spec.backend == "onnx-int8":
                log.warning(
                    "%s: the onnx-int8 graph's integer kernels are CPU kernels; on a GPU set `backend: onnx` "
                    "(schemas/collections.yaml)",
                    spec.model_id,
                )
            return TextEncoder(
                spec.model_id,
                path,
                spec.dimension,
                batch,
                device,
                backend=spec.backend,
                max_seq_length=spec.max_seq_length,
                onnx_dir=self.onnx_dir,
                long_text=spec.long_text,
                threads=self.threads,
            )
        return ClipImageEncoder(
            spec.model_id,
            spec.open_clip_model,
            path,
            spec.dimension,
            spec.batch_size,
            allow_random=self.allow_random_clip,
            device=resolve_device(self.device, runtime="torch"),
        )
