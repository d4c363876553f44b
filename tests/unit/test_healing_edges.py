"""The store-healing helpers on their own (paperlake/runtime/healing.py): the set-aside name and line, the SQLite
check's verdicts, the journals that go with a damaged database, and the reader's one-line error."""

from __future__ import annotations

import logging
import re
import sqlite3
from datetime import datetime, timezone

import pytest

from paperlake.runtime.healing import (
    DAMAGED_SUFFIX,
    SetAside,
    StoreUnreadable,
    heal_sqlite,
    is_set_aside,
    set_aside,
    sqlite_problem,
)

STAMP = re.compile(r"^(?P<name>.+)\.damaged-(?P<stamp>\d{8}T\d{12}Z)$")


def _database(path, rows: int = 1) -> None:
    with sqlite3.connect(path) as con:
        con.execute("create table t (x)")
        con.executemany("insert into t values (?)", [(i,) for i in range(rows)])
    con.close()


def test_a_set_aside_file_is_renamed_beside_itself_with_a_utc_stamp(tmp_path):
    path = tmp_path / "store.db"
    path.write_bytes(b"junk")
    before = datetime.now(timezone.utc).replace(microsecond=0)
    moved = set_aside(path, "bad")
    after = datetime.now(timezone.utc)
    assert not path.exists() and moved.moved_to.read_bytes() == b"junk"
    assert moved.moved_to.parent == tmp_path and moved.path == path
    match = STAMP.match(moved.moved_to.name)
    assert match and match["name"] == "store.db", moved.moved_to.name
    when = datetime.strptime(match["stamp"], "%Y%m%dT%H%M%S%fZ").replace(tzinfo=timezone.utc)
    assert before <= when <= after  # UTC, not local time
    assert is_set_aside(moved.moved_to) and not is_set_aside(path) and DAMAGED_SUFFIX in moved.moved_to.name


def test_two_set_asides_of_one_file_do_not_collide(tmp_path):
    path = tmp_path / "store.db"
    path.write_bytes(b"first")
    first = set_aside(path, "one")
    path.write_bytes(b"second")
    second = set_aside(path, "two")
    assert first.moved_to != second.moved_to
    assert first.moved_to.read_bytes() == b"first" and second.moved_to.read_bytes() == b"second"


def test_a_directory_or_a_link_is_set_aside_the_same_way(tmp_path):
    folder = tmp_path / "milvus.db"
    (folder / "collections").mkdir(parents=True)
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "nowhere")
    assert (set_aside(folder, "x").moved_to / "collections").is_dir()
    moved = set_aside(link, "dangling")
    assert moved.moved_to.is_symlink() and not link.is_symlink()


def test_the_reason_is_one_line_of_at_most_300_characters(tmp_path, caplog):
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"x")
    reason = "Parquet\n  magic   bytes\tnot found " + "y" * 400
    with caplog.at_level(logging.WARNING, logger="paperlake.runtime.healing"):
        moved = set_aside(path, reason)
    assert moved.reason.startswith("Parquet magic bytes not found yyy")
    assert len(moved.reason) == 300 and "\n" not in moved.reason
    assert moved.line() == (f"{path} could not be read ({moved.reason}); set aside as {moved.moved_to.name}, rebuilt")
    assert [record.getMessage() for record in caplog.records] == [moved.line()]


def test_a_short_reason_is_kept_whole(tmp_path):
    path = tmp_path / "a"
    path.write_bytes(b"x")
    assert set_aside(path, "x" * 300).reason == "x" * 300
    path.write_bytes(b"x")
    assert set_aside(path, " two  words ").reason == "two words"


def test_a_readers_error_names_the_store_the_path_and_the_cure(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    error = StoreUnreadable("warehouse", path, "IOException:\n  not   a database " + "z" * 300)
    message = str(error)
    assert message.startswith(f"the warehouse at {path} cannot be read (IOException: not a database zz")
    assert message.endswith("); `paperlake ingest` sets it aside and rebuilds it")
    inside = message[message.index("(") + 1 : message.index(");")]
    assert len(inside) == 200
    assert error.path == path
    assert str(StoreUnreadable("cache", path, "short")) == (
        f"the cache at {path} cannot be read (short); `paperlake ingest` sets it aside and rebuilds it"
    )


def test_a_sound_database_has_no_problem_and_is_not_changed(tmp_path):
    path = tmp_path / "good.db"
    _database(path, rows=50)
    before = path.read_bytes()
    assert sqlite_problem(path) is None
    assert sqlite_problem(tmp_path / "missing.db") is None
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.db"]  # no journal left by the check


def test_a_folder_where_the_database_belongs_is_not_a_file(tmp_path):
    (tmp_path / "runs.db").mkdir()
    assert sqlite_problem(tmp_path / "runs.db") == "not a file"


def test_a_file_that_is_not_a_database_names_sqlites_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a sqlite file at all" * 200)
    assert sqlite_problem(path) == "DatabaseError: file is not a database"


def test_a_database_that_opens_but_fails_its_check_says_the_checks_verdict(tmp_path):
    """Pages damaged past the header: the file opens, quick_check names what is wrong."""
    path = tmp_path / "damaged.db"
    with sqlite3.connect(path) as con:
        con.execute("pragma page_size = 1024")
        con.execute("create table t (x text)")
        con.execute("create index i on t (x)")
        con.executemany("insert into t values (?)", [(f"row {i} " + "p" * 50,) for i in range(2000)])
    con.close()
    data = bytearray(path.read_bytes())
    for offset in range(3 * 1024, len(data) - 1024, 7 * 1024):  # scribble inside b-tree pages, header intact
        data[offset + 8 : offset + 40] = b"\xff" * 32
    path.write_bytes(bytes(data))
    problem = sqlite_problem(path)
    assert problem is not None and problem.startswith("integrity check: "), problem
    assert "page" in problem and "no answer" not in problem, problem[:200]


def test_heal_sets_aside_a_damaged_database_with_every_journal_and_keeps_the_sound_ones(tmp_path):
    good, bad = tmp_path / "good.db", tmp_path / "bad.db"
    _database(good)
    bad.write_bytes(b"not a database" * 100)
    for suffix in ("-wal", "-shm", "-journal"):
        (tmp_path / f"bad.db{suffix}").write_bytes(b"j")
    (tmp_path / "good.db-wal").write_bytes(b"")
    moved = heal_sqlite([good, bad, tmp_path / "missing.db"])
    assert all(isinstance(m, SetAside) for m in moved)
    assert [m.path.name for m in moved] == ["bad.db", "bad.db-wal", "bad.db-shm", "bad.db-journal"]
    assert [m.reason for m in moved[1:]] == ["the journal of bad.db"] * 3
    assert moved[0].reason == "DatabaseError: file is not a database"
    assert good.exists() and (tmp_path / "good.db-wal").exists()
    assert not any((tmp_path / f"bad.db{suffix}").exists() for suffix in ("", "-wal", "-shm", "-journal"))


@pytest.mark.parametrize("suffix", ["-shm", "-journal"])
def test_a_journal_alone_beside_a_damaged_database_goes_with_it(tmp_path, suffix):
    bad = tmp_path / "events.db"
    bad.write_bytes(b"\0" * 4096 + b"junk")
    (tmp_path / f"events.db{suffix}").write_bytes(b"j")
    moved = heal_sqlite([bad])
    assert [m.path.name for m in moved] == ["events.db", f"events.db{suffix}"]


def test_the_stamp_is_utc_whatever_the_local_zone(tmp_path, monkeypatch):
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")  # UTC+9 all year: a local stamp would be nine hours ahead
    time.tzset()
    try:
        path = tmp_path / "x.db"
        path.write_bytes(b"x")
        moved = set_aside(path, "r")
        stamp = STAMP.match(moved.moved_to.name)["stamp"]
        when = datetime.strptime(stamp, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=timezone.utc)
        assert abs((datetime.now(timezone.utc) - when).total_seconds()) < 60
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_an_empty_file_where_the_database_belongs_is_damage(tmp_path):
    """SQLite reads a file cut to nothing as a database without tables; Dagster then fails on its first query."""
    (tmp_path / "index.db").write_bytes(b"")
    assert sqlite_problem(tmp_path / "index.db") == "empty: no database in it"


def test_an_embedding_cache_on_a_read_only_home_is_kept_in_memory(tmp_path, monkeypatch):
    """Not damage: nothing is set aside (a read-only folder would refuse it anyway), the vectors are cached for the
    process."""
    import numpy as np

    from paperlake.vectors import embedding_cache

    path = tmp_path / "embeddings.sqlite"
    path.write_bytes(b"")
    real = sqlite3.connect

    def refuse(target, *args, **kwargs):
        if str(target) == str(path):
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real(target, *args, **kwargs)

    monkeypatch.setattr(embedding_cache.sqlite3, "connect", refuse)
    cache = embedding_cache.EmbeddingCache(path)
    assert cache.in_memory and sorted(p.name for p in tmp_path.iterdir()) == ["embeddings.sqlite"]
    cache.put_many("model", {"abc": np.ones(3, dtype=np.float32)})
    assert list(cache.get_many("model", ["abc"])) == ["abc"]
