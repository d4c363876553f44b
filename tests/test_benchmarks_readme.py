"""benchmarks/README.md is generated from benchmarks/results/*.json; a results file changed without regenerating
the page (or the page edited by hand) fails here. Fix: `python benchmarks/make_readme.py`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("make_readme", REPO / "benchmarks" / "make_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmarks_readme_is_what_the_results_give() -> None:
    expected = _generator().render(REPO / "benchmarks" / "results")
    committed = (REPO / "benchmarks" / "README.md").read_text()
    assert committed == expected, "benchmarks/README.md is out of date: run `python benchmarks/make_readme.py`"


def test_every_results_file_has_a_section() -> None:
    page = (REPO / "benchmarks" / "README.md").read_text()
    for path in sorted((REPO / "benchmarks" / "results").glob("*.json")):
        assert f"`results/{path.name}`" in page
