"""The CLI's rows for a person: readable at 80 columns, ids whole, huge values cut before they are rendered."""

from __future__ import annotations

import io
import time
import uuid

from rich.console import Console

from cli.render import ELLIPSIS, cell_text, render_rows


def _render(columns, rows, width=80) -> list[str]:
    out = io.StringIO()
    render_rows(Console(file=out, width=width, color_system=None), columns, rows, title="t")
    return out.getvalue().splitlines()


def test_a_narrow_result_is_a_table_with_ids_whole():
    ids = [str(uuid.uuid5(uuid.NAMESPACE_DNS, str(i))) for i in range(3)]
    lines = _render(["table_id", "page", "label"], [(i, 3, "Table 1: results of a long caption" * 3) for i in ids])
    assert all(len(line) <= 80 for line in lines)
    assert all(any(i in line for line in lines) for i in ids)  # each id on one line, whole
    assert any(line.rstrip(" │").endswith(ELLIPSIS) for line in lines)


def test_a_wide_row_prints_as_a_record_of_lines():
    columns = [f"column_{n}" for n in range(15)]
    row = tuple(["x" * 500] * 14 + [str(uuid.uuid4())])
    lines = _render(columns, [row])
    assert len(lines) <= 80 and all(len(line) <= 80 for line in lines)
    assert any(line.strip().startswith("column_0: x") and line.endswith(ELLIPSIS) for line in lines)
    assert any(row[-1] in line for line in lines)


def test_keys_stay_whole_in_records_even_past_the_width():
    key = "emnlp2024/emnlp2024-040-tokenization-is-more-than-compression-a-very-long-stem"
    lines = _render(["paper_key", *[f"c{n}" for n in range(12)]], [(key, *["v" * 40] * 12)], width=60)
    assert any(key in line for line in lines)


def test_a_huge_cell_is_cut_before_rendering():
    started = time.perf_counter()
    lines = _render(["s"], [("x" * 50_000_000,)])
    assert time.perf_counter() - started < 5
    assert len(lines) < 10 and any(ELLIPSIS in line for line in lines)


def test_cell_text_is_one_line():
    assert cell_text("a\nb\tc", 10) == "a b c"
    assert cell_text("abcdefghijk", 5) == "abcd" + ELLIPSIS
    assert cell_text(None, 5) == ""


def test_ask_help_names_every_method():
    from agent.methods import METHODS
    from cli.app import ask

    for name in METHODS:
        assert name in ask.__doc__, name
    for variable in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "PAPERLAKE_LLM_MODEL"):
        assert variable in ask.__doc__


def test_command_lists_wrap_each_summary_as_one_paragraph_at_80_columns():
    """A summary's source line breaks do not reach the command list: each line of a description but its last is
    filled, so the next word would not have fitted on it."""
    import os
    import re
    import subprocess
    import sys

    for group in ([], ["eval"], ["tables"], ["formulas"]):
        code = f"import sys; sys.argv = ['paperlake', *{group!r}, '--help']; from cli.app import main; main()"
        env = os.environ | {"COLUMNS": "80", "TERM": "dumb", "NO_COLOR": "1"}
        shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout
        panel = [line for line in shown[shown.index("Commands") :].splitlines() if line.startswith("│ ")]
        rows = [re.match(r"│ (\S*)(\s+)(.*?)\s*│$", line) for line in panel]
        assert rows and all(rows) and all(len(line) <= 80 for line in panel), shown
        room = len(panel[0]) - 2 - len(rows[0].group(1)) - len(rows[0].group(2)) - 2  # the description column
        described: list[list[str]] = []
        for row in rows:
            if row.group(1):
                described.append([])
            described[-1].append(row.group(3))
        assert len(described) >= 2, shown
        for lines in described:
            for line, following in zip(lines, lines[1:]):
                assert len(line) + 1 + len(following.split()[0]) > room, (group, lines)


def test_a_commands_page_wraps_each_paragraph_at_80_columns():
    import os
    import subprocess
    import sys

    code = "import sys; sys.argv = ['paperlake', 'ask', '--help']; from cli.app import main; main()"
    env = os.environ | {"COLUMNS": "80", "TERM": "dumb", "NO_COLOR": "1"}
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout
    paragraphs: list[list[str]] = [[]]
    for line in shown[: shown.index("╭")].splitlines()[3:]:  # after the usage line and its blank
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    paragraphs = [lines for lines in paragraphs if lines]
    assert len(paragraphs) >= 3 and "Methods (--method)" in paragraphs[2][0], shown
    for lines in paragraphs:
        for line, following in zip(lines, lines[1:]):
            assert len(line) + 1 + len(following.split()[0]) > 78, lines
