"""dagster-dbt asks `dbt --version` of its documented ``dbt_executable`` for every run's resource; ours,
`paperlake-dbt`, answers from dbt-core's installed metadata without importing dbt, what dbt itself would say."""

import importlib.metadata
import subprocess
import time

import pytest


@pytest.fixture
def warehouse(dbt_manifest):
    """assets.warehouse, imported once `dbt parse` has made the manifest its dbt assets are defined from."""
    from assets import warehouse

    return warehouse


def test_the_launcher_answers_the_version_as_dbt_does_without_importing_dbt(warehouse):
    from paperlake.warehouse.dbt_launcher import real_dbt

    started = time.perf_counter()
    said = subprocess.run([warehouse.DBT_EXECUTABLE, "--version"], capture_output=True, text=True, check=True).stdout
    quick = time.perf_counter() - started
    version = importlib.metadata.version("dbt-core")
    assert f"installed: {version}" in said
    dbt_said = subprocess.run([real_dbt(), "--version"], capture_output=True, text=True, check=True).stdout
    assert f"installed: {version}" in dbt_said
    print(f"paperlake-dbt --version: {quick:.2f} s")


def test_the_resource_is_dagster_dbts_own_class(warehouse):
    from dagster_dbt import DbtCliResource

    resource = warehouse.dbt_cli_resource()
    assert type(resource) is DbtCliResource and resource.dbt_executable == warehouse.DBT_EXECUTABLE
