"""A parse step's papers on the machine's cores (PAPERLAKE_PARSE_WORKERS): the same outcomes, in the same order,
and the same lake as parsing them one after the other here, for good papers and bad ones alike: a duplicate file
and a cut-off PDF are refused before any parse, a PDF whose body is garbage fails in its worker and is that paper's
failure only."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paperlake.config import Settings
from paperlake.lake.inbox import scan_inbox
from paperlake.lake.pipeline import ingest_papers
from paperlake.lake.store import Lake
from support.fixtures import corpus_pdf, make_inbox

PAPERS = [
    "emnlp2024-012-numerologic",
    "emnlp2024-126-embedding-inversion-attack",
    "emnlp2024-177-cute-token-understanding",
]

pytestmark = pytest.mark.usefixtures("corpus")


def _lake_rows(lake: Lake) -> dict[str, list]:
    """Every lake file's rows but when they were written, by its path under the lake."""
    found = {}
    for path in sorted(lake.root.rglob("*.parquet")):
        table = pq.read_table(path)
        when = [field.name for field in table.schema if pa.types.is_timestamp(field.type)]
        found[str(path.relative_to(lake.root))] = table.drop_columns(when).to_pylist()
    return found


def test_papers_parsed_on_two_cores_equal_papers_parsed_one_after_the_other(tmp_path):
    inbox = make_inbox(tmp_path, PAPERS)
    volume = inbox / "emnlp2024"
    shutil.copyfile(corpus_pdf(PAPERS[0]), volume / "a-copy.pdf")  # identical to a listed paper: refused
    os.utime(volume / "a-copy.pdf", (2_000_000_000, 2_000_000_000))  # the newer file
    cut = corpus_pdf(PAPERS[1]).read_bytes()
    (volume / "cut-off.pdf").write_bytes(cut[: len(cut) // 2])  # no end-of-file marker: refused
    (volume / "garbage.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(4096) + b"\n%%EOF\n")  # fails in its parse

    outcomes, lakes = {}, {}
    for workers in (1, 2):
        base = Settings.from_env(home=tmp_path / f"home{workers}", backend="pymupdf", mineru_dir=None)
        settings = dataclasses.replace(base, parse_workers=workers)
        lake = Lake(settings.lake)
        lake.ensure_contract()
        done = ingest_papers(scan_inbox([inbox]), lake, settings, inboxes=[inbox])
        outcomes[workers] = [(o.paper_key, o.status, o.stage, o.paper_id, o.pages, o.counts) for o in done]
        lakes[workers] = _lake_rows(lake)

    assert outcomes[2] == outcomes[1]
    assert lakes[2] == lakes[1] and lakes[1]
    by_key = {key: (status, stage) for key, status, stage, *_ in outcomes[1]}
    assert [by_key[f"emnlp2024/{stem}"] for stem in PAPERS] == [("published", None)] * 3
    assert by_key["emnlp2024/a-copy"] == ("failed", "identity")
    assert by_key["emnlp2024/cut-off"] == ("failed", "open")
    assert by_key["emnlp2024/garbage"][0] == "failed"
