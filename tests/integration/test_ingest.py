"""The ingestion spine end to end on real PDFs: incremental runs, replacement, removal, and the lineage graph.

The steps of ``TestIncremental`` share one PAPERLAKE_HOME and run in order (each builds on the previous state),
because an ingest with dbt costs tens of seconds and the behaviour under test *is* the sequence.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import pymupdf
import pytest

from paperlake.config import Settings
from paperlake.lake.store import Lake
from paperlake.lake.views import VIEWS
from support.fixtures import REPO, corpus_pdf, make_inbox, manifest_rows

SMALL = ["emnlp2024-126-embedding-inversion-attack", "emnlp2024-012-numerologic"]
ADDED = "naacl2024-116-quantum-lindblad-lm"
TABLES_WITH_PAPER = {
    "pages": "ref_paper_id",
    "sections": "ref_paper_id",
    "chunks": "ref_paper_id",
    "tables": "ref_paper_id",
    "images": "ref_paper_id",
    "equations": "ref_paper_id",
    "reference": "ref_paper_id",
    "table_cells": "ref_paper_id",
    "metadata": "paper_id",
}


def query(settings: Settings, sql: str, *params):
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        return con.execute(sql, params).fetchall()


def parse_materializations(settings: Settings) -> int:
    from orchestration.run import dagster_instance

    instance = dagster_instance(settings)
    return len(instance.fetch_materializations(dg.AssetKey(["parsed", "pages"]), limit=10_000).records)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory, dbt_manifest: Path, corpus: Path) -> dict:
    root = tmp_path_factory.mktemp("incremental")
    inbox = make_inbox(root, SMALL)
    settings = Settings.from_env(home=root / "home", backend="pymupdf", mineru_dir=None)
    return {"inbox": inbox, "settings": settings}


def run(state: dict):
    from orchestration.run import ingest

    return ingest([state["inbox"]], state["settings"])


class TestIncremental:
    def test_first_ingest_builds_the_warehouse(self, state, monkeypatch):
        monkeypatch.setenv("DBT_LOG_LEVEL_FILE", "debug")  # dbt's file log, at info by default: its parse decisions
        summary = run(state)
        assert sorted(summary.published) == sorted(f"emnlp2024/{s}" for s in SMALL), summary.failed
        assert summary.warehouse_built and not summary.failed
        settings = state["settings"]
        assert query(settings, "select count(*) from metadata") == [(2,)]
        titles = {t for (t,) in query(settings, "select title from metadata")}
        assert "NumeroLogic: Number Encoding for Enhanced LLMs’ Numerical Reasoning" in titles
        # every page of every paper, ids joined both ways
        assert query(settings, "select sum(num_pages) from metadata") == query(settings, "select count(*) from pages")
        orphans = query(
            settings,
            "select count(*) from chunks c left join pages p on c.ref_page_id = p.page_id where p.page_id is null",
        )
        assert orphans == [(0,)]
        state["paper_ids"] = {k: v for k, v in query(settings, "select paper_key, paper_id::varchar from metadata")}
        # a fresh home of the default layout never parses the dbt project in full: its profile is the shared
        # parse's (the side file named relative to the warehouse's folder), so the warehouse build starts from the
        # project's partial-parse state, re-parsing nothing (no file the parse renders names this home's lake), and
        # the formula graph's tables are built by the same dbt build as the marts
        assert summary.formulas_built, summary.stale
        warehouse_log = (settings.home / "logs" / "dbt-build.log").read_text()
        assert "Unable to do partial parsing" not in warehouse_log, warehouse_log[:2000]
        debug_log = (settings.home / "dbt-target" / "warehouse" / "dbt.log").read_text()  # dbt's own, at debug here
        assert "Partial parsing enabled" in debug_log and "Unable to do partial parsing" not in debug_log
        assert "Nothing changed, skipping partial parsing" in debug_log, debug_log[:3000]
        assert "OK created sql table model main.formulas " in warehouse_log, warehouse_log[-3000:]
        # the graph read the lake's equations as the mart holds them once dbt has loaded them
        from paperlake.formulas.state import EQUATIONS_SQL, connect_lake_equations

        with duckdb.connect(str(settings.warehouse), read_only=True) as con:
            mart = con.execute(EQUATIONS_SQL.format(where="")).fetchall()
        with connect_lake_equations(settings.lake) as con:
            assert mart and con.execute(EQUATIONS_SQL.format(where="")).fetchall() == mart
        # without dbt's JSON artifacts, which nothing reads (DBT_WRITE_JSON=true writes them)
        assert not (settings.home / "dbt-target" / "warehouse" / "run_results.json").exists()
        # the two new papers of one volume were parsed in one run, and synced and probed in one more (a partition
        # range each: the probes go with the vectors, no probe_paper run), and each paper's partition still got its
        # own materialization
        from orchestration.run import dagster_instance

        instance = dagster_instance(settings)
        assert not instance.get_runs(dg.RunsFilter(job_name="probe_paper"))
        for job, asset in (
            ("ingest_paper", ["parsed", "pages"]),
            ("sync_vectors", ["vectors", "text_bm25_en"]),
            ("sync_vectors", ["evaluation", "probes"]),
        ):
            runs = instance.get_runs(dg.RunsFilter(job_name=job))
            assert (
                len(runs) == 1
                and runs[0].tags["dagster/asset_partition_range_start"]
                != runs[0].tags["dagster/asset_partition_range_end"]
            ), job
            partitions = {
                r.asset_materialization.partition
                for r in instance.fetch_materializations(dg.AssetKey(asset), limit=100).records
            }
            assert partitions == set(state["paper_ids"]), job
            # one "planned" event per asset for the range (orchestration.instance.PLANNED_SUBSET_VAR), not one per
            # paper, and it names both papers
            planned = instance.get_records_for_run(
                runs[0].run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
            ).records
            planned = [r.event_log_entry.dagster_event.event_specific_data for r in planned]
            planned = [p for p in planned if p.asset_key == dg.AssetKey(asset)]
            assert len(planned) == 1 and planned[0].partitions_subset is not None, job
            assert set(planned[0].partitions_subset.get_partition_keys()) == set(state["paper_ids"]), job

    def test_second_ingest_does_no_parse_work(self, state):
        before = parse_materializations(state["settings"])
        summary = run(state)
        assert summary.plan.to_parse == [] and summary.plan.removed == []
        assert summary.published == [] and not summary.warehouse_built
        assert parse_materializations(state["settings"]) == before
        # and `paperlake ingest` (the console entry) with nothing to do never builds the definitions (their imports,
        # dbt's among them, were half of its time); Dagster's objects are frozen, and nothing is reported leaked at exit
        settings = state["settings"]
        code = (
            "import gc, sys\n"
            "from cli.entry import main\n"
            f"sys.argv = ['paperlake', 'ingest', {str(state['inbox'])!r}, '--backend', 'pymupdf', "
            f"'--home', {str(settings.home)!r}]\n"
            "try:\n    main()\nexcept SystemExit as end:\n    assert not end.code, end.code\n"
            "print('IMPORTED', sorted(m for m in ('dagster_dbt', 'dbt', 'orchestration.definitions') "
            "if m in sys.modules))\n"
            "print('FROZEN', gc.get_freeze_count() > 10000)\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=REPO)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert f"0 to parse, {len(SMALL)} unchanged, 0 removed" in " ".join(done.stdout.split()), done.stdout[-2000:]
        assert "IMPORTED []" in done.stdout and "FROZEN True" in done.stdout, done.stdout[-2000:]
        assert "leaked" not in done.stderr, done.stderr[-2000:]
        assert parse_materializations(settings) == before

    def test_adding_one_pdf_parses_only_that_paper(self, state):
        volume = state["inbox"] / "naacl2024"
        volume.mkdir()
        shutil.copyfile(corpus_pdf(ADDED), volume / f"{ADDED}.pdf")
        before = parse_materializations(state["settings"])
        summary = run(state)
        assert summary.published == [f"naacl2024/{ADDED}"]
        assert parse_materializations(state["settings"]) == before + 1
        rows = query(
            state["settings"],
            "select volume, venue, title_source from metadata where paper_key = ?",
            f"naacl2024/{ADDED}",
        )
        # no manifest in that volume: the title comes from page 1 and the venue from the folder name
        assert rows == [("naacl2024", "naacl2024", "pdf")]
        assert query(state["settings"], "select count(*) from volumes") == [(2,)]
        # the home's second build reads its own partial-parse state instead of parsing the whole project again
        log = (state["settings"].home / "logs" / "dbt-build.log").read_text()
        assert "Unable to do partial parsing" not in log, log[:2000]
        assert (state["settings"].home / "dbt-target" / "warehouse" / "partial_parse.msgpack").is_file()

    def test_replacing_a_pdf_replaces_its_rows(self, state):
        key = "emnlp2024/emnlp2024-012-numerologic"
        path = state["inbox"] / f"{key}.pdf"
        with pymupdf.open(path) as document:  # a "revised" PDF: the last page dropped
            document.delete_page(document.page_count - 1)
            revised = document.tobytes()
        path.write_bytes(revised)
        # the manifest still lists the old file's sha256: the revised file is refused, not silently mixed in
        refused = run(state)
        assert list(refused.failed) == [key] and "manifest" in refused.failed[key]
        manifest = state["inbox"] / "emnlp2024" / "manifest.csv"
        manifest.write_text(
            manifest.read_text().replace(
                manifest_rows("emnlp2024")[path.name]["sha256"], hashlib.sha256(revised).hexdigest()
            )
        )
        summary = run(state)
        assert summary.published == [key]
        settings = state["settings"]
        paper = state["paper_ids"][key]
        assert query(settings, "select num_pages from metadata where paper_id = ?", paper) == [(6,)]
        assert query(settings, "select count(*), max(page_number) from pages where ref_paper_id = ?", paper) == [(6, 6)]
        assert query(settings, "select count(*) from metadata") == [(3,)]

    def test_deleting_a_pdf_removes_its_rows_everywhere(self, state):
        key = f"emnlp2024/{SMALL[0]}"
        paper = state["paper_ids"][key]
        settings = state["settings"]
        assert query(settings, "select count(*) from chunks where ref_paper_id = ?", paper)[0][0] > 0
        (state["inbox"] / f"{key}.pdf").unlink()
        from orchestration.run import ingest

        summary = ingest([state["inbox"]], settings)
        assert summary.removed == [key]
        for table, column in TABLES_WITH_PAPER.items():
            assert query(settings, f'select count(*) from "{table}" where {column} = ?', paper) == [(0,)], table
        lake = Lake(settings.lake)
        assert key not in lake.paper_keys()
        assert not any(lake.view_path(view, key).exists() for view in VIEWS)

    def test_an_inbox_without_a_volume_folder_removes_nothing(self, state, tmp_path):
        from orchestration.run import ingest

        settings = state["settings"]
        papers = query(settings, "select count(*) from metadata")
        summary = ingest([tmp_path], settings)  # an empty folder: a share that is not mounted
        assert summary.removed == [] and len(summary.plan.kept) == 2 and not summary.ok
        [failure] = summary.failures
        assert failure.stage == "inbox" and f"no volume folder in {tmp_path}" in failure.reason
        assert "2 papers not in the inbox stay in every store" in failure.reason
        assert query(settings, "select count(*) from metadata") == papers
        assert len(Lake(settings.lake).paper_keys()) == 2 and run(state).plan.unchanged

    def test_parser_version_bump_reparses(self, state, monkeypatch):
        from paperlake.parsing import versions

        monkeypatch.setattr(versions, "PYMUPDF", versions.PYMUPDF + "-bumped")
        from paperlake.lake.inbox import scan_inbox
        from paperlake.lake.pipeline import plan_ingest

        plan = plan_ingest(scan_inbox([state["inbox"]]), Lake(state["settings"].lake), state["settings"])
        assert len(plan.to_parse) == 2 and not plan.unchanged

    def test_changed_stage_code_redoes_only_that_stage(self, state, monkeypatch):
        """Upgrading paperlake (new dbt models, formula rules or encoder) redoes exactly the stages that changed."""
        from paperlake import freshness
        from paperlake.formulas import state as formula_state
        from paperlake.formulas import store as formula_store

        settings = state["settings"]
        digest = freshness.dbt_digest
        monkeypatch.setattr(
            freshness, "dbt_digest", lambda part: "models-edited" if part == "warehouse" else digest(part)
        )
        before = parse_materializations(settings)
        summary = run(state)
        assert summary.warehouse_built and summary.published == [] and "dbt" in summary.stale["warehouse"]
        assert summary.formulas_built == []  # the same equations: the graph and its models are current
        assert parse_materializations(settings) == before  # the lake was not touched
        summary = run(state)
        assert not summary.warehouse_built and not summary.formulas_built and not summary.vectors_synced

        monkeypatch.setattr(formula_state, "EXTRACTOR_VERSION", formula_state.EXTRACTOR_VERSION + "-new")
        with formula_store.connect_lake_equations(settings.lake) as con:
            assert formula_store.formula_graph_staleness(
                con, settings.lake / "formulas", settings.home / "formulas" / "formulas.ttl"
            )
        summary = run(state)
        assert not summary.warehouse_built and summary.formulas_built == ["collection", "graph", "models"]
        with formula_store.connect_lake_equations(settings.lake) as con:
            assert not formula_store.formula_graph_staleness(
                con, settings.lake / "formulas", settings.home / "formulas" / "formulas.ttl"
            )


def test_definitions_form_one_graph_from_inbox_to_marts(dbt_manifest):
    from orchestration.definitions import defs

    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    for table in (
        "metadata",
        "pages",
        "sections",
        "chunks",
        "tables",
        "images",
        "equations",
        "reference",
        "table_cells",
        "table_rows",
        "table_columns",
        "volumes",
        "ingest_errors",
        "enrichment_errors",
    ):
        assert f"warehouse/{table}" in keys

    def upstream(key: dg.AssetKey) -> set[dg.AssetKey]:
        seen, todo = set(), [key]
        while todo:
            for parent in graph.get(todo.pop()).parent_keys:
                if parent not in seen:
                    seen.add(parent)
                    todo.append(parent)
        return seen

    lineage = upstream(dg.AssetKey(["warehouse", "chunks"]))
    assert {dg.AssetKey(["parsed", "chunks"]), dg.AssetKey(["inbox", "pdf"])} <= lineage
    # the staging models are ephemeral: inlined into the marts, not assets of their own
    assert not [key for key in keys if "stg_" in key]
    # LLM summaries: parse views -> enrichment -> the marts' summary columns -> the vector collections
    summaries = upstream(dg.AssetKey(["warehouse", "pages"]))
    assert {dg.AssetKey(["enrichment", "summaries"]), dg.AssetKey(["parsed", "pages"])} <= summaries
    assert dg.AssetKey(["parsed", "table_rows"]) in upstream(dg.AssetKey(["warehouse", "table_rows"]))
    # the formula graph reads the lake; its tables are models of the warehouse's dbt build
    formula_tables = upstream(dg.AssetKey(["warehouse", "formulas"]))
    assert {dg.AssetKey(["formulas", "formulas"]), dg.AssetKey(["parsed", "equations"])} <= formula_tables
    assert dg.AssetKey(["warehouse", "equations"]) not in upstream(dg.AssetKey(["formulas", "formulas"]))
    assert defs.resolve_job_def("ingest_paper") is not None
    assert defs.resolve_sensor_def("inbox_sensor") is not None
    assert defs.resolve_schedule_def("inbox_schedule") is not None


def test_enrichment_is_in_the_definitions_only_with_an_endpoint(dbt_manifest, monkeypatch):
    """Without an endpoint, "Materialize all" in the UI must not select summaries it cannot get."""
    from assets.resources import LLMResource
    from orchestration.definitions import build_definitions

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    summaries = dg.AssetKey(["enrichment", "summaries"])
    without = build_definitions()
    assert "enrich_paper" not in {job.name for job in without.resolve_all_job_defs()}
    assert not without.resolve_asset_graph().get(summaries).is_materializable
    assert "enrich_paper" not in {j.name for j in without.resolve_sensor_def("stores_sensor").jobs}
    with_endpoint = build_definitions(llm=LLMResource(base_url="http://127.0.0.1:9/v1"))
    assert with_endpoint.resolve_job_def("enrich_paper") is not None
    assert with_endpoint.resolve_asset_graph().get(summaries).is_materializable


def test_sensor_requests_only_new_changed_and_removed(tmp_path, dbt_manifest, corpus):
    from assets.partitions import papers
    from assets.resources import PaperlakeResource
    from orchestration.sensors import inbox_sensor

    inbox = make_inbox(tmp_path, SMALL)
    resource = PaperlakeResource(home=str(tmp_path / "home"), inboxes=[str(inbox)], backend="pymupdf")
    with dg.instance_for_test() as instance:
        result = inbox_sensor(dg.build_sensor_context(instance=instance, resources={"paperlake": resource}))
        assert sorted(r.partition_key for r in result.run_requests) == sorted(f"emnlp2024/{s}" for s in SMALL)
        added = result.dynamic_partitions_requests[0]
        assert sorted(added.partition_keys) == sorted(f"emnlp2024/{s}" for s in SMALL)
        assert not result.asset_events  # no partition yet: the inbox is recorded from the next tick on
        instance.add_dynamic_partitions(papers.name, list(added.partition_keys))

        # one paper ingested (as a run would): only the other one is requested again
        from paperlake.lake.inbox import scan_inbox
        from paperlake.lake.pipeline import ingest_paper

        settings = resource.settings()
        source = scan_inbox([inbox])[0]
        assert ingest_paper(source, resource.lake(), settings).status == "published"
        result = inbox_sensor(dg.build_sensor_context(instance=instance, resources={"paperlake": resource}))
        assert [r.partition_key for r in result.run_requests] == [scan_inbox([inbox])[1].paper_key]
        # the UI's inbox state: an observation (data version) and a materialization per present paper, once
        versions = {s.paper_key: s.data_version for s in scan_inbox([inbox])}
        events = result.asset_events
        assert sorted((type(e).__name__, e.partition) for e in events) == sorted(
            (kind, key) for key in versions for kind in ("AssetMaterialization", "AssetObservation")
        )
        assert all(e.tags["dagster/data_version"] == versions[e.partition] for e in events)
        for event in events:
            instance.report_runless_asset_event(event)
        result = inbox_sensor(dg.build_sensor_context(instance=instance, resources={"paperlake": resource}))
        assert not result.asset_events

        # the ingested file leaves the inbox: a removal run is requested, the partition stays until it ran
        source.pdf_path.unlink()
        result = inbox_sensor(dg.build_sensor_context(instance=instance, resources={"paperlake": resource}))
        removal = [r for r in result.run_requests if r.tags.get("paperlake/reason") == "removed"]
        assert [r.partition_key for r in removal] == [source.paper_key]
        assert not result.dynamic_partitions_requests

        # the inbox loses its volume folder (a share not mounted) and gets a loose PDF: nothing is removed, both said
        shutil.move(inbox / "emnlp2024", tmp_path / "away")
        shutil.copy(corpus_pdf(SMALL[1]), inbox / "loose.pdf")
        result = inbox_sensor(dg.build_sensor_context(instance=instance, resources={"paperlake": resource}))
        assert not result.run_requests and not result.dynamic_partitions_requests
        said = result.skip_reason.skip_message
        assert said.startswith("nothing to run; ") and "no volume folder in" in said and "(loose.pdf) belong" in said


def test_parse_asset_as_a_function(tmp_path, dbt_manifest, corpus):
    """The smallest Dagster-level test: the multi-asset called directly with a partition."""
    from assets.parse import parsed_views
    from assets.resources import PaperlakeResource

    inbox = make_inbox(tmp_path, [SMALL[0]])
    resource = PaperlakeResource(home=str(tmp_path / "home"), inboxes=[str(inbox)], mineru_dir=str(corpus / "mineru"))
    context = dg.build_asset_context(partition_key=f"emnlp2024/{SMALL[0]}", resources={"paperlake": resource})
    events = list(parsed_views(context))
    materialized = [e for e in events if isinstance(e, dg.MaterializeResult)]
    checks = [e for e in events if isinstance(e, dg.AssetCheckResult)]
    assert {tuple(e.asset_key.path) for e in materialized} == {("parsed", v) for v in (*VIEWS, "ingest_errors")}
    assert all(e.metadata["backend"] == "mineru" for e in materialized)  # outputs present → auto picks MinerU
    assert checks and all(c.passed for c in checks if c.check_name == "gx_blocking")


def test_vector_fingerprint_follows_entity_settings_not_search_settings(tmp_path, monkeypatch):
    """Changing how search fuses (or a comment) must not re-sync every paper; changing an encoder must."""
    import yaml

    from paperlake.vectors.config import CONFIG_ENV, default_config_path
    from paperlake.vectors.ledger import stage_fingerprint as vectors_fingerprint

    original = default_config_path().read_text(encoding="utf-8")
    config = yaml.safe_load(original)
    path = tmp_path / "collections.yaml"
    monkeypatch.setenv(CONFIG_ENV, str(path))
    path.write_text(original, encoding="utf-8")
    base = vectors_fingerprint()

    path.write_text("# a new comment\n" + original, encoding="utf-8")
    assert vectors_fingerprint() == base
    searched = {**config, "hybrid": {**config["hybrid"], "weights": [0.5, 0.5], "candidates_per_route": 7}}
    path.write_text(yaml.safe_dump(searched), encoding="utf-8")
    assert vectors_fingerprint() == base

    encoders = {
        **config["encoders"],
        "all_minilm_l6_v2": {**config["encoders"]["all_minilm_l6_v2"], "max_seq_length": 128},
    }
    path.write_text(yaml.safe_dump({**config, "encoders": encoders}), encoding="utf-8")
    assert vectors_fingerprint() != base


def test_consecutive_batches_follow_partition_order_volume_and_limit():
    """A range run covers every partition between its ends: only keys that follow each other in the instance's
    order, of one volume, at most ``limit`` of them, and in the order asked (the plan's order matters: removals and
    kept copies of duplicate files go first)."""
    from orchestration.run import consecutive_batches

    order = ["a/1", "a/2", "a/3", "a/4", "b/1", "b/2"]
    assert consecutive_batches(order, ["a/1", "a/2", "a/3"], 8) == [["a/1", "a/2", "a/3"]]
    assert consecutive_batches(order, ["a/1", "a/3", "a/4"], 8) == [["a/1"], ["a/3", "a/4"]]
    assert consecutive_batches(order, ["a/3", "a/4", "b/1", "b/2"], 8) == [["a/3", "a/4"], ["b/1", "b/2"]]
    assert consecutive_batches(order, ["a/2", "a/1"], 8) == [["a/2"], ["a/1"]]
    assert consecutive_batches(order, ["a/1", "a/2", "a/3", "a/4"], 3) == [["a/1", "a/2", "a/3"], ["a/4"]]
    assert consecutive_batches(order, ["x/9", "a/1"], 8) == [["x/9"], ["a/1"]]
