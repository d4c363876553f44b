"""The example deployment is valid as shipped: Dagster accepts its instance file, and every paperlake variable it sets
is one the settings read."""

from __future__ import annotations

import re
import shutil

from support.fixtures import REPO

DEPLOY = REPO / "deploy"


def test_the_instance_file_validates_against_dagsters_schema(tmp_path):
    from dagster._core.instance.config import dagster_instance_config

    shutil.copy(DEPLOY / "dagster.yaml", tmp_path / "dagster.yaml")
    config, _ = dagster_instance_config(str(tmp_path))
    assert "postgres" in config["storage"]
    assert config["concurrency"]["runs"]["tag_concurrency_limits"][0]["key"] == "paperlake/volume"


def test_every_variable_of_the_environment_file_is_read_by_the_settings():
    names = re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", (DEPLOY / "paperlake.env").read_text(), flags=re.M)
    read = (REPO / "paperlake" / "config.py").read_text()
    paperlake = [name for name in names if not name.startswith("DAGSTER_")]
    assert {"PAPERLAKE_LAKE", "MILVUS_URI", "PAPERLAKE_EXECUTOR", "PAPERLAKE_CELERY_BROKER"} <= set(paperlake)
    assert [name for name in paperlake if f'"{name}"' not in read] == []
    assert {"DAGSTER_HOME", "DAGSTER_PG_HOST"} <= set(names)
    assert all(
        f"env: {name}" in (DEPLOY / "dagster.yaml").read_text() for name in names if name.startswith("DAGSTER_PG_")
    )
