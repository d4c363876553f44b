"""The warehouse catalogue: tables, columns, types, descriptions and ``encodable`` flags.

The one source of truth is the dbt marts' YAML (``dbt_project/models/{marts,formulas}/*.yml``): dbt enforces those
column names and types as model contracts and documents them; this module reads the same files for the agent's map
of the data (its prompt) and for the vector layer (which cells to encode). Nothing here is written twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

MODELS_DIR = Path(__file__).resolve().parents[1] / "dbt_project" / "models"
MODEL_DIRS = (MODELS_DIR / "marts", MODELS_DIR / "formulas")
# The NeuSym-RAG tables first, in the order its prompts list them; then ours.
NEUSYM_TABLES = ("metadata", "pages", "sections", "chunks", "tables", "images", "equations", "reference")


@dataclass(frozen=True)
class Column:
    name: str
    data_type: str
    description: str = ""
    encodable: str | None = None  # "text" | "image" | None
    key: bool = False  # the table's primary key: a contract constraint DuckDB enforces as dbt writes the mart


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    columns: tuple[Column, ...]

    @property
    def primary_key(self) -> str:
        """The column the table's YAML declares its primary key; a table whose grain is several columns
        (formula_parameters, enrichment_errors) declares none and is named by its first column."""
        return next((c.name for c in self.columns if c.key), self.columns[0].name)

    def has(self, column: str) -> bool:
        return any(c.name == column for c in self.columns)

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(f"{self.name} has no column {name!r}")


# libyaml's parser where PyYAML was built with it (its wheels are): the same documents, several times faster
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@lru_cache(maxsize=4)
def catalogue(model_dirs: tuple[Path, ...] = MODEL_DIRS) -> tuple[Table, ...]:
    tables: dict[str, Table] = {}
    for path in sorted(p for d in model_dirs for p in d.glob("*.yml") if not p.name.startswith("_")):
        for model in yaml.load(path.read_text(), Loader=_YAML_LOADER).get("models", []):
            columns = tuple(
                Column(
                    c["name"],
                    c["data_type"],
                    c.get("description", ""),
                    (c.get("meta") or {}).get("encodable"),
                    any(constraint.get("type") == "primary_key" for constraint in c.get("constraints") or []),
                )
                for c in model.get("columns", [])
            )
            tables[model["name"]] = Table(model["name"], model.get("description", ""), columns)
    order = [name for name in NEUSYM_TABLES if name in tables] + sorted(set(tables) - set(NEUSYM_TABLES))
    return tuple(tables[name] for name in order)


@lru_cache(maxsize=1)
def declared_keys() -> dict[str, str]:
    """Table → the primary key its YAML declares, for the tables that declare one (not those of a composite grain)."""
    return {table.name: column.name for table in catalogue() for column in table.columns if column.key}


def table(name: str) -> Table:
    for candidate in catalogue():
        if candidate.name == name:
            return candidate
    raise KeyError(f"no warehouse table {name!r}")


def encodable_columns(kind: str | None = None) -> list[tuple[str, str, str]]:
    """``(table, column, kind)`` for every encodable column, optionally only one kind (text/image)."""
    return [
        (t.name, c.name, c.encodable)
        for t in catalogue()
        for c in t.columns
        if c.encodable and (kind is None or c.encodable == kind)
    ]
