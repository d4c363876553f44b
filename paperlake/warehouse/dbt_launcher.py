"""``paperlake-dbt``: the ``dbt_executable`` dagster-dbt runs (its documented seam), and plain dbt underneath.

It does two things dbt itself cannot, and nothing else:

- ``--version`` is answered from the installed dbt-core's metadata, as dbt prints it, without importing dbt:
  dagster-dbt asks for every run's resource, and dbt's own answer costs an interpreter and dbt's imports;
- dbt runs in the warehouse's folder (:data:`WORKDIR_VAR`), whose side file the profile names relative to it
  (dagster-dbt starts dbt in the project folder). Every home's profile is then the same, so dbt's partial-parse
  state carries from the project's shared parse to a new home (``paperlake.warehouse.build.seed_parse_state``);
  with the side file's absolute path in it, dbt would count each home's profile as changed and parse in full.

Then it *is* dbt: ``os.execv`` of the environment's ``dbt``, so signals, exit status and streams are dbt's own.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

LAUNCHER = "paperlake-dbt"
WORKDIR_VAR = "PAPERLAKE_DBT_WORKDIR"  # the folder dbt runs in (the warehouse's)


def real_dbt() -> str:
    """The ``dbt`` of this environment (beside this interpreter), else the one on PATH."""
    beside = Path(sys.executable).with_name("dbt")
    if beside.exists():
        return str(beside)
    return shutil.which("dbt") or str(beside)


def launcher_path() -> str:
    """``paperlake-dbt`` beside this interpreter (the console script), else plain ``dbt``."""
    beside = Path(sys.executable).with_name(LAUNCHER)
    return str(beside) if beside.exists() else real_dbt()


def runs_in_workdir(executable: str) -> bool:
    """Whether ``executable`` moves to :data:`WORKDIR_VAR` before running dbt (``paperlake-dbt`` does; dbt does not)."""
    return Path(executable).name == LAUNCHER


def main() -> None:
    arguments = sys.argv[1:]
    if arguments == ["--version"]:
        import importlib.metadata  # deferred: launcher start-up

        print(f"Core:\n  - installed: {importlib.metadata.version('dbt-core')}")
        return
    if os.environ.get(WORKDIR_VAR):
        os.chdir(os.environ[WORKDIR_VAR])
    dbt = real_dbt()
    os.execv(dbt, [dbt, *arguments])


if __name__ == "__main__":
    main()
