"""The formula graph: one entity per formula across papers, with provenance, constants and relations.

:meth:`FormulaGraph.add_equations` is incremental: each new formula is compared only with what the graph
already holds, in this order —

1. the same formula id (same canonical key, or the same normalised LaTeX when it did not parse) → merge;
2. with an ``embed`` callable, cosine similarity of :func:`~paperlake.formulas.canonical.composite_description`
   texts against formulas from *other* papers (within one paper, successive steps of a derivation share their
   context and look alike to an embedding; a formula restated in the same paper is caught by step 1):
   ``≥ merge_threshold`` (0.9) → merge; ``[judge_threshold, merge_threshold)`` (0.8) → ``judge(new, existing)``
   decides when given, otherwise both stay and each gets a ``possibly_same`` note. When both formulas parsed
   and their canonical keys differ, the structure has already said "different": the embedding alone never
   merges them, it can only send the pair to the judge (or to a note).

Relations: ``uses_constant`` (formula → constant), ``same_as`` (an occurrence in one paper → the first
occurrence of the same formula in another paper, with how they were matched), ``derived_from`` (formula B uses
the quantity formula A defines, within one paper), ``specializes`` (B's right-hand side is A's with some symbols
replaced by numbers or expressions).

:meth:`FormulaGraph.to_rows` gives the tables ``formulas``, ``formula_parameters``, ``constants``,
``formula_occurrences`` and ``formula_relations``; :meth:`FormulaGraph.from_rows` rebuilds a graph from them
(sympy expressions are re-derived from the stored LaTeX, never evaluated from stored text), so a pipeline can
add one paper at a time.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from paperlake.formulas.canonical import composite_description, symbol_correspondence
from paperlake.formulas.constants import Constant
from paperlake.formulas.extract import TemplateProposer, formulas_from_equation
from paperlake.formulas.latex import to_sympy
from paperlake.formulas.model import (
    Formula,
    Occurrence,
    Parameter,
    Relation,
    constant_id_for,
)
from paperlake.formulas.params import ParameterDescriber

logger = logging.getLogger(__name__)

Embedder = Callable[[list[str]], np.ndarray]
Judge = Callable[[Formula, Formula], bool]
MAX_UNIFICATION_STEPS = 5000


@dataclass
class AddReport:
    """What one :meth:`FormulaGraph.add_equations` call did."""

    equations: int = 0
    formulas_seen: int = 0
    added: int = 0
    merged: dict[str, int] = field(default_factory=dict)
    unchanged: int = 0
    possibly_same: int = 0
    errors: list[str] = field(default_factory=list)


class FormulaGraph:
    """Formulas, constants and relations, built incrementally from rows of the ``equations`` view."""

    def __init__(
        self,
        *,
        merge_threshold: float = 0.9,
        judge_threshold: float = 0.8,
        describer: ParameterDescriber | None = None,
        proposer: TemplateProposer | None = None,
    ):
        self.merge_threshold = merge_threshold
        self.judge_threshold = judge_threshold
        self.describer = describer
        self.proposer = proposer
        self.formulas: dict[str, Formula] = {}
        self.relations: dict[str, Relation] = {}
        self._embeddings: dict[str, np.ndarray] = {}
        self._owners: dict[str, str] | None = None  # occurrence id → formula id; None: rebuilt when next needed

    # ------------------------------------------------------------------------------------------ building

    def add_equations(
        self, rows: Iterable[Mapping[str, Any]], embed: Embedder | None = None, judge: Judge | None = None
    ) -> AddReport:
        """Add every formula of ``rows``; one bad equation is reported, never fatal to the others.

        An equation already in the graph (same occurrence id) counts as ``unchanged``; to re-ingest a paper whose
        equations changed, call :meth:`remove_paper` first.
        """
        report = AddReport()
        candidates: list[Formula] = []
        for row in rows:
            report.equations += 1
            try:
                candidates.extend(formulas_from_equation(row, describer=self.describer, proposer=self.proposer))
            except Exception as error:  # one malformed row must not take the paper's other equations down
                message = (
                    f"paper {row.get('paper_id')} equation {row.get('equation_id')}: formula extraction "
                    f"failed: {type(error).__name__}: {error}"
                )
                logger.warning(message)
                report.errors.append(message)
        report.formulas_seen = len(candidates)
        vectors: list[np.ndarray | None] = [None] * len(candidates)
        if embed is not None and candidates:
            self._embed(
                [formula for formula in self.formulas.values() if formula.formula_id not in self._embeddings], embed
            )
            vectors = list(_normalised(embed([composite_description(formula) for formula in candidates])))
        touched: list[Formula] = []
        for candidate, vector in zip(candidates, vectors):
            entity, method = self._place(candidate, vector, judge, report)
            if method == "new":
                report.added += 1
            elif method == "unchanged":
                report.unchanged += 1
            else:
                report.merged[method] = report.merged.get(method, 0) + 1
            if entity not in touched:
                touched.append(entity)
        for formula in touched:
            self._relate(formula)
        return report

    def _place(
        self, candidate: Formula, vector: np.ndarray | None, judge: Judge | None, report: AddReport
    ) -> tuple[Formula, str]:
        occurrence = candidate.occurrences[0]
        known = self._owner_of(occurrence.occurrence_id)
        if known is not None:
            return known, "unchanged"
        existing = self.formulas.get(candidate.formula_id)
        if existing is not None:
            method = "canonical_key" if candidate.canonical_key else "normalised_latex"
            self._merge(existing, candidate, method, None)
            return existing, method
        if vector is not None:
            match = self._nearest(candidate, vector)
            if match is not None:
                other, score = match
                structurally_different = bool(candidate.canonical_key and other.canonical_key)
                if score >= self.merge_threshold and not structurally_different:
                    self._merge(other, candidate, "embedding", score)
                    return other, "embedding"
                if score >= self.judge_threshold:
                    if judge is not None and judge(candidate, other):
                        self._merge(other, candidate, "judge", score)
                        return other, "judge"
                    candidate.notes.append(f"possibly_same:{other.formula_id} cosine={score:.3f}")
                    other.notes.append(f"possibly_same:{candidate.formula_id} cosine={score:.3f}")
                    report.possibly_same += 1
            self._embeddings[candidate.formula_id] = vector
        occurrence.matched_by = "new"
        self.formulas[candidate.formula_id] = candidate
        if self._owners is not None:
            self._owners[occurrence.occurrence_id] = candidate.formula_id
        return candidate, "new"

    def _nearest(self, candidate: Formula, vector: np.ndarray) -> tuple[Formula, float] | None:
        papers = set(candidate.paper_ids)
        best: tuple[Formula, float] | None = None
        for formula_id, other_vector in self._embeddings.items():
            other = self.formulas[formula_id]
            if papers & set(other.paper_ids):
                continue
            score = float(np.dot(vector, other_vector))
            if best is None or score > best[1]:
                best = (other, score)
        return best

    def _embed(self, formulas: Sequence[Formula], embed: Embedder) -> None:
        if formulas:
            vectors = _normalised(embed([composite_description(formula) for formula in formulas]))
            self._embeddings.update({formula.formula_id: vector for formula, vector in zip(formulas, vectors)})

    def _merge(self, entity: Formula, candidate: Formula, method: str, score: float | None) -> None:
        """Keep the entity, add the candidate's occurrence with how it matched, fill what the entity lacks."""
        occurrence = candidate.occurrences[0]
        occurrence.matched_by, occurrence.similarity = method, score
        if method == "canonical_key" and entity.expr is not None and candidate.expr is not None:
            occurrence.symbol_map = _symbol_map(candidate.expr, entity.expr)
        entity.occurrences.append(occurrence)
        if self._owners is not None:
            self._owners[occurrence.occurrence_id] = entity.formula_id
        self._link_occurrence(entity, len(entity.occurrences) - 1)
        for parameter in candidate.parameters:
            target = entity.parameter(occurrence.symbol_map.get(parameter.name, parameter.name))
            if target is not None and not target.description and parameter.description:
                target.description = parameter.description
            if target is not None and target.default is None and parameter.default is not None:
                target.default, target.unit = parameter.default, parameter.unit
        known_constants = {constant_id_for(constant) for constant in entity.constants}
        entity.constants.extend(
            constant for constant in candidate.constants if constant_id_for(constant) not in known_constants
        )

    # ----------------------------------------------------------------------------------------- relations

    def _add(self, relation: Relation) -> None:
        self.relations[relation.relation_id] = relation

    def _owner_of(self, occurrence_id: str) -> Formula | None:
        """The formula holding an occurrence, from an index kept beside the formulas (a scan of every occurrence
        per candidate made adding a paper grow with the whole graph)."""
        if self._owners is None:
            self._owners = {
                occurrence.occurrence_id: formula.formula_id
                for formula in self.formulas.values()
                for occurrence in formula.occurrences
            }
        formula_id = self._owners.get(occurrence_id)
        return self.formulas.get(formula_id) if formula_id is not None else None

    def _relink_same_as(self, formulas: list[Formula]) -> None:
        """Each occurrence of ``formulas`` → its formula's earliest occurrence in another paper, with how it was
        matched: their same_as relations dropped in one pass over the relations, then made again."""
        own = {occurrence.occurrence_id for formula in formulas for occurrence in formula.occurrences}
        if own:
            for relation_id, relation in list(self.relations.items()):
                if relation.type == "same_as" and (relation.source in own or relation.target in own):
                    del self.relations[relation_id]
        for formula in formulas:
            for position in range(len(formula.occurrences)):
                self._link_occurrence(formula, position)

    def _link_occurrence(self, formula: Formula, position: int) -> None:
        """The same_as relation of one occurrence: to the formula's earliest occurrence in another paper. Appending
        an occurrence leaves the earlier ones' relations as they are, so a merge adds just this one."""
        occurrence = formula.occurrences[position]
        earlier = next(
            (known for known in formula.occurrences[:position] if known.paper_id != occurrence.paper_id), None
        )
        if earlier is not None:
            evidence = (
                occurrence.matched_by
                if occurrence.similarity is None
                else f"{occurrence.matched_by} cosine={occurrence.similarity:.3f}"
            )
            self._add(Relation(occurrence.occurrence_id, earlier.occurrence_id, "same_as", evidence))

    def _relate(self, formula: Formula) -> None:
        for constant in formula.constants:
            self._add(
                Relation(
                    formula.formula_id, constant_id_for(constant), "uses_constant", constant.evidence or constant.source
                )
            )
        for other in self.formulas.values():
            if other.formula_id == formula.formula_id:
                continue
            for source, target in ((formula, other), (other, formula)):
                uses = _uses_quantity(source, target)
                if uses:
                    self._add(Relation(source.formula_id, target.formula_id, "derived_from", uses))
                special = _specializes(source, target)
                if special:
                    self._add(Relation(source.formula_id, target.formula_id, "specializes", special))

    # -------------------------------------------------------------------------------------------- removal

    def remove_paper(self, paper_id: str) -> int:
        """Drop the paper's occurrences, then formulas left with none and every relation that pointed at them."""
        return self.remove_papers([paper_id])

    def remove_papers(self, paper_ids: Iterable[str]) -> int:
        """:meth:`remove_paper` for several papers in one pass over the formulas and the relations (a pass per paper
        made rebuilding a 2,000-paper graph quadratic). Returns how many formulas left the graph."""
        papers = set(paper_ids)
        if not papers:
            return 0
        removed_occurrences: set[str] = set()
        removed_formulas: list[str] = []
        relink: list[Formula] = []
        self._owners = None
        for formula in list(self.formulas.values()):
            kept = [occurrence for occurrence in formula.occurrences if occurrence.paper_id not in papers]
            if len(kept) == len(formula.occurrences):
                continue
            removed_occurrences |= {
                occurrence.occurrence_id for occurrence in formula.occurrences if occurrence.paper_id in papers
            }
            formula.occurrences = kept
            formula.constants = [constant for constant in formula.constants if constant.paper_id not in papers]
            self._embeddings.pop(formula.formula_id, None)  # its description may have changed
            if kept:
                relink.append(formula)
            else:
                removed_formulas.append(formula.formula_id)
                del self.formulas[formula.formula_id]
        self._relink_same_as(relink)
        gone = removed_occurrences | set(removed_formulas)
        for relation_id, relation in list(self.relations.items()):
            if (
                relation.source in gone
                or relation.target in gone
                or (relation.type == "derived_from" and not _share_paper(relation, self.formulas))
            ):
                del self.relations[relation_id]
        live_constants = {
            constant_id_for(constant) for formula in self.formulas.values() for constant in formula.constants
        }
        for relation_id, relation in list(self.relations.items()):
            if relation.type == "uses_constant" and relation.target not in live_constants:
                del self.relations[relation_id]
        return len(removed_formulas)

    # --------------------------------------------------------------------------------------------- tables

    def constants(self) -> dict[str, Constant]:
        return {
            constant_id_for(constant): constant for formula in self.formulas.values() for constant in formula.constants
        }

    def to_rows(self) -> dict[str, list[dict[str, Any]]]:
        """Row dicts for the tables formulas, formula_parameters, constants, formula_occurrences and
        formula_relations (dict-valued fields as JSON strings, so every column has one Parquet type)."""
        formulas, parameters, occurrences = [], [], []
        for formula in sorted(self.formulas.values(), key=lambda item: item.formula_id):
            formulas.append(
                {
                    "formula_id": formula.formula_id,
                    "label": formula.label,
                    "latex": formula.latex,
                    "normalised_latex": formula.normalised_latex,
                    "sympy_str": formula.sympy_str,
                    "template": formula.template,
                    "output": formula.output,
                    "status": formula.status,
                    "reason": formula.reason,
                    "canonical_key": formula.canonical_key,
                    "conversion_step": formula.conversion_step,
                    "units": json.dumps(formula.units, sort_keys=True),
                    "template_constants": json.dumps(formula.template_constants, sort_keys=True),
                    "notes": list(formula.notes),
                    "paper_ids": formula.paper_ids,
                    "occurrence_count": len(formula.occurrences),
                    "description": composite_description(formula),
                }
            )
            for position, parameter in enumerate(formula.parameters):
                parameters.append(
                    {
                        "formula_id": formula.formula_id,
                        "position": position,
                        "name": parameter.name,
                        "latex_symbol": parameter.latex_symbol,
                        "description": parameter.description,
                        "default_value": parameter.default,
                        "unit": parameter.unit,
                    }
                )
            for occurrence in formula.occurrences:
                occurrences.append(
                    {
                        "occurrence_id": occurrence.occurrence_id,
                        "formula_id": formula.formula_id,
                        "equation_id": occurrence.equation_id,
                        "paper_id": occurrence.paper_id,
                        "part": occurrence.part,
                        "page_number": occurrence.page_number,
                        "bbox": occurrence.bbox,
                        "equation_number": occurrence.equation_number,
                        "section": occurrence.section,
                        "context": occurrence.context,
                        "latex": occurrence.latex,
                        "symbol_map": json.dumps(occurrence.symbol_map, sort_keys=True),
                        "matched_by": occurrence.matched_by,
                        "similarity": occurrence.similarity,
                    }
                )
        constants = [
            {
                "constant_id": constant_id,
                "name": constant.name,
                "value": constant.value,
                "unit": constant.unit,
                "description": constant.description,
                "latex": constant.latex,
                "source": constant.source,
                "evidence": constant.evidence,
                "paper_id": constant.paper_id or None,
            }
            for constant_id, constant in sorted(self.constants().items())
        ]
        relations = [
            {
                "relation_id": relation_id,
                "source": relation.source,
                "target": relation.target,
                "relation_type": relation.type,
                "evidence": relation.evidence,
            }
            for relation_id, relation in sorted(self.relations.items())
        ]
        return {
            "formulas": formulas,
            "formula_parameters": parameters,
            "constants": constants,
            "formula_occurrences": occurrences,
            "formula_relations": relations,
        }

    @classmethod
    def from_rows(cls, tables: Mapping[str, Sequence[Mapping[str, Any]]], **options: Any) -> FormulaGraph:
        """Rebuild a graph written by :meth:`to_rows`; sympy expressions are re-derived from the LaTeX."""
        graph = cls(**options)
        constants_by_id = {
            row["constant_id"]: Constant(
                name=row["name"],
                value=row["value"],
                unit=row["unit"] or "",
                description=row["description"] or "",
                latex=row["latex"] or "",
                source=row["source"],
                evidence=row["evidence"] or "",
                paper_id=row["paper_id"] or "",
            )
            for row in tables.get("constants", [])
        }
        for row in tables.get("formulas", []):
            formula = Formula(
                formula_id=row["formula_id"],
                label=row["label"],
                latex=row["latex"],
                normalised_latex=row["normalised_latex"],
                status=row["status"],
                reason=row["reason"],
                sympy_str=row["sympy_str"],
                template=row["template"],
                output=row["output"],
                canonical_key=row["canonical_key"],
                conversion_step=row["conversion_step"],
                units=json.loads(row["units"] or "{}"),
                notes=list(row["notes"] or []),
                template_constants=json.loads(row["template_constants"] or "{}"),
            )
            if formula.sympy_str is not None:
                formula.expr = to_sympy(formula.normalised_latex).expr
            graph.formulas[formula.formula_id] = formula
        for row in sorted(tables.get("formula_parameters", []), key=lambda item: item["position"]):
            graph.formulas[row["formula_id"]].parameters.append(
                Parameter(
                    name=row["name"],
                    latex_symbol=row["latex_symbol"] or "",
                    description=row["description"] or "",
                    default=row["default_value"],
                    unit=row["unit"] or "",
                )
            )
        for row in tables.get("formula_occurrences", []):
            graph.formulas[row["formula_id"]].occurrences.append(
                Occurrence(
                    occurrence_id=row["occurrence_id"],
                    equation_id=row["equation_id"],
                    paper_id=row["paper_id"],
                    part=row["part"],
                    page_number=row["page_number"],
                    bbox=list(row["bbox"]) if row["bbox"] is not None else None,
                    equation_number=row["equation_number"],
                    section=row["section"],
                    context=row["context"] or "",
                    latex=row["latex"] or "",
                    symbol_map=json.loads(row["symbol_map"] or "{}"),
                    matched_by=row["matched_by"],
                    similarity=row["similarity"],
                )
            )
        for row in tables.get("formula_relations", []):
            relation = Relation(row["source"], row["target"], row["relation_type"], row["evidence"] or "")
            graph.relations[relation.relation_id] = relation
            if relation.type == "uses_constant" and relation.target in constants_by_id:
                formula = graph.formulas.get(relation.source)
                constant = constants_by_id[relation.target]
                if formula is not None and constant not in formula.constants:
                    formula.constants.append(constant)
        return graph


def _normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _symbol_map(candidate: sympy.Basic, entity: sympy.Basic) -> dict[str, str]:
    """The candidate's symbol names → the entity's, through their shared canonical names."""
    ours = symbol_correspondence(candidate)
    theirs = {canonical: name for name, canonical in symbol_correspondence(entity).items()}
    return {name: theirs[canonical] for name, canonical in ours.items() if canonical in theirs}


def _share_paper(relation: Relation, formulas: Mapping[str, Formula]) -> bool:
    source, target = formulas.get(relation.source), formulas.get(relation.target)
    return bool(source and target and set(source.paper_ids) & set(target.paper_ids))


def _defined_name(formula: Formula) -> str | None:
    """The quantity a formula defines (its left-hand side), if it is a definition."""
    expr = formula.expr
    if isinstance(expr, sympy.Equality) and isinstance(expr.lhs, sympy.Symbol):
        return expr.lhs.name
    return None


def _used_names(formula: Formula) -> set[str]:
    expr = formula.expr
    if isinstance(expr, sympy.Equality):
        return {symbol.name for symbol in expr.rhs.free_symbols}
    if expr is not None:
        return {symbol.name for symbol in expr.free_symbols}
    return set()


def _uses_quantity(user: Formula, definer: Formula) -> str:
    """Evidence that ``user`` is derived from ``definer`` (it uses what ``definer`` defines, same paper)."""
    name = _defined_name(definer)
    if not name or name == _defined_name(user) or not set(user.paper_ids) & set(definer.paper_ids):
        return ""
    return f"uses {name}, defined by the other formula" if name in _used_names(user) else ""


def _specializes(special: Formula, general: Formula) -> str:
    """Evidence that ``special``'s right-hand side is ``general``'s with symbols replaced by values."""
    if not (isinstance(special.expr, sympy.Equality) and isinstance(general.expr, sympy.Equality)):
        return ""
    pattern, target = general.expr.rhs, special.expr.rhs
    variables = pattern.free_symbols
    if len(variables) < 2 or pattern.has(sympy.Sum, sympy.Product) or pattern == target:
        return ""
    values = _instance_of(pattern, target, variables)
    if not values or not all(value.is_Symbol or value.is_Number for value in values.values()):
        return ""  # only symbols fixed to numbers make a special case; any sum "specializes" a + b otherwise
    if all(value.is_Symbol for value in values.values()) or any(value in (0, 1) for value in values.values()):
        return ""
    if pattern.xreplace(values) != target:
        return ""
    fixed = ", ".join(
        f"{symbol.name}={value}" for symbol, value in sorted(values.items(), key=str) if not value.is_Symbol
    )
    return f"the general form with {fixed}"


def _instance_of(
    pattern: sympy.Basic, target: sympy.Basic, variables: set[sympy.Basic], budget: int = MAX_UNIFICATION_STEPS
) -> dict[sympy.Basic, sympy.Basic] | None:
    """A substitution of ``variables`` that turns ``pattern`` into ``target`` node for node, or None.

    Our own bounded unifier (sympy's ``match`` explodes combinatorially on products of many factors):
    commutative arguments are paired by backtracking, and the whole search stops after ``budget`` steps.
    """
    steps = [0]

    def unify(left: sympy.Basic, right: sympy.Basic, binding: dict) -> dict | None:
        steps[0] += 1
        if steps[0] > budget:
            return None
        if left in variables:
            if left in binding:
                return binding if binding[left] == right else None
            return {**binding, left: right}
        if left.is_Atom or right.is_Atom:
            return binding if left == right else None
        if left.func != right.func or len(left.args) != len(right.args):
            return None
        if isinstance(left, (sympy.Add, sympy.Mul)):
            return pair(list(left.args), list(right.args), binding)
        for left_argument, right_argument in zip(left.args, right.args):
            binding = unify(left_argument, right_argument, binding)
            if binding is None:
                return None
        return binding

    def pair(lefts: list, rights: list, binding: dict) -> dict | None:
        if not lefts:
            return binding
        for position, right in enumerate(rights):
            attempt = unify(lefts[0], right, binding)
            if attempt is not None:
                rest = pair(lefts[1:], rights[:position] + rights[position + 1 :], attempt)
                if rest is not None:
                    return rest
        return None

    return unify(pattern, target, {})
