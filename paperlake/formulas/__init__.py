"""The formula library: LaTeX → sympy → executable templates, canonical keys, the formula graph, RDF, agent tools.

Pure logic with no stores attached: the pipeline feeds :class:`FormulaGraph` rows of the lake view
``equations`` and writes :meth:`FormulaGraph.to_rows` to the warehouse; the agent turns computable formulas
into tools with :func:`build_tool`. Every evaluation goes through :func:`paperlake.runtime.safe_eval.safe_eval`.
"""

import importlib

# name → the module that defines it: imported on first use (PEP 562), so a light submodule (the graph's state,
# read by every ingest's check) does not pull sympy in through this package
_LAZY = {
    "STANDARD_CONSTANTS": "paperlake.formulas.constants",
    "AddReport": "paperlake.formulas.graph",
    "Constant": "paperlake.formulas.constants",
    "ConversionResult": "paperlake.formulas.latex",
    "Embedder": "paperlake.formulas.graph",
    "Formula": "paperlake.formulas.model",
    "FormulaGraph": "paperlake.formulas.graph",
    "FormulaTemplate": "paperlake.formulas.template",
    "FormulaTool": "paperlake.formulas.tools",
    "Judge": "paperlake.formulas.graph",
    "Occurrence": "paperlake.formulas.model",
    "Parameter": "paperlake.formulas.model",
    "ParameterDescriber": "paperlake.formulas.params",
    "Relation": "paperlake.formulas.model",
    "TemplateError": "paperlake.formulas.template",
    "ToolResult": "paperlake.formulas.tools",
    "build_formula": "paperlake.formulas.extract",
    "build_template": "paperlake.formulas.template",
    "build_tool": "paperlake.formulas.tools",
    "canonical_key": "paperlake.formulas.canonical",
    "composite_description": "paperlake.formulas.canonical",
    "constants_defined_in": "paperlake.formulas.constants",
    "constants_in_expression": "paperlake.formulas.constants",
    "constants_in_latex": "paperlake.formulas.constants",
    "cross_check": "paperlake.formulas.template",
    "describe_parameters": "paperlake.formulas.params",
    "formula_label": "paperlake.formulas.params",
    "formulas_from_equation": "paperlake.formulas.extract",
    "formulas_using_constant": "paperlake.formulas.rdf",
    "normalise_latex": "paperlake.formulas.latex",
    "not_computable_reason": "paperlake.formulas.latex",
    "split_equations": "paperlake.formulas.latex",
    "split_lhs_rhs": "paperlake.formulas.latex",
    "split_relations": "paperlake.formulas.latex",
    "symbol_correspondence": "paperlake.formulas.canonical",
    "symbol_name": "paperlake.formulas.latex",
    "symbols_in": "paperlake.formulas.latex",
    "to_rdf": "paperlake.formulas.rdf",
    "to_sympy": "paperlake.formulas.latex",
    "to_turtle": "paperlake.formulas.rdf",
}


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


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


def agent_backend(warehouse, milvus_uri=None):  # the agent's optional formula layer
    from paperlake.formulas.store import agent_backend as backend  # deferred: sympy

    return backend(warehouse, milvus_uri)
