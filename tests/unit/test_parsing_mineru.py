"""The MinerU backend on real MinerU outputs of the sample corpus (../shared/corpus), plus broken and local layouts."""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
import stat
import sys
import textwrap
from pathlib import Path

import pymupdf
import pytest

from paperlake.lake.inbox import PaperSource, find_mineru_dir, source_for_pdf
from paperlake.parsing import mineru_backend as mineru
from paperlake.parsing.errors import ParseError
from support.fixtures import CORPUS

NUMEROLOGIC = "emnlp2024-012-numerologic"
RANK_CALIBRATION = "emnlp2024-018-rank-calibration"
DOCHIENET = "emnlp2024-065-dochienet"

pytestmark = pytest.mark.usefixtures("corpus")


def _pdf(slug: str) -> Path:
    return next((CORPUS / "inbox").glob(f"*/{slug}.pdf"))


def _source(slug: str, mineru_dir: Path | None | str = "corpus") -> PaperSource:
    source = source_for_pdf(_pdf(slug), CORPUS / "mineru")
    return source if mineru_dir == "corpus" else dataclasses.replace(source, mineru_dir=mineru_dir)


def _copy_cloud(slug: str, destination: Path) -> Path:
    shutil.copytree(CORPUS / "mineru" / slug, destination, ignore=shutil.ignore_patterns("images"))
    for path in destination.iterdir():
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    destination.chmod(destination.stat().st_mode | stat.S_IWUSR)
    return destination


def _make_local_layout(slug: str, root: Path) -> Path:
    """What ``mineru -p <pdf> -o <root>`` writes: <root>/<stem>/auto/<stem>_content_list.json + _middle.json."""
    cloud = CORPUS / "mineru" / slug
    auto = root / slug / "auto"
    auto.mkdir(parents=True)
    shutil.copyfile(next(cloud.glob("*_content_list.json")), auto / f"{slug}_content_list.json")
    shutil.copyfile(next(cloud.glob("*_content_list_v2.json")), auto / f"{slug}_content_list_v2.json")
    if (cloud / "layout.json").exists():
        shutil.copyfile(cloud / "layout.json", auto / f"{slug}_middle.json")
    else:
        with gzip.open(cloud / "layout.json.gz", "rb") as packed, open(auto / f"{slug}_middle.json", "wb") as out:
            shutil.copyfileobj(packed, out)
    (auto / f"{slug}_model.json").write_text("[]")
    return auto


@pytest.fixture(scope="module")
def numerologic():
    return mineru.parse(_source(NUMEROLOGIC))


@pytest.fixture(scope="module")
def rank_calibration_layout():
    return mineru.read_layout(CORPUS / "mineru" / RANK_CALIBRATION, _pdf(RANK_CALIBRATION))


# ---------------------------------------------------------------------------------------------------- real outputs


def test_numerologic_has_its_seven_tables_with_labels_captions_and_cells(numerologic):
    tables = numerologic.rows("tables")
    assert [row["table_label"] for row in tables] == [f"Table {n}" for n in range(1, 8)]
    assert all(row["table_caption"].startswith(row["table_label"] + ":") for row in tables)
    assert all(row["table_content"].startswith("<table>") for row in tables)
    first = tables[0]
    cells = [c for c in numerologic.rows("table_cells") if c["table_id"] == first["table_id"]]
    assert (first["num_rows"], first["num_cols"]) == (6, 6)
    assert [c["cell_text"] for c in cells if c["row_index"] == 0] == [
        "Op.",
        "Num. digit",
        "int/ float",
        "Plain",
        "Numero Logic",
        "Gain",
    ]
    assert all(c["is_header"] == (c["row_index"] == 0) for c in cells)
    assert {row["backend"] for row in tables} == {"mineru"}


def test_table_bbox_is_in_pdf_points_and_holds_the_tables_text(numerologic):
    """content_list boxes are 0–1000 per page; converted with the page size they must frame the PDF's own text."""
    table = numerologic.rows("tables")[0]
    x, y, w, h = table["bbox"]
    with pymupdf.open(_pdf(NUMEROLOGIC)) as document:
        page = document[table["page_number"] - 1]
        inside = page.get_textbox(pymupdf.Rect(x, y, x + w, y + h))
        top_half = page.get_textbox(pymupdf.Rect(x, y, x + w, y + h / 2))
        left_half = page.get_textbox(pymupdf.Rect(x, y, x + w / 2, y + h))
    for value in ("Op.", "88.37", "99.96", "sqrt", "+4.53"):  # first and last rows and columns
        assert value in inside
    assert "Op." in top_half and "+4.53" not in top_half
    assert "Op." in left_half and "+4.53" not in left_half


def test_every_box_lies_within_its_page(numerologic, rank_calibration_layout):
    sizes = {row["page_number"]: (row["page_width"], row["page_height"]) for row in numerologic.rows("pages")}
    for view in ("tables", "images", "equations"):
        for row in numerologic.rows(view):
            x, y, w, h = row["bbox"]
            width, height = sizes[row["page_number"]]
            assert 0 <= x and 0 <= y and w > 0 and h > 0 and x + w <= width and y + h <= height
    pages = {page.page_number: page for page in rank_calibration_layout.pages}
    for block in rank_calibration_layout.blocks:
        x0, y0, x1, y1 = block.bbox
        page = pages[block.page_number]
        assert 0 <= x0 <= x1 <= page.width and 0 <= y0 <= y1 <= page.height, block


def test_pages_come_from_the_pdf(numerologic):
    with pymupdf.open(_pdf(NUMEROLOGIC)) as document:
        expected = [page.get_text() for page in document]
        width = document[0].rect.width
    pages = numerologic.rows("pages")
    assert [row["page_content"] for row in pages] == expected
    assert pages[0]["page_width"] == pytest.approx(width)


def test_front_matter_title_authors_abstract_and_sections(numerologic):
    metadata = numerologic.rows("metadata")[0]
    assert metadata["title"] == "NumeroLogic: Number Encoding for Enhanced LLMs’ Numerical Reasoning"
    assert metadata["authors"] == [
        "Eli Schwartz",
        "Leshem Choshen",
        "Joseph Shtok",
        "Sivan Doveh",
        "Leonid Karlinsky",
        "Assaf Arbelle",
    ]
    assert metadata["abstract"].startswith("Language models struggle with handling numerical data")
    assert metadata["num_pages"] == 7
    sections = {row["section_title"]: row for row in numerologic.rows("sections")}
    assert {"Abstract", "Introduction", "Encoding operands vs. results", "References"} <= set(sections)
    assert sections["Encoding operands vs. results"]["section_number"] == "4.4.1"
    assert sections["Encoding operands vs. results"]["level"] == 3
    assert "<sup>" not in " ".join(row["section_content"] or "" for row in numerologic.rows("sections"))


def test_references_are_one_row_per_entry_even_across_a_column_break(numerologic):
    references = [row["reference_content"] for row in numerologic.rows("references")]
    assert references[0].startswith("Josh Achiam, Steven Adler")
    palm = [text for text in references if "Aakanksha Chowdhery" in text]
    assert len(palm) == 1 and "Paul Barham" in palm[0] and "Palm: Scaling language modeling" in palm[0]
    assert len(references) == 19


def test_equations_carry_clean_latex_and_their_numbers(rank_calibration_layout):
    equations = [b for b in rank_calibration_layout.blocks if b.kind == "equation"]
    assert len(equations) == 28
    assert all(b.latex and "$$" not in b.latex and "\\tag" not in b.latex for b in equations)
    numbers = [b.equation_number for b in equations if b.equation_number]
    assert numbers[:4] == ["(ECE)", "(1)", "(RCE)", "(2)"]
    first = equations[0]
    assert first.latex.startswith("\\mathbb { E } _ { C }") and first.latex.endswith("\\Big ] .")
    assert first.text  # the PDF's own glyphs under the box


def test_split_equation_handles_tags_trailing_numbers_and_plain_latex():
    assert mineru.split_equation("$$\nx = 1 \\tag{3}\n$$") == ("x = 1", "(3)")
    assert mineru.split_equation("$$ a + b \\qquad ( 1 2 ) $$") == ("a + b", "(12)")
    assert mineru.split_equation("$$\nf ( 2 ) = 4\n$$") == ("f ( 2 ) = 4", None)
    assert mineru.split_equation("$$ g ( 2 ) $$") == ("g ( 2 )", None)


def test_table_cells_follow_rowspans_and_colspans():
    cells = mineru.table_cells(
        "<table><tr><th rowspan='2'>Model</th><td colspan=\"2\">Score</td></tr>"
        "<tr><td>A &amp; B</td><td>C</td></tr><tr><td>m</td><td>1</td><td>2</td></tr></table>"
    )
    placed = {(c.row, c.col): (c.text, c.rowspan, c.colspan, c.is_header) for c in cells}
    assert placed == {
        (0, 0): ("Model", 2, 1, True),
        (0, 1): ("Score", 1, 2, True),
        (1, 1): ("A & B", 1, 1, False),
        (1, 2): ("C", 1, 1, False),
        (2, 0): ("m", 1, 1, False),
        (2, 1): ("1", 1, 1, False),
        (2, 2): ("2", 1, 1, False),
    }


def test_captions_misplaced_by_mineru_go_back_to_the_float_above_them(rank_calibration_layout):
    """On page 20 MinerU hands 'Figure 6' (printed under the 1st row of charts) to the 2nd row, and so on."""
    figures = {b.label: b for b in rank_calibration_layout.blocks if b.kind == "figure" and b.page_number == 20}
    assert sorted(figures) == ["Figure 5", "Figure 6", "Figure 7", "Figure 8"]
    assert figures["Figure 6"].bbox[1] == pytest.approx(304, abs=2) and figures["Figure 6"].bbox[3] < 437
    assert figures["Figure 6"].caption.startswith("Figure 6: Results for Meadow")
    assert "(a) AUROC" in figures["Figure 6"].caption  # four sub-figures merged into one figure
    figures_by_label = [b.label for b in rank_calibration_layout.blocks if b.kind == "figure"]
    assert len(figures_by_label) == len(set(figures_by_label)) == 17


def test_two_captions_on_one_table_are_split_between_the_two_tables():
    layout = mineru.read_layout(CORPUS / "mineru" / DOCHIENET, _pdf(DOCHIENET))
    tables = {b.label: b for b in layout.blocks if b.kind == "table" and b.page_number == 7}
    assert set(tables) == {"Table 2", "Table 3"}
    assert tables["Table 2"].bbox[3] < tables["Table 3"].bbox[1]


def test_a_grid_mineru_garbled_is_read_from_the_text_layer_and_a_sound_one_is_kept(rank_calibration_layout):
    """Table 4 (50 rows): MinerU shifts the Llama-2-chat block by a column and leaves its model cell empty."""
    tables = {b.label: b for b in rank_calibration_layout.blocks if b.kind == "table"}
    garbled, sound = tables["Table 4"], tables["Table 2"]
    assert garbled.html is None and garbled.detector == "mineru"
    value = next(c for c in garbled.cells if c.text == "0.101±0.015")
    row = {c.col: c.text for c in garbled.cells if c.row == value.row}
    assert (row[2], row[3]) == ("bert", "0.6")
    model = next(c for c in garbled.cells if c.col == 0 and c.row <= value.row < c.row + c.rowspan)
    assert model.text == "Llama-2-chat"
    with pymupdf.open(_pdf(RANK_CALIBRATION)) as document:
        printed = document[garbled.page_number - 1].get_text("words", clip=pymupdf.Rect(garbled.bbox))
    held = " ".join(c.text for c in garbled.cells).split()
    assert all(word[4] in held for word in printed if word[4][0].isdigit())
    assert sound.html is not None and sound.html.startswith("<table>")  # MinerU's grid kept where it lost nothing


def test_a_table_mineru_left_without_cells_gets_the_words_in_its_box():
    """EfficientRAG's prompt templates are tables MinerU read as images: no HTML, no cells."""
    slug = "emnlp2024-199-efficientrag"
    layout = mineru.read_layout(CORPUS / "mineru" / slug, _pdf(slug))
    table = next(b for b in layout.blocks if b.kind == "table" and b.label == "Table 8")
    text = " ".join(c.text for c in table.cells)
    assert "You are assigned a multi-hop question decomposition task." in text


# ---------------------------------------------------------------------------------------------------- layouts


def test_local_cli_layout_reads_the_same_as_the_cloud_export(tmp_path):
    auto = _make_local_layout(NUMEROLOGIC, tmp_path)
    assert find_mineru_dir(tmp_path, _pdf(NUMEROLOGIC)) == auto
    assert mineru.has_outputs(auto)
    local = mineru.read_layout(auto, _pdf(NUMEROLOGIC))
    cloud = mineru.read_layout(CORPUS / "mineru" / NUMEROLOGIC, _pdf(NUMEROLOGIC))
    assert local == cloud
    assert sum(b.kind == "table" for b in local.blocks) == 7


def test_uncompressed_layout_json_is_read(tmp_path):
    folder = _copy_cloud(NUMEROLOGIC, tmp_path / NUMEROLOGIC)
    with gzip.open(folder / "layout.json.gz", "rb") as packed:
        (folder / "layout.json").write_bytes(packed.read())
    (folder / "layout.json.gz").unlink()
    assert mineru.has_outputs(folder)
    assert len(mineru.read_layout(folder, _pdf(NUMEROLOGIC)).pages) == 7


# ---------------------------------------------------------------------------------------------------- bad inputs


def test_truncated_content_list_is_a_parse_error(tmp_path):
    folder = _copy_cloud(NUMEROLOGIC, tmp_path / NUMEROLOGIC)
    content_list = next(folder.glob("*_content_list.json"))
    content_list.write_text(content_list.read_text()[:5000])
    with pytest.raises(ParseError) as error:
        mineru.read_layout(folder, _pdf(NUMEROLOGIC), paper_key="emnlp2024/numerologic")
    assert error.value.stage == "mineru"
    assert str(error.value).startswith("emnlp2024/numerologic: mineru: ")
    assert "unreadable JSON" in error.value.reason


def test_truncated_gzip_layout_is_a_parse_error(tmp_path):
    folder = _copy_cloud(NUMEROLOGIC, tmp_path / NUMEROLOGIC)
    packed = folder / "layout.json.gz"
    packed.write_bytes(packed.read_bytes()[:2000])
    with pytest.raises(ParseError, match="layout.json.gz: unreadable JSON"):
        mineru.read_layout(folder, _pdf(NUMEROLOGIC))


def test_missing_layout_file_is_a_parse_error(tmp_path):
    folder = _copy_cloud(NUMEROLOGIC, tmp_path / NUMEROLOGIC)
    (folder / "layout.json.gz").unlink()
    assert not mineru.has_outputs(folder)
    with pytest.raises(ParseError, match="no \\*_middle.json, layout.json or layout.json.gz"):
        mineru.read_layout(folder, _pdf(NUMEROLOGIC))


def test_page_count_mismatch_with_the_pdf_is_a_parse_error(tmp_path):
    auto = _make_local_layout(NUMEROLOGIC, tmp_path)
    middle = auto / f"{NUMEROLOGIC}_middle.json"
    data = json.loads(middle.read_text())
    data["pdf_info"] = data["pdf_info"][:-1]
    middle.write_text(json.dumps(data))
    with pytest.raises(ParseError, match="has 6 pages but the PDF has 7"):
        mineru.read_layout(auto, _pdf(NUMEROLOGIC))


def test_block_on_a_page_the_pdf_does_not_have_is_a_parse_error(tmp_path):
    auto = _make_local_layout(NUMEROLOGIC, tmp_path)
    content_list = auto / f"{NUMEROLOGIC}_content_list.json"
    items = json.loads(content_list.read_text())
    items.append({"type": "text", "text": "stray", "bbox": [0, 0, 10, 10], "page_idx": 7})
    content_list.write_text(json.dumps(items))
    with pytest.raises(ParseError, match="page index 7; the PDF has 7 pages"):
        mineru.read_layout(auto, _pdf(NUMEROLOGIC))


def test_parse_without_mineru_outputs_is_a_parse_error(tmp_path):
    with pytest.raises(ParseError, match="mineru_dir is not set"):
        mineru.parse(_source(NUMEROLOGIC, mineru_dir=None))
    assert not mineru.has_outputs(tmp_path)
    assert not mineru.has_outputs(tmp_path / "missing")


# ---------------------------------------------------------------------------------------------------- run_mineru


def _fake_mineru(tmp_path: Path, body: str) -> str:
    """A stand-in ``mineru`` executable: a Python script run by this interpreter, like a venv entry point."""
    script = tmp_path / "bin" / "mineru"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    script.chmod(0o755)
    return str(script)


def test_run_mineru_returns_the_folder_with_the_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/not/for/mineru")
    prepared = _make_local_layout(NUMEROLOGIC, tmp_path / "prepared")
    executable = _fake_mineru(
        tmp_path,
        f"""
        import os, shutil, sys
        from pathlib import Path
        args = sys.argv[1:]
        pdf, out = Path(args[args.index("-p") + 1]), Path(args[args.index("-o") + 1])
        if "PYTHONPATH" in os.environ or args[-2:] != ["-b", "pipeline"]:
            sys.exit(5)
        shutil.copytree({str(prepared)!r}, out / pdf.stem / "auto")
    """,
    )
    out = mineru.run_mineru(_pdf(NUMEROLOGIC), tmp_path / "out", executable, ["-b", "pipeline"], timeout=60)
    assert out == tmp_path / "out" / NUMEROLOGIC / "auto"
    assert len(mineru.read_layout(out, _pdf(NUMEROLOGIC)).pages) == 7


def test_run_mineru_failure_reports_the_stderr_tail(tmp_path):
    executable = _fake_mineru(
        tmp_path,
        """
        import sys
        print("loading models", file=sys.stderr)
        print("RuntimeError: no layout model weights", file=sys.stderr)
        sys.exit(3)
    """,
    )
    with pytest.raises(ParseError) as error:
        mineru.run_mineru(_pdf(NUMEROLOGIC), tmp_path / "out", executable, [], paper_key="emnlp2024/x")
    assert error.value.paper_key == "emnlp2024/x" and error.value.stage == "mineru"
    assert "exited with 3" in error.value.reason and "no layout model weights" in error.value.reason


def test_run_mineru_without_outputs_timeout_or_executable_is_a_parse_error(tmp_path):
    silent = _fake_mineru(tmp_path, "print('done')\n")
    with pytest.raises(ParseError, match="wrote no content list"):
        mineru.run_mineru(_pdf(NUMEROLOGIC), tmp_path / "out", silent, [])
    sleeper = tmp_path / "sleeper"
    sleeper.mkdir()
    slow = _fake_mineru(sleeper, "import time\ntime.sleep(60)\n")
    with pytest.raises(ParseError, match="timed out after 1 s"):
        mineru.run_mineru(_pdf(NUMEROLOGIC), tmp_path / "out", slow, [], timeout=1)
    with pytest.raises(ParseError, match="cannot start"):
        mineru.run_mineru(_pdf(NUMEROLOGIC), tmp_path / "out", str(tmp_path / "no-such-mineru"), [])


# ---------------------------------------------------------------------------------------------------- corpus


@pytest.mark.slow
def test_whole_corpus_parses_with_labelled_floats_and_boxes_inside_pages():
    slugs = sorted(path.name for path in (CORPUS / "mineru").iterdir() if path.is_dir())
    assert len(slugs) == 19
    totals: dict[str, int] = {}
    for slug in slugs:
        parsed = mineru.parse(_source(slug))
        for view, count in parsed.counts().items():
            totals[view] = totals.get(view, 0) + count
        sizes = {row["page_number"]: (row["page_width"], row["page_height"]) for row in parsed.rows("pages")}
        for view, label in (("tables", "table_label"), ("images", "image_label")):
            assert all(row[label] for row in parsed.rows(view)), (slug, view)
        for view in ("tables", "images", "equations"):
            for row in parsed.rows(view):
                x, y, w, h = row["bbox"]
                width, height = sizes[row["page_number"]]
                assert 0 <= x and 0 <= y and x + w <= width and y + h <= height, (slug, view, row["bbox"])
        assert parsed.rows("metadata")[0]["authors"], slug
        assert parsed.rows("metadata")[0]["abstract"], slug
    assert totals["pages"] == 313
    assert totals["equations"] == 225
    assert totals["tables"] >= 180 and totals["images"] >= 100 and totals["references"] >= 900


@pytest.mark.parametrize(
    ("cell", "text"),
    [
        ("$1 4 ^ { 1 9 }$", "1419"),
        ("45.2 $\\pm 0 . 3$", "45.2 ± 0.3"),
        ("$\\mathbf { 7 7 . 3 }$", "77.3"),
        ("$\\mathrm { o r i }$", "ori"),
        ("$\\uparrow$ BLEU", "↑ BLEU"),
        ("no math, 12", "no math, 12"),
    ],
)
def test_inline_math_in_table_cells_reads_as_printed(cell, text):
    from paperlake.parsing.inline_math import plain_text
    from paperlake.parsing.mineru_backend import table_cells

    assert plain_text(cell) == text
    assert (
        table_cells(f"<table><tr><td>Model</td><td>X</td></tr><tr><td>A</td><td>{cell}</td></tr></table>")[-1].text
        == text
    )


def test_table_lines_state_what_the_paper_defines_their_labels_to_mean():
    """The arithmetic paper's Table 1 labels its rows 2D+ … 2D/ (defined in the text: "addition (2D+)") and a column
    "ori" (defined in the caption, written in inline LaTeX: '"ori": original model')."""
    parsed = mineru.parse(_source("emnlp2024-193-arithmetic-mechanism"))
    table_1 = next(t["table_id"] for t in parsed.rows("tables") if t["table_label"] == "Table 1")
    rows = {tuple(r["row_header_path"]): r for r in parsed.rows("table_rows") if r["table_id"] == table_1}
    columns = {tuple(c["column_header_path"]): c for c in parsed.rows("table_columns") if c["table_id"] == table_1}
    assert rows[("2D+",)]["header_glossary"] == ["2D+: addition"]
    assert rows[("2D*",)]["header_glossary"] == ["2D*: multiplication"]  # Markdown's "2D\*" in the text
    assert "\nRow: 2D+ (addition)\n" in rows[("2D+",)]["row_text"]
    assert rows[("all",)]["header_glossary"] == []
    assert columns[("ori",)]["header_glossary"] == ["ori: original model"]
    # the caption heading each line reads as printed, not as MinerU's letter-by-letter LaTeX
    assert "\\mathrm" not in columns[("ori",)]["column_text"] and "original model" in columns[("ori",)]["column_text"]
