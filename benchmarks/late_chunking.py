"""Late chunking for table rows, side by side with today's row lines: could one encoding per table stand in for one
per row line, to cut encoder tokens without losing table retrieval?

Today a row line (``table_rows.row_text``: the caption's first line, the row header path, then ``header: value``
per cell) is encoded on its own: the caption and the column headers are encoded once per row (164k of the sample's
603k tokens). Late chunking encodes each table once, in windows the model sees whole, and takes a row's vector as
the mean of its own tokens' hidden states, which attended to the rest of the window (the caption, the other rows).
Variants, all on the configured dense encoder:

- ``lines``: today (each row line's windows pooled, ``paperlake.vectors.encoders.encode_pooled``);
- ``late``: per table, its caption line once, then each row line without it; windows cut between rows, each window
  starting with the caption line; a row's vector = the mean of its tokens' states;
- ``late+caption``: as ``late``, plus the mean of the window's caption tokens, weight one to one;
- ``compact+caption``: rows as ``label | v1 | v2`` under one ``columns: h1 | h2`` line per window (header names once
  per window instead of once per cell), plus the caption mean.

Scored on the 44 hand-written table questions (``tests/data/airqa_tables.jsonl``): dense retrieval by cosine over
every row of the warehouse ("all") and over the question's paper's rows ("paper"); a row bears the answer when its
line states the gold value as papers print it (``paperlake.evaluation.needles``), whatever variant made its vector.
Reported per variant: tokens encoded (special tokens included), recall@1, recall@5, MRR.

    python benchmarks/late_chunking.py [--warehouse W] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUESTIONS = REPO / "tests" / "data" / "airqa_tables.jsonl"
ENCODER = "all_minilm_l6_v2"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", type=Path, default=Path("data") / "warehouse.duckdb")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "late_chunking.json")
    args = parser.parse_args()

    import duckdb

    from paperlake.vectors.config import load_config
    from paperlake.vectors.encoders import encode_pooled, encoder_registry

    config = load_config()
    encoder = encoder_registry(config).get(ENCODER)
    with duckdb.connect(str(args.warehouse), read_only=True) as con:
        rows = con.execute(
            "select cast(row_id as varchar), cast(ref_table_id as varchar), cast(ref_paper_id as varchar), row_text "
            "from table_rows where row_text is not null and trim(row_text) <> '' order by 2, row_index"
        ).fetchall()
        backends = sorted(b for (b,) in con.execute("select distinct backend from tables").fetchall())
    tables: dict[str, list[tuple[str, str]]] = {}
    for row_id, table_id, _, text in rows:
        tables.setdefault(table_id, []).append((row_id, text))
    texts = {row_id: text for row_id, _, _, text in rows}
    paper_of = {row_id: paper for row_id, _, paper, _ in rows}
    count = _token_counter(encoder)
    size = _window_tokens(encoder)

    pooled = encode_pooled(encoder, [(text,) for *_, text in rows], None)
    variants = {
        "lines": (
            {row_id: pooled.vectors[i] for i, (row_id, *_rest) in enumerate(rows)},
            sum(n + 2 for _, n in (w for *_, text in rows for w in encoder.windows([text])[0])),
        ),
        "late": _late(encoder, count, size, tables, lambda items: _caption(items[0][1]), _body, 0.0),
        "late+caption": _late(encoder, count, size, tables, lambda items: _caption(items[0][1]), _body, 1.0),
        "compact+caption": _late(
            encoder,
            count,
            size,
            tables,
            lambda items: _caption(items[0][1]) + "\n" + _columns_line(items[0][1]),
            _compact,
            1.0,
        ),
    }
    questions = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    query_vectors = encoder.encode([q["question"] for q in questions])
    results: dict = {
        "machine": platform.platform(),
        "warehouse": str(args.warehouse.resolve()),
        "table_backends": backends,
        "encoder": encoder.metadata,
        "rows": len(rows),
        "tables": len(tables),
        "questions": len(questions),
        "variants": {},
    }
    for name, (vectors, tokens) in variants.items():
        entry = {"tokens": tokens, **_score(vectors, questions, query_vectors, texts, paper_of)}
        results["variants"][name] = entry
        print(f"{name:16s} tokens {tokens:7d}  all {entry['all']}  paper {entry['paper']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"written: {args.out}")


def _token_counter(encoder) -> Callable[[str], int]:
    return lambda text: sum(n for _, n in encoder.windows([text])[0]) if text.strip() else 0


def _window_tokens(encoder) -> int:
    """Tokens a window holds besides the special tokens."""
    probe = "word " * 4000
    return encoder.windows([probe])[0][0][1]


def _late(encoder, count, size: int, tables, head_of, line_of, caption_weight: float):
    """(row id → vector, tokens encoded): each table's rows packed into windows under its head; a row's vector is the
    mean of its own tokens' states, plus ``caption_weight`` times the mean of the head's."""
    vectors: dict[str, np.ndarray] = {}
    tokens = 0
    for items in tables.values():
        head = head_of(items)
        budget = size - count(head) - 1
        batch: list[tuple[str, str]] = []
        used = 0
        for row_id, text in items:
            line = line_of(text)
            need = count(line) + 1
            if batch and used + need > budget:
                tokens += _encode_window(encoder, head, batch, caption_weight, vectors)
                batch, used = [], 0
            batch.append((row_id, line))
            used += need
        if batch:
            tokens += _encode_window(encoder, head, batch, caption_weight, vectors)
    return vectors, tokens


def _encode_window(encoder, head: str, batch, caption_weight: float, vectors: dict) -> int:
    text, spans = head, []
    for row_id, line in batch:
        text += "\n"
        spans.append((row_id, len(text), len(text) + len(line)))
        text += line
    states, offsets = encoder.token_states(text)
    head_tokens = [i for i, (a, b) in enumerate(offsets) if b > a and b <= len(head)]
    head_mean = states[head_tokens].mean(axis=0) if head_tokens else np.zeros(states.shape[1], dtype=np.float32)
    for row_id, start, end in spans:
        own = [i for i, (a, b) in enumerate(offsets) if b > a and a >= start and b <= end]
        if own:  # a row cut off by the window's end (a line longer than a window) keeps no vector
            vector = states[own].mean(axis=0) + caption_weight * head_mean
            vectors[row_id] = vector / np.linalg.norm(vector)
    return len(offsets)


def _caption(text: str) -> str:
    return text.split("\n", 1)[0]


def _body(text: str) -> str:
    parts = text.split("\n", 1)
    return parts[1] if len(parts) > 1 else parts[0]


def _cells(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(row label, [(header, value)]) of a row line; a line without a ``Row:`` header has no label."""
    body = _body(text)
    label, rest = "", body
    if body.startswith("Row:") and "\n" in body:
        label, rest = body.split("\n", 1)
        label = label.removeprefix("Row:").strip()
    cells = [tuple(part.split(": ", 1)) if ": " in part else ("", part) for part in rest.split("; ")]
    return label, cells


def _compact(text: str) -> str:
    label, cells = _cells(text)
    return " | ".join(([label] if label else []) + [value for _, value in cells])


def _columns_line(text: str) -> str:
    return "columns: " + " | ".join(header for header, _ in _cells(text)[1] if header)


def _score(vectors: dict, questions: list[dict], query_vectors: np.ndarray, texts: dict, paper_of: dict) -> dict:
    from paperlake.evaluation.needles import answer_needles, contains_needle

    ids = list(vectors)
    matrix = np.stack([vectors[i] for i in ids])
    out = {}
    for scope in ("all", "paper"):
        at1 = at5 = reciprocal = 0.0
        for question, query in zip(questions, query_vectors):
            needles = answer_needles(question["evidence"]["text"]) or answer_needles(question["gold_answer"])
            paper = question["anchor_pdf"][0]
            keep = [i for i, row_id in enumerate(ids) if scope == "all" or paper_of[row_id] == paper]
            order = [ids[keep[j]] for j in np.argsort(-(matrix[keep] @ query), kind="stable")]
            rank = next(
                (k for k, row_id in enumerate(order, 1) if any(contains_needle(texts[row_id], n) for n in needles)),
                None,
            )
            if rank:
                at1 += rank == 1
                at5 += rank <= 5
                reciprocal += 1 / rank
        n = len(questions)
        out[scope] = {"recall@1": round(at1 / n, 3), "recall@5": round(at5 / n, 3), "mrr": round(reciprocal / n, 3)}
    return out


if __name__ == "__main__":
    main()
