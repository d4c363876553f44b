"""dbt's own unit tests of the marts with logic (``dbt_project/models/marts/_unit_tests.yml``): the volumes rollup
and the bounding-box macro, on fixture rows, against a warehouse built empty from an empty lake. A wrong expectation
makes `dbt test` fail, and so this test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from paperlake.config import Settings
from paperlake.lake.store import Lake
from paperlake.warehouse.build import dbt_env
from paperlake.warehouse.dbt_launcher import WORKDIR_VAR


def _dbt(args: list[str], env: dict[str, str], target: Path) -> subprocess.CompletedProcess:
    dbt = str(Path(sys.executable).with_name("dbt"))
    return subprocess.run(
        [dbt, *args, "--target-path", str(target)],
        cwd=env[WORKDIR_VAR],  # the profile names the side file relative to the warehouse's folder
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_marts_unit_tests_pass(tmp_path, dbt_manifest):
    settings = Settings.from_env(home=tmp_path)
    Lake(settings.lake).ensure_contract()
    settings.warehouse.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **dbt_env(settings.lake, settings.warehouse)}
    target = tmp_path / "target"
    # the unit tests read their models' parents' columns from the database: build those (empty) first
    built = _dbt(
        ["run", "--empty", "--select", "+volumes", "+equations", "--exclude", "volumes", "equations"], env, target
    )
    assert built.returncode == 0, built.stdout[-3000:]
    tested = _dbt(["test", "--select", "test_type:unit"], env, target)
    assert tested.returncode == 0, tested.stdout[-3000:]
    results = json.loads((target / "run_results.json").read_text())["results"]
    unit = [r for r in results if r["unique_id"].startswith("unit_test.")]  # the others are the project's hooks
    assert sorted((r["unique_id"].split(".")[-1], r["status"]) for r in unit) == [
        ("equations_round_boxes_to_whole_points_and_fall_back_to_the_text", "pass"),
        ("volumes_counts_papers_pages_failures_and_llm_usage_per_volume", "pass"),
    ]
