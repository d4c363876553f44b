"""A build stage's dbt target folder is emptied before each build but for dbt's partial-parse state; a stage without
state of its own starts from the newest state of another stage of the same home."""

from __future__ import annotations

import os

from paperlake.warehouse import dbt_target_path, empty_dbt_target


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
