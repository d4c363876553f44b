"""Stopping a child process: the one way every helper, server and worker of paperlake is ended."""

from __future__ import annotations

import subprocess


def stop_process(process: subprocess.Popen, grace: float = 5.0) -> int:
    """SIGTERM ``process`` if it still runs, wait ``grace`` seconds, then SIGKILL it; returns its exit code (reaped,
    so no zombie is left)."""
    if process.poll() is None:
        process.terminate()
    try:
        return process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()
