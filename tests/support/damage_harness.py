"""The damage harness of tests/integration/test_damage.py: a built home's files damaged by hand (a disk error, an
interrupted copy, an operator's mistake), then one `paperlake ingest`, then every store compared with the clean
reference, as the crash harness (``support/crash_harness.py``) compares them after a kill.

:data:`KINDS` names every kind of file a home holds, and the inbox's two; :func:`catalogue` sorts a home's files into
them (a file no kind claims is a kind the catalogue lacks) and picks the one that stands for each. Each is damaged in
each way of :data:`DAMAGES`. A file of the home must heal in one ingest: exit 0, the output names what was rebuilt
in a line, the stores equal the reference's, and the damaged file reads again (or is gone, moved aside). A file of
the inbox is input, not a store: a damaged PDF becomes that paper's ``ingest_errors`` row, a damaged manifest costs
at most its own volume, and the next ingest has nothing left to do. No command prints a traceback, before the
ingest (on the damaged home) or after it.

The reference is the crash harness's two-paper home, plus what that home lacks: a file that is not a PDF (so a
failed paper's lake file exists), one LLM enrichment kind answered by the stub server (so the LLM cache and the
enrichment view exist), the retrieval-quality evaluation (probes, probe sets, reports), and its own embedding cache
(its vectors are synced again through it). It is built at ``<root>/home`` and every case is restored to that same
path: a home records absolute paths (the warehouse reads its lake through them), so a copy elsewhere would read the
reference's files, not its own.
"""

from __future__ import annotations

import fnmatch
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from support.crash_harness import FIRST, PAPERLAKE, SECOND, run_ingest, snapshot
from support.fixtures import corpus_pdf, make_inbox

DAMAGES = ("truncated_half", "truncated_empty", "random_bytes", "deleted", "directory")
BROKEN = "not-a-pdf"  # the reference's file that fails: its ingest_errors row is a file kind of the lake
FIRST_KEY = f"{FIRST.split('-')[0]}/{FIRST}"
SECOND_KEY = f"{SECOND.split('-')[0]}/{SECOND}"
BROKEN_KEY = f"{FIRST.split('-')[0]}/{BROKEN}"
STUB_SCRIPT = {"rules": [], "default": {"content": "Summary: {echo}"}}
READS = {  # the simplest read commands (cli/status.py, query.py, evaluation.py), each a different store
    "status": ["status"],
    "sql": ["sql", "select count(*) as papers from metadata", "--json"],
    "search": ["search", "embedding inversion attack", "-k", "3", "--json"],
    "eval quality": ["eval", "quality", "--json"],
}
TRACEBACK = "Traceback (most recent call last)"
CLI_BUG = "(a bug: the traceback is in "  # cli/app.py's main(): an unexpected exception, told in one line
RECORD_FIELDS = ("paper_key", "paper_id", "sha256", "backend", "parser_version", "row_counts", "manifest_hash")
SUMMARY = re.compile(r"(parsed \d+, removed \d+;|failed |error:)")  # lines that name every store, or a failure


def _read_parquet(path: Path) -> object:
    import pyarrow.parquet as pq

    return pq.read_table(path).num_rows


def _read_json(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


def _read_jsonl(path: Path) -> object:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _read_sqlite(path: Path) -> object:
    if not path.is_file():
        raise IsADirectoryError(path)
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as con:
        (verdict,) = con.execute("pragma quick_check").fetchone()
        if verdict != "ok":
            raise sqlite3.DatabaseError(verdict)
        return con.execute("select count(*) from sqlite_master").fetchone()[0]


def _read_warehouse(path: Path) -> object:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("select count(*) from metadata").fetchone()[0]


def _read_turtle(path: Path) -> object:
    from rdflib import Graph

    return len(Graph().parse(path, format="turtle"))


def _read_yaml(path: Path) -> object:
    import yaml

    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(loaded, dict):
        raise ValueError(f"not a mapping: {loaded!r:.60}")
    return loaded


@dataclass(frozen=True)
class FileKind:
    """One kind of file of a home (or of the inbox). ``note`` says when the ingest must name it in a line:
    ``always`` (a store: any damage), ``unreadable`` (when :attr:`read` fails on the damaged file, not when it is
    deleted) or ``never`` (logs, locks, side files, and what an ingest does not open: an old run's event log, a
    cached LLM answer nobody asks again); a ``never`` file may also stay damaged."""

    name: str
    patterns: tuple[str, ...]
    what: str
    note: str = "always"
    read: Callable[[Path], object] | None = None
    prefer: str = ""  # a substring of the path that should stand for the kind (else the largest file)
    names: tuple[str, ...] = ()  # words a line naming a rebuild of it may use besides its path and name
    inbox: bool = False
    empty: bool = False  # holds no bytes: truncating it changes nothing
    optional: bool = False  # a finished home may not hold one: catalogued, not damaged (its database is)

    @property
    def damages(self) -> tuple[str, ...]:
        if self.optional:
            return ()
        return tuple(d for d in DAMAGES if not (self.empty and d.startswith("truncated")))


COLLECTION = "text_sentence_transformers_all_minilm_l6_v2"  # the collection `paperlake search` reads
KINDS: tuple[FileKind, ...] = (
    FileKind("warehouse", ("warehouse.duckdb",), "the DuckDB warehouse, built by dbt from the lake",
             read=_read_warehouse, names=("warehouse",)),
    FileKind("lake_contract", ("lake/*/_contract/schema.parquet",), "a view's zero-row contract file",
             note="unreadable", read=_read_parquet, prefer="lake/chunks/", names=("contract",)),
    FileKind("lake_error", ("lake/ingest_errors/*/*.parquet",), "a failed paper's ingest_errors file",
             read=_read_parquet),
    FileKind("lake_enrichment", ("lake/enrichment/*/*.parquet",), "a paper's LLM enrichments",
             read=_read_parquet, prefer=FIRST, names=("enrich",)),
    FileKind("lake_formula_table", ("lake/formulas/*.parquet",), "a table of the formula graph",
             read=_read_parquet, prefer="formulas.parquet", names=("formula",)),
    FileKind("lake_formula_state", ("lake/formulas/state.json",), "the formula graph's state (hashes of its files)",
             read=_read_json, names=("formula",)),
    FileKind("lake_view", ("lake/*/*/*.parquet",), "one view of one paper, parsed from its PDF",
             read=_read_parquet, prefer=f"lake/chunks/{FIRST_KEY}"),
    FileKind("lake_record", ("lake/_papers/*/*.json",), "a paper's lake record (published last)",
             read=_read_json, prefer=FIRST),
    FileKind("formula_turtle", ("formulas/formulas.ttl",), "the formula graph as RDF Turtle",
             read=_read_turtle, names=("formula",)),
    FileKind("formula_blocks", ("formulas/formulas.ttl.blocks.parquet",), "the Turtle file's per-paper blocks",
             read=_read_parquet, names=("formula",)),
    FileKind("milvus_flock", ("milvus.db.lock",), "paperlake's advisory lock on Milvus Lite", note="never"),
    FileKind("milvus_lite_lock", ("milvus.db/LOCK",), "Milvus Lite's own lock file", note="never", empty=True),
    # while it holds, the next writer skips its probe of the folder; unreadable, it is none: the folder is probed
    FileKind("milvus_verified", ("milvus.db.verified",), "the Milvus Lite folder's state at its last clean close",
             note="never", read=_read_json),
    FileKind("milvus_manifest", ("milvus.db/collections/*/manifest.json",), "a collection's segment manifest",
             read=_read_json, prefer=COLLECTION, names=("milvus", "vector", "collection")),
    FileKind("milvus_manifest_prev", ("milvus.db/collections/*/manifest.json.prev",),
             "Milvus Lite's previous manifest", note="never", prefer=COLLECTION),
    FileKind("milvus_schema", ("milvus.db/collections/*/schema.json",), "a collection's schema",
             read=_read_json, prefer=COLLECTION, names=("milvus", "vector", "collection")),
    FileKind("milvus_segment", ("milvus.db/collections/*/partitions/*/data/*.parquet",), "a segment of entities",
             read=_read_parquet, prefer=f"{COLLECTION}/partitions/chunks__text_content",
             names=("milvus", "vector", "collection")),
    FileKind("milvus_scalar_index", ("milvus.db/collections/*/partitions/*/indexes/*.sidx",), "a scalar index",
             prefer=f"{COLLECTION}/partitions/chunks__text_content", names=("milvus", "vector", "collection")),
    FileKind("milvus_vector_index", ("milvus.db/collections/*/partitions/*/indexes/*.idx",), "a vector index",
             prefer=f"{COLLECTION}/partitions/chunks__text_content", names=("milvus", "vector", "collection")),
    FileKind("vector_record", ("vectors/*/*/*.json",), "a paper's sync record for one collection",
             note="unreadable", read=_read_json, prefer=f"{COLLECTION}/{FIRST_KEY}", names=("vector",)),
    # read only by the next sync of its paper, which checks it against its record's sha256 and asks the collection
    # when they differ: a cache verified at its use, left as it is until then
    FileKind("vector_entities", ("vectors/*/*/*.entities",), "the entity hashes a sync record vouches for",
             note="never", read=_read_json, prefer=f"{COLLECTION}/{FIRST_KEY}", names=("vector",)),
    FileKind("vector_count", ("vectors/*/.counted.json",), "a collection's last full count (the vector check's)",
             note="unreadable", read=_read_json, prefer=COLLECTION, names=("vector", "count")),
    FileKind("embedding_cache", ("cache/embeddings.sqlite",), "the embedding cache (content-addressed)",
             note="unreadable", read=_read_sqlite, names=("cache", "embedding")),
    FileKind("llm_cache", ("cache/llm/*/*.json",), "a cached LLM answer", note="never", read=_read_json),
    FileKind("probes", ("evaluation/probes/*/*.jsonl",), "a paper's offline probes", read=_read_jsonl,
             prefer=FIRST, names=("probe", "evaluation", "quality")),
    FileKind("probes_summary", ("evaluation/probes/*/*.json",), "a paper's probe summary", read=_read_json,
             prefer=FIRST, names=("probe", "evaluation", "quality")),
    FileKind("volume_set", ("evaluation/volume_set/*.jsonl",), "a volume's evaluation set", read=_read_jsonl,
             prefer="emnlp2024", names=("probe", "evaluation", "quality")),
    FileKind("quality_history", ("evaluation/quality/*.history.jsonl",), "a volume's quality reports so far",
             note="unreadable", read=_read_jsonl, prefer="emnlp2024", names=("quality", "evaluation")),
    FileKind("quality_report", ("evaluation/quality/*.json",), "a volume's latest retrieval-quality report",
             read=_read_json, prefer="emnlp2024", names=("quality", "evaluation")),
    FileKind("dagster_yaml", ("dagster/dagster.yaml",), "the Dagster instance's settings", note="unreadable",
             read=_read_yaml, names=("dagster",)),
    FileKind("dagster_runs", ("dagster/history/runs.db",), "Dagster's run storage", note="unreadable",
             read=_read_sqlite, names=("dagster", "run")),
    FileKind("dagster_event_index", ("dagster/history/runs/index.db",), "Dagster's event log index",
             note="unreadable", read=_read_sqlite, names=("dagster", "event")),
    FileKind("dagster_event_log", ("dagster/history/runs/*.db",), "a past run's event log (read by the UI)",
             note="never", read=_read_sqlite, prefer="-", names=("dagster", "event")),
    FileKind("dagster_schedules", ("dagster/schedules/schedules.db",), "Dagster's schedule storage",
             note="unreadable", read=_read_sqlite, names=("dagster", "schedule")),
    FileKind("sqlite_journal", ("*.db-wal", "*.db-shm", "*.sqlite-wal", "*.sqlite-shm", "*.db-journal"),
             "a SQLite write-ahead log or its index: there only while (or if) a connection was left open",
             note="never", optional=True),
    FileKind("dagster_compute_log", ("dagster/storage/*/compute_logs/*",), "a step's captured output",
             note="never", prefer=".out"),
    FileKind("dbt_partial_parse", ("dbt-target/*/partial_parse.msgpack",), "dbt's partial-parse state",
             note="never", prefer="warehouse"),
    FileKind("dbt_graph_summary", ("dbt-target/*/graph_summary.json",), "dbt's graph summary", note="never",
             prefer="warehouse"),
    FileKind("dbt_compiled_sql", ("dbt-target/*/compiled/*", "dbt-target/*/run/*"), "SQL dbt compiled and ran",
             note="never", prefer="warehouse/run/paperlake/models/marts/metadata.sql"),
    FileKind("log", ("logs/*.log", "dbt-target/*/dbt.log"), "a build's log", note="never", prefer="dbt-build"),
    FileKind("inbox_pdf", ("*/*.pdf",), "a paper's PDF", prefer=FIRST, inbox=True),
    FileKind("inbox_manifest", ("*/manifest.csv",), "a volume's manifest.csv", prefer="emnlp2024", inbox=True),
)  # fmt: skip
KIND_NAMES = {kind.name: kind for kind in KINDS}


def classify(relative: str, inbox: bool = False) -> FileKind | None:
    """The first kind whose pattern matches a path relative to the home (or the inbox); ``*`` spans folders."""
    for kind in KINDS:
        if kind.inbox == inbox and any(fnmatch.fnmatchcase(relative, pattern) for pattern in kind.patterns):
            return kind
    return None


def _files(root: Path) -> list[Path]:
    return sorted(Path(folder) / name for folder, _, names in os.walk(root) for name in names)


def catalogue(home: Path, inbox: Path) -> tuple[dict[str, list[str]], list[str]]:
    """kind name → the relative paths of its files in ``home`` and ``inbox``, and the files no kind claims."""
    kinds: dict[str, list[str]] = {}
    unclaimed: list[str] = []
    for root, in_inbox in ((home, False), (inbox, True)):
        for path in _files(root):
            relative = path.relative_to(root).as_posix()
            kind = classify(relative, in_inbox)
            if kind is None:
                unclaimed.append(f"{'inbox' if in_inbox else 'home'}/{relative}")
            else:
                kinds.setdefault(kind.name, []).append(relative)
    return kinds, unclaimed


def representative(kind: FileKind, relatives: list[str], root: Path) -> str:
    return min(relatives, key=lambda rel: (kind.prefer not in rel, -(root / rel).stat().st_size, rel))


def damage(path: Path, how: str) -> None:
    """Damage one file: truncated to half or to nothing, its bytes replaced by as many random ones (64 for an empty
    file), deleted, or replaced by an empty folder."""
    if how == "truncated_half":
        os.truncate(path, path.stat().st_size // 2)
    elif how == "truncated_empty":
        os.truncate(path, 0)
    elif how == "random_bytes":
        path.write_bytes(random.Random(f"{path.name}:{how}").randbytes(path.stat().st_size or 64))
    elif how == "deleted":
        path.unlink()
    elif how == "directory":
        path.unlink()
        path.mkdir()
    else:
        raise ValueError(f"no such damage: {how}")


def unreadable(kind: FileKind, path: Path) -> str | None:
    """Why the kind's reader cannot read the file, or None (also None when the kind has no reader)."""
    if kind.read is None:
        return None
    if path.is_dir():
        return "a folder"
    try:
        kind.read(path)
    except Exception as error:  # whatever the reader says is the answer
        return f"{type(error).__name__}: {' '.join(str(error).split())[:160]}"
    return None


def traceback_line(output: str) -> str | None:
    """The exception line of the last traceback in ``output``, else the CLI's line for an exception it did not
    expect (it keeps the traceback in a log and calls it a bug), else None: a crash either way."""
    if TRACEBACK in output:
        lines = output[output.rindex(TRACEBACK) :].splitlines()[1:]
        unindented = [line for line in lines if line.strip() and not line.startswith((" ", "\t"))]
        return " ".join((unindented or lines or [""])[0].split())[:240]
    bugs = [line for line in output.splitlines() if CLI_BUG in line]
    return " ".join(bugs[-1].split())[:240] if bugs else None


def _normal(line: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "#", " ".join(line.split()))


def new_lines(output: str, quiet: str) -> list[str]:
    """Lines of an ingest's output that a clean, nothing-to-do ingest does not print (numbers aside)."""
    known = {_normal(line) for line in quiet.splitlines()}
    return [" ".join(line.split()) for line in output.splitlines() if line.strip() and _normal(line) not in known]


# a paper's own failure line (its key has a volume), or a volume's held for its manifest
PAPER_FAILURE = re.compile(r"failed (?:[^\s/:]+/[^\s:]+|[^\s/:]+: manifest): ")


def failure_lines(output: str) -> list[str]:
    return [" ".join(line.split()) for line in output.splitlines() if line.lstrip().startswith(("failed ", "error:"))]


def _environ(environment: dict[str, str | None]) -> dict[str, str]:
    env = dict(os.environ)
    for name, value in environment.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def read_problems(
    home: Path, environment: dict[str, str | None], must_succeed: bool, wrapper: Sequence[str] = ()
) -> list[str]:
    """The read commands on ``home``, side by side: never a traceback; with ``must_succeed`` exit 0 too (and the SQL
    count is the reference's two papers)."""
    processes = {
        name: subprocess.Popen(
            [*wrapper, PAPERLAKE, *args, "--home", str(home)],
            env=_environ(environment),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        for name, args in READS.items()
    }
    problems = []
    for name, process in processes.items():
        try:
            output, _ = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.communicate()
            problems.append(f"`paperlake {name}` did not finish in 300 s")
            continue
        if (line := traceback_line(output)) is not None:
            problems.append(f"`paperlake {name}` crashes: {line}")
        elif must_succeed and process.returncode != 0:
            said = failure_lines(output) or output.strip().splitlines()[-1:] or ["(nothing)"]
            problems.append(f"`paperlake {name}` exits {process.returncode}: {said[0][:240]}")
        elif must_succeed and name == "sql" and '"papers": 2' not in output:
            problems.append(f"`paperlake sql` counts other papers than the reference's two: {output.strip()[:120]}")
    return problems


def derived_state(home: Path) -> dict:
    """What :func:`support.crash_harness.snapshot` does not read: every lake file readable (its rows), the lake
    records (what a paper is, not when or in which bytes it was written), the formula graph's state and blocks, the
    evaluation files (a quality report's times aside; not the quality history, which each evaluation adds to: a
    damaged one must only read again, see :func:`run_case`)."""
    state: dict = {}
    lake = home / "lake"
    for path in sorted(lake.rglob("*.parquet")) if lake.is_dir() else []:
        if not path.name.startswith("."):
            state[f"lake:{path.relative_to(lake)}"] = _state_of(_read_parquet, path)
    for path in sorted((lake / "_papers").rglob("*.json")) if (lake / "_papers").is_dir() else []:
        state[f"record:{path.relative_to(lake)}"] = _state_of(_read_json, path, keep=RECORD_FIELDS)
    state["formulas:state"] = _state_of(_read_json, lake / "formulas" / "state.json")
    state["formulas:blocks"] = _state_of(_read_parquet, home / "formulas" / "formulas.ttl.blocks.parquet")
    evaluation = home / "evaluation"
    for path in sorted(evaluation.rglob("*")) if evaluation.is_dir() else []:
        relative = f"evaluation:{path.relative_to(evaluation)}"
        if path.name.endswith(".history.jsonl"):  # a log of every evaluation: it grows, and lost lines stay lost
            continue
        if path.suffix == ".jsonl":
            state[relative] = _state_of(_read_jsonl, path)
        elif path.suffix == ".json":
            # a report's fingerprint names the collections' incarnations: a rebuilt store has new ones, and whether
            # the report matches the stores it scored is :func:`stale_evaluation`'s check
            state[relative] = _state_of(_read_json, path, drop=("at", "seconds", "fingerprint"))
    return state


def stale_evaluation(home: Path, environment: dict[str, str | None]) -> list[str]:
    """The volumes whose quality report does not describe the stores as they now are (one line each)."""
    script = (
        "import json, sys; from pathlib import Path; from paperlake.config import Settings;"
        " from paperlake.evaluation.sets import stale_volumes;"
        "print(json.dumps(stale_volumes(Settings.from_env(home=Path(sys.argv[1])))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(home)],
        env=_environ(environment),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        return [f"the evaluation's staleness cannot be read: {(done.stderr.strip().splitlines() or ['?'])[-1][:200]}"]
    stale = json.loads(done.stdout.strip().splitlines()[-1])
    return [f"the quality report of {volume} is stale after the ingest: {why}" for volume, why in stale.items()]


def _state_of(
    read: Callable[[Path], object], path: Path, drop: tuple[str, ...] = (), keep: tuple[str, ...] = ()
) -> object:
    if not path.exists():
        return "missing"
    if path.is_dir():
        return "a folder"
    try:
        value = read(path)
    except Exception:  # a damaged file's state is that it is damaged
        return "unreadable"
    if isinstance(value, dict):
        return _without({k: v for k, v in value.items() if not keep or k in keep}, drop)
    if isinstance(value, list):
        return [len(value), json.dumps(value, sort_keys=True)]
    return value


def _without(value: object, drop: tuple[str, ...]) -> object:
    """``value`` without the keys ``drop`` names, at any depth."""
    if isinstance(value, dict):
        return {k: _without(v, drop) for k, v in value.items() if k not in drop}
    return value


def full_state(home: Path) -> dict:
    """The crash harness's snapshot and :func:`derived_state`; a snapshot that fails is part of the state."""
    try:
        state = snapshot(home)
    except Exception as error:  # an unreadable store: the comparison names it
        state = {"snapshot": f"fails: {type(error).__name__}: {' '.join(str(error).split())[:200]}"}
    return state | derived_state(home)


def differences(actual: dict, reference: dict) -> list[str]:
    """One line per differing entry (per differing field of a record); when the snapshot failed, that line instead
    of one per store it could not read."""
    keys = sorted(k for k in reference.keys() | actual.keys() if actual.get(k) != reference.get(k))
    if "snapshot" in actual:
        keys = [k for k in keys if k == "snapshot" or ":" in k]
    lines = []
    for key in keys:
        mine, theirs = actual.get(key), reference.get(key)
        if isinstance(mine, dict) and isinstance(theirs, dict):
            fields = sorted(f for f in mine.keys() | theirs.keys() if mine.get(f) != theirs.get(f))
            lines += [f"{key} {f}: {_short(mine.get(f))} vs reference {_short(theirs.get(f))}" for f in fields]
        else:
            lines.append(f"{key}: {_short(mine)} vs reference {_short(theirs)}")
    return lines


def _short(value: object) -> str:
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        return f"{len(value)} items"
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], int) and isinstance(value[1], str):
        return f"{value[0]} lines ({value[1][-12:]})"
    return " ".join(str(value).split())[:100]


def warehouse_facts(home: Path) -> tuple[set[str], dict[str, str]]:
    """The metadata table's paper keys and the ingest_errors table's (key → stage: reason)."""
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        keys = {row[0] for row in con.execute("select paper_key from metadata").fetchall()}
        rows = con.execute("select paper_key, stage, reason from ingest_errors").fetchall()
    errors = {key: f"{stage}: {reason}" for key, stage, reason in rows}
    return keys, errors


def ingest_environment(stub_url: str) -> dict[str, str | None]:
    """Every command of the harness: the home's own embedding cache (not the suite's shared one), the stub LLM for
    the one enrichment kind, and lines as wide as they are (no wrapping inside a name)."""
    return {
        "PAPERLAKE_EMBEDDING_CACHE": None,
        "OPENAI_BASE_URL": stub_url,
        "OPENAI_API_KEY": "stub",
        "PAPERLAKE_LLM_MODEL": "stub-text",
        "OPENAI_MODEL": None,
        "PAPERLAKE_VLM_MODEL": None,
        "PAPERLAKE_LLM_BUDGET": None,
        "PAPERLAKE_ENRICH_KINDS": "tldr",
        "COLUMNS": "250",
    }


@dataclass
class Reference:
    """The clean home every case starts from, restored into ``home`` (same path, so its absolute paths hold)."""

    root: Path
    environment: dict[str, str | None] = field(repr=False)
    state: dict = field(default_factory=dict, repr=False)
    quiet: str = field(default="", repr=False)  # the output of an ingest with nothing to do
    files: dict[str, list[str]] = field(default_factory=dict, repr=False)
    unclaimed: list[str] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict, repr=False)  # paper key → paper id

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def inbox(self) -> Path:
        return self.root / "inbox"

    def restore(self) -> None:
        for live in (self.home, self.inbox):
            if live.exists():
                shutil.rmtree(live)
            shutil.copytree(self.root / f"clean-{live.name}", live, symlinks=True)

    def path_of(self, kind: FileKind) -> Path:
        root = self.inbox if kind.inbox else self.home
        return root / representative(kind, self.files[kind.name], root)

    def ingest(self) -> tuple[int, str]:
        return run_ingest(self.home, self.inbox, evaluate=True, environment=self.environment)


def build_reference(root: Path, crash_references: dict, stub_url: str) -> Reference:
    """The crash harness's two-paper home with a failed file, tl;dr enrichment, the evaluation and the home's own
    embedding cache. What the environment decides is made again in it: the vectors (so the cache holds what they
    need) and the formula graph (with an LLM configured, its build asks for templates). Then an ingest with nothing
    to do, whose output is what a case's output is compared with."""
    reference = Reference(root, ingest_environment(stub_url) | {"PAPERLAKE_HOME": str(root / "home")})
    shutil.copytree(crash_references["home_both"], reference.home, symlinks=True)
    shutil.copytree(crash_references["inbox_both"], reference.inbox, symlinks=True)
    (reference.inbox / FIRST.split("-")[0] / f"{BROKEN}.pdf").write_text("a plain text file named .pdf\n" * 20)
    for derived in ("milvus.db", "vectors", "formulas", "lake/formulas"):  # made again under this environment
        shutil.rmtree(reference.home / derived)
    (reference.home / "milvus.db.lock").unlink(missing_ok=True)
    code, output = reference.ingest()
    assert code in (0, 1) and TRACEBACK not in output, f"the reference ingest failed:\n{output[-4000:]}"
    code, reference.quiet = reference.ingest()
    assert code == 0 and TRACEBACK not in reference.quiet, f"the reference does not settle:\n{reference.quiet[-4000:]}"
    assert "0 to parse" in reference.quiet, reference.quiet[-4000:]
    outside = _lake_paths_outside(reference.home)
    assert not outside, f"the reference warehouse reads a lake outside its home: {outside}"
    for live in (reference.home, reference.inbox):
        shutil.copytree(live, root / f"clean-{live.name}", symlinks=True)
    reference.state = full_state(reference.home)
    reference.files, reference.unclaimed = catalogue(reference.home, reference.inbox)
    with duckdb.connect(str(reference.home / "warehouse.duckdb"), read_only=True) as con:
        reference.ids = dict(con.execute("select paper_key, paper_id::varchar from metadata").fetchall())
    return reference


def _lake_paths_outside(home: Path) -> list[str]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        views = [sql for (sql,) in con.execute("select sql from duckdb_views() where not internal").fetchall()]
    found = {path for sql in views for path in re.findall(r"read_parquet\(\[?'([^']+)'", sql)}
    return sorted(path for path in found if not path.startswith(str(home)))


def run_case(reference: Reference, kind: FileKind, how: str) -> list[str]:
    """One damage, one ingest, the checks: a list of problems, one line each (empty when the home healed)."""
    reference.restore()
    path = reference.path_of(kind)
    relative = path.relative_to(reference.inbox if kind.inbox else reference.home).as_posix()
    damage(path, how)
    why_unreadable = "deleted" if how == "deleted" else unreadable(kind, path)
    code, output = reference.ingest()
    problems = _ingest_problems("the ingest", code, output, expect_ok=not kind.inbox)
    if kind.inbox:
        problems += _inbox_problems(reference, kind, how, output)
    else:
        if kind.note == "always" or (kind.note == "unreadable" and why_unreadable and how != "deleted"):
            problems += _note_problems(reference, kind, relative, output)
        problems += read_problems(reference.home, reference.environment, must_succeed=True)
        problems += [f"stores differ: {line}" for line in differences(full_state(reference.home), reference.state)]
        problems += stale_evaluation(reference.home, reference.environment)
        if kind.note != "never" and path.exists() and (still := unreadable(kind, path)):
            problems.append(f"{relative} is still unreadable after the ingest ({still})")
        reference.restore()  # and the damaged home as a reader finds it before any ingest
        damage(reference.path_of(kind), how)
        problems += [
            f"before the ingest: {problem}"
            for problem in read_problems(reference.home, reference.environment, must_succeed=False)
        ]
    return problems


def _ingest_problems(what: str, code: int, output: str, expect_ok: bool) -> list[str]:
    """Exit 0, no traceback. Exit 1 when not ``expect_ok`` (a damaged inbox) only for papers' own failures: a stage
    of the run (``failed warehouse: ...``) failing is a problem either way. The reference's failed file, tried again
    (its error file was damaged), fails again: that failure line alone is not a problem."""
    if (line := traceback_line(output)) is not None:
        return [f"{what} crashes (exit {code}): {line}"]
    said = failure_lines(output) or output.strip().splitlines()[-1:] or ["(nothing)"]
    retried = code == 1 and all(line.startswith(f"failed {BROKEN_KEY}: open: ") for line in said)
    papers_only = all(PAPER_FAILURE.match(line) for line in failure_lines(output))
    if code == 0 or (not expect_ok and code == 1 and papers_only) or retried:
        return []
    return [f"{what} exits {code}: {said[0][:300]}" + (f" (+{len(said) - 1} more)" if len(said) > 1 else "")]


def _note_problems(reference: Reference, kind: FileKind, relative: str, output: str) -> list[str]:
    parts = relative.split("/")
    words = {relative, parts[-1], f"{parts[-2]}/{parts[-1].split('.')[0]}" if len(parts) > 1 else parts[-1]}
    words |= set(kind.names)
    if parts[0] == "milvus.db" and len(parts) > 2:
        words.add(parts[2])
    if parts[0] == "vectors":
        words.add(parts[1])
    lines = [line for line in new_lines(output, reference.quiet) if not SUMMARY.match(line)]
    if any(word.lower() in line.lower() for line in lines for word in words):
        return []
    return [f"no line of the ingest's output names what was rebuilt (looked for {sorted(words)})"]


def _inbox_problems(reference: Reference, kind: FileKind, how: str, output: str) -> list[str]:
    """A damaged PDF: its paper becomes an ingest_errors row (deleted: a removal); a damaged manifest: its volume
    keeps its paper (held, or read with titles from page 1); the other volume is untouched; the next ingest has
    nothing to parse."""
    problems = []
    try:
        keys, errors = warehouse_facts(reference.home)
    except Exception as error:  # the warehouse itself is what went wrong
        return problems + [f"the warehouse cannot be read: {type(error).__name__}: {str(error)[:200]}"]
    if kind.name == "inbox_pdf" and how == "deleted":
        if FIRST_KEY in keys or FIRST_KEY in errors:
            problems.append(f"the deleted PDF's paper is still in the warehouse ({FIRST_KEY})")
    elif kind.name == "inbox_pdf":
        if FIRST_KEY not in errors:
            held = "its rows are still in metadata" if FIRST_KEY in keys else "it is in neither metadata nor"
            problems.append(f"the damaged PDF has no ingest_errors row ({held} ingest_errors)")
    elif FIRST_KEY not in keys:
        problems.append(f"a damaged manifest cost its volume's paper: {FIRST_KEY} is not in metadata")
    if SECOND_KEY not in keys:
        problems.append(f"the other volume's paper is gone: {SECOND_KEY}")
    if BROKEN_KEY not in errors:
        problems.append(f"the failed file's ingest_errors row is gone: {BROKEN_KEY}")
    problems += _other_volume_problems(reference)
    code, again = reference.ingest()
    problems += _ingest_problems("the next ingest", code, again, expect_ok=False)
    if "plan: 0 to parse" not in again or " 0 removed" not in again:
        plan = next((line for line in again.splitlines() if line.startswith("plan:")), "(no plan line)")
        problems.append(f"the next ingest does not settle: {plan.strip()}")
    problems += read_problems(reference.home, reference.environment, must_succeed=False)
    return problems


def _other_volume_problems(reference: Reference) -> list[str]:
    """The other volume's paper: its vectors, lake files and records as the reference has them."""
    paper_id = reference.ids[SECOND_KEY]
    actual = full_state(reference.home)
    volume = SECOND_KEY.split("/")[0]
    problems = []
    for key, value in reference.state.items():
        if key.startswith("milvus."):
            mine = [row for row in actual.get(key, []) if row[0] == paper_id]
            if mine != [row for row in value if row[0] == paper_id]:
                problems.append(f"the other volume's vectors changed in {key.removeprefix('milvus.')}")
        elif key.startswith(("lake:", "record:")) and f"/{volume}/" in f"/{key.split(':', 1)[1]}":
            if actual.get(key) != value:
                problems.append(f"the other volume's {key} changed: {_short(actual.get(key))}")
    return problems


def read_only_wrapper(probe: Path) -> list[str] | None:
    """A command prefix under which this user cannot write into a folder without write permission: none for an
    ordinary user; for root, whom permissions do not stop, ``setpriv`` without the two capabilities that override
    them. None when there is no such way (then a read-only home cannot be made here)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    caps = "-dac_override,-dac_read_search"
    wrapper = [setpriv, "--bounding-set", caps, "--inh-caps", caps]
    probe.mkdir(parents=True, exist_ok=True)
    probe.chmod(0o555)
    try:
        tried = subprocess.run(
            [*wrapper, sys.executable, "-c", f"open({str(probe / 'x')!r}, 'w')"], capture_output=True
        )
    finally:
        probe.chmod(0o755)
    return wrapper if tried.returncode != 0 else None


def set_read_only(root: Path, read_only: bool) -> None:
    """chmod -R a-w (or u+w back) on a folder, links left alone."""
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(mode & ~0o222 if read_only else mode | 0o200)


def linked_inbox(root: Path) -> Path:
    """The crash harness's two-paper inbox made of links: the first volume a real folder whose PDF is a link to the
    corpus's, the second volume a link to a folder of another name (whose PDF is a link too). Keys taken from the
    link's names equal the copied inbox's; keys taken from the targets do not (``shelf/…``)."""
    inbox = make_inbox(root, [FIRST, SECOND])
    for stem in (FIRST, SECOND):
        pdf = inbox / stem.split("-")[0] / f"{stem}.pdf"
        pdf.unlink()
        pdf.symlink_to(corpus_pdf(stem))
    shelf = root / "shelf"
    (inbox / SECOND.split("-")[0]).rename(shelf)
    (inbox / SECOND.split("-")[0]).symlink_to(shelf, target_is_directory=True)
    return inbox
