"""Imports flow one way: the library at the bottom, the Dagster code and the agent above it, the CLI on top.

    cli/            → orchestration/, agent/, paperlake/
    orchestration/  → assets/, paperlake/         (definitions, jobs, sensors, the instance, the CLI's runner)
    assets/         → paperlake/, agent/          (assets with their resources, partitions and checks)
    agent/          → paperlake/
    paperlake/      → nothing of the above, and no Dagster

Every import counts, also the ones inside functions (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "paperlake": {
        "dagster",
        "dagster_dbt",
        "dagster_duckdb",
        "dagster_webserver",
        "orchestration",
        "assets",
        "agent",
        "cli",
    },
    "agent": {"dagster", "dagster_dbt", "dagster_duckdb", "orchestration", "assets", "cli"},
    "assets": {"orchestration", "cli"},
    "orchestration": {"cli"},
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_flow_one_way(package):
    offences = {
        str(path.relative_to(REPO)): sorted(imported_packages(path) & FORBIDDEN[package])
        for path in sorted((REPO / package).rglob("*.py"))
    }
    assert not {path: names for path, names in offences.items() if names}


def test_the_checker_sees_lazy_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from orchestration.run import ingest\n    import dagster as dg\n")
    assert imported_packages(module) == {"orchestration", "dagster"}


def test_the_pipeline_names_no_parser():
    """The parser seam: the pipeline asks the registry (paperlake.parsing.backends.PARSERS) for a backend's version
    and parse, and names none itself, so a new backend is one class in the registry."""
    from paperlake.parsing.backends import PARSERS
    from paperlake.pipeline import BACKENDS, parse_code_version, parser_version

    source = (REPO / "paperlake" / "pipeline.py").read_text(encoding="utf-8")
    assert '"mineru"' not in source and '"pymupdf"' not in source
    assert set(BACKENDS) == {"auto", *PARSERS}
    assert all(
        parser_version(name) == parser.version and f"{name}={parser.version}" in parse_code_version()
        for name, parser in PARSERS.items()
    )
