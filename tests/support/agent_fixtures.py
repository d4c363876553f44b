"""Shared test material for the agent: a small warehouse built from the catalogue, a PDF, fake vector and formula
backends. Test modules import the fixtures from here; tests/unit/test_agent_fixtures.py checks the material itself."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pymupdf
import pytest

from agent.backends import CollectionInfo, Hit, InvalidFilter, ToolOutcome
from agent.env import AgentEnv
from paperlake.config import Settings
from paperlake.lake.ids import element_id, page_id, paper_id
from paperlake.runtime.safe_eval import SafeEvalError, safe_eval
from paperlake.runtime.sql_sandbox import ReadOnlyWarehouse
from schemas.warehouse import catalogue

CALIBRATION = paper_id("Rank Calibration for Language Model Uncertainty", "emnlp2024")
LORETTA = paper_id("LoRETTA: Low-Rank Economic Tensor-Train Adaptation", "naacl2024")
TABLE_ID = element_id(CALIBRATION, "table", 2, 0)
IMAGE_ID = element_id(CALIBRATION, "image", 2, 0)
CHUNK_IDS = [element_id(CALIBRATION, "chunk", i) for i in range(3)] + [element_id(LORETTA, "chunk", 0)]
TABLE_HTML = (
    "<table><tr><th>Method</th><th>SST-2</th><th>MNLI</th></tr>"
    "<tr><td>Baseline</td><td>68.5</td><td>61.0</td></tr>"
    "<tr><td>RankCal</td><td>71.2</td><td>64.3</td></tr></table>"
)


def make_pdf(path: Path) -> None:
    document = pymupdf.open()
    for number in (1, 2):
        page = document.new_page(width=612, height=792)
        page.insert_text((72, 72), f"Rank Calibration page {number}", fontsize=14)
        if number == 2:
            page.draw_rect(pymupdf.Rect(72, 100, 400, 300), color=(0, 0, 1), width=2)
            page.insert_text((80, 320), "Figure 3: WER of DD2 and NV1", fontsize=10)
    document.save(str(path))
    document.close()


def _rows(home: Path) -> dict[str, list[dict[str, Any]]]:
    pdf = home / "inbox" / "emnlp2024" / "rank-calibration.pdf"
    return {
        "metadata": [
            {
                "paper_id": CALIBRATION,
                "title": "Rank Calibration for Language Model Uncertainty",
                "abstract": "We propose rank calibration, a principled way to assess uncertainty measures of language "
                "models, and show it improves SST-2 accuracy.",
                "num_pages": 2,
                "conference_full": "Empirical Methods in Natural Language Processing",
                "conference_abbreviation": "EMNLP",
                "pub_year": 2024,
                "volume": "emnlp2024",
                "venue": "emnlp2024",
                "authors": ["Xinmeng Huang", "Shuo Li"],
                "front_matter": "Xinmeng Huang, Shuo Li\nUniversity of Pennsylvania\nxinmengh@upenn.edu",
                "pdf_path": str(pdf),
                "bibtex": "@inproceedings{huang2024}",
            },
            {
                "paper_id": LORETTA,
                "title": "LoRETTA: Low-Rank Economic Tensor-Train Adaptation",
                "abstract": "Tensor-train adaptation for ultra-low-parameter fine-tuning of large language models.",
                "num_pages": 1,
                "conference_abbreviation": "NAACL",
                "pub_year": 2024,
                "volume": "naacl2024",
                "venue": "naacl2024",
                "authors": ["Yifan Yang"],
                "pdf_path": str(home / "missing.pdf"),
            },
        ],
        "pages": [
            {
                "page_id": page_id(CALIBRATION, 1),
                "page_number": 1,
                "page_width": 612,
                "page_height": 792,
                "page_content": "Rank Calibration for Language Model Uncertainty. Introduction. Uncertainty measures "
                "are compared by rank calibration error.",
                "ref_paper_id": CALIBRATION,
            },
            {
                "page_id": page_id(CALIBRATION, 2),
                "page_number": 2,
                "page_width": 612,
                "page_height": 792,
                "page_content": "Table 2 reports SST-2 accuracy: RankCal 71.2 versus Baseline 68.5. Figure 3: WER "
                "of DD2 and NV1.",
                "ref_paper_id": CALIBRATION,
            },
            {
                "page_id": page_id(LORETTA, 1),
                "page_number": 1,
                "page_width": 612,
                "page_height": 792,
                "page_content": "LoRETTA uses tensor-train decomposition with 1.2K trainable parameters.",
                "ref_paper_id": LORETTA,
            },
        ],
        "chunks": [
            {
                "chunk_id": CHUNK_IDS[0],
                "text_content": "Uncertainty measures are compared by rank calibration error (RCE).",
                "ordinal": 0,
                "ref_paper_id": CALIBRATION,
                "ref_page_id": page_id(CALIBRATION, 1),
                "page_number": 1,
            },
            {
                "chunk_id": CHUNK_IDS[1],
                "text_content": "Table 2 reports SST-2 accuracy: RankCal reaches 71.2 while the Baseline reaches 68.5.",
                "ordinal": 1,
                "ref_paper_id": CALIBRATION,
                "ref_page_id": page_id(CALIBRATION, 2),
                "page_number": 2,
            },
            {
                "chunk_id": CHUNK_IDS[2],
                "text_content": "Figure 3 shows the WER of DD2 and NV1 on the test set.",
                "ordinal": 2,
                "ref_paper_id": CALIBRATION,
                "ref_page_id": page_id(CALIBRATION, 2),
                "page_number": 2,
            },
            {
                "chunk_id": CHUNK_IDS[3],
                "text_content": "LoRETTA trains only 1.2K parameters with tensor-train adapters.",
                "ordinal": 0,
                "ref_paper_id": LORETTA,
                "ref_page_id": page_id(LORETTA, 1),
                "page_number": 1,
            },
        ],
        "tables": [
            {
                "table_id": TABLE_ID,
                "table_caption": "Table 2: Accuracy on SST-2 and MNLI.",
                "table_content": TABLE_HTML,
                "bounding_box": [72, 400, 468, 120],
                "ordinal": 0,
                "ref_paper_id": CALIBRATION,
                "ref_page_id": page_id(CALIBRATION, 2),
                "page_number": 2,
                "table_label": "Table 2",
                "num_rows": 3,
                "num_cols": 3,
            },
        ],
        "table_rows": [
            {
                "row_id": element_id(TABLE_ID, "row", index),
                "row_index": index,
                "row_header_path": [label],
                "row_header": label,
                "num_values": 2,
                "ref_table_id": TABLE_ID,
                "ref_paper_id": CALIBRATION,
                "ref_page_id": page_id(CALIBRATION, 2),
                "page_number": 2,
                "row_text": f"Table 2: Accuracy on SST-2 and MNLI.\nRow: {label}\nSST-2: {sst}; MNLI: {mnli}",
                "row_summary": "The proposed calibration method leads both benchmarks." if label == "RankCal" else None,
            }
            for index, label, sst, mnli in ((1, "Baseline", 68.5, 61.0), (2, "RankCal", 71.2, 64.3))
        ],
        "table_columns": [
            {
                "column_id": element_id(TABLE_ID, "column", index),
                "col_index": index,
                "column_header_path": [label],
                "column_header": label,
                "num_values": 2,
                "ref_table_id": TABLE_ID,
                "ref_paper_id": CALIBRATION,
                "ref_page_id": page_id(CALIBRATION, 2),
                "page_number": 2,
                "column_text": f"Table 2: Accuracy on SST-2 and MNLI.\nColumn: {label}\n"
                f"Baseline: {base}; RankCal: {ours}",
            }
            for index, label, base, ours in ((1, "SST-2", 68.5, 71.2), (2, "MNLI", 61.0, 64.3))
        ],
        "images": [
            {
                "image_id": IMAGE_ID,
                "image_caption": "Figure 3: WER of DD2 and NV1.",
                "image_text": "DD2  NV1\nWord error rate (%)\n12.4  17.9",
                "bounding_box": [72, 100, 328, 200],
                "ordinal": 0,
                "ref_paper_id": CALIBRATION,
                "ref_page_id": page_id(CALIBRATION, 2),
                "page_number": 2,
                "image_label": "Figure 3",
            },
        ],
        "equations": [
            {
                "equation_id": element_id(CALIBRATION, "equation", 1, 0),
                "equation_content": r"RCE = \sum_i |r_i - c_i|",
                "equation_passage": r"RCE = \sum_i |r_i - c_i|",
                "ordinal": 0,
                "ref_paper_id": CALIBRATION,
                "ref_page_id": page_id(CALIBRATION, 1),
                "page_number": 1,
                "bounding_box": [100, 500, 300, 40],
            },
        ],
        "reference": [
            {
                "reference_id": element_id(CALIBRATION, "reference", 0),
                "reference_content": "Vaswani et al. 2017.",
                "ordinal": 0,
                "ref_paper_id": CALIBRATION,
                "ref_page_id": page_id(CALIBRATION, 2),
                "page_number": 2,
            },
        ],
    }


def build_warehouse(home: Path) -> Path:
    """``home/warehouse.duckdb`` with every catalogued table (real column names and types) and a few rows."""
    home.mkdir(parents=True, exist_ok=True)
    pdf = home / "inbox" / "emnlp2024" / "rank-calibration.pdf"
    pdf.parent.mkdir(parents=True, exist_ok=True)
    make_pdf(pdf)
    path = home / "warehouse.duckdb"
    rows = _rows(home)
    with duckdb.connect(str(path)) as con:
        for table in catalogue():
            columns = ", ".join(f'"{c.name}" {c.data_type}' for c in table.columns)
            con.execute(f'create table "{table.name}" ({columns})')
            for row in rows.get(table.name, []):
                names = list(row)
                marks = ", ".join("?" for _ in names)
                con.execute(
                    f'insert into "{table.name}" ({", ".join(names)}) values ({marks})', [row[n] for n in names]
                )
    return path


class FakeVectors:
    """Keyword-overlap search over the warehouse's encodable text cells; records every call."""

    def __init__(self, warehouse: Path) -> None:
        self.calls: list[dict[str, Any]] = []
        self.entities: list[Hit] = []
        with duckdb.connect(str(warehouse), read_only=True) as con:
            for table in catalogue():
                page = "page_number" if any(c.name == "page_number" for c in table.columns) else "null"
                paper = "ref_paper_id" if any(c.name == "ref_paper_id" for c in table.columns) else "paper_id"
                for column in table.columns:
                    if column.encodable != "text":
                        continue
                    for pk, pid, number, text in con.execute(
                        f'select cast("{table.primary_key}" as varchar), cast({paper} as varchar), {page}, '
                        f'"{column.name}" from "{table.name}" where "{column.name}" is not null'
                    ).fetchall():
                        self.entities.append(Hit(0.0, pid, number or 1, table.name, column.name, pk, text))

    def collections(self) -> list[CollectionInfo]:
        return [
            CollectionInfo(
                "text_bm25_en",
                "text",
                "bm25",
                "BM25",
                views=sorted({(e.table_name, e.column_name) for e in self.entities}),
            ),
            CollectionInfo(
                "image_clip_clip_vit_base_patch32",
                "image",
                "clip-vit-base-patch32",
                "COSINE",
                512,
                views=[("images", "bounding_box"), ("tables", "bounding_box")],
            ),
        ]

    def search(
        self,
        query: str,
        collection: str,
        table_name: str | None,
        column_name: str | None,
        filter: str = "",
        limit: int = 5,
    ) -> list[Hit]:
        self.calls.append(
            dict(
                query=query,
                collection=collection,
                table_name=table_name,
                column_name=column_name,
                filter=filter,
                limit=limit,
            )
        )
        if "page_number ==" in filter and "'" in filter.split("page_number ==")[1][:3]:
            raise InvalidFilter("page_number must be compared with a number")
        papers = set(re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", filter))
        terms = set(re.findall(r"\w+", query.lower()))
        scored = []
        for entity in self.entities:
            if table_name is not None and (entity.table_name, entity.column_name) != (table_name, column_name):
                continue
            if papers and entity.pdf_id not in papers:
                continue
            overlap = len(terms & set(re.findall(r"\w+", (entity.text or "").lower())))
            scored.append((overlap, entity))
        scored.sort(key=lambda pair: (-pair[0], pair[1].primary_key))
        return [
            Hit(float(score), e.pdf_id, e.page_number, e.table_name, e.column_name, e.primary_key, e.text)
            for score, e in scored[:limit]
        ]


@dataclass
class FakeTool:
    name: str
    expression: str
    parameter_schema: dict[str, Any]

    def __call__(self, **parameters: Any) -> ToolOutcome:
        missing = set(self.parameter_schema["properties"]) - set(parameters)
        if missing:
            return ToolOutcome(False, error=f"missing parameters {sorted(missing)}")
        try:
            return ToolOutcome(True, safe_eval(self.expression, parameters))
        except SafeEvalError as problem:
            return ToolOutcome(False, error=str(problem))


class FakeFormulas:
    FORMULAS = {
        "f-relative-gain": {
            "formula_id": "f-relative-gain",
            "name": "relative gain",
            "latex": r"g = \frac{a - b}{b} \times 100",
            "parameters": ["a", "b"],
            "description": "relative improvement of a over b in percent",
            "paper_id": CALIBRATION,
            "page_number": 2,
        },
    }

    def search_formulas(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        words = set(query.lower().split())
        return [f for f in self.FORMULAS.values() if words & set(f["description"].split())][:limit]

    def search_constants(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        return [
            {
                "name": "baseline SST-2 accuracy",
                "symbol": "b",
                "value": 68.5,
                "unit": "%",
                "paper_id": CALIBRATION,
                "page_number": 2,
            }
        ]

    def create_tool(self, formula_id: str) -> FakeTool:
        return FakeTool(
            "relative_gain", "(a - b) / b * 100", {"properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
        )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    build_warehouse(tmp_path / "home")
    return tmp_path / "home"


@pytest.fixture
def env(home: Path):
    environment = AgentEnv(
        ReadOnlyWarehouse(home / "warehouse.duckdb", timeout=5),
        FakeVectors(home / "warehouse.duckdb"),
        FakeFormulas(),
        home=home,
    )
    yield environment
    environment.close()


def settings_for(home: Path, base_url: str | None = None) -> Settings:
    return Settings(
        home=home,
        milvus_uri=str(home / "milvus.db"),
        openai_base_url=base_url,
        openai_api_key="test-key" if base_url else None,
        llm_model="stub-model",
    )
