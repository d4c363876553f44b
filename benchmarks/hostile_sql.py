"""Fuzz the SQL sandbox (``paperlake sql`` and the agent's RetrieveFromDatabase) for a fixed time, and count.

Every statement must end one of three ways, within the time limit plus a grace: rows within the row and byte caps
(accepted), a one-line refusal (:class:`SQLRefused`: not one reading statement, or file/network access), or a
one-line failure (:class:`SQLFailed`, :class:`SQLTimeout`, :class:`SQLTooLarge`). Anything else, a multi-line
message, a result past a cap, a file written in the working folder, or an input that outlives the deadline, is
counted as an error. Inputs mix the known attacks (COPY/EXPORT/ATTACH/LOAD/SET, host-file table functions, runaway
recursion, giant values, huge joins) with token soup from SQL's grammar and random text.

Run: ``python benchmarks/hostile_sql.py --warehouse data/warehouse.duckdb [--seconds 60]``; prints the counts as
JSON and writes ``benchmarks/results/hostile_sql.json``. Peak memory is the worker's (``RUSAGE_CHILDREN``) and this
process's maximum resident set.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from paperlake.runtime.sql_sandbox import ReadOnlyWarehouse, SQLFailed, SQLRefused, SQLTimeout, SQLTooLarge

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "hostile_sql.json"
ATTACKS = [
    "COPY (select 1) TO 'x.csv'",
    "EXPORT DATABASE 'dump'",
    "ATTACH 'other.duckdb' AS other",
    "LOAD httpfs",
    "INSTALL httpfs",
    "SET memory_limit = '20GB'",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "select * from read_csv('/etc/passwd')",
    "select * from read_text('/etc/passwd')",
    "select * from read_blob('/etc/passwd')",
    "select * from glob('/etc/*')",
    "select getenv('HOME')",
    "select * from read_parquet('https://example.com/x.parquet')",
    "select 1; select 2",
    "with recursive t(n) as (select 1 union all select n + 1 from t) select count(*) from t",
    "select repeat('x', 1500000000) as s",
    "select repeat('x', 50000000) as s",
    "select count(*) from range(100000000000) a, range(1000) b",
    "select * from range(1000000000)",
    "select string_agg(repeat('x', 1000), '') from range(10000000)",
    "select list(range) from range(100000000)",
    "select * from query('create temp table x as select 1')",
    "pragma enable_profiling",
    "checkpoint",
    "call pragma_version()",
    "select * from duckdb_settings()",
]
FRAGMENTS = [
    "select",
    "from",
    "where",
    "with",
    "recursive",
    "union all",
    "copy",
    "to",
    "export",
    "database",
    "attach",
    "load",
    "install",
    "set",
    "pragma",
    "describe",
    "show",
    "summarize",
    "explain",
    "insert",
    "into",
    "values",
    "create",
    "table",
    "drop",
    ";",
    "(",
    ")",
    ",",
    "*",
    "'x'",
    "'/etc/passwd'",
    "1",
    "1e308",
    "9" * 50,
    "metadata",
    "chunks",
    "pages",
    "range(1000000000)",
    "read_csv",
    "read_text",
    "glob",
    "repeat",
    "query",
    "getenv('HOME')",
    "--",
    "/*",
    "*/",
    "é",
    "count(*)",
    "as",
    "t",
    "n",
    "+",
    "=",
    "limit",
    "order by",
    "null",
    "::varchar",
    "[1,2]",
    "{'a': 1}",
    "cross join",
    "group by",
    "string_agg",
]


def hostile_statement(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.15:
        return rng.choice(ATTACKS)
    if kind < 0.75:
        return " ".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 25)))
    if kind < 0.85:
        depth = rng.choice([10, 100, 1000, 5000])
        return "select " + "(" * depth + "1" + ")" * depth
    return "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0, 0x2FFF)])) for _ in range(rng.randint(0, 200)))


def fuzz_sql(warehouse_path: Path, seconds: float, seed: int = 0, timeout: float = 2.0) -> dict[str, Any]:
    rng = random.Random(seed)
    counts = {"tried": 0, "accepted": 0, "refused": 0, "failed": 0, "timeouts": 0, "too_large": 0, "errors": 0}
    errors: list[dict[str, str]] = []
    slowest = (0.0, "")
    workdir = Path(tempfile.mkdtemp(prefix="hostile-sql-"))
    previous = Path.cwd()
    os.chdir(workdir)  # a relative COPY/EXPORT would land here
    try:
        with ReadOnlyWarehouse(warehouse_path, timeout=timeout, max_rows=100, max_bytes=200_000) as sandbox:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                statement = hostile_statement(rng)
                counts["tried"] += 1
                started = time.monotonic()
                problem = ""
                try:
                    result = sandbox.query(statement)
                    counts["accepted"] += 1
                    if len(result.rows) > sandbox.max_rows:
                        problem = f"{len(result.rows)} rows past the cap"
                except SQLRefused as error:
                    counts["refused"] += 1
                    problem = "multi-line message" if "\n" in str(error) else ""
                except SQLTimeout as error:
                    counts["timeouts"] += 1
                    problem = "multi-line message" if "\n" in str(error) else ""
                except SQLTooLarge as error:
                    counts["too_large"] += 1
                    problem = "multi-line message" if "\n" in str(error) else ""
                except SQLFailed as error:
                    counts["failed"] += 1
                    problem = "multi-line message" if "\n" in str(error) else ""
                except Exception as error:  # the property under test
                    problem = f"{type(error).__name__}: {error}"
                took = time.monotonic() - started
                if took > timeout + 5:
                    problem = problem or f"took {took:.1f} s"
                if any(workdir.iterdir()):
                    problem = problem or f"wrote {sorted(p.name for p in workdir.iterdir())}"
                if problem:
                    counts["errors"] += 1
                    if len(errors) < 10:
                        errors.append({"input": statement[:300], "problem": problem[:300]})
                slowest = max(slowest, (took, statement[:120]))
    finally:
        os.chdir(previous)
    return {
        **counts,
        "seconds": seconds,
        "seed": seed,
        "timeout": timeout,
        "slowest_seconds": round(slowest[0], 3),
        "slowest_input": slowest[1],
        "peak_rss_mb_worker": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        "peak_rss_mb_self": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "errors_seen": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", type=Path, default=Path("data/warehouse.duckdb"))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    result = fuzz_sql(args.warehouse.resolve(), args.seconds, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
