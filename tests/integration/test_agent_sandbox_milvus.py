"""The agent's vector action fenced by the real vector layer: its filter validator on a Milvus Lite file (the rest of
the sandbox, on fakes, is tests/unit/test_agent_sandbox.py)."""

from __future__ import annotations

from agent.actions import RetrieveFromVectorstore
from support.agent_fixtures import env, home  # noqa: F401 (fixtures)


def test_the_vector_layers_filter_error_becomes_an_observation(env, tmp_path) -> None:  # noqa: F811
    """The real vector layer's validator, on a real (empty) Milvus Lite file: refused before any search."""
    from agent.backends import MilvusVectors
    from paperlake.vectors.store import VectorStore

    env.vectors = MilvusVectors(VectorStore(tmp_path / "milvus.db", cache_path=tmp_path / "cache.sqlite"))
    env._collections = None
    try:
        observation = RetrieveFromVectorstore(
            "accuracy", "text_bm25_en", "chunks", "text_content", "page_number == 'two'", 5
        ).execute(env)
    finally:
        env.vectors.close()
        env.vectors = None
    assert observation.error_type == "invalid_filter", observation.text
