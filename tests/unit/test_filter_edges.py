"""The vector-search filter parser at its edges, without Milvus: what it normalises, every refusal's message and hint,
each limit exactly at and just past it, a malformed ``in [...]`` list refused rather than rewritten into a valid one,
and ``quote_literal``, which builds every ``pdf_id == ...`` clause the stores write."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paperlake.vectors.filters import (
    FIELD_TYPES,
    MAX_FILTER_CHARS,
    MAX_FILTER_DEPTH,
    MAX_LIKE_WILDCARDS,
    OPERATORS,
    FilterError,
    quote_literal,
    validate_filter,
)

FIELDS = "pdf_id, page_number, table_name, column_name, primary_key"


def refused(expression, fields=None) -> FilterError:
    with pytest.raises(FilterError) as error:
        validate_filter(expression, fields)
    return error.value


@pytest.mark.parametrize(
    ("expression", "normalised"),
    [
        (None, ""),
        ("", ""),
        (" \t\n", ""),
        ("pdf_id == 'a'", 'pdf_id == "a"'),
        ('pdf_id == "a"', 'pdf_id == "a"'),
        ("  page_number==3  ", "page_number == 3"),
        ("page_number\t!=\n-3", "page_number != -3"),
        ("page_number>=+3", "page_number >= 3"),
        ("page_number <= 3", "page_number <= 3"),
        ("page_number < 3", "page_number < 3"),
        ("page_number > 3", "page_number > 3"),
        ("page_number == 3 AND pdf_id == 'x'", 'page_number == 3 and pdf_id == "x"'),
        ("page_number == 3 Or page_number == 4", "page_number == 3 or page_number == 4"),
        (
            "page_number == 3 && page_number < 5 || !(page_number > 1)",
            "page_number == 3 and page_number < 5 or not (page_number > 1)",
        ),
        ("NOT page_number == 1", "not page_number == 1"),
        ("not not page_number == 1", "not not page_number == 1"),
        (
            "(page_number == 1 or page_number == 2) and pdf_id == 'p'",
            '(page_number == 1 or page_number == 2) and pdf_id == "p"',
        ),
        ("page_number IN [1,2]", "page_number in [1, 2]"),
        ("page_number not In [1]", "page_number not in [1]"),
        ("pdf_id in ['a', \"b\"]", 'pdf_id in ["a", "b"]'),
        ("pdf_id LIKE 'ab%'", 'pdf_id like "ab%"'),
        ("pdf_id like '%%a%%'", 'pdf_id like "%a%"'),
        ("pdf_id like '%a_'", 'pdf_id like "%a_"'),
        ("pdf_id == 'it\\'s'", 'pdf_id == "it\'s"'),
        ('pdf_id == "say \\"hi\\""', 'pdf_id == "say \\"hi\\""'),
        ("pdf_id == 'back\\\\slash'", 'pdf_id == "back\\\\slash"'),
        ("pdf_id == 'é ü'", 'pdf_id == "é ü"'),
        ("page_number == 9223372036854775807", "page_number == 9223372036854775807"),
        ("page_number == -9223372036854775808", "page_number == -9223372036854775808"),
        ("page_number == 007", "page_number == 7"),
    ],
)
def test_valid_filters_are_normalised(expression, normalised: str) -> None:
    assert validate_filter(expression) == normalised


def test_normalised_filters_validate_to_themselves() -> None:
    for expression in ["pdf_id in ['a', 'b'] && !(page_number >= 2 || page_number == -1)", "pdf_id like '%x%'"]:
        once = validate_filter(expression)
        assert validate_filter(once) == once


@pytest.mark.parametrize(
    ("expression", "problem", "hint"),
    [
        ("pdf_id in ['a' 'b']", "expected ',' or ']' at column 16", "separate list values with commas"),
        ("page_number in [1 2]", "expected ',' or ']' at column 19", "separate list values with commas"),
        ("pdf_id in ['a', 'b' 'c']", "expected ',' or ']' at column 21", "separate list values with commas"),
        ("pdf_id in ['a',]", "expected a value at column 16, got ']'", "values are quoted strings or integers"),
        ("pdf_id in [,'a']", "expected a value at column 12, got ','", "values are quoted strings or integers"),
        ("pdf_id in ['a', , 'b']", "expected a value at column 17, got ','", "values are quoted strings or integers"),
        ("pdf_id in ['a'", "the filter ends too early", "complete the comparison, e.g. pdf_id == '...'"),
        ("pdf_id in ['a',", "the filter ends too early", "complete the comparison, e.g. pdf_id == '...'"),
        ("pdf_id in ['a') ", "expected ',' or ']' at column 15", "separate list values with commas"),
        ("pdf_id in []", "empty list after 'in'", "give at least one value"),
        ("pdf_id in ('a')", "'in' takes a list in square brackets", "write pdf_id in [..., ...]"),
        ("pdf_id in 'a'", "expected '[' after 'in' at column 11", "write pdf_id in [..., ...]"),
        (
            "page_number in [1, 'a']",
            "page_number is an integer, got the string 'a'",
            "drop the quotes, e.g. page_number == 3",
        ),
        ("page_number not in 3", "expected '[' after 'in' at column 20", "write page_number in [..., ...]"),
    ],
)
def test_a_malformed_in_list_is_refused_not_rewritten(expression: str, problem: str, hint: str) -> None:
    error = refused(expression)
    assert (error.problem, error.hint, error.expression) == (problem, hint, expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (3, "a filter is text, got int — e.g. pdf_id == '...'"),
        (
            "page_number = 3",
            "'=' at column 13 — use == for equality, e.g. page_number == 3 (filter: 'page_number = 3')",
        ),
        (
            "'open",
            'unterminated string starting at column 1 — close the quote (filter: "\'open")',
        ),
        (
            "page_number == 1 # x",
            "unexpected character '#' at column 18 — allowed: field names, == != < > <= >= in like, and/or/not, "
            "( ), [ ], quoted strings, integers (filter: 'page_number == 1 # x')",
        ),
        (
            "page_number == 3.5",
            "page_number is an integer, got 3.5 — write e.g. page_number == 3 (filter: 'page_number == 3.5')",
        ),
        (
            "page_number == 1e3",
            "page_number is an integer, got 1000.0 — write e.g. page_number == 3 (filter: 'page_number == 1e3')",
        ),
        (
            "page_number == '3'",
            "page_number is an integer, got the string '3' — drop the quotes, e.g. page_number == 3 "
            "(filter: \"page_number == '3'\")",
        ),
        (
            "page_number == '123456789'",
            "page_number is an integer, got the string '123456789' — drop the quotes, e.g. page_number == 123456789 "
            "(filter: \"page_number == '123456789'\")",
        ),
        (
            "page_number == '1234567890'",
            "page_number is an integer, got the string '1234567890' — drop the quotes, e.g. page_number == 3 "
            "(filter: \"page_number == '1234567890'\")",
        ),
        (
            "page_number == 'abc'",
            "page_number is an integer, got the string 'abc' — drop the quotes, e.g. page_number == 3 "
            "(filter: \"page_number == 'abc'\")",
        ),
        ("pdf_id == 3", "pdf_id is a string, got the number 3 — quote it, e.g. pdf_id == '3' (filter: 'pdf_id == 3')"),
        (
            "pdf_id == 2.5",
            "pdf_id is a string, got the number 2.5 — quote it, e.g. pdf_id == '2.5' (filter: 'pdf_id == 2.5')",
        ),
        (
            "pdf_id == abc",
            "bare word 'abc' at column 11 — quote string values, e.g. pdf_id == 'abc' (filter: 'pdf_id == abc')",
        ),
        (
            "pdf_id == page_number",
            "comparing two fields (pdf_id and page_number) — compare a field with a literal value "
            "(filter: 'pdf_id == page_number')",
        ),
        (
            "pdf_id == (",
            "expected a value at column 11, got '(' — values are quoted strings or integers (filter: 'pdf_id == (')",
        ),
        (
            "and page_number == 1",
            f"expected a field name at column 1, got 'and' — a condition starts with one of {FIELDS}, e.g. "
            "page_number == 3 (filter: 'and page_number == 1')",
        ),
        (
            "&& page_number == 1",
            f"expected a field name at column 1, got 'and' — a condition starts with one of {FIELDS}, e.g. "
            "page_number == 3 (filter: '&& page_number == 1')",
        ),
        (
            "2.5 == page_number",
            f"expected a field name at column 1, got 2.5 — a condition starts with one of {FIELDS}, e.g. "
            "page_number == 3 (filter: '2.5 == page_number')",
        ),
        (
            "page_number == FALSE",
            "expected a value at column 16, got 'false' — values are quoted strings or integers "
            "(filter: 'page_number == FALSE')",
        ),
        (
            "page_number == true",
            "expected a value at column 16, got 'true' — values are quoted strings or integers "
            "(filter: 'page_number == true')",
        ),
        ("pdf_id", "the filter ends too early — complete the comparison, e.g. pdf_id == '...' (filter: 'pdf_id')"),
        (
            "pdf_id 'a'",
            "expected an operator after pdf_id at column 8, got 'a' — use one of == != < > <= >= in like "
            "(filter: \"pdf_id 'a'\")",
        ),
        (
            "== 3",
            f"expected a field name at column 1, got '==' — a condition starts with one of {FIELDS}, e.g. "
            "page_number == 3 (filter: '== 3')",
        ),
        (
            "(page_number == 1",
            "'(' at column 1 is never closed — add the missing ')' (filter: '(page_number == 1')",
        ),
        (
            "(page_number == 1 'x'",
            "'(' at column 1 is never closed — add the missing ')' (filter: \"(page_number == 1 'x'\")",
        ),
        (
            "page_number == 1)",
            "unexpected ')' at column 17 — there is a ')' without its '(' (filter: 'page_number == 1)')",
        ),
        (
            "page_number == 1 pdf_id == 'a'",
            "unexpected 'pdf_id' at column 18 — join conditions with and / or "
            "(filter: \"page_number == 1 pdf_id == 'a'\")",
        ),
        (
            "page_number == 1 'x'",
            "unexpected 'x' at column 18 — check the parentheses (filter: \"page_number == 1 'x'\")",
        ),
        (
            "pdf_id like 3",
            "'like' takes a quoted pattern at column 13, got 3 — % matches any run of characters, _ one character, "
            "e.g. pdf_id like 'abc%' (filter: 'pdf_id like 3')",
        ),
        (
            "page_number like '1'",
            "'like' matches strings and page_number is an integer — compare it with == != < > <= >= in, e.g. "
            "page_number <= 3 (filter: \"page_number like '1'\")",
        ),
        (
            "pdf_id not like 'a'",
            "'not like' at column 8 — negate the whole condition: not pdf_id like '...' "
            "(filter: \"pdf_id not like 'a'\")",
        ),
        (
            "pdf_id not == 'a'",
            "expected an operator after pdf_id at column 8, got 'not' — use one of == != < > <= >= in like "
            "(filter: \"pdf_id not == 'a'\")",
        ),
        (
            "pdf_id like '%a%b%'",
            "the 'like' pattern at column 13 has 3 % wildcards, more than 2 — match a prefix, a suffix or an infix, "
            "e.g. pdf_id like '%abc%' (filter: \"pdf_id like '%a%b%'\")",
        ),
        (
            "pdf_id == 'a\x01'",
            "the string at column 11 holds the control character '\\x01' — ids and names never contain one; remove it "
            "(filter: \"pdf_id == 'a\\x01'\")",
        ),
    ],
)
def test_refusals_say_what_is_wrong_and_how_to_write_it(expression, message: str) -> None:
    assert str(refused(expression)) == message


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("paper_id", f"use pdf_id (allowed fields: {FIELDS})"),
        ("Page", f"use page_number (allowed fields: {FIELDS})"),
        ("pk", f"use primary_key (allowed fields: {FIELDS})"),
        ("pagenumbr", f"did you mean page_number? (allowed fields: {FIELDS})"),
        ("PAGE_NUMBER", f"did you mean page_number? (allowed fields: {FIELDS})"),
        ("zzz", f"allowed fields: {FIELDS}"),
    ],
)
def test_an_unknown_field_gets_the_field_it_probably_means(name: str, hint: str) -> None:
    error = refused(f"{name} == 1")
    assert error.problem == f"unknown field {name!r}" and error.hint == hint


def test_the_fields_can_be_narrowed() -> None:
    fields = {"year": int, "venue": str}
    assert validate_filter("year >= 2020 and venue == 'acl'", fields) == 'year >= 2020 and venue == "acl"'
    assert refused("pdf_id == 'a'", fields).hint == "allowed fields: year, venue"
    assert refused("paper == 'a'", fields).hint == "allowed fields: year, venue"  # its alias is not one of these
    assert refused("yaer == 1", fields).hint == "did you mean year? (allowed fields: year, venue)"


@pytest.mark.parametrize(
    ("number", "fits"),
    [
        ("9223372036854775807", True),
        ("9223372036854775808", False),
        ("-9223372036854775808", True),
        ("-9223372036854775809", False),
    ],
)
def test_integers_are_64_bit(number: str, fits: bool) -> None:
    expression = f"page_number == {number}"
    if fits:
        assert validate_filter(expression) == f"page_number == {int(number)}"
    else:
        assert str(refused(expression)) == (
            f"{int(number)} at column 16 does not fit page_number, a 64-bit integer — write e.g. page_number == 3 "
            f"(filter: {expression!r})"
        )


def test_a_number_is_at_most_40_characters() -> None:
    assert refused("page_number == " + "1" * 40).problem.endswith("does not fit page_number, a 64-bit integer")
    long = refused("page_number == " + "1" * 41)
    assert (long.problem, long.hint) == ("the number at column 16 has 41 characters", "page numbers are small integers")
    assert long.expression == "page_number == " + "1" * 41
    assert refused("page_number == 1." + "0" * 39).problem == "the number at column 16 has 41 characters"


def test_the_text_is_capped_exactly() -> None:
    at_cap = "page_number == 1" + " " * (MAX_FILTER_CHARS - 16)
    assert len(at_cap) == MAX_FILTER_CHARS and validate_filter(at_cap) == "page_number == 1"
    over = refused(at_cap + " ")
    assert over.problem == f"the filter has {MAX_FILTER_CHARS + 1} characters, more than {MAX_FILTER_CHARS}"
    assert over.hint == "narrow it with fewer, simpler conditions" and over.expression == at_cap + " "


def test_nesting_is_capped_exactly_and_counted_per_level() -> None:
    assert MAX_FILTER_DEPTH == 32
    deepest = "(" * 32 + "page_number == 1" + ")" * 32
    assert validate_filter(deepest) == deepest
    error = refused("(" * 33 + "page_number == 1" + ")" * 33)
    assert error.problem == "the filter nests deeper than 32 levels at column 33"
    assert error.hint == "each '(' and each not is a level; simplify the expression"
    assert validate_filter("not " * 32 + "page_number == 1") == "not " * 32 + "page_number == 1"
    assert refused("not " * 33 + "page_number == 1").problem == "the filter nests deeper than 32 levels at column 129"
    siblings = " and ".join(["(page_number == 1)"] * 40)  # side by side, each one level deep
    assert validate_filter(siblings) == siblings
    two_deepest = f"{deepest} and {deepest}"  # leaving a level gives it back, exactly
    assert validate_filter(two_deepest) == two_deepest
    assert refused("(page_number == 1) and " + "(" * 33 + "page_number == 1" + ")" * 33).problem.startswith(
        "the filter nests deeper than 32 levels"
    )


def test_like_keeps_at_most_two_wildcards() -> None:
    assert MAX_LIKE_WILDCARDS == 2
    assert validate_filter("pdf_id like '%a%'") == 'pdf_id like "%a%"'
    assert validate_filter("pdf_id like '%%%a%%%'") == 'pdf_id like "%a%"'
    assert refused("pdf_id like '%a%b%'").problem.endswith("has 3 % wildcards, more than 2")


def test_an_unpaired_surrogate_is_refused_with_its_column() -> None:
    error = refused("pdf_id == '\ud800'")
    assert error.problem == "the filter is not valid Unicode at column 12" and error.expression == "pdf_id == '\ud800'"
    assert error.hint == "it holds an unpaired surrogate (undecodable input bytes)"


def test_a_long_filter_is_shown_shortened_and_on_one_line() -> None:
    expression = "page_number == 1 #" + "x" * 200
    message = str(refused(expression))
    shown = message.split("(filter: ", 1)[1][:-1]
    assert len(shown) == 80 and shown.endswith("…") and shown.startswith("'page_number == 1 #xxx")
    assert str(refused("pdf_id == a" + "b" * 100)).startswith(
        "bare word 'a" + "b" * 37 + "… at column 11 — quote string values, e.g. pdf_id == 'a" + "b" * 38 + "…'"
    )


def test_a_filter_of_80_characters_as_quoted_is_shown_whole() -> None:
    expression = "page_number == 1 #" + "x" * 60
    assert len(repr(expression)) == 80
    assert str(refused(expression)).endswith(f"(filter: {expression!r})")
    assert str(refused(expression + "x")).endswith(f"(filter: {repr(expression + 'x')[:79]}…)")


def test_an_error_is_one_line_whatever_it_quotes() -> None:
    error = FilterError("two\nlines", "a\ttab", "x\ny")
    assert (error.problem, error.hint) == ("two\\nlines", "a\\ttab")
    assert str(error) == "two\\nlines — a\\ttab (filter: 'x\\ny')"
    assert str(FilterError("only a problem")) == "only a problem"
    assert str(FilterError("problem", expression="e")) == "problem (filter: 'e')"
    assert FilterError("é ü\u00a0x").problem == "é ü\\xa0x"


def test_the_documented_grammar() -> None:
    assert set(FIELD_TYPES) == {"pdf_id", "page_number", "table_name", "column_name", "primary_key"}
    assert FIELD_TYPES["page_number"] is int and FIELD_TYPES["pdf_id"] is str
    assert {"==", "in", "not in", "like", "and", "or", "not"} <= set(OPERATORS)


# -- quote_literal ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("abc", '"abc"'),
        ("", '""'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ('\\"', '"\\\\\\""'),
        ("it's", '"it\'s"'),
        (3, "3"),
        (-7, "-7"),
        (0, "0"),
        (True, '"True"'),  # a bool is not a number to Milvus
        (2.5, '"2.5"'),
    ],
)
def test_quote_literal(value, literal: str) -> None:
    assert quote_literal(value) == literal


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=30))
def test_quote_literal_round_trips_any_id_through_the_parser(value: str) -> None:
    clause = f"pdf_id == {quote_literal(value)}"
    assert validate_filter(clause) == clause
    assert validate_filter(f"pdf_id in [{quote_literal(value)}, {quote_literal(value + 'x')}]").startswith(
        "pdf_id in ["
    )
