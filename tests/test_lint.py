"""The repo is lint-clean and formatted: `ruff check` and `ruff format --check` with the configuration in
pyproject.toml ([tool.ruff]), and the dbt models and macros by sqlfluff with dbt_project/.sqlfluff (DuckDB dialect,
Jinja with dbt's builtins: no database needed)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None,
    reason="ruff is not installed (it is in the `test` extra: pip install -e '.[test]')",
)
def test_ruff_check_passes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", str(REPO)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"ruff check found problems:\n{result.stdout}{result.stderr}"


@pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None,
    reason="ruff is not installed (it is in the `test` extra: pip install -e '.[test]')",
)
def test_ruff_format_leaves_every_file_as_it_is() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", str(REPO)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"ruff format would change files (run `ruff format .`):\n{result.stdout}"


@pytest.mark.skipif(
    importlib.util.find_spec("sqlfluff") is None,
    reason="sqlfluff is not installed (it is in the `test` extra: pip install -e '.[test]')",
)
def test_sqlfluff_lint_passes_on_the_dbt_project() -> None:
    project = REPO / "dbt_project"
    result = subprocess.run(
        [sys.executable, "-m", "sqlfluff", "lint", "models", "macros", "--disable-progress-bar"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"sqlfluff found problems:\n{result.stdout[-4000:]}{result.stderr[-2000:]}"
