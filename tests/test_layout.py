"""Imports flow one way: the library at the bottom, the Dagster code and the agent above it, the CLI on top.

    cli/            → orchestration/, agent/, paperlake/
    orchestration/  → assets/, paperlake/         (definitions, jobs, sensors, the instance, the CLI's runner)
    assets/         → paperlake/, agent/          (assets with their resources, partitions and checks)
    agent/          → paperlake/
    paperlake/      → nothing of the above, and no Dagster

Every import counts, also the ones inside functions (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
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
    from paperlake.lake.pipeline import BACKENDS, parse_code_version, parser_version
    from paperlake.parsing.backends import PARSERS

    source = (REPO / "paperlake" / "lake" / "pipeline.py").read_text(encoding="utf-8")
    assert '"mineru"' not in source and '"pymupdf"' not in source
    assert set(BACKENDS) == {"auto", *PARSERS}
    assert all(
        parser_version(name) == parser.version and f"{name}={parser.version}" in parse_code_version()
        for name, parser in PARSERS.items()
    )


FIRST_PARTY = ("paperlake", "agent", "assets", "orchestration", "cli")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def first_party_graph() -> dict[str, set[str]]:
    """module → the first-party modules it imports (lazy imports included, a package's own ``__init__`` not)."""
    modules = {_module_name(p): p for package in FIRST_PARTY for p in (REPO / package).rglob("*.py")}

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        return next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in modules), None)

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        found: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {resolve(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {resolve(f"{node.module}.{alias.name}") or resolve(node.module) for alias in node.names}
        graph[module] = {m for m in found if m and m != module and not module.startswith(m + ".")}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycle():
    """Not even one hidden by an import inside a function: a lazy import is still a dependency."""
    assert import_cycles(first_party_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def third_party_imports(path: Path) -> set[str]:
    """Every third-party dotted name a file imports (``from x.y import z`` gives x.y and x.y.z)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {n for n in names if n.split(".")[0] not in (*FIRST_PARTY, "__future__", "support", "schemas")}


def test_no_private_third_party_name_is_imported():
    """Dagster, dagster-dbt, dbt and every other library through their public names only: a name with a leading
    underscore (``dagster._core``) breaks on the next minor release and no maintainer would expect it."""
    offences = {}
    for package in FIRST_PARTY:
        for path in sorted((REPO / package).rglob("*.py")):
            private = sorted(n for n in third_party_imports(path) if any(p.startswith("_") for p in n.split(".")))
            if private:
                offences[str(path.relative_to(REPO))] = private
    assert not offences


def test_no_private_member_of_a_library_class_is_overridden():
    """A subclass of a third-party class overrides no ``_name`` (not a dunder) that the library's class has:
    overriding a private member (dagster-dbt's ``_cli_version``) breaks silently when the library changes it.
    sympy's printers are the one exception: ``_print_<Class>`` methods are how sympy documents extending one."""
    import importlib
    import inspect

    offences = []
    for package in FIRST_PARTY:
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            candidates = [
                (node.name, item.name)
                for node in ast.walk(tree)
                if isinstance(node, ast.ClassDef) and node.bases
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name.startswith("_")
                and not item.name.endswith("__")
                and not item.name.startswith("_print_")
            ]
            if not candidates:
                continue
            module = importlib.import_module(_module_name(path))
            for class_name, member in candidates:
                cls = getattr(module, class_name, None)
                if not inspect.isclass(cls):
                    continue
                libraries = [k for k in cls.__mro__[1:] if k.__module__.split(".")[0] not in FIRST_PARTY]
                if any(member in vars(k) for k in libraries):
                    offences.append(f"{path.relative_to(REPO)}: {class_name}.{member}")
    assert not offences


def undeferred_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each import inside a function whose (first) line has no ``# deferred: <reason>``."""
    lines = source.splitlines()
    imports = {
        node
        for function in ast.walk(ast.parse(source))
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Import | ast.ImportFrom)
    }
    return sorted(
        (node.lineno, getattr(node, "module", None) or ", ".join(alias.name for alias in node.names))
        for node in imports
        if not re.search(r"# deferred: \S", lines[node.lineno - 1])
    )


def test_an_import_inside_a_function_says_why():
    """An import inside a function only defers a heavy dependency (or one only an optional path needs), and its line
    says which: ``# deferred: torch``, ``# deferred: optional clip``. Every other import is at the module's top."""
    offenders = [
        f"{path.relative_to(REPO)}:{line} {module}"
        for package in FIRST_PARTY
        for path in sorted((REPO / package).rglob("*.py"))
        for line, module in undeferred_imports(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "imports inside functions without `# deferred: <reason>`:\n" + "\n".join(offenders)


def test_the_deferral_checker_reads_the_first_line():
    source = (
        "import json\n"
        "def f():\n"
        "    import torch  # deferred: torch\n"
        "    from sympy import (  # deferred: sympy\n"
        "        Symbol,\n"
        "    )\n"
        "    import re\n"
        "    class C:\n"
        "        def g(self):\n"
        "            from paperlake.config import (\n"
        "                Settings,  # deferred: cycle\n"
        "            )\n"
    )
    assert undeferred_imports(source) == [(7, "re"), (10, "paperlake.config")]


# What the code location must not import at load: every launched run and every multiprocess step imports it before
# its first event (benchmarks/location_import.py), and these only serve the bodies of some assets.
HEAVY_FOR_A_LOAD = ("sympy", "agent.run", "torch", "pymilvus", "openai", "sentence_transformers", "open_clip")


def test_the_code_location_loads_without_the_libraries_only_asset_bodies_use(dbt_manifest):
    probe = (
        "import json, sys\nimport orchestration.definitions\n"
        f"print(json.dumps([name for name in {HEAVY_FOR_A_LOAD!r} if name in sys.modules]))\n"
    )
    env = {**os.environ, "DAGSTER_DISABLE_TELEMETRY": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
