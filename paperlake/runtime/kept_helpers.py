"""Helper processes kept from one ingest to the next ingest of the same process.

An ingest starts two helper processes: the warm dbt's zygote (:mod:`paperlake.runtime.dbt_warm`, which imports dbt)
and the
parse-ahead worker (:mod:`paperlake.parsing.ahead`, which imports Great Expectations and prepares the gate), seconds of
a core each. A process that ingests again (the Python API called in a loop, a notebook, a sensor's host, the test suite)
paid those imports already: the helpers are kept for :data:`KEEP_VAR` seconds after the ingest that used them (default
:data:`DEFAULT_KEEP_SECONDS`; ``0`` stops them with each ingest, as a one-shot ``paperlake ingest`` does in effect), and
the next ingest takes them instead of starting new ones.

What makes a kept helper safe to hand on:

- **It holds no ingest's state.** The zygote never runs a command itself (each is a fresh fork of it); the worker
  gets every paper's settings with the request and reports the inputs it parsed with, which the step compares with
  its own; its only carried state is the prepared quality gate, which depends on no paper.
- **It is taken only by an identical process context**: the same process (not a fork of it), interpreter, import
  path, working directory and environment (:func:`context_key`; the few variables a test runner or the ingest
  itself changes between ingests are left out). Anything else stops it and a new one starts.
- **It is taken only alive and idle**: the owner checks that (a worker with a request in flight at the end of an
  ingest is stopped, not kept), and a helper that died while kept is simply replaced.
- **It never outlives its use by long**: a timer stops it after the keep period, this process's exit stops it,
  and both helpers end by themselves when this process dies (the zygote watches its parent, the worker its pipe).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Protocol

KEEP_VAR = "PAPERLAKE_KEEP_HELPERS_SECONDS"
DEFAULT_KEEP_SECONDS = 300.0
# Variables that change between ingests of one process without changing what a helper would do: pytest's name of
# the running test, the zygote's address (the ingest sets it while its zygote runs), and the Hugging Face offline
# switches the encoders set on their first load (neither helper loads a model); and names starting with "_", which
# libraries set for themselves on import (polars sets _RJEM_MALLOC_CONF, its allocator's settings).
_VOLATILE = frozenset({"PYTEST_CURRENT_TEST", "PAPERLAKE_DBT_ZYGOTE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"})


class Helper(Protocol):
    def alive(self) -> bool: ...

    def stop(self) -> None: ...


def keep_seconds() -> float:
    """How long a helper is kept after its ingest (``$PAPERLAKE_KEEP_HELPERS_SECONDS``; not a number: the default)."""
    try:
        return max(0.0, float(os.environ.get(KEEP_VAR, DEFAULT_KEEP_SECONDS)))
    except ValueError:
        return DEFAULT_KEEP_SECONDS


def context_key() -> tuple:
    """What a helper started now would inherit from this process."""
    environment = tuple(sorted((k, v) for k, v in os.environ.items() if k not in _VOLATILE and not k.startswith("_")))
    return (os.getpid(), sys.executable, tuple(sys.path), os.getcwd(), environment)


_LOCK = threading.Lock()
_KEPT: dict[str, tuple[tuple, Helper, threading.Timer]] = {}


def take(kind: str, key: tuple) -> Helper | None:
    """The helper of ``kind`` kept for the context ``key`` and still alive, now the caller's; else None (a kept one
    for another context, or dead, is stopped)."""
    with _LOCK:
        kept = _KEPT.pop(kind, None)
    if kept is None:
        return None
    kept_key, helper, timer = kept
    timer.cancel()
    if kept_key == key and key[0] == os.getpid() and helper.alive():
        return helper
    _stop_quietly(helper)
    return None


def keep(kind: str, key: tuple, helper: Helper) -> bool:
    """Keep ``helper`` (alive and idle, started in the context ``key``) for the next :func:`take`, for the keep
    period; with a keep period of 0 it is stopped at once. Whether it was kept. A helper of that kind kept before
    is stopped."""
    seconds = keep_seconds()
    if seconds <= 0 or key[0] != os.getpid() or not helper.alive():
        _stop_quietly(helper)
        return False
    timer = threading.Timer(seconds, _expire, args=(kind, helper))
    timer.daemon = True
    with _LOCK:
        previous = _KEPT.pop(kind, None)
        _KEPT[kind] = (key, helper, timer)
    if previous is not None:
        previous[2].cancel()
        _stop_quietly(previous[1])
    timer.start()
    return True


def kept(kind: str) -> Helper | None:
    """The helper of ``kind`` kept now, if any (for tests and status)."""
    with _LOCK:
        entry = _KEPT.get(kind)
    return None if entry is None else entry[1]


def stop_all() -> None:
    """Stop every kept helper (at this process's exit; tests that count processes)."""
    with _LOCK:
        entries = list(_KEPT.values())
        _KEPT.clear()
    for key, helper, timer in entries:
        timer.cancel()
        if key[0] == os.getpid():  # a fork's copy of the table names its parent's helpers: not its own to stop
            _stop_quietly(helper)


def _expire(kind: str, helper: Helper) -> None:
    with _LOCK:
        entry = _KEPT.get(kind)
        if entry is None or entry[1] is not helper:
            return
        del _KEPT[kind]
    _stop_quietly(helper)


def _stop_quietly(helper: Helper) -> None:
    try:
        helper.stop()
    except Exception:  # a helper that cannot be stopped cleanly ends with this process anyway
        pass


atexit.register(stop_all)
