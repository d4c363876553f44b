"""A full disk or an unwritable home is the operator's to fix: `paperlake` says so in one line and exits 1, with
no traceback and no "a bug" log entry, whichever library raised it (sqlalchemy for Dagster's storage, sqlite3 for the
caches, an OSError from a plain write). A real bug still gets its traceback logged."""

from __future__ import annotations

import errno
import sqlite3
import sys

import pytest
import sqlalchemy.exc

import cli.app as cli_app


def run_main(monkeypatch, capsys, tmp_path, error: BaseException) -> tuple[int, str]:
    def fails(*args, **kwargs):
        raise error

    monkeypatch.setenv("PAPERLAKE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(cli_app, "app", fails)
    monkeypatch.setattr(sys, "argv", ["paperlake", "status"])
    with pytest.raises(SystemExit) as ended:
        cli_app.main()
    captured = capsys.readouterr()
    return ended.value.code, captured.out + captured.err


def full_event_log() -> BaseException:
    """What Dagster's SQLite event log raises on a full disk: sqlalchemy wrapping sqlite3."""
    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as inner:
            raise sqlalchemy.exc.OperationalError("INSERT INTO event_logs ...", {}, inner) from inner
    except sqlalchemy.exc.OperationalError as outer:
        return outer


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (full_event_log(), "database or disk is full"),
        (sqlite3.OperationalError("attempt to write a readonly database"), "readonly database"),
        (OSError(errno.ENOSPC, "No space left on device", "/home/x/lake/chunks/p.parquet"), "No space left"),
        (PermissionError(errno.EACCES, "Permission denied", "/home/x/warehouse.duckdb"), "warehouse.duckdb"),
    ],
    ids=["sqlalchemy-full", "sqlite-readonly", "oserror-full", "oserror-permission"],
)
def test_an_operational_error_is_one_line_and_not_a_bug(monkeypatch, capsys, tmp_path, error, said):
    code, output = run_main(monkeypatch, capsys, tmp_path, error)
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 1
    assert len(lines) == 1 and said in lines[0] and "check free space, permissions" in lines[0], output
    assert "Traceback" not in output and "a bug" not in output
    assert not (tmp_path / "home" / "logs" / "cli-errors.log").exists()


def test_a_wrapped_error_that_is_not_operational_is_still_a_bug(monkeypatch, capsys, tmp_path):
    try:
        try:
            raise KeyError("paper_id")
        except KeyError as inner:
            raise RuntimeError("the step failed") from inner
    except RuntimeError as outer:
        error = outer
    code, output = run_main(monkeypatch, capsys, tmp_path, error)
    assert code == 1 and "a bug: the traceback is in" in output
    assert "KeyError" in (tmp_path / "home" / "logs" / "cli-errors.log").read_text()
