"""The formula graph's records: formulas, their parameters and occurrences, constants and relations.

A :class:`Formula` is one mathematical entity however many papers write it; each place it was written is an
:class:`Occurrence` that keeps the full provenance (equation, paper, page, box, number, section, context, the
LaTeX as written there and how the occurrence was matched to the entity). Ids are uuid5 of stable names, so
rebuilding the graph from the same equations gives the same ids.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal

import sympy

from paperlake.formulas.constants import Constant

FormulaStatus = Literal["templated", "validated", "not_computable", "failed"]
RelationType = Literal["uses_constant", "same_as", "derived_from", "specializes"]
MatchMethod = Literal["new", "canonical_key", "normalised_latex", "embedding", "judge"]
COMPUTABLE: frozenset[str] = frozenset({"templated", "validated"})


def _uuid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, name))


def formula_id_for(canonical_key: str | None, normalised_latex: str) -> str:
    """uuid5 of the canonical key when the formula parsed, else of its normalised LaTeX."""
    if canonical_key:
        return _uuid(f"formula_key_{canonical_key}")
    return _uuid(f"formula_latex_{normalised_latex}")


def occurrence_id_for(equation_id: str, part: int) -> str:
    """One occurrence per row of a display equation (``part`` numbers the rows from 0)."""
    return _uuid(f"{equation_id}_formula_part_{part}")


def constant_id_for(constant: Constant) -> str:
    """Standard constants have one id; a value fixed in a paper's text is that paper's (provenance)."""
    return _uuid(f"constant_{constant.name}_{constant.value!r}_{constant.unit}_{constant.source}_{constant.paper_id}")


@dataclass
class Parameter:
    """A value the caller supplies; ``default`` when the paper fixes it in the text."""

    name: str
    latex_symbol: str = ""
    description: str = ""
    default: float | None = None
    unit: str = ""


@dataclass
class Occurrence:
    occurrence_id: str
    equation_id: str
    paper_id: str
    part: int = 0
    page_number: int | None = None
    bbox: list[float] | None = None
    equation_number: str | None = None
    section: str | None = None
    context: str = ""
    latex: str = ""
    symbol_map: dict[str, str] = field(default_factory=dict)
    matched_by: MatchMethod = "new"
    similarity: float | None = None


@dataclass
class Formula:
    formula_id: str
    label: str
    latex: str
    normalised_latex: str
    status: FormulaStatus
    reason: str | None = None
    sympy_str: str | None = None
    template: str | None = None
    output: str | None = None
    parameters: list[Parameter] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)
    occurrences: list[Occurrence] = field(default_factory=list)
    canonical_key: str | None = None
    conversion_step: str | None = None
    notes: list[str] = field(default_factory=list)
    expr: sympy.Basic | None = field(default=None, repr=False, compare=False)
    template_constants: dict[str, float] = field(default_factory=dict)

    @property
    def computable(self) -> bool:
        return self.status in COMPUTABLE

    @property
    def paper_ids(self) -> list[str]:
        return sorted({occurrence.paper_id for occurrence in self.occurrences})

    def parameter(self, name: str) -> Parameter | None:
        return next((parameter for parameter in self.parameters if parameter.name == name), None)


@dataclass(frozen=True)
class Relation:
    """``source`` → ``target``: formula → constant (uses_constant), occurrence → occurrence (same_as),
    formula → formula (derived_from, specializes)."""

    source: str
    target: str
    type: RelationType
    evidence: str = ""

    @property
    def relation_id(self) -> str:
        return _uuid(f"relation_{self.type}_{self.source}_{self.target}")
