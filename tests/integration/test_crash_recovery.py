"""Crash consistency, part 1: the issue's double kill, a kill during dbt, stores removed by hand, an unreachable
vector store. The harness, and how kills are aimed, is in ``support/crash_harness.py``; part 2 is
``test_crash_recovery_stages.py`` (two files, so that two xdist workers share the crash runs)."""

from __future__ import annotations

import shutil
import socket

import duckdb
import pytest

from support.crash_harness import (
    FIRST,
    SECOND,
    add_paper,
    assert_same_stores,
    build_references,
    failure_lines,
    fresh_home,
    killed_at,
    must_ingest,
    run_ingest,
)
from support.fixtures import make_inbox

pytestmark = [pytest.mark.crash, pytest.mark.usefixtures("corpus")]


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory, dbt_manifest) -> dict:
    return build_references(tmp_path_factory)


def test_double_kill_parse_then_formula_models_converges(tmp_path, references):
    """The issue's sequence, aimed: killed while parsing the second paper, then killed while dbt builds the marts
    and the formula models (the formula graph is written by then, in the same run); the third run must leave every
    store as a clean ingest does."""
    inbox = make_inbox(tmp_path, [FIRST, SECOND])
    home = tmp_path / "home"
    killed_at(home, inbox, "lake.view_written@12")
    killed_at(home, inbox, "warehouse.dbt_event@3")
    must_ingest(home, inbox)
    assert_same_stores(home, references["both"])
    output = must_ingest(home, inbox)  # and then nothing is left to do
    assert "warehouse unchanged; formulas unchanged; vectors 0 paper(s)" in " ".join(output.split())


@pytest.mark.crash_matrix  # the matrix's warehouse.dbt_event@2 is this scenario at another event: not run twice
def test_kill_during_dbt_with_a_new_paper_is_repaired(tmp_path, references):
    """Finding 3: the new paper's lake record exists, the warehouse build was cut: the next run rebuilds it."""
    home = fresh_home(tmp_path, references["home_one"])
    inbox = make_inbox(tmp_path, [FIRST])
    add_paper(inbox, SECOND)
    killed_at(home, inbox, "warehouse.dbt_event@8")
    must_ingest(home, inbox)
    assert_same_stores(home, references["both"])


def test_stores_removed_by_hand_are_rebuilt(tmp_path, references):
    """Drop a Milvus collection, delete the warehouse file and the formula graph: the next ingest rebuilds them."""
    from paperlake.vectors.store import VectorStore

    home = fresh_home(tmp_path, references["home_both"])
    with VectorStore(str(home / "milvus.db"), use_cache=False) as store:
        store.client.drop_collection("text_bm25_en")
        store.client.drop_collection("formulas")
    (home / "warehouse.duckdb").unlink()
    shutil.rmtree(home / "lake" / "formulas")
    must_ingest(home, references["inbox_both"])
    assert_same_stores(home, references["both"])


def test_an_unreachable_vector_store_fails_the_ingest_in_one_line(tmp_path, references):
    """Finding 5: with MILVUS_URI pointing at nothing, the ingest exits non-zero with one line saying so, no stack
    trace; the warehouse and the formula graph are still built, and the next run with the store back syncs."""
    home = fresh_home(tmp_path, references["home_one"])
    inbox = make_inbox(tmp_path, [FIRST])
    add_paper(inbox, SECOND)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, output = run_ingest(home, inbox, milvus_uri=f"http://127.0.0.1:{port}")
    assert code == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    lines = failure_lines(output)
    assert len(lines) == 1 and lines[0].startswith(
        f"failed vectors: cannot open the vector store at http://127.0.0.1:{port}"
    ), output[-3000:]
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("select count(*) from metadata").fetchone()[0] == 2
    must_ingest(home, inbox)
    assert_same_stores(home, references["both"])


@pytest.mark.crash_matrix
def test_double_kill_on_timers_converges(tmp_path, references):
    """The issue's sequence as it was found: kill -9 about 10 s in, again about 25 s in, then run to the end."""
    inbox = make_inbox(tmp_path, [FIRST, SECOND])
    home = tmp_path / "home"
    for seconds in (10, 25):
        run_ingest(home, inbox, kill_after=seconds)
    must_ingest(home, inbox)
    assert_same_stores(home, references["both"])
