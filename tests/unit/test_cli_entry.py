"""The console entry (`cli.entry`): the commands that run Dagster freeze its objects before DuckDB is imported, and
the others start without Dagster. Each case runs in a fresh interpreter, as the console script does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _start(*argv: str) -> str:
    code = (
        "import gc, sys\n"
        f"sys.argv = ['paperlake', *{list(argv)!r}]\n"
        "from cli.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('STATE', 'dagster' in sys.modules, gc.get_freeze_count() > 10000)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0 and "leaked" not in done.stderr, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("command", ["ingest", "enrich"])
def test_a_dagster_command_freezes_dagsters_objects(command):
    assert _start(command, "--help") == "STATE True True"


def test_other_commands_start_without_dagster():
    assert _start("sql", "--help") == "STATE False False"
