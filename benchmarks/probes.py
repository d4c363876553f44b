"""Offline probes over the sample, retrieval only: the figures the test suite's regression gate holds to.

Reads an ingested home (default ``$PAPERLAKE_HOME``; ``--ingest`` ingests the sample corpus into it first), brings
every paper's probes and every volume's probe set up to date (``paperlake.evaluation.sets``), and scores each
method's deterministic first retrieval on them: answer@1 and answer@5 (answer-bearing recall of the first hit and
of the first five) and page@5 (the evidence page among the five hits), per volume and per probe kind. Also times
probe generation. No LLM.

``gate`` in the results is what ``tests/test_probe_gate.py`` compares a fresh ingest of the sample with: the
default check method's answer@5 per volume (``PAPERLAKE_EVAL_METHODS``' first, classic_rag).

    python benchmarks/probes.py [--home DIR] [--ingest] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

METHODS = ("classic_rag", "two_stage_neu_rag", "neusym_rag", "hdrag")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("PAPERLAKE_HOME", "data")))
    parser.add_argument("--ingest", action="store_true", help="ingest the sample corpus into --home first")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "probes.json")
    args = parser.parse_args()

    from agent.run import open_env, probe_metrics
    from paperlake.config import Settings
    from paperlake.evaluation.sets import read_jsonl, volume_set_path, volumes, write_probes, write_volume_set

    settings = Settings.from_env(home=args.home.resolve(), mineru_dir=args.shared / "corpus" / "mineru")
    if args.ingest:
        from orchestration.run import ingest

        ingest([args.shared / "corpus" / "inbox"], settings)
    grouped = volumes(settings)
    started = time.perf_counter()
    per_paper = {key: write_probes(settings, key)["count"] for keys in grouped.values() for key in keys}
    generation = time.perf_counter() - started
    sets = {volume: write_volume_set(settings, volume) for volume in grouped}
    results: dict = {
        "machine": platform.platform(),
        "home": str(settings.home),
        "papers": len(per_paper),
        "probes": sum(per_paper.values()),
        "min_per_paper": min(per_paper.values(), default=0),
        "generation_seconds": round(generation, 2),
        "by_kind": dict(
            sorted(Counter(k for s in sets.values() for k, n in s["by_kind"].items() for _ in range(n)).items())
        ),
        "volumes": {},
        "gate": {},
    }
    print(
        f"{results['probes']} probes over {results['papers']} papers (min {results['min_per_paper']} per paper), "
        f"generated in {generation:.1f}s; kinds {results['by_kind']}"
    )
    with open_env(settings, formulas=None) as env:
        for volume in sorted(grouped):
            examples = read_jsonl(volume_set_path(settings, volume))
            results["volumes"][volume] = {"probes": len(examples), "methods": {}}
            for method in METHODS:
                metrics = probe_metrics(examples, env, method, k=5)
                results["volumes"][volume]["methods"][method] = {
                    "answer_at_1": metrics.answer_at_1,
                    "answer_at_5": metrics.answer_at_k,
                    "page_at_5": metrics.page_at_k,
                    "ms_per_probe": round(1000 * metrics.seconds / max(1, len(examples)), 1),
                    "by_kind": metrics.by_kind,
                    "error": metrics.error,
                }
                print(
                    f"{volume:10s} {method:18s} answer@1 {metrics.answer_at_1:.3f}  answer@5 "
                    f"{metrics.answer_at_k:.3f}  page@5 {metrics.page_at_k:.3f}"
                )
            gate_method = settings.eval_methods.split(",")[0].strip()
            results["gate"][volume] = {
                "method": gate_method,
                "answer_at_5": results["volumes"][volume]["methods"][gate_method]["answer_at_5"],
            }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
