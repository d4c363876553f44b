"""The formula graph is made from the lake's equation files, before dbt loads them: its staleness check asks DuckDB
nothing while the files are the ones the graph was built from, and reads their rows when they are not."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from paperlake import freshness
from paperlake.config import Settings
from paperlake.formulas.state import connect_lake_equations, equation_sources
from paperlake.formulas.store import update_formula_graph
from paperlake.lake.store import Lake, write_table_atomic
from paperlake.lake.views import VIEW_SCHEMAS

PAPER = "00000000-0000-4000-8000-000000000001"
# constructed: two display equations of one paper, one with a blank LaTeX column (the text stands for it)
ROWS = [
    {
        "equation_id": "00000000-0000-4000-8000-0000000000a1",
        "paper_id": PAPER,
        "page_number": 3,
        "page_id": "00000000-0000-4000-8000-0000000000b1",
        "ordinal": 0,
        "equation_text": "F1 = 2PR/(P+R)",
        "equation_latex": r"F_1 = \frac{2 P R}{P + R}",
        "equation_number": "1",
        "latex_source": "mineru",
        "bbox": [71.6, 200.4, 300.5, 20.5],
        "context": "The F1 score is the harmonic mean of precision P and recall R:",
        "context_after": "",
        "detector": "mineru",
        "backend": "mineru",
    },
    {
        "equation_id": "00000000-0000-4000-8000-0000000000a2",
        "paper_id": PAPER,
        "page_number": 4,
        "page_id": "00000000-0000-4000-8000-0000000000b2",
        "ordinal": 1,
        "equation_text": "y = a x + b",
        "equation_latex": "  ",
        "equation_number": "2",
        "latex_source": None,
        "bbox": [70.0, 100.0, 200.0, 18.0],
        "context": "A line with slope a and intercept b:",
        "context_after": "",
        "detector": "pymupdf",
        "backend": "mineru",
    },
]


def _write(lake: Lake, rows: list[dict]) -> None:
    write_table_atomic(pa.Table.from_pylist(rows, schema=VIEW_SCHEMAS["equations"]), lake.view_path("equations", "v/p"))


@pytest.fixture
def settings(tmp_path):
    settings = Settings.from_env(home=tmp_path / "home")
    Lake(settings.lake).ensure_contract()
    _write(Lake(settings.lake), ROWS)
    return settings


def _build(settings: Settings) -> None:
    sources = equation_sources(settings.lake)
    with connect_lake_equations(settings.lake) as con:
        update_formula_graph(con, freshness.formula_dir(settings), freshness.turtle_path(settings), sources=sources)


def test_the_lake_view_has_the_marts_columns_as_the_mart_derives_them(settings):
    with connect_lake_equations(settings.lake) as con:
        rows = con.execute(
            "select equation_id::varchar, ref_paper_id::varchar, equation_content, bounding_box::integer[] "
            "from equations order by ordinal"
        ).fetchall()
    assert rows == [
        (ROWS[0]["equation_id"], PAPER, ROWS[0]["equation_latex"], [72, 200, 301, 21]),  # rounded as int_bbox does
        (ROWS[1]["equation_id"], PAPER, "y = a x + b", [70, 100, 200, 18]),  # blank LaTeX: the text
    ]


def test_a_graph_of_the_same_files_is_current_without_reading_them(settings, monkeypatch):
    assert freshness.lake_formula_graph_staleness(settings) == (
        "no complete formula graph (never built, other extraction rules, or a build cut short)"
    )
    _build(settings)

    def no_reading(_lake):
        raise AssertionError("the files were read")

    monkeypatch.setattr(freshness, "connect_lake_equations", no_reading)
    assert freshness.lake_formula_graph_staleness(settings) is None


def test_the_same_rows_written_again_keep_it_current_and_other_rows_make_it_stale(settings):
    _build(settings)
    lake = Lake(settings.lake)
    path = lake.view_path("equations", "v/p")
    _write(lake, ROWS)  # the paper parsed again, the same equations: a new file
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert freshness.lake_formula_graph_staleness(settings) is None
    _write(lake, [ROWS[0], {**ROWS[1], "equation_text": "y = a x + c"}])
    assert freshness.lake_formula_graph_staleness(settings) == "equations changed in 1 paper(s)"
    _build(settings)
    assert freshness.lake_formula_graph_staleness(settings) is None
    path.unlink()  # the paper left the lake
    assert freshness.lake_formula_graph_staleness(settings) == "equations changed in 1 paper(s)"
