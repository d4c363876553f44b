"""dagster-dbt asks `dbt --version` for every new resource instance (one per Dagster run); ours asks once per process,
and not at all for the dbt of this environment, whose version is dbt-core's."""

import subprocess
from pathlib import Path

import pytest


@pytest.fixture
def warehouse(dbt_manifest):
    """assets.warehouse, imported once `dbt parse` has made the manifest its dbt assets are defined from (a fresh
    clone has none before the session's dbt_manifest fixture runs)."""
    from assets import warehouse

    warehouse.dbt_cli_version.cache_clear()
    yield warehouse
    warehouse.dbt_cli_version.cache_clear()


def test_the_environments_dbt_is_read_without_starting_it_and_agrees_with_it(warehouse, monkeypatch):
    said = subprocess.run([warehouse.DBT_EXECUTABLE, "--version"], capture_output=True, text=True, check=True).stdout

    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(warehouse.subprocess, "run", refuse)
    resources = [warehouse.dbt_cli_resource(), warehouse.dbt_cli_resource()]  # as two runs make them
    versions = {str(resource._cli_version) for resource in resources}
    assert len(versions) == 1
    assert f"installed: {versions.pop()}" in said


def test_another_dbt_is_asked_once_per_process(warehouse, tmp_path: Path):
    calls = tmp_path / "calls"
    fake = tmp_path / "dbt"
    fake.write_text(f"#!/bin/sh\necho x >> '{calls}'\necho 'Core:'\necho '  - installed: 1.9.3'\n")
    fake.chmod(0o755)
    assert warehouse.dbt_cli_version(str(fake)) == "1.9.3"
    assert warehouse.dbt_cli_version(str(fake)) == "1.9.3"
    assert calls.read_text().count("x") == 1


def test_an_unreadable_version_is_a_clear_error(warehouse, tmp_path: Path):
    fake = tmp_path / "dbt"
    fake.write_text("#!/bin/sh\necho 'no version here'\n")
    fake.chmod(0o755)
    with pytest.raises(ValueError, match="could not read dbt's version"):
        warehouse.dbt_cli_version(str(fake))
