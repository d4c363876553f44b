"""Held-out table questions: written from the gold tables of synthetic papers no method was tuned on.

The hand-written table questions (``tests/data/airqa_tables.jsonl``) are over the sample, on whose odd half HD-RAG's
ensemble was tuned. These are over papers of a fresh generator seed (``benchmarks/synthetic/generate.py --seed N``):
their tables are known by construction (cells, header rows, spans), so each question's answer is a cell's value
and its wording is the cell's row label and column header path, as a reader would ask it:

- "What is the EM of GPT-2 in Table 1?" (the table named), or
- "What MRR on Test does Easy reach?" (not named: only when that row and column pair is in one table of the paper).

A cell is asked about only when its value is printed once in the whole paper (so a hit that bears it is the cell's
own table) and its row label is not shared by another row of its table. At most ``--per-table`` cells per table,
chosen with a fixed seed. Each question is an AirQA example (``eval_float_exact_match`` with the cell's decimals)
anchored to the paper's id in the home's warehouse, so ``benchmarks/table_questions.py --questions FILE`` scores
it like the hand-written ones.

    python benchmarks/synthetic/generate.py --docs 20 --seed 7313 --out DIR
    python benchmarks/heldout_tables.py --synthetic DIR --home HOME --ingest
    python benchmarks/table_questions.py --home HOME --questions benchmarks/heldout_table_questions.jsonl \
        --out benchmarks/results/table_questions_heldout.json

The committed ``heldout_table_questions.jsonl`` was written this way from seed 7313 (20 papers).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
NAMESPACE = uuid.UUID("8f1d2c56-3a4b-5c6d-8e9f-0a1b2c3d4e5f")


def grid_matrix(grid: dict) -> list[list[dict | None]]:
    """The table's rows with every spanning cell repeated over the positions it covers."""
    matrix: list[list[dict | None]] = [[None] * grid["n_cols"] for _ in range(grid["n_rows"])]
    for cell in grid["cells"]:
        for row in range(cell["row"], cell["row"] + cell["rowspan"]):
            for col in range(cell["col"], cell["col"] + cell["colspan"]):
                matrix[row][col] = cell
    return matrix


def table_cells(table: dict) -> list[dict]:
    """Each numeric body cell with its row label and column header path."""
    grid = table["grid"]
    matrix = grid_matrix(grid)
    header_rows = grid.get("header_rows", 0)
    cells = []
    for row in range(header_rows, grid["n_rows"]):
        stub: list[str] = []
        numbers_seen = False
        for col in range(grid["n_cols"]):
            cell = matrix[row][col]
            if cell is None:
                continue
            text = " ".join(cell["text"].split())
            if not NUMBER.match(text):
                if not numbers_seen and text and text not in stub:
                    stub.append(text)  # the row's label cells come before its first number
                continue
            numbers_seen = True
            if not stub:
                break  # a row without a label cannot be asked about by name
            path = []
            for header in range(header_rows):
                above = matrix[header][col]
                label = " ".join(above["text"].split()) if above else ""
                if label and label not in path:
                    path.append(label)
            if not path:
                continue
            cells.append({"row": row, "col": col, "value": text, "stub": stub[:], "columns": path})
    return cells


def printed_once(value: str, text: str) -> bool:
    return len(re.findall(rf"(?<![\d.]){re.escape(value)}(?![\d]|\.\d)", text)) == 1


def questions_for(gold: dict, pdf_text: str, paper_id: str, per_table: int, rng: random.Random) -> list[dict]:
    tables = [e for e in gold["elements"] if e["type"] == "table" and e.get("grid")]
    asked = []
    pairs: dict[tuple[str, str], int] = {}
    per_table_cells = []
    for table in tables:
        cells = table_cells(table)
        labels = [" ".join(c["stub"]) for c in cells]
        rows_of_label: dict[str, set[int]] = {}
        for cell, label in zip(cells, labels):
            rows_of_label.setdefault(label, set()).add(cell["row"])
        usable = [
            c
            for c, label in zip(cells, labels)
            if len(rows_of_label[label]) == 1 and printed_once(c["value"], pdf_text)
        ]
        for cell in usable:
            key = (" ".join(cell["stub"]), " ".join(cell["columns"]))
            pairs[key] = pairs.get(key, 0) + 1
        per_table_cells.append((table, usable))
    for table, usable in per_table_cells:
        for cell in rng.sample(usable, min(per_table, len(usable))):
            row = ", ".join(cell["stub"])
            leaf, parents = cell["columns"][-1], cell["columns"][:-1]
            column = leaf + (f" on {' '.join(parents)}" if parents else "")
            unique = pairs[(" ".join(cell["stub"]), " ".join(cell["columns"]))] == 1
            if unique and rng.random() < 0.5:
                question = f"What {column} does {row} reach?"
            else:
                question = f"What is the {column} of {row} in {table['label']}?"
            decimals = len(cell["value"].partition(".")[2])
            asked.append(
                {
                    "uuid": str(uuid.uuid5(NAMESPACE, f"{paper_id}/{table['id']}/{cell['row']}/{cell['col']}")),
                    "question": question,
                    "answer_format": f"Your answer should be a Python float rounded to {decimals} decimals.",
                    "tags": ["single", "table", "objective"],
                    "anchor_pdf": [paper_id],
                    "reference_pdf": [],
                    "conference": [],
                    "evaluator": {
                        "eval_func": "eval_float_exact_match",
                        "eval_kwargs": {"gold": float(cell["value"]), "ndigits": decimals},
                    },
                    "gold_answer": float(cell["value"]),
                    "evidence": {"paper_id": paper_id, "page_number": table["page"], "text": cell["value"]},
                }
            )
    return asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", type=Path, required=True, help="a generate.py output folder")
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--ingest", action="store_true", help="ingest the synthetic PDFs into --home first")
    parser.add_argument("--per-table", type=int, default=2)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "heldout_table_questions.jsonl")
    args = parser.parse_args()

    import duckdb
    import pymupdf

    from paperlake.config import Settings

    settings = Settings.from_env(home=args.home.resolve())
    if args.ingest:
        from orchestration.run import ingest

        volume = settings.home / "inbox" / f"synthetic-{args.synthetic.name}"
        volume.mkdir(parents=True, exist_ok=True)
        for pdf in sorted(args.synthetic.glob("syn-*.pdf")):
            shutil.copy2(pdf, volume / pdf.name)
        summary = ingest([volume.parent], settings)
        if not summary.ok:
            print("\n".join(f.line() for f in summary.failures), file=sys.stderr)
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        ids = {
            Path(path).stem: str(pid) for pid, path in con.execute("select paper_id, pdf_path from metadata").fetchall()
        }
    rng = random.Random(args.seed)
    examples = []
    for gold_file in sorted(args.synthetic.glob("syn-*.gold.json")):
        stem = gold_file.name.removesuffix(".gold.json")
        if stem not in ids:
            print(f"{stem}: not in the warehouse, skipped", file=sys.stderr)
            continue
        with pymupdf.open(args.synthetic / f"{stem}.pdf") as document:
            text = "\n".join(page.get_text() for page in document)
        examples += questions_for(json.loads(gold_file.read_text()), text, ids[stem], args.per_table, rng)
    args.out.write_text("".join(json.dumps(e) + "\n" for e in examples), encoding="utf-8")
    print(f"{len(examples)} questions over {len({e['anchor_pdf'][0] for e in examples})} papers: {args.out}")


if __name__ == "__main__":
    main()
