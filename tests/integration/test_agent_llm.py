"""The chat client against the scripted OpenAI-compatible stub: retries, errors, cache, accounting, images."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from paperlake.config import Settings
from paperlake.runtime.llm import ChatClient, LLMError, LLMNotConfigured, ResponseCache, user_message
from support.openai_stub import start_stub

HELLO = [{"role": "user", "content": "hello"}]


def client(base_url: str, tmp_path: Path | None = None, **kwargs) -> ChatClient:
    sleeps: list[float] = []
    made = ChatClient(
        base_url=base_url,
        api_key="k",
        model="stub-model",
        sleep=sleeps.append,
        cache_dir=tmp_path / "cache" if tmp_path else None,
        **kwargs,
    )
    made.sleeps = sleeps  # type: ignore[attr-defined]
    return made


def test_transient_errors_are_retried_with_backoff(tmp_path: Path) -> None:
    script = [{"status": 500}, {"status": 503}, {"status": 429}, "finally"]
    with start_stub(script, tmp_path) as stub:
        chat = client(stub.base_url, backoff=0.5)
        reply = chat.complete(HELLO)
    assert reply.text == "finally" and reply.usage.retries == 3
    assert len(stub.requests()) == 4
    assert len(chat.sleeps) == 3 and chat.sleeps[0] < chat.sleeps[2]  # exponential


def test_client_errors_are_not_retried(tmp_path: Path) -> None:
    with start_stub([{"status": 400, "error": "context too long"}, "never"], tmp_path) as stub:
        chat = client(stub.base_url)
        with pytest.raises(LLMError, match="400: context too long") as raised:
            chat.complete(HELLO)
    assert raised.value.status_code == 400 and len(stub.requests()) == 1 and chat.sleeps == []


def test_retries_give_up_after_the_limit(tmp_path: Path) -> None:
    with start_stub([{"status": 502}] * 3, tmp_path) as stub:
        chat = client(stub.base_url, max_retries=2)
        with pytest.raises(LLMError, match="502") as raised:
            chat.complete(HELLO)
    assert raised.value.attempts == 3


def test_connection_errors_are_retried_then_reported() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chat = client(f"http://127.0.0.1:{port}/v1", max_retries=1, timeout=2)
    with pytest.raises(LLMError, match="unreachable"):
        chat.complete(HELLO)
    assert len(chat.sleeps) == 1


def test_cache_replays_the_same_request_and_can_be_disabled(tmp_path: Path) -> None:
    with start_stub(["first", "second", "third"], tmp_path / "stub") as stub:
        cached = client(stub.base_url, tmp_path)
        assert cached.complete(HELLO).text == "first"
        again = cached.complete(HELLO)
        assert again.text == "first" and again.cached and cached.usage.cached_calls == 1
        assert cached.complete(HELLO, temperature=0.0).text == "second"  # a different request
        uncached = client(stub.base_url)
        assert uncached.complete(HELLO).text == "third"
    assert len(stub.requests()) == 3


def test_cache_key_covers_model_messages_and_parameters() -> None:
    base = {"model": "m", "messages": HELLO, "params": {"temperature": 0.7}}
    assert ResponseCache.key(base) == ResponseCache.key(dict(base))
    assert ResponseCache.key(base) != ResponseCache.key(base | {"model": "n"})
    assert ResponseCache.key(base) != ResponseCache.key(base | {"params": {"temperature": 0.0}})


def test_usage_and_cost_are_accounted(tmp_path: Path) -> None:
    script = [
        {"content": "a", "prompt_tokens": 1000, "completion_tokens": 200},
        {"content": "b", "prompt_tokens": 3000, "completion_tokens": 800},
    ]
    with start_stub(script, tmp_path) as stub:
        chat = client(stub.base_url, prices={"stub-model": (2.0, 10.0)})
        chat.complete(HELLO)
        chat.complete(HELLO + [{"role": "user", "content": "more"}])
    assert chat.usage.prompt_tokens == 4000 and chat.usage.completion_tokens == 1000
    assert chat.usage.cost_usd == pytest.approx((4000 * 2.0 + 1000 * 10.0) / 1e6)


def test_parameters_and_images_reach_the_endpoint(tmp_path: Path) -> None:
    with start_stub(["seen"], tmp_path) as stub:
        chat = client(stub.base_url, temperature=0.2, top_p=0.5)
        chat.complete([user_message("look", [b"\x89PNG fake"])], max_tokens=77)
    body = stub.requests()[0]
    assert body["temperature"] == 0.2 and body["top_p"] == 0.5 and body["max_tokens"] == 77
    image = body["messages"][0]["content"][1]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/png;base64,")


def test_missing_endpoint_is_one_clear_line(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, milvus_uri=str(tmp_path / "m.db"))
    with pytest.raises(LLMNotConfigured) as raised:
        ChatClient.from_settings(settings)
    message = str(raised.value)
    assert "\n" not in message and "OPENAI_BASE_URL" in message


def test_stub_stops_by_itself_when_idle(tmp_path: Path) -> None:
    stub = start_stub([], tmp_path, idle=0.5)
    try:
        assert stub.process.wait(timeout=10) == 0
    finally:
        stub.stop()
