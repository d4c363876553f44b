"""The fixtures and hooks pytest must see, for tests/unit and tests/integration alike. The helpers tests import
(corpus paths, small inboxes, sample ingests, the agent's material, the stub server, ...) are in tests/support."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.fixtures import CORPUS, corpus_missing


@pytest.fixture(scope="session", autouse=True)
def _shared_embedding_cache(tmp_path_factory: pytest.TempPathFactory):
    """One embedding cache for every home of the run (both xdist workers): the suite ingests the same sample papers
    into many fresh homes, and the cache is content-addressed (model, text), so sharing it changes no vector, only
    how often the same text is encoded. Tests that count encodings use caches of their own."""
    if os.environ.get("PAPERLAKE_EMBEDDING_CACHE"):
        yield
        return
    root = tmp_path_factory.getbasetemp()
    shared = (root.parent if root.name.startswith("popen-gw") else root) / "shared-embeddings.sqlite"
    os.environ["PAPERLAKE_EMBEDDING_CACHE"] = str(shared)
    try:
        yield
    finally:
        os.environ.pop("PAPERLAKE_EMBEDDING_CACHE", None)


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The sample corpus (``support.fixtures.CORPUS``: ../shared/corpus beside the repo, or $PAPERLAKE_CORPUS). Every
    test that reads it asks for this fixture, directly or through its module's ``usefixtures("corpus")``, and is
    skipped, with the reason, when the corpus is missing."""
    reason = corpus_missing()
    if reason:
        pytest.skip(reason)
    return CORPUS


@pytest.fixture(scope="session")
def dbt_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`dbt parse` once per session (never at import time)."""
    from orchestration.run import prepare_dbt_manifest
    from paperlake.config import Settings

    home = tmp_path_factory.mktemp("dbt-home")
    return prepare_dbt_manifest(Settings.from_env(home=home))


# The modules that ingest the most, first: pytest-xdist (--dist loadfile) hands out files in collection order, so the
# longest ones start at once instead of ending the run alone on one worker.
HEAVY_FIRST = (
    "test_self_evaluation.py",
    "test_crash_recovery.py",
    "test_crash_recovery_stages.py",
    "test_stores.py",
    "test_enrichment.py",
    "test_dagster_concurrency.py",
    "test_distributed.py",
    "test_ingest.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {name: index for index, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))
