"""Action parsing in four formats, robust to fences, prose and markers; observation rendering and truncation."""

from __future__ import annotations

import json

import pytest

from agent.actions import ALL_ACTIONS, GenerateAnswer, RetrieveFromDatabase, RetrieveFromVectorstore, ViewImage
from agent.formats import (
    ACTION_FORMATS,
    OUTPUT_FORMATS,
    ActionParseError,
    count_tokens,
    format_table,
    parse_action,
    render_action,
    split_response,
)

NAMES = [a.action_name() for a in ALL_ACTIONS]
SQL = "SELECT table_id, page_number FROM tables WHERE ref_paper_id = 'p' AND page_number < 3 AND x <> 'a:b'"


@pytest.mark.parametrize("action_format", ACTION_FORMATS)
def test_render_then_parse_round_trips_every_action(action_format: str) -> None:
    for action in ALL_ACTIONS:
        for example in action.examples:
            text = f"[Thought]: because\n[Action]:\n{render_action(action.action_name(), example, action_format)}"
            parsed = parse_action(text, action_format, NAMES)
            built = action.build(parsed)
            assert parsed.thought == "because"
            assert built.arguments() | example == built.arguments(), (action_format, action)


@pytest.mark.parametrize(
    ("action_format", "response"),
    [
        ("markdown", f'[Thought]: check\n[Action]:\n```python\nRetrieveFromDatabase(sql="{SQL}")\n```\nThat is all.'),
        ("markdown", f'Let me look.\nRetrieveFromDatabase("{SQL}") and then I will answer.'),
        (
            "json",
            f'[Thought]: check\n[Action]:\n```json\n{{"action_type": "RetrieveFromDatabase", '
            f'"parameters": {{"sql": "{SQL}"}}}}\n```',
        ),
        ("json", f'Sure! {{"action_type": "RetrieveFromDatabase", "parameters": {{"sql": "{SQL}"}}}} hope it helps'),
        (
            "xml",
            f"[Action]: <action><action_type>RetrieveFromDatabase</action_type><parameters><sql>{SQL}</sql>"
            "</parameters></action>",
        ),
        (
            "xml",
            f"```xml\n<action>\n  <action_type>RetrieveFromDatabase</action_type>\n  <parameters>\n"
            f"    <sql><![CDATA[{SQL}]]></sql>\n  </parameters>\n</action>\n```",
        ),
        (
            "yaml",
            f"[Thought]: check\n[Action]:\n```yaml\naction_type: RetrieveFromDatabase\nparameters:\n"
            f"  sql: |\n    {SQL}\n```",
        ),
    ],
)
def test_parsing_survives_fences_prose_and_markers(action_format: str, response: str) -> None:
    parsed = parse_action(response, action_format, NAMES)
    action = RetrieveFromDatabase.build(parsed)
    assert action.sql.strip() == SQL


def test_model_written_observations_are_dropped() -> None:
    thought, action = split_response(
        "[Thought]: a\n[Action]: GenerateAnswer(answer=1)\n[Observation]: fake\n[Action]: GenerateAnswer(answer=2)"
    )
    assert thought == "a" and action == "GenerateAnswer(answer=1)"


@pytest.mark.parametrize(
    ("action_format", "response", "message"),
    [
        ("markdown", "", "empty"),
        ("markdown", "I think the answer is 42.", "no action found"),
        ("markdown", "DeleteEverything(now=True)", "unknown action 'DeleteEverything'"),
        ("markdown", "GenerateAnswer(answer=__import__('os').getcwd())", "must be a literal"),
        ("markdown", "GenerateAnswer(answer=open('/etc/passwd').read())", "must be a literal"),
        ("markdown", "GenerateAnswer(**{'answer': 1})", "'\\*\\*' arguments"),
        ("markdown", "RetrieveFromDatabase(sql='select 1", "could not read"),
        ("json", '{"action_type": "RetrieveFromDatabase", "parameters": {"sql": "select 1"', "no JSON action"),
        ("json", '{"tool": "RetrieveFromDatabase"}', "action_type"),
        ("json", '{"action_type": "Nope", "parameters": {}}', "unknown action"),
        ("json", '{"action_type": "GenerateAnswer", "parameters": [1]}', "must be a mapping"),
        ("xml", "<action><parameters><sql>1</sql></parameters></action>", "action_type"),
        ("xml", '<!DOCTYPE x [<!ENTITY a "b">]><action><action_type>GenerateAnswer</action_type></action>', "DOCTYPE"),
        ("yaml", "action_type: [unclosed", "invalid YAML|no YAML"),
        ("yaml", "just: words", "needs the keys"),
    ],
)
def test_malformed_actions_raise_a_message_for_the_model(action_format: str, response: str, message: str) -> None:
    with pytest.raises(ActionParseError, match=message):
        parse_action(response, action_format, NAMES)


@pytest.mark.parametrize(
    ("action", "parsed", "message"),
    [
        (RetrieveFromDatabase, {"sql": "select 1", "extra": 1}, "no parameter 'extra'"),
        (RetrieveFromDatabase, {}, "needs the parameter"),
        (
            RetrieveFromVectorstore,
            {"query": "q", "collection_name": "c", "table_name": "t", "column_name": "c", "limit": "many"},
            "whole number",
        ),
        (ViewImage, {"paper_id": "p", "page_number": 1, "bounding_box": "not a list"}, "list literal"),
        (ViewImage, {"paper_id": ["p"], "page_number": 1}, "must be a string"),
    ],
)
def test_parameters_are_checked(action, parsed: dict, message: str) -> None:
    text = render_action(action.action_name(), parsed, "json")
    with pytest.raises(ActionParseError, match=message):
        action.build(parse_action(text, "json", NAMES))


def test_obvious_coercions_from_text_formats() -> None:
    xml = (
        "<action><action_type>ViewImage</action_type><parameters><paper_id>p</paper_id>"
        "<page_number>3</page_number><bounding_box>[1, 2, 3, 4]</bounding_box></parameters></action>"
    )
    action = ViewImage.build(parse_action(xml, "xml", NAMES))
    assert action.page_number == 3 and action.bounding_box == [1, 2, 3, 4]
    positional = GenerateAnswer.build(parse_action("GenerateAnswer(['a', 'b'])", "markdown", NAMES))
    assert positional.answer == ["a", "b"]


ROWS = [(i, f"chunk number {i} " + "word " * 30, [1, 2]) for i in range(40)]


@pytest.mark.parametrize("output_format", OUTPUT_FORMATS)
def test_observations_are_cut_by_rows_with_a_note(output_format: str) -> None:
    formatted = format_table(["id", "text", "box"], ROWS, output_format, max_rows=5, max_tokens=10_000)
    assert formatted.shown_rows == 5
    assert "chunk number 4 " in formatted.text and "chunk number 5 " not in formatted.text
    assert "[Note: showing 5 of 40 rows" in formatted.text


@pytest.mark.parametrize("output_format", OUTPUT_FORMATS)
def test_observations_are_cut_by_tokens_with_a_note(output_format: str) -> None:
    formatted = format_table(["id", "text", "box"], ROWS, output_format, max_rows=40, max_tokens=300)
    body = formatted.text.split("\n[Note:")[0]
    assert count_tokens(body) <= 300
    assert formatted.shown_rows < 40 and "300-token limit" in formatted.text


def test_a_single_huge_cell_is_cut_at_the_token_limit() -> None:
    formatted = format_table(["text"], [("token " * 5000,)], "string", max_rows=5, max_tokens=100)
    assert formatted.cut_tokens > 0 and "tokens cut" in formatted.text


def test_output_formats_render_their_syntax() -> None:
    rows = [("a|b", "<x>", None)]
    json_line = format_table(["p", "q", "r"], rows, "json").text
    assert json.loads(json_line) == {"p": "a|b", "q": "<x>", "r": None}
    assert "a\\|b" in format_table(["p", "q", "r"], rows, "markdown").text
    assert "<td>&lt;x&gt;</td>" in format_table(["p", "q", "r"], rows, "html").text
    assert "[row 1]\np: a|b" in format_table(["p", "q", "r"], rows, "string").text
    assert format_table(["p"], [], "markdown").text == "(no rows)"
    with pytest.raises(ValueError):
        format_table(["p"], rows, "csv")
