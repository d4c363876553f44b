"""A NeuSym-shaped sample warehouse built from the shared sample corpus, for vector tests and benchmarks.

Not the product warehouse (dbt builds that): this stands in for it where the vector layer needs realistic rows
before the dbt models exist. Page texts come from the PDFs (PyMuPDF); sections, paragraph chunks, tables, figures,
equations and references come from the MinerU outputs shipped with the corpus (``corpus/mineru/<slug>/``), whose
boxes are on a 0–1000 page scale and are converted to ``[x0, y0, w, h]`` PDF points.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import duckdb

from paperlake.lake.ids import element_id, page_id, paper_id, venue_key
from paperlake.parsing.assemble import split_sentences
from paperlake.parsing.citations import link_citations
from paperlake.parsing.figure_text import text_inside, word_lines

WAREHOUSE_DDL = """
create table if not exists metadata (
  paper_id uuid primary key, title varchar, abstract varchar, num_pages integer, conference_full varchar,
  conference_abbreviation varchar, pub_year integer, volume varchar, download_url varchar, bibtex varchar,
  authors varchar[], front_matter varchar, pdf_path varchar, tldr varchar, tags varchar[], sha256 varchar);
create table if not exists pages (
  page_id varchar primary key, page_number integer, page_width integer, page_height integer, page_content varchar,
  page_summary varchar, ref_paper_id uuid);
create table if not exists sections (
  section_id varchar primary key, section_title varchar, section_content varchar, section_summary varchar,
  ordinal integer, page_numbers integer[], ref_paper_id uuid);
create table if not exists chunks (
  chunk_id varchar primary key, text_content varchar, ordinal integer, ref_paper_id uuid, ref_page_id varchar);
create table if not exists tables (
  table_id varchar primary key, table_caption varchar, table_content varchar, table_summary varchar,
  bounding_box integer[4], ordinal integer, ref_paper_id uuid, ref_page_id varchar);
create table if not exists table_rows (
  row_id varchar primary key, row_text varchar, row_summary varchar, row_index integer, ref_table_id varchar,
  ref_paper_id uuid, ref_page_id varchar, page_number integer);
create table if not exists table_columns (
  column_id varchar primary key, column_text varchar, column_summary varchar, col_index integer,
  ref_table_id varchar, ref_paper_id uuid, ref_page_id varchar, page_number integer);
create table if not exists images (
  image_id varchar primary key, image_caption varchar, image_text varchar, image_summary varchar,
  bounding_box integer[4], ordinal integer, ref_paper_id uuid, ref_page_id varchar);
create table if not exists equations (
  equation_id varchar primary key, equation_content varchar, equation_passage varchar, ordinal integer,
  ref_paper_id uuid, ref_page_id varchar);
create table if not exists reference (
  reference_id varchar primary key, reference_content varchar, citing_context varchar, ordinal integer,
  ref_paper_id uuid, ref_page_id varchar);
"""


@dataclass(frozen=True)
class SamplePaper:
    slug: str
    paper_id: str
    title: str
    pdf_path: Path
    pages: int


def corpus_papers(corpus_dir: str | Path) -> list[SamplePaper]:
    """The papers of the corpus's manifests, with their AirQA paper ids."""
    corpus = Path(corpus_dir)
    papers = []
    for manifest in sorted((corpus / "inbox").glob("*/manifest.csv")):
        with open(manifest, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                pid = paper_id(row["title"], venue_key(row["conference"], row["year"]))
                papers.append(
                    SamplePaper(
                        Path(row["file"]).stem, pid, row["title"], manifest.parent / row["file"], int(row["pages"])
                    )
                )
    return sorted(papers, key=lambda p: p.slug)


def _box(bbox: list[float], width: float, height: float) -> list[int]:
    x0, y0, x1, y1 = bbox
    return [
        round(x0 * width / 1000),
        round(y0 * height / 1000),
        max(1, round((x1 - x0) * width / 1000)),
        max(1, round((y1 - y0) * height / 1000)),
    ]


def _content_list(corpus: Path, slug: str) -> list[dict]:
    folder = corpus / "mineru" / slug
    files = [f for f in folder.glob("*_content_list.json") if not f.name.endswith("_v2.json")]
    return json.loads(files[0].read_text(encoding="utf-8")) if files else []


def build_sample_warehouse(
    db_path: str | Path, corpus_dir: str | Path, slugs: Iterable[str] | None = None
) -> list[SamplePaper]:
    """Write (replace) the given papers (default: all) into a DuckDB file with the warehouse tables."""
    import pymupdf

    corpus = Path(corpus_dir)
    wanted = set(slugs) if slugs is not None else None
    papers = [p for p in corpus_papers(corpus) if wanted is None or p.slug in wanted]
    con = duckdb.connect(str(db_path))
    try:
        con.execute(WAREHOUSE_DDL)
        for paper in papers:
            _delete_paper(con, paper.paper_id)
            with pymupdf.open(paper.pdf_path) as document:
                sizes = [(page.rect.width, page.rect.height) for page in document]
                texts = [page.get_text() for page in document]
                words = [word_lines(page.get_text("words")) for page in document]
            _insert_paper(con, corpus, paper, sizes, texts, words)
    finally:
        con.close()
    return papers


def _delete_paper(con: duckdb.DuckDBPyConnection, pid: str) -> None:
    con.execute("delete from metadata where paper_id = ?", [pid])
    for table in (
        "pages",
        "sections",
        "chunks",
        "tables",
        "table_rows",
        "table_columns",
        "images",
        "equations",
        "reference",
    ):
        con.execute(f'delete from "{table}" where ref_paper_id = ?', [pid])


def _insert_paper(con, corpus: Path, paper: SamplePaper, sizes, texts, words) -> None:
    pid = paper.paper_id
    items = _content_list(corpus, paper.slug)
    pages = [(page_id(pid, n), n, round(w), round(h), texts[n - 1], None, pid) for n, (w, h) in enumerate(sizes, 1)]
    con.executemany("insert into pages values (?, ?, ?, ?, ?, ?, ?)", pages)

    sections, chunks, tables, images, equations, references = [], [], [], [], [], []
    lines: dict[str, list[tuple]] = {"table_rows": [], "table_columns": []}
    abstract_parts: list[str] = []
    current: dict | None = None
    per_page: dict[tuple[str, int], int] = {}

    def ordinal(kind: str, page: int) -> int:
        per_page[(kind, page)] = per_page.get((kind, page), -1) + 1
        return per_page[(kind, page)]

    for item in items:
        kind = item.get("type")
        page = int(item.get("page_idx", 0)) + 1
        if page > len(sizes):
            continue
        ref_page = page_id(pid, page)
        width, height = sizes[page - 1]
        if kind == "text" and item.get("text_level"):
            current = {"title": item["text"].strip(), "content": [], "pages": [page]}
            sections.append(current)
            continue
        if kind == "text":
            text = (item.get("text") or "").strip()
            if not text:
                continue
            if current is not None:
                current["content"].append(text)
                if page not in current["pages"]:
                    current["pages"].append(page)
                if current["title"].lower().endswith("abstract"):
                    abstract_parts.append(text)
            n = len(chunks)
            chunks.append((element_id(pid, "chunk", n), text, n, pid, ref_page))
        elif kind == "table":
            n = ordinal("table", page)
            caption = " ".join(item.get("table_caption") or []) or None
            table_id = element_id(pid, "table", page, n)
            tables.append(
                (table_id, caption, item.get("table_body"), None, _box(item["bbox"], width, height), n, pid, ref_page)
            )
            _add_lines(lines, table_id, caption, item.get("table_body"), pid, ref_page, page)
        elif kind in ("image", "chart"):
            n = ordinal("image", page)
            caption = " ".join(item.get("image_caption") or item.get("chart_caption") or []) or None
            x, y, w, h = box = _box(item["bbox"], width, height)
            text = text_inside(words[page - 1], (x, y, x + w, y + h))
            images.append((element_id(pid, "image", page, n), caption, text, None, box, n, pid, ref_page))
        elif kind == "equation":
            n = ordinal("equation", page)
            content = (item.get("text") or "").strip()  # (MinerU's items carry no sentences around it)
            equations.append((element_id(pid, "equation", page, n), content, content, n, pid, ref_page))
        elif kind == "list" and item.get("sub_type") == "ref_text":
            for entry in item.get("list_items") or []:
                n = len(references)
                references.append((element_id(pid, "reference", n), entry.strip(), n, pid, ref_page))

    # the citing sentences as the parser links them (paperlake.parsing.citations), from the body paragraphs
    linked = [{"reference_content": row[1]} for row in references]
    link_citations(linked, (sentence for chunk in chunks for sentence in split_sentences(chunk[1])))
    references = [(*row[:2], link["citing_context"], *row[2:]) for row, link in zip(references, linked)]
    section_rows = [
        (element_id(pid, "section", i), s["title"], "\n".join(s["content"]) or None, None, i, s["pages"], pid)
        for i, s in enumerate(sections)
    ]
    bibtex = (
        f"@inproceedings{{{paper.slug.replace('-', '_')},\n  title = {{{paper.title}}},\n"
        f"  booktitle = {{{paper.slug.split('-')[0].upper()}}}\n}}"
    )
    con.execute(
        "insert into metadata (paper_id, title, abstract, num_pages, bibtex, pdf_path, authors, tags) "
        "values (?, ?, ?, ?, ?, ?, [], [])",
        [pid, paper.title, " ".join(abstract_parts) or None, len(sizes), bibtex, str(paper.pdf_path.resolve())],
    )
    for table, rows, width in (
        ("sections", section_rows, 7),
        ("chunks", chunks, 5),
        ("tables", tables, 8),
        ("table_rows", lines["table_rows"], 8),
        ("table_columns", lines["table_columns"], 8),
        ("images", images, 8),
        ("equations", equations, 6),
        ("reference", references, 6),
    ):
        if rows:
            con.executemany(f'insert into "{table}" values ({", ".join("?" * width)})', rows)


def _add_lines(
    lines: dict[str, list[tuple]],
    table_id: str,
    caption: str | None,
    html: str | None,
    pid: str,
    ref_page: str,
    page: int,
) -> None:
    """The table's row and column lines (HD-RAG's representation), as the parse stage makes them."""
    from dataclasses import asdict

    from paperlake.parsing.mineru_backend import table_cells
    from paperlake.parsing.table_structure import caption_head, table_lines, table_structure

    if not html:
        return
    rows, columns = table_lines(table_structure([asdict(c) for c in table_cells(html)]), caption_head(None, caption))
    lines["table_rows"] += [
        (element_id(table_id, "row", line.index), line.text, None, line.index, table_id, pid, ref_page, page)
        for line in rows
    ]
    lines["table_columns"] += [
        (element_id(table_id, "column", line.index), line.text, None, line.index, table_id, pid, ref_page, page)
        for line in columns
    ]
