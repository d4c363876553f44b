"""The `paperlake` command: the app, its commands in the order `--help` lists them, and the main that
:mod:`cli.entry` (the console script) calls.

The commands live in modules by group (cli/ingest.py, status.py, query.py, evaluation.py, tables.py, formulas.py,
what they share in common.py); this module only registers them. Dagster is imported only when `ingest` or `enrich`
runs (the library itself never imports it)."""

from __future__ import annotations

import inspect
import logging
import os
import re
import sys
import traceback
import warnings
from pathlib import Path

import typer

from cli.common import err, one_line
from cli.evaluation import eval_app
from cli.formulas import formulas_app
from cli.ingest import enrich, ingest
from cli.query import ask, search, sql
from cli.status import status
from cli.tables import tables_app
from paperlake.config import Settings
from paperlake.runtime.healing import StoreUnreadable

app = typer.Typer(
    help="paperlake: conference volumes → a queryable, trustworthy knowledge base.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
for command in (ingest, enrich, status, sql, ask, search):
    app.command()(command)
app.add_typer(eval_app, name="eval")
app.add_typer(tables_app, name="tables")
app.add_typer(formulas_app, name="formulas")


def _paragraphs_as_lines(group: typer.Typer) -> None:
    """Typer keeps a docstring's source line breaks in a command list and in every paragraph of a command's page
    but its first, so at 80 columns they broke mid-line. Each command's help becomes its docstring with every
    paragraph on one line, which the terminal wraps, and its first paragraph is its ``short_help``."""
    for info in group.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(info.callback.__doc__).split("\n\n")]
            info.help = "\n\n".join(paragraphs)
            info.short_help = info.short_help or paragraphs[0]
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _paragraphs_as_lines(sub.typer_instance)


_paragraphs_as_lines(app)


def main() -> None:  # pragma: no cover - console entry (through cli.entry)
    """The console entry: a failure a user can act on is one line; anything else is one line too, its traceback
    written to ``$PAPERLAKE_HOME/logs/cli-errors.log`` for a bug report."""
    quiet_third_party()
    try:
        code = app(sys.argv[1:], standalone_mode=False)  # click returns an Exit's code instead of exiting
    except KeyboardInterrupt:
        err.print("interrupted")
        code = 130
    except StoreUnreadable as problem:
        code = one_line(str(problem))
    except OSError as problem:  # a full disk, a read-only home, a file that cannot be opened
        code = one_line(_operational_line(problem))
    except Exception as problem:
        if hasattr(problem, "show") and hasattr(problem, "exit_code"):  # click's usage errors, as click shows them
            problem.show()
            code = problem.exit_code
        elif (cause := operational_cause(problem)) is not None:
            code = one_line(_operational_line(cause))
        elif (unreadable := _unreadable_warehouse(problem)) is not None:
            code = one_line(str(unreadable))
        else:  # the last guard between a bug and the user's terminal
            code = one_line(f"{type(problem).__name__}: {problem} (a bug: the traceback is in {_log_traceback()})")
    raise SystemExit(code if isinstance(code, int) else 0)


# What SQLite (Dagster's storage, the caches), DuckDB and Milvus Lite say, in their own exception classes, when the
# disk is full or the home cannot be written: the operator's to fix, not a bug
OPERATIONAL_WORDS = (
    "database or disk is full",
    "no space left on device",
    "disk quota exceeded",
    "attempt to write a readonly database",
    "read-only file system",
    "permission denied",
)


def operational_cause(problem: BaseException) -> BaseException | None:
    """The error in ``problem``'s chain (itself, its cause, its context) that says the disk is full or the home is
    not writable, or None."""
    seen: set[int] = set()
    current: BaseException | None = problem
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) or any(word in str(current).lower() for word in OPERATIONAL_WORDS):
            return current
        current = current.__cause__ or current.__context__
    return None


def _unreadable_warehouse(problem: BaseException) -> StoreUnreadable | None:
    """A DuckDB I/O error reading the warehouse (a file damaged since it was opened: DuckDB reads blocks on demand),
    as the damaged-store line readers give."""
    import duckdb  # deferred: only on this error path

    named = re.search(r'"([^"]+\.duckdb)"', str(problem))
    if not isinstance(problem, duckdb.IOException) or named is None:
        return None
    return StoreUnreadable("warehouse", Path(named.group(1)), str(problem))


def _operational_line(problem: BaseException) -> str:
    if isinstance(problem, OSError):
        where = f" ({problem.filename})" if getattr(problem, "filename", None) else ""
        what = f"{problem.strerror or problem}{where}"
    else:
        what = " ".join(str(problem).split())[:300]
    return f"{what}: check free space, permissions or the path, then run again"


def _log_traceback() -> str:
    try:
        logs = Settings.from_env().home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        path = logs / "cli-errors.log"
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"$ paperlake {' '.join(sys.argv[1:])}\n{traceback.format_exc()}\n")
        return str(path)
    except OSError:
        traceback.print_exc()
        return "the output above"


def quiet_third_party() -> None:
    """The console entry hides what the libraries print that a user cannot act on (tests call ``app`` and see it
    all): Dagster's beta/preview notices for the APIs this project chose deliberately, pymilvus's note that Milvus
    Lite has no server timestamp, and Hugging Face's progress bars and advice. paperlake's own warnings, errors and
    every library's errors still print."""
    warnings.filterwarnings("ignore", message=r".*is currently in (beta|preview)")
    warnings.filterwarnings("ignore", message=r".*(Beta|Preview)Warning")
    # pymilvus configures its loggers when imported (dictConfig: levels reset, children included), which keeps a
    # logger's filters only: errors pass, warnings and below do not.
    for name in (
        "pymilvus.client.iterator.query_iterator",
        "pymilvus.client.iterator.search_iterator",
        "milvus_lite",
        "sentence_transformers",
        "transformers",
        "huggingface_hub",
    ):
        logging.getLogger(name).addFilter(lambda record: record.levelno >= logging.ERROR)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
