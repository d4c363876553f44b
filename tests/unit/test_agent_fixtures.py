"""The agent's shared test material (tests/support/agent_fixtures.py) checked itself: the small warehouse and the
fake vector backend."""

from __future__ import annotations

from pathlib import Path

from paperlake.runtime.sql_sandbox import ReadOnlyWarehouse
from schemas.warehouse import catalogue
from support.agent_fixtures import CALIBRATION, CHUNK_IDS, FakeVectors, home  # noqa: F401 (fixture)


def test_warehouse_has_every_catalogued_table(home: Path) -> None:  # noqa: F811
    with ReadOnlyWarehouse(home / "warehouse.duckdb") as warehouse:
        names = {row[0] for row in warehouse.query("show tables").rows}
        counts = warehouse.query("select count(*) from chunks").rows[0][0]
    assert {t.name for t in catalogue()} <= names
    assert counts == 4


def test_fake_vectors_rank_by_overlap_and_scope(home: Path) -> None:  # noqa: F811
    vectors = FakeVectors(home / "warehouse.duckdb")
    hits = vectors.search(
        "SST-2 accuracy RankCal", "text_bm25_en", "chunks", "text_content", f"pdf_id == '{CALIBRATION}'", 2
    )
    assert hits[0].primary_key == CHUNK_IDS[1]
    assert all(h.pdf_id == CALIBRATION for h in hits)
