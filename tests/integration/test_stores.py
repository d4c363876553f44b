"""After an ingest, every downstream store agrees with the warehouse: Milvus entities, the formula graph (tables
and RDF) and the agent's retrieval; removing a paper empties all of them. Real papers, MinerU outputs, Milvus Lite."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from cli.app import app
from paperlake.config import Settings
from support.fixtures import ingest_sample

# The arithmetic-mechanism paper brings a computable formula (the residual stream update) for the MathRAG test.
PAPERS = ["emnlp2024-193-arithmetic-mechanism", "naacl2024-116-quantum-lindblad-lm"]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, dbt_manifest: Path, corpus: Path) -> dict:
    root = tmp_path_factory.mktemp("stores")
    # the home's warehouse starts as one built when the staging models were views: its first (full) build drops them
    (root / "home").mkdir()
    with duckdb.connect(str(root / "home" / "warehouse.duckdb")) as con:
        con.execute("create schema staging")
        con.execute("create view staging.stg_chunks as select 1 as chunk_id")
    return ingest_sample(root, PAPERS)


def cli(settings: Settings, *args: str):
    result = CliRunner().invoke(app, [*args, "--home", str(settings.home)])
    assert result.exit_code == 0, result.output
    return result


def paper_ids(settings: Settings) -> dict[str, str]:
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        return dict(con.execute("select paper_key, paper_id::varchar from metadata").fetchall())


def test_each_collection_holds_one_entity_per_non_empty_encodable_cell(built):
    from paperlake.vectors.config import load_config
    from paperlake.vectors.entities import collect_cells
    from paperlake.vectors.entities import default_encodable as paper_encodable
    from paperlake.vectors.store import VectorStore

    settings = built["settings"]
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        cells = collect_cells(con, paper_encodable())
    kind = {(table, column): k for table, column, k in paper_encodable()}
    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings)
    try:
        for spec in load_config().active_collections():
            # every cell of the collection's modality but those of the views it is configured without
            held = [c for c in cells if kind[(c.table_name, c.column_name)] == spec.modality]
            held = [c for c in held if c.view not in spec.without_views]
            assert held and store.count(spec.name) == len(held) and all(spec.holds(c) for c in held), spec.name
            for view in spec.without_views:
                table, column = view.split(".")
                assert store.count(spec.name, f"table_name == '{table}' and column_name == '{column}'") == 0
            for paper in paper_ids(settings).values():
                assert store.count(spec.name, f"pdf_id == '{paper}'") == sum(1 for c in held if c.pdf_id == paper)
        # BM25 holds every text cell: the table row lines the dense collections are without are found there
        assert (
            store.count("text_bm25_en", "table_name == 'table_rows'")
            == sum(c.view == "table_rows.row_text" for c in cells)
            > 0
        )
    finally:
        store.close()


def test_the_warehouse_holds_the_marts_and_no_staging_views(built):
    """The staging models are ephemeral (inlined into the marts): a full build leaves no object of theirs, and drops
    the `staging` schema a warehouse built when they were views still had (the fixture's home started with one)."""
    with duckdb.connect(str(built["settings"].warehouse), read_only=True) as con:
        schemas = {s for (s,) in con.execute("select distinct table_schema from information_schema.tables").fetchall()}
        names = {n for (n,) in con.execute("select table_name from information_schema.tables").fetchall()}
    assert "staging" not in schemas and not {n for n in names if n.startswith("stg_")}, (schemas, names)
    assert {"metadata", "chunks", "volumes"} <= names


def test_every_mart_key_is_a_primary_key_the_warehouse_enforces(built, tmp_path):
    """A mart's id is unique because DuckDB refuses a duplicate as dbt writes it (a contract constraint in the mart's
    YAML), not because a test query looked afterwards: each mart's YAML names its id as the primary key, the built
    warehouse holds it, and inserting a copy of a row fails."""
    import shutil

    from schemas.warehouse import declared_keys

    declared = declared_keys()
    copy = tmp_path / "warehouse.duckdb"
    shutil.copyfile(built["settings"].warehouse, copy)
    with duckdb.connect(str(copy)) as con:
        marts = {
            name
            for (name,) in con.execute(
                "select table_name from information_schema.tables where table_schema = 'main' and table_name not like "
                "'\\_%' escape '\\' and table_type = 'BASE TABLE'"
            ).fetchall()
        }
        # every mart with an id column has it as its key, as in NeuSym-RAG's DDL; these two have a composite grain
        composite = {"formula_parameters", "enrichment_errors"}
        assert marts and marts - composite == set(declared), (marts - composite) ^ set(declared)
        enforced = dict(
            con.execute(
                "select table_name, constraint_column_names[1] from duckdb_constraints() "
                "where schema_name = 'main' and constraint_type = 'PRIMARY KEY'"
            ).fetchall()
        )
        assert {name: enforced.get(name) for name in declared} == declared
        refused = 0
        for table in sorted(declared):
            if con.execute(f'select count(*) from "{table}"').fetchone()[0]:
                with pytest.raises(duckdb.ConstraintException, match="(?i)duplicate key"):
                    con.execute(f'insert into "{table}" select * from "{table}" limit 1')
                refused += 1
        assert refused >= 10, refused


def test_search_returns_pages_of_the_sample_papers_and_filters_restrict(built):
    settings = built["settings"]
    ids = paper_ids(settings)
    hits = json.loads(
        cli(settings, "search", "Lindblad master equation density matrix", "--json", "--limit", "5").stdout
    )
    assert hits and hits[0]["pdf_id"] == ids[f"naacl2024/{PAPERS[1]}"]
    assert all(1 <= h["page_number"] <= 10 for h in hits)
    other = ids[f"emnlp2024/{PAPERS[0]}"]
    filtered = json.loads(
        cli(
            settings,
            "search",
            "Lindblad master equation",
            "--json",
            "--filter",
            f"pdf_id == '{other}'",
            "--view",
            "chunks.text_content",
        ).stdout
    )
    assert filtered and {h["pdf_id"] for h in filtered} == {other}
    assert {(h["table_name"], h["column_name"]) for h in filtered} == {("chunks", "text_content")}
    hybrid = json.loads(cli(settings, "search", "Lindblad master equation", "--json", "--hybrid").stdout)
    assert hybrid[0]["pdf_id"] == ids[f"naacl2024/{PAPERS[1]}"]
    bad = CliRunner().invoke(app, ["search", "x", "--filter", "paper_id == 'x'", "--home", str(settings.home)])
    assert bad.exit_code == 1 and "use pdf_id" in bad.output


def test_search_reads_at_80_columns(built):
    """One block per hit: a heading (rank, score, title, page, view), then the content wrapped to the terminal, so
    no content line is short unless it ends its hit; query words highlighted (bold) when colours are on."""
    settings = built["settings"]
    result = CliRunner().invoke(
        app,
        ["search", "Lindblad master equation density matrix", "--limit", "4", "--home", str(settings.home)],
        env={"COLUMNS": "80"},
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    titles = set(
        dict(
            duckdb.connect(str(settings.warehouse), read_only=True)
            .execute("select paper_key, title from metadata")
            .fetchall()
        ).values()
    )
    headings = [i for i, line in enumerate(lines) if line[:3] in {f"{n}. " for n in range(1, 5)}]
    assert len(headings) == 4 and any(title[:30] in lines[headings[0]] for title in titles)
    blocks = [lines[start:end] for start, end in zip(headings, headings[1:] + [len(lines)])]
    for block in blocks:
        content = [line.rstrip() for line in block if line.startswith("    ")]
        assert content and all(len(line) <= 80 for line in block)
        assert all(len(line) >= 40 for line in content[:-1]), content  # only a hit's last line may be short
        heading = " ".join(line.strip() for line in block if line.strip() and not line.startswith("    "))
        assert re.search(r"p\. \d+\s+·\s+\w+\.\w+", heading), heading
    from rich.console import Console

    import cli.query as cli_module

    recorded = Console(width=80, record=True, force_terminal=True, color_system="standard")
    original, cli_module.console = cli_module.console, recorded
    try:
        cli_module._print_hits(
            "c",
            "Lindblad equation",
            [(0.5, "p", 3, "chunks", "text_content", "k", "the Lindblad master equation " * 8)],
            {"p": "A title"},
        )
    finally:
        cli_module.console = original
    assert "\x1b[1;33mLindblad\x1b[0m" in recorded.export_text(styles=True)


def test_formula_graph_tables_status_and_sparql(built):
    from paperlake.formulas.rdf import formulas_using_constant

    settings = built["settings"]
    status = json.loads(cli(settings, "status", "--json").stdout)
    assert status["formulas"]["equations"] > 0 and status["formulas"]["formulas"] >= status["formulas"]["equations"]
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        wholes, parts = con.execute(
            "select count(*) filter (where parent_image_id is null), count(parent_image_id) from images"
        ).fetchone()
    assert status["figures"] == {"figures": wholes, "panels": parts} and wholes + parts == status["rows"]["images"]
    turtle = (settings.home / "formulas" / "formulas.ttl").read_text()
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        uses = con.execute(
            "select f.formula_id, c.name from formula_relations r join formulas f on f.formula_id ="
            " r.source join constants c on c.constant_id = r.target where r.relation_type = "
            "'uses_constant'"
        ).fetchall()
    assert uses, "the Lindblad equation uses the reduced Planck constant"
    formula_id, constant = uses[0]
    assert formula_id in {row["formula_id"] for row in formulas_using_constant(turtle, constant)}


def test_second_ingest_reencodes_nothing(built):
    from orchestration.run import ingest

    summary = ingest([built["inbox"]], built["settings"])
    assert summary.plan.to_parse == [] and not summary.warehouse_built
    assert not summary.formulas_built and not summary.vectors_synced  # nothing changed: no stage ran


def test_retrieval_only_eval_runs_offline(built):
    settings = built["settings"]
    result = cli(
        settings,
        "eval",
        str(REPO / "tests" / "data" / "airqa_sample.jsonl"),
        "--method",
        "classic_rag",
        "--retrieval-only",
        "--out",
        str(settings.home / "eval"),
    )
    report = json.loads((settings.home / "eval" / "retrieval.json").read_text())
    assert "hit@5" in result.output and report["questions"]


def test_ask_through_the_cli_with_a_scripted_endpoint_cites_the_real_stores(built, tmp_path):
    from support.openai_stub import start_stub

    settings = built["settings"]
    script = [
        '[Thought]: Search the chunks.\n[Action]:\nRetrieveFromVectorstore(query="Lindblad master equation", '
        'collection_name="text_bm25_en", table_name="chunks", column_name="text_content", limit=3)',
        '[Thought]: The chunk names it.\n[Action]:\nGenerateAnswer(answer="the Lindblad master equation")',
    ]
    with start_stub(script, tmp_path / "stub") as stub:
        env = {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "k", "PAPERLAKE_LLM_MODEL": "stub-model"}
        result = CliRunner(env=env).invoke(
            app,
            [
                "ask",
                "Which equation models the sentiment dynamics?",
                "--home",
                str(settings.home),
                "--no-cache",
                "--json",
            ],
        )
        requests = stub.requests()
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["status"] == "answered" and answer["answer"] == "the Lindblad master equation"
    lindblad = paper_ids(settings)[f"naacl2024/{PAPERS[1]}"]
    assert any(c.get("paper_id") == lindblad and c.get("page_number") for c in answer["citations"]), answer
    system = requests[0]["messages"][0]["content"]
    assert "text_bm25_en" in system and "metadata" in system and str(settings.home) not in system
    without = CliRunner(env={"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}).invoke(
        app, ["ask", "anything", "--home", str(settings.home)]
    )
    assert without.exit_code == 1 and "OPENAI_BASE_URL" in without.output


def test_mathrag_computes_through_a_formula_tool_from_the_warehouse(built, tmp_path):
    from agent.run import ask
    from paperlake.formulas import agent_backend
    from paperlake.runtime.llm import ChatClient
    from paperlake.runtime.sql_sandbox import ReadOnlyWarehouse
    from support.openai_stub import start_stub

    settings = built["settings"]
    with ReadOnlyWarehouse(settings.warehouse) as warehouse:
        layer = agent_backend(warehouse)
        validated = [f for f in layer.tables["formulas"] if f["status"] == "validated"]
        assert validated, "the sample papers have at least one computable formula"
        formula = validated[0]
        tool = layer.create_tool(formula["formula_id"])
    names = list(tool.parameter_schema["properties"])
    values = {name: float(i + 2) for i, name in enumerate(names)}
    expected = tool(**values).value
    script = [
        f'[Thought]: find it\n[Action]:\nRetrieveMathKnowledge(query="{formula["output"]}")',
        f'[Thought]: make a tool\n[Action]:\nCreateDynamicTool(formula_id="{formula["formula_id"]}")',
        f'[Thought]: compute\n[Action]:\nCallTool(tool_name="{tool.name}", parameters={json.dumps(values)})',
        f"[Thought]: done\n[Action]:\nGenerateAnswer(answer={expected})",
    ]
    with start_stub(script, tmp_path / "stub") as stub:
        llm = ChatClient(base_url=stub.base_url, api_key="k", model="stub-model", cache_dir=None)
        result = ask("Compute it.", settings, method="mathrag", llm=llm)
        requests = stub.requests()
    assert result.status == "answered" and float(result.answer) == pytest.approx(expected)
    observations = " ".join(m["content"] if isinstance(m["content"], str) else "" for m in requests[-1]["messages"])
    assert str(expected) in observations or f"{expected:g}" in observations


def test_eval_with_an_llm_writes_trajectories_predictions_and_reports(built, tmp_path):
    from paperlake.evaluation.dataset import load_examples
    from support.openai_stub import start_stub

    settings = built["settings"]
    data = REPO / "tests" / "data" / "airqa_sample.jsonl"
    first, second = load_examples(data)[:2]
    script = [
        f"Known answer.\n```txt\n{first.extra['gold_answer']!r}\n```",
        "I cannot tell.\n```txt\nnot in the paper\n```",
    ]
    out = tmp_path / "eval"
    with start_stub(script, tmp_path / "stub") as stub:
        env = {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "k", "PAPERLAKE_LLM_MODEL": "stub-model"}
        result = CliRunner(env=env).invoke(
            app,
            [
                "eval",
                str(data),
                "--method",
                "question_only",
                "--limit",
                "2",
                "--out",
                str(out),
                "--home",
                str(settings.home),
            ],
        )
    assert result.exit_code == 0, result.output
    assert sorted(p.stem for p in (out / "trajectories").glob("*.json")) == sorted([first.uuid, second.uuid])
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["uuid"] for p in predictions] == [first.uuid, second.uuid]
    report = json.loads((out / "report.json").read_text())
    assert (out / "report.md").exists() and (out / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert report["overall"] == 0.5  # the gold answer scores 1, the refusal 0


def test_pages_sections_and_tables_are_pooled_from_text_encoded_once(built):
    """Encode each token once: a page's dense vector is the token-weighted mean of the windows of the chunks that
    start on it, a section's of its chunks', a table's content of its row lines; none of them is encoded again."""
    import numpy as np

    from paperlake.vectors.entities import collect_cells, default_encodable
    from paperlake.vectors.store import VectorStore

    settings = built["settings"]
    quantum = paper_ids(settings)[f"naacl2024/{PAPERS[1]}"]
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        cells = collect_cells(con, default_encodable(), [quantum])
        chunks_of_page = dict(
            con.execute(
                "select p.page_id::varchar, list(c.text_content order by c.ordinal) from pages p join chunks c on "
                "c.ref_page_id = p.page_id where p.ref_paper_id = ? group by p.page_id",
                [quantum],
            ).fetchall()
        )
    pooled = {c.table_name: c for c in cells if c.parts and c.hosts is None}
    assert set(pooled) == {"pages", "sections", "tables"}
    # the other cells with parts are lines of the prose (LINE_VIEWS), read inside their chunks: tested below
    assert {c.view for c in cells if c.hosts} == {"reference.citing_context", "equations.equation_passage"}
    page = next(c for c in cells if c.table_name == "pages" and c.parts and len(c.parts) > 1)
    assert list(page.parts) == chunks_of_page[page.primary_key]
    collection = "text_sentence_transformers_all_minilm_l6_v2"
    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings)
    try:
        encoder = store.encoders.get("all_minilm_l6_v2")
        store.load(collection)
        (stored,) = store.client.get(collection, ids=[page.entity_id], output_fields=["vector"])
        vector = np.asarray(stored["vector"], np.float32)
        windows = [w for text in page.parts for w in encoder.windows([text])[0]]
        expected = (
            encoder.encode([w for w, _ in windows]) * np.asarray([n for _, n in windows], np.float32)[:, None]
        ).sum(axis=0)
        np.testing.assert_allclose(vector, expected / np.linalg.norm(expected), atol=1e-4)
        report = store.sync_paper(quantum, cells, [collection])
        assert report.encoded == 0 and report.upserted == 0
    finally:
        store.close()


def test_reference_entries_and_equations_are_late_chunked_from_their_chunks(built):
    """A reference entry's or display equation's text lies in a chunk: its cell points there (``within``), and its
    stored dense vector is the mean of its tokens' states in the chunk's encoding, not an encoding of its own."""
    import numpy as np

    from paperlake.vectors.encoders import encode_pooled
    from paperlake.vectors.entities import collect_cells, default_encodable
    from paperlake.vectors.store import VectorStore

    settings = built["settings"]
    quantum = paper_ids(settings)[f"naacl2024/{PAPERS[1]}"]
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        cells = collect_cells(con, default_encodable(), [quantum])
        chunks = {
            t for (t,) in con.execute("select text_content from chunks where ref_paper_id = ?", [quantum]).fetchall()
        }
    pieces = [c for c in cells if c.view in ("reference.reference_content", "equations.equation_content")]
    assert {c.table_name for c in pieces} == {"reference", "equations"}
    located = [c for c in pieces if c.within]
    assert len(located) >= 0.9 * len(pieces)
    for cell in located:
        host, start, end = cell.within
        assert host in chunks and " ".join(host[start:end].split()) == " ".join(cell.text.split())
    assert all(
        c.within is None for c in cells if c.view not in ("reference.reference_content", "equations.equation_content")
    )
    collection = "text_sentence_transformers_all_minilm_l6_v2"
    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings)
    try:
        encoder = store.encoders.get("all_minilm_l6_v2")
        store.load(collection)
        sample = located[:: max(1, len(located) // 8)]
        stored = {
            r["id"]: np.asarray(r["vector"], np.float32)
            for r in store.client.get(collection, ids=[c.entity_id for c in sample], output_fields=["vector"])
        }
        expected = encode_pooled(encoder, [(c.text,) for c in sample], None, within=[c.within for c in sample])
        own = encoder.encode([c.text for c in sample])
        for i, cell in enumerate(sample):
            np.testing.assert_allclose(stored[cell.entity_id], expected.vectors[i], atol=1e-4)
        assert min(float(a @ b) for a, b in zip(expected.vectors, own)) < 0.99  # not the entry's own encoding
    finally:
        store.close()


def test_citing_sentences_and_equation_passages_are_read_inside_their_chunks(built):
    """A reference's citing sentences and an equation's passage are lines of the prose: each line a chunk holds
    points there (``hosts``), and the stored dense vector pools those lines' tokens from the chunks' encodings."""
    import numpy as np

    from paperlake.vectors.encoders import encode_pooled
    from paperlake.vectors.entities import LINE_VIEWS, collect_cells, default_encodable
    from paperlake.vectors.store import VectorStore

    settings = built["settings"]
    quantum = paper_ids(settings)[f"naacl2024/{PAPERS[1]}"]
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        cells = collect_cells(con, default_encodable(), [quantum])
    lined = [c for c in cells if (c.table_name, c.column_name) in LINE_VIEWS]
    assert {c.table_name for c in lined} == {"reference", "equations"}
    hosted = [c for c in lined if c.hosts]
    assert len(hosted) >= 0.8 * len(lined)
    for cell in hosted:
        assert cell.parts == tuple(line for line in cell.text.split("\n") if line.strip())
        assert len(cell.hosts) == len(cell.parts)
        for line, host in zip(cell.parts, cell.hosts):
            assert host is None or " ".join(host[0][host[1] : host[2]].split()) == " ".join(line.split())
    collection = "text_sentence_transformers_all_minilm_l6_v2"
    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings)
    try:
        store.load(collection)
        sample = hosted[:: max(1, len(hosted) // 8)]
        stored = {
            r["id"]: np.asarray(r["vector"], np.float32)
            for r in store.client.get(collection, ids=[c.entity_id for c in sample], output_fields=["vector"])
        }
        expected = encode_pooled(
            store.encoders.get("all_minilm_l6_v2"), [c.parts for c in sample], None, hosts=[c.hosts for c in sample]
        )
        for i, cell in enumerate(sample):
            np.testing.assert_allclose(stored[cell.entity_id], expected.vectors[i], atol=1e-4)
    finally:
        store.close()


def test_a_tables_content_is_pooled_from_its_outline(built):
    """A table's dense vector is pooled from its outline (caption, column headers, row labels), not from its row
    lines, which no dense collection holds."""
    from paperlake.vectors.entities import collect_cells

    settings = built["settings"]
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        contents = [c for c in collect_cells(con) if c.view == "tables.table_content" and c.parts]
        assert contents and all(len(c.parts) == 1 and c.head_tokens is None for c in contents)
        for content in contents:
            caption, headers, labels = con.execute(
                "select t.table_caption, "
                "(select list(column_header order by col_index) from table_columns c "
                "where c.ref_table_id = t.table_id), "
                "(select list(row_header order by row_index) from table_rows r where r.ref_table_id = t.table_id) "
                "from tables t where t.table_id = ?",
                [content.primary_key],
            ).fetchone()
            outline = content.parts[0]
            assert outline.startswith(" ".join((caption or "").split())), outline[:200]
            assert all(" ".join(h.split()) in outline for h in headers or [] if h and h.strip())
            assert all(" ".join(r.split()) in outline for r in labels or [] if r and r.strip())
            assert "\nColumns: " in outline and "\nRows: " in outline


def test_table_rows_and_columns_are_entities_that_search_finds_and_resync_skips(built):
    """HD-RAG's row and column lines are warehouse views, encoded like every other text cell: one entity per line
    in each text collection (but the row lines in the dense ones, configured without them: BM25's only), found by
    `search --view table_rows.row_text`, and a re-sync encodes nothing."""
    from paperlake.vectors.config import load_config
    from paperlake.vectors.entities import collect_cells, default_encodable
    from paperlake.vectors.store import VectorStore

    settings = built["settings"]
    quantum = paper_ids(settings)[f"naacl2024/{PAPERS[1]}"]
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        lines = dict(
            con.execute(
                "select 'table_rows', count(*) from table_rows union all "
                "select 'table_columns', count(*) from table_columns"
            ).fetchall()
        )
        bert = con.execute(
            "select row_text from table_rows r join tables t on t.table_id = r.ref_table_id where "
            "t.ref_paper_id = ? and r.row_header = 'BERT' and t.table_caption ilike '%accuracy%'",
            [quantum],
        ).fetchall()
        cells = collect_cells(con, default_encodable(), [quantum])
    assert lines["table_rows"] > 20 and lines["table_columns"] > 10
    assert bert and "SST-5: 49.13" in bert[0][0]  # the value named by its column header
    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings)
    try:
        texts = [spec for spec in load_config().active_collections() if spec.modality == "text"]
        for spec in texts:
            for view, column in (("table_rows", "row_text"), ("table_columns", "column_text")):
                expected = 0 if f"{view}.{column}" in spec.without_views else lines[view]
                assert store.count(spec.name, f"table_name == '{view}'") == expected, (spec.name, view)
        report = store.sync_paper(quantum, cells, texts)
        assert report.encoded == 0 and report.upserted == 0 and report.deleted == 0
    finally:
        store.close()
    hits = json.loads(
        cli(
            settings,
            "search",
            "BERT accuracy on SST-5",
            "--view",
            "table_rows.row_text",
            "--filter",
            f"pdf_id == '{quantum}'",
            "--json",
        ).stdout
    )
    assert hits and {h["table_name"] for h in hits} == {"table_rows"}
    assert any("49.13" in h["content"] for h in hits)
    # the dense collections hold no row lines: the default search fell back to BM25's, a hybrid search finds them
    # through its BM25 route, and asking a dense collection for them by name says why it cannot
    fused = json.loads(
        cli(settings, "search", "BERT accuracy on SST-5", "--view", "table_rows.row_text", "--hybrid", "--json").stdout
    )
    assert fused and {h["table_name"] for h in fused} == {"table_rows"}
    refused = CliRunner().invoke(
        app,
        ["search", "BERT", "-c", "text_sentence_transformers_all_minilm_l6_v2", "--view", "table_rows.row_text"]
        + ["--home", str(settings.home)],
    )
    assert refused.exit_code != 0 and "without_views" in refused.output, refused.output
    # recap reads the row lines first, from its dense collection where it can, else from BM25
    from agent.methods import first_retrieval
    from agent.run import open_env

    question = {"uuid": "q", "question": "What accuracy does BERT reach on SST-5?", "anchor_pdf": [quantum]}
    with open_env(settings) as env:
        items = first_retrieval("recap", question, env)
    rows = [i for i in items if i.table_name == "table_rows"]
    assert rows and {i.source for i in rows} == {"text_bm25_en"} and any("49.13" in i.text for i in rows)


def test_tables_list_and_show_print_header_paths(built):
    settings = built["settings"]
    listed = json.loads(cli(settings, "tables", "list", "--paper", "Lindblad", "--json").stdout)
    assert listed and all("Lindblad" in t["title"] for t in listed)
    accuracy = next(t for t in listed if t["table_label"] == "Table 3")
    shown = json.loads(cli(settings, "tables", "show", accuracy["table_id"], "--json").stdout)
    bert = next(c for c in shown["cells"] if c["row_header_path"] == ["BERT"] and c["column_header_path"] == ["SST-5"])
    assert bert["cell_text"] == "49.13" and bert["number_value"] == 49.13
    assert shown["table"]["table_structure"] == "ok" and shown["table"]["stub_columns"] >= 1
    # the labels the paper defines ("Stanford Sentiment Treebank-5 (SST-5)"), from the lines' header_glossary
    assert "Sentiment Treebank" in shown["glossary"].get("SST-5", "")
    text = cli(settings, "tables", "show", accuracy["table_id"], "--cells").stdout
    assert "SST-5" in text and "BERT" in text and "structure: ok" in text and "defined in the paper:" in text
    missing = CliRunner().invoke(app, ["tables", "show", "nope", "--home", str(settings.home)])
    assert missing.exit_code == 1 and "paperlake tables list" in missing.output


def test_hdrag_finds_the_answer_bearing_row_more_often_than_classic_rag(built):
    """Retrieval only, no LLM: the 10 table questions about the two papers of this store (MinerU tables). hdrag puts
    the answer-bearing row first more often than classic_rag; at 5 hits, classic_rag's chunks (pooled over every
    token since chunks are encoded whole) reach 0.7 on these 10 against hdrag's 0.6, so the comparison at 5 is made
    over the whole sample by benchmarks/table_questions.py (44 questions: hdrag .932, classic_rag .727)."""
    from agent.run import retrieval_only

    settings = built["settings"]
    wanted = set(paper_ids(settings).values())
    examples = [json.loads(line) for line in (REPO / "tests" / "data" / "airqa_tables.jsonl").read_text().splitlines()]
    examples = [e for e in examples if set(e["anchor_pdf"]) <= wanted]
    assert len(examples) >= 8
    hdrag = {k: retrieval_only(examples, settings, "hdrag", k) for k in (1, 5)}
    classic = retrieval_only(examples, settings, "classic_rag", 1)
    assert hdrag[5].error is None and hdrag[5].recall_at_k >= 0.6
    assert hdrag[1].recall_at_k > classic.recall_at_k


@pytest.fixture(scope="module")
def ui(built):
    """The Dagster UI over this module's home (the two papers ingested by `paperlake ingest`'s code path)."""
    from support.dagster_ui import webserver

    with webserver(built["settings"].home, built["inbox"], built["settings"].mineru_dir) as url:
        yield url


def test_dagster_ui_shows_observed_inbox_and_named_jobs(built, ui):
    """What the UI's GraphQL says after `paperlake ingest` of two papers: every inbox partition observed with the
    paper's data version and counted as present (not "Missing"), and the runs under their named jobs, tagged with
    the volume."""
    from paperlake.lake.inbox import scan_inbox
    from support.dagster_ui import graphql

    settings = built["settings"]
    sources = {s.paper_key: s for s in scan_inbox([built["inbox"]], settings.mineru_dir)}
    keys = sorted(sources)
    node = graphql(
        ui,
        """query($keys: [String!]) { assetNodes(assetKeys: [{path: ["inbox", "pdf"]}]) {
        isObservable dataVersionByPartition(partitions: $keys)
        partitionStats { numMaterialized numPartitions numFailed } } }""",
        {"keys": keys},
    )["assetNodes"][0]
    assert node["isObservable"]
    assert node["dataVersionByPartition"] == [sources[k].data_version for k in keys]
    assert node["partitionStats"] == {"numMaterialized": len(keys), "numPartitions": len(keys), "numFailed": 0}
    runs = graphql(ui, "{ runsOrError { ... on Runs { results { jobName status tags { key value } } } } }")[
        "runsOrError"
    ]["results"]
    jobs = {run["jobName"] for run in runs}
    assert {"ingest_paper", "build_warehouse", "sync_vectors", "evaluate_volume"} <= jobs  # probes: in sync_vectors
    assert not any(job.startswith("__") for job in jobs)  # no __ephemeral_asset_job__
    for run in runs:
        if run["jobName"] in {"ingest_paper", "sync_vectors", "probe_paper"}:
            tags = {t["key"]: t["value"] for t in run["tags"]}
            assert tags.get("paperlake/volume") in {k.split("/")[0] for k in keys}, tags


@pytest.mark.ui
def test_dagster_ui_screenshots(built, ui, tmp_path):
    """The asset graph, a paper's inbox partition and the Runs page, rendered by headless Chromium (Debian's
    ``chromium``); skipped without a browser. ``PAPERLAKE_UI_SHOTS=DIR`` keeps the PNGs (docs/ui/ was made so)."""
    from support.dagster_ui import browser, graphql, screenshot

    if browser() is None:
        pytest.skip("no headless browser (Debian's chromium package) to take the screenshots")
    out = Path(os.environ.get("PAPERLAKE_UI_SHOTS") or tmp_path)
    graphql(ui, "mutation { setNuxSeen }")  # the community pop-up would cover the pages
    key = sorted(built["ids"])[0]
    shots = [
        screenshot(f"{ui}/asset-groups", out / "asset-graph.png"),
        screenshot(f"{ui}/assets/inbox/pdf?view=partitions&partition={key}", out / "inbox-partition.png"),
        screenshot(f"{ui}/runs", out / "runs.png"),
    ]
    for shot in shots:
        assert shot is not None and shot.stat().st_size > 20_000, shot  # a rendered page, not a blank one


def test_removing_a_paper_empties_every_store(built):
    from orchestration.run import ingest
    from paperlake.vectors.config import load_config
    from paperlake.vectors.store import VectorStore

    settings = built["settings"]
    key = f"naacl2024/{PAPERS[1]}"
    paper = paper_ids(settings)[key]
    (built["inbox"] / f"{key}.pdf").unlink()
    summary = ingest([built["inbox"]], settings)
    assert summary.removed == [key]
    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings)
    try:
        for spec in load_config().active_collections():
            assert store.count(spec.name, f"pdf_id == '{paper}'") == 0, spec.name
    finally:
        store.close()
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        assert con.execute("select count(*) from formula_occurrences where paper_id = ?", [paper]).fetchone() == (0,)


def test_a_new_pooling_scheme_changes_the_pooled_collections_fingerprints_only(built, monkeypatch):
    """The sync records compare each collection's fingerprint: a new pooling scheme (POOLING_VERSION) must make the
    dense collections' papers stale and leave BM25's alone (its entities are the texts, not pooled vectors)."""
    from paperlake.vectors import store as store_module
    from paperlake.vectors.store import VectorStore

    settings = built["settings"]
    store = VectorStore(settings.milvus_uri, cache_path=settings.embeddings)
    try:
        specs = {
            name: store.config.collection(name)
            for name in ("text_bm25_en", "text_sentence_transformers_all_minilm_l6_v2")
        }
        before = {name: store.fingerprint(spec) for name, spec in specs.items()}
        monkeypatch.setattr(store_module, "POOLING_VERSION", store_module.POOLING_VERSION + 1)
        after = {name: store.fingerprint(spec) for name, spec in specs.items()}
    finally:
        store.close()
    assert after["text_bm25_en"] == before["text_bm25_en"]
    assert after["text_sentence_transformers_all_minilm_l6_v2"] != before["text_sentence_transformers_all_minilm_l6_v2"]


def test_local_milvus_connections_ping_within_the_lite_servers_policy(tmp_path: Path):
    """Milvus Lite's grpcio server strikes a connection that pings more than once per 5 minutes without data and
    sends GOAWAY "too many pings" at the third; pymilvus pings every 10 s even idle, which cut an idle ingest's
    formula store off in a first `./run demo`. Our local connections ping only during calls, less often than that;
    a remote server keeps pymilvus's defaults."""
    from paperlake.vectors.store import VectorStore, _keepalive

    with VectorStore(tmp_path / "milvus.db", use_cache=False) as store:
        options = store.client._handler._grpc_options
        assert options["grpc.keepalive_permit_without_calls"] is False
        assert options["grpc.keepalive_time_ms"] > 300_000
        store.client.list_collections()
    assert _keepalive("http://127.0.0.1:19530") == _keepalive(None)
    assert _keepalive("http://localhost:19530") == _keepalive(None)
    assert _keepalive("https://milvus.example.org:443") == {}
