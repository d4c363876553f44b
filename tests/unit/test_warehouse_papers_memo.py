"""An ingest's checks ask for the warehouse's papers several times (`paperlake.evaluation.sets.warehouse_papers`):
the rows are read once per version of the file, and again whenever a build swapped a new file in or a write changed
it in place."""

from __future__ import annotations

import os

import duckdb
import pytest

from paperlake.config import Settings
from paperlake.evaluation import sets
from paperlake.runtime.healing import StoreUnreadable
from paperlake.warehouse.read import file_identity

COLUMNS = "paper_key varchar, paper_id uuid, volume varchar, sha256 varchar, parser_version varchar"


def _write(path, keys):
    with duckdb.connect(str(path)) as con:
        con.execute(f"create or replace table metadata ({COLUMNS})")
        for key in keys:
            con.execute("insert into metadata values (?, uuid(), 'v', 'sha', 'p1')", [key])
        con.execute("checkpoint")


@pytest.fixture
def counted(monkeypatch):
    opened = []
    real = sets.connect_read_only

    def connect(path, **kwargs):
        opened.append(path)
        return real(path, **kwargs)

    monkeypatch.setattr(sets, "connect_read_only", connect)
    sets._PAPER_ROWS.clear()
    return opened


def test_one_read_per_version_of_the_file(tmp_path, counted):
    settings = Settings.from_env(home=tmp_path)
    settings.warehouse.parent.mkdir(parents=True, exist_ok=True)
    assert sets.warehouse_papers(settings) == {} and counted == []  # no warehouse, nothing opened

    _write(settings.warehouse, ["v/a", "v/b"])
    first = sets.warehouse_papers(settings)
    assert sorted(first) == ["v/a", "v/b"]
    assert sets.warehouse_papers(settings) == first and sets.volumes(settings) == {"v": ["v/a", "v/b"]}
    assert len(counted) == 1

    side = settings.warehouse.with_name("side.duckdb")  # a build: a new file swapped in
    _write(side, ["v/a", "v/b", "v/c"])
    os.replace(side, settings.warehouse)
    assert sorted(sets.warehouse_papers(settings)) == ["v/a", "v/b", "v/c"] and len(counted) == 2

    with duckdb.connect(str(settings.warehouse)) as con:  # a write in place, left in the write-ahead log
        con.execute("pragma disable_checkpoint_on_shutdown")
        con.execute("insert into metadata values ('v/d', uuid(), 'v', 'sha', 'p1')")
    assert "v/d" in sets.warehouse_papers(settings) and len(counted) == 3

    other = Settings.from_env(home=tmp_path / "other")  # another home is read on its own
    other.warehouse.parent.mkdir(parents=True, exist_ok=True)
    _write(other.warehouse, ["w/x"])
    assert list(sets.warehouse_papers(other)) == ["w/x"]
    assert "v/d" in sets.warehouse_papers(settings) and len(counted) == 5


def test_identity_and_an_unreadable_file(tmp_path, counted):
    settings = Settings.from_env(home=tmp_path)
    settings.warehouse.parent.mkdir(parents=True, exist_ok=True)
    assert file_identity(settings.warehouse) is None
    settings.warehouse.write_bytes(b"not a database" * 100)
    identity = file_identity(settings.warehouse)
    assert identity is not None and identity[1] is None  # no write-ahead log
    with pytest.raises(StoreUnreadable):
        sets.warehouse_papers(settings)
    assert sets._PAPER_ROWS == {}  # nothing remembered of a file that could not be read
