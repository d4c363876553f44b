"""One way to call a chat model: any OpenAI-compatible endpoint, with retries, a response cache and accounting.

The endpoint comes from :class:`~paperlake.config.Settings` (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``PAPERLAKE_LLM_MODEL``) or from arguments. Transient failures (connection errors, timeouts, 408/409/429 and 5xx)
are retried with exponential backoff; any other 4xx is the caller's mistake and is raised at once as
:class:`LLMError`. Responses are cached on disk keyed on the whole request, so a re-run of an evaluation replays
instead of paying twice; ``cache_dir=None`` disables it. Prices are per million tokens, configurable per model
(``PAPERLAKE_LLM_PRICES='{"gpt-4o-mini": [0.15, 0.6]}'``), and default to 0.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from paperlake.config import Settings

if TYPE_CHECKING:  # imported where a client is made: an import an ingest without an LLM never pays for
    import openai

DEFAULT_MODEL = "gpt-4o-mini"
_RETRYABLE_STATUS = {408, 409, 429}


class LLMNotConfigured(RuntimeError):
    def __init__(self) -> None:
        super().__init__(
            "no LLM endpoint configured: set OPENAI_BASE_URL (an OpenAI-compatible server) and/or OPENAI_API_KEY, "
            "and PAPERLAKE_LLM_MODEL"
        )


class LLMError(RuntimeError):
    """The endpoint refused the request (a 4xx other than 408/409/429), or every retry failed."""

    def __init__(self, message: str, status_code: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cached_calls: int = 0
    retries: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: "Usage") -> None:
        for name in ("prompt_tokens", "completion_tokens", "calls", "cached_calls", "retries", "cost_usd"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_tokens": self.total_tokens}


@dataclass
class LLMResponse:
    text: str
    usage: Usage
    model: str
    finish_reason: str | None = None
    cached: bool = False


def image_part(png: bytes) -> dict[str, Any]:
    """An ``image_url`` content part carrying a PNG as a base64 data URL (what vision models accept)."""
    encoded = base64.b64encode(png).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}}


def user_message(text: str, images: list[bytes] | None = None) -> dict[str, Any]:
    if not images:
        return {"role": "user", "content": text}
    return {"role": "user", "content": [{"type": "text", "text": text}, *(image_part(png) for png in images)]}


def parse_prices(raw: str | None) -> dict[str, tuple[float, float]]:
    """``Settings.llm_prices`` (PAPERLAKE_LLM_PRICES) as model → (USD per million input, per million output)."""
    if not raw:
        return {}
    try:
        table = json.loads(raw)
        return {str(model): (float(pair[0]), float(pair[1])) for model, pair in table.items()}
    except (ValueError, TypeError, IndexError, AttributeError) as error:
        raise ValueError(
            'PAPERLAKE_LLM_PRICES must be JSON like {"model": [usd_per_million_input, usd_per_million_output]}'
        ) from error


class ResponseCache:
    """``<dir>/<key[:2]>/<key>.json``, written atomically; the key is the sha256 of the canonical request."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as out:
            json.dump(value, out, ensure_ascii=False)
        os.replace(out.name, path)


@dataclass
class ChatClient:
    """A configured chat endpoint. ``complete(messages)`` returns text plus usage; ``usage`` accumulates."""

    base_url: str | None
    api_key: str | None
    model: str = DEFAULT_MODEL
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 1500
    timeout: float = 120.0
    max_retries: int = 4
    backoff: float = 1.0
    max_backoff: float = 30.0
    cache_dir: Path | None = None
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    usage: Usage = field(default_factory=Usage)

    def __post_init__(self) -> None:
        if not (self.base_url or self.api_key):
            raise LLMNotConfigured()
        import openai  # deferred: openai

        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=self.api_key or "not-needed",
            timeout=self.timeout,
            max_retries=0,
        )
        self._cache = ResponseCache(self.cache_dir) if self.cache_dir else None

    @classmethod
    def from_settings(cls, settings: Settings, use_cache: bool = True, **overrides: Any) -> "ChatClient":
        if not settings.llm_configured:
            raise LLMNotConfigured()
        values: dict[str, Any] = dict(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            model=settings.llm_model or DEFAULT_MODEL,
            cache_dir=settings.cache / "llm" if use_cache else None,
            prices=parse_prices(settings.llm_prices),
        )
        if settings.llm_temperature is not None:
            values["temperature"] = settings.llm_temperature
        if settings.llm_top_p is not None:
            values["top_p"] = settings.llm_top_p
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        per_million_in, per_million_out = self.prices.get(model, (0.0, 0.0))
        return (prompt_tokens * per_million_in + completion_tokens * per_million_out) / 1_000_000

    def complete(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
    ) -> LLMResponse:
        params = {
            "temperature": self.temperature if temperature is None else temperature,
            "top_p": self.top_p if top_p is None else top_p,
            "max_tokens": self.max_tokens if max_tokens is None else max_tokens,
        }
        request = {"model": self.model, "messages": messages, "params": params}
        key = ResponseCache.key(request) if self._cache else None
        if self._cache and key:
            hit = self._cache.get(key)
            if hit is not None:
                usage = Usage(calls=1, cached_calls=1)
                self.usage.add(usage)
                return LLMResponse(hit["text"], usage, hit.get("model", self.model), hit.get("finish_reason"), True)

        completion, retries = self._create_with_retries(messages, params)
        choice = completion.choices[0] if completion.choices else None
        text = (choice.message.content if choice and choice.message else None) or ""
        prompt_tokens = completion.usage.prompt_tokens if completion.usage else 0
        completion_tokens = completion.usage.completion_tokens if completion.usage else 0
        usage = Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            calls=1,
            retries=retries,
            cost_usd=self.cost(self.model, prompt_tokens, completion_tokens),
        )
        self.usage.add(usage)
        finish_reason = choice.finish_reason if choice else None
        if self._cache and key:
            self._cache.put(key, {"text": text, "model": completion.model, "finish_reason": finish_reason})
        return LLMResponse(text, usage, completion.model or self.model, finish_reason)

    def _create_with_retries(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> tuple[Any, int]:
        import openai  # deferred: openai

        attempt = 0
        while True:
            try:
                return self._client.chat.completions.create(model=self.model, messages=messages, **params), attempt
            except openai.APIStatusError as error:
                status = error.status_code
                if not (status in _RETRYABLE_STATUS or status >= 500) or attempt >= self.max_retries:
                    raise LLMError(
                        f"LLM endpoint answered {status}: {_error_text(error)}", status, attempt + 1
                    ) from error
                delay = _retry_after(error)
            except openai.APIConnectionError as error:
                if attempt >= self.max_retries:
                    raise LLMError(f"LLM endpoint unreachable: {error}", None, attempt + 1) from error
                delay = None
            wait = delay if delay is not None else self.backoff * (2**attempt) * (0.5 + random.random() / 2)
            self.sleep(min(wait, self.max_backoff))
            attempt += 1


def _error_text(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(error.message)


def _retry_after(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after") if error.response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
