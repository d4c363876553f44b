"""Warehouse stage: dbt (dbt-duckdb) models over the lake, in one lineage graph with the parse assets."""

import os
from typing import Any, Mapping

import dagster as dg
import duckdb
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, DbtProject, dbt_assets

from assets.resources import PaperlakeResource
from paperlake.config import environment
from paperlake.formulas.state import ensure_formula_contract
from paperlake.freshness import formula_model_inputs, warehouse_inputs
from paperlake.lake.store import Lake
from paperlake.runtime.failpoints import fault_point
from paperlake.vectors.ledger import record_content_versions
from paperlake.warehouse.build import (
    DBT_PROJECT_DIR,
    dbt_digest,
    dbt_env,
    dbt_target_path,
    empty_dbt_target,
    plan_build,
    prepare_build,
    publish_build,
)
from paperlake.warehouse.dbt_launcher import launcher_path, runs_in_workdir

DBT_PROJECT = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)
DBT_PROJECT.prepare_if_dev()
# `paperlake-dbt`: dbt in the warehouse's folder, with a quick `--version` (paperlake.warehouse.dbt_launcher)
DBT_EXECUTABLE = launcher_path()


def dbt_cli_resource() -> DbtCliResource:
    """dagster-dbt's resource as documented; its ``dbt_executable`` is ``paperlake-dbt``
    (:mod:`paperlake.warehouse.dbt_launcher`)."""
    return DbtCliResource(project_dir=DBT_PROJECT, profiles_dir=str(DBT_PROJECT_DIR), dbt_executable=DBT_EXECUTABLE)


def _build(context: dg.AssetExecutionContext, dbt: DbtCliResource, paperlake: PaperlakeResource):
    """dbt build of the selected models into the side file, then record the inputs and swap it in. The marts and the
    formula graph's tables are one dbt build when both are selected (the graph is made before it, in the same run);
    each part records its own inputs. The inputs are read before dbt runs: a lake or graph that changes during the
    build leaves a record naming the older state, so the next check sees the change and builds again (never the
    other way round)."""
    settings = paperlake.settings()
    Lake(settings.lake).ensure_contract()
    ensure_formula_contract(settings.lake / "formulas")
    selected = set(context.selected_asset_keys)
    with_marts, with_formulas = bool(selected - FORMULA_MODEL_KEYS), bool(selected & FORMULA_MODEL_KEYS)
    stage = "warehouse" if with_marts else "formula_models"  # the fail points' and the messages' name
    inputs = {
        **({"warehouse": warehouse_inputs(settings)} if with_marts else {}),
        **({"formula_models": formula_model_inputs(settings)} if with_formulas else {}),
    }
    side_file = prepare_build(settings.warehouse)
    args = ["build", "--exclude-resource-type", "unit_test"]  # unit tests run in the test suite, not every build
    if os.environ.get("DBT_WRITE_JSON", "").strip().lower() not in ("1", "true", "yes"):
        # dbt's JSON artifacts (manifest.json, run_results.json in the target folder): nothing reads them here (dagster-
        # dbt reads dbt's event stream; failures are in the run's events and dbt.log), and writing the manifest, twice
        # a build, cost each build time on the way to a queryable warehouse. DBT_WRITE_JSON=true writes them.
        args.append("--no-write-json")
    scope = None
    if with_marts:  # the per-paper marts rebuild only the papers whose lake files changed, when they can
        scope = plan_build(side_file, settings.lake, inputs["warehouse"]["dbt"])
        context.log.info(f"warehouse build: {'full' if scope.full else 'incremental'} ({scope.reason})")
        if scope.full:
            args.append("--full-refresh")
        else:  # the staging models' own tests read the whole lake, tested when its papers were first built
            args += ["--exclude", "path:models/staging"]
    target = dbt_target_path(settings.home, "warehouse")
    # the profile names the side file relative to the warehouse's folder only when paperlake-dbt runs dbt there
    env = dbt_env(settings.lake, settings.warehouse, relative=runs_in_workdir(dbt.dbt_executable))
    empty_dbt_target(target, env)
    with environment(env):  # dagster-dbt hands dbt a copy of os.environ
        invocation = dbt.cli(args, context=context, target_path=target)
    for event in invocation.stream():
        fault_point(f"{stage}.dbt_event")
        yield event
    if scope is not None:  # the vector stage's content versions of the papers built, published with their rows
        with duckdb.connect(str(side_file)) as con:
            record_content_versions(con, None if scope.full else sorted({paper for paper, _ in scope.delta}))
    fault_point(f"{stage}.before_swap")
    publish_build(settings.warehouse, inputs, scope)
    fault_point(f"{stage}.after_swap")


class PaperlakeDbtTranslator(DagsterDbtTranslator):
    """Lake sources are the parse assets (``[parsed, <view>]``); models are ``[warehouse, <name>]`` (the staging
    models are ephemeral: dagster-dbt makes no asset of them and draws the lineage through them). A
    model's code version is the digest of the dbt files its build depends on, the same digest the warehouse records
    (``paperlake.freshness``), so the UI and `paperlake ingest` agree on what a project change makes stale."""

    def get_asset_spec(self, manifest: Mapping[str, Any], unique_id: str, project: DbtProject | None) -> dg.AssetSpec:
        spec = super().get_asset_spec(manifest, unique_id, project)
        props = self.get_resource_props(manifest, unique_id)
        if props["resource_type"] == "source":
            if props["name"] == "enrichment":
                return spec.replace_attributes(key=dg.AssetKey(["enrichment", "summaries"]))
            stage = "formulas" if props["source_name"] == "formula_lake" else "parsed"
            return spec.replace_attributes(key=dg.AssetKey([stage, props["name"]]))
        if props["resource_type"] == "model":
            return spec.replace_attributes(key=dg.AssetKey(["warehouse", props["name"]]), group_name="warehouse")
        return spec

    def get_code_version(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        return dbt_digest("formulas" if "formulas" in (dbt_resource_props.get("tags") or []) else "warehouse")


TRANSLATOR = PaperlakeDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=True))


@dbt_assets(
    manifest=DBT_PROJECT.manifest_path,
    project=DBT_PROJECT,
    dagster_dbt_translator=TRANSLATOR,
    pool="warehouse",
    name="warehouse_models",
)
def warehouse_models(context: dg.AssetExecutionContext, dbt: DbtCliResource, paperlake: PaperlakeResource):
    """Build the NeuSym-RAG warehouse from the lake, and the formula graph's tables (formulas, parameters,
    constants, occurrences, relations) from its Parquet files, into a side file; run dbt's tests, and swap it in only
    if everything passed, so readers never see a half-built or failing warehouse."""
    yield from _build(context, dbt, paperlake)


# The formula graph's dbt models (tag ``formulas``): built with the marts, or alone when only the graph changed.
FORMULA_MODEL_KEYS = frozenset(spec.key for spec in warehouse_models.specs if "formulas" in spec.tags)
