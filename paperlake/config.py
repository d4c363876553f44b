"""Settings from the environment, with embedded defaults (DuckDB file, Milvus Lite file, local models).

Everything lives under ``PAPERLAKE_HOME`` (default ``./data``)::

    lake/<view>/<volume>/<paper>.parquet   parsed views, one file per paper per view
    warehouse.duckdb                       the dbt-built warehouse (swapped in atomically after each build)
    milvus.db                              Milvus Lite file (or MILVUS_URI=http://host:port for a server)
    dagster/                               the Dagster instance used by `paperlake ingest`
    cache/                                 embedding cache, LLM response cache
    evaluation/                            probes per paper, probe sets per volume, retrieval-quality reports
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def is_server_uri(uri: str) -> bool:
    """A Milvus server (HTTP, gRPC, or a server's Unix socket), as opposed to a Milvus Lite file: the store connects
    to it instead of locking a file, and the instance leaves its `milvus` pool unlimited (writers are concurrent)."""
    return uri.startswith(("http://", "https://", "tcp://", "grpc://", "unix:"))


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def _flag(name: str) -> bool:
    """An on/off variable, on unless set to 0, false, no or off."""
    return (_env(name, "1") or "1").lower() not in ("0", "false", "no", "off")


def pymupdf_layout_wanted() -> bool:
    """PAPERLAKE_PYMUPDF_LAYOUT (off unless 1, true, yes or on): let PyMuPDF load its layout model when imported. Read
    when the ``paperlake`` package is imported, before anything imports pymupdf, so it is not a Settings field."""
    return (_env("PAPERLAKE_PYMUPDF_LAYOUT", "0") or "0").lower() in ("1", "true", "yes", "on")


# An ingest launched through the Dagster webserver (orchestration.launch) names its own inbox folders and MinerU
# outputs in these run tags; the parse asset reads them before its resource's (a run without them: the resource's).
RUN_INBOXES_TAG = "paperlake/inboxes"  # os.pathsep-separated folders
RUN_MINERU_TAG = "paperlake/mineru_dir"


@dataclass(frozen=True)
class Settings:
    home: Path
    milvus_uri: str
    backend: str = "auto"
    mineru_dir: Path | None = None
    mineru_executable: str | None = None
    max_chunk_tokens: int = 512
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    llm_model: str | None = None
    vlm_model: str | None = None  # tables and figures (PNG crops); default: llm_model
    llm_budget: str | None = None  # per run: "200000" tokens or "$1.50"
    llm_concurrency: int = 4
    llm_requests_per_minute: int | None = None
    enrich_kinds: str | None = None  # comma-separated enrichment kinds; default: NeuSym-RAG's six
    evaluate: bool = True  # probes and the retrieval-quality check after each ingest
    eval_methods: str = "classic_rag"  # comma-separated; the first is the one the threshold applies to
    embedding_cache: Path | None = None  # the embedding cache file; default cache/embeddings.sqlite (a shared one
    # is safe: it is content-addressed by model and text, and SQLite serialises writers)
    encoder_device: str = "auto"  # PAPERLAKE_DEVICE: auto (a GPU when the runtime sees one) | cpu | cuda
    encoder_threads: int | None = None  # PAPERLAKE_ENCODER_THREADS: ONNX threads per process (None: every core)
    lake_dir: Path | None = None  # PAPERLAKE_LAKE: the lake elsewhere (a file system every worker sees)
    executor: str = "in_process"  # in_process | multiprocess | celery: where `paperlake ingest` runs steps
    dagster_url: str | None = None  # PAPERLAKE_DAGSTER_URL: launch the runs through this home's Dagster webserver
    celery_broker: str = "redis://127.0.0.1:6379/0"  # the celery executor's broker and result backend
    celery_backend: str | None = None  # default: the broker
    llm_prices: str | None = None  # PAPERLAKE_LLM_PRICES: JSON {"model": [usd per M input, per M output]}
    llm_temperature: float | None = None  # PAPERLAKE_LLM_TEMPERATURE (None: the client's default)
    llm_top_p: float | None = None  # PAPERLAKE_LLM_TOP_P
    model_cache: Path | None = None  # PAPERLAKE_MODEL_CACHE, else $XDG_CACHE_HOME/paperlake, ~/.cache/paperlake
    collections_config: Path | None = None  # PAPERLAKE_COLLECTIONS: another collections.yaml
    parse_workers: int = 0  # PAPERLAKE_PARSE_WORKERS: processes a parse step's papers use (0: every core; 1: none)
    concurrent_runs: int = 1  # PAPERLAKE_CONCURRENT_RUNS: per-paper runs `ingest` launches at once through the
    # webserver (dagster_url), whose run queue starts them side by side: about the number of workers (celery)
    inboxes: tuple[Path, ...] = ()  # PAPERLAKE_INBOX (os.pathsep-separated): what the sensor and `ingest` read
    eval_min_answer_at_5: float = 0.4  # the retrieval-quality check warns below this answer@5 (sample: .60-.70;
    # random vectors: .15-.18)
    vector_recount_hours: float = 24.0  # PAPERLAKE_VECTOR_RECOUNT_HOURS: the vector check counts each collection at
    # least this often (0: every check); in between, only when its records lost a paper (paperlake.vectors.ledger)

    @property
    def lake(self) -> Path:
        return self.lake_dir or self.home / "lake"

    @property
    def warehouse(self) -> Path:
        return self.home / "warehouse.duckdb"

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    @property
    def cache(self) -> Path:
        return self.home / "cache"

    @property
    def embeddings(self) -> Path:
        return self.embedding_cache or self.cache / "embeddings.sqlite"

    @property
    def evaluation(self) -> Path:
        return self.home / "evaluation"

    @property
    def llm_configured(self) -> bool:
        return bool(self.openai_base_url or self.openai_api_key)

    @classmethod
    def from_env(cls, **overrides: object) -> "Settings":
        home = Path(overrides.get("home") or _env("PAPERLAKE_HOME", "data")).expanduser().resolve()
        mineru = _env("PAPERLAKE_MINERU_DIR")
        values: dict[str, object] = dict(
            home=home,
            milvus_uri=_env("MILVUS_URI", str(home / "milvus.db")),  # the Milvus Lite file lives in the home
            backend=_env("PAPERLAKE_BACKEND", "auto"),
            mineru_dir=Path(mineru).resolve() if mineru else None,
            mineru_executable=_env("PAPERLAKE_MINERU_EXECUTABLE"),
            max_chunk_tokens=int(_env("PAPERLAKE_MAX_CHUNK_TOKENS", "512")),
            openai_base_url=_env("OPENAI_BASE_URL"),
            openai_api_key=_env("OPENAI_API_KEY"),
            llm_model=_env("PAPERLAKE_LLM_MODEL", _env("OPENAI_MODEL")),
            vlm_model=_env("PAPERLAKE_VLM_MODEL"),
            llm_budget=_env("PAPERLAKE_LLM_BUDGET"),
            llm_concurrency=int(_env("PAPERLAKE_LLM_CONCURRENCY", "4")),
            llm_requests_per_minute=int(_env("PAPERLAKE_LLM_RPM")) if _env("PAPERLAKE_LLM_RPM") else None,
            enrich_kinds=_env("PAPERLAKE_ENRICH_KINDS"),
            embedding_cache=Path(_env("PAPERLAKE_EMBEDDING_CACHE")).expanduser().resolve()
            if _env("PAPERLAKE_EMBEDDING_CACHE")
            else None,
            evaluate=_flag("PAPERLAKE_EVALUATE"),
            dagster_url=_env("PAPERLAKE_DAGSTER_URL"),
            eval_methods=_env("PAPERLAKE_EVAL_METHODS", "classic_rag"),
            eval_min_answer_at_5=float(_env("PAPERLAKE_EVAL_MIN_ANSWER5", "0.4") or 0.4),
            inboxes=tuple(Path(p) for p in (_env("PAPERLAKE_INBOX") or "").split(os.pathsep) if p),
            executor=_env("PAPERLAKE_EXECUTOR", "in_process"),
            encoder_device=_env("PAPERLAKE_DEVICE", "auto"),
            encoder_threads=int(_env("PAPERLAKE_ENCODER_THREADS")) if _env("PAPERLAKE_ENCODER_THREADS") else None,
            lake_dir=Path(_env("PAPERLAKE_LAKE")).expanduser().resolve() if _env("PAPERLAKE_LAKE") else None,
            celery_broker=_env("PAPERLAKE_CELERY_BROKER", "redis://127.0.0.1:6379/0"),
            celery_backend=_env("PAPERLAKE_CELERY_BACKEND"),
            parse_workers=max(0, int(_env("PAPERLAKE_PARSE_WORKERS", "0") or 0)),
            concurrent_runs=max(1, int(_env("PAPERLAKE_CONCURRENT_RUNS", "1") or 1)),
            llm_prices=_env("PAPERLAKE_LLM_PRICES"),
            llm_temperature=float(_env("PAPERLAKE_LLM_TEMPERATURE")) if _env("PAPERLAKE_LLM_TEMPERATURE") else None,
            llm_top_p=float(_env("PAPERLAKE_LLM_TOP_P")) if _env("PAPERLAKE_LLM_TOP_P") else None,
            model_cache=Path(
                _env("PAPERLAKE_MODEL_CACHE") or Path(_env("XDG_CACHE_HOME") or Path.home() / ".cache") / "paperlake"
            ).expanduser(),
            collections_config=Path(_env("PAPERLAKE_COLLECTIONS")) if _env("PAPERLAKE_COLLECTIONS") else None,
            vector_recount_hours=float(_env("PAPERLAKE_VECTOR_RECOUNT_HOURS", "24") or 24),
        )
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in os.environ for the block, then as they were (what a child process started meanwhile inherits,
    without this process's later work seeing them)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
