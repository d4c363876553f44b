"""The console entry, `paperlake`: the app is imported after this module's one decision.

`paperlake ingest` and `paperlake enrich` run Dagster in this process, and Dagster's modules make some hundred
thousand objects that live until the process ends. Frozen (:func:`gc.freeze`) as soon as Dagster is imported, they
are left out of every full collection during the run and are not walked at exit to free memory the process gives
back anyway: about 0.7 s of an unchanged ingest (`benchmarks/noop.py`). The freeze comes before DuckDB is imported:
its module, built with nanobind, reports at exit every one of its objects that was never freed as a leak. Every other
command starts without Dagster (`cli.app`)."""

from __future__ import annotations

import gc
import sys

DAGSTER_COMMANDS = ("ingest", "enrich")


def main() -> None:  # pragma: no cover - console entry (tests run it in a subprocess)
    if sys.argv[1:2] and sys.argv[1] in DAGSTER_COMMANDS and "duckdb" not in sys.modules:
        import dagster  # noqa: F401 # deferred: dagster, for these commands only

        gc.freeze()
    from cli.app import main as app_main  # deferred: duckdb, after the freeze

    app_main()
