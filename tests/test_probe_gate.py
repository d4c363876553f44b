"""The regression gate: a fresh ingest of the whole sample (19 papers, two volumes) must keep its retrieval quality on
its own offline probes within a stated margin of the figures stored in ``benchmarks/results/probes.json`` (written by
``benchmarks/probes.py``). A parser, chunking, encoder or search change that costs answer@5 fails here, before a user
notices; one that improves it is kept by re-running the benchmark and committing the new figures."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from conftest import CORPUS_INBOX, ingest_sample
from paperlake.evaluation.needles import answer_needles, contains_needle
from paperlake.evaluation.sets import probes_path, read_jsonl

FIGURES = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "probes.json"
MARGIN = 0.05   # answer@5 may drop by at most five points per volume (about 4 of emnlp2024's 224 probes, 4 of 80)
KEYS = {"table_cells": "cell_id", "chunks": "chunk_id", "images": "image_id", "equations": "equation_id",
        "reference": "reference_id"}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory, dbt_manifest: Path) -> dict:
    with pytest.MonkeyPatch.context() as patch:
        for name in ("PAPERLAKE_EVAL_METHODS", "PAPERLAKE_EVAL_MIN_ANSWER5", "PAPERLAKE_EVALUATE"):
            patch.delenv(name, raising=False)
        stems = sorted(p.stem for p in CORPUS_INBOX.rglob("*.pdf"))
        return ingest_sample(tmp_path_factory.mktemp("gate"), stems)


def test_every_sample_paper_has_ten_verified_probes(sample):
    settings = sample["settings"]
    assert len(sample["ids"]) == 19
    kinds: Counter = Counter()
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        for key in sample["ids"]:
            rows = read_jsonl(probes_path(settings, key))
            assert len(rows) >= 10, key
            kinds.update(r["probe_kind"] for r in rows)
            for row in rows:
                evidence = row["evidence"]
                (text,), = con.execute(f'select "{evidence["column"]}" from "{evidence["table"]}" '
                                       f'where "{KEYS[evidence["table"]]}" = ?', [evidence["row_id"]]).fetchall()
                assert any(contains_needle(str(text), n) for n in answer_needles(row["gold_answer"])), row
    assert len(kinds) >= 4 and min(kinds.values()) >= 10, kinds


def test_retrieval_quality_holds_against_the_stored_figures(sample):
    figures = json.loads(FIGURES.read_text(encoding="utf-8"))["gate"]
    quality = sample["summary"].quality
    assert set(quality) == set(figures)
    for volume, stored in figures.items():
        report = quality[volume]
        assert report["method"] == stored["method"]
        assert report["answer_at_5"] >= stored["answer_at_5"] - MARGIN, (
            f"{volume}: answer@5 {report['answer_at_5']:.3f} fell more than {MARGIN} below the stored "
            f"{stored['answer_at_5']:.3f} (benchmarks/results/probes.json)")
        assert report["passed"], report
