"""The one entry point: composes every area's definitions and applies cross-cutting policy once."""

from __future__ import annotations

import dagster as dg

from assets.parse import inbox_pdf, parsed_views
from assets.vectors import vector_assets
from assets.formulas import formula_collection, formula_graph
from assets.warehouse import dbt_cli_resource, formula_models, warehouse_models
from orchestration.resources import paperlake_from_env
from orchestration.sensors import inbox_schedule, inbox_sensor, ingest_job

# Everything downstream of the parse stage follows its upstream: a new, changed or removed paper (or a parser
# version bump, which changes the parse asset's code version) re-materialises exactly what depends on it.
downstream = dg.AssetSelection.assets(warehouse_models, formula_graph, formula_models, formula_collection,
                                      *vector_assets)
automation = dg.AutomationCondition.eager()


def build_definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[inbox_pdf, parsed_views, *[
            definition.map_asset_specs(lambda spec: spec.replace_attributes(automation_condition=automation))
            for definition in (warehouse_models, formula_graph, formula_models, formula_collection, *vector_assets)
        ]],
        jobs=[ingest_job],
        sensors=[inbox_sensor, dg.AutomationConditionSensorDefinition(
            "downstream_automation", target=downstream, minimum_interval_seconds=30)],
        schedules=[inbox_schedule],
        resources={"paperlake": paperlake_from_env(), "dbt": dbt_cli_resource()},
    )


defs = build_definitions()
