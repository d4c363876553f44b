"""Runs launched through the Dagster webserver of this home, so that they are the UI's own runs.

A run that `paperlake ingest` executes in its own process is recorded in the instance, but Dagster gives it no
code-location origin: the UI lists it on the Runs page only, not on its job's page or the Overview timeline, and
cannot re-execute it (a re-execution starts from the origin). Dagster's public way to start a run *with* that
origin is to ask the code location for it, through the webserver's GraphQL API (:class:`dagster_graphql.
DagsterGraphQLClient`, documented): that is what this module does when ``PAPERLAKE_DAGSTER_URL`` names the
webserver of this home (``./run ui`` serves one on http://127.0.0.1:3000). The runs are then the same jobs, with
the same partitions, selections and tags, launched by the instance's run launcher in a process of their own, and
everything the UI offers for a run (lineage, logs, re-execution from failure) works for them.

The run's inputs that are this ingest's and not the code location's (its inbox folders and MinerU outputs) travel
as run tags (``paperlake.config.RUN_INBOXES_TAG``, ``RUN_MINERU_TAG``), which the parse asset reads first.
The webserver must serve the same Dagster instance (``$PAPERLAKE_HOME/dagster``): a run it launched elsewhere is
refused with one line.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import urlparse

LOCATION = "orchestration.definitions"  # workspace.yaml's code location (a python module's name)
REPOSITORY = "__repository__"  # the Definitions' repository


URL_FILE = "webserver.url"  # in DAGSTER_HOME: written by `./run ui` for the webserver it starts


def webserver_url(configured: str | None, dagster_home: Any) -> str | None:
    """The webserver to launch runs through: ``PAPERLAKE_DAGSTER_URL``, else the one `./run ui` recorded in the
    home's Dagster folder if it answers now (a UI stopped since is not waited for); None: run in process."""
    if configured:
        return configured
    try:
        url = (Path(dagster_home) / URL_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/server_info", timeout=2) as answer:
            return url if answer.status == 200 else None
    except (OSError, ValueError):
        return None


class LaunchError(RuntimeError):
    """The webserver refused the run, or serves another instance: one line saying which and what to do."""


@dataclass(frozen=True)
class LaunchedRun:
    success: bool
    reason: str = ""
    run_id: str = ""


class Launcher:
    """Launches named jobs through the webserver at ``url`` and waits for each in ``instance`` (the same one)."""

    def __init__(self, url: str, instance: Any, poll_seconds: float = 0.5) -> None:
        from dagster_graphql import DagsterGraphQLClient  # deferred: dagster_graphql

        parsed = urlparse(url if "://" in url else f"http://{url}")
        self.url = url
        self.instance = instance
        self.poll_seconds = poll_seconds
        self.client = DagsterGraphQLClient(
            parsed.hostname or "127.0.0.1",
            port_number=parsed.port,
            use_https=parsed.scheme == "https",
            path_prefix=parsed.path.rstrip("/"),
        )

    def submit(
        self,
        job_name: str,
        *,
        tags: dict[str, str],
        asset_selection: Iterable[Any] | None = None,
        run_config: dict | None = None,
    ) -> str:
        """Submit ``job_name`` to the webserver without waiting: the run's id. The instance's run coordinator
        decides when it starts (Dagster's queue with its limits when a daemon serves it, at once otherwise)."""
        from dagster_graphql import DagsterGraphQLClientError  # deferred: dagster_graphql

        try:
            return self.client.submit_job_execution(
                job_name,
                repository_location_name=LOCATION,
                repository_name=REPOSITORY,
                run_config=run_config or {},
                tags=tags,
                asset_selection=list(asset_selection) if asset_selection is not None else None,
            )
        except DagsterGraphQLClientError as error:
            raise LaunchError(f"the Dagster webserver at {self.url} refused {job_name}: {error}") from None
        except OSError as error:
            raise LaunchError(f"cannot reach the Dagster webserver at {self.url}: {error}") from None

    def wait(self, run_id: str) -> LaunchedRun:
        """Wait for the run to finish; its success, and for a failure the reason its failed steps give."""
        deadline = time.monotonic() + 30
        while (run := self.instance.get_run_by_id(run_id)) is None:
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"the Dagster webserver at {self.url} launched run {run_id} into another instance than "
                    f"{os.environ.get('DAGSTER_HOME') or 'this home'}'s: start it for this home (./run ui with "
                    "the same PAPERLAKE_HOME), or unset PAPERLAKE_DAGSTER_URL"
                )
            time.sleep(self.poll_seconds)
        while not run.is_finished:
            time.sleep(self.poll_seconds)
            run = self.instance.get_run_by_id(run_id)
        success = run.status.value == "SUCCESS"
        return LaunchedRun(success, "" if success else run_failure_reason(self.instance, run_id), run_id)


def step_failure_reason(events: Iterable[Any]) -> str:
    """The innermost error of each failed step (Dagster's step-failure events), on one line (the stack traces stay in
    the instance); for a failed dbt command, dbt's first error and what it says."""
    reasons = []
    for event in events:
        error = event.step_failure_data.error
        dbt = None
        while error is not None:
            dbt = dbt or _dbt_reason(error.message or "")
            if error.cause is None:
                break
            error = error.cause
        # the last line that says something (a gRPC error's repr ends with a lone ">")
        message = [line.strip() for line in (error.message if error is not None else "").splitlines()]
        message = [line for line in message if line.strip("<>")]
        reasons.append(f"{event.step_key}: {dbt or (message[-1] if message else 'unknown error')}")
    return "; ".join(reasons) or "the run failed; see it in the Dagster UI"


def run_failure_reason(instance: Any, run_id: str) -> str:
    import dagster as dg  # deferred: dagster

    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_FAILURE).records
    return step_failure_reason(record.event_log_entry.dagster_event for record in records)


_DBT_ERRORS = "Errors parsed from dbt logs:"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _dbt_reason(message: str) -> str | None:
    """dbt's first error in dagster-dbt's message of a failed dbt command ("Runtime Error in model x (path): what
    went wrong"), without dbt's progress lines, macro call stack and SQL position markers; None for another error."""
    if _DBT_ERRORS not in message:
        return None
    lines = [line.strip() for line in _ANSI.sub("", message.split(_DBT_ERRORS, 1)[1]).splitlines()]
    lines = [
        line
        for line in lines
        if line.strip("^~ ")
        and not line.startswith(">")
        and not line.startswith("Failure in ")
        and not re.match(r"\d+ of \d+ ", line)
    ]
    for index, line in enumerate(lines):
        if re.search(r"\bError\b", line):
            detail = lines[index + 1] if index + 1 < len(lines) else ""
            return f"{line}: {detail}" if detail else line
    return lines[0] if lines else None
