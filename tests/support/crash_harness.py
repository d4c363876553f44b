"""The crash harness shared by tests/integration/test_crash_recovery*.py: SIGKILL `paperlake ingest` at chosen lines
of each stage, run it again, and compare every store with a clean ingest of the same inbox.

Kills are aimed with fail points (``PAPERLAKE_FAILPOINT=<name>[@n]``, see ``paperlake/runtime/failpoints.py``): the
process
kills its own process group (dbt's subprocess included) the n-th time it reaches that line. One test also kills on
timers, as the issue that asked for this harness did. "The same stores" means: per-table row counts and
primary-key uniqueness in DuckDB, per-collection and per-paper entity counts and entity hashes in Milvus, formula
graph counts and Turtle triples, and the lake's file list.

Run alone with ``./run test -m crash``; ``-m crash_matrix`` adds the long runs: a kill at every fail point of every
stage, and kills on timers.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pytest

from schemas.warehouse import declared_keys
from support.fixtures import make_inbox, manifest_rows

FIRST = "emnlp2024-126-embedding-inversion-attack"  # 5 pages
SECOND = "naacl2024-116-quantum-lindblad-lm"  # 10 pages, display equations with a physical constant
OTHER = "emnlp2024-012-numerologic"  # 7 pages: replaces SECOND's file in the replacement test
PAPERLAKE = str(Path(sys.executable).with_name("paperlake"))
# every warehouse table with a declared key (the marts' YAML): the snapshot checks each one is unique
PRIMARY_KEYS = declared_keys()


def run_ingest(
    home: Path,
    inbox: Path,
    failpoint: str | None = None,
    kill_after: float | None = None,
    timeout: float = 900,
    milvus_uri: str | None = None,
    evaluate: bool = False,
    environment: dict[str, str | None] | None = None,
    wrapper: Sequence[str] = (),
) -> tuple[int, str]:
    """`paperlake ingest` in its own process group; returns (exit code, output). -9 means it was killed.

    Without the self-evaluation stage unless ``evaluate``: what :func:`snapshot` compares are the stores, which the
    evaluation only reads (it has no fail point; tests/integration/test_self_evaluation.py covers it), and these
    scenarios run some forty ingests. ``environment`` sets variables for this run (None removes one); ``wrapper``
    is a command to run it under (the damage harness's read-only home runs it under ``setpriv``)."""
    env = {key: value for key, value in os.environ.items() if key not in ("MILVUS_URI", "PAPERLAKE_FAILPOINT")}
    env["PAPERLAKE_EVALUATE"] = "1" if evaluate else "0"
    if milvus_uri:
        env["MILVUS_URI"] = milvus_uri
    if failpoint:
        env["PAPERLAKE_FAILPOINT"] = failpoint
    for name, value in (environment or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    process = subprocess.Popen(
        [*wrapper, PAPERLAKE, "ingest", str(inbox), "--backend", "pymupdf", "--home", str(home)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=kill_after or timeout)
    except subprocess.TimeoutExpired:
        if kill_after is None:
            os.killpg(process.pid, signal.SIGKILL)
            raise
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
    return process.returncode, output


def must_ingest(home: Path, inbox: Path) -> str:
    code, output = run_ingest(home, inbox)
    assert code == 0, output[-4000:]
    return output


def killed_at(home: Path, inbox: Path, failpoint: str) -> None:
    code, output = run_ingest(home, inbox, failpoint)
    assert code == -signal.SIGKILL, f"the fail point {failpoint} was never reached (exit {code}):\n{output[-3000:]}"


def snapshot(home: Path) -> dict:
    """Everything a user can observe in the stores, in a form two homes can be compared by."""
    from paperlake.vectors.config import load_config
    from paperlake.vectors.store import VectorStore

    state: dict = {}
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        tables = con.execute(
            "select table_name from information_schema.tables where table_schema = 'main' order by 1"
        ).fetchall()
        for (table,) in tables:
            count = con.execute(f'select count(*) from main."{table}"').fetchone()[0]
            state[f"warehouse.{table}"] = count
            if table in PRIMARY_KEYS:
                distinct = con.execute(f'select count(distinct "{PRIMARY_KEYS[table]}") from "{table}"').fetchone()[0]
                assert distinct == count, f"{home}: {table} has duplicate {PRIMARY_KEYS[table]}"
        state["warehouse.papers"] = sorted(
            r[0] for r in con.execute("select paper_id::varchar from metadata").fetchall()
        )
    store = VectorStore(str(home / "milvus.db"), cache_path=home / "cache" / "embeddings.sqlite")
    try:
        names = [spec.name for spec in load_config().active_collections()] + ["formulas"]
        for name in names:
            assert store.client.has_collection(name), f"{home}: collection {name} is missing"
            store.load(name)
            rows = []
            iterator = store.client.query_iterator(
                name, batch_size=4096, filter="", output_fields=["id", "pdf_id", "text_hash"]
            )
            while batch := iterator.next():
                rows.extend(batch)
            iterator.close()
            state[f"milvus.{name}"] = sorted((row["pdf_id"], row["id"], row["text_hash"]) for row in rows)
    finally:
        store.close()
    from rdflib import Graph

    from paperlake.formulas.state import read_tables
    from paperlake.formulas.store import graph_counts

    state["formulas.counts"] = graph_counts(read_tables(home / "lake" / "formulas"))
    state["formulas.triples"] = len(Graph().parse(home / "formulas" / "formulas.ttl", format="turtle"))
    state["lake.files"] = sorted(
        str(p.relative_to(home / "lake")) for p in (home / "lake").rglob("*.parquet") if not p.name.startswith(".")
    )
    state["lake.records"] = sorted(
        str(p.relative_to(home / "lake")) for p in (home / "lake" / "_papers").rglob("*.json")
    )
    return state


def assert_same_stores(home: Path, reference: dict) -> None:
    actual = snapshot(home)
    differing = {
        key: (actual.get(key), reference.get(key))
        for key in reference.keys() | actual.keys()
        if actual.get(key) != reference.get(key)
    }
    assert not differing, "stores differ from the clean reference: " + "; ".join(
        f"{key}: {_short(a)} vs reference {_short(r)}" for key, (a, r) in sorted(differing.items())
    )


def _short(value) -> str:
    return f"{len(value)} items" if isinstance(value, list) else str(value)


def fresh_home(root: Path, template: Path) -> Path:
    """A home for one scenario: a copy of a finished ingest's home."""
    home = root / "home"
    shutil.copytree(template, home, ignore=shutil.ignore_patterns("*.lock"))
    return home


def build_references(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Clean ingests, built once per test session even across xdist workers (the first worker to get here builds
    them, the other waits on the lock and reuses them): the first paper alone, and both papers."""
    import fcntl
    import json

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "crash-reference"
    with open(shared / "crash-reference.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "done.json"
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)
            one = make_inbox(root / "one", [FIRST])
            both = make_inbox(root / "both", [FIRST, SECOND])
            assert both == root / "both" / "inbox"
            must_ingest(root / "home-one", one)
            must_ingest(root / "home-both", both)
            done.write_text(json.dumps({"one": snapshot(root / "home-one"), "both": snapshot(root / "home-both")}))
        states = json.loads(done.read_text())
    for state in states.values():  # JSON made the Milvus rows' tuples lists
        for key, value in state.items():
            if key.startswith("milvus."):
                state[key] = [tuple(row) for row in value]
    return {
        **states,
        "home_one": root / "home-one",
        "home_both": root / "home-both",
        "inbox_both": root / "both" / "inbox",
    }  # where make_inbox(root / "both", ...) puts it


def add_paper(inbox: Path, stem: str) -> None:
    source = make_inbox(inbox.parent / f"add-{stem}", [stem])
    volume = stem.split("-")[0]
    target = inbox / volume
    target.mkdir(exist_ok=True)
    shutil.copyfile(source / volume / f"{stem}.pdf", target / f"{stem}.pdf")
    rows = manifest_rows(volume)
    manifest = target / "manifest.csv"
    existing = list(csv.DictReader(manifest.open(encoding="utf-8"))) if manifest.exists() else []
    with manifest.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[f"{stem}.pdf"].keys()))
        writer.writeheader()
        writer.writerows([*existing, rows[f"{stem}.pdf"]])


def failure_lines(output: str) -> list[str]:
    """The lines `paperlake ingest` prints for failures (unwrapped: one line each)."""
    return [line for line in output.splitlines() if line.startswith("failed ")]


def null_in_lake(home: Path, stem: str, view: str, column: str) -> tuple[Path, bytes]:
    """Put a NULL in the first row of ``column`` of paper ``stem``'s ``view`` file, as if the parser had written it
    (the paper's lake record describes the new file, so it is not a damaged file parsed again): the warehouse build
    then breaks the mart's NOT NULL contract. Returns the file and its bytes before."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    volume = stem.split("-")[0]
    lake_file = home / "lake" / view / volume / f"{stem}.parquet"
    original = lake_file.read_bytes()
    table = pq.read_table(lake_file)
    index = table.schema.get_field_index(column)
    values = table.column(index).to_pylist()
    values[0] = None
    field = table.schema.field(index)
    pq.write_table(table.set_column(index, field, pa.array(values, field.type)), lake_file)
    as_published(home, lake_file)
    return lake_file, original


def as_published(home: Path, lake_file: Path) -> None:
    """Make the paper's lake record describe ``lake_file`` as it is now (size, mtime, sha256)."""
    view, paper_key = lake_file.parent.parent.name, f"{lake_file.parent.name}/{lake_file.stem}"
    record_path = home / "lake" / "_papers" / lake_file.parent.name / f"{lake_file.stem}.json"
    record = json.loads(record_path.read_text())
    assert record["paper_key"] == paper_key, record["paper_key"]
    stat = lake_file.stat()
    record["files"][view] = [stat.st_size, stat.st_mtime_ns, hashlib.sha256(lake_file.read_bytes()).hexdigest()]
    record_path.write_text(json.dumps(record))
