"""The lake's atomic writes and the Great Expectations gates, as plain functions on real parses."""

from __future__ import annotations

import copy

import pyarrow.parquet as pq
import pytest

from paperlake.lake.inbox import scan_inbox
from paperlake.lake.quality import validate_paper, validate_papers
from paperlake.lake.store import Lake
from paperlake.lake.views import VIEWS
from paperlake.parsing import pymupdf_backend

STEM = "emnlp2024-012-numerologic"
PANELLED = "emnlp2024-126-embedding-inversion-attack"


@pytest.fixture(scope="module")
def parsed(corpus):
    source = next(s for s in scan_inbox([corpus / "inbox"]) if s.paper_key.endswith(STEM))
    return source, pymupdf_backend.parse(source)


def test_a_clean_parse_passes_every_blocking_expectation(parsed):
    _, paper = parsed
    report = validate_paper(paper, pdf_page_count=7, max_chunk_tokens=512)
    assert report.passed, report.summary()
    assert len(report.blocking) >= 10


@pytest.mark.parametrize(
    "damage, view, expectation",
    [
        (lambda p: p.rows("pages").pop(), "pages", "expect_table_row_count_to_equal"),
        (
            lambda p: p.rows("tables")[0].update(bbox=[500.0, 700.0, 300.0, 200.0]),
            "bounding_boxes",
            "expect_column_max_to_be_between",
        ),
        (lambda p: p.rows("chunks").append(dict(p.rows("chunks")[0])), "chunks", "expect_column_values_to_be_unique"),
        (lambda p: p.rows("chunks")[0].update(token_count=900), "chunks", "expect_column_max_to_be_between"),
        (
            lambda p: p.rows("table_rows")[0].update(table_id="not-a-table"),
            "table_rows",
            "expect_column_values_to_be_in_set",
        ),
        (lambda p: p.rows("tables")[0].update(table_structure="fine"), "tables", "expect_column_values_to_match_regex"),
        (
            lambda p: p.rows("equations").append(
                {"equation_id": None, "paper_id": "x", "page_number": 1, "ordinal": 9, "bbox": [1.0, 1.0, 2.0, 2.0]}
            ),
            "equations",
            "expect_column_values_to_not_be_null",
        ),
    ],
)
def test_broken_data_fails_a_blocking_expectation(parsed, damage, view, expectation):
    _, paper = parsed
    broken = copy.deepcopy(paper)
    damage(broken)
    report = validate_paper(broken, pdf_page_count=7, max_chunk_tokens=512)
    assert not report.passed
    assert (view, expectation) in {(o.view, o.name) for o in report.failures}, report.summary()


def test_suspicious_parses_only_warn(parsed):
    _, paper = parsed
    thin = copy.deepcopy(paper)
    thin.views["sections"] = []
    thin.views["tables"] = thin.rows("tables")[:1]
    kept = {t["table_id"] for t in thin.views["tables"]}
    for view in ("table_cells", "table_rows", "table_columns"):
        thin.views[view] = [r for r in thin.rows(view) if r["table_id"] in kept]
    report = validate_paper(thin, pdf_page_count=7, max_chunk_tokens=512)
    assert report.passed
    flagged = {o.view for o in report.suspicious}
    assert {"sections", "tables"} <= flagged
    tables = next(o for o in report.suspicious if o.view == "tables")
    assert "Table 7" in tables.details.replace("table", "Table")


@pytest.fixture(scope="module")
def with_panels(corpus):
    """Inversion's Figure 1 (page 3) is two plots: a whole figure and two panels."""
    source = next(s for s in scan_inbox([corpus / "inbox"]) if s.paper_key.endswith(PANELLED))
    paper = pymupdf_backend.parse(source)
    assert any(row["parent_image_id"] for row in paper.rows("images"))
    return paper


def panel_check(report):
    return [o for o in report.blocking if o.view == "images" and o.name == "expect_column_max_to_be_between"]


def test_panels_inside_their_figure_pass(with_panels):
    report = validate_paper(with_panels, pdf_page_count=len(with_panels.rows("pages")), max_chunk_tokens=512)
    assert report.passed, report.summary()
    assert [o.success for o in panel_check(report)] == [True]


def move_panel_out(paper):
    panel = next(row for row in paper.rows("images") if row["parent_image_id"])
    panel["bbox"] = [panel["bbox"][0], panel["bbox"][1] + 300.0, *panel["bbox"][2:]]


def orphan_panel(paper):
    next(row for row in paper.rows("images") if row["parent_image_id"])["parent_image_id"] = "no-such-figure"


def panel_of_a_panel(paper):
    first, second = [row for row in paper.rows("images") if row["parent_image_id"]][:2]
    second["parent_image_id"] = first["image_id"]


@pytest.mark.parametrize("damage", [move_panel_out, orphan_panel, panel_of_a_panel])
def test_a_panel_outside_its_figure_blocks_the_paper(with_panels, damage):
    broken = copy.deepcopy(with_panels)
    damage(broken)
    report = validate_paper(broken, pdf_page_count=len(broken.rows("pages")), max_chunk_tokens=512)
    assert not report.passed
    (failed,) = report.failures
    assert failed in panel_check(report) and "panels outside their figure" in failed.details


def test_cited_figures_are_counted_as_whole_figures(parsed):
    """Numerologic cites Figure 2 and has two figures; panels of the first do not make up for losing the second."""
    _, paper = parsed
    figures = {o.view: o for o in validate_paper(paper, pdf_page_count=7, max_chunk_tokens=512).warnings}
    assert figures["images"].success and "figure 2" in figures["images"].details
    first = paper.rows("images")[0]
    panelled = copy.deepcopy(paper)
    panelled.views["images"] = [first] + [
        {**first, "image_id": f"panel-{n}", "ordinal": n, "parent_image_id": first["image_id"]} for n in range(3)
    ]
    report = validate_paper(panelled, pdf_page_count=7, max_chunk_tokens=512)
    assert report.passed, report.summary()
    assert "images" in {o.view for o in report.suspicious}


def _verdicts(report):
    return report.passed, sorted((o.view, o.name, o.success, o.details) for o in report.warnings)


def test_papers_validated_together_get_the_verdicts_they_get_alone(parsed, with_panels, monkeypatch):
    """A run's papers go through the gate together (one validation per view for all of them): each gets the
    verdict and the warnings it gets alone; a paper that breaks a blocking expectation is the only one failed, even
    when the broken value would pass in another paper (its page count)."""
    import paperlake.lake.quality as quality

    _, paper = parsed
    thin = _another_paper(paper)
    thin.views["sections"] = []
    items = [(paper, 7), (with_panels, len(with_panels.rows("pages"))), (thin, 7)]
    alone = [validate_paper(p, pdf_page_count=n, max_chunk_tokens=512) for p, n in items]
    calls = []
    monkeypatch.setattr(quality, "validate_paper", lambda *a, **k: calls.append(a) or validate_paper(*a, **k))
    together = validate_papers(items, max_chunk_tokens=512)
    assert calls == []  # they all passed together: no paper was validated again on its own
    assert [_verdicts(r) for r in together] == [_verdicts(r) for r in alone]
    assert all(r.passed for r in together) and [bool(r.suspicious) for r in together] == [False, False, True]
    short = _another_paper(paper)
    short.rows("pages").pop()  # 6 pages where the PDF has 7: the other papers have 6 or more
    broken = [(paper, 7), (short, 7), (with_panels, len(with_panels.rows("pages")))]
    verdicts = [r.passed for r in validate_papers(broken, max_chunk_tokens=512)]
    assert verdicts == [True, False, True] and len(calls) == 3


def _another_paper(paper):
    """A copy of ``paper`` as another paper: every id re-keyed, consistently."""
    copied = copy.deepcopy(paper)
    for view in VIEWS:
        for row in copied.rows(view):
            for column, value in row.items():
                if column.endswith("_id") and isinstance(value, str):
                    row[column] = "copy-" + value
    return copied


def test_publish_writes_every_view_then_the_record(tmp_path, parsed):
    source, paper = parsed
    lake = Lake(tmp_path / "lake")
    record = lake.publish(paper, source.sha256, "test-1")
    assert lake.record(source.paper_key) == record
    for view in VIEWS:
        assert pq.read_table(lake.view_path(view, source.paper_key)).num_rows == record.row_counts[view]
    # a missing view file makes the record count as absent: the paper will be parsed again
    lake.view_path("chunks", source.paper_key).unlink()
    assert lake.record(source.paper_key) is None


def test_a_crash_mid_write_leaves_the_old_file_and_no_temporary(tmp_path, parsed, monkeypatch):
    source, paper = parsed
    lake = Lake(tmp_path / "lake")
    lake.publish(paper, source.sha256, "test-1")
    path = lake.view_path("chunks", source.paper_key)
    before = path.read_bytes()

    def crash(table, where, **kwargs):
        where.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr("paperlake.lake.store.pq.write_table", crash)
    with pytest.raises(OSError, match="disk full"):
        lake.publish(paper, "another-sha", "test-2")
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]
    assert lake.record(source.paper_key).sha256 == source.sha256


def test_an_error_replaces_the_papers_views(tmp_path, parsed):
    source, paper = parsed
    lake = Lake(tmp_path / "lake")
    lake.publish(paper, source.sha256, "test-1")
    lake.record_error(
        source.paper_key,
        stage="quality",
        reason="boxes outside the page",
        volume="emnlp2024",
        pdf_path=str(source.pdf_path),
        sha256=source.sha256,
    )
    assert lake.record(source.paper_key) is None
    assert not any(lake.view_path(view, source.paper_key).exists() for view in VIEWS)
    assert lake.error(source.paper_key)["stage"] == "quality"
    assert lake.paper_keys() == {source.paper_key}


def test_a_module_deferred_for_the_gate_runs_on_first_use_and_a_failure_is_an_import_failure(tmp_path, monkeypatch):
    """A deferred module is made without running (its file is there to read), runs once on the first name asked of
    it, and a module that raises there is gone from ``sys.modules`` as after a failed import, its error raised. A
    deferred package runs before a submodule imported by name, as it would have been imported first (scipy.stats'
    submodules import each other in the order its ``__init__`` gives them)."""
    import sys

    from paperlake.lake.quality import _lazily

    counting = "import sys\nsys.pl_deferred_runs = getattr(sys, 'pl_deferred_runs', 0) + 1\nX = 1\n"
    (tmp_path / "pl_deferred_ok.py").write_text(counting)
    (tmp_path / "pl_deferred_boom.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "pl_deferred_pkg").mkdir()
    ordered = "import sys\nsys.pl_deferred_order = getattr(sys, 'pl_deferred_order', []) + [__name__]\n"
    (tmp_path / "pl_deferred_pkg" / "__init__.py").write_text(ordered)
    (tmp_path / "pl_deferred_pkg" / "sub.py").write_text(ordered)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = frozenset({"pl_deferred_ok", "pl_deferred_boom", "pl_deferred_pkg"})
    try:
        with _lazily(names):
            import pl_deferred_boom
            import pl_deferred_ok
            import pl_deferred_pkg
        assert pl_deferred_ok.__file__.endswith("pl_deferred_ok.py") and not hasattr(sys, "pl_deferred_runs")
        assert pl_deferred_ok.X == 1 and pl_deferred_ok.X == 1 and sys.pl_deferred_runs == 1
        with pytest.raises(AttributeError):
            pl_deferred_ok.missing
        with pytest.raises(RuntimeError, match="boom at import"):
            pl_deferred_boom.anything
        assert "pl_deferred_boom" not in sys.modules
        assert pl_deferred_pkg.__file__.endswith("__init__.py") and not hasattr(sys, "pl_deferred_order")
        import pl_deferred_pkg.sub

        assert sys.pl_deferred_order == ["pl_deferred_pkg", "pl_deferred_pkg.sub"]
    finally:
        for name in (*names, "pl_deferred_pkg.sub"):
            sys.modules.pop(name, None)
        for counter in ("pl_deferred_runs", "pl_deferred_order"):
            if hasattr(sys, counter):
                delattr(sys, counter)


def test_the_gate_imports_great_expectations_without_loading_what_it_never_uses(corpus):
    """scipy.stats and altair (imported by Great Expectations, unused by the gate) stay unloaded through a whole
    validation and through a walk of ``sys.modules`` that reads their files (dbt's adapter makes one), and load in full
    on their first use: a lazy module is the same module, later."""
    import subprocess
    import sys
    import textwrap

    script = (
        textwrap.dedent(
            """
        import sys
        from pathlib import Path

        from paperlake.lake.inbox import scan_inbox
        from paperlake.parsing import pymupdf_backend
        from paperlake.lake.pipeline import pdf_page_count
        from paperlake.lake.quality import import_gx, validate_papers

        gx = import_gx()
        assert gx.expectations.ExpectTableRowCountToEqual
        sources = [s for s in scan_inbox([Path(sys.argv[1])]) if s.paper_key.endswith((STEM, PANELLED))]
        items = [(pymupdf_backend.parse(s), pdf_page_count(s.pdf_path)) for s in sources]
        reports = validate_papers(items, max_chunk_tokens=512)
        assert [r.failures for r in reports] == [[], []], [r.summary() for r in reports]
        import inspect
        inspect.stack()  # reads every module's __file__ (inspect.getmodule), as dbt does when its adapter is made
        unloaded = {name: "__getattr__" in vars(sys.modules[name]) for name in ("scipy.stats", "altair")}
        assert unloaded == {"scipy.stats": True, "altair": True}, unloaded
        assert sys.modules["scipy.stats"].__file__.endswith("__init__.py")
        import scipy.stats
        assert scipy.stats.norm.cdf(0.0) == 0.5 and "__getattr__" not in vars(scipy.stats)
        from altair import Chart
        assert Chart.__module__.startswith("altair.")
        assert import_gx() is gx
        print("ok")
        """
        )
        .replace("STEM", repr(STEM))
        .replace("PANELLED", repr(PANELLED))
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(corpus / "inbox")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
