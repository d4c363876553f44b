"""Functions for :mod:`paperlake.runtime.cores`'s tests: importable by name, as its spawned workers need."""

from __future__ import annotations

import os
import signal
import time


def square(number: int) -> tuple[int, int]:
    return number * number, os.getpid()


def square_or_die(number: int) -> tuple[int, int]:
    """Kills its own process on 3: what a parser's segfault does to its worker."""
    if number == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.05)
    return number * number, os.getpid()
