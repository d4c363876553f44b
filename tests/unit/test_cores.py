"""A step's items on the machine's cores (paperlake.runtime.cores): results in order, from other processes; a worker
that dies costs exactly the item that killed it; no worker outlives the call."""

from __future__ import annotations

import os

import pytest

from paperlake.runtime.cores import map_ordered, workers_for
from support.core_jobs import square, square_or_die


def crashed(item, why):
    return (-item[0], why)


def test_results_come_in_the_items_order_from_other_processes():
    results = map_ordered(square, [(n,) for n in range(7)], 2, crashed)
    assert [value for value, _ in results] == [n * n for n in range(7)]
    assert os.getpid() not in {pid for _, pid in results}


def test_one_worker_runs_the_items_here_and_still_calls_while_waiting():
    called = []
    results = map_ordered(square, [(2,), (3,)], 1, crashed, while_waiting=lambda: called.append(True))
    assert results == [(4, os.getpid()), (9, os.getpid())] and called == [True]


def test_a_worker_that_dies_costs_only_the_item_that_killed_it():
    results = map_ordered(square_or_die, [(n,) for n in range(1, 6)], 2, crashed)
    assert results[2] == (-3, "the process running it died (a signal or the memory limit)")
    assert [value for value, _ in results[:2] + results[3:]] == [1, 4, 16, 25]


def test_no_worker_outlives_the_call():
    import multiprocessing

    map_ordered(square, [(n,) for n in range(4)], 2, crashed)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(("configured", "items", "expected"), [(0, 10, os.cpu_count() or 1), (3, 2, 2), (1, 9, 1)])
def test_workers_for_takes_every_core_by_default_never_more_than_the_items(configured, items, expected):
    assert workers_for(configured, items) == min(expected, items)
