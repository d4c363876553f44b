"""Fail points: named places where a test can make this process die, as a power cut or ``kill -9`` would.

Crash consistency is claimed line by line ("a process killed here leaves a state the next run repairs"); a fail
point lets ``tests/test_crash_recovery.py`` aim a SIGKILL at exactly such a line instead of hoping a timer lands
there. ``PAPERLAKE_FAILPOINT=<name>[@<n>]`` kills the process group at the n-th time (default the first) this
process reaches ``fault_point(name)``. The whole group goes, so dbt's subprocess dies with the ingest, as it does
when a user's terminal or a scheduler kills the job. Unset (always, outside those tests), a fail point costs one
dictionary lookup.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "PAPERLAKE_FAILPOINT"
_hits: Counter[str] = Counter()


def fault_point(name: str) -> None:
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    target, _, nth = wanted.partition("@")
    if target != name:
        return
    _hits[name] += 1
    if _hits[name] == int(nth or 1):
        os.killpg(os.getpgid(0), signal.SIGKILL)
