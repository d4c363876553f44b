"""The console entry (`cli.entry`): the commands that run Dagster freeze its objects before DuckDB is imported, and
the others start without Dagster. Each case runs in a fresh interpreter, as the console script does."""

from __future__ import annotations

import os
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


@pytest.mark.parametrize(
    ("argv", "code", "said"),
    [
        (["--help"], 0, "╰"),
        (["sql"], 2, "Missing argument"),
        (["status", "--home", "{home}"], 1, "no warehouse at"),
    ],
    ids=["ok", "usage", "failed"],
)
def test_the_entry_ends_with_the_commands_code_after_every_exit_handler(tmp_path, argv, code, said):
    """The process skips the interpreter's teardown, not the exit handlers a library registers while the command
    runs (Python runs them last registered first), nor the command's code, nor output still in a stream's buffer."""
    marker = tmp_path / "handler-ran"
    argv = [a.format(home=tmp_path / "home") for a in argv]
    script = (
        "import atexit, sys\n"
        f"sys.argv = ['paperlake', *{argv!r}]\n"
        "import cli.app\n"
        "command = cli.app.main\n"
        "def with_a_library_handler():\n"
        f"    atexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))  # as logging, Dagster do\n"
        "    atexit.register(print, 'a line left in the buffer')\n"
        "    command()\n"
        "cli.app.main = with_a_library_handler\n"
        "from cli.entry import main\n"
        "main()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe's stdout is block-buffered
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO, env=env
    )
    assert done.returncode == code, done.stderr[-2000:]
    assert said in done.stdout + done.stderr and marker.read_text() == "ran"
    assert done.stdout.endswith("a line left in the buffer\n")
    assert "Traceback" not in done.stderr and "leaked" not in done.stderr
