"""One row of the lake view ``equations`` → one :class:`Formula` per equation it contains.

The row's LaTeX (``equation_latex``, else ``equation_text``) is split into equations, each converted to sympy,
templated and cross-checked when it is computable, and described from the text around it: ``context`` (the
sentences before, as the view provides) and, when the row carries it, ``context_after`` (papers mostly explain
symbols *after* a display equation, "where x is …"). A formula that cannot be computed still gets its symbols
described, a label and provenance, so it can be retrieved by meaning.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

import sympy
from sympy.core.function import AppliedUndef

from paperlake.formulas.canonical import canonical_key
from paperlake.formulas.constants import Constant, constants_defined_in, constants_in_expression, constants_in_latex
from paperlake.formulas.latex import (
    KNOWN_FUNCTION_WORDS,
    ConversionResult,
    normalise_latex,
    split_equations,
    symbols_in,
    to_sympy,
    vector_symbols,
)
from paperlake.formulas.model import Formula, Occurrence, Parameter, formula_id_for, occurrence_id_for
from paperlake.formulas.params import ParameterDescriber, describe_parameters, formula_label
from paperlake.formulas.template import TemplateError, build_template, check_proposed_template, cross_check

# ``(latex, context, why the rules refused it) -> {"output": name, "expression": python, "parameters": [names]}``;
# raises on an unusable answer. The proposal is checked by :func:`check_proposed_template` before it is kept.
TemplateProposer = Callable[[str, str, str], Mapping[str, Any]]

_INLINE_MATH = re.compile(r"\$([^$]+)\$")
# sympy can fail in many ways on odd trees (solve, expand, printing); a failure is recorded on the formula.
_SYMPY_ERRORS = (
    TypeError,
    ValueError,
    AttributeError,
    NotImplementedError,
    RecursionError,
    KeyError,
    IndexError,
    sympy.SympifyError,
    sympy.PolynomialError,
)


def formulas_from_equation(
    row: Mapping[str, Any], *, describer: ParameterDescriber | None = None, proposer: TemplateProposer | None = None
) -> list[Formula]:
    """All formulas of one display equation, each with one :class:`Occurrence` carrying the row's provenance."""
    latex = row.get("equation_latex") or row.get("equation_text") or ""
    before = row.get("context") or ""
    after = row.get("context_after") or ""
    context = f"{before} {after}".strip()
    known = _multi_letter_names(context)
    defined = [
        dataclasses.replace(constant, paper_id=str(row.get("paper_id", "")))
        for constant in constants_defined_in(context)
    ]
    parts = split_equations(latex) if latex.strip() else []
    vectors = vector_symbols(latex)  # normalising each part drops the bold
    formulas = []
    for part_index, part in enumerate(parts):
        occurrence = Occurrence(
            occurrence_id=occurrence_id_for(str(row["equation_id"]), part_index),
            equation_id=str(row["equation_id"]),
            paper_id=str(row.get("paper_id", "")),
            part=part_index,
            page_number=row.get("page_number"),
            bbox=list(row["bbox"]) if row.get("bbox") is not None else None,
            equation_number=row.get("equation_number"),
            section=row.get("section_title") or row.get("section"),
            context=context,
            latex=part,
        )
        formula = build_formula(
            part,
            occurrence,
            before=before,
            context=context,
            known_symbols=known,
            defined=defined,
            describer=describer,
            proposer=proposer,
            vectors=vectors,
        )
        if not row.get("equation_latex"):
            formula.notes.append("no LaTeX from the parser; converted the plain-text equation")
        formulas.append(formula)
    return formulas


def build_formula(
    latex: str,
    occurrence: Occurrence,
    *,
    before: str = "",
    context: str = "",
    known_symbols: frozenset[str] = frozenset(),
    defined: list[Constant] | None = None,
    describer: ParameterDescriber | None = None,
    proposer: TemplateProposer | None = None,
    vectors: frozenset[str] | None = None,
) -> Formula:
    """Convert, template, cross-check and describe one equation; LaTeX the rules reject goes to ``proposer``."""
    conversion = to_sympy(latex, known_symbols, vectors)
    formula = Formula(
        formula_id="",
        label="",
        latex=latex,
        normalised_latex=conversion.normalised,
        status="failed",
        reason=conversion.reason,
        conversion_step=conversion.step,
        notes=list(conversion.notes),
        occurrences=[occurrence],
    )
    formula.expr = conversion.expr
    if conversion.expr is not None:
        formula.sympy_str = str(conversion.expr)
        try:
            formula.canonical_key = canonical_key(conversion.expr)
        except _SYMPY_ERRORS as error:
            formula.notes.append(f"no canonical key: {type(error).__name__}: {error}")
    standard = (
        constants_in_expression(conversion.expr, context)
        if conversion.expr is not None
        else constants_in_latex(latex, context)
    )
    originals: dict[str, str] = {}
    if conversion.status == "parsed":
        originals = _template(formula, conversion, standard)
    else:
        formula.status = "not_computable" if conversion.status == "not_computable" else "failed"
        formula.reason = conversion.reason
        if formula.status == "failed" and proposer is not None:
            _proposed_template(formula, proposer, context)
    _describe(formula, conversion, originals, context, describer, defined or [])
    own_symbols = {originals.get(parameter.name, parameter.name) for parameter in formula.parameters}
    formula.constants = standard + [constant for constant in defined or [] if constant.name in own_symbols]
    formula.label = (
        conversion.label
        or formula_label(before)
        or _lhs_label(conversion)
        or (f"Equation {occurrence.equation_number}" if occurrence.equation_number else "Equation")
    )
    formula.units = {constant.name: constant.unit for constant in formula.constants if constant.unit}
    formula.formula_id = formula_id_for(formula.canonical_key, formula.normalised_latex)
    return formula


def _template(formula: Formula, conversion: ConversionResult, standard: list[Constant]) -> dict[str, str]:
    """Fill the template fields and the status; returns ``{parameter name: sympy symbol name}``."""
    constant_values = {constant.name: constant.value for constant in standard if constant.name not in ("pi", "e")}
    try:
        template = build_template(conversion.expr, constants=constant_values, indices=conversion.indices)
    except TemplateError as error:
        formula.status, formula.reason = "not_computable", str(error)
        return {}
    except _SYMPY_ERRORS as error:
        formula.status, formula.reason = "failed", f"template: {type(error).__name__}: {error}"
        return {}
    formula.template, formula.output = template.expression, template.output
    formula.template_constants = dict(template.constants)
    formula.parameters = [
        Parameter(name=name, latex_symbol=conversion.symbols.get(template.symbol_names[name], ""))
        for name in template.parameters
    ]
    formula.notes.extend(template.notes)
    try:
        mismatch = cross_check(template, conversion.expr, conversion.indices)
    except _SYMPY_ERRORS as error:
        mismatch = f"{type(error).__name__}: {error}"
    formula.status, formula.reason = ("validated", None) if mismatch is None else ("templated", None)
    if mismatch is not None:
        formula.notes.append(f"not cross-checked against sympy: {mismatch}")
    return dict(template.symbol_names)


def _proposed_template(formula: Formula, proposer: TemplateProposer, context: str) -> None:
    """The last step of the chain: a proposed template, kept only if it passes the same checks (else the reason)."""
    try:
        proposal = proposer(formula.latex, context, formula.reason or "")
        template = check_proposed_template(
            proposal.get("expression"),
            proposal.get("output"),
            proposal.get("parameters") or [],
            symbols_in(formula.latex),
        )
    except TemplateError as error:
        formula.notes.append(f"LLM template rejected: {error}")
        return
    except Exception as error:  # an unreachable endpoint or an unreadable answer: the formula keeps its reason
        formula.notes.append(f"LLM template unavailable: {type(error).__name__}: {error}")
        return
    symbols = symbols_in(formula.latex)
    formula.template, formula.output = template.expression, template.output
    formula.parameters = [Parameter(name=name, latex_symbol=symbols.get(name, "")) for name in template.parameters]
    formula.status, formula.conversion_step = "templated", "llm"
    formula.notes.append(f"rules refused the LaTeX ({formula.reason}); {template.notes[0]}")
    formula.reason = None


def _describe(
    formula: Formula,
    conversion: ConversionResult,
    originals: Mapping[str, str],
    context: str,
    describer: ParameterDescriber | None,
    defined: list[Constant],
) -> None:
    """Descriptions and defaults for the template's parameters, or for every symbol of a non-computable formula."""
    if not formula.parameters:
        names = conversion.symbols or symbols_in(formula.latex)
        output = _lhs_name(conversion)
        formula.parameters = [
            Parameter(name=name, latex_symbol=latex)
            for name, latex in names.items()
            if name != output and name not in KNOWN_FUNCTION_WORDS
        ]
    by_original = {originals.get(parameter.name, parameter.name): parameter for parameter in formula.parameters}
    descriptions = describe_parameters(
        by_original, context, formula_latex=formula.normalised_latex, describer=describer
    )
    values = {constant.name: constant for constant in defined}
    for original, parameter in by_original.items():
        parameter.description = descriptions.get(original, "")
        if original in values:
            parameter.default, parameter.unit = values[original].value, values[original].unit


def _lhs_name(conversion: ConversionResult) -> str | None:
    lhs = conversion.lhs
    if isinstance(lhs, sympy.Symbol):
        return lhs.name
    if isinstance(lhs, AppliedUndef):
        return lhs.func.__name__
    return None


def _lhs_label(conversion: ConversionResult) -> str | None:
    name = _lhs_name(conversion)
    return conversion.symbols.get(name, name) if name else None


def _multi_letter_names(context: str) -> frozenset[str]:
    """Acronym-like names the text writes in math (``$MI_{t}$``, ``$TEDS$``), to read italic letter runs.

    Only capital runs of three letters or more, or of two followed by a subscript: ``$QK^{T}$`` stays Q·K.
    """
    names = set()
    for span in _INLINE_MATH.findall(context):
        match = re.match(r"([A-Z]{2,})(_|$)", normalise_latex(span))
        if match and (len(match.group(1)) >= 3 or match.group(2) == "_"):
            names.add(match.group(1))
    return frozenset(names)
