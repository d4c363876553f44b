"""Every stage an ``ingest_errors`` row can name is one the warehouse accepts.

The stages are written in many places (``IngestError``, ``ParseError``, ``Lake.record_error``); the dbt model's
``accepted_values`` test lists them once. A stage the list lacks passes every unit test and then fails the whole
warehouse build the first time a paper fails that way, so the list is checked against the code here, by reading it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
ERRORS = ("IngestError", "ParseError")


def _accepted_stages() -> set[str]:
    model = yaml.safe_load((ROOT / "dbt_project/models/marts/ingest_errors.yml").read_text(encoding="utf-8"))
    (column,) = [c for m in model["models"] for c in m["columns"] if c["name"] == "stage"]
    (test,) = [t["accepted_values"] for t in column["data_tests"] if isinstance(t, dict) and "accepted_values" in t]
    return set(test["arguments"]["values"])


def _strings_bound(name: str, scopes: list[ast.AST]) -> set[str]:
    """The string literals assigned to ``name`` in these scopes (a function's body, then its module's), either
    branch of ``a if c else b`` included."""
    found = set()
    for scope in scopes:
        for node in ast.walk(scope):
            if not isinstance(node, ast.Assign):
                continue
            if not any(isinstance(target, ast.Name) and target.id == name for target in node.targets):
                continue
            branches = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
            found |= {branch.value for branch in branches if isinstance(branch, ast.Constant)}
    return found


def _written_stages() -> dict[str, set[str]]:
    """stage → where the code writes it."""
    stages: dict[str, set[str]] = {}
    for path in sorted((ROOT / "paperlake").rglob("*.py")):
        module = ast.parse(path.read_text(encoding="utf-8"))
        functions = [node for node in ast.walk(module) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in ast.walk(module):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            values: list[ast.expr] = [kw.value for kw in node.keywords if kw.arg == "stage"]
            if name in ERRORS and len(node.args) >= 2:
                values.append(node.args[1])
            elif name != "record_error":
                values = []
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    literals = {value.value}
                elif isinstance(value, ast.Name):
                    around = [f for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)]
                    literals = _strings_bound(value.id, [*around, module])
                    assert literals, f"{path.name}:{node.lineno}: stage {value.id} is bound to no string literal"
                else:
                    continue  # passed through from another error (error.stage): checked where it was made
                for literal in literals:
                    stages.setdefault(literal, set()).add(f"{path.relative_to(ROOT)}:{node.lineno}")
    return stages


def test_every_stage_the_code_writes_is_accepted_by_the_warehouse():
    written = _written_stages()
    assert {"inbox", "manifest", "open", "mineru", "text layer", "latex"} <= set(written)  # the reading works
    missing = {stage: sorted(where) for stage, where in written.items() if stage not in _accepted_stages()}
    assert not missing, f"stages the dbt model's accepted_values lacks: {missing}"
