"""The console entry, `paperlake`: the app is imported after this module's one decision.

`paperlake ingest` and `paperlake enrich` run Dagster in this process, and Dagster's modules make some hundred
thousand objects that live until the process ends. Frozen (:func:`gc.freeze`) as soon as Dagster is imported, they
are left out of every full collection during the run. The freeze comes before DuckDB is imported: its module, built
with nanobind, reports every one of its objects still unfreed at the interpreter's teardown as a leak. Every other
command starts without Dagster (`cli.app`).

Once the command has ended, and after every exit handler the libraries registered (logging's, multiprocessing's,
Dagster's: Python runs them last registered first, and the entry's is the first), the process ends with the
command's code without the interpreter's teardown: clearing some thousands of modules, with collections over the
millions of objects they hold, only to free memory the process gives back anyway. It took about 2 s of a cold ingest
and 0.1-0.4 s of a query (`docs/performance.md`). Python does not promise that objects still alive at exit are
finalised, and nothing here counts on it: every store is closed by the command itself, SQLite and DuckDB keep what
was committed, and any process may end at any line (`docs/crash-consistency.md`). Standard output and error are
flushed first. Exit handlers registered before the entry runs (a ``sitecustomize``'s) do not run."""

from __future__ import annotations

import atexit
import gc
import os
import sys

DAGSTER_COMMANDS = ("ingest", "enrich")


_ENDED_WITH = [1]  # the command's exit code, once it has ended


def _end_without_teardown() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`paperlake sql … | head`), a closed stream
            pass
    os._exit(_ENDED_WITH[0])


def main() -> None:  # pragma: no cover - console entry (tests run it in a subprocess)
    atexit.register(_end_without_teardown)  # the first exit handler: it runs after every other
    if sys.argv[1:2] and sys.argv[1] in DAGSTER_COMMANDS and "duckdb" not in sys.modules:
        import dagster  # noqa: F401 # deferred: dagster, for these commands only

        gc.freeze()
    from cli.app import main as app_main  # deferred: duckdb, after the freeze

    try:
        app_main()
    except SystemExit as ended:  # how the command always ends (`cli.app.main`)
        code = ended.code
        _ENDED_WITH[0] = 0 if code is None else code if isinstance(code, int) else 1
        raise
