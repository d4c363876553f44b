"""The repo is lint-clean: `ruff check` with the configuration in pyproject.toml ([tool.ruff])."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (it is in the `test` extra: pip install -e '.[test]')")
def test_ruff_check_passes() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(REPO)], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, f"ruff check found problems:\n{result.stdout}{result.stderr}"
