"""The Dagster UI (dagster-webserver) over an ingested home, for tests: started on 127.0.0.1 on a free port, asked
through its GraphQL endpoint, stopped by pid (and it stops by itself after ``lifetime`` seconds)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def webserver(home: Path, inbox: Path, mineru_dir: Path | None, lifetime: int = 300, **env: str) -> Iterator[str]:
    """Yields the base URL once the code location has loaded (``dagster-webserver`` alone: the home's instance
    starts runs at once, or queues them for a daemon that is not there); ``env``: more variables for it."""
    from orchestration.local_cluster import dagster_webserver

    env = {"DAGSTER_HOME": str(home / "dagster"), "PAPERLAKE_HOME": str(home), "PAPERLAKE_INBOX": str(inbox)} | env
    if mineru_dir:
        env["PAPERLAKE_MINERU_DIR"] = str(mineru_dir)
    with dagster_webserver(env, home / "logs" / "webserver.log", daemon=False, lifetime=lifetime) as url:
        yield url


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
