"""A build stage's dbt target folder is emptied before each build but for dbt's partial-parse state; a stage without
state of its own starts from the newest state of another stage of the same home, else from the project's shared
parse when that was made under the same profile (the side file named relative to the warehouse's folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from paperlake.warehouse.build import (
    SHARED_PARSE_ENV,
    build_path,
    dbt_env,
    dbt_target_path,
    empty_dbt_target,
    seed_parse_state,
    shared_parse_record,
)
from paperlake.warehouse.dbt_launcher import WORKDIR_VAR


def _write(path, data: bytes, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_a_stage_keeps_its_own_state_and_nothing_else(tmp_path):
    target = dbt_target_path(tmp_path, "warehouse")
    _write(target / "partial_parse.msgpack", b"own")
    _write(target / "run_results.json", b"{}")
    _write(target / "compiled" / "model.sql", b"select 1")
    _write(dbt_target_path(tmp_path, "formula_models") / "partial_parse.msgpack", b"sibling")
    empty_dbt_target(target)
    assert sorted(p.name for p in target.iterdir()) == ["partial_parse.msgpack"]
    assert (target / "partial_parse.msgpack").read_bytes() == b"own"


def test_a_fresh_stage_starts_from_the_newest_sibling_state(tmp_path):
    _write(dbt_target_path(tmp_path, "warehouse") / "partial_parse.msgpack", b"older", mtime=1_000)
    _write(dbt_target_path(tmp_path, "other") / "partial_parse.msgpack", b"newer", mtime=2_000)
    target = dbt_target_path(tmp_path, "formula_models")
    empty_dbt_target(target)
    assert [p.name for p in target.iterdir()] == ["partial_parse.msgpack"]
    assert (target / "partial_parse.msgpack").read_bytes() == b"newer"


def test_a_fresh_home_has_no_state_to_start_from(tmp_path):
    target = dbt_target_path(tmp_path, "warehouse")
    empty_dbt_target(target)
    assert not target.exists()


def _shared(tmp_path, made_under: dict | None, state: bytes = b"shared") -> Path:
    """The project's shared parse, recorded as made under ``made_under`` (with the state's sha256, as
    orchestration.run.prepare_dbt_manifest records it)."""
    shared = tmp_path / "project-target"
    _write(shared / "partial_parse.msgpack", state)
    if made_under is not None:
        _write(shared / SHARED_PARSE_ENV, json.dumps(shared_parse_record(made_under, state)).encode())
    return shared


def test_homes_of_one_layout_share_a_profile_and_a_new_one_starts_from_the_shared_parse(tmp_path):
    first = dbt_env(tmp_path / "a" / "lake", tmp_path / "a" / "warehouse.duckdb")
    second = dbt_env(tmp_path / "b" / "lake", tmp_path / "b" / "warehouse.duckdb")
    assert first["PAPERLAKE_DBT_TARGET_PATH"] == second["PAPERLAKE_DBT_TARGET_PATH"] == "warehouse.build.duckdb"
    assert second[WORKDIR_VAR] == str(tmp_path / "b")
    absolute = dbt_env(tmp_path / "b" / "lake", tmp_path / "b" / "warehouse.duckdb", relative=False)
    assert absolute["PAPERLAKE_DBT_TARGET_PATH"] == str(build_path(tmp_path / "b" / "warehouse.duckdb"))

    shared = _shared(tmp_path, {"PAPERLAKE_DBT_TARGET_PATH": "warehouse.build.duckdb"})
    target = dbt_target_path(tmp_path / "b", "warehouse")
    assert seed_parse_state(target, second, shared)
    assert (target / "partial_parse.msgpack").read_bytes() == b"shared"
    # the stage's own state, once it has one, wins over the shared parse
    _write(target / "partial_parse.msgpack", b"own")
    assert seed_parse_state(target, second, shared)
    empty_dbt_target(target, second, shared)
    assert (target / "partial_parse.msgpack").read_bytes() == b"own"
    # a stage emptied with nothing of its own or its home's starts from the shared parse too
    fresh = dbt_target_path(tmp_path / "c", "formula_models")
    empty_dbt_target(fresh, dbt_env(tmp_path / "c" / "lake", tmp_path / "c" / "warehouse.duckdb"), shared)
    assert (fresh / "partial_parse.msgpack").read_bytes() == b"shared"


def test_a_home_with_another_profile_or_an_unrecorded_shared_parse_gets_no_state(tmp_path):
    other = dbt_env(tmp_path / "lake", tmp_path / "custom.duckdb")  # another side-file name: another profile
    target = dbt_target_path(tmp_path, "warehouse")
    assert not seed_parse_state(
        target, other, _shared(tmp_path, {"PAPERLAKE_DBT_TARGET_PATH": "warehouse.build.duckdb"})
    )
    assert not target.exists()
    default = dbt_env(tmp_path / "lake", tmp_path / "warehouse.duckdb")
    # the shared parse made again by another hand since it was recorded (dagster-dbt's prepare_if_dev under
    # `dagster dev` parses there, under the profile of a plain dbt run): its state seeds nothing
    shared = _shared(tmp_path / "reparsed", {"PAPERLAKE_DBT_TARGET_PATH": "warehouse.build.duckdb"})
    _write(shared / "partial_parse.msgpack", b"parsed under another profile")
    assert not seed_parse_state(target, default, shared)
    assert not target.exists()
    for record in (None, "not json"):  # a parse whose record was never written (or is being rewritten)
        shared = tmp_path / "unrecorded"
        _write(shared / "partial_parse.msgpack", b"shared")
        (shared / SHARED_PARSE_ENV).unlink(missing_ok=True)
        if record is not None:
            _write(shared / SHARED_PARSE_ENV, record.encode())
        assert not seed_parse_state(target, default, shared)
        assert not target.exists()


def test_the_launcher_runs_dbt_in_the_folder_the_environment_names(tmp_path):
    """dagster-dbt starts ``paperlake-dbt`` in the project folder; it moves to the warehouse's folder before it
    becomes dbt (no zygote here: it execs dbt, a stand-in that prints the folder it runs in)."""
    home = tmp_path / "home"
    home.mkdir()
    stand_in = tmp_path / "dbt"
    stand_in.write_text(f"#!{sys.executable}\nimport os\nprint(os.getcwd())\n")
    stand_in.chmod(0o755)
    env = dict(os.environ)
    code = (
        "import sys, paperlake.warehouse.dbt_launcher as launcher; "
        f"launcher.real_dbt = lambda: {str(stand_in)!r}; sys.argv = ['paperlake-dbt', 'build']; launcher.main()"
    )
    for workdir, expected in ((str(home), home), (None, tmp_path)):
        env.pop(WORKDIR_VAR, None)
        if workdir:
            env[WORKDIR_VAR] = workdir
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(expected)


def test_dbt_logs_to_its_file_at_info_unless_told_otherwise(tmp_path, monkeypatch):
    """dbt's own file log defaults to debug (every query, ~4 MB per build); an ingest writes it at info, and a user's
    DBT_LOG_LEVEL_FILE still wins."""
    monkeypatch.delenv("DBT_LOG_LEVEL_FILE", raising=False)
    assert dbt_env(tmp_path / "lake", tmp_path / "warehouse.duckdb")["DBT_LOG_LEVEL_FILE"] == "info"
    monkeypatch.setenv("DBT_LOG_LEVEL_FILE", "debug")
    assert dbt_env(tmp_path / "lake", tmp_path / "warehouse.duckdb")["DBT_LOG_LEVEL_FILE"] == "debug"
