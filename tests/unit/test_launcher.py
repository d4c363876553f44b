"""Children started by paperlake (Milvus Lite servers, Redis, Celery workers) are set up by themselves, never by a
fork of a process that may hold gRPC threads: a fork runs gRPC's fork handlers, which aborted a milvus-lite server
before its exec in a full suite run ('epoll_wait error: Bad file descriptor', exit -6). The launcher still gives
them default signal handling and stops them with their parent."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from paperlake.vectors.server import launched
from support.fixtures import REPO


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # our own child: reap it
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def test_a_launched_child_runs_the_command_with_default_signals():
    # the parent ignores SIGTERM (as a background shell job may); the child must not inherit that
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        child = subprocess.Popen(launched(["sleep", "60"]))
    finally:
        signal.signal(signal.SIGTERM, previous)
    try:
        time.sleep(0.5)
        assert child.poll() is None
        assert os.readlink(f"/proc/{child.pid}/exe").endswith("sleep")  # the launcher exec'd the command itself
        child.terminate()
        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()


def test_a_launched_child_stops_when_its_parent_is_killed():
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "from paperlake.vectors.server import launched\n"
            "child = subprocess.Popen(launched(['sleep', '60']))\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        child_pid = int(parent.stdout.readline())
        time.sleep(0.5)
        parent.kill()
        parent.wait(timeout=10)
        assert _gone(child_pid), "the launched child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_no_child_process_is_started_with_a_pre_exec_hook():
    offenders = [
        str(path.relative_to(REPO))
        for package in ("paperlake", "orchestration", "assets", "agent", "cli")
        for path in (REPO / package).rglob("*.py")
        if re.search(r"preexec_fn\s*=", path.read_text())
    ]
    assert offenders == []
