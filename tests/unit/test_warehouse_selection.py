"""What a `build_warehouse` run selects (`orchestration.jobs.warehouse_selection`), for the CLI and the sensor."""

from __future__ import annotations

import dagster as dg


def test_the_collection_joins_the_build_only_when_the_graphs_outputs_change(dbt_manifest):
    from orchestration.jobs import FORMULA_ASSETS, warehouse_selection

    collection = FORMULA_ASSETS["collection"]
    assert collection == [dg.AssetKey(["vectors", "formulas"])]
    marts = warehouse_selection({})
    assert marts and not set(marts) & {key for keys in FORMULA_ASSETS.values() for key in keys}

    changed = {"graph": "equations changed in 1 paper(s)", "models": "the formula graph changes"}
    assert warehouse_selection(changed) == marts + FORMULA_ASSETS["graph"] + FORMULA_ASSETS["models"]
    assert warehouse_selection(changed, collection=True) == warehouse_selection(changed) + collection
    # a rewritten block cache (the outputs stay the same) or the models alone: the collection is not touched
    assert warehouse_selection({"graph": "its Turtle block cache is missing"}, collection=True) == (
        marts + FORMULA_ASSETS["graph"]
    )
    assert warehouse_selection({"models": "dbt changed"}, collection=True) == marts + FORMULA_ASSETS["models"]
    assert warehouse_selection({}, collection=True) == marts
