"""Vector layer: cells from a small warehouse, Milvus Lite collections, sync, search, filters, hybrid, CLIP path.

The warehouse is built in tmp from two sample papers (page texts from the PDFs, elements from their MinerU
outputs). MiniLM encodes on CPU, so the embedding cache is shared by the whole session.
"""

from __future__ import annotations

import shutil

import duckdb
import numpy as np
import pytest

from paperlake.vectors.config import load_config, parse_config
from paperlake.vectors.describe import describe_collections, render_for_prompt
from paperlake.vectors.encoders import ClipImageEncoder, EncoderUnavailable, render_region
from paperlake.vectors.entities import DEFAULT_ENCODABLE, collect_cells, entity_id, truncate_utf8
from paperlake.vectors.filters import FilterError, validate_filter
from paperlake.vectors.search import search
from paperlake.vectors.store import VectorStore, sync_warehouse
from support.sample_warehouse import build_sample_warehouse

NUMEROLOGIC = "emnlp2024-012-numerologic"
INVERSION = "emnlp2024-126-embedding-inversion-attack"
TEXT_COLLECTIONS = ("text_bm25_en", "text_sentence_transformers_all_minilm_l6_v2", "text_hybrid")
IMAGE_COLLECTION = "image_clip_clip_vit_base_patch32"


@pytest.fixture(scope="session")
def sample(tmp_path_factory, corpus):
    """A two-paper warehouse; returns (path, {slug: paper_id})."""
    path = tmp_path_factory.mktemp("warehouse") / "warehouse.duckdb"
    papers = build_sample_warehouse(path, corpus, [NUMEROLOGIC, INVERSION])
    return path, {p.slug: p.paper_id for p in papers}


@pytest.fixture(scope="session")
def cache_path(tmp_path_factory):
    return tmp_path_factory.mktemp("cache") / "embeddings.sqlite"


def open_store(path, cache_path, **kwargs):
    return VectorStore(path, cache_path=cache_path, allow_random_clip=True, **kwargs)


def cells_of(warehouse, paper_ids=None):
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return collect_cells(con, paper_ids=paper_ids)


@pytest.fixture(scope="module")
def synced(tmp_path_factory, sample, cache_path):
    """A store with both papers synced into every active collection (read-only for the tests that use it)."""
    warehouse, _ = sample
    store = open_store(tmp_path_factory.mktemp("milvus") / "vectors.db", cache_path)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        report = sync_warehouse(store, con)
    assert not report.failures
    yield store, report
    store.close()


# ── pure functions ───────────────────────────────────────────────────────────────────────────────────────────────


def test_entity_ids_are_deterministic_uuid5():
    import uuid

    assert entity_id("chunks", "text_content", "abc") == str(uuid.uuid5(uuid.NAMESPACE_DNS, "chunks.text_content.abc"))
    assert entity_id("chunks", "text_content", "abc") != entity_id("pages", "page_content", "abc")


def test_truncate_counts_utf8_bytes_and_keeps_whole_characters():
    text = "é" * 40000  # 80000 bytes
    cut, truncated = truncate_utf8(text, 65535)
    assert truncated and len(cut.encode("utf-8")) <= 65535 and set(cut) == {"é"}
    assert truncate_utf8("short", 65535) == ("short", False)


def test_collect_cells_pages_and_views(sample):
    warehouse, ids = sample
    cells = cells_of(warehouse)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        expected = 0
        for table, column, kind in DEFAULT_ENCODABLE:
            if kind == "text":
                expected += con.execute(
                    f"select count(*) from \"{table}\" where trim(coalesce(\"{column}\", '')) <> ''"
                ).fetchone()[0]
            else:
                expected += con.execute(f'select count(*) from "{table}" where {column} is not null').fetchone()[0]
        chunk_pages = dict(
            con.execute(
                "select c.chunk_id, p.page_number from chunks c join pages p on p.page_id = c.ref_page_id"
            ).fetchall()
        )
        section_pages = dict(con.execute("select section_id, page_numbers[1] from sections").fetchall())
    assert len(cells) == expected
    assert len({c.entity_id for c in cells}) == len(cells)
    for cell in cells:
        assert cell.pdf_id in ids.values()
        if cell.table_name == "metadata":
            assert cell.page_number == 1
        if cell.table_name == "chunks":
            assert cell.page_number == chunk_pages[cell.primary_key]
        if cell.table_name == "sections":
            assert cell.page_number == section_pages[cell.primary_key]
        if cell.kind == "image":
            assert cell.bbox and cell.pdf_path and cell.pdf_sha256 and not cell.text
    only_one = cells_of(warehouse, [ids[NUMEROLOGIC]])
    assert only_one and {c.pdf_id for c in only_one} == {ids[NUMEROLOGIC]}
    # column lines read their head (HEAD_VIEWS); the earlier pooling scheme, kept for benchmarks, reads them whole
    heads = {c.view: c.head_tokens for c in cells if c.kind == "text"}
    assert heads["table_columns.column_text"] == 64 and heads["table_rows.row_text"] is None
    assert set(heads.values()) == {None, 64}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        earlier = collect_cells(con, pooling=1)
    assert {c.head_tokens for c in earlier} == {None}
    assert {c.pooled_key for c in earlier if c.view == "table_columns.column_text"}.isdisjoint(
        c.pooled_key for c in cells if c.view == "table_columns.column_text"
    )


def test_config_activity_follows_local_weights(tmp_path, monkeypatch, sample):
    config = load_config()
    names = {c.name for c in config.collections}
    assert {
        "text_bm25_en",
        "text_sentence_transformers_all_minilm_l6_v2",
        "text_sentence_transformers_bge_large_en_v1_5",
        IMAGE_COLLECTION,
        "text_hybrid",
    } <= names
    monkeypatch.delenv("PAPERLAKE_BGE_PATH", raising=False)
    monkeypatch.delenv("PAPERLAKE_CLIP_PATH", raising=False)
    active = {c.name for c in config.active_collections()}
    assert active == {"text_bm25_en", "text_sentence_transformers_all_minilm_l6_v2", "text_hybrid"}
    bge = config.collection("text_sentence_transformers_bge_large_en_v1_5")
    assert "PAPERLAKE_BGE_PATH" in config.inactive_reason(bge)
    (tmp_path / "bge").mkdir()
    monkeypatch.setenv("PAPERLAKE_BGE_PATH", str(tmp_path / "bge"))
    assert config.inactive_reason(bge) is None
    with pytest.raises(ValueError, match="unknown encoder"):
        parse_config(
            {
                "collections": [
                    {
                        "name": "x",
                        "modality": "text",
                        "vectors": [
                            {"field": "v", "kind": "dense", "encoder": "nope", "metric": "COSINE", "index": "AUTOINDEX"}
                        ],
                    }
                ]
            }
        )
    bm25 = {"field": "v", "kind": "bm25", "metric": "BM25", "index": "SPARSE_INVERTED_INDEX"}
    for bad in (["table_rows"], ["a.b.c"], [".x"]):
        with pytest.raises(ValueError, match="without_views takes table.column"):
            parse_config({"collections": [{"name": "x", "modality": "text", "vectors": [bm25], "without_views": bad}]})
    spec = parse_config(
        {
            "collections": [
                {"name": "x", "modality": "text", "vectors": [bm25], "without_views": ["table_rows.row_text"]}
            ]
        }
    ).collection("x")
    row, chunk = (
        next(c for c in cells_of(sample[0]) if c.view == view)
        for view in ("table_rows.row_text", "chunks.text_content")
    )
    assert not spec.holds(row) and spec.holds(chunk)


def test_filter_validation_hints():
    assert validate_filter("pdf_id == 'a' and page_number in [1, 2]") == 'pdf_id == "a" and page_number in [1, 2]'
    assert validate_filter("") == ""
    cases = {
        "paper_id == 'x'": "unknown field 'paper_id' — use pdf_id",
        "page = 3": "use ==",
        "page_number == '3'": "drop the quotes",
        "pdf_id == 42": "quote it",
        "pdf_id in ('a', 'b')": "square brackets",
        "(pdf_id == 'a'": "never closed",
        "pdf_id == 'a' page_number == 1": "join conditions with and / or",
        "text == 'x'": "allowed fields",
    }
    for expression, hint in cases.items():
        with pytest.raises(FilterError) as error:
            validate_filter(expression)
        assert hint in str(error.value), (expression, str(error.value))


# ── Milvus Lite: sync, counts, search ────────────────────────────────────────────────────────────────────────────


def test_counts_equal_non_empty_encodable_cells(synced, sample):
    store, report = synced
    warehouse, ids = sample
    cells = cells_of(warehouse)
    text_cells = [c for c in cells if c.kind == "text"]
    image_cells = [c for c in cells if c.kind == "image"]
    specs = {spec.name: spec for spec in load_config().collections}
    for name in TEXT_COLLECTIONS:
        held = [c for c in text_cells if c.view not in specs[name].without_views]  # BM25: every one
        assert store.count(name) == len(held), name
        for pid in ids.values():
            assert store.count(name, f"pdf_id == '{pid}'") == sum(c.pdf_id == pid for c in held)
    lines = ("table_rows.row_text", "table_columns.column_text")
    assert specs["text_sentence_transformers_all_minilm_l6_v2"].without_views == lines
    for view in lines:
        assert store.count("text_sentence_transformers_all_minilm_l6_v2", f"table_name == '{view.split('.')[0]}'") == 0
        assert store.count("text_bm25_en", f"table_name == '{view.split('.')[0]}'") > 0
    assert store.count(IMAGE_COLLECTION) == len(image_cells) > 0
    views = {(c.table_name, c.column_name) for c in text_cells}
    for table, column in views:
        expr = f"table_name == '{table}' and column_name == '{column}'"
        assert store.count("text_bm25_en", expr) == sum(c.view == f"{table}.{column}" for c in text_cells)


def test_second_sync_encodes_and_writes_nothing(synced, sample):
    store, _ = synced
    warehouse, _ = sample
    with duckdb.connect(str(warehouse), read_only=True) as con:
        again = sync_warehouse(store, con)
    for paper in again.papers.values():
        assert paper.encoded == 0 and paper.upserted == 0 and paper.deleted == 0
        assert all(s.unchanged == s.cells for s in paper.collections.values())


def test_a_fresh_store_reuses_the_embedding_cache(tmp_path, sample, cache_path, synced):
    warehouse, ids = sample
    with open_store(tmp_path / "fresh.db", cache_path) as store:
        report = store.sync_paper(ids[INVERSION], cells_of(warehouse, [ids[INVERSION]]), TEXT_COLLECTIONS)
    dense = report.collections["text_sentence_transformers_all_minilm_l6_v2"]
    assert dense.upserted == dense.cells > 0
    assert dense.encoded == 0 and dense.cache_hits >= dense.cells  # one hit per window (a long cell has several)


def test_search_restricts_to_view_and_filter(synced, sample):
    store, _ = synced
    _, ids = sample
    pid = ids[NUMEROLOGIC]
    for collection in ("text_bm25_en", "text_sentence_transformers_all_minilm_l6_v2"):
        hits = search(
            store,
            "number of digits as a prefix",
            collection,
            "chunks",
            "text_content",
            filter=f"pdf_id == '{pid}' and page_number <= 2",
            limit=10,
        )
        assert hits
        assert all(h.pdf_id == pid and h.page_number <= 2 for h in hits)
        assert all((h.table_name, h.column_name) == ("chunks", "text_content") for h in hits)
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    other = search(
        store,
        "embedding matrix obfuscation attack",
        "text_bm25_en",
        "chunks",
        "text_content",
        filter=f"pdf_id != '{pid}'",
        limit=5,
    )
    assert other and all(h.pdf_id == ids[INVERSION] for h in other)
    titles = search(store, "NumeroLogic", "text_bm25_en", "metadata", "title", limit=5)
    assert [h.pdf_id for h in titles] == [pid]
    assert search(store, "anything", "text_bm25_en", "chunks", "no_such_column") == []


def test_a_filtered_dense_search_explores_enough_to_be_exhaustive(synced, sample, monkeypatch):
    """A search filtered to one page of one paper skips most of HNSW's graph: the configured ``ef`` reaches Milvus
    on every dense route, and the hits are the exhaustive top five of the cells the filter lets through."""
    store, _ = synced
    _, ids = sample
    pid = ids[NUMEROLOGIC]
    collection = "text_sentence_transformers_all_minilm_l6_v2"
    (field,) = next(c for c in store.config.collections if c.name == collection).vectors
    assert field.search_params.get("ef", 0) >= 256
    sent = []
    original = store.client.search
    monkeypatch.setattr(store.client, "search", lambda *a, **k: sent.append(k) or original(*a, **k))
    encoder = store.encoders.get("all_minilm_l6_v2")
    keys = {c.entity_id: c.primary_key for c in cells_of(sample[0], [pid])}
    for page in (1, 2, 3, 4):
        expression = f"pdf_id == '{pid}' and page_number == {page}"
        rows = store.client.query(
            collection, filter=f'table_name == "chunks" and {expression}', output_fields=["id", "vector"]
        )
        for question in ("how are numbers written for the model", "accuracy on arithmetic tasks", "related work"):
            hits = search(store, question, collection, "chunks", "text_content", filter=expression, limit=5)
            query = encoder.encode([question])[0]
            exhaustive = sorted(rows, key=lambda r: -float(np.dot(r["vector"], query)))[:5]
            assert [h.primary_key for h in hits] == [keys[r["id"]] for r in exhaustive]
    assert sent and all(k["search_params"]["params"] == field.search_params for k in sent)


def test_bad_filter_raises_with_hint(synced):
    store, _ = synced
    with pytest.raises(FilterError, match="unknown field 'paper_id' — use pdf_id"):
        search(store, "numbers", "text_bm25_en", "chunks", "text_content", filter="paper_id == 'x'")


def test_hybrid_search_fuses_bm25_and_dense_routes(synced, sample):
    store, _ = synced
    _, ids = sample
    query = "reformatting technique that adds the count of digits before each number"
    fused = search(store, query, "text_bm25_en", "chunks", "text_content", limit=5, hybrid=True)
    assert fused and all(h.collection == "text_hybrid" for h in fused)
    assert [h.score for h in fused] == sorted((h.score for h in fused), reverse=True)
    assert fused[0].pdf_id == ids[NUMEROLOGIC]
    # the configured weights favour BM25: with all the weight on one route, fusion reproduces that route's order
    bm25 = search(store, query, "text_bm25_en", "chunks", "text_content", limit=5)
    only_bm25 = search(store, query, "text_hybrid", "chunks", "text_content", limit=5, weights=[1.0, 0.0])
    assert [h.primary_key for h in only_bm25] == [h.primary_key for h in bm25]
    rrf = search(store, query, "text_hybrid", "chunks", "text_content", limit=5, fusion="rrf")
    assert rrf[0].pdf_id == ids[NUMEROLOGIC]
    assert 0 < rrf[0].score <= sum(store.config.hybrid_weights) / (store.config.rrf_k + 1)
    in_milvus = search(store, query, "text_hybrid", "chunks", "text_content", limit=5, fusion="milvus-rrf")
    assert in_milvus[0].pdf_id == ids[NUMEROLOGIC] and all(h.collection == "text_hybrid" for h in in_milvus)
    assert 0 < in_milvus[0].score <= 2 / (store.config.rrf_k + 1)  # Milvus' RRF: Σ 1/(k + rank) over two routes
    milvus_weighted = search(
        store, query, "text_hybrid", "chunks", "text_content", limit=5, fusion="milvus-weighted", weights=[1.0, 0.0]
    )
    assert [h.primary_key for h in milvus_weighted] == [h.primary_key for h in bm25]
    weighted = search(
        store,
        query,
        "text_hybrid",
        "chunks",
        "text_content",
        limit=5,
        weights=[0.3, 0.7],
        filter=f"pdf_id == '{ids[NUMEROLOGIC]}'",
    )
    assert weighted and all(h.pdf_id == ids[NUMEROLOGIC] for h in weighted)
    with pytest.raises(ValueError, match="weights"):
        search(store, query, "text_hybrid", "chunks", "text_content", weights=[1.0])


def test_the_reranker_finds_more_answers_than_the_fused_order_on_written_questions(synced, sample):
    """The hand-written questions (benchmarks/findable_questions*.jsonl) on the fixture's two papers, searched over
    every view with the paper filter on: the reranked top 5 bear the answer more often than the fused order's, and
    the search without the reranker is the head of the pool the reranker reorders."""
    import json
    from pathlib import Path

    from paperlake.evaluation.needles import answer_needles, contains_needle
    from paperlake.vectors.search import candidates

    store, _ = synced
    _, ids = sample
    benchmarks = Path(__file__).resolve().parents[2] / "benchmarks"
    found = {True: 0, False: 0}
    asked = 0
    for path in sorted(benchmarks.glob("findable_questions*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            question = json.loads(line)
            slug = question["paper_key"].split("/")[-1]
            if slug not in ids:
                continue
            asked += 1
            needles = answer_needles(question["answer"])
            scope = f'pdf_id == "{ids[slug]}"'
            for rerank in (True, False):
                hits = search(store, question["question"], "text_hybrid", filter=scope, limit=5, rerank=rerank)
                found[rerank] += any(contains_needle(hit.text or "", n) for hit in hits for n in needles)
            if asked % 10 == 0:  # the pool's head is the search without the reranker (a sample of them: time)
                pool = candidates(store, question["question"], "text_hybrid", filter=scope)
                plain = search(store, question["question"], "text_hybrid", filter=scope, limit=5, rerank=False)
                assert len(pool) > 5 and [h.entity_id for h in pool[:5]] == [h.entity_id for h in plain]
    assert asked >= 50
    assert found[True] > found[False], found


def test_hybrid_search_puts_a_named_equation_first(tmp_path, cache_path):
    """A question that names "Equation (N)" gets that equation's passage (its number, the sentences around it and
    the formula) first from the fused search, though other cells share its words; a question naming none keeps the
    fused order, and a view searched alone is not touched."""
    from support.sample_warehouse import WAREHOUSE_DDL

    paper = "00000000-0000-0000-0000-000000000001"
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute(WAREHOUSE_DDL)
        passages = {
            3: "Equation 3\nThe loss sums the token terms.\nL = \\sum_i \\ell_i\nwhere d is the margin of the loss.",
            4: "Equation 4\nThe score of a pair.\ns = x \\cdot y\nwhere d is the width of the embedding.",
        }
        for number, passage in passages.items():
            con.execute(
                "insert into equations (equation_id, equation_content, equation_passage, ordinal, ref_paper_id) "
                "values (?, ?, ?, ?, ?)",
                [f"eq-{number}", passage.split("\n")[2], passage, number, paper],
            )
        for n in range(4):
            con.execute(
                "insert into chunks (chunk_id, text_content, ordinal, ref_paper_id) values (?, ?, ?, ?)",
                [f"chunk-{n}", f"The paper defines d right after the equation, as the width of part {n}.", n, paper],
            )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            report = sync_warehouse(store, con)
            assert not report.failures
            scope = f"pdf_id == '{paper}'"
            for number in (3, 4):
                hits = search(
                    store,
                    f"Right after Equation ({number}), what does d stand for?",
                    "text_hybrid",
                    limit=5,
                    filter=scope,
                )
                assert (hits[0].table_name, hits[0].primary_key) == ("equations", f"eq-{number}"), hits
            unnamed = "Right after the equation, what does d stand for?"
            assert [h.primary_key for h in search(store, unnamed, "text_hybrid", limit=5, filter=scope)] == [
                h.primary_key for h in search(store, unnamed, "text_hybrid", limit=5, filter=scope, fusion="convex")
            ]
            alone = search(
                store,
                "Right after Equation (3), what is d?",
                "text_hybrid",
                "chunks",
                "text_content",
                limit=5,
                filter=scope,
            )
            assert all(h.table_name == "chunks" for h in alone)
        finally:
            store.close()


def test_hybrid_search_puts_a_named_figure_first(tmp_path, cache_path):
    """A question that names "Figure N" gets that figure's cells first from the fused search, though the running
    text shares its words: the words inside it first when the question quotes one of them, the caption first when
    the question describes what the figure shows."""
    from support.sample_warehouse import WAREHOUSE_DDL

    papers = ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"]
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute(WAREHOUSE_DDL)
        for paper in papers:
            for number, (caption, words) in enumerate(
                [
                    ("Loss curves of the three runs during training.", "Loss\n0.5 1.0 1.5\nSteps\nbaseline ours"),
                    ("Recall of each retriever on the held-out queries.", "Recall\nBM25 Dense Hybrid\n0.6 0.8"),
                ],
                start=1,
            ):
                con.execute(
                    "insert into images (image_id, image_caption, image_text, ordinal, ref_paper_id) "
                    "values (?, ?, ?, ?, ?)",
                    [f"img-{paper[-1]}-{number}", f"Figure {number}: {caption}", words, number, paper],
                )
            for n in range(4):
                con.execute(
                    "insert into chunks (chunk_id, text_content, ordinal, ref_paper_id) values (?, ?, ?, ?)",
                    [
                        f"chunk-{paper[-1]}-{n}",
                        f"What Figure 1 and Figure 2 show: the label that follows BM25 is the best, and the loss "
                        f"curves of the training runs show what the recall of the retriever is, in part {n}.",
                        n,
                        paper,
                    ],
                )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            report = sync_warehouse(store, con)
            assert not report.failures
            scope = f"pdf_id == '{papers[0]}'"
            quoted = search(store, "In Figure 2, what label follows “BM25”?", "text_hybrid", limit=5, filter=scope)
            assert [(h.primary_key, h.column_name) for h in quoted[:2]] == [
                ("img-1-2", "image_text"),
                ("img-1-2", "image_caption"),
            ], quoted
            described = "What does Figure 1 show about the loss curves of the training runs?"
            hits = search(store, described, "text_hybrid", limit=5, filter=scope)
            assert (hits[0].primary_key, hits[0].column_name) == ("img-1-1", "image_caption"), hits
        finally:
            store.close()


def test_hybrid_search_puts_a_named_table_first(tmp_path, cache_path):
    """A question that names "Table N" gets that table's matching row line, then its content, first from the fused
    search, though a figure's legend and the running text share its labels."""
    from support.sample_warehouse import WAREHOUSE_DDL

    paper = "00000000-0000-0000-0000-000000000001"
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute(WAREHOUSE_DDL)
        tables = {
            1: ("Accuracy on the dev set.", {"GPT-2": 61.3, "BERT": 58.2}),
            2: ("EM on the test set.", {"GPT-2": 94.2, "BERT": 90.1}),
        }
        for number, (caption, values) in tables.items():
            cells = "".join(f"<tr><td>{model}</td><td>{value}</td></tr>" for model, value in values.items())
            con.execute(
                "insert into tables (table_id, table_caption, table_content, ordinal, ref_paper_id) "
                "values (?, ?, ?, ?, ?)",
                [
                    f"tab-{number}",
                    f"Table {number}: {caption}",
                    f"<table><tr><th>Model</th><th>EM</th></tr>{cells}</table>",
                    number,
                    paper,
                ],
            )
            for index, (model, value) in enumerate(values.items()):
                con.execute(
                    "insert into table_rows (row_id, row_text, row_index, ref_table_id, ref_paper_id) "
                    "values (?, ?, ?, ?, ?)",
                    [
                        f"row-{number}-{index}",
                        f"Table {number}: {caption} | Row: {model} | EM: {value}",
                        index,
                        f"tab-{number}",
                        paper,
                    ],
                )
        con.execute(
            "insert into images (image_id, image_caption, image_text, ordinal, ref_paper_id) values (?, ?, ?, ?, ?)",
            ["img-1", "Figure 1: Training loss.", "EM\nGPT-2  BERT\nTable", 1, paper],
        )
        for n in range(3):
            con.execute(
                "insert into chunks (chunk_id, text_content, ordinal, ref_paper_id) values (?, ?, ?, ?)",
                [
                    f"chunk-{n}",
                    f"Table 2 shows the EM of GPT-2 and BERT; what GPT-2 is in Table 2 matters, part {n}.",
                    n,
                    paper,
                ],
            )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            report = sync_warehouse(store, con)
            assert not report.failures
            hits = search(
                store, "What is the EM of GPT-2 in Table 2?", "text_hybrid", limit=5, filter=f"pdf_id == '{paper}'"
            )
            assert hits[0].table_name in ("table_rows", "tables") and "94.2" in hits[0].text, hits
            assert any(h.table_name == "tables" and h.primary_key == "tab-2" for h in hits[:3]), hits
        finally:
            store.close()


def test_hybrid_search_puts_what_prints_a_quoted_string_first(tmp_path, cache_path):
    """Among the first fused candidates, the cells printing the question's quoted string come first, though others
    have its words more often, apart."""
    from support.sample_warehouse import WAREHOUSE_DDL

    paper = "00000000-0000-0000-0000-000000000001"
    warehouse = tmp_path / "warehouse.duckdb"
    texts = [
        "The rank is low when the low layers share a rank; the rank of low layers, rank by rank.",
        "Rank and low: the layers of low cost keep their rank, and the rank stays low.",
        "Our adapters are low rank.",
        "The training loss of the adapters.",
    ]
    with duckdb.connect(str(warehouse)) as con:
        con.execute(WAREHOUSE_DDL)
        for n, text in enumerate(texts):
            con.execute(
                "insert into chunks (chunk_id, text_content, ordinal, ref_paper_id) values (?, ?, ?, ?)",
                [f"chunk-{n}", text, n, paper],
            )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            report = sync_warehouse(store, con)
            assert not report.failures
            scope = f"pdf_id == '{paper}'"
            plain = search(store, "Which layers have a low rank?", "text_hybrid", limit=4, filter=scope)
            assert plain[0].primary_key != "chunk-2", plain  # the words apart outrank the phrase
            quoted = search(store, "Which layers are “low rank”?", "text_hybrid", limit=4, filter=scope)
            assert quoted[0].primary_key == "chunk-2", quoted
            assert [h.score for h in quoted] == sorted((h.score for h in quoted), reverse=True)
        finally:
            store.close()


def test_a_citing_sentence_brings_its_entry(tmp_path, cache_path):
    """A question that names a cited work by what the paper does with it finds the citing sentence; the entry it
    cites (who and what) follows it at its score, within the limit."""
    from support.sample_warehouse import WAREHOUSE_DDL

    paper = "00000000-0000-0000-0000-000000000001"
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute(WAREHOUSE_DDL)
        entries = [
            (
                "Zhuoshi Pan and Qianhui Wu. 2024. LLMLingua-2: data distillation. In ACL.",
                "We split sentences with the SpaCy toolkit following Pan et al. (2024).",
            ),
            ("Ana Ruiz. 2021. Retrieval for questions. In EMNLP.", "Retrieval helps open questions (Ruiz, 2021)."),
            (
                "Bo Chen. 2020. Reading comprehension at scale. In ACL.",
                "Reading comprehension was studied at scale (Chen, 2020).",
            ),
        ]
        for n, (entry, citing) in enumerate(entries):
            con.execute(
                "insert into reference (reference_id, reference_content, citing_context, ordinal, ref_paper_id) "
                "values (?, ?, ?, ?, ?)",
                [f"ref-{n}", entry, citing, n, paper],
            )
        for n in range(3):
            con.execute(
                "insert into chunks (chunk_id, text_content, ordinal, ref_paper_id) values (?, ?, ?, ?)",
                [f"chunk-{n}", f"We split the documents into sentences before retrieval, part {n}.", n, paper],
            )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            report = sync_warehouse(store, con)
            assert not report.failures
            question = "Whose work do the authors follow when they split sentences with SpaCy?"
            hits = search(store, question, "text_hybrid", limit=3, filter=f"pdf_id == '{paper}'")
            assert len(hits) == 3
            assert [(h.primary_key, h.column_name) for h in hits[:2]] == [
                ("ref-0", "citing_context"),
                ("ref-0", "reference_content"),
            ], hits
            assert hits[0].score == hits[1].score and "Zhuoshi Pan" in hits[1].text
            alone = search(store, question, "text_hybrid", "reference", "citing_context", limit=3)
            assert all(h.column_name == "citing_context" for h in alone)  # a view searched alone is left as it is
        finally:
            store.close()


def test_a_caption_brings_its_figures_words(tmp_path, cache_path):
    """A question that describes a figure finds its caption; the words printed inside the figure (what it asks
    about) follow the caption at its score, within the limit, though they share none of the question's words."""
    from support.sample_warehouse import WAREHOUSE_DDL

    paper = "00000000-0000-0000-0000-000000000001"
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:
        con.execute(WAREHOUSE_DDL)
        for number, (caption, words) in enumerate(
            [
                ("The four stages of the pipeline that answers a question.", "Draft\nVerify\nRevise\nSubmit"),
                ("Recall of each retriever on held-out queries.", "Recall\nBM25 Dense Hybrid\n0.6 0.8"),
            ],
            start=1,
        ):
            con.execute(
                "insert into images (image_id, image_caption, image_text, ordinal, ref_paper_id) "
                "values (?, ?, ?, ?, ?)",
                [f"img-{number}", f"Figure {number}: {caption}", words, number, paper],
            )
        for n in range(4):
            con.execute(
                "insert into chunks (chunk_id, text_content, ordinal, ref_paper_id) values (?, ?, ?, ?)",
                [f"chunk-{n}", f"Each question passes through the pipeline in stages, part {n}.", n, paper],
            )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            assert not sync_warehouse(store, con).failures
            question = "Which step opens the four-stage pipeline that answers a question?"
            hits = search(store, question, "text_hybrid", limit=3, filter=f"pdf_id == '{paper}'")
            keys = [(h.primary_key, h.column_name) for h in hits]
            assert len(hits) == 3 and ("img-1", "image_text") in keys, hits
            caption = keys.index(("img-1", "image_caption"))
            assert keys[caption + 1] == ("img-1", "image_text") and hits[caption].score == hits[caption + 1].score
        finally:
            store.close()


def test_a_cited_work_named_as_the_paper_cites_it_comes_first(tmp_path, cache_path):
    """A question that cites a work as papers do ("(He et al., 2021)", "Yu and Ananiadou (2024b)") gets that work's
    reference entry first: the surname and the year, not another entry of the same author, not the running text
    that cites it too."""
    from support.sample_warehouse import WAREHOUSE_DDL

    paper = "00000000-0000-0000-0000-000000000001"
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:
        con.execute(WAREHOUSE_DDL)
        entries = [
            "Pengcheng He, Xiaodong Liu, and Weizhu Chen. 2021. Deberta: decoding-enhanced bert.",
            "Pengcheng He and Jianfeng Gao. 2019. A study of natural language inference models.",
            "Zeping Yu and Sophia Ananiadou. 2024a. In-context heads as towers.",
            "Zeping Yu and Sophia Ananiadou. 2024b. Neuron-level knowledge attribution.",
        ]
        for n, entry in enumerate(entries):
            con.execute(
                "insert into reference (reference_id, reference_content, ordinal, ref_paper_id) values (?, ?, ?, ?)",
                [f"ref-{n}", entry, n, paper],
            )
        texts = [  # the running text cites both works of each author; the bibliography page prints every entry
            "The NLI model (He et al., 2021) scores the affinities between sampled responses; an NLI model of He and "
            "Gao (2019) is weaker, part {n}.",
            "References. Pengcheng He, Xiaodong Liu, and Weizhu Chen. 2021. Deberta. Pengcheng He and Jianfeng Gao. "
            "2019. A study of natural language inference models. Zeping Yu and Sophia Ananiadou. 2024a. In-context "
            "heads. Zeping Yu and Sophia Ananiadou. 2024b. Neuron-level knowledge attribution, page {n}.",
            "We take the importance score of Yu and Ananiadou (2024b) for each neuron, as Yu and Ananiadou (2024a) do "
            "for heads, part {n}.",
        ]
        for n, text in enumerate(text.format(n=n) for text in texts for n in range(3)):
            con.execute(
                "insert into chunks (chunk_id, text_content, ordinal, ref_paper_id) values (?, ?, ?, ?)",
                [f"chunk-{n}", text, n, paper],
            )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            assert not sync_warehouse(store, con).failures
            scope = f"pdf_id == '{paper}'"
            nli = "Which NLI model (He et al., 2021) scores the affinities?"
            assert search(store, nli, "text_hybrid", limit=3, filter=scope)[0].primary_key == "ref-0"
            score = "What importance score, Yu and Ananiadou (2024b), is taken for each neuron?"
            assert search(store, score, "text_hybrid", limit=3, filter=scope)[0].primary_key == "ref-3"
            plain = search(store, "Which NLI model scores the affinities?", "text_hybrid", limit=3, filter=scope)
            assert plain[0].table_name == "chunks"  # no citation in the question: the fused order is left as it is
        finally:
            store.close()


def _insert_chunks(con, paper: str, texts: list[str]) -> None:
    """One chunk per text (``chunk-0``, ``chunk-1``, …) of ``paper``."""
    for n, text in enumerate(texts):
        con.execute(
            "insert into chunks (chunk_id, text_content, ordinal, ref_paper_id) values (?, ?, ?, ?)",
            [f"chunk-{n}", text, n, paper],
        )


def _ranked(store, paper: str, question: str, limit: int = 5) -> list[tuple[str, str]]:
    """The fused search's hits within one paper, as (row key, column)."""
    hits = search(store, question, "text_hybrid", limit=limit, filter=f"pdf_id == '{paper}'")
    return [(h.primary_key, h.column_name) for h in hits]


def test_a_question_about_a_plot_or_a_cited_work_lifts_that_views_best_to_second(tmp_path, cache_path):
    """A question that asks what a plot or diagram shows (not named by its number), or which work the paper cites
    or follows, gets the best cells of the figures, or of the citing sentences, right after the first hit: they are
    short, and passages that share more of the question's words outrank them. The first hit stays first."""
    from support.sample_warehouse import WAREHOUSE_DDL

    paper = "00000000-0000-0000-0000-000000000001"
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:
        con.execute(WAREHOUSE_DDL)
        con.execute(
            "insert into images (image_id, image_caption, image_text, ordinal, ref_paper_id) values (?, ?, ?, ?, ?)",
            ["img-1", "Figure 1: Accuracy by model size.", "Gaze Duration\nfirst pass  total", 1, paper],
        )
        con.execute(
            "insert into reference (reference_id, reference_content, citing_context, ordinal, ref_paper_id) "
            "values (?, ?, ?, ?, ?)",
            ["ref-1", "Robyn Speer. 2022. wordfreq: v3.0.", "Counts come from Speer (2022).", 1, paper],
        )
        _insert_chunks(
            con,
            paper,
            [
                f"The per-language results of the eye movement study: accuracy grows with model size and the word "
                f"frequencies of the study matter for each language, part {n}."
                for n in range(8)
            ],
        )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            assert not sync_warehouse(store, con).failures

            plot = _ranked(
                store, paper, "In the per-language plot of the eye movement study, what does the legend list?", limit=4
            )
            assert plot[0][0].startswith("chunk-") and plot[1][0] == "img-1", plot
            cited = _ranked(
                store, paper, "Which release do the authors cite for the word frequencies of each language?", limit=4
            )
            assert cited[0][0].startswith("chunk-") and cited[1:3] == [
                ("ref-1", "citing_context"),
                ("ref-1", "reference_content"),
            ], cited
            introducing = _ranked(
                store,
                paper,
                "What is the title of the work introducing the word frequencies of each language?",
                limit=4,
            )
            assert ("ref-1", "reference_content") in introducing[:3], introducing
            plain = _ranked(store, paper, "What are the per-language results of the eye movement study?", limit=4)
            assert all(key.startswith("chunk-") for key, _ in plain), plain  # neither a figure nor a cited work
        finally:
            store.close()


def test_a_cited_work_is_found_by_its_row_and_a_typed_symbol_by_its_passage(tmp_path, cache_path):
    """A question about a cited work gets the best reference rows, each scored by its citing sentences and its entry
    together: the best one's citing sentence (with its entry), then the next one's entry. One sentence often cites
    two works, and the entry that shares the question's other words is the work asked about. A question that names
    a symbol as typed ("delta_t") gets the best equation passage: BM25 reads it as "delta t", as MinerU spells it."""
    from paperlake.vectors.search import _ASKS_CITED, _ASKS_SYMBOL, bm25_query
    from support.sample_warehouse import WAREHOUSE_DDL

    assert bm25_query("what is delta_t in W^{Q}?") == "what is delta t in W Q ?"
    assert bm25_query("the δ of the bound") == "the δ of the bound delta"
    for asks in ("what is delta_t?", "the role of lambda in the loss", "what does λ weigh?", "x_i and W^Q"):
        assert _ASKS_SYMBOL.search(asks), asks
    for plain in ("the delta between two runs", "Lambda Labs' GPUs", "the eta-reduction", "what does Table 2 say?"):
        assert not _ASKS_SYMBOL.search(plain), plain
    # a cited work asked about by its title or as the work that introduced something; not the paper's own title
    for cited in ("What phrase opens that paper's title?", "the title of their paper", "the work introducing it"):
        assert _ASKS_CITED.search(cited), cited
    for own in ("What is the title of this paper?", "What is the paper's title?", "the dataset the paper introduced"):
        assert not _ASKS_CITED.search(own), own
    paper = "00000000-0000-0000-0000-000000000001"
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:
        con.execute(WAREHOUSE_DDL)
        references = [
            (
                "ref-karpathy",
                "Andrej Karpathy. 2022. NanoGPT. GitHub repository.",
                "We trained NanoGPT (Karpathy, 2022) from scratch jointly on five arithmetic tasks.",
            ),
            (
                "ref-lee",
                "Nayoung Lee. 2024. Teaching arithmetic to small transformers. In ICLR.",
                "Recent studies improve arithmetic in language models (Lee et al., 2024).\n"
                "We followed the protocol of Section D.2 in (Lee et al., 2024).",
            ),
        ]
        for ordinal, (key, entry, citing) in enumerate(references):
            con.execute(
                "insert into reference (reference_id, reference_content, citing_context, ordinal, ref_paper_id) "
                "values (?, ?, ?, ?, ?)",
                [key, entry, citing, ordinal, paper],
            )
        con.execute(
            "insert into equations (equation_id, equation_content, equation_passage, ordinal, ref_paper_id) "
            "values (?, ?, ?, ?, ?)",
            [
                "eq-10",
                "L \\leq \\delta _ { t } ^ { 2 }",
                "Equation (10)\nThe loss is bounded by:\nL \\leq \\delta _ { t } ^ { 2 }\n"
                "where $\\delta _ { t }$ is a data-dependent constant.",
                10,
                paper,
            ],
        )
        for n in range(1, 4):  # passages sharing the question's other words, not the symbol
            con.execute(
                "insert into equations (equation_id, equation_content, equation_passage, ordinal, ref_paper_id) "
                "values (?, ?, ?, ?, ?)",
                [
                    f"eq-{n}",
                    f"L \\leq C _ {n}",
                    f"Equation ({n})\nThe loss of training is bounded by a quantity of kind {n}:\nL \\leq C _ {n}",
                    n,
                    paper,
                ],
            )
        _insert_chunks(
            con,
            paper,
            [
                f"The protocol we follow for training NanoGPT: training small transformers on arithmetic as we do, we "
                f"follow the training protocol and bound the loss of training by a quantity, part {n}."
                for n in range(12)
            ],
        )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            assert not sync_warehouse(store, con).failures

            cited = _ranked(
                store, paper, "Whose protocol do they follow when training NanoGPT on the five arithmetic tasks?"
            )
            assert ("ref-karpathy", "citing_context") in cited and ("ref-lee", "reference_content") in cited, cited
            symbol = _ranked(store, paper, "In the bound on the loss of training, what kind of quantity is delta_t?")
            assert ("eq-10", "equation_passage") in symbol[:2], symbol
        finally:
            store.close()


def test_hybrid_search_puts_the_front_matter_first_for_an_affiliation(tmp_path, cache_path):
    """A question about where a named author works gets the front matter that names them first from the fused
    search, though the references and their citing sentences repeat the name; other questions keep the fused order."""
    from paperlake.vectors.search import _asks_affiliation
    from support.sample_warehouse import WAREHOUSE_DDL

    papers = ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"]
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute(WAREHOUSE_DDL)
        for index, (paper, author) in enumerate(zip(papers, ["Ana Ruiz", "Bo Chen"])):
            con.execute(
                "insert into metadata (paper_id, title, front_matter) values (?, ?, ?)",
                [paper, f"Paper {index}", f"{author}, Carla Diaz\nUniversity of Lisbon {index}\n{author[:2]}@ul.pt"],
            )
            for n in range(4):
                con.execute(
                    "insert into reference (reference_id, reference_content, citing_context, ordinal, ref_paper_id) "
                    "values (?, ?, ?, ?, ?)",
                    [
                        f"ref-{index}-{n}",
                        f"{author} and Dan Wu. 202{n}. Tagging organisations affiliated with authors {n}. In ACL.",
                        f"{author} et al. (202{n}) tag which organisation an author is affiliated with.",
                        n,
                        paper,
                    ],
                )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            report = sync_warehouse(store, con)
            assert not report.failures
            for paper, author in zip(papers, ["Ana Ruiz", "Bo Chen"]):
                question = f"Which organisation is {author}, an author of the paper, affiliated with?"
                scoped = search(store, question, "text_hybrid", limit=5, filter=f"pdf_id == '{paper}'")
                assert (scoped[0].table_name, scoped[0].column_name) == ("metadata", "front_matter"), scoped
                everywhere = search(store, question, "text_hybrid", limit=5)
                assert everywhere[0].column_name == "front_matter" and everywhere[0].pdf_id == paper, everywhere
                # who wrote the paper: its first author is in the front matter, not in the references that repeat it
                first = search(
                    store,
                    "Who is the last-listed author of the tagging paper?",
                    "text_hybrid",
                    limit=5,
                    filter=f"pdf_id == '{paper}'",
                )
                assert (first[0].table_name, first[0].column_name) == ("metadata", "front_matter"), first
            # questions that name an organisation or a person without asking where someone works are left alone
            for other in (
                "Which company released the model the authors fine-tune?",
                "Which method for tagging organisations did Ana Ruiz propose?",
                "Where does the method work best?",
            ):
                assert not _asks_affiliation(other)
        finally:
            store.close()


def test_the_papers_title_and_its_acknowledgments_come_first_when_asked_for(tmp_path, cache_path):
    """A question about "the subtitle of the paper" brings the paper's title; "who funded the work" its
    acknowledgments section. Each shares fewer of the question's words than the passages about the method, which
    repeat its name; a cited work's title and a question without a funding word keep the fused order."""
    from paperlake.vectors.search import _ASKS_CITED, _ASKS_FUNDING, _ASKS_OWN_TITLE
    from support.sample_warehouse import WAREHOUSE_DDL

    paper = "00000000-0000-0000-0000-000000000001"
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:
        con.execute(WAREHOUSE_DDL)
        con.execute(
            "insert into metadata (paper_id, title) values (?, ?)",
            [paper, "QUILL: Calibrated Retrieval for Long Documents"],
        )
        for n, (title, content) in enumerate(
            [
                ("3 Method", "QUILL supports long documents; the QUILL paper funds its index by a grant of tokens."),
                ("Acknowledgments", "This research was supported in part by the Ostrava Science Foundation."),
            ]
        ):
            con.execute(
                "insert into sections (section_id, section_title, section_content, ordinal, ref_paper_id) "
                "values (?, ?, ?, ?, ?)",
                [f"sec-{n}", title, content, n, paper],
            )
        _insert_chunks(
            con,
            paper,
            [f"The QUILL paper: QUILL research on the subtitle of its funding, QUILL part {n}." for n in range(8)],
        )
        store = open_store(tmp_path / "vectors.db", cache_path)
        try:
            assert not sync_warehouse(store, con).failures
            title = _ranked(store, paper, "What is the full subtitle of the QUILL paper?")
            assert title[0] == (paper, "title"), title
            funding = _ranked(store, paper, "Which foundation partly funded the QUILL research?")
            assert funding[0] == ("sec-1", "section_content"), funding
        finally:
            store.close()
    for own in ("What is this paper's title?", "What is the title of the paper?", "What is the survey's subtitle?"):
        assert _ASKS_OWN_TITLE.search(own) and not _ASKS_CITED.search(own), own
    assert _ASKS_CITED.search("What is the title of their paper?")  # a cited work's title is not the paper's own
    for funding in ("Who sponsored the study?", "Which grant supported it?", "What do the authors acknowledge?"):
        assert _ASKS_FUNDING.search(funding), funding
    assert not _ASKS_FUNDING.search("Which dataset do they fine-tune on?")


def test_hybrid_routes_and_coverage_weighting(synced, sample, monkeypatch):
    """The configured routes make hybrid's BM25 route the BM25 search itself; without them the hybrid collection's
    own fields answer; coverage weighting only ever lowers dense contributions, by the share of the cell seen."""
    import dataclasses

    store, _ = synced
    _, ids = sample
    query = "reformatting technique that adds the count of digits before each number"
    assert store.config.hybrid_routes == ("text_bm25_en", "text_sentence_transformers_all_minilm_l6_v2")
    searched = []
    original = store.client.search
    monkeypatch.setattr(store.client, "search", lambda name, **kw: searched.append(name) or original(name, **kw))
    routed = search(store, query, "text_hybrid", "pages", "page_content", limit=5)
    assert searched == list(store.config.hybrid_routes) and routed[0].pdf_id == ids[NUMEROLOGIC]
    searched.clear()
    monkeypatch.setattr(store, "config", dataclasses.replace(store.config, hybrid_routes=()))
    own = search(store, query, "text_hybrid", "pages", "page_content", limit=5)
    assert searched == ["text_hybrid", "text_hybrid"] and own[0].pdf_id == ids[NUMEROLOGIC]

    searched.clear()
    weighted = dataclasses.replace(
        store.config,
        hybrid_routes=("text_bm25_en", "text_sentence_transformers_all_minilm_l6_v2"),
        coverage_weighting=True,
    )
    monkeypatch.setattr(store, "config", weighted)
    only_dense = search(store, query, "text_hybrid", "pages", "page_content", limit=5, weights=[0.0, 1.0])
    plain = {
        h.primary_key: h.score
        for h in search(store, query, "text_sentence_transformers_all_minilm_l6_v2", "pages", "page_content", limit=20)
    }
    encoder = store.encoders.get("all_minilm_l6_v2")
    for hit in only_dense:  # min-max normalised dense score x the share of the page MiniLM saw
        share = encoder.seen_fractions([hit.text])[0]
        assert 0 < share < 1 and hit.score <= share + 1e-9 and hit.primary_key in plain


def test_describe_lists_models_views_and_counts(synced):
    store, _ = synced
    described = {d["name"]: d for d in describe_collections(store)}
    bm25 = described["text_bm25_en"]
    assert bm25["active"] and bm25["vectors"][0]["metric"] == "BM25"
    assert sum(v.get("count", 0) for v in bm25["views"]) == bm25["count"]
    assert described["text_sentence_transformers_all_minilm_l6_v2"]["vectors"][0]["dimension"] == 384
    clip = described[IMAGE_COLLECTION]
    assert clip["vectors"][0]["encoder"]["random"] is True
    bge = described["text_sentence_transformers_bge_large_en_v1_5"]
    assert bge["active"] is False and "PAPERLAKE_BGE_PATH" in bge["inactive_reason"]
    prompt = render_for_prompt(list(described.values()))
    assert "chunks.text_content" in prompt and "pdf_id" in prompt and "bge" not in prompt


# ── re-sync, delete, reopen ──────────────────────────────────────────────────────────────────────────────────────


def test_resync_of_changed_paper_leaves_no_stale_entity(tmp_path, sample, cache_path, synced):
    warehouse, ids = sample
    pid = ids[NUMEROLOGIC]
    changed = tmp_path / "changed.duckdb"
    shutil.copyfile(warehouse, changed)
    with duckdb.connect(str(changed)) as con:
        chunk_ids = [
            r[0]
            for r in con.execute(
                "select chunk_id from chunks where ref_paper_id = ? order by ordinal", [pid]
            ).fetchall()
        ]
        con.execute("delete from chunks where chunk_id in (select unnest(?::varchar[]))", [chunk_ids[:5]])
        con.execute(
            "update chunks set text_content = 'A rewritten paragraph about place values.' where chunk_id = ?",
            [chunk_ids[6]],
        )
        page_id = con.execute("select page_id from pages where ref_paper_id = ? and page_number = 2", [pid]).fetchone()[
            0
        ]
        con.execute("insert into chunks values ('new-chunk', ?, 999, ?, ?)", ["été " * 12000, pid, page_id])
        con.execute("delete from reference where ref_paper_id = ?", [pid])

    with open_store(tmp_path / "vectors.db", cache_path) as store:
        before = store.sync_paper(pid, cells_of(warehouse, [pid]))
        other_before = store.sync_paper(ids[INVERSION], cells_of(warehouse, [ids[INVERSION]]))
        old_cells = cells_of(warehouse, [pid])
        new_cells = cells_of(changed, [pid])
        report = store.sync_paper(pid, new_cells)
        removed = {c.entity_id for c in old_cells} - {c.entity_id for c in new_cells}
        specs = {spec.name: spec for spec in load_config().collections}
        for name in TEXT_COLLECTIONS:
            want = {c.entity_id for c in new_cells if specs[name].holds(c)}
            assert set(store.existing_hashes(name, pid)) == want, name
            assert store.count(name, f"pdf_id == '{pid}'") == len(want)
            stats = report.collections[name]
            assert stats.deleted == len({e for e in removed}) and stats.upserted == 2
        dense = report.collections["text_sentence_transformers_all_minilm_l6_v2"]
        # the rewritten chunk, and the distinct windows of the new long one (every token is encoded)
        long_text = next(c.text for c in new_cells if c.primary_key == "new-chunk" and c.kind == "text")
        windows = {w for w, _ in store.encoders.get("all_minilm_l6_v2").windows([long_text])[0]}
        assert len(windows) > 1 and dense.encoded == 1 + len(windows) and any("truncated" in n for n in dense.notes)
        assert report.collections["text_hybrid"].encoded == 0  # same MiniLM vectors, from the cache
        assert before.collections["text_bm25_en"].cells == len([c for c in old_cells if c.kind == "text"])
        other = ids[INVERSION]
        assert store.count("text_bm25_en", f"pdf_id == '{other}'") == other_before.collections["text_bm25_en"].cells
        long_hit = search(store, "été", "text_bm25_en", "chunks", "text_content", filter=f"pdf_id == '{pid}'", limit=1)
        assert long_hit and len(long_hit[0].text.encode("utf-8")) <= 65535


def test_delete_paper_leaves_none_and_spares_others(tmp_path, sample, cache_path, synced):
    warehouse, ids = sample
    with open_store(tmp_path / "vectors.db", cache_path) as store:
        for pid in ids.values():
            store.sync_paper(pid, cells_of(warehouse, [pid]))
        gone, kept = ids[NUMEROLOGIC], ids[INVERSION]
        kept_before = {n: store.count(n, f"pdf_id == '{kept}'") for n in TEXT_COLLECTIONS}
        deleted = store.delete_paper(gone)
        assert all(deleted[n] > 0 for n in TEXT_COLLECTIONS)
        for name in (*TEXT_COLLECTIONS, IMAGE_COLLECTION):
            assert store.count(name, f"pdf_id == '{gone}'") == 0
        assert {n: store.count(n, f"pdf_id == '{kept}'") for n in TEXT_COLLECTIONS} == kept_before
        assert store.sync_paper(gone, []).deleted == 0


def test_reopen_loads_collections_and_searches(tmp_path, sample, cache_path, synced):
    warehouse, ids = sample
    pid = ids[INVERSION]
    path = tmp_path / "vectors.db"
    with open_store(path, cache_path) as store:
        store.sync_paper(pid, cells_of(warehouse, [pid]), ["text_bm25_en"])
        expected = store.count("text_bm25_en")
    with open_store(path, cache_path) as store:
        assert store.count("text_bm25_en") == expected
        hits = search(store, "obfuscated embedding matrix", "text_bm25_en", "chunks", "text_content", limit=3)
        assert hits and hits[0].pdf_id == pid


def test_a_search_asks_milvus_whether_its_collection_exists_until_the_store_has_loaded_it(
    tmp_path, sample, cache_path, monkeypatch
):
    """Once a store has loaded a collection, its searches do not ask Milvus whether the collection exists (a call as
    long as the search); a collection this file does not have still gives no hits, and one the store drops and makes
    again is searched as it now is (empty). The agent lists the collections without counting their entities."""
    warehouse, ids = sample
    pid = ids[INVERSION]
    with open_store(tmp_path / "vectors.db", cache_path) as store:
        store.sync_paper(pid, cells_of(warehouse, [pid]), ["text_bm25_en"])
        asked = []
        real = store.client.has_collection
        monkeypatch.setattr(store.client, "has_collection", lambda name, **kw: asked.append(name) or real(name, **kw))
        for _ in range(3):
            assert search(store, "obfuscated embedding matrix", "text_bm25_en", "chunks", "text_content", limit=3)
        assert asked.count("text_bm25_en") <= 1, asked
        dense = "text_sentence_transformers_all_minilm_l6_v2"
        assert search(store, "obfuscated embedding matrix", dense, "chunks", "text_content", limit=3) == []
        assert dense in asked
        # the agent's list of collections (names, fields, views) counts no entities: ~60 queries it never showed
        from agent.backends import MilvusVectors

        monkeypatch.setattr(store, "count", lambda *a, **k: pytest.fail("counted entities to list the collections"))
        listed = MilvusVectors(store).collections()
        assert "text_bm25_en" in [c.name for c in listed] and all(c.views for c in listed)
        store.ensure_collections(["text_bm25_en"], recreate=True)  # dropped and made again, empty
        assert search(store, "obfuscated embedding matrix", "text_bm25_en", "chunks", "text_content", limit=3) == []


# ── CLIP path (random model, explicit test flag) ─────────────────────────────────────────────────────────────────


def test_clip_needs_weights_unless_random_is_explicit():
    with pytest.raises(EncoderUnavailable, match="PAPERLAKE_CLIP_PATH"):
        ClipImageEncoder("openai/clip-vit-base-patch32", "ViT-B-32", None)
    encoder = ClipImageEncoder("openai/clip-vit-base-patch32", "ViT-B-32", None, allow_random=True)
    assert encoder.metadata["random"] is True and "RANDOM" in encoder.model_id


def test_clip_renders_regions_and_stores_512d_vectors(synced, sample):
    store, _ = synced
    warehouse, ids = sample
    image = next(c for c in cells_of(warehouse, [ids[NUMEROLOGIC]]) if c.kind == "image")
    png = render_region(image.pdf_path, image.page_number, image.bbox, dpi=72)
    assert png.startswith(b"\x89PNG")
    import pymupdf

    pixmap = pymupdf.Pixmap(png)
    assert abs(pixmap.width - image.bbox[2]) <= 2 and abs(pixmap.height - image.bbox[3]) <= 2
    rows = store.client.query(
        IMAGE_COLLECTION, filter=f'id == "{image.entity_id}"', output_fields=["vector", "bbox", "page_number"]
    )
    assert len(rows) == 1
    vector = np.asarray(rows[0]["vector"], dtype=np.float32)
    assert vector.shape == (512,) and abs(np.linalg.norm(vector) - 1) < 1e-3
    assert rows[0]["bbox"] == list(image.bbox) and rows[0]["page_number"] == image.page_number
    hits = search(store, "a bar chart", IMAGE_COLLECTION, "images", "bounding_box", limit=3)
    assert hits and all(h.bbox and h.text is None for h in hits)


# ── one process per .db: the server for sharing, the lock guard for direct access ────────────────────────────────


def _sync_worker(uri: str, warehouse: str, paper_id: str, cache_path: str) -> dict:
    """Runs in a spawned process: sync one paper through the server."""
    with VectorStore(uri, cache_path=cache_path) as store:
        report = store.sync_paper(paper_id, cells_of(warehouse, [paper_id]), TEXT_COLLECTIONS)
    return {name: stats.upserted for name, stats in report.collections.items()}


_HOLD_SCRIPT = """
import sys, time
from paperlake.vectors.store import VectorStore
store = VectorStore(sys.argv[1], use_cache=False)
store.ensure_collections(["text_bm25_en"])
print("ready", flush=True)
time.sleep(120)
"""


def test_two_processes_sync_concurrently_through_a_server(tmp_path, sample, cache_path, synced):
    import multiprocessing

    from paperlake.vectors.server import StoreLockedError, milvus_lite_server

    warehouse, ids = sample
    data_dir = tmp_path / "shared.db"
    expected = {}
    for pid in ids.values():
        expected[pid] = sum(c.kind == "text" for c in cells_of(warehouse, [pid]))
    with milvus_lite_server(data_dir) as server:
        with VectorStore(server.uri, cache_path=cache_path) as store:
            store.ensure_collections(TEXT_COLLECTIONS)
        with pytest.raises(StoreLockedError, match="milvus-lite server"):
            VectorStore(data_dir, lock_timeout=0.5, use_cache=False)
        context = multiprocessing.get_context("spawn")
        with context.Pool(2) as pool:
            results = pool.starmap(
                _sync_worker, [(server.uri, str(warehouse), pid, str(cache_path)) for pid in ids.values()]
            )
        assert [r["text_bm25_en"] for r in results] == list(expected.values())
        specs = {spec.name: spec for spec in load_config().collections}
        with VectorStore(server.uri, cache_path=cache_path) as store:
            for name in TEXT_COLLECTIONS:
                for pid in expected:
                    held = sum(specs[name].holds(c) for c in cells_of(warehouse, [pid]))
                    assert held and store.count(name, f"pdf_id == '{pid}'") == held
    assert server.process.returncode is not None
    with open_store(data_dir, cache_path) as store:  # stopped cleanly: the file opens directly, data intact
        assert store.count("text_bm25_en") == sum(expected.values())


def test_file_lock_guard_times_out_with_a_clear_error(tmp_path):
    import subprocess
    import sys
    import time

    from paperlake.vectors.server import StoreLockedError

    path = tmp_path / "held.db"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        started = time.monotonic()
        with pytest.raises(StoreLockedError) as error:
            VectorStore(path, lock_timeout=1, use_cache=False)
        assert time.monotonic() - started < 10
        message = str(error.value)
        assert f"pid {holder.pid}" in message and "one process per .db" in message and "milvus_lite_server" in message
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with VectorStore(path, lock_timeout=5, use_cache=False) as store:
        assert store.client.has_collection("text_bm25_en")


def _retrieval_benchmark():
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "retrieval.py"
    spec = importlib.util.spec_from_file_location("benchmark_retrieval", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return script, module


def test_benchmark_queries_are_verified_against_the_pdfs(corpus):
    script, module = _retrieval_benchmark()
    queries = module.load_queries(script.with_name("retrieval_queries.jsonl"), corpus)
    assert len(queries) >= 40
    assert len({q["paper"] for q in queries}) == 19
    assert all(q["page"] in q["gold_pages"] for q in queries)


def test_benchmark_compares_hybrid_to_the_better_route_with_a_paired_interval():
    _, module = _retrieval_benchmark()
    # ranks of the first gold page per query; None = not found
    bm25 = [1, 2, 1, None, 3, 1, 2, 1]
    report = module.paired_bootstrap({"v": {"bm25": bm25, "dense": [2, 5, None, None, 4, 3, 1, 2], "hybrid": bm25}})
    assert report["v"]["better_single_route"] == "bm25"
    assert report["v"]["mrr_difference"] == 0 and report["v"]["ci95"] == [0, 0]
    worse = module.paired_bootstrap({"v": {"bm25": bm25, "dense": [None] * 8, "hybrid": [2, 2, 2, None, 3, 2, 2, 2]}})
    low, high = worse["v"]["ci95"]
    assert low < high < 0 and worse["v"]["queries_worse"] == 4 and worse["v"]["queries_better"] == 0


def test_benchmark_states_the_compute_an_encoding_target_needs(tmp_path):
    import json

    _, module = _retrieval_benchmark()
    (tmp_path / "config.json").write_text(
        json.dumps({"num_hidden_layers": 6, "hidden_size": 384, "intermediate_size": 1536}), encoding="utf-8"
    )
    encoding = {"variants": {"onnx@model": {"mean_tokens_per_cell": 100.0, "mix_tokens_per_s": 2000.0}}}
    entry = module.compute_ceiling(encoding, tmp_path)["variants"]["onnx@model"]
    per_token = 2 * 6 * (4 * 384**2 + 2 * 384 * 1536) + 4 * 6 * 384 * 100  # dense layers + attention
    assert entry["mflops_per_token"] == round(per_token / 1e6, 1)
    assert entry["achieved_gflops"] == round(2000 * per_token / 1e9, 1)
    # 500 cells/s of 100 tokens is 25x the 2000 tokens/s measured
    assert entry["shortfall_factor"] == 25.0


def test_content_versions_change_with_a_papers_rows_only(tmp_path):
    """The staleness check reads cells only for papers whose rows changed since their sync: the version must move
    with any column of any of the paper's rows (pooling reads page ids, titles and order too), and only for it."""
    import duckdb

    from paperlake.vectors.ledger import content_versions

    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute("create table metadata (paper_id varchar, title varchar)")
    con.execute("create table chunks (chunk_id varchar, ref_paper_id varchar, ordinal int, text_content varchar)")
    con.execute("insert into metadata values ('p1', 'One'), ('p2', 'Two')")
    con.execute("insert into chunks values ('c1', 'p1', 0, 'alpha'), ('c2', 'p1', 1, 'beta'), ('c3', 'p2', 0, 'x')")
    before = content_versions(con)
    assert set(before) == {"p1", "p2"} and content_versions(con, ["p2"]) == {"p2": before["p2"]}
    con.execute("update chunks set ordinal = 2 where chunk_id = 'c2'")  # not a text: the order pooling reads
    after = content_versions(con)
    assert after["p1"] != before["p1"] and after["p2"] == before["p2"]
    con.execute("delete from chunks where chunk_id = 'c2'")
    assert content_versions(con)["p1"] not in (before["p1"], after["p1"])
