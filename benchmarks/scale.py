"""Scale check: what adding one paper costs when the lake already holds N papers (N = 19, 500, 2000 by default).

The lake of N papers is faked from an ingested home's lake (default: the sample, ingested from its MinerU outputs
into the work dir first): re-keyed copies of its 19 papers, every id column mapped through uuid5 so the copies are
distinct papers to dbt's tests, the vector store and the formula graph, while their texts, equations and table cells
are the sample's (so the embedding cache and the memoised LaTeX parses make the baseline cheap to build; what is
measured afterwards is the cost of the stores' size, not of new content). Then, at each N:

1. baseline: the stores brought up to date with the N-1 papers (the ``build_warehouse`` and ``build_formulas`` jobs;
   the Milvus collections filled in bulk with the sample's cached vectors and given their sync records);
2. one more paper (another copy) is published to the lake, and the production path is timed, stage by stage:
   the freshness checks ``paperlake ingest`` runs, the ``build_warehouse`` job (the formula graph from the lake,
   side-file copy, one dbt build of the marts and the graph's tables with their tests, swap), the ``build_formulas``
   job (what is still stale of the formulas: the formulas collection) and the paper's ``sync_vectors`` run (its
   three text collections), with the vector store held open from the check on, as the ingest holds it;
3. then more papers (``--additions``, default 5), timed the same way.

Each timed addition starts on a quiet machine: all cores' busy time (/proc/stat) under 1 CPU-second in 10 s, twice
running, at most an hour of waiting, after the bulk load and after each addition. Milvus Lite compacts a partition's
data files and indexes the merged segments on a background thread after each flush; the server's CPU seconds while
the machine settles after an addition are that deferred work, reported per addition beside its CPU seconds during
each stage (/proc/<pid>/stat), with the load average before it. The first addition is the first to meet the
bulk-loaded collections; the later ones are what each addition to a settled store meets, and the acceptance ratio
is their median against N = 19's.

The formula graph of copies stays as small as the sample's (copies merge into the same formulas; only occurrences
grow), so its figure is a lower bound for distinct papers.

Results: seconds per stage per N and each stage's ratio to N = 19 (the issue's target: at most 2x at N = 2000).

    python benchmarks/scale.py [--sizes 19,500,2000] [--milvus server,lite] [--additions 5] [--home BUILT_HOME]
                               [--work-dir D] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SCALE_NAMESPACE = uuid.UUID("6f1b2a8e-54a4-4c61-9d55-0b7f6c1d7e11")
TEXT_COLLECTIONS = ("text_bm25_en", "text_sentence_transformers_all_minilm_l6_v2", "text_hybrid")


def _copy_id(value: str | None, copy: int) -> str | None:
    return value if value is None or copy == 0 else str(uuid.uuid5(SCALE_NAMESPACE, f"{copy}|{value}"))


class LakeCopier:
    """Writes re-keyed copies of a source lake's papers into a target lake, one copy index at a time."""

    def __init__(self, source: Path, target: Path):
        from paperlake.lake.store import CONTRACT_DIR, RECORDS_DIR

        self.source, self.target = source, target
        self.records = sorted((source / RECORDS_DIR).glob("*/*.json"))
        if not self.records:
            raise SystemExit(f"no published paper in {source}: ingest the sample first (or pass --home)")
        for contract in source.glob(f"*/{CONTRACT_DIR}/schema.parquet"):
            destination = target / contract.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(contract, destination)

    def publish(self, index: int) -> str:
        """Publish copy ``index // papers`` of source paper ``index % papers``; returns its paper key."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from paperlake.lake.store import RECORDS_DIR, atomic_write_bytes

        copy, record_path = index // len(self.records), self.records[index % len(self.records)]
        record = json.loads(record_path.read_text())
        volume, stem = record["paper_key"].split("/", 1)
        new_stem = stem if copy == 0 else f"{stem}~s{copy:04d}"
        new_key = f"{volume}/{new_stem}"
        for view_file in self.source.glob(f"*/{volume}/{stem}.parquet"):
            view = view_file.parent.parent.name
            if view == RECORDS_DIR:
                continue
            table = pq.read_table(view_file)
            for position, field in enumerate(table.schema):
                if field.name == "paper_key":
                    table = table.set_column(position, field, pa.array([new_key] * table.num_rows, field.type))
                elif field.name.endswith("_id") and pa.types.is_string(field.type) and copy:
                    values = [_copy_id(v, copy) for v in table.column(position).to_pylist()]
                    table = table.set_column(position, field, pa.array(values, field.type))
            destination = self.target / view / volume / f"{new_stem}.parquet"
            destination.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, destination)
        record |= {"paper_key": new_key, "paper_id": _copy_id(record["paper_id"], copy)}
        payload = json.dumps(record, indent=1).encode()
        atomic_write_bytes(self.target / RECORDS_DIR / volume / f"{new_stem}.json", lambda h: h.write(payload))
        return new_key


def bulk_vectors(settings, store, paper_keys: list[str]) -> float:
    """Fill the text collections with the entities of ``paper_keys`` in bulk (vectors from the embedding cache) and
    write their sync records, as if each paper had been synced; one flush per collection. Returns seconds."""
    from collections import defaultdict

    from paperlake.vectors.entities import collect_cells, default_encodable
    from paperlake.vectors.ledger import content_versions, write_sync_record
    from paperlake.vectors.store import CollectionSyncStats
    from paperlake.warehouse.read import connect_read_only

    started = time.perf_counter()
    with connect_read_only(settings.warehouse) as con:
        ids = dict(con.execute("select paper_key, paper_id::varchar from metadata").fetchall())
        cells = collect_cells(con, default_encodable(), [ids[k] for k in paper_keys])
        versions = content_versions(con, [ids[k] for k in paper_keys])
    by_paper = defaultdict(list)
    for cell in cells:
        by_paper[cell.pdf_id].append(cell)
    specs = store._specs(TEXT_COLLECTIONS)
    store.ensure_collections(specs)
    for spec in specs:
        fingerprint = store.fingerprint(spec)
        # a hundred papers' rows at a time: all 2,000 papers' rows with their vectors held at once took 20 GB
        for first in range(0, len(paper_keys), 100):
            group = {ids[key] for key in paper_keys[first : first + 100]}
            changed = [(c, store.cell_hash(spec, fingerprint, c)) for c in cells if spec.holds(c) and c.pdf_id in group]
            rows = store._rows(spec, changed, CollectionSyncStats(spec.name))
            by_partition = defaultdict(list)
            for row in rows:
                partition = store.view_partition(spec.name, row["table_name"], row["column_name"], create=True)
                by_partition[partition].append(row)
            for partition, part_rows in by_partition.items():
                for start in range(0, len(part_rows), 5000):
                    store.client.insert(spec.name, part_rows[start : start + 5000], partition_name=partition)
        store.client.flush(spec.name)
        for key in paper_keys:
            paper = ids[key]
            write_sync_record(
                settings.home,
                store,
                spec.name,
                key,
                paper,
                by_paper[paper],
                versions.get(paper, ""),
                len({c.entity_id for c in by_paper[paper] if spec.holds(c)}),
            )
    return time.perf_counter() - started


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds all cores have spent on anything but idling and waiting for I/O so far (/proc/stat)."""
    with open("/proc/stat", encoding="ascii") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def wait_until_idle(cpu, window: float = 10.0, threshold: float = 1.0, limit: float = 3600.0) -> dict:
    """Wait until ``cpu()`` (CPU seconds so far) grows by less than ``threshold`` in ``window`` seconds twice
    running, at most ``limit`` seconds. Returns the seconds waited, the CPU seconds spent meanwhile and whether it
    settled."""
    began, spent, calm = time.perf_counter(), 0.0, 0
    while calm < 2 and time.perf_counter() - began < limit:
        before = cpu()
        time.sleep(window)
        used = cpu() - before
        spent += used
        calm = calm + 1 if used < threshold else 0
    return {"seconds": round(time.perf_counter() - began, 1), "cpu_seconds": round(spent, 1), "settled": calm >= 2}


def measure(size: int, source_lake: Path, work: Path, milvus: str, additions: int = 5) -> dict:
    """Baseline of ``size - 1`` papers, then the timed addition of one more. ``milvus``: ``lite`` (the home's Milvus
    Lite file, opened by the ingest: every ingest loads each collection whole) or ``server`` (a ``milvus-lite
    server`` on the home's file standing in for a Milvus server, which keeps its collections loaded)."""
    home = work / f"n{size}-{milvus}"
    shutil.rmtree(home, ignore_errors=True)
    if milvus == "lite":
        os.environ.pop("MILVUS_URI", None)
        return _measure(size, source_lake, home, additions)
    from paperlake.vectors.server import milvus_lite_server

    home.mkdir(parents=True)
    with milvus_lite_server(home / "milvus.db") as server:
        os.environ["MILVUS_URI"] = server.uri
        try:
            return _measure(size, source_lake, home, additions, lambda: process_cpu_seconds(server.pid))
        finally:
            os.environ.pop("MILVUS_URI", None)


def _measure(size: int, source_lake: Path, home: Path, additions: int, server_cpu=None) -> dict:
    import dagster as dg

    from assets.vectors import vector_assets
    from orchestration.run import _add_partitions, _open_store, _Runner, failure_reason, prepare_dbt_manifest
    from paperlake.config import Settings
    from paperlake.freshness import formula_build_staleness, formula_staleness, warehouse_staleness
    from paperlake.vectors.ledger import stale_papers

    settings = Settings.from_env(home=home)
    copier = LakeCopier(source_lake, settings.lake)
    started = time.perf_counter()
    keys = [copier.publish(i) for i in range(size - 1)]
    result: dict = {"papers_before": size - 1, "lake_seconds": round(time.perf_counter() - started, 1)}
    prepare_dbt_manifest(settings)
    from assets.partitions import papers
    from assets.resources import LLMResource, PaperlakeResource
    from orchestration.definitions import build_definitions
    from orchestration.instance import dagster_instance

    resource = PaperlakeResource(home=str(home), inboxes=[], backend="pymupdf", milvus_uri=settings.milvus_uri)
    instance = dagster_instance(settings)
    runner = _Runner(build_definitions(resource, LLMResource()), instance, settings)
    collections = [definition.key.path[-1] for definition in vector_assets]

    def timed_run(job: str, **options) -> float:
        began = time.perf_counter()
        outcome = runner.run(job, **options)
        if not outcome.success:
            raise SystemExit(f"N={size}: {job} failed: {failure_reason(outcome)}")
        return round(time.perf_counter() - began, 2)

    baseline = {
        "warehouse": timed_run("build_warehouse", log="dbt-build.log"),
        "formulas": timed_run("build_formulas", log="formulas-build.log"),
    }
    with _open_store(settings) as store:
        baseline["vectors_bulk"] = round(bulk_vectors(settings, store, keys), 1)
    result["baseline_seconds"] = baseline
    result["warehouse_mb_before"] = round(settings.warehouse.stat().st_size / 2**20, 1)

    from orchestration.jobs import FORMULA_ASSETS, warehouse_selection

    def add_one(index: int) -> dict:
        """Publish copy ``index`` and run the production path for it, stage by stage: wall seconds per stage (and,
        with a server, the server's CPU seconds per stage under ``server_cpu_seconds``)."""
        new_key = copier.publish(index)
        _add_partitions(instance, papers.name, keys + [new_key])
        stages: dict[str, float] = {}
        server: dict[str, float] = {}

        def timed(stage: str, work):
            cpu_before = server_cpu() if server_cpu else 0.0
            began = time.perf_counter()
            value = work()
            stages[stage] = round(time.perf_counter() - began, 2)
            if server_cpu:
                server[stage] = round(server_cpu() - cpu_before, 2)
            return value

        def job(name: str, **options):
            return lambda: timed_run(name, **options)

        load = os.getloadavg()[0]
        stale, build = timed(
            "check_warehouse",
            lambda: (warehouse_staleness(settings), warehouse_selection(formula_build_staleness(settings))),
        )
        assert stale, "the new paper must make the warehouse stale"
        timed("warehouse", job("build_warehouse", asset_selection=build, log="dbt-build.log"))
        with _open_store(settings) as store:  # held through the stages that use it, as `paperlake ingest` does
            formulas, plan = timed(
                "check_formulas_and_vectors",
                lambda: (formula_staleness(settings, store), stale_papers(settings, store, collections)),
            )
            assert set(plan.stale) == {new_key}, f"only the new paper should need vectors, got {sorted(plan.stale)[:5]}"
            selection = [key for part in formulas for key in FORMULA_ASSETS[part]]
            timed("formulas", job("build_formulas", asset_selection=selection, log="formulas-build.log"))
            timed(
                "vectors",
                job(
                    "sync_vectors",
                    partition_key=new_key,
                    asset_selection=[dg.AssetKey(["vectors", c]) for c in sorted(plan.stale[new_key])],
                ),
            )
        stages["total"] = round(sum(stages.values()), 2)
        keys.append(new_key)
        measured: dict = {"seconds": stages, "load_average_before": round(load, 2)}
        if server_cpu:
            measured["server_cpu_seconds"] = server
        # The next addition starts on a quiet machine too. Milvus Lite compacts a partition's data files and indexes
        # the merged segments on a background thread after each flush (at most 100k rows a segment): work the sync
        # leaves behind, recorded here as the server's CPU seconds until it is done.
        measured["after"] = quiet()
        return measured

    def quiet() -> dict:
        """Wait for a quiet machine: the server done with its background work (compaction, index builds; its CPU
        seconds meanwhile are recorded) and no other work sharing the cores."""
        server_before = server_cpu() if server_cpu else 0.0
        waited = wait_until_idle(machine_busy_seconds)
        if server_cpu:
            waited["server_cpu_seconds"] = round(server_cpu() - server_before, 1)
        return waited

    result["quiet_before_additions"] = quiet()
    # The first addition is the first to meet the bulk-loaded collections; the later ones meet a settled store.
    result["additions"] = [add_one(size - 1 + n) for n in range(additions)]
    later = [a["seconds"] for a in result["additions"][1:]] or [result["additions"][0]["seconds"]]
    result["later_additions_median_seconds"] = {
        stage: round(statistics.median(a[stage] for a in later), 2) for stage in later[0]
    }
    if server_cpu:  # the server's work per addition, during the stages and left for after them
        result["server_cpu_seconds_per_addition"] = [
            round(sum(a["server_cpu_seconds"].values()) + a["after"]["server_cpu_seconds"], 1)
            for a in result["additions"]
        ]
    result["warehouse_mb_after"] = round(settings.warehouse.stat().st_size / 2**20, 1)
    with _open_store(settings) as store:
        result["entities_per_collection"] = store.count(TEXT_COLLECTIONS[0])
    print(f"N={size}: {json.dumps(result)}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="19,500,2000")
    parser.add_argument("--home", type=Path, default=None, help="an ingested home whose lake is copied")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--work-dir", type=Path, default=Path("data") / "bench-scale")
    parser.add_argument("--keep", action="store_true", help="keep each size's home (they are large)")
    parser.add_argument("--milvus", default="server,lite", help="server, lite or both (comma-separated)")
    parser.add_argument("--additions", type=int, default=5, help="papers added one after another at each N")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scale.json")
    args = parser.parse_args()

    from paperlake.config import Settings

    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "embeddings.sqlite"
    os.environ["PAPERLAKE_EMBEDDING_CACHE"] = str(cache)  # the jobs' resource reads it too: copies hit the cache
    os.environ["PAPERLAKE_EVALUATE"] = "0"
    home = args.home.resolve() if args.home else work / "sample"
    if args.home is None and not (home / "warehouse.duckdb").exists():
        from orchestration.run import ingest

        settings = Settings.from_env(
            home=home, backend="auto", mineru_dir=(args.shared / "corpus" / "mineru").resolve()
        )
        ingest([args.shared / "corpus" / "inbox"], settings)
    results: dict = {"machine": platform.platform(), "cpus": os.cpu_count(), "source": str(home), "milvus": {}}
    for milvus in args.milvus.split(","):
        sizes = results["milvus"][milvus] = {}
        for size in [int(x) for x in args.sizes.split(",")]:
            sizes[str(size)] = measure(size, home / "lake", work, milvus, args.additions)
            if not args.keep:
                shutil.rmtree(work / f"n{size}-{milvus}", ignore_errors=True)
            if "19" in sizes:
                reference, measured = sizes["19"], sizes[str(size)]
                measured["ratio_to_19_by_addition"] = [
                    {stage: round(seconds / first[stage], 2) if first[stage] else None for stage, seconds in a.items()}
                    for a, first in zip(
                        (a["seconds"] for a in measured["additions"]), (a["seconds"] for a in reference["additions"])
                    )
                ]
                measured["ratio_to_19_later_median"] = {
                    stage: round(seconds / reference["later_additions_median_seconds"][stage], 2)
                    if reference["later_additions_median_seconds"][stage]
                    else None
                    for stage, seconds in measured["later_additions_median_seconds"].items()
                }
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(
        json.dumps(
            {
                f"{m} N={n}": {
                    "totals": [a["seconds"]["total"] for a in e["additions"]],
                    "later_median": e["later_additions_median_seconds"]["total"],
                    "ratio_later_median": (e.get("ratio_to_19_later_median") or {}).get("total"),
                }
                for m, sizes in results["milvus"].items()
                for n, e in sizes.items()
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
