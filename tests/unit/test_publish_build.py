"""Publishing a warehouse build swaps the side file in; a side file whose lake views are still narrowed to one build's
papers (dbt's on-run-end did not run) is refused, and the live warehouse stays as it was."""

from __future__ import annotations

import duckdb
import pytest

from paperlake.warehouse.build import build_path, prepare_build, publish_build, recorded_builds


def _live(tmp_path):
    live = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(live)) as con:
        con.execute("create table metadata as select 1 as paper")
    return live


def test_a_side_file_with_a_lake_view_set_aside_is_not_published(tmp_path):
    live = _live(tmp_path)
    side = prepare_build(live)
    with duckdb.connect(str(side)) as con:
        con.execute("create schema _lake")
        con.execute("create view _lake.chunks__full as select 1 as paper")  # the whole lake, set aside
        con.execute("create view _lake.chunks as select 2 as paper")  # the build's papers only
        con.execute("insert into metadata values (2)")
    with pytest.raises(RuntimeError, match="chunks__full"):
        publish_build(live, {"warehouse": {"dbt": "x"}})
    assert recorded_builds(live) == {}
    with duckdb.connect(str(live), read_only=True) as con:
        assert con.execute("select count(*) from metadata").fetchone()[0] == 1
    assert side == build_path(live) and side.exists()


def test_a_side_file_with_its_lake_views_restored_is_published(tmp_path):
    live = _live(tmp_path)
    side = prepare_build(live)
    with duckdb.connect(str(side)) as con:
        con.execute("create schema _lake")
        con.execute("create view _lake.chunks as select 1 as paper")
        con.execute("insert into metadata values (2)")
    publish_build(live, {"warehouse": {"dbt": "x"}})
    assert recorded_builds(live)["warehouse"]["dbt"] == "x"
    assert not side.exists()
    with duckdb.connect(str(live), read_only=True) as con:
        assert con.execute("select count(*) from metadata").fetchone()[0] == 2
