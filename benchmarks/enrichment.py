"""Enrichment over a whole volume set against the scripted OpenAI-compatible server: calls, time, and that every store
agrees afterwards.

Copies an ingested home (``--home``, default ``$PAPERLAKE_HOME``) to a work folder, starts
``tests/support/openai_stub.py`` on 127.0.0.1 (answers: a JSON tag list for the tags prompt, else a summary echoing
the item's first words), then: a dry run (the planned calls and worst-case tokens), `ingest` with the endpoint
configured (enrichment, warehouse, vectors; seconds per stage), the check that every planned item has its column
filled in the warehouse and one entity per filled cell in each text collection, and a second `ingest` that must make
no request. The stub answers at once, so the times are paperlake's own overhead per call, not a model's latency.
Results go to ``benchmarks/results/enrichment.json``.

    python benchmarks/enrichment.py --home data [--kinds page_summary,...] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

RULES = {
    "rules": [{"match": "JSON list of strings", "content": '["benchmark", "scripted"]'}],
    "default": {"content": "Summary: {echo}"},
}
FILLED = {
    "page_summary": ("pages", "page_summary"),
    "section_summary": ("sections", "section_summary"),
    "table_summary": ("tables", "table_summary"),
    "image_summary": ("images", "image_summary"),
    "tldr": ("metadata", "tldr"),
    "tags": ("metadata", "tags"),
    "row_summary": ("table_rows", "row_summary"),
    "column_summary": ("table_columns", "column_summary"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("PAPERLAKE_HOME", "data")))
    parser.add_argument("--inbox", type=Path, default=REPO.parent / "shared" / "corpus" / "inbox")
    parser.add_argument("--mineru-dir", type=Path, default=REPO.parent / "shared" / "corpus" / "mineru")
    parser.add_argument("--kinds", default="")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "enrichment.json")
    args = parser.parse_args()

    import duckdb

    from orchestration.run import ingest
    from paperlake.config import Settings
    from paperlake.enrichment import dry_run, resolve_kinds
    from paperlake.vectors.config import load_config
    from paperlake.vectors.store import VectorStore
    from support.openai_stub import start_stub

    work = Path(tempfile.mkdtemp(prefix="paperlake-enrich-bench-"))
    home = work / "home"
    shutil.copytree(args.home.resolve(), home, ignore=shutil.ignore_patterns("*.lock"))
    kinds = resolve_kinds(args.kinds or None)
    base = Settings.from_env(home=home, milvus_uri=str(home / "milvus.db"), mineru_dir=args.mineru_dir.resolve())
    planned = dry_run(base, kinds)["total"]
    print(f"planned: {planned['calls']} calls {planned['by_kind']}")
    results: dict = {
        "machine": platform.platform(),
        "kinds": list(kinds),
        "planned": planned,
        "concurrency": args.concurrency,
    }
    try:
        with start_stub(RULES, work / "stub", idle=1800) as stub:
            settings = replace(
                base,
                openai_base_url=stub.base_url,
                openai_api_key="k",
                llm_model="stub-text",
                vlm_model="stub-vision",
                llm_concurrency=args.concurrency,
            )
            started = time.perf_counter()
            first = ingest([args.inbox.resolve()], settings, enrich_kinds=kinds)
            seconds = time.perf_counter() - started
            requests = len(stub.requests())
            again = ingest([args.inbox.resolve()], settings, enrich_kinds=kinds)
            requests_again = len(stub.requests()) - requests
        with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
            filled = {
                kind: con.execute(
                    f"select count({column}) from {table}"
                    + (" where parent_image_id is null" if table == "images" else "")
                ).fetchone()[0]
                for kind, (table, column) in FILLED.items()
                if kind in kinds
            }
        store = VectorStore(str(home / "milvus.db"), cache_path=home / "cache" / "embeddings.sqlite")
        try:
            entities = {
                spec.name: {
                    kind: store.count(
                        spec.name, f"table_name == '{FILLED[kind][0]}' and column_name == '{FILLED[kind][1]}'"
                    )
                    for kind in kinds
                    if FILLED[kind][1] not in ("tags",)
                }
                for spec in load_config().active_collections()
                if spec.modality == "text"
            }
        finally:
            store.close()
        planned_by_kind = planned["by_kind"]
        results |= {
            "first_run": {
                "seconds": round(seconds, 1),
                "stage_seconds": {k: round(v, 1) for k, v in first.step_seconds.items()},
                "requests": requests,
                "usage": first.enrichment_usage,
                "ok": first.ok,
                "pending": first.enrichment_pending,
                "ms_per_call": round(1000 * first.step_seconds.get("enrichment", 0) / max(1, requests), 1),
            },
            "second_run": {"requests": requests_again, "usage": again.enrichment_usage},
            "warehouse_filled": filled,
            "every_planned_item_filled": all(filled.get(k, 0) == n for k, n in planned_by_kind.items()),
            "milvus_entities": entities,
            "milvus_matches_warehouse": all(counts[k] == filled[k] for counts in entities.values() for k in counts),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        json.dumps(
            {
                k: results[k]
                for k in ("first_run", "second_run", "every_planned_item_filled", "milvus_matches_warehouse")
            },
            indent=1,
            default=str,
        )
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
