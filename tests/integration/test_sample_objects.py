"""The default parser against the by-eye gold of the sample's figures and tables (tests/data/sample_objects_gold.json,
issue 50): every figure and table of the 19 papers, checked by looking at the pages. Floors a little under what
benchmarks/parse_fidelity.py measured (results/parse_fidelity_sample.json); a drop below one is a regression on
real papers, which outrank the synthetic sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperlake.parsing.gold import load_gold
from support.parser_scores import default_parser_score

GOLD = Path(__file__).parents[1] / "data" / "sample_objects_gold.json"
FLOORS = {
    ("tables", "recall"): 0.97,
    ("tables", "precision"): 0.97,
    ("figures", "recall"): 0.99,
    ("figures", "precision"): 0.99,
}
CAPTION_FLOOR = 0.98


def test_the_default_parser_finds_the_sample_s_figures_and_tables(corpus) -> None:
    gold = load_gold(GOLD)
    missing = [str(document.pdf) for document in gold if not document.pdf.exists()]
    if missing:
        pytest.skip(f"the gold's PDFs are not beside the repository ({missing[0]})")
    result = default_parser_score(gold, "sample")
    for (kind, measure), floor in FLOORS.items():
        assert result[kind][measure] >= floor, (kind, measure, result[kind][measure], result[kind]["misses"][:5])
    assert result["captions"]["right_of_gold"] >= CAPTION_FLOOR, result["captions"]["wrong"][:5]
