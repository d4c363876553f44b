"""What a `build_warehouse` run selects (`orchestration.jobs.warehouse_selection`) and what a paper's downstream run
selects (`orchestration.jobs.paper_selection`), for the CLI and the sensor; and how a failed paper run's reason is
told apart by stage (`orchestration.run.failures_by_stage`)."""

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


def test_a_papers_probes_go_with_its_vectors(dbt_manifest):
    import pytest

    from orchestration.jobs import PROBES, paper_selection

    bm25, hybrid = dg.AssetKey(["vectors", "text_bm25_en"]), dg.AssetKey(["vectors", "text_hybrid"])
    assert paper_selection({"text_hybrid": "never synced", "text_bm25_en": "its cells changed"}, False) == (
        "sync_vectors",
        [bm25, hybrid],
    )
    assert paper_selection(["text_bm25_en"], True) == ("sync_vectors", [bm25, PROBES])
    assert paper_selection([], True) == ("probe_paper", [PROBES])
    with pytest.raises(ValueError):
        paper_selection([], False)
    # each job selects what its combinations ask for
    from assets.vectors import vector_assets
    from orchestration.definitions import build_definitions
    from orchestration.jobs import probe_paper, sync_vectors

    graph = build_definitions().resolve_asset_graph()
    assert sync_vectors.selection.resolve(graph) == {PROBES, *(a.key for a in vector_assets)}
    assert probe_paper.selection.resolve(graph) == {PROBES}


def test_a_failed_paper_runs_reason_is_told_apart_by_stage():
    from orchestration.run import failures_by_stage

    both = "vectors__text_bm25_en: the store is gone; evaluation__probes: no such table: pages; said twice"
    assert failures_by_stage(both) == {
        "vectors": "vectors__text_bm25_en: the store is gone",
        "evaluation": "evaluation__probes: no such table: pages; said twice",
    }
    assert failures_by_stage("vectors__a: x; vectors__b: y") == {"vectors": "vectors__a: x; vectors__b: y"}
    assert failures_by_stage("evaluation__probes: bad") == {"evaluation": "evaluation__probes: bad"}
    # the run failed before any step did: every stage of the run failed
    run = "the run failed; see it in the Dagster UI"
    assert failures_by_stage(run) == {"vectors": run, "evaluation": run}
