"""`paperlake ingest` with the Dagster webserver of its home (PAPERLAKE_DAGSTER_URL): its runs are launched there,
with the code location's origin, so the UI shows them on their job's page and on the Overview timeline, and can
re-execute them, all of a run or from its failure, as Dagster's GraphQL API (what the UI itself asks) says."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from orchestration.instance import START_AT_ONCE_CONFIG
from support.crash_harness import as_published, failure_lines, null_in_lake
from support.dagster_ui import graphql, webserver
from support.fixtures import CORPUS_MINERU, make_inbox

# two short papers of one volume: one parse run over both, so the launched run parses them in its step's pool
# (paperlake.runtime.cores: spawned workers of a run process Dagster started)
PAPERS = ["emnlp2024-012-numerologic", "emnlp2024-126-embedding-inversion-attack"]  # 7 and 5 pages
PAPERLAKE = str(Path(sys.executable).with_name("paperlake"))
LOCATION = "orchestration.definitions"

JOB_RUNS = """
query JobRuns($selector: PipelineSelector!) {
  pipelineOrError(params: $selector) { __typename ... on Pipeline { runs(limit: 50) { id status } } }
}"""
TIMELINE = """
query Runs($filter: RunsFilter!) {
  runsOrError(filter: $filter, limit: 50) {
    __typename ... on Runs { results { id status tags { key value } repositoryOrigin { repositoryLocationName } } }
  }
}"""
REEXECUTE = """
mutation Reexecute($params: ReexecutionParams!) {
  launchPipelineReexecution(reexecutionParams: $params) {
    __typename ... on LaunchRunSuccess { run { id } } ... on PythonError { message }
  }
}"""
RUN_STATUS = """query Run($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status stepKeysToExecute } } }"""

pytestmark = pytest.mark.usefixtures("corpus")


def test_the_clis_runs_are_the_uis_own(tmp_path, dbt_manifest):
    inbox = make_inbox(tmp_path, PAPERS)
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "dagster").mkdir()
    # no daemon here: runs launch at once (`./run ui` serves `dagster dev`, whose daemon dequeues them)
    (home / "dagster" / "dagster.yaml").write_text(START_AT_ONCE_CONFIG)
    with webserver(home, inbox, CORPUS_MINERU, lifetime=1500) as url:
        env = os.environ | {
            "PAPERLAKE_DAGSTER_URL": url,
            "PAPERLAKE_EVALUATE": "0",  # fewer runs: the probes' jobs are launched the same way
            "DAGSTER_HOME": str(home / "dagster"),
        }

        def ingest() -> subprocess.CompletedProcess:
            return subprocess.run(
                [PAPERLAKE, "ingest", str(inbox), "--home", str(home), "--mineru-dir", str(CORPUS_MINERU)],
                env=env,
                capture_output=True,
                text=True,
                timeout=1200,
            )

        done = ingest()
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "parsed 2" in done.stdout

        selector = {
            "pipelineName": "ingest_paper",
            "repositoryName": "__repository__",
            "repositoryLocationName": LOCATION,
        }
        page = graphql(url, JOB_RUNS, {"selector": selector})["pipelineOrError"]
        assert page["__typename"] == "Pipeline" and page["runs"], page
        runs = graphql(url, TIMELINE, {"filter": {"pipelineName": "ingest_paper"}})["runsOrError"]["results"]
        cli_runs = [r for r in runs if {"key": "paperlake/trigger", "value": "cli"} in r["tags"]]
        assert cli_runs and {r["id"] for r in cli_runs} <= {r["id"] for r in page["runs"]}  # on the job's page
        assert all(r["repositoryOrigin"] == {"repositoryLocationName": LOCATION} for r in cli_runs)  # on the timeline
        for job in ("build_warehouse", "sync_vectors"):
            launched = graphql(url, TIMELINE, {"filter": {"pipelineName": job}})["runsOrError"]["results"]
            assert launched and all(r["repositoryOrigin"] for r in launched), (job, launched)
        # the new graph's collection was synced in the warehouse's run: no run of its own
        assert not graphql(url, TIMELINE, {"filter": {"pipelineName": "build_formulas"}})["runsOrError"]["results"]

        assert _reexecuted(url, cli_runs[0]["id"], "ALL_STEPS")["status"] == "SUCCESS"

        # a warehouse build the CLI launched fails (a lake row breaks a mart's NOT NULL contract): the CLI says so in
        # one line, the failed run is the UI's like any other, and once the row is right the UI re-executes it from
        # the failure: only the dbt step again, not the formula graph made before it
        lake_file, original = null_in_lake(home, PAPERS[0], "sections", "ordinal")
        failed = ingest()
        assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr[-3000:]
        (line,) = failure_lines(failed.stdout + failed.stderr)
        assert line.startswith("failed warehouse: ") and "NOT NULL constraint failed" in line, line
        builds = graphql(url, TIMELINE, {"filter": {"pipelineName": "build_warehouse", "statuses": ["FAILURE"]}})
        (broken,) = builds["runsOrError"]["results"]
        assert broken["repositoryOrigin"] == {"repositoryLocationName": LOCATION}, broken
        lake_file.write_bytes(original)
        as_published(home, lake_file)
        rerun = _reexecuted(url, broken["id"], "FROM_FAILURE")
        assert rerun == {"__typename": "Run", "status": "SUCCESS", "stepKeysToExecute": ["warehouse_models"]}, rerun
        with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
            assert con.execute("select count(*) from sections where ordinal is null").fetchone() == (0,)
        again = ingest()  # what the re-execution built is the warehouse of this lake: nothing fails, nothing is built
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert "rebuilt warehouse" not in again.stdout, again.stdout[-3000:]


def _reexecuted(url: str, parent_run_id: str, strategy: str) -> dict:
    """Re-execute a run as the UI's buttons do (``ALL_STEPS``, ``FROM_FAILURE``); the new run once it ended."""
    launched = graphql(url, REEXECUTE, {"params": {"parentRunId": parent_run_id, "strategy": strategy}})
    relaunched = launched["launchPipelineReexecution"]
    assert relaunched["__typename"] == "LaunchRunSuccess", relaunched
    deadline = time.monotonic() + 600
    run: dict = {}
    while time.monotonic() < deadline:
        run = graphql(url, RUN_STATUS, {"id": relaunched["run"]["id"]})["runOrError"]
        if run.get("status") in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(1)
    return run
