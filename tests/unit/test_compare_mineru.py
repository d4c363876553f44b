"""The PyMuPDF backend measured against MinerU's outputs for the same papers (the issue's acceptance numbers)."""

from __future__ import annotations

import shutil
import time

import pytest

from paperlake.lake.inbox import scan_inbox
from paperlake.parsing.compare import combine, compare_with_mineru, format_table, read_mineru_elements
from paperlake.parsing.geometry import iou
from paperlake.parsing.pymupdf_backend import parse
from support.fixtures import CORPUS_INBOX, CORPUS_MINERU

# Figures reach the 0.9 (0.909, precision 0.741; pymupdf-4 had 0.858 / 0.795). A figure of several plots
# is now one whole-figure row plus one row per plot, and a MinerU figure counts as found by either granularity:
# MinerU keeps some such figures whole (CUTE page 4, the stacked critical-difference diagrams) and cuts others
# apart (CUTE page 9). Precision counts every row of ours, so each split figure costs some: its whole and its
# panels cannot all match. Of the 16 MinerU figures still missed, 11 are prompt boxes the authors caption
# "Table N" (a table here, an image for MinerU), 4 are plots inside one raster image that geometry cannot cut,
# and 1 is a part of a diagram MinerU boxes on its own. The secondary region recall (any figure or table of ours
# covering the MinerU figure) reaches 0.972: the prompt boxes are found, only typed by their caption.
FIGURE_RECALL_FLOOR = 0.9
FIGURE_REGION_RECALL_FLOOR = 0.95
TABLE_RECALL_TARGET = 0.9

pytestmark = pytest.mark.usefixtures("corpus")


def corpus_source(stem_end: str):
    return next(s for s in scan_inbox(CORPUS_INBOX, CORPUS_MINERU) if s.paper_key.endswith(stem_end))


def numerologic():
    return corpus_source("numerologic")


def test_compare_one_paper():
    source = numerologic()
    scores = compare_with_mineru(parse(source), source.mineru_dir)
    assert scores["tables"]["reference"] == 7 and scores["tables"]["recall"] >= 6 / 7
    assert scores["figures"]["recall"] == 1.0
    assert scores["sections"]["recall"] >= 0.9
    assert scores["equations"] == {"reference": 0, "found": 0, "matched": 0, "recall": None, "precision": None}
    assert scores["figure regions"]["precision"] is None  # recall only: "found" mixes figures and tables
    assert scores["figure regions"]["matched"] >= scores["figures"]["matched"]


def test_a_mineru_figure_is_found_whole_or_as_a_panel():
    """CUTE's Figures 2 and 4 are the same kind of 2x4 grid: MinerU keeps the first whole (one box) and cuts the
    second into its eight plots. Our whole rows match the one, our panel rows the other; precision counts both."""
    source = corpus_source("cute-token-understanding")
    parsed = parse(source)
    scores = compare_with_mineru(parsed, source.mineru_dir)["figures"]
    wholes = sum(row["parent_image_id"] is None for row in parsed.rows("images"))
    assert scores["recall"] == 1.0 and scores["reference"] > wholes
    assert scores["found"] == len(parsed.rows("images")) > wholes


def test_region_recall_counts_prompt_boxes_the_authors_caption_as_tables():
    """EfficientRAG sets its prompts in boxes captioned "Table N": tables here, images for MinerU. The strict figure
    score misses them; the secondary region recall finds them under our tables."""
    source = corpus_source("efficientrag")
    scores = compare_with_mineru(parse(source), source.mineru_dir)
    assert scores["figure regions"]["reference"] == scores["figures"]["reference"]
    assert scores["figure regions"]["matched"] - scores["figures"]["matched"] >= 10


def test_content_list_reader_agrees_with_the_middle_json(tmp_path):
    source = numerologic()
    content_list = next(source.mineru_dir.glob("*_content_list.json"))
    shutil.copy(content_list, tmp_path / content_list.name)  # a MinerU folder without layout.json
    sizes = {page: (595.276, 841.89) for page in range(1, 8)}
    from_list = read_mineru_elements(tmp_path, sizes)
    from_middle = read_mineru_elements(source.mineru_dir)
    for kind in ("tables", "figures"):
        assert len(from_list.boxes[kind]) == len(from_middle.boxes[kind])
        for (page_a, box_a), (page_b, box_b) in zip(from_list.boxes[kind], from_middle.boxes[kind]):
            assert page_a == page_b and iou(box_a, box_b) > 0.9
    assert len(from_list.headings) == len(from_middle.headings)


@pytest.mark.slow
def test_whole_corpus_against_mineru(corpus):
    sources = scan_inbox(corpus / "inbox", corpus / "mineru")
    results, pages, cpu_seconds = [], 0, 0.0
    wall_start = time.perf_counter()
    for source in sources:
        assert source.mineru_dir is not None, source.paper_key
        started = time.process_time()
        parsed = parse(source)
        cpu_seconds += time.process_time() - started
        pages += len(parsed.rows("pages"))
        results.append(compare_with_mineru(parsed, source.mineru_dir))
    scores = combine(results)
    print(
        f"\n{len(sources)} papers, {pages} pages: {pages / cpu_seconds:.1f} pages per CPU second, "
        f"{pages / (time.perf_counter() - wall_start):.1f} pages/s wall clock including the comparison"
    )
    print(format_table(scores))
    assert scores["tables"]["recall"] >= TABLE_RECALL_TARGET
    assert scores["figures"]["recall"] >= FIGURE_RECALL_FLOOR
    assert scores["figure regions"]["recall"] >= max(FIGURE_REGION_RECALL_FLOOR, scores["figures"]["recall"])
    assert scores["sections"]["recall"] >= 0.9
    # The speed is printed, not asserted: a CPU-time floor failed on CI's slower machine (12.4 pages per CPU second
    # against 13) with no change to the parser. Speed is measured side by side with MinerU's flash tier on the same
    # PDFs in the same run by benchmarks/parse_fidelity.py and benchmarks/ingest.py.
