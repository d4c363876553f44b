"""The Dagster UI (dagster-webserver) over an ingested home, for tests: started on 127.0.0.1 on a free port, asked
through its GraphQL endpoint, stopped by pid (and it stops by itself after ``lifetime`` seconds)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def webserver(home: Path, inbox: Path, mineru_dir: Path | None, lifetime: int = 300) -> Iterator[str]:
    """Yields the base URL once the code location has loaded."""
    port = free_port()
    env = os.environ | {
        "DAGSTER_HOME": str(home / "dagster"),
        "PAPERLAKE_HOME": str(home),
        "PAPERLAKE_INBOX": str(inbox),
        "DAGSTER_DISABLE_TELEMETRY": "1",
    }
    if mineru_dir:
        env["PAPERLAKE_MINERU_DIR"] = str(mineru_dir)
    executable = shutil.which("dagster-webserver", path=str(Path(sys.executable).parent)) or "dagster-webserver"
    log = open(home / "logs" / "webserver.log", "w")
    # `timeout` makes the server stop by itself should the test process die before it stops it.
    process = subprocess.Popen(
        ["timeout", str(lifetime), executable, "-h", "127.0.0.1", "-p", str(port), "-w", str(REPO / "workspace.yaml")],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"dagster-webserver exited: {(home / 'logs' / 'webserver.log').read_text()[-2000:]}")
            try:
                located = graphql(
                    url,
                    "{ workspaceOrError { ... on Workspace { locationEntries { "
                    "locationOrLoadError { __typename } } } } }",
                )
                entries = located["workspaceOrError"]["locationEntries"]
                if entries and all(e["locationOrLoadError"] for e in entries):
                    kinds = {e["locationOrLoadError"]["__typename"] for e in entries}
                    if kinds != {"RepositoryLocation"}:
                        raise RuntimeError(f"the code location did not load: {kinds}")
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("dagster-webserver did not load the code location within 120 s")
            time.sleep(1)
        yield url
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        body = json.loads(response.read())
    if body.get("errors"):
        raise AssertionError(body["errors"])
    return body["data"]


def browser() -> str | None:
    """A headless-capable Chromium on PATH, if any."""
    return next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def screenshot(url: str, out: Path, width: int = 1600, height: int = 1000) -> Path | None:
    """A PNG of ``url`` by headless Chromium (Debian's ``chromium``); None when no browser is installed."""
    found = browser()
    if found is None:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            found,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            "--virtual-time-budget=20000",
            f"--screenshot={out}",
            url,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out
