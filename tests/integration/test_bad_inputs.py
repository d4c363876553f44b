"""Bad files never take the others down: each gets an ingest_errors row, no partial rows, and a fix is picked up."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pymupdf
import pytest

from paperlake.config import Settings
from paperlake.lake.inbox import key_part
from paperlake.lake.store import Lake
from paperlake.lake.views import VIEWS
from support.fixtures import corpus_pdf, make_inbox

GOOD = "emnlp2024-126-embedding-inversion-attack"
NOT_UTF8 = os.fsdecode(b"caf\xe9")  # a name from a ZIP made on another system: a byte that is not UTF-8


def write_bad_files(volume: Path) -> dict[str, str]:
    """file stem → the stage its failure must name."""
    good = corpus_pdf(GOOD).read_bytes()
    (volume / "corrupt.pdf").write_bytes(good[: len(good) // 7] + b"\x00garbage" * 50)
    (volume / "not-a-pdf.pdf").write_text("this is a plain text file that someone named .pdf\n" * 20)
    with pymupdf.open(corpus_pdf(GOOD)) as document:
        document.save(
            volume / "encrypted.pdf", encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="secret"
        )
        pixmap = document[0].get_pixmap(dpi=72)
    scanned = pymupdf.open()
    page = scanned.new_page(width=595, height=842)
    page.insert_image(page.rect, pixmap=pixmap)  # an image of a page, no text layer
    scanned.save(volume / "scanned.pdf")
    # a syntactically valid PDF whose page tree is empty
    (volume / "zero-pages.pdf").write_bytes(
        b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n"
        b"trailer<</Root 1 0 R>>\n%%EOF\n"
    )
    shutil.copyfile(corpus_pdf(GOOD), volume / "zz-duplicate.pdf")
    shutil.copyfile(corpus_pdf("emnlp2024-012-numerologic"), volume / f"{NOT_UTF8}.pdf")
    return {
        key_part(NOT_UTF8): "inbox",
        "corrupt": "open",
        "not-a-pdf": "open",
        "encrypted": "open",
        "scanned": "text layer",
        "zero-pages": "open",
        "zz-duplicate": "identity",
    }


@pytest.fixture(scope="module")
def bad_inbox(tmp_path_factory: pytest.TempPathFactory, dbt_manifest: Path, corpus: Path) -> dict:
    root = tmp_path_factory.mktemp("bad")
    inbox = make_inbox(root, [GOOD])
    expected = write_bad_files(inbox / "emnlp2024")
    settings = Settings.from_env(home=root / "home", backend="pymupdf", mineru_dir=None)
    from orchestration.run import ingest

    summary = ingest([inbox], settings)
    return {"inbox": inbox, "settings": settings, "expected": expected, "summary": summary}


def rows(settings: Settings, sql: str, *params):
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        return con.execute(sql, params).fetchall()


def test_good_paper_is_ingested_despite_bad_neighbours(bad_inbox):
    assert bad_inbox["summary"].published == [f"emnlp2024/{GOOD}"]
    assert rows(bad_inbox["settings"], "select paper_key from metadata") == [(f"emnlp2024/{GOOD}",)]


def test_each_bad_file_has_one_error_row_naming_stage_and_reason(bad_inbox):
    errors = {
        key.split("/")[1]: (stage, reason)
        for key, stage, reason in rows(bad_inbox["settings"], "select paper_key, stage, reason from ingest_errors")
    }
    assert set(errors) == set(bad_inbox["expected"])
    for stem, stage in bad_inbox["expected"].items():
        assert errors[stem][0] == stage, (stem, errors[stem])
        assert errors[stem][1], stem
    assert "encrypt" in errors["encrypted"][1].lower() or "password" in errors["encrypted"][1].lower()
    assert "text" in errors["scanned"][1].lower()
    assert "zero" in errors["zero-pages"][1].lower() or "no pages" in errors["zero-pages"][1].lower()
    assert f"emnlp2024/{GOOD}" in errors["zz-duplicate"][1]
    assert "caf\\xe9.pdf is not UTF-8" in errors[key_part(NOT_UTF8)][1]
    assert rows(bad_inbox["settings"], "select num_papers, num_failed from volumes") == [(1, 7)]


def test_failed_papers_have_no_partial_rows(bad_inbox):
    lake = Lake(bad_inbox["settings"].lake)
    for stem in bad_inbox["expected"]:
        key = f"emnlp2024/{stem}"
        assert not any(lake.view_path(view, key).exists() for view in VIEWS)
        assert lake.error(key) is not None


def test_unchanged_bad_file_is_not_retried_but_a_fixed_one_is(bad_inbox):
    from orchestration.run import ingest

    again = ingest([bad_inbox["inbox"]], bad_inbox["settings"])
    assert again.plan.to_parse == []  # a broken file is not retried until it changes
    shutil.copyfile(corpus_pdf("emnlp2024-012-numerologic"), bad_inbox["inbox"] / "emnlp2024" / "corrupt.pdf")
    fixed = ingest([bad_inbox["inbox"]], bad_inbox["settings"])
    assert fixed.published == ["emnlp2024/corrupt"]
    settings = bad_inbox["settings"]
    assert rows(settings, "select count(*) from ingest_errors where paper_key = 'emnlp2024/corrupt'") == [(0,)]
    assert rows(settings, "select count(*) from metadata") == [(2,)]


def test_a_formula_graph_that_fails_does_not_hold_back_the_warehouse(tmp_path, dbt_manifest, corpus, monkeypatch):
    """The graph is made in the warehouse build's run, before dbt: when it fails, the marts are built without it, the
    failure is one line, and the next ingest makes the graph, its tables and its collection."""
    from orchestration.run import ingest
    from paperlake.formulas import store as formula_store

    inbox = make_inbox(tmp_path, [GOOD])
    settings = Settings.from_env(home=tmp_path / "home", backend="pymupdf", mineru_dir=None)

    def broken(*args, **kwargs):
        raise RuntimeError("the formula rules broke")

    with monkeypatch.context() as patched:
        patched.setattr(formula_store, "update_formula_graph", broken)
        summary = ingest([inbox], settings)
    assert summary.warehouse_built and summary.formulas_built == []
    assert [failure.line() for failure in summary.failures] == [
        "formulas: formula_graph: RuntimeError: the formula rules broke"
    ]
    assert rows(settings, "select count(*) from metadata") == [(1,)]
    # the graph's tables come with the graph: none yet
    assert rows(
        settings,
        "select count(*) from information_schema.tables where table_schema = 'main' and table_name = 'formulas'",
    ) == [(0,)]

    summary = ingest([inbox], settings)
    assert summary.ok and not summary.warehouse_built, summary.failures
    assert summary.formulas_built == ["collection", "graph", "models"]
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        recorded = con.execute("select stage from _paperlake.builds order by 1").fetchall()
    assert recorded == [("formula_models",), ("warehouse",)]


def _ingest_broken(monkeypatch, inbox, settings, module, name: str, message: str):
    """An ingest with ``module.name`` raising ``RuntimeError(message)``."""
    from orchestration.run import ingest

    def broken(*args, **kwargs):
        raise RuntimeError(message)

    with monkeypatch.context() as patched:
        patched.setattr(module, name, broken)
        return ingest([inbox], settings)


def test_a_papers_probes_and_vectors_share_a_run_and_fail_apart(tmp_path, dbt_manifest, corpus, monkeypatch):
    """A new paper's vectors and probes are made in one `sync_vectors` run: when its probes' step fails, its vectors
    are synced all the same and the failure is one `evaluation` line; when a collection's step fails, its probes are
    made and the failure is one `vectors` line. The next ingest makes only what is missing, in a run of its own."""
    import dagster as dg

    import assets.evaluation
    import assets.vectors
    from orchestration.run import dagster_instance, ingest

    inbox = make_inbox(tmp_path, [GOOD])
    key = f"{GOOD.split('-')[0]}/{GOOD}"
    settings = Settings.from_env(home=tmp_path / "home", backend="pymupdf", mineru_dir=None)

    summary = _ingest_broken(monkeypatch, inbox, settings, assets.evaluation, "write_probes", "the probes broke")
    assert summary.warehouse_built and summary.vectors_synced == [key] and summary.probed == [], [
        f.line() for f in summary.failures
    ]
    assert [f.line() for f in summary.failures if "broke" in f.reason] == [
        f"{key}: evaluation: evaluation__probes: RuntimeError: the probes broke"
    ], [f.line() for f in summary.failures]
    instance = dagster_instance(settings)
    assert not instance.get_runs(dg.RunsFilter(job_name="probe_paper"))
    from paperlake.evaluation.sets import probes_path, stale_probe_papers
    from paperlake.vectors.ledger import ledger_path

    assert stale_probe_papers(settings) == {}  # the volume's evaluation made the probes it lacked

    # probes alone (their record is gone, the vectors are current): a probe_paper run
    probes_path(settings, key).with_suffix(".json").unlink()
    summary = ingest([inbox], settings)
    assert summary.ok and summary.probed == [key] and summary.vectors_synced == [], summary.failures
    assert len(instance.get_runs(dg.RunsFilter(job_name="probe_paper"))) == 1

    # the other way round: the probes' record is gone and so is the paper's record in one collection
    probes_path(settings, key).with_suffix(".json").unlink()
    ledger_path(settings.home, "text_bm25_en", key).unlink()
    synced = assets.vectors.sync_paper_keys

    def half_broken(settings, name, keys):
        if name == "text_bm25_en":
            raise RuntimeError("the collection broke")
        return synced(settings, name, keys)

    with monkeypatch.context() as patched:
        patched.setattr(assets.vectors, "sync_paper_keys", half_broken)
        summary = ingest([inbox], settings)
    assert summary.probed == [key] and summary.vector_failures == [key], summary.failures
    assert [f.line() for f in summary.failures] == [
        f"{key}: vectors: vectors__text_bm25_en: RuntimeError: the collection broke"
    ]
    assert len(instance.get_runs(dg.RunsFilter(job_name="sync_vectors"))) == 2  # the first ingest's and this one
    assert len(instance.get_runs(dg.RunsFilter(job_name="probe_paper"))) == 1

    summary = ingest([inbox], settings)  # what is left: the collection, alone
    assert summary.ok and summary.vectors_synced == [key] and summary.probed == [], summary.failures


def test_a_formulas_collection_that_fails_does_not_hold_back_the_warehouse(tmp_path, dbt_manifest, corpus, monkeypatch):
    """The collection of a graph that changed is synced in the warehouse build's run, after dbt: when its sync fails,
    the warehouse and the graph's tables stay built and the paper's vectors are synced, the failure is one line said
    once (no second attempt in a `build_formulas` run), and the next ingest syncs the collection alone."""
    import dagster as dg

    import assets.formulas
    from orchestration.run import dagster_instance, ingest

    inbox = make_inbox(tmp_path, [GOOD])
    settings = Settings.from_env(home=tmp_path / "home", backend="pymupdf", mineru_dir=None)

    summary = _ingest_broken(
        monkeypatch, inbox, settings, assets.formulas, "sync_formula_collection", "the collection broke"
    )
    assert summary.warehouse_built and summary.formulas_built == ["graph", "models"]
    assert [failure.line() for failure in summary.failures] == [
        "formulas: vectors__formulas: RuntimeError: the collection broke"
    ]
    assert summary.vectors_synced == [f"{GOOD.split('-')[0]}/{GOOD}"]
    assert rows(settings, "select count(*) > 0 from formulas") == [(True,)]
    instance = dagster_instance(settings)
    assert not instance.get_runs(dg.RunsFilter(job_name="build_formulas"))

    summary = ingest([inbox], settings)
    assert summary.ok and not summary.warehouse_built, summary.failures
    assert summary.formulas_built == ["collection"]
    assert len(instance.get_runs(dg.RunsFilter(job_name="build_formulas"))) == 1
