"""A step's independent, CPU-bound items spread over the machine's cores, inside the step.

Dagster schedules the step; how the step uses the cores it runs on is its own business, as the encoders' threads
are. :func:`map_ordered` runs a function over items in a process pool that lives exactly as long as the call: its
workers are started with ``spawn`` (never a fork of a process that holds Dagster's, gRPC's or DuckDB's threads), each
ends with the process that started it (Linux's parent-death signal, checked once at start), and the pool is shut down
before the call returns. The parse step uses it for a run's papers (:func:`paperlake.lake.pipeline.ingest_papers`).

A worker that dies (a signal, the memory limit) breaks the pool: every item it had not answered is then run again
in a pool of its own, one at a time, so the item that kills its process is the one that gets ``crashed(item)``'s
result and the others theirs. The function must return its failures as values: an exception it raises is raised
here. As with any ``spawn`` worker, Python imports the caller's main module again in each worker: a script that
ingests keeps its work under ``if __name__ == "__main__"`` (the console scripts, Dagster's and Celery's do).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

R = TypeVar("R")


def workers_for(configured: int, items: int) -> int:
    """How many processes for ``items``: ``configured`` (0: every core), never more than the items; 1 (this process)
    in a daemonic process, which may not start children."""
    if multiprocessing.current_process().daemon:
        return 1
    wanted = configured if configured > 0 else (os.cpu_count() or 1)
    return max(1, min(wanted, items))


def map_ordered(
    function: Callable[..., R],
    items: Sequence[tuple[Any, ...]],
    workers: int,
    crashed: Callable[[tuple[Any, ...], str], R],
    while_waiting: Callable[[], object] | None = None,
) -> list[R]:
    """``function(*item)`` for each item, in the items' order: in this process when ``workers`` is 1, else in a pool
    of ``workers`` processes (``function`` must be importable by name, its arguments and results picklable).
    ``while_waiting`` runs here once the items are handed out (what this process would otherwise wait idle for);
    ``crashed(item, why)`` is the result of an item whose process died."""
    if workers <= 1:
        if while_waiting is not None:
            while_waiting()
        return [function(*item) for item in items]
    results: list[R] = []
    with _pool(workers) as pool:
        futures = [pool.submit(function, *item) for item in items]
        if while_waiting is not None:
            while_waiting()
        for item, future in zip(items, futures):
            try:
                results.append(future.result())
            except BrokenProcessPool:
                results.append(_alone(function, item, crashed))
    return results


def _alone(function: Callable[..., R], item: tuple[Any, ...], crashed: Callable[[tuple[Any, ...], str], R]) -> R:
    with _pool(1) as pool:
        try:
            return pool.submit(function, *item).result()
        except BrokenProcessPool:
            return crashed(item, "the process running it died (a signal or the memory limit)")


def _pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_end_with_parent,
        initargs=(os.getpid(),),
    )


def _end_with_parent(parent: int) -> None:
    """A worker's start: it gets SIGKILL when its parent dies (a step killed mid-parse leaves no worker behind), and
    ends at once if the parent is already gone."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes  # deferred: only a worker's start needs it

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)
