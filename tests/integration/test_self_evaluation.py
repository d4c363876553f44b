"""Every volume evaluates itself: offline probes from the real warehouse, the probes and volume_set assets and the
retrieval_quality check run by Dagster (its metadata, and a warning when the dense encoder is swapped for random
vectors), the CLI, ExTrActor's explorer → tracker → actor through the real `openai` client against the scripted
server on 127.0.0.1, and the regression gate. The tests of this module share one home, a fresh ingest of the whole
sample (19 papers, two volumes), and run in order (the last one removes a paper).

The regression gate: the fresh ingest must keep its retrieval quality on its own probes within ``MARGIN`` of the
figures stored in ``benchmarks/results/probes.json`` (written by ``benchmarks/probes.py``). A parser, chunking,
encoder or search change that costs answer@5 fails here; one that improves it is kept by re-running the benchmark
and committing the new figures."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import duckdb
import numpy as np
import pytest
from typer.testing import CliRunner

from cli.app import app
from paperlake.evaluation.dataset import load_examples
from paperlake.evaluation.needles import answer_needles, contains_needle
from paperlake.evaluation.probes import KINDS, paper_probes, verify
from paperlake.evaluation.sets import probes_path, read_jsonl, read_quality, stale_volumes, volume_set_path
from schemas.warehouse import declared_keys
from support.fixtures import ingest_sample
from support.openai_stub import start_stub

LLM_ENV = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "PAPERLAKE_LLM_MODEL",
    "OPENAI_MODEL",
    "PAPERLAKE_EVAL_MIN_ANSWER5",
    "PAPERLAKE_EVAL_METHODS",
    "PAPERLAKE_EVALUATE",
)
FIGURES = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "probes.json"
MARGIN = 0.05  # answer@5 may drop by at most five points per volume (about 11 of emnlp2024's 224 probes, 4 of 80)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, dbt_manifest: Path, corpus: Path) -> dict:
    papers = sorted(p.stem for p in (corpus / "inbox").rglob("*.pdf"))
    return ingest_sample(tmp_path_factory.mktemp("selfeval"), papers, unset=LLM_ENV)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


def _row_text(settings, evidence) -> str:
    key = declared_keys()[evidence["table"]]  # the evidence row, by its table's declared primary key
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        sql = f'select "{evidence["column"]}" from "{evidence["table"]}" where "{key}" = ?'
        return con.execute(sql, [evidence["row_id"]]).fetchall()[0][0]


def test_ingest_writes_verified_probes_for_every_paper(built):
    settings, summary = built["settings"], built["summary"]
    assert len(built["ids"]) == 19 and sorted(summary.probed) == sorted(built["ids"]), summary.probed
    overall: Counter = Counter()
    kinds_per_paper = []
    for key, paper_id in built["ids"].items():
        rows = read_jsonl(probes_path(settings, key))
        kinds = Counter(r["probe_kind"] for r in rows)
        overall.update(kinds)
        kinds_per_paper.append(len(kinds))
        # a paper without tables, figures, display equations or names has fewer kinds, never fewer probes
        assert len(rows) >= 10 and len(kinds) >= 2, (key, kinds)
        assert set(kinds) <= set(KINDS)
        examples = load_examples(probes_path(settings, key))  # valid AirQA rows
        assert all(e.anchor_pdf == [paper_id] for e in examples)
        for row in rows:
            # the answer is printed in the evidence row it names, checked here independently of the generator
            text = _row_text(settings, row["evidence"])
            assert any(contains_needle(str(text), n) for n in answer_needles(row["gold_answer"])), row
            assert row["evidence"]["page_number"] is not None
            # a question never copies its evidence: no run of 12 words of the evidence row appears in it
            words = str(text).split()
            assert not any(" ".join(words[i : i + 12]) in row["question"] for i in range(max(0, len(words) - 12))), row
    assert len({r["uuid"] for key in built["ids"] for r in read_jsonl(probes_path(settings, key))}) == sum(
        len(read_jsonl(probes_path(settings, key))) for key in built["ids"]
    )
    assert set(overall) == set(KINDS) and min(overall.values()) >= 10, overall
    assert sum(n >= 4 for n in kinds_per_paper) >= 18, kinds_per_paper  # all but the text-only position paper


def test_probes_are_deterministic_and_verification_rejects_a_wrong_answer(built):
    settings = built["settings"]
    key, paper_id = sorted(built["ids"].items())[0]
    with duckdb.connect(str(settings.warehouse), read_only=True) as con:
        again = paper_probes(con, paper_id)
        assert [r["uuid"] for r in again] == [r["uuid"] for r in read_jsonl(probes_path(settings, key))]
        for row in again[:6]:
            assert verify(con, row["evidence"], row["gold_answer"])
            assert not verify(con, row["evidence"], "a value printed nowhere 987654.321")


def test_ingest_records_retrieval_quality_per_volume(built):
    settings, summary = built["settings"], built["summary"]
    volumes = {key.partition("/")[0] for key in built["ids"]}
    assert set(summary.quality) == volumes
    for volume, report in summary.quality.items():
        assert report["probes"] == len(read_jsonl(volume_set_path(settings, volume))) >= 10
        assert 0 <= report["answer_at_1"] <= report["answer_at_5"] <= 1 and 0 <= report["page_at_5"] <= 1
        assert report["method"] == "classic_rag" and not report["problems"]
    assert read_quality(settings) == summary.quality
    assert stale_volumes(settings) == {}


def test_regression_gate_retrieval_quality_holds_against_the_stored_figures(built):
    figures = json.loads(FIGURES.read_text(encoding="utf-8"))["gate"]
    quality = built["summary"].quality
    assert set(quality) == set(figures)
    for volume, stored in figures.items():
        report = quality[volume]
        assert report["method"] == stored["method"] and report["passed"], report
        assert report["answer_at_5"] >= stored["answer_at_5"] - MARGIN, (
            f"{volume}: answer@5 {report['answer_at_5']:.3f} fell more than {MARGIN} below the stored "
            f"{stored['answer_at_5']:.3f} (benchmarks/results/probes.json)"
        )


def test_an_encoder_or_generator_change_makes_every_volume_stale(built, monkeypatch):
    from paperlake.evaluation import sets

    assert stale_volumes(built["settings"]) == {}
    with monkeypatch.context() as patch:  # another encoder or collection config: a new vector stage fingerprint
        patch.setattr(sets, "stage_fingerprint", lambda: "another encoder")
        assert set(stale_volumes(built["settings"])) == {"emnlp2024", "naacl2024"}
    with monkeypatch.context() as patch:  # another generator (like a parser version, it is in every probe digest)
        patch.setattr(sets, "_GENERATOR_DIGEST", "another generator")
        assert set(sets.stale_probe_papers(built["settings"])) == set(built["ids"])
        assert set(stale_volumes(built["settings"])) == {"emnlp2024", "naacl2024"}
    assert stale_volumes(built["settings"]) == {}


def test_an_unchanged_ingest_evaluates_nothing(built):
    from orchestration.run import ingest

    summary = ingest([built["inbox"]], built["settings"])
    assert summary.ok and summary.probed == [] and summary.quality == {}


def test_new_probes_of_a_paper_make_its_volume_stale_though_no_vector_changed(built, monkeypatch):
    """A paper's probes regenerated with other rows (a generator change, or its probe files lost and made again) while
    its vectors stay as they are: its volume is stale, so the ingest that made them rebuilds the set and scores it
    (the volume's staleness is judged on the probes its set is made of, not on the set file). The same rows again:
    nothing is stale."""
    from paperlake.evaluation import sets

    settings = built["settings"]
    key = "naacl2024/naacl2024-174-loretta"
    assert stale_volumes(settings) == {}
    real = sets.paper_probes
    monkeypatch.setattr(sets, "paper_probes", lambda con, paper_id: real(con, paper_id)[:-1])
    sets.write_probes(settings, key)  # what the ingest's probe step does for a stale paper
    assert sets.stale_probe_papers(settings) == {}  # the paper's probes are current...
    assert set(stale_volumes(settings)) == {"naacl2024"}  # ...and its volume's set is not
    monkeypatch.setattr(sets, "paper_probes", real)
    sets.write_probes(settings, key)  # the same rows as when the volume was scored
    assert stale_volumes(settings) == {}


def _run_check(built, volume: str):
    from assets.resources import PaperlakeResource
    from orchestration.definitions import build_definitions
    from orchestration.instance import dagster_instance

    settings = built["settings"]
    defs = build_definitions(PaperlakeResource(home=str(settings.home), mineru_dir=str(settings.mineru_dir)))
    with dagster_instance(settings) as instance:
        result = defs.resolve_job_def("evaluate_volume").execute_in_process(
            partition_key=volume, instance=instance, raise_on_error=False
        )
    assert result.success
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def test_the_check_shows_its_metrics_and_warns_when_the_encoder_is_broken(built, monkeypatch):
    import dagster as dg

    from paperlake.vectors.encoders import TextEncoder

    volume = "emnlp2024"
    healthy = _run_check(built, volume)
    assert healthy.check_name == "retrieval_quality" and healthy.asset_key == dg.AssetKey(["evaluation", "volume_set"])
    metadata = {k.removeprefix(f"{volume}/"): v.value for k, v in healthy.metadata.items()}
    # one series per volume in the UI's plots: every figure's key names its volume
    assert {f"{volume}/answer_at_1", f"{volume}/answer_at_5", f"{volume}/page_at_5"} <= set(healthy.metadata)
    assert {"answer_at_1", "answer_at_5", "page_at_5", "probes", "threshold"} <= set(metadata)
    assert healthy.passed and metadata["answer_at_5"] >= 0.4 == metadata["threshold"], metadata

    generator = np.random.default_rng(0)

    def random_vectors(self, texts, *args, **kwargs):
        vectors = generator.normal(size=(len(texts), self.dimension)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    monkeypatch.setattr(TextEncoder, "encode", random_vectors)
    broken = _run_check(built, volume)
    broken_metadata = {k.removeprefix(f"{volume}/"): v.value for k, v in broken.metadata.items()}
    assert not broken.passed and broken.severity == dg.AssetCheckSeverity.WARN, broken_metadata
    assert broken_metadata["answer_at_5"] < metadata["answer_at_5"] - 0.2, (metadata, broken_metadata)
    history = read_jsonl(built["settings"].evaluation / "quality" / f"{volume}.history.jsonl")
    assert [r["passed"] for r in history[-2:]] == [True, False]


def test_cli_synthesize_offline_and_quality(built, tmp_path):
    settings = built["settings"]
    out = tmp_path / "probes.jsonl"
    result = CliRunner().invoke(app, ["eval", "synthesize", "--home", str(settings.home), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    infos = json.loads(result.stdout)["volumes"]
    assert len(load_examples(out)) == sum(i["count"] for i in infos) >= 20
    unknown = CliRunner().invoke(app, ["eval", "synthesize", "nosuchvolume", "--home", str(settings.home)])
    assert unknown.exit_code == 1 and "unknown volume" in unknown.output
    scored = CliRunner().invoke(
        app,
        [
            "eval",
            str(out),
            "--retrieval-only",
            "--method",
            "classic_rag",
            "--home",
            str(settings.home),
            "--out",
            str(tmp_path / "scored"),
        ],
    )
    assert scored.exit_code == 0, scored.output
    report = json.loads((tmp_path / "scored" / "retrieval.json").read_text())
    assert report["scored"] == len(load_examples(out))
    quality = CliRunner().invoke(app, ["eval", "quality", "--home", str(settings.home), "--json"])
    assert quality.exit_code == 0 and {r["volume"] for r in json.loads(quality.stdout)} == {"emnlp2024", "naacl2024"}


def _extractor_script() -> dict:
    tracked = {
        "ALPHA": {
            "question": "ALPHA-REWRITTEN: how many layers does the model use?",
            "answer_format": "an integer",
            "tags": ["single", "text", "objective"],
            "evaluator": {"eval_func": "eval_int_exact_match", "eval_kwargs": {"gold": 12}},
        },
        "BETA": {
            "question": "BETA-REWRITTEN: which dataset is used?",
            "answer_format": "a dataset name",
            "tags": ["single", "text", "objective"],
            "evaluator": {"eval_func": "eval_string_exact_match", "eval_kwargs": {"gold": "SQuAD", "lowercase": True}},
        },
        "GAMMA": {
            "question": "GAMMA-REWRITTEN",
            "answer_format": "an integer",
            "tags": ["single", "text", "objective"],
            "evaluator": {"eval_func": "eval_int_exact_match", "eval_kwargs": {"gold": 5}},
        },
    }
    return {
        "rules": [
            # the actor (the agent's own prompt carries the tracker's rewritten question)
            {
                "match": "ALPHA-REWRITTEN",
                "content": "[Thought]: The paper states it.\n[Action]: GenerateAnswer(answer=12)",
            },
            {"match": "BETA-REWRITTEN", "content": '[Thought]: I think so.\n[Action]: GenerateAnswer(answer="MNLI")'},
            # the tracker (GAMMA's evaluator rejects its own answer both times: the pair is dropped)
            *({"match": f"Question: {name}", "content": json.dumps(fields)} for name, fields in tracked.items()),
            # the explorer: two pairs from the first context, a broken pair from the second, nothing usable after
            {
                "match": "[ExTrActor explorer]",
                "times": 1,
                "content": json.dumps(
                    [
                        {"question": "ALPHA how many layers?", "answer": 12, "reasoning": "stated"},
                        {"question": "BETA which dataset?", "answer": "SQuAD", "reasoning": "stated"},
                    ]
                ),
            },
            {
                "match": "[ExTrActor explorer]",
                "times": 1,
                "content": '```json\n[{"question": "GAMMA?", "answer": "not a number"}]\n```',
            },
            {"match": "[ExTrActor explorer]", "content": "I cannot find anything worth asking."},
        ]
    }


def test_extractor_through_the_scripted_server(built, tmp_path, monkeypatch):
    settings = built["settings"]
    stub = start_stub(_extractor_script(), tmp_path / "stub")
    try:
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{stub.port}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        monkeypatch.setenv("PAPERLAKE_LLM_MODEL", "stub-model")
        out = tmp_path / "extracted.jsonl"
        result = CliRunner().invoke(
            app,
            [
                "eval",
                "synthesize",
                "emnlp2024",
                "--with-llm",
                "--limit",
                "3",
                "--keep-unverified",
                "--out",
                str(out),
                "--home",
                str(settings.home),
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        stats = json.loads(result.stdout)["volumes"]["emnlp2024"]["stats"]
        assert stats["contexts"] == 3 and stats["pairs"] == 3 and stats["tracked"] == 2
        assert stats["verified"] == 1 and stats["unverified"] == 1 and sum(stats["rejected"].values()) == 2
        examples = load_examples(out)  # valid AirQA rows
        assert [e.extra["extractor"]["status"] for e in examples] == ["verified", "unverified"]
        assert len(examples[0].anchor_pdf) == 1 and examples[0].anchor_pdf[0] in built["ids"].values()
        assert examples[0].conference == ["emnlp2024"] and examples[0].question.startswith("ALPHA-REWRITTEN")
        trajectories = read_jsonl(out.with_name("extracted.trajectories.jsonl"))
        assert len(trajectories) == 1 and trajectories[0]["uuid"] == examples[0].uuid
        messages = trajectories[0]["messages"]
        assert [m["role"] for m in messages[:2]] == ["system", "user"] and messages[-1]["role"] == "assistant"
        assert "GenerateAnswer(answer=12)" in messages[-1]["content"] and "ALPHA-REWRITTEN" in messages[1]["content"]
        requests = stub.requests()
        tracker = [r for r in requests if "[ExTrActor tracker]" in json.dumps(r["messages"])]
        assert sum("Question: GAMMA" in json.dumps(r["messages"]) for r in tracker) == 2  # one retry, with the reason
        assert "rejected" in json.dumps(tracker[-1]["messages"])
        # `paperlake eval` scores the synthesised set (the actor's answers again, from the same server)
        scored = CliRunner().invoke(
            app, ["eval", str(out), "--home", str(settings.home), "--out", str(tmp_path / "scored"), "--max-turns", "3"]
        )
        assert scored.exit_code == 0, scored.output
        report = json.loads((tmp_path / "scored" / "report.json").read_text())
        assert report["overall"] == pytest.approx(0.5), report
    finally:
        stub.stop()


def test_the_stores_sensor_requests_probes_then_the_volume_check(built):
    import dagster as dg

    from assets.resources import PaperlakeResource
    from orchestration.sensors import plan_store_runs
    from paperlake.evaluation.sets import quality_path, write_probes
    from paperlake.vectors.ledger import ledger_path

    settings = built["settings"]
    resource = PaperlakeResource(home=str(settings.home), mineru_dir=str(settings.mineru_dir))
    key = "emnlp2024/emnlp2024-065-dochienet"
    with dg.DagsterInstance.ephemeral() as instance:
        assert plan_store_runs(resource, instance)[0] == []
        probes_path(settings, key).with_suffix(".json").unlink()  # as if killed before the sidecar was written
        requests, note = plan_store_runs(resource, instance)
        assert [(r.job_name, r.partition_key) for r in requests] == [("probe_paper", key)], note
        # a collection of the same paper stale too: one run for both, as `paperlake ingest` makes it
        record = ledger_path(settings.home, "text_bm25_en", key)
        kept = record.read_bytes()
        record.unlink()
        try:
            requests, note = plan_store_runs(resource, instance)
        finally:
            record.write_bytes(kept)
        assert [(r.job_name, r.partition_key, r.asset_selection) for r in requests] == [
            ("sync_vectors", key, [dg.AssetKey(["vectors", "text_bm25_en"]), dg.AssetKey(["evaluation", "probes"])])
        ], note
        write_probes(settings, key)
        report = json.loads(quality_path(settings, "emnlp2024").read_text())
        quality_path(settings, "emnlp2024").write_text(json.dumps(report | {"fingerprint": "an older encoder"}))
        requests, note = plan_store_runs(resource, instance)
        assert [(r.job_name, r.partition_key) for r in requests] == [("evaluate_volume", "emnlp2024")], note
        quality_path(settings, "emnlp2024").write_text(json.dumps(report))


def test_removing_a_paper_removes_its_probes_and_rescores_its_volume(built, tmp_path):
    from orchestration.run import ingest

    settings = built["settings"]
    key = "naacl2024/naacl2024-174-loretta"
    pdf = next(built["inbox"].rglob("naacl2024-174-loretta.pdf"))
    pdf.unlink()
    summary = ingest([built["inbox"]], settings)
    assert summary.ok, summary.failures
    assert not probes_path(settings, key).exists() and not probes_path(settings, key).with_suffix(".json").exists()
    assert all(row["paper_key"] != key for row in read_jsonl(volume_set_path(settings, "naacl2024")))
    assert set(summary.quality) == {"naacl2024"} and summary.quality["naacl2024"]["probes"] == len(
        read_jsonl(volume_set_path(settings, "naacl2024"))
    )
    assert stale_volumes(settings) == {}
