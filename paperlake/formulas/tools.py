"""A computable formula as an agent tool: a name, a parameter schema, and a call that never raises.

The schema is JSON-schema-like so it drops into a function-calling prompt as is. A call checks that every
required parameter is present and numeric (booleans and strings are refused, so ``"3"`` is an error rather than
a silent conversion), fills parameters the paper fixed in its text when the caller leaves them out, injects
standard constants the template names, and evaluates through :func:`paperlake.runtime.safe_eval.safe_eval`. Whatever
goes wrong comes back as ``ToolResult(ok=False, error=…)`` with a message the agent can act on.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from paperlake.formulas.model import Formula
from paperlake.runtime.safe_eval import Number, SafeEvalError, safe_eval


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    value: Number | None = None
    error: str | None = None


@dataclass(frozen=True)
class FormulaTool:
    """Evaluates one formula's template; build it with :func:`build_tool`."""

    name: str
    description: str
    formula_id: str
    output: str
    expression: str
    parameter_schema: dict[str, Any]
    constants: dict[str, float]
    defaults: dict[str, float]

    def __call__(self, **arguments: Any) -> ToolResult:
        properties = self.parameter_schema["properties"]
        unknown = sorted(set(arguments) - set(properties))
        if unknown:
            return ToolResult(False, error=f"unknown parameter(s) {unknown}; this tool takes {sorted(properties)}")
        values = {**self.defaults, **arguments}
        missing = [name for name in self.parameter_schema["required"] if name not in values]
        if missing:
            return ToolResult(False, error=f"missing required parameter(s) {missing}")
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return ToolResult(
                    False, error=f"parameter {name!r} must be a number, got {type(value).__name__} {value!r}"
                )
            if not _finite(value):
                return ToolResult(
                    False,
                    error=f"parameter {name!r} must be finite (a number of magnitude at most "
                    f"1.8e308), got {_preview(value)}",
                )
        try:
            return ToolResult(True, value=safe_eval(self.expression, {**self.constants, **values}))
        except (SafeEvalError, ArithmeticError, ValueError) as error:
            return ToolResult(False, error=f"{self.output} = {self.expression} cannot be evaluated: {error}")


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond a float's range
        return False


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text)} characters)"


def tool_name(formula: Formula) -> str:
    """``<output>_<first 8 hex of the formula id>``: readable and unique (function-calling names are [A-Za-z0-9_])."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", formula.output or "value").strip("_") or "value"
    return f"{stem[:48]}_{formula.formula_id.replace('-', '')[:8]}"


def build_tool(formula: Formula) -> FormulaTool:
    """The tool of a computable formula; a formula that is not computable is refused with its reason."""
    if not formula.computable or not formula.template:
        raise ValueError(
            f"formula {formula.formula_id} ({formula.label!r}) is not computable: {formula.reason or formula.status}"
        )
    properties: dict[str, dict[str, Any]] = {}
    defaults: dict[str, float] = {}
    for parameter in formula.parameters:
        symbol = parameter.latex_symbol or parameter.name
        entry: dict[str, Any] = {"type": "number", "description": parameter.description or f"value of {symbol}"}
        if parameter.latex_symbol:
            entry["latex"] = parameter.latex_symbol
        if parameter.unit:
            entry["unit"] = parameter.unit
        if parameter.default is not None:
            entry["default"] = parameter.default
            defaults[parameter.name] = parameter.default
        properties[parameter.name] = entry
    schema = {
        "type": "object",
        "properties": properties,
        "required": [name for name in properties if name not in defaults],
        "additionalProperties": False,
    }
    description = f"{formula.label}: computes {formula.output} = {formula.template} (from {formula.normalised_latex})"
    return FormulaTool(
        name=tool_name(formula),
        description=description,
        formula_id=formula.formula_id,
        output=formula.output or "value",
        expression=formula.template,
        parameter_schema=schema,
        constants=dict(formula.template_constants),
        defaults=defaults,
    )
