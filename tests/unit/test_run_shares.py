"""`paperlake ingest` with PAPERLAKE_CONCURRENT_RUNS: through the webserver, every share's run is submitted before any
is waited for (the instance's run queue starts them side by side), and a batch whose run failed comes back one paper
per run; without a webserver the runs go one after the other in the process, and the setting says so."""

from __future__ import annotations

import dataclasses
import logging

from orchestration.launch import LaunchedRun
from orchestration.run import RANGE_END_TAG, RANGE_START_TAG, _Runner
from paperlake.config import Settings

ORDER = ["a/1", "a/2", "a/3", "a/4", "b/1"]


class Instance:
    def get_dynamic_partitions(self, name: str) -> list[str]:
        return ORDER


class Launcher:
    """Records what is submitted and waited for; a run fails when it covers a paper of ``failing``."""

    def __init__(self, failing: set[str]):
        self.failing, self.events, self.covers = failing, [], {}

    def submit(self, job_name: str, *, tags: dict, asset_selection=None, run_config=None) -> str:
        run_id = f"r{len(self.covers)}"
        if "dagster/partition" in tags:
            self.covers[run_id] = [tags["dagster/partition"]]
        else:
            first, last = ORDER.index(tags[RANGE_START_TAG]), ORDER.index(tags[RANGE_END_TAG])
            self.covers[run_id] = ORDER[first : last + 1]
        self.events.append(("submit", self.covers[run_id]))
        return run_id

    def wait(self, run_id: str) -> LaunchedRun:
        self.events.append(("wait", self.covers[run_id]))
        failed = set(self.covers[run_id]) & self.failing
        return LaunchedRun(not failed, "; ".join(sorted(failed)), run_id)


def runner(tmp_path, concurrent: int, launcher: Launcher | None) -> _Runner:
    settings = dataclasses.replace(Settings.from_env(home=tmp_path), concurrent_runs=concurrent, dagster_url=None)
    made = _Runner(lambda: None, Instance(), settings)
    made.launcher = launcher
    return made


def test_every_share_is_submitted_before_any_is_waited_for(tmp_path):
    launcher = Launcher(failing=set())
    outcomes = runner(tmp_path, 2, launcher).run_papers("ingest_paper", ["a/1", "a/2", "a/3", "b/1"])
    assert [papers for papers, _ in outcomes] == [["a/1", "a/2"], ["a/3"], ["b/1"]]
    assert all(result.success for _, result in outcomes)
    assert [kind for kind, _ in launcher.events] == ["submit"] * 3 + ["wait"] * 3


def test_a_failed_share_comes_back_one_paper_per_run(tmp_path):
    launcher = Launcher(failing={"a/2"})
    outcomes = runner(tmp_path, 2, launcher).run_papers("ingest_paper", ["a/1", "a/2", "a/3", "a/4"])
    assert [(papers, result.success) for papers, result in outcomes] == [
        (["a/1"], True),
        (["a/2"], False),
        (["a/3", "a/4"], True),
    ]
    assert outcomes[1][1].reason == "a/2"
    # both shares in flight first; the failed one's papers again, at once, then waited for
    assert launcher.events[:2] == [("submit", ["a/1", "a/2"]), ("submit", ["a/3", "a/4"])]
    assert launcher.events[2:5] == [("wait", ["a/1", "a/2"]), ("submit", ["a/1"]), ("submit", ["a/2"])]


def test_one_run_at_a_time_is_submitted_and_waited_for_in_turn(tmp_path):
    launcher = Launcher(failing=set())
    runner(tmp_path, 1, launcher).run_papers("ingest_paper", ["a/1", "b/1"])
    assert [kind for kind, _ in launcher.events] == ["submit", "wait", "submit", "wait"]


def test_concurrent_runs_without_a_webserver_says_they_run_in_turn(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="orchestration.run"):
        made = runner(tmp_path, 3, None)
    assert made.launcher is None
    assert "PAPERLAKE_CONCURRENT_RUNS=3 takes effect through the Dagster webserver" in caplog.text
