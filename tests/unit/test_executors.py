"""The executor is configuration: each name maps to Dagster's executor and a run-config block, bad names fail."""

from __future__ import annotations

import dagster as dg
import pytest

from orchestration.executors import EXECUTORS, execution_config, executor_definition, reconstructable_job
from paperlake.config import Settings


def _settings(tmp_path, **values) -> Settings:
    return Settings.from_env(home=tmp_path, **values)


def test_each_executor_name_maps_to_dagsters_executor(tmp_path):
    from dagster_celery import celery_executor

    expected = {
        "in_process": dg.in_process_executor,
        "multiprocess": dg.multiprocess_executor,
        "celery": celery_executor,
    }
    assert set(expected) == set(EXECUTORS)
    for name, definition in expected.items():
        assert executor_definition(_settings(tmp_path, executor=name)) is definition


def test_run_config_carries_the_broker_and_the_module_workers_import(tmp_path):
    celery = execution_config(_settings(tmp_path, executor="celery", celery_broker="redis://10.0.0.5:6379/1"))
    config = celery["execution"]["config"]
    assert config["broker"] == config["backend"] == "redis://10.0.0.5:6379/1"
    assert config["include"] == ["orchestration.definitions"]
    separate = execution_config(
        _settings(tmp_path, executor="celery", celery_broker="redis://a:1/0", celery_backend="redis://b:2/0")
    )
    assert separate["execution"]["config"]["backend"] == "redis://b:2/0"
    assert execution_config(_settings(tmp_path)) == {}
    multiprocess = execution_config(_settings(tmp_path, executor="multiprocess"))
    assert multiprocess == {
        "execution": {
            "config": {
                "max_concurrent": 0,
                "start_method": {"forkserver": {"preload_modules": ["orchestration.definitions"]}},
            }
        }
    }


def test_an_unknown_executor_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERLAKE_EXECUTOR", "spark")
    settings = Settings.from_env(home=tmp_path)
    with pytest.raises(ValueError, match="PAPERLAKE_EXECUTOR must be one of in_process, multiprocess, celery"):
        executor_definition(settings)


def test_the_environment_chooses_executor_lake_and_device(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERLAKE_EXECUTOR", "multiprocess")
    monkeypatch.setenv("PAPERLAKE_LAKE", str(tmp_path / "shared" / "lake"))
    monkeypatch.setenv("PAPERLAKE_DEVICE", "cpu")
    settings = Settings.from_env(home=tmp_path / "home")
    assert settings.executor == "multiprocess"
    assert settings.lake == (tmp_path / "shared" / "lake").resolve()
    assert settings.encoder_device == "cpu"


def test_workers_rebuild_the_job_from_plain_values(tmp_path, dbt_manifest):
    resource = {"home": str(tmp_path), "inboxes": [], "backend": "pymupdf", "lake_dir": str(tmp_path / "lake")}
    job = reconstructable_job("ingest_paper", resource)
    rebuilt = job.get_definition()
    assert rebuilt.name == "ingest_paper"
    with dg.build_resources(rebuilt.resource_defs) as resources:
        assert resources.paperlake.settings().lake == tmp_path / "lake"
        assert resources.paperlake.settings().home == tmp_path.resolve()
