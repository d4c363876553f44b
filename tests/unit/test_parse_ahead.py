"""The parse-ahead worker (paperlake.parsing.ahead) on real PDFs (the synthetic set): what the step takes from it is
exactly its own parse of the same inputs; anything else (other inputs, a worker failure, a dead worker) leaves the
paper to the step, and nothing waits forever."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from paperlake.config import Settings
from paperlake.lake.inbox import scan_inbox
from paperlake.lake.pipeline import IngestError, ingest_papers, parse_source, pdf_page_count
from paperlake.lake.quality import validate_papers
from paperlake.parsing import ahead as parse_ahead
from paperlake.parsing.ahead import ParseAhead, take_gate, take_parsed
from paperlake.parsing.backends import parse_with

SYNTHETIC = Path(__file__).parents[1] / "data" / "synthetic"
DOCS = ("syn-001", "syn-002", "syn-003")


@pytest.fixture
def setup(tmp_path: Path):
    volume = tmp_path / "inbox" / "synthetic"
    volume.mkdir(parents=True)
    for doc in DOCS:
        shutil.copyfile(SYNTHETIC / f"{doc}.pdf", volume / f"{doc}.pdf")
    settings = Settings.from_env(home=tmp_path / "home", backend="pymupdf", mineru_dir=None)
    sources = scan_inbox([tmp_path / "inbox"])
    return sources, settings


def _start(sources, settings, **kwargs) -> ParseAhead:
    return ParseAhead(sources, {s.paper_key: "pymupdf" for s in sources}, settings, **kwargs)


def _wait(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_what_the_step_takes_is_its_own_parse_of_the_same_inputs(setup):
    sources, settings = setup
    ahead = _start(sources, settings)
    try:
        _wait(lambda: ahead.stats.papers == len(sources))
        for source in sources:
            taken = ahead.take(source, "pymupdf", settings)
            assert taken is not None
            assert taken.views == parse_with("pymupdf", source, settings).views
            assert taken.paper_id and taken.paper_key == source.paper_key
    finally:
        stats = ahead.close()
    assert (stats.papers, stats.taken, stats.errors) == (3, 3, [])
    assert ahead.process.poll() is not None  # the worker is gone


def test_a_paper_the_worker_is_on_is_waited_for_while_the_step_parses_the_next(setup):
    sources, settings = setup
    ahead = _start(sources, settings, lead=1)  # the worker is given one paper at a time, from the step's
    try:
        _wait(lambda: ahead._state[0] == "worker")  # the feeder has claimed the first paper for the worker
        first = ahead.take(sources[0], "pymupdf", settings)  # the worker is still importing: the step takes paper 2
        assert first is not None and ahead.stats.stolen == 1
        second = ahead.take(sources[1], "pymupdf", settings)
        assert second is not None and second.views == parse_with("pymupdf", sources[1], settings).views
        # the worker never runs more than the lead ahead of the step: the third paper was nobody's, so it is the step's
        assert ahead.take(sources[2], "pymupdf", settings) is None
    finally:
        ahead.close()


def test_a_result_for_other_inputs_is_never_taken(setup, monkeypatch):
    sources, settings = setup
    ahead = _start(sources[:2], settings)
    try:
        _wait(lambda: ahead.stats.papers == 2)
        other = Settings.from_env(home=settings.home, backend="pymupdf", mineru_dir=None, max_chunk_tokens=128)
        assert ahead.take(sources[0], "pymupdf", other) is None
        assert ahead.take(sources[0], "pymupdf", settings) is None  # passed: the step parsed it itself
        # parser code that is not the worker's (here, a version bumped in the step's process only)
        from paperlake.parsing import versions

        monkeypatch.setattr(versions, "PYMUPDF", versions.PYMUPDF + "-bumped")
        assert ahead.take(sources[1], "pymupdf", settings) is None
    finally:
        ahead.close()


def test_a_paper_the_worker_cannot_parse_is_parsed_again_by_the_step(setup, tmp_path):
    sources, settings = setup
    broken = sources[0].pdf_path
    broken.write_bytes(b"%PDF-1.7\nnot really a pdf\n%%EOF\n")
    sources = scan_inbox([tmp_path / "inbox"])
    ahead = _start(sources, settings)
    parse_ahead.activate(ahead)
    try:
        _wait(lambda: ahead.stats.papers == len(sources) - 1 and ahead.stats.errors)
        assert sources[0].paper_key in ahead.stats.errors[0]
        with pytest.raises(IngestError):  # raised where it always is: the step's own parse
            parse_source(sources[0], "pymupdf", settings)
        assert take_parsed(sources[1], "pymupdf", settings) is not None
    finally:
        parse_ahead.activate(None)
        ahead.close()


def test_a_dead_worker_leaves_every_paper_to_the_step(setup):
    sources, settings = setup
    ahead = _start(sources, settings)
    try:
        ahead.process.kill()
        ahead.process.wait()
        started = time.monotonic()
        for source in sources:  # never hangs; whatever it returns is the step's own parse (one made while it waited)
            taken = ahead.take(source, "pymupdf", settings)
            assert taken is None or taken.views == parse_with("pymupdf", source, settings).views
        assert time.monotonic() - started < 30
        assert ahead.validate([], 512) is None  # the gate runs in the step
    finally:
        stats = ahead.close()
    assert stats.errors and "stopped" in stats.errors[0]


def test_the_gate_in_the_worker_is_the_gate(setup):
    sources, settings = setup
    items = [(parse_with("pymupdf", s, settings), pdf_page_count(s.pdf_path)) for s in sources]
    items[1][0].rows("chunks")[0]["token_count"] = 10_000  # one paper fails the gate, the others pass
    local = validate_papers(items, max_chunk_tokens=512)
    ahead = _start(sources[:1], settings)
    parse_ahead.activate(ahead)
    try:
        remote = take_gate(items, 512)
    finally:
        parse_ahead.activate(None)
        stats = ahead.close()
    assert remote is not None and stats.gated == 3
    assert [r.passed for r in remote] == [r.passed for r in local] == [True, False, True]
    assert [_outcomes(r) for r in remote] == [_outcomes(r) for r in local]


def _outcomes(report) -> list[tuple]:
    return [(o.name, o.view, o.success, o.observed) for o in report.blocking + report.warnings]


def test_an_ingest_with_a_worker_publishes_what_one_without_publishes(setup, tmp_path):
    sources, settings = setup
    from paperlake.lake.store import Lake

    lakes = {}
    for name in ("ahead", "alone"):
        lake = Lake(tmp_path / name)
        ahead = _start(sources, settings) if name == "ahead" else None
        parse_ahead.activate(ahead)
        try:
            outcomes = ingest_papers(sources, lake, settings)
        finally:
            parse_ahead.activate(None)
            if ahead is not None:
                stats = ahead.close()
        assert [o.status for o in outcomes] == ["published"] * 3, [o.reason for o in outcomes]
        lakes[name] = {
            path.relative_to(lake.root): path.read_bytes()
            for path in sorted(lake.root.rglob("*.parquet"))
            if "_contract" not in path.parts
        }
    assert stats.taken + stats.stolen >= 1 and stats.gated == 3
    assert lakes["ahead"].keys() == lakes["alone"].keys() and lakes["ahead"]
    import pyarrow.parquet as pq

    for relative in lakes["ahead"]:
        left = pq.read_table(tmp_path / "ahead" / relative).to_pylist()
        right = pq.read_table(tmp_path / "alone" / relative).to_pylist()
        assert left == right, relative
