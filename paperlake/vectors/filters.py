"""Validation of the boolean filters an agent (or a person) passes to vector search.

Only the entity fields an agent may filter on are allowed, with Milvus' boolean syntax: ``== != < > <= >=``,
``in [...]`` / ``not in [...]``, ``like`` on string fields (``%`` any run of characters, ``_`` one character),
``and or not`` (also ``&& || !``), parentheses, string and 64-bit integer literals. A bad filter raises
:class:`FilterError` whose one-line message says what is wrong and how to write it, before Milvus sees it.
The validated filter is returned normalised (lower-case keywords, double-quoted strings).

Hostile input is refused, not crashed on: the text is capped at ``MAX_FILTER_CHARS`` and nesting (parentheses and
``not``) at ``MAX_FILTER_DEPTH``, well inside what Milvus' own expression parser survives (nested
parentheses: Milvus Lite failed between 100 and 150), so the recursive reader below never gets deep either. A
``like`` pattern keeps at most ``MAX_LIKE_WILDCARDS`` ``%`` (runs of ``%`` count as one): a pattern of thousands of
``%`` hung Milvus Lite's regex matcher.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass

FIELD_TYPES: dict[str, type] = {
    "pdf_id": str,
    "page_number": int,
    "table_name": str,
    "column_name": str,
    "primary_key": str,
}

OPERATORS = ("==", "!=", "<", ">", "<=", ">=", "in", "not in", "like", "and", "or", "not", "(", ")")
MAX_FILTER_CHARS = 4000
MAX_FILTER_DEPTH = 32
MAX_LIKE_WILDCARDS = 2  # Milvus Lite matches `like` with a backtracking regex: each % multiplies the work per row
_INT64 = (-(2**63), 2**63 - 1)
_MAX_NUMBER_CHARS = 40
_SHOWN_CHARS = 80

_ALIASES = {
    "paper_id": "pdf_id",
    "ref_paper_id": "pdf_id",
    "paper": "pdf_id",
    "pdf": "pdf_id",
    "doc_id": "pdf_id",
    "document_id": "pdf_id",
    "paperid": "pdf_id",
    "pdfid": "pdf_id",
    "page": "page_number",
    "page_no": "page_number",
    "page_num": "page_number",
    "pagenumber": "page_number",
    "page_id": "page_number",
    "ref_page_id": "page_number",
    "pages": "page_number",
    "table": "table_name",
    "tablename": "table_name",
    "column": "column_name",
    "columnname": "column_name",
    "id": "primary_key",
    "row_id": "primary_key",
    "pk": "primary_key",
    "key": "primary_key",
}


class FilterError(ValueError):
    """A filter that would fail (or silently mismatch) in Milvus; the message carries a hint."""

    def __init__(self, problem: str, hint: str = "", expression: str = ""):
        self.problem = _one_line(problem)
        self.hint = _one_line(hint)
        self.expression = expression
        message = f"{self.problem} — {self.hint}" if self.hint else self.problem
        super().__init__(f"{message} (filter: {_shorten(repr(expression))})" if expression else message)


def _shorten(text: str, limit: int = _SHOWN_CHARS) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _one_line(text: str) -> str:
    """``text`` without line breaks or other control characters (they would split a CLI error or a log line)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass(frozen=True)
class _Token:
    kind: str  # ident | string | int | float | op | lparen | rparen | lbrack | rbrack | comma | keyword
    value: object
    column: int


_TOKEN_RE = re.compile(
    r"""(?:
        (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<float>[-+]?[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+)
      | (?P<int>[-+]?[0-9]+)
      | (?P<op>==|!=|<=|>=|<|>|&&|\|\||!)
      | (?P<assign>=)
      | (?P<lparen>\()
      | (?P<rparen>\))
      | (?P<lbrack>\[)
      | (?P<rbrack>\])
      | (?P<comma>,)
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<unterminated>['"])
    )""",
    re.VERBOSE | re.DOTALL,
)
_SPACE_RE = re.compile(r"\s*")
_KEYWORDS = {"and", "or", "not", "in", "like"}
_SYMBOLIC = {"&&": "and", "||": "or", "!": "not"}


def _unescape(raw: str) -> str:
    return re.sub(r"\\(.)", r"\1", raw[1:-1], flags=re.DOTALL)


def _show(value: object) -> str:
    """A token's value for an error message: quoted, escaped, and cut short."""
    return _shorten(repr(value), 40)


def _tokenise(expression: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = _SPACE_RE.match(expression).end()
    while position < len(expression):
        match = _TOKEN_RE.match(expression, position)
        if not match:
            raise FilterError(
                f"unexpected character {expression[position]!r} at column {position + 1}",
                "allowed: field names, == != < > <= >= in like, and/or/not, ( ), [ ], quoted strings, integers",
                expression,
            )
        kind = match.lastgroup
        text = match.group(kind)
        column = position + 1
        position = _SPACE_RE.match(expression, match.end()).end()
        if kind == "unterminated":
            raise FilterError(f"unterminated string starting at column {column}", "close the quote", expression)
        if kind == "assign":
            raise FilterError(f"'=' at column {column}", "use == for equality, e.g. page_number == 3", expression)
        if kind in ("int", "float") and len(text) > _MAX_NUMBER_CHARS:
            raise FilterError(
                f"the number at column {column} has {len(text)} characters",
                "page numbers are small integers",
                expression,
            )
        if kind == "string":
            value = _unescape(text)
            control = next((c for c in value if unicodedata.category(c) == "Cc"), None)
            if control is not None:
                raise FilterError(
                    f"the string at column {column} holds the control character {control!r}",
                    "ids and names never contain one; remove it",
                    expression,
                )
            tokens.append(_Token("string", value, column))
        elif kind == "int":
            tokens.append(_Token("int", int(text), column))
        elif kind == "float":
            tokens.append(_Token("float", float(text), column))
        elif kind == "op":
            if text in _SYMBOLIC:
                tokens.append(_Token("keyword", _SYMBOLIC[text], column))
            else:
                tokens.append(_Token("op", text, column))
        elif kind == "ident":
            lowered = text.lower()
            if lowered in _KEYWORDS:
                tokens.append(_Token("keyword", lowered, column))
            elif lowered in ("true", "false"):
                tokens.append(_Token("bool", lowered, column))
            else:
                tokens.append(_Token("ident", text, column))
        else:
            tokens.append(_Token(kind, text, column))
    return tokens


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def quote_literal(value: str | int) -> str:
    """A Milvus literal for ``value`` (strings double-quoted and escaped)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else _quote(str(value))


class _Parser:
    def __init__(self, expression: str, tokens: list[_Token], fields: dict[str, type]):
        self.expression = expression
        self.tokens = tokens
        self.fields = fields
        self.index = 0
        self.depth = 0

    def error(self, problem: str, hint: str) -> FilterError:
        return FilterError(problem, hint, self.expression)

    def peek(self) -> _Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise self.error("the filter ends too early", "complete the comparison, e.g. pdf_id == '...'")
        self.index += 1
        return token

    def is_keyword(self, word: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "keyword" and token.value == word

    def parse(self) -> str:
        result = self.parse_or()
        token = self.peek()
        if token is not None:
            hint = "join conditions with and / or" if token.kind == "ident" else "check the parentheses"
            if token.kind == "rparen":
                hint = "there is a ')' without its '('"
            raise self.error(f"unexpected {_show(token.value)} at column {token.column}", hint)
        return result

    def parse_or(self) -> str:
        parts = [self.parse_and()]
        while self.is_keyword("or"):
            self.take()
            parts.append(self.parse_and())
        return " or ".join(parts)

    def parse_and(self) -> str:
        parts = [self.parse_unary()]
        while self.is_keyword("and"):
            self.take()
            parts.append(self.parse_unary())
        return " and ".join(parts)

    def parse_unary(self) -> str:
        token = self.peek()
        if token is None or not (token.kind == "lparen" or (token.kind == "keyword" and token.value == "not")):
            return self.parse_comparison()
        self.depth += 1
        if self.depth > MAX_FILTER_DEPTH:
            raise self.error(
                f"the filter nests deeper than {MAX_FILTER_DEPTH} levels at column {token.column}",
                "each '(' and each not is a level; simplify the expression",
            )
        self.take()
        if token.kind == "keyword":
            result = f"not {self.parse_unary()}"
        else:
            inner = self.parse_or()
            closing = self.peek()
            if closing is None or closing.kind != "rparen":
                raise self.error(f"'(' at column {token.column} is never closed", "add the missing ')'")
            self.take()
            result = f"({inner})"
        self.depth -= 1
        return result

    def parse_field(self) -> tuple[str, type]:
        token = self.take()
        if token.kind != "ident":
            raise self.error(
                f"expected a field name at column {token.column}, got {_show(token.value)}",
                f"a condition starts with one of {', '.join(self.fields)}, e.g. page_number == 3",
            )
        name = token.value
        if name not in self.fields:
            raise self.error(f"unknown field {_show(name)}", _field_hint(name, self.fields))
        return name, self.fields[name]

    def parse_literal(self, field: str, kind: type) -> str:
        token = self.take()
        if token.kind in ("int", "float"):
            if kind is str:
                raise self.error(
                    f"{field} is a string, got the number {token.value}", f"quote it, e.g. {field} == '{token.value}'"
                )
            if token.kind == "float":
                raise self.error(f"{field} is an integer, got {token.value}", f"write e.g. {field} == 3")
            if not _INT64[0] <= token.value <= _INT64[1]:
                raise self.error(
                    f"{token.value} at column {token.column} does not fit {field}, a 64-bit integer",
                    f"write e.g. {field} == 3",
                )
            return str(token.value)
        if token.kind == "string":
            if kind is int:
                example = token.value if str(token.value).isdigit() and len(str(token.value)) < 10 else 3
                raise self.error(
                    f"{field} is an integer, got the string {_show(token.value)}",
                    f"drop the quotes, e.g. {field} == {example}",
                )
            return _quote(str(token.value))
        if token.kind == "ident" and token.value in self.fields:
            raise self.error(
                f"comparing two fields ({field} and {token.value})", "compare a field with a literal value"
            )
        if token.kind == "ident":
            raise self.error(
                f"bare word {_show(token.value)} at column {token.column}",
                f"quote string values, e.g. {field} == '{_shorten(token.value, 40)}'",
            )
        raise self.error(
            f"expected a value at column {token.column}, got {_show(token.value)}",
            "values are quoted strings or integers",
        )

    def parse_comparison(self) -> str:
        field, kind = self.parse_field()
        token = self.take()
        negated = False
        if token.kind == "keyword" and token.value == "not" and self.is_keyword("in"):
            negated = True
            token = self.take()
        elif token.kind == "keyword" and token.value == "not" and self.is_keyword("like"):
            raise self.error(
                f"'not like' at column {token.column}", f"negate the whole condition: not {field} like '...'"
            )
        if token.kind == "keyword" and token.value == "in":
            opening = self.take()
            if opening.kind == "lparen":
                raise self.error("'in' takes a list in square brackets", f"write {field} in [..., ...]")
            if opening.kind != "lbrack":
                raise self.error(f"expected '[' after 'in' at column {opening.column}", f"write {field} in [..., ...]")
            values = []
            while True:
                if self.peek() is not None and self.peek().kind == "rbrack" and not values:
                    raise self.error("empty list after 'in'", "give at least one value")
                values.append(self.parse_literal(field, kind))
                separator = self.take()
                if separator.kind == "rbrack":
                    break
                if separator.kind != "comma":
                    raise self.error(
                        f"expected ',' or ']' at column {separator.column}", "separate list values with commas"
                    )
            return f"{field} {'not in' if negated else 'in'} [{', '.join(values)}]"
        if token.kind == "keyword" and token.value == "like":
            if kind is not str:
                raise self.error(
                    f"'like' matches strings and {field} is an integer",
                    f"compare it with == != < > <= >= in, e.g. {field} <= 3",
                )
            pattern = self.take()
            if pattern.kind != "string":
                raise self.error(
                    f"'like' takes a quoted pattern at column {pattern.column}, got {_show(pattern.value)}",
                    f"% matches any run of characters, _ one character, e.g. {field} like 'abc%'",
                )
            wildcards = re.sub(r"%+", "%", str(pattern.value))  # %% matches what % matches
            if wildcards.count("%") > MAX_LIKE_WILDCARDS:
                raise self.error(
                    f"the 'like' pattern at column {pattern.column} has {wildcards.count('%')} % "
                    f"wildcards, more than {MAX_LIKE_WILDCARDS}",
                    f"match a prefix, a suffix or an infix, e.g. {field} like '%abc%'",
                )
            return f"{field} like {_quote(wildcards)}"
        if token.kind != "op":
            raise self.error(
                f"expected an operator after {field} at column {token.column}, got {_show(token.value)}",
                "use one of == != < > <= >= in like",
            )
        return f"{field} {token.value} {self.parse_literal(field, kind)}"


def _field_hint(name: str, fields: dict[str, type]) -> str:
    allowed = ", ".join(fields)
    target = _ALIASES.get(name.lower())
    if target in fields:
        return f"use {target} (allowed fields: {allowed})"
    close = difflib.get_close_matches(name.lower(), list(fields), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}? (allowed fields: {allowed})"
    return f"allowed fields: {allowed}"


def validate_filter(expression: str | None, fields: dict[str, type] | None = None) -> str:
    """The normalised filter, or ``""`` for an empty one; raises :class:`FilterError` with a hint otherwise."""
    if expression is None:
        return ""
    if not isinstance(expression, str):
        raise FilterError(f"a filter is text, got {type(expression).__name__}", "e.g. pdf_id == '...'")
    if len(expression) > MAX_FILTER_CHARS:
        raise FilterError(
            f"the filter has {len(expression)} characters, more than {MAX_FILTER_CHARS}",
            "narrow it with fewer, simpler conditions",
            expression,
        )
    if not expression.strip():
        return ""
    try:
        expression.encode("utf-8")
    except UnicodeEncodeError as problem:
        raise FilterError(
            f"the filter is not valid Unicode at column {problem.start + 1}",
            "it holds an unpaired surrogate (undecodable input bytes)",
            expression,
        ) from None
    fields = FIELD_TYPES if fields is None else fields
    return _Parser(expression, _tokenise(expression), fields).parse()
