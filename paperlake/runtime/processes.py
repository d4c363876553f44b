"""Child processes: the one way every server and worker of paperlake is ended, and whether a pid still runs."""

from __future__ import annotations

import os
import subprocess


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
