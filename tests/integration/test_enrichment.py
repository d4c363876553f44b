"""LLM/VLM enrichment end to end: real papers, the real `openai` client against the scripted server on 127.0.0.1,
the Dagster enrichment asset, dbt, Milvus Lite. The tests of this module share one store and run in order."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from cli.app import app
from paperlake.enrichment import DEFAULT_KINDS, dry_run, resolve_kinds
from paperlake.enrichment.kinds import BadAnswer, read_answer
from paperlake.enrichment.runner import Budget, BudgetError, enrichment_path
from support.fixtures import ingest_sample
from support.openai_stub import start_stub

PAPERS = ["emnlp2024-126-embedding-inversion-attack", "emnlp2024-177-cute-token-understanding"]
TAGS = '["token understanding", "tokenization", "benchmark"]'
RULES = {"rules": [{"match": "JSON list of strings", "content": TAGS}], "default": {"content": "Summary: {echo}"}}
LLM_ENV = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "PAPERLAKE_LLM_MODEL",
    "OPENAI_MODEL",
    "PAPERLAKE_LLM_BUDGET",
    "PAPERLAKE_ENRICH_KINDS",
    "PAPERLAKE_VLM_MODEL",
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, dbt_manifest: Path, corpus: Path) -> dict:
    return ingest_sample(tmp_path_factory.mktemp("enrich"), PAPERS, unset=LLM_ENV)


@pytest.fixture(autouse=True)
def _no_llm_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


def with_llm(settings, base_url: str, **changes):
    return replace(
        settings,
        openai_base_url=base_url,
        openai_api_key="k",
        llm_model="stub-text",
        vlm_model="stub-vision",
        llm_concurrency=3,
        **changes,
    )


def ingest(built, settings, **options):
    from orchestration.run import ingest as run_ingest

    return run_ingest([built["inbox"]], settings, **options)


def query(settings, sql: str, params=()):
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


def test_without_an_endpoint_enrichment_is_skipped_with_one_line(built):
    assert built["summary"].enrichment_skipped and "OPENAI_BASE_URL" in built["summary"].enrichment_skipped
    settings = built["settings"]
    result = CliRunner().invoke(
        app, ["ingest", str(built["inbox"]), "--home", str(settings.home), "--mineru-dir", str(settings.mineru_dir)]
    )
    assert result.exit_code == 0, result.output
    assert "plan: 0 to parse" in result.output
    assert sum("enrichment skipped" in line for line in result.output.splitlines()) == 1
    assert query(settings, "select count(page_summary), count(tldr) from pages, metadata") == [(0, 0)]
    refused = CliRunner().invoke(app, ["enrich", str(built["inbox"]), "--home", str(settings.home)])
    assert refused.exit_code == 1 and "OPENAI_BASE_URL" in refused.output


def test_dry_run_counts_the_calls_and_calls_nothing(built):
    settings = built["settings"]
    result = CliRunner().invoke(app, ["enrich", "--dry-run", "--json", "--home", str(settings.home)])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    pages = query(settings, "select count(*) from pages where trim(coalesce(page_content, '')) <> ''")[0][0]
    figures = query(settings, "select count(*) from images where parent_image_id is null")[0][0]
    tables = query(settings, "select count(*) from tables")[0][0]
    by_kind = plan["total"]["by_kind"]
    assert by_kind["page_summary"] == pages and by_kind["image_summary"] == figures
    assert by_kind["table_summary"] == tables and by_kind["tldr"] == by_kind["tags"] == 2
    assert plan["total"]["calls"] == sum(by_kind.values()) and plan["total"]["prompt_tokens"] > 0
    built["calls"] = plan["total"]["calls"]


def test_first_run_fills_every_kind_everywhere_and_the_second_makes_no_call(built, tmp_path):
    from paperlake.vectors.config import load_config
    from paperlake.vectors.store import VectorStore

    with start_stub(RULES, tmp_path / "stub") as stub:
        settings = with_llm(built["settings"], stub.base_url)
        summary = ingest(built, settings)
        first = stub.requests()
        again = ingest(built, settings)
        assert len(stub.requests()) == len(first)  # nothing changed: not one call, not even to the cache
    assert summary.ok and sorted(summary.enriched) == sorted(built["ids"]) and not summary.enrichment_pending
    usage = summary.enrichment_usage  # an item whose request equals an earlier one's is answered by the cache
    assert usage["calls"] == built["calls"] and len(first) == usage["calls"] - usage["cached_calls"]
    assert again.enrichment_usage["calls"] == 0 and again.enriched == []
    vision = [r for r in first if r["model"] == "stub-vision"]
    assert vision and all(
        any(
            p.get("type") == "image_url" and p["image_url"]["url"].startswith("data:image/png;base64,")
            for p in r["messages"][-1]["content"]
        )
        for r in vision
    )
    assert all(r["model"] == "stub-text" for r in first if r not in vision)
    home = built["settings"]
    filled = dict(
        query(
            home,
            "select 'pages', count(page_summary) from pages union all select 'sections', "
            "count(section_summary) from sections union all select 'tables', count(table_summary) "
            "from tables union all select 'images', count(image_summary) from images union all "
            "select 'metadata', count(tldr) from metadata",
        )
    )
    assert (
        filled["pages"] == query(home, "select count(*) from pages where trim(coalesce(page_content, '')) <> ''")[0][0]
    )
    assert filled["tables"] == query(home, "select count(*) from tables")[0][0]
    assert filled["images"] == query(home, "select count(*) from images")[0][0]  # panels share their figure's
    assert filled["metadata"] == 2
    assert query(home, "select tags from metadata limit 1")[0][0] == json.loads(TAGS)
    assert query(home, "select count(*) from enrichment_errors") == [(0,)]
    store = VectorStore(home.milvus_uri, cache_path=home.embeddings)
    try:
        for spec in (s for s in load_config().active_collections() if s.modality == "text"):
            for table, column in (("pages", "page_summary"), ("tables", "table_summary"), ("metadata", "tldr")):
                entities = store.count(spec.name, f"table_name == '{table}' and column_name == '{column}'")
                assert entities == query(home, f"select count({column}) from {table}")[0][0], (spec.name, column)
    finally:
        store.close()
    status = json.loads(CliRunner().invoke(app, ["status", "--json", "--home", str(home.home)]).stdout)
    assert sum(v["llm_calls"] for v in status["volumes"]) == usage["calls"]
    assert sum(v["llm_tokens"] for v in status["volumes"]) == summary.enrichment_usage["tokens"] > 0
    assert status["enriched"]["tldr"] == 2


def test_a_prompt_change_asks_again_only_that_kind(built, tmp_path, monkeypatch):
    from paperlake.enrichment import kinds

    original = kinds._prompt_text
    monkeypatch.setattr(kinds, "_prompt_text", lambda name: original(name) + (" Be brief." if name == "tldr" else ""))
    with start_stub(RULES, tmp_path / "stub") as stub:
        summary = ingest(built, with_llm(built["settings"], stub.base_url))
        requests = stub.requests()
    assert summary.ok and len(requests) == 2
    assert all(r["messages"][0]["content"].endswith("Be brief.") for r in requests)


def test_a_budget_stops_mid_volume_and_the_next_run_resumes(built, tmp_path):
    settings = built["settings"]
    kinds = resolve_kinds("row_summary,column_summary")
    planned = dry_run(settings, kinds)["total"]
    assert planned["calls"] >= 4
    with start_stub(RULES, tmp_path / "stub") as stub:
        tight = with_llm(settings, stub.base_url, llm_budget=str(planned["prompt_tokens"] // 3))
        stopped = ingest(built, tight, enrich_kinds=kinds)
        asked = len(stub.requests())
        resumed = ingest(built, with_llm(settings, stub.base_url), enrich_kinds=kinds)
        total = len(stub.requests())
    assert stopped.ok and stopped.enrichment_pending and set(stopped.enrichment_pending.values()) == {"budget"}
    assert 0 < asked < planned["calls"]
    assert resumed.ok and not resumed.enrichment_pending and total == planned["calls"]  # no item asked twice
    assert query(settings, "select count(*) - count(row_summary) from table_rows") == [(0,)]


def test_rate_limits_are_retried_and_unusable_answers_become_error_rows(built, tmp_path, monkeypatch):
    from paperlake.enrichment import kinds

    settings = built["settings"]
    original = kinds._prompt_text
    monkeypatch.setattr(
        kinds, "_prompt_text", lambda name: original(name) + (" v2" if name == "section_summary" else "")
    )
    titles = [
        t
        for (t,) in query(
            settings,
            "select section_title from sections where trim(coalesce(section_content, "
            "'')) <> '' and section_title not similar to '.*[\"\\\\].*' group by "
            "section_title having count(*) = 1 order by 1 limit 2",
        )
    ]
    rules = {
        "rules": [
            {"match": "", "status": 429, "times": 1},
            {"match": f"Section: {titles[0]}\\n", "content": ""},
            {"match": f"Section: {titles[1]}\\n", "content": "I'm sorry, I can't help with that."},
        ],
        "default": {"content": "Summary: {echo}"},
    }
    with start_stub(rules, tmp_path / "stub") as stub:
        summary = ingest(built, with_llm(settings, stub.base_url))
        requests = stub.requests()
    assert summary.ok, summary.failures  # a 429 is retried by the client; bad answers are rows, not failures
    sections = query(settings, "select count(*) from sections where trim(coalesce(section_content, '')) <> ''")[0][0]
    assert len(requests) == sections + 1  # one 429 answered, then retried
    errors = dict(
        query(
            settings,
            "select s.section_title, e.reason from enrichment_errors e join sections s on s.section_id = e.item_id",
        )
    )
    assert errors[titles[0]] == "empty answer" and errors[titles[1]].startswith("refusal")
    assert query(settings, "select count(section_summary) from sections")[0][0] == sections - 2
    with start_stub(rules, tmp_path / "again") as stub:
        ingest(built, with_llm(settings, stub.base_url))
        assert stub.requests() == []  # refused items are not asked again unless --retry-errors


def test_removing_a_paper_removes_its_summaries_everywhere(built):
    from orchestration.run import ingest as run_ingest
    from paperlake.vectors.store import VectorStore

    settings = built["settings"]
    key = f"emnlp2024/{PAPERS[1]}"
    paper = built["ids"][key]
    assert enrichment_path(settings.lake, key).exists()
    (built["inbox"] / f"{key}.pdf").unlink()
    summary = run_ingest([built["inbox"]], settings)
    assert summary.removed == [key] and not enrichment_path(settings.lake, key).exists()
    assert query(settings, "select count(*) from enrichment_errors where paper_id = ?", [paper]) == [(0,)]
    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings)
    try:
        assert store.count("text_bm25_en", f"pdf_id == '{paper}'") == 0
        assert (
            store.count("text_bm25_en", "column_name == 'page_summary'")
            == query(settings, "select count(page_summary) from pages")[0][0]
            > 0
        )
    finally:
        store.close()


@pytest.mark.parametrize(
    ("text", "tokens", "usd"),
    [
        ("200000", 200000, None),
        ("200k tokens", 200000, None),
        ("$1.50", None, 1.5),
        ("1.5 usd", None, 1.5),
        ("", None, None),
    ],
)
def test_budgets_read_tokens_or_money(text, tokens, usd):
    budget = Budget.parse(text)
    assert (budget.tokens, budget.usd) == (tokens, usd)


def test_a_budget_refuses_what_would_exceed_it():
    budget = Budget.parse("1000")
    assert budget.reserve(600, 0.0) and not budget.reserve(500, 0.0)
    budget.settle(600, 0.0, 300, 0.0)
    assert budget.reserve(500, 0.0) and budget.remaining() == "700"
    with pytest.raises(BudgetError):
        Budget.parse("lots")


@pytest.mark.parametrize(
    ("kind", "answer", "problem"),
    [
        ("page_summary", "", "empty answer"),
        ("page_summary", "   ", "empty answer"),
        ("page_summary", "I'm sorry, I cannot summarise this.", "refusal"),
        ("page_summary", "...", "malformed"),
        ("tags", "retrieval, agents", "JSON list"),
        ("tags", '```json\n["LLM", "LLM ", 7]\n```', None),
    ],
)
def test_unusable_answers_are_refused_with_a_reason(kind, answer, problem):
    if problem is None:
        assert read_answer(kind, answer) == (None, ["llm", "7"])
        return
    with pytest.raises(BadAnswer, match=problem):
        read_answer(kind, answer)


def test_kinds_are_named_by_kind_view_or_column():
    assert resolve_kinds(None) == DEFAULT_KINDS
    assert resolve_kinds("pages,tables.table_summary,table_rows") == ("page_summary", "table_summary", "row_summary")
    with pytest.raises(ValueError, match="known"):
        resolve_kinds("nonsense")
