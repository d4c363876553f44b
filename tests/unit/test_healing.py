"""Stores that heal, piece by piece: the inbox's links and manifests, the lake's damaged files, the warehouse, the
caches and the derived JSON Lines files (the damage harness, tests/integration/test_damage.py, runs whole ingests)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import duckdb
import numpy as np
import pytest

from paperlake.config import Settings
from paperlake.lake.inbox import VolumeHeld, scan_volumes
from paperlake.lake.pipeline import (
    HELD_VOLUME_STEM,
    duplicate_groups,
    duplicate_of,
    ingest_paper,
    locate_source,
    needs_parse,
    plan_ingest,
    record_held_volumes,
)
from paperlake.lake.store import ERROR_VIEW, Lake
from paperlake.runtime.healing import StoreUnreadable, heal_sqlite, is_set_aside
from paperlake.vectors.embedding_cache import EmbeddingCache
from paperlake.warehouse.build import heal_warehouse
from paperlake.warehouse.read import connect_read_only
from support.fixtures import CORPUS_MINERU, corpus_pdf

FIRST = "emnlp2024-126-embedding-inversion-attack"
SECOND = "emnlp2024-012-numerologic"

pytestmark = pytest.mark.usefixtures("corpus")


def _settings(tmp_path: Path) -> Settings:
    return Settings.from_env(home=tmp_path / "home", backend="pymupdf", mineru_dir=None)


def _damage(path: Path, how: str) -> None:
    size = path.stat().st_size
    if how == "truncated":
        with open(path, "r+b") as handle:
            handle.truncate(size // 2)
    elif how == "random":
        path.write_bytes(os.urandom(size))
    elif how == "directory":
        path.unlink()
        path.mkdir()
        (path / "inside").write_text("x")


# ---------------------------------------------------------------------------------------------------------------
# The inbox: links and manifests


def test_a_linked_pdf_is_a_paper_under_the_links_name(tmp_path):
    volume = tmp_path / "inbox" / "vol"
    volume.mkdir(parents=True)
    (volume / "mine.pdf").symlink_to(corpus_pdf(FIRST))
    (tmp_path / "inbox" / "linked-volume").symlink_to(corpus_pdf(SECOND).parent)
    sources = {s.paper_key: s for s in scan_volumes([tmp_path / "inbox"]).sources}
    assert sources["vol/mine"].problem is None and sources["vol/mine"].pdf_path == volume / "mine.pdf"
    assert sources[f"linked-volume/{SECOND}"].problem is None
    assert all(not key.startswith(("etc", "work", "shared")) for key in sources)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda link, tmp: link.symlink_to("/etc/hostname"), "leads out of the inboxes to a file that is not a PDF"),
        (lambda link, tmp: link.symlink_to(link), "loops"),
        (lambda link, tmp: link.symlink_to(tmp / "gone.pdf"), "points to nothing"),
        (lambda link, tmp: link.symlink_to(tmp), "does not point to a file"),
        (lambda link, tmp: link.mkdir(), "a folder, not a PDF file"),  # an entry named .pdf is never a removal
    ],
)
def test_a_link_that_is_not_read_becomes_the_papers_error_row(tmp_path, make, reason):
    volume = tmp_path / "inbox" / "vol"
    volume.mkdir(parents=True)
    make(volume / "bad.pdf", tmp_path)
    (source,) = scan_volumes([tmp_path / "inbox"]).sources
    assert source.paper_key == "vol/bad" and reason in source.problem
    settings = _settings(tmp_path)
    lake = Lake(settings.lake)
    outcome = ingest_paper(source, lake, settings, inboxes=[tmp_path / "inbox"])
    assert outcome.status == "failed" and outcome.stage == "inbox"
    assert reason in lake.error("vol/bad")["reason"]
    assert not needs_parse(source, lake, settings)  # settled: the next run does not try again


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(b"file,title\nx.pdf,\xff\xfe bad\n"),
        lambda path: path.write_text("file,title\nx.pdf," + "t" * 200_000 + "\n"),
        lambda path: path.mkdir(),
    ],
    ids=["not-utf8", "field-too-large", "directory"],
)
def test_an_unreadable_manifest_holds_its_volume_and_never_the_run(tmp_path, damage):
    inbox = tmp_path / "inbox"
    for volume, stem in (("good", FIRST), ("bad", SECOND)):
        (inbox / volume).mkdir(parents=True)
        (inbox / volume / f"{stem}.pdf").write_bytes(corpus_pdf(stem).read_bytes())
    settings = _settings(tmp_path)
    lake = Lake(settings.lake)
    first = scan_volumes([inbox])
    for source in first.sources:
        ingest_paper(source, lake, settings, inboxes=[inbox])
    damage(inbox / "bad" / "manifest.csv")
    scan = scan_volumes([inbox])
    assert [s.paper_key for s in scan.sources] == [f"good/{FIRST}"] and "manifest.csv" in scan.held["bad"]
    plan = plan_ingest(scan.sources, lake, settings, held=scan.held)
    assert plan.removed == [] and plan.to_parse == []  # the held volume's paper is neither removed nor parsed
    record_held_volumes(lake, scan)
    assert lake.error(f"bad/{HELD_VOLUME_STEM}")["stage"] == "manifest"
    target = inbox / "bad" / "manifest.csv"
    if target.is_dir():
        target.rmdir()
    else:
        target.unlink()
    healed = scan_volumes([inbox])
    record_held_volumes(lake, healed)
    assert not healed.held and lake.error(f"bad/{HELD_VOLUME_STEM}") is None
    assert plan_ingest(healed.sources, lake, settings, held=healed.held).removed == []


@pytest.mark.parametrize("how", ["points to nothing", "loops"])
def test_a_volume_folder_that_cannot_be_read_is_held_not_removed(tmp_path, how):
    """A volume linked in from a share that is not mounted (or a link that loops) is held, as an unreadable manifest
    holds its volume: its papers are neither removed by the plan nor by a parse run, and one row says why."""
    inbox, share = tmp_path / "inbox", tmp_path / "share"
    (inbox / "good").mkdir(parents=True)
    (share / "linked").mkdir(parents=True)
    (inbox / "good" / f"{FIRST}.pdf").write_bytes(corpus_pdf(FIRST).read_bytes())
    (share / "linked" / f"{SECOND}.pdf").write_bytes(corpus_pdf(SECOND).read_bytes())
    (inbox / "linked").symlink_to(share / "linked")
    settings = _settings(tmp_path)
    lake = Lake(settings.lake)
    for source in scan_volumes([inbox]).sources:
        assert ingest_paper(source, lake, settings, inboxes=[inbox]).status == "published"

    (share / "linked").rename(share / "unmounted")
    if how == "loops":
        (inbox / "linked").unlink()
        (inbox / "linked").symlink_to(inbox / "linked")
    scan = scan_volumes([inbox])
    assert [s.paper_key for s in scan.sources] == [f"good/{FIRST}"] and scan.removals_held is None
    assert scan.held["linked"].startswith(f"the volume folder {inbox / 'linked'} is a symbolic link that {how}")
    plan = plan_ingest(scan.sources, lake, settings, held=scan.held)
    assert plan.removed == [] and plan.to_parse == []
    with pytest.raises(VolumeHeld, match=how):  # what the parse step asks: not "gone", so nothing is removed
        locate_source(f"linked/{SECOND}", [inbox], None)
    record_held_volumes(lake, scan)
    assert lake.error(f"linked/{HELD_VOLUME_STEM}")["stage"] == "inbox"

    # an inbox whose one volume is such a link is not bare: the volume is held, not every paper kept unsaid
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "linked").symlink_to(share / "linked")
    assert scan_volumes([lone]).bare == [] and "linked" in scan_volumes([lone]).held

    # mounted again: the row goes, the paper is where it was
    if how == "loops":
        (inbox / "linked").unlink()
        (inbox / "linked").symlink_to(share / "linked")
    (share / "unmounted").rename(share / "linked")
    healed = scan_volumes([inbox])
    record_held_volumes(lake, healed)
    assert not healed.held and lake.error(f"linked/{HELD_VOLUME_STEM}") is None
    assert plan_ingest(healed.sources, lake, settings, held=healed.held).removed == []
    assert locate_source(f"linked/{SECOND}", [inbox], None).pdf_path == inbox / "linked" / f"{SECOND}.pdf"


def test_mineru_outputs_redone_or_repaired_parse_the_paper_again(tmp_path):
    """A paper's MinerU outputs are among its inputs: damaged ones fail the paper (stage mineru), and once they are
    repaired the next plan parses it again, where before only a new PDF or manifest row did, so it stayed failed."""
    inbox, mineru = tmp_path / "inbox", tmp_path / "mineru"
    (inbox / "emnlp2024").mkdir(parents=True)
    (inbox / "emnlp2024" / f"{SECOND}.pdf").write_bytes(corpus_pdf(SECOND).read_bytes())
    shutil.copytree(CORPUS_MINERU / SECOND, mineru / SECOND)
    settings = Settings.from_env(home=tmp_path / "home", backend="auto", mineru_dir=mineru)
    lake = Lake(settings.lake)
    key = f"emnlp2024/{SECOND}"

    def plan():
        return plan_ingest(scan_volumes([inbox], mineru).sources, lake, settings).to_parse

    [source] = plan()
    assert source.mineru_hash and ingest_paper(source, lake, settings, inboxes=[inbox]).backend == "mineru"
    assert lake.record(key) is not None and plan() == []
    [content_list] = sorted((mineru / SECOND).glob("*_content_list.json"))
    good = content_list.read_bytes()
    content_list.write_bytes(good[: len(good) // 3])  # a copy cut short
    [damaged] = plan()
    outcome = ingest_paper(damaged, lake, settings, inboxes=[inbox])
    assert (outcome.status, outcome.stage) == ("failed", "mineru") and "unreadable JSON" in outcome.reason
    assert plan() == []  # a failure is not retried until an input changes
    content_list.write_bytes(good)
    [repaired] = plan()
    assert ingest_paper(repaired, lake, settings, inboxes=[inbox]).status == "published"
    assert lake.error(key) is None and plan() == []


def test_a_volume_given_as_the_inbox_or_a_bare_inbox_removes_nothing_and_a_loose_pdf_is_said(tmp_path):
    inbox = tmp_path / "inbox"
    (inbox / "vol").mkdir(parents=True)
    for stem in (FIRST, SECOND):
        (inbox / "vol" / f"{stem}.pdf").write_bytes(corpus_pdf(stem).read_bytes())
    settings = _settings(tmp_path)
    lake = Lake(settings.lake)
    first = scan_volumes([inbox])
    assert first.removals_held is None and not first.loose and not first.misplaced()
    ingested, other = f"vol/{FIRST}", f"vol/{SECOND}"
    ingest_paper(next(s for s in first.sources if s.paper_key == ingested), lake, settings, inboxes=[inbox])

    # the volume folder given as the inbox: its PDFs are loose, it has no volume, so nothing is removed
    scan = scan_volumes([inbox / "vol"])
    assert scan.sources == [] and [p.name for p in scan.loose] == sorted([f"{FIRST}.pdf", f"{SECOND}.pdf"])
    assert scan.bare == [inbox / "vol"] and "no volume folder in" in scan.removals_held
    plan = plan_ingest(scan.sources, lake, settings, held=scan.held, removals_held=scan.removals_held is not None)
    assert plan.removed == [] and plan.kept == [ingested] and "1 kept (removals held)" in plan.summary()
    [line] = scan.misplaced()
    assert line.startswith(f"2 PDFs directly in {inbox / 'vol'}") and "belong to no volume" in line

    # an empty inbox (a share not mounted) holds removals too; hidden folders are not volumes
    empty = tmp_path / "mountpoint"
    (empty / ".snapshot").mkdir(parents=True)
    scan = scan_volumes([empty])
    assert scan.bare == [empty] and not scan.loose
    assert plan_ingest([], lake, settings, removals_held=scan.removals_held is not None).kept == [ingested]

    # a loose PDF beside the volumes is said, and the inbox reconciles as usual
    (inbox / "stray.PDF").write_bytes(b"%PDF-1.4 stray")
    (inbox / "vol" / f"{FIRST}.pdf").unlink()
    scan = scan_volumes([inbox])
    assert [p.name for p in scan.loose] == ["stray.PDF"] and scan.removals_held is None
    assert [s.paper_key for s in scan.sources] == [other]
    assert plan_ingest(scan.sources, lake, settings, held=scan.held).removed == [ingested]
    assert scan.misplaced() == [
        f"1 PDF directly in {inbox} (stray.PDF) belong to no volume and are not read: move them into {inbox}/<volume>/"
    ]

    # PDFs in folders inside a volume are not read either, and said; hidden folders and MinerU's outputs are not
    for folder in ("long", "long/more", ".trash", "mineru"):
        (inbox / "vol" / folder).mkdir()
        (inbox / "vol" / folder / "x.pdf").write_bytes(b"%PDF-1.4")
    scan = scan_volumes([inbox], inbox / "vol" / "mineru")
    assert [s.paper_key for s in scan.sources] == [other]
    assert scan.misplaced()[1] == (
        f"2 PDFs in folders inside the volume {inbox / 'vol'} (long/x.pdf, …) are not read: a volume's PDFs sit "
        "directly in its folder"
    )
    for folder in ("long", ".trash", "mineru"):
        shutil.rmtree(inbox / "vol" / folder)

    # every volume emptied on purpose (the folder kept): its papers are removed
    (inbox / "vol" / f"{SECOND}.pdf").unlink()
    scan = scan_volumes([inbox])
    assert scan.removals_held is None and plan_ingest(scan.sources, lake, settings).removed == [ingested]


def test_two_files_with_one_key_make_one_paper_and_the_other_is_said(tmp_path):
    """``a.PDF`` and ``a.pdf`` in one volume, or one volume's file in two inboxes, share the key ``vol/a``: the first
    is the paper for the scan, the parse step (locate_source) and the duplicate check alike; the others are said."""
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "vol").mkdir(parents=True)
    (second / "vol").mkdir(parents=True)
    pdf = corpus_pdf(FIRST).read_bytes()
    (first / "vol" / "a.PDF").write_bytes(pdf)
    (first / "vol" / "a.pdf").write_bytes(pdf)  # identical, and older: it would win a duplicate check it is not in
    os.utime(first / "vol" / "a.pdf", ns=(1, 1))
    (second / "vol" / "a.pdf").write_bytes(corpus_pdf(SECOND).read_bytes())
    inboxes = [first, second]

    scan = scan_volumes(inboxes)
    [source] = scan.sources
    assert (source.paper_key, source.pdf_path) == ("vol/a", first / "vol" / "a.PDF")
    assert locate_source("vol/a", inboxes, None).pdf_path == source.pdf_path
    assert scan.shadowed == [(first / "vol" / "a.pdf", source.pdf_path), (second / "vol" / "a.pdf", source.pdf_path)]
    assert scan.misplaced() == [
        f"{first / 'vol' / 'a.pdf'} is not read: {source.pdf_path}, in the same volume (a key ignores the case of "
        ".pdf), is already the paper vol/a; rename one of them",
        f"{second / 'vol' / 'a.pdf'} is not read: {source.pdf_path}, in an inbox given before it, is already the "
        "paper vol/a; rename one of them",
    ]
    assert duplicate_of(source, inboxes) is None  # a shadowed copy is no paper to be the duplicate of
    settings = _settings(tmp_path)
    outcome = ingest_paper(source, Lake(settings.lake), settings, inboxes=inboxes)
    assert outcome.status == "published", outcome.reason

    # the inboxes the other way round: the second inbox's file is the paper, and both of the first's are said
    scan = scan_volumes([second, first])
    assert [s.pdf_path for s in scan.sources] == [second / "vol" / "a.pdf"] and len(scan.misplaced()) == 2

    # a loose PDF whose name is not UTF-8 (a ZIP made elsewhere) is said in UTF-8, its stray byte as \xNN
    (first / os.fsdecode(b"stray\xff.pdf")).write_bytes(b"%PDF-1.4")
    [line] = [line for line in scan_volumes([first]).misplaced() if "stray" in line]
    assert f"directly in {first} (stray\\xff.pdf)" in line and line.encode("utf-8")


def test_paperlake_ingest_of_a_volume_folder_says_what_to_pass_and_touches_nothing(tmp_path, monkeypatch, capsys):
    import cli.app as cli_app

    volume = tmp_path / "downloads" / "naacl2024"
    volume.mkdir(parents=True)
    for stem in (FIRST, SECOND):
        (volume / f"{stem}.pdf").write_bytes(b"%PDF-1.4 never read")
    (volume / "manifest.csv").write_text("file,title\n")
    monkeypatch.setenv("COLUMNS", "80")  # one line whatever the width
    monkeypatch.setattr("sys.argv", ["paperlake", "ingest", str(volume), "--home", str(tmp_path / "home")])
    with pytest.raises(SystemExit) as ended:
        cli_app.main()
    output = capsys.readouterr()
    assert ended.value.code == 1 and output.out == ""
    [line] = output.err.splitlines()
    assert f"{volume} holds 2 PDFs and no volume folder" in line and "as the volume 'naacl2024'" in line
    assert f"pass the folder that holds it ({volume.parent})" in line
    assert not (tmp_path / "home").exists()

    (volume / "vol").mkdir()  # a folder beside them: an inbox with loose PDFs, which the ingest says and goes on with
    from cli.ingest import _a_volume_not_an_inbox

    assert _a_volume_not_an_inbox(volume) is None and _a_volume_not_an_inbox(tmp_path / "downloads") is None


def test_three_identical_copies_settle_on_one_rule(tmp_path):
    volume = tmp_path / "inbox" / "vol"
    volume.mkdir(parents=True)
    for name in ("c", "a", "b"):
        (volume / f"{name}.pdf").write_bytes(corpus_pdf(FIRST).read_bytes())
        os.utime(volume / f"{name}.pdf", ns=(1_000_000_000, 1_000_000_000))  # one mtime: the key decides
    sources = scan_volumes([tmp_path / "inbox"]).sources
    losers = duplicate_groups(sources)
    assert losers == {"vol/b": "vol/a", "vol/c": "vol/a"}
    for source in sources:
        kept = duplicate_of(source, [tmp_path / "inbox"])
        assert (kept[0] if kept else None) == losers.get(source.paper_key)


# ---------------------------------------------------------------------------------------------------------------
# The lake


@pytest.fixture
def published(tmp_path):
    volume = tmp_path / "inbox" / "vol"
    volume.mkdir(parents=True)
    (volume / "p.pdf").write_bytes(corpus_pdf(FIRST).read_bytes())
    settings = _settings(tmp_path)
    lake = Lake(settings.lake)
    (source,) = scan_volumes([tmp_path / "inbox"]).sources
    assert ingest_paper(source, lake, settings).status == "published"
    return source, lake, settings


@pytest.mark.parametrize("how", ["truncated", "random", "directory"])
def test_a_damaged_view_file_makes_its_paper_parse_again(published, how):
    source, lake, settings = published
    assert lake.damage(lake.record(source.paper_key)) is None and not needs_parse(source, lake, settings)
    _damage(lake.view_path("chunks", source.paper_key), how)
    assert lake.damage(lake.record(source.paper_key)).startswith("chunks")
    assert needs_parse(source, lake, settings)
    assert ingest_paper(source, lake, settings).status == "published"
    assert lake.damage(lake.record(source.paper_key)) is None


def test_a_copied_lake_is_checked_by_content_and_kept(published):
    source, lake, settings = published
    path = lake.view_path("pages", source.paper_key)
    os.utime(path, ns=(5, 5))  # another mtime, the same bytes: a copied home
    assert lake.damage(lake.record(source.paper_key)) is None


@pytest.mark.parametrize("how", ["truncated", "random", "directory"])
def test_damaged_contract_and_error_files_are_written_again(published, how):
    source, lake, _ = published
    contract = lake.root / "chunks" / "_contract" / "schema.parquet"
    _damage(contract, how)
    lake.ensure_contract()
    assert contract.is_file() and contract.stat().st_size > 0
    lake.record_error("vol/q", stage="open", reason="x", volume="vol", pdf_path="q.pdf", sha256="0")
    _damage(lake.view_path(ERROR_VIEW, "vol/q"), how)
    assert lake.error("vol/q") is None and not os.path.lexists(lake.view_path(ERROR_VIEW, "vol/q"))


# ---------------------------------------------------------------------------------------------------------------
# The warehouse, the caches, the derived files


@pytest.mark.parametrize("how", ["truncated", "random", "directory"])
def test_an_unreadable_warehouse_is_set_aside_and_readers_say_so_in_one_line(tmp_path, how):
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute("create table t as select range as x from range(100000)")
    _damage(warehouse, how)
    with pytest.raises(StoreUnreadable, match="paperlake ingest` sets it aside"):
        with connect_read_only(warehouse):
            pass
    (moved,) = heal_warehouse(warehouse)
    assert not os.path.lexists(warehouse) and is_set_aside(moved.moved_to) and moved.moved_to.exists()
    assert heal_warehouse(warehouse) == []


@pytest.mark.parametrize("how", ["truncated", "random", "directory"])
def test_a_damaged_embedding_cache_starts_again(tmp_path, how):
    path = tmp_path / "embeddings.sqlite"
    cache = EmbeddingCache(path)
    cache.put_many("m", {f"k{i}": np.full(64, i, dtype=np.float32) for i in range(2000)})
    cache.close()
    _damage(path, how)
    reopened = EmbeddingCache(path)
    reopened.put_many("m", {"a": np.ones(3, dtype=np.float32)})
    assert list(reopened.get_many("m", ["a"])) == ["a"]
    assert any(is_set_aside(p) for p in tmp_path.iterdir())


def test_damaged_sqlite_files_are_set_aside_with_their_journals(tmp_path):
    good, bad = tmp_path / "good.db", tmp_path / "bad.db"
    for path in (good, bad):
        with sqlite3.connect(path) as con:
            con.execute("create table t (x)")
    _damage(bad, "random")
    (tmp_path / "bad.db-wal").write_bytes(b"junk")
    moved = heal_sqlite([good, bad, tmp_path / "missing.db"])
    assert [m.path.name for m in moved] == ["bad.db", "bad.db-wal"] and good.exists()


def test_a_damaged_probe_file_is_stale_and_a_damaged_history_line_is_skipped(tmp_path):
    from paperlake.evaluation.sets import damaged_jsonl, read_jsonl

    path = tmp_path / "probes.jsonl"
    path.write_text(json.dumps({"a": 1}) + "\n{oops\n" + json.dumps({"b": 2}) + "\n")
    assert "line 2" in damaged_jsonl(path)
    assert read_jsonl(path, skip_damaged=True) == [{"a": 1}, {"b": 2}]
    with pytest.raises(ValueError, match="line 2"):
        read_jsonl(path)


def test_a_lock_file_replaced_by_a_folder_is_set_aside_and_locked_again(tmp_path):
    from paperlake.vectors.server import MILVUS_LITE_LOCK, FileLockGuard, lock_path_for

    db = tmp_path / "milvus.db"
    (db / MILVUS_LITE_LOCK).mkdir(parents=True)  # Milvus Lite's own lock, inside its folder
    lock_path_for(db).mkdir()  # ours, beside it
    guard = FileLockGuard(db, timeout=1).acquire()
    try:
        assert lock_path_for(db).is_file() and (db / MILVUS_LITE_LOCK).is_dir() is False
        assert sorted(p.name.split(".damaged-")[0] for p in tmp_path.iterdir() if is_set_aside(p)) == ["milvus.db.lock"]
        assert [p for p in db.iterdir() if is_set_aside(p)]
    finally:
        guard.release()
