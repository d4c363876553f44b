"""Helpers kept from one ingest to the next of the same process (paperlake.runtime.kept_helpers): the bookkeeping
with fake
helpers, then the two real ones (the warm dbt's zygote, the parse-ahead worker) handed from one use to the next,
never across a changed environment, never busy, and stopped at the end of the keep period."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from paperlake.config import Settings
from paperlake.lake.inbox import scan_inbox
from paperlake.parsing.ahead import ParseAhead
from paperlake.parsing.backends import parse_with
from paperlake.runtime import kept_helpers
from paperlake.runtime.dbt_warm import ENV_VAR, WarmDbt, launcher_path

SYNTHETIC = Path(__file__).parents[1] / "data" / "synthetic"


class Fake:
    def __init__(self) -> None:
        self.running, self.stops = True, 0

    def alive(self) -> bool:
        return self.running

    def stop(self) -> None:
        self.running, self.stops = False, self.stops + 1


@pytest.fixture(autouse=True)
def _nothing_kept(monkeypatch: pytest.MonkeyPatch):
    kept_helpers.stop_all()
    monkeypatch.delenv(kept_helpers.KEEP_VAR, raising=False)
    yield
    kept_helpers.stop_all()


def _wait(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_kept_helper_goes_to_the_next_taker_of_the_same_context_once():
    helper, key = Fake(), kept_helpers.context_key()
    assert kept_helpers.keep("fake", key, helper) and kept_helpers.kept("fake") is helper
    assert kept_helpers.take("fake", kept_helpers.context_key()) is helper and helper.stops == 0
    assert kept_helpers.take("fake", key) is None  # handed on once: it is the taker's now


def test_a_changed_environment_stops_the_kept_helper(monkeypatch: pytest.MonkeyPatch):
    helper = Fake()
    kept_helpers.keep("fake", kept_helpers.context_key(), helper)
    monkeypatch.setenv("PAPERLAKE_SOMETHING_NEW", "1")
    assert kept_helpers.take("fake", kept_helpers.context_key()) is None and helper.stops == 1


def test_the_volatile_variables_do_not_change_the_context(monkeypatch: pytest.MonkeyPatch):
    key = kept_helpers.context_key()
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another test (call)")
    monkeypatch.setenv(ENV_VAR, "1:/tmp/elsewhere.sock")
    monkeypatch.setenv("_RJEM_MALLOC_CONF", "dirty_decay_ms:1")
    assert kept_helpers.context_key() == key
    monkeypatch.chdir(SYNTHETIC)
    assert kept_helpers.context_key() != key


def test_a_dead_helper_is_not_handed_on():
    helper = Fake()
    kept_helpers.keep("fake", kept_helpers.context_key(), helper)
    helper.running = False
    assert kept_helpers.take("fake", kept_helpers.context_key()) is None


def test_a_keep_period_of_zero_stops_the_helper_at_once(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(kept_helpers.KEEP_VAR, "0")
    helper = Fake()
    assert not kept_helpers.keep("fake", kept_helpers.context_key(), helper)
    assert helper.stops == 1 and kept_helpers.kept("fake") is None


def test_the_keep_period_ends_with_the_helper_stopped(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(kept_helpers.KEEP_VAR, "0.2")
    helper = Fake()
    kept_helpers.keep("fake", kept_helpers.context_key(), helper)
    _wait(lambda: helper.stops == 1, timeout=10)
    assert kept_helpers.kept("fake") is None


def test_a_second_helper_kept_of_the_same_kind_replaces_the_first():
    first, second = Fake(), Fake()
    kept_helpers.keep("fake", kept_helpers.context_key(), first)
    kept_helpers.keep("fake", kept_helpers.context_key(), second)
    assert first.stops == 1 and kept_helpers.kept("fake") is second


def test_a_key_from_another_process_is_never_kept_nor_taken():
    helper, key = Fake(), kept_helpers.context_key()
    other = (key[0] + 1, *key[1:])
    assert not kept_helpers.keep("fake", other, helper) and helper.stops == 1
    kept_helpers.keep("fake", key, Fake())
    assert kept_helpers.take("fake", other) is None


# ── the warm dbt's zygote ──


@pytest.mark.skipif(not launcher_path().endswith("paperlake-dbt"), reason="paperlake-dbt is not installed")
def test_the_zygote_goes_to_the_next_ingest_with_each_ingests_own_commands(monkeypatch: pytest.MonkeyPatch):
    def one_ingest(*arguments: str) -> WarmDbt:
        with WarmDbt(keep=True) as warm:
            assert warm.start().wait_ready(), "the zygote did not start"
            assert os.environ[ENV_VAR].startswith(f"{warm.process.pid}:")
            result = subprocess.run([launcher_path(), *arguments], capture_output=True, text=True, timeout=120)
            assert result.returncode in (0, 2), result.stderr
        assert ENV_VAR not in os.environ
        return warm

    first = one_ingest("--version")
    zygote = kept_helpers.kept(WarmDbt.KIND)
    assert zygote is not None and zygote.alive() and not first.reused
    second = one_ingest("no-such-command")
    assert second.reused and kept_helpers.kept(WarmDbt.KIND) is zygote
    assert [c["argv"] for c in first.commands] == [["--version"]]
    assert [(c["argv"], c["exit"]) for c in second.commands] == [(["no-such-command"], 2)]

    monkeypatch.setenv("PAPERLAKE_SOMETHING_NEW", "1")  # another context: a new zygote, the kept one stopped
    third = one_ingest("--version")
    assert not third.reused and kept_helpers.kept(WarmDbt.KIND) is not zygote
    assert zygote.process.poll() is not None and not zygote.directory.exists()


def test_without_keep_the_zygote_stops_with_its_ingest():
    with WarmDbt() as warm:
        assert warm.start().wait_ready(), "the zygote did not start"
        process = warm.process
    assert process.poll() is not None and kept_helpers.kept(WarmDbt.KIND) is None


# ── the parse-ahead worker ──


@pytest.fixture
def synthetic(tmp_path: Path):
    volume = tmp_path / "inbox" / "synthetic"
    volume.mkdir(parents=True)
    for doc in ("syn-001", "syn-002"):
        shutil.copyfile(SYNTHETIC / f"{doc}.pdf", volume / f"{doc}.pdf")
    settings = Settings.from_env(home=tmp_path / "home", backend="pymupdf", mineru_dir=None)
    return scan_inbox([tmp_path / "inbox"]), settings


def _ahead(sources, settings) -> ParseAhead:
    return ParseAhead(sources, {s.paper_key: "pymupdf" for s in sources}, settings, keep=True)


def test_an_idle_worker_goes_to_the_next_ingest_and_parses_the_same(synthetic):
    sources, settings = synthetic
    first = _ahead(sources[:1], settings)
    _wait(lambda: first.stats.papers == 1)
    assert first.take(sources[0], "pymupdf", settings) is not None
    first.close()
    assert kept_helpers.kept(ParseAhead.KIND) is first.worker and first.process.poll() is None

    second = _ahead(sources[1:], settings)
    try:
        assert second.reused and second.process.pid == first.process.pid
        _wait(lambda: second.stats.papers == 1)
        taken = second.take(sources[1], "pymupdf", settings)
        assert taken is not None and taken.views == parse_with("pymupdf", sources[1], settings).views
    finally:
        second.close()
    assert second.stats.errors == []


def test_a_worker_busy_at_the_end_is_stopped_not_kept(synthetic, monkeypatch: pytest.MonkeyPatch):
    sources, settings = synthetic
    ahead = _ahead(sources, settings)
    _wait(lambda: ahead._pipe.locked())  # a paper is on the pipe
    ahead.close()
    assert ahead.process.poll() is not None and kept_helpers.kept(ParseAhead.KIND) is None
