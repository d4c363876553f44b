"""Vector collection specs as configuration: ``schemas/collections.yaml`` parsed into dataclasses.

Which collections are active is decided here, from the YAML and the environment: a collection is active when it is
enabled and every encoder it uses has weights on local disk. Nothing here loads a model or touches Milvus.
"""

from __future__ import annotations

import copy
import importlib
import importlib.resources
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml

from paperlake.config import Settings


class EncoderUnavailable(RuntimeError):
    """The weights of an encoder are not on this machine."""


CONFIG_ENV = "PAPERLAKE_COLLECTIONS"
_REPO_DEFAULT = Path(__file__).resolve().parents[2] / "schemas" / "collections.yaml"

VECTOR_KINDS = ("bm25", "dense")
MODALITIES = ("text", "image")
ENCODER_KINDS = ("sentence_transformers", "open_clip")
TEXT_BACKENDS = ("torch", "onnx", "onnx-int8")
FUSIONS = ("convex", "rrf", "milvus-rrf", "milvus-weighted")  # milvus-*: fused inside Milvus (hybrid_search)


def model_cache_dir() -> Path:
    """Where derived model files (ONNX exports of the configured encoders) are kept: ``$PAPERLAKE_MODEL_CACHE``,
    default ``~/.cache/paperlake`` (``$XDG_CACHE_HOME/paperlake``). They are keyed by the weights' digest, so every
    PAPERLAKE_HOME on the machine shares one export instead of exporting again for each home."""
    return Settings.from_env().model_cache or Path.home() / ".cache" / "paperlake"


class ConfigError(ValueError):
    """The collection spec file is inconsistent."""


LONG_TEXT_MODES = ("pool", "truncate")


@dataclass(frozen=True)
class EncoderSpec:
    """A model that turns a cell into a dense vector; ``weights`` says where its files come from."""

    name: str
    kind: str
    model_id: str
    dimension: int
    batch_size: int = 32
    weights_package: str | None = None
    weights_env: str | None = None
    open_clip_model: str | None = None
    dpi: int = 144
    backend: str = "torch"
    max_seq_length: int | None = None
    long_text: str = "pool"  # text longer than the model's window: "pool" its windows, or "truncate" to the first

    def weights_path(self, environ: Mapping[str, str] | None = None) -> Path | None:
        """Local path of the weights, or None when they are not on this machine."""
        environ = os.environ if environ is None else environ
        if self.weights_package:
            try:
                module = importlib.import_module(self.weights_package)
            except ImportError:
                return None
            path = Path(module.get_model_path())
            return path if path.exists() else None
        if self.weights_env:
            value = environ.get(self.weights_env, "").strip()
            if value and Path(value).expanduser().exists():
                return Path(value).expanduser()
        return None

    def unavailable_reason(self, environ: Mapping[str, str] | None = None) -> str | None:
        if self.weights_path(environ) is not None:
            return None
        if self.weights_package:
            return f"encoder {self.name}: package {self.weights_package} is not installed"
        return f"encoder {self.name}: set {self.weights_env} to a local copy of {self.model_id}"


@dataclass(frozen=True)
class VectorFieldSpec:
    """One vector field of a collection: BM25 sparse (Milvus computes it from ``text``) or dense (our encoder)."""

    field: str
    kind: str
    metric: str
    index: str
    encoder: str | None = None
    index_params: dict[str, Any] = field(default_factory=dict)
    # passed to every search of the field (HNSW's ``ef``: how much of the graph a search explores)
    search_params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CollectionSpec:
    name: str
    modality: str
    vectors: tuple[VectorFieldSpec, ...]
    enabled: bool = True
    description: str = ""
    # encodable views ("table.column") this collection holds no entity of (``without_views`` in the YAML)
    without_views: tuple[str, ...] = ()

    def holds(self, cell) -> bool:
        """Whether this collection has an entity for ``cell`` (a ``paperlake.vectors.entities.Cell``)."""
        return cell.kind == self.modality and cell.view not in self.without_views

    @property
    def encoders(self) -> tuple[str, ...]:
        return tuple(v.encoder for v in self.vectors if v.encoder)

    @property
    def has_bm25(self) -> bool:
        return any(v.kind == "bm25" for v in self.vectors)

    @property
    def is_hybrid(self) -> bool:
        return len(self.vectors) > 1


@dataclass(frozen=True)
class VectorConfig:
    collections: tuple[CollectionSpec, ...]
    encoders: dict[str, EncoderSpec]
    bm25_analyzer: dict[str, Any]
    text_max_bytes: int = 65535
    hybrid_collection: str = "text_hybrid"
    rrf_k: int = 60
    candidates_per_route: int = 20
    fusion: str = "convex"
    hybrid_weights: tuple[float, ...] = ()
    hybrid_routes: tuple[str, ...] = ()
    coverage_weighting: bool = False
    rerank_pool: int = 0
    rerank_keep: int = 3
    source: str = ""

    def collection(self, name: str) -> CollectionSpec:
        for spec in self.collections:
            if spec.name == name:
                return spec
        known = ", ".join(s.name for s in self.collections)
        raise KeyError(f"unknown collection {name!r}; configured: {known}")

    def inactive_reason(self, spec: CollectionSpec, environ: Mapping[str, str] | None = None) -> str | None:
        """Why ``spec`` is not active here, or None when it is."""
        if not spec.enabled:
            return "disabled in the collection config"
        reasons = [r for r in (self.encoders[e].unavailable_reason(environ) for e in spec.encoders) if r]
        return "; ".join(reasons) or None

    def active_collections(self, environ: Mapping[str, str] | None = None) -> list[CollectionSpec]:
        return [s for s in self.collections if self.inactive_reason(s, environ) is None]


def default_config_path() -> Path:
    configured = Settings.from_env().collections_config
    if configured:
        return configured
    if _REPO_DEFAULT.is_file():
        return _REPO_DEFAULT
    try:  # an installed (non-editable) package keeps the YAML as package data of `schemas`
        resource = importlib.resources.files("schemas").joinpath("collections.yaml")
        return Path(str(resource))
    except Exception:
        return _REPO_DEFAULT


def load_config(path: str | Path | None = None) -> VectorConfig:
    """Parse and check the collection spec file (default: ``schemas/collections.yaml``)."""
    path = Path(path) if path else default_config_path()
    return parse_config(read_yaml(path), source=str(path))


# libyaml's parser where PyYAML was built with it (its wheels are): the same documents, several times faster
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """A YAML file's document, parsed once per version of the file (its size and modification time) in a process:
    an unchanged ingest asks for the collection config a dozen times. A copy: the caller may change it."""
    info = path.stat()
    return copy.deepcopy(_parsed_yaml(str(path), info.st_size, info.st_mtime_ns))


@lru_cache(maxsize=16)
def _parsed_yaml(path: str, size: int, mtime_ns: int) -> Any:
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_YAML_LOADER)


def parse_config(raw: Mapping[str, Any], source: str = "<dict>") -> VectorConfig:
    encoders = {name: _parse_encoder(name, body) for name, body in (raw.get("encoders") or {}).items()}
    collections = tuple(_parse_collection(body, encoders) for body in raw.get("collections") or [])
    names = [c.name for c in collections]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: duplicate collection names in {names}")
    hybrid = raw.get("hybrid") or {}
    config = VectorConfig(
        collections=collections,
        encoders=encoders,
        bm25_analyzer=dict(raw.get("bm25_analyzer") or {"tokenizer": "standard"}),
        text_max_bytes=int(raw.get("text_max_bytes", 65535)),
        hybrid_collection=hybrid.get("collection", "text_hybrid"),
        rrf_k=int(hybrid.get("rrf_k", 60)),
        candidates_per_route=int(hybrid.get("candidates_per_route", 20)),
        fusion=hybrid.get("fusion", "convex"),
        hybrid_weights=tuple(float(w) for w in hybrid.get("weights") or ()),
        hybrid_routes=tuple(str(name) for name in hybrid.get("routes") or ()),
        coverage_weighting=bool(hybrid.get("coverage_weighting", False)),
        rerank_pool=int(hybrid.get("rerank_pool", 0)),
        rerank_keep=int(hybrid.get("rerank_keep", 3)),
        source=source,
    )
    if config.fusion not in FUSIONS:
        raise ConfigError(f"{source}: hybrid.fusion must be one of {FUSIONS}, got {config.fusion!r}")
    if any(w < 0 for w in config.hybrid_weights) or (config.hybrid_weights and not sum(config.hybrid_weights)):
        raise ConfigError(f"{source}: hybrid.weights must be non-negative and not all zero")
    if config.rerank_pool < 0 or config.rerank_keep < 0:
        raise ConfigError(f"{source}: hybrid.rerank_pool and hybrid.rerank_keep must be non-negative")
    if not 0 < config.text_max_bytes <= 65535:
        raise ConfigError(f"{source}: text_max_bytes must be within 1..65535 (Milvus VARCHAR limit)")
    if config.hybrid_collection and config.hybrid_collection in names:
        hybrid_spec = config.collection(config.hybrid_collection)
        if not hybrid_spec.is_hybrid:
            raise ConfigError(f"{source}: hybrid collection {config.hybrid_collection} needs a bm25 and a dense field")
        if config.hybrid_weights and len(config.hybrid_weights) != len(hybrid_spec.vectors):
            raise ConfigError(
                f"{source}: hybrid.weights needs one weight per vector field of "
                f"{config.hybrid_collection} ({', '.join(v.field for v in hybrid_spec.vectors)})"
            )
        if config.hybrid_routes:
            # routes stand in for the hybrid collection's own fields, one each, in the same order
            if len(config.hybrid_routes) != len(hybrid_spec.vectors) or not set(config.hybrid_routes) <= set(names):
                raise ConfigError(
                    f"{source}: hybrid.routes must name {len(hybrid_spec.vectors)} configured "
                    f"collections, one per vector field of {config.hybrid_collection}"
                )
            for route, own in zip(config.hybrid_routes, hybrid_spec.vectors):
                vectors = config.collection(route).vectors
                if len(vectors) != 1 or (vectors[0].kind, vectors[0].encoder) != (own.kind, own.encoder):
                    raise ConfigError(
                        f"{source}: hybrid route {route} must hold one {own.kind} vector"
                        f"{' from ' + own.encoder if own.encoder else ''}, like "
                        f"{config.hybrid_collection}.{own.field}"
                    )
    return config


def _parse_encoder(name: str, body: Mapping[str, Any]) -> EncoderSpec:
    kind = body.get("kind")
    if kind not in ENCODER_KINDS:
        raise ConfigError(f"encoder {name}: kind must be one of {ENCODER_KINDS}, got {kind!r}")
    weights = body.get("weights") or {}
    if bool(weights.get("package")) == bool(weights.get("env")):
        raise ConfigError(f"encoder {name}: weights needs exactly one of `package` or `env`")
    if kind == "open_clip" and not body.get("open_clip_model"):
        raise ConfigError(f"encoder {name}: open_clip encoders need `open_clip_model` (e.g. ViT-B-32)")
    backend = body.get("backend", "torch")
    if backend not in TEXT_BACKENDS or (kind != "sentence_transformers" and backend != "torch"):
        raise ConfigError(
            f"encoder {name}: backend must be one of {TEXT_BACKENDS} (the onnx ones only for sentence_transformers)"
        )
    max_seq_length = body.get("max_seq_length")
    if max_seq_length is not None and not 8 <= int(max_seq_length) <= 512:
        raise ConfigError(f"encoder {name}: max_seq_length must be within 8..512 tokens")
    long_text = body.get("long_text", "pool")
    if long_text not in LONG_TEXT_MODES:
        raise ConfigError(f"encoder {name}: long_text must be one of {LONG_TEXT_MODES}, got {long_text!r}")
    return EncoderSpec(
        name=name,
        kind=kind,
        model_id=body["model_id"],
        dimension=int(body["dimension"]),
        batch_size=int(body.get("batch_size", 32)),
        weights_package=weights.get("package"),
        weights_env=weights.get("env"),
        open_clip_model=body.get("open_clip_model"),
        dpi=int(body.get("dpi", 144)),
        backend=backend,
        max_seq_length=None if max_seq_length is None else int(max_seq_length),
        long_text=long_text,
    )


def _parse_collection(body: Mapping[str, Any], encoders: Mapping[str, EncoderSpec]) -> CollectionSpec:
    name = body["name"]
    modality = body.get("modality")
    if modality not in MODALITIES:
        raise ConfigError(f"collection {name}: modality must be one of {MODALITIES}, got {modality!r}")
    vectors = []
    for item in body.get("vectors") or []:
        vector = VectorFieldSpec(
            field=item["field"],
            kind=item["kind"],
            metric=item["metric"].upper(),
            index=item["index"].upper(),
            encoder=item.get("encoder"),
            index_params=dict(item.get("index_params") or {}),
            search_params=dict(item.get("search_params") or {}),
        )
        if vector.kind not in VECTOR_KINDS:
            raise ConfigError(f"collection {name}: vector kind must be one of {VECTOR_KINDS}")
        if vector.kind == "bm25" and (modality != "text" or vector.metric != "BM25"):
            raise ConfigError(f"collection {name}: a bm25 field needs modality text and metric BM25")
        if vector.kind == "dense":
            if vector.encoder not in encoders:
                raise ConfigError(f"collection {name}: unknown encoder {vector.encoder!r}")
            encoder_kind = encoders[vector.encoder].kind
            if modality == "image" and encoder_kind != "open_clip":
                raise ConfigError(f"collection {name}: image collections need an open_clip encoder")
        vectors.append(vector)
    if not vectors:
        raise ConfigError(f"collection {name}: no vector fields")
    if len({v.field for v in vectors}) != len(vectors):
        raise ConfigError(f"collection {name}: duplicate vector field names")
    if sum(v.kind == "bm25" for v in vectors) > 1:
        raise ConfigError(f"collection {name}: at most one bm25 field")
    without = tuple(str(view) for view in body.get("without_views") or ())
    malformed = [view for view in without if view.count(".") != 1 or not all(view.split("."))]
    if malformed:
        raise ConfigError(f"collection {name}: without_views takes table.column names, got {malformed}")
    return CollectionSpec(
        name=name,
        modality=modality,
        vectors=tuple(vectors),
        enabled=bool(body.get("enabled", True)),
        description=body.get("description", ""),
        without_views=without,
    )
