"""Table structure as HD-RAG reads it: header paths for every data cell, stub columns, numbers with their marks.
Checked on hand-made grids and against the synthetic gold grids (header paths derived from TeX's own spans)."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperlake.lake.inbox import PaperSource
from paperlake.parsing.geometry import iou
from paperlake.parsing.gold import detections_from_parsed, load_gold
from paperlake.parsing.pymupdf_backend import parse
from paperlake.parsing.table_structure import caption_head, header_unit, parse_number, table_lines, table_structure

SYNTHETIC = Path(__file__).parents[1] / "data" / "synthetic"
HEADER_PATH_FLOOR = 0.9  # the acceptance; measured 0.948 here (0.940 on a held-out generated set)


def cell(row, col, text, rowspan=1, colspan=1, header=False):
    return {"row": row, "col": col, "text": text, "rowspan": rowspan, "colspan": colspan, "is_header": header}


# Model | Wiki (2 cols)          | News
#       | ARI      | NMI         | ARI
# Short | BERT  | 1.0 | 2.0      | 3.0        (Short spans two body rows)
#       | T5    | 4.0 | 5.0      | 6.0
GRID = [
    cell(0, 0, "Model", rowspan=2, header=True),
    cell(0, 1, "Wiki", colspan=2, header=True),
    cell(0, 3, "News", header=True),
    cell(1, 1, "ARI", header=True),
    cell(1, 2, "NMI", header=True),
    cell(1, 3, "ARI", header=True),
    cell(2, 0, "Short", rowspan=2),
    cell(2, 1, "BERT"),
    cell(2, 2, "1.0"),
    cell(2, 3, "2.0"),
    cell(2, 4, "3.0"),
    cell(3, 1, "T5"),
    cell(3, 2, "4.0"),
    cell(3, 3, "5.0"),
    cell(3, 4, "6.0"),
]


def test_paths_on_a_two_level_header_with_a_row_group():
    grid = [dict(c) for c in GRID]
    for c in grid:  # shift the header right of the two stub columns (group, model)
        if c["row"] < 2 and c["col"] > 0:
            c["col"] += 1
    structure = table_structure(grid)
    assert (structure.header_rows, structure.stub_columns) == (2, 2)
    rows = {(r["row"], r["col"]): r for r in structure.cells.iter_rows(named=True)}
    assert rows[(2, 2)]["column_header_path"] == ["Wiki", "ARI"]
    assert rows[(2, 2)]["row_header_path"] == ["Short", "BERT"]
    assert rows[(3, 3)]["column_header_path"] == ["Wiki", "NMI"] and rows[(3, 3)]["row_header_path"] == ["Short", "T5"]
    assert rows[(3, 4)]["column_header_path"] == ["News", "ARI"] and rows[(3, 4)]["number"] == 6.0
    assert rows[(2, 1)]["is_stub"] and rows[(2, 1)]["column_header_path"] is None  # a row header has no path
    assert structure.quality == "not_rectangular"  # the hand grid leaves (1, 0)..(1, 1) without cells


def test_quality_flags_name_what_is_wrong():
    assert table_structure([]).quality == "empty"
    overlapping = [
        cell(0, 0, "A", header=True, colspan=2),
        cell(0, 1, "B", header=True),
        cell(1, 0, "1"),
        cell(1, 1, "2"),
    ]
    assert "overlapping_spans" in table_structure(overlapping).flags
    no_header = [cell(0, 0, "1"), cell(0, 1, "2"), cell(1, 0, "3"), cell(1, 1, "4")]
    assert table_structure(no_header).flags == ["no_header"]


@pytest.mark.parametrize(
    "text, value, flags",
    [
        ("77.34", 77.34, []),
        ("−2.1", -2.1, []),
        ("45.2 ± 0.3", 45.2, ["pm"]),
        ("12%", 12.0, ["percent"]),
        ("1.2M", 1.2e6, ["scaled"]),
        ("(0.5)", 0.5, ["parenthesised"]),
        ("3e-4", 3e-4, []),
        ("1,234", 1234.0, []),
        ("×16", 16.0, ["times"]),
        ("94.15 (−0.27%)", 94.15, ["delta"]),
        ("91.2*", 91.2, ["marked"]),
        (".5", 0.5, []),
    ],
)
def test_numbers_and_how_they_are_written(text, value, flags):
    parsed = parse_number(text)
    assert parsed is not None and parsed.value == pytest.approx(value) and parsed.flags == flags


@pytest.mark.parametrize("text", ["F1", "0.6 0.6", "M=0", "1394-1460", "-", "", None, "[1, 2]", "v2.0.1"])
def test_what_is_not_one_number(text):
    assert parse_number(text) is None


def test_header_paths_on_the_synthetic_gold_tables():
    """Every data cell of every multi-level table: our grid's paths against the paths of TeX's own grid."""
    exact = total = 0
    for document in load_gold(SYNTHETIC):
        source = PaperSource(paper_key=document.doc, volume="synthetic", pdf_path=document.pdf, sha256="0" * 64)
        found = [d for d in detections_from_parsed(parse(source)) if d.kind == "tables"]
        for element in document.elements:
            grid = element.get("grid")
            if element["type"] != "table" or not grid or grid["header_rows"] < 2:
                continue
            gold = table_structure([{**c, "is_header": c["row"] < grid["header_rows"]} for c in grid["cells"]])
            match = next(
                (d for d in found if d.page == element["page"] and iou(d.bbox, tuple(element["bbox"])) >= 0.5), None
            )
            ours = (
                {(r["row"], r["col"]): r for r in table_structure(match.cells).cells.iter_rows(named=True)}
                if match
                else {}
            )
            for row in gold.cells.filter(~gold.cells["is_header"] & ~gold.cells["is_stub"]).iter_rows(named=True):
                if not row["text"]:
                    continue
                total += 1
                mine = ours.get((row["row"], row["col"]))
                exact += (
                    bool(mine)
                    and mine["column_header_path"] == row["column_header_path"]
                    and mine["row_header_path"] == row["row_header_path"]
                )
    print(f"header paths exact: {exact}/{total} = {exact / total:.3f}")
    assert total > 500 and exact / total >= HEADER_PATH_FLOOR, (exact, total)


def test_a_measurement_row_under_a_rule_is_body_not_header():
    """A reference row ruled off below the header ("FT 66.4 91.9") is data: its values must not become headers."""
    grid = [
        cell(0, 0, "Method", header=True),
        cell(0, 1, "RTE", header=True),
        cell(0, 2, "SST-2", header=True),
        cell(1, 0, "FT", header=True),
        cell(1, 1, "66.4", header=True),
        cell(1, 2, "91.9", header=True),
        cell(2, 0, "MeZO"),
        cell(2, 1, "52.7"),
        cell(2, 2, "90.5"),
    ]
    structure = table_structure(grid)
    assert structure.header_rows == 1
    paths = {r["text"]: r["column_header_path"] for r in structure.cells.iter_rows(named=True)}
    assert paths["66.4"] == ["RTE"] and paths["90.5"] == ["SST-2"]
    # integers are header levels often enough (k = 1, 5, 10; years) to stay headers
    levels = [
        cell(0, 0, "Model", header=True),
        cell(0, 1, "Recall@k", colspan=2, header=True),
        cell(1, 1, "1", header=True),
        cell(1, 2, "5", header=True),
        cell(2, 0, "BM25"),
        cell(2, 1, "0.41"),
        cell(2, 2, "0.63"),
    ]
    assert table_structure(levels).header_rows == 2


def test_row_and_column_lines_name_every_value_by_its_headers():
    grid = [
        cell(0, 0, "Group", rowspan=2, header=True),
        cell(0, 1, "Model", rowspan=2, header=True),
        cell(0, 2, "Wiki", colspan=2, header=True),
        cell(0, 4, "News", header=True),
        cell(1, 2, "ARI", header=True),
        cell(1, 3, "NMI", header=True),
        cell(1, 4, "ARI", header=True),
        cell(2, 0, "Short", rowspan=2),
        cell(2, 1, "BERT"),
        cell(2, 2, "1.0"),
        cell(2, 3, "2.0"),
        cell(2, 4, "3.0"),
        cell(3, 1, "T5"),
        cell(3, 2, "4.0"),
        cell(3, 3, "5.0"),
        cell(3, 4, "6.0"),
    ]
    rows, columns = table_lines(table_structure(grid), caption_head("Table 4", "Table 4: Clustering. Best in bold."))
    assert [r.header_path for r in rows] == [["Short", "BERT"], ["Short", "T5"]]
    assert rows[0].text == "Table 4: Clustering.\nRow: Short > BERT\nWiki > ARI: 1.0; Wiki > NMI: 2.0; News > ARI: 3.0"
    assert rows[0].num_values == 3 and rows[0].index == 2
    assert [c.header_path for c in columns] == [["Wiki", "ARI"], ["Wiki", "NMI"], ["News", "ARI"]]
    assert columns[2].text.endswith("Column: News > ARI\nShort > BERT: 3.0; Short > T5: 6.0")
    assert table_lines(table_structure([cell(0, 0, "", header=True), cell(1, 0, "")]), "Table") == ([], [])
    # a grid read as header only (MinerU can merge a two-row table into one row): each row is still a line
    merged = table_structure([cell(0, 0, "Threshold # Samples", header=True), cell(0, 1, "0.7 886", header=True)])
    flat, _ = table_lines(merged, "Table 13")
    assert [line.text for line in flat] == ["Table 13\nRow 1\nThreshold # Samples | 0.7 886"]


def test_a_full_width_label_row_heads_the_rows_below_it():
    grid = [
        cell(0, 0, "Method", header=True),
        cell(0, 1, "Geo", header=True),
        cell(0, 2, "Temp", header=True),
        cell(1, 0, "LLaMA2 7B", colspan=3),
        cell(2, 0, "SELF-ASK"),
        cell(2, 1, "29.66"),
        cell(2, 2, "26.97"),
        cell(3, 0, "Mistral 7B"),
        cell(3, 1, ""),
        cell(3, 2, ""),
        cell(4, 0, "SELF-ASK"),
        cell(4, 1, "31.2"),
        cell(4, 2, "30.1"),
    ]
    structure = table_structure(grid)
    paths = {(r["row"], r["col"]): r["row_header_path"] for r in structure.cells.iter_rows(named=True)}
    assert paths[(2, 1)] == ["LLaMA2 7B", "SELF-ASK"] and paths[(4, 2)] == ["Mistral 7B", "SELF-ASK"]
    rows, _ = table_lines(structure, "Table 1")
    assert [r.header_path for r in rows] == [["LLaMA2 7B", "SELF-ASK"], ["Mistral 7B", "SELF-ASK"]]


def test_a_blank_row_header_reads_as_the_label_above_it_within_its_group():
    """MinerU's HTML often sets a group label ("triviaqa") in its first row and leaves the rows under it blank, with
    no row span: each blank stub cell of a data row reads as the label last set above it, and a label set further
    left starts a new group whose blanks are not filled from the group before."""
    grid = [cell(0, c, t, header=True) for c, t in enumerate(["Model", "Dataset", "Correctness", "UNLL"])]
    grid.append(cell(1, 0, "Llama-2-chat", rowspan=4))
    for row, dataset, correctness, value in [
        (1, "triviaqa", "bert", "0.020"),
        (2, "", "", "0.014"),
        (3, "", "meteor", "0.034"),
        (4, "squad", "", "0.061"),
    ]:
        grid += [cell(row, 1, dataset), cell(row, 2, correctness), cell(row, 3, value)]
    grid += [cell(5, 0, ""), cell(5, 1, ""), cell(5, 2, ""), cell(5, 3, "")]  # a blank row is not filled
    structure = table_structure(grid)
    paths = {r["row"]: r["row_header_path"] for r in structure.cells.iter_rows(named=True) if r["col"] == 3}
    assert paths[2] == ["Llama-2-chat", "triviaqa", "bert"]
    assert paths[3] == ["Llama-2-chat", "triviaqa", "meteor"]
    assert paths[4] == ["Llama-2-chat", "squad"]  # not the bert of triviaqa's group
    assert paths[5] is None
    rows, _ = table_lines(structure, "Table 2")
    assert any("triviaqa" in r.text and "0.014" in r.text for r in rows)


@pytest.mark.parametrize(
    ("path", "unit"),
    [
        (["Speed", "Latency (ms)"], "ms"),
        (["Acc. [%]"], "%"),
        (["Memory (GB)"], "GB"),
        (["Time (s/iter)"], "s/iter"),
        (["BLEU (ours)"], None),
        (["Default setting (k=31)", "ARI"], None),
        (["(M)"], None),
        (None, None),
    ],
)
def test_units_stated_by_headers(path, unit):
    assert header_unit(path) == unit


def test_caption_head_is_the_first_sentence_with_the_label():
    assert caption_head("Table 2", "Results on the hard split. Best in bold.") == "Table 2: Results on the hard split."
    assert caption_head("Table 2", None) == "Table 2"
    assert len(caption_head(None, "word " * 100)) <= 165
