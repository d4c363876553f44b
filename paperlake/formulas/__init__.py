"""The formula library: LaTeX → sympy → executable templates, canonical keys, the formula graph, RDF, agent tools.

Pure logic with no stores attached: the pipeline feeds :class:`FormulaGraph` rows of the lake view
``equations`` and writes :meth:`FormulaGraph.to_rows` to the warehouse; the agent turns computable formulas
into tools with :func:`build_tool`. Every evaluation goes through :func:`paperlake.runtime.safe_eval.safe_eval`.
"""

from paperlake.formulas.canonical import canonical_key, composite_description, symbol_correspondence
from paperlake.formulas.constants import (
    STANDARD_CONSTANTS,
    Constant,
    constants_defined_in,
    constants_in_expression,
    constants_in_latex,
)
from paperlake.formulas.extract import build_formula, formulas_from_equation
from paperlake.formulas.graph import AddReport, Embedder, FormulaGraph, Judge
from paperlake.formulas.latex import (
    ConversionResult,
    normalise_latex,
    not_computable_reason,
    split_equations,
    split_lhs_rhs,
    split_relations,
    symbol_name,
    symbols_in,
    to_sympy,
)
from paperlake.formulas.model import Formula, Occurrence, Parameter, Relation
from paperlake.formulas.params import ParameterDescriber, describe_parameters, formula_label
from paperlake.formulas.rdf import formulas_using_constant, to_rdf, to_turtle
from paperlake.formulas.template import FormulaTemplate, TemplateError, build_template, cross_check
from paperlake.formulas.tools import FormulaTool, ToolResult, build_tool

__all__ = [
    "STANDARD_CONSTANTS",
    "AddReport",
    "Constant",
    "ConversionResult",
    "Embedder",
    "Formula",
    "FormulaGraph",
    "FormulaTemplate",
    "FormulaTool",
    "Judge",
    "Occurrence",
    "Parameter",
    "ParameterDescriber",
    "Relation",
    "TemplateError",
    "ToolResult",
    "build_formula",
    "build_template",
    "build_tool",
    "canonical_key",
    "composite_description",
    "constants_defined_in",
    "constants_in_expression",
    "constants_in_latex",
    "cross_check",
    "describe_parameters",
    "formula_label",
    "formulas_from_equation",
    "formulas_using_constant",
    "normalise_latex",
    "not_computable_reason",
    "split_equations",
    "split_lhs_rhs",
    "split_relations",
    "symbol_correspondence",
    "symbol_name",
    "symbols_in",
    "to_rdf",
    "to_sympy",
    "to_turtle",
]


def agent_backend(warehouse, milvus_uri=None):  # the agent's optional formula layer
    from paperlake.formulas.store import agent_backend as backend

    return backend(warehouse, milvus_uri)
