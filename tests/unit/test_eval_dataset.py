"""The hand-written AirQA-format evaluation set over the 19-paper corpus, and the dataset/report machinery.

Every line stores its canonical answer (``gold_answer``) and where it is written (``evidence``: paper, page and a
verbatim snippet; ``extra_evidence`` for the other papers of a cross-paper question). The checks here keep the set
honest: anchors are corpus papers, evaluators exist and accept their own gold answer, and each snippet really is on
its page as pymupdf reads it.
"""

from __future__ import annotations

import csv
import json
import re
import unicodedata
import uuid
from collections import Counter
from pathlib import Path

import pymupdf
import pytest

from paperlake.evaluation import (
    EVAL_FUNCTIONS,
    TAG_GROUPS,
    DatasetError,
    Example,
    evaluate,
    load_dataset,
    load_examples,
    load_predictions,
    read_predictions,
    run_evaluator,
)
from paperlake.lake.ids import paper_id

DATASET = Path(__file__).parents[1] / "data" / "airqa_sample.jsonl"
VOLUMES = ("emnlp2024", "naacl2024")


@pytest.fixture(scope="module")
def examples():
    dataset = load_dataset(DATASET)
    assert not dataset.warnings(), dataset.warnings()  # our own set: no skipped line, unknown tag or keyword
    return dataset.examples


@pytest.fixture(scope="module")
def corpus_papers(corpus: Path) -> dict[str, Path]:
    """paper id (AirQA rule, venue = volume folder) → PDF path, from the manifests."""
    inbox = corpus / "inbox"
    papers = {}
    for volume in VOLUMES:
        with open(inbox / volume / "manifest.csv", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                papers[paper_id(row["title"], volume)] = inbox / volume / row["file"]
    return papers


def _normalise(text: str) -> str:
    """Whitespace-normalised; control characters (pymupdf's glyphs for big brackets) count as whitespace."""
    return " ".join("".join(" " if unicodedata.category(c) == "Cc" else c for c in text).split())


@pytest.fixture(scope="module")
def page_text(corpus_papers):
    cache: dict[str, list[str]] = {}

    def text(pid: str, page_number: int) -> str:
        if pid not in cache:
            with pymupdf.open(corpus_papers[pid]) as document:
                cache[pid] = [_normalise(page.get_text()) for page in document]
        return cache[pid][page_number - 1]

    return text


def _evidence(example) -> list[dict]:
    return [example.extra["evidence"], *example.extra.get("extra_evidence", [])]


def test_size_and_unique_ids(examples):
    assert len(examples) >= 40
    assert len({e.uuid for e in examples}) == len(examples)


def test_examples_round_trip(examples):
    lines = [json.loads(line) for line in DATASET.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert [e.to_dict() for e in examples] == lines
    assert all(Example.from_dict(e.to_dict()) == e for e in examples)


def test_tags_name_one_question_type_and_objective_evaluation(examples):
    for example in examples:
        question_types = [t for t in example.tags if t in TAG_GROUPS["question type"]]
        elements = [t for t in example.tags if t in TAG_GROUPS["element"]]
        assert len(question_types) == 1 and elements and "objective" in example.tags, example.uuid
    counts = Counter(t for e in examples for t in e.tags)
    for tag in ("single", "multiple", "retrieval", "text", "table", "image", "formula", "metadata"):
        assert counts[tag] >= 3, tag


def test_retrieval_questions_are_limited_to_a_volume(examples):
    for example in examples:
        if "retrieval" in example.tags:
            assert example.conference and set(example.conference) <= set(VOLUMES), example.uuid
            assert example.evaluator.eval_func == "eval_paper_relevance_with_reference_answer"
        else:
            assert example.anchor_pdf, example.uuid
        if "multiple" in example.tags:
            assert len(example.anchor_pdf) >= 2 and example.extra.get("extra_evidence"), example.uuid


def _eval_func_names(name: str, kwargs: dict) -> list[str]:
    names = [name]
    for child, child_kwargs in zip(kwargs.get("eval_func_list", []), kwargs.get("eval_kwargs_list", [])):
        names += _eval_func_names(child, child_kwargs)
    if "eval_func" in kwargs:
        names += _eval_func_names(kwargs["eval_func"], kwargs.get("eval_kwargs", {}))
    return names


def test_every_evaluator_exists(examples):
    for example in examples:
        for name in _eval_func_names(example.evaluator.eval_func, example.evaluator.eval_kwargs):
            assert name in EVAL_FUNCTIONS, (example.uuid, name)


def test_gold_answer_passes_its_own_evaluator(examples):
    for example in examples:
        assert "gold_answer" in example.extra, example.uuid
        score = run_evaluator(example.evaluator.eval_func, example.extra["gold_answer"], example.evaluator.eval_kwargs)
        assert score == 1, (example.uuid, example.question)


def test_gold_answer_passes_when_given_as_text(examples):
    """The agent answers with text: the repr of the canonical answer must score too."""
    for example in examples:
        gold = example.extra["gold_answer"]
        answer = gold if isinstance(gold, str) else repr(gold)
        assert run_evaluator(example.evaluator.eval_func, answer, example.evaluator.eval_kwargs) == 1, example.uuid


def test_papers_are_corpus_papers(examples, corpus_papers):
    assert len(corpus_papers) == 19
    for example in examples:
        assert set(example.anchor_pdf) <= corpus_papers.keys(), example.uuid
        assert set(example.reference_pdf) <= corpus_papers.keys(), example.uuid
        for evidence in _evidence(example):
            assert evidence["paper_id"] in corpus_papers, example.uuid
        if example.anchor_pdf:
            assert {e["paper_id"] for e in _evidence(example)} == set(example.anchor_pdf), example.uuid


def test_evidence_snippets_are_on_their_pages(examples, page_text):
    for example in examples:
        for evidence in _evidence(example):
            snippet = _normalise(evidence["text"])
            assert len(snippet) >= 8, example.uuid
            assert snippet in page_text(evidence["paper_id"], evidence["page_number"]), (example.uuid, evidence)


TABLES = Path(__file__).parents[1] / "data" / "airqa_tables.jsonl"


def test_table_questions_are_checked_against_their_pages(corpus_papers, page_text):
    """The table questions (issue 11): each gold value is printed on its evidence page, as a whole number (not part
    of another), and passes its own evaluator; each question names one corpus paper and is tagged a table question."""
    from agent.evidence import answer_needles, contains_needle

    table_examples = load_examples(TABLES)
    assert len(table_examples) >= 40 and len({e.uuid for e in table_examples}) == len(table_examples)
    assert len({e.anchor_pdf[0] for e in table_examples}) >= 10  # spread over the corpus, not one paper
    for example in table_examples:
        evidence = example.extra["evidence"]
        assert (
            "table" in example.tags
            and example.anchor_pdf == [evidence["paper_id"]]
            and evidence["paper_id"] in corpus_papers
        ), example.uuid
        page = page_text(evidence["paper_id"], evidence["page_number"])
        printed = evidence["text"]
        assert printed in page, (example.uuid, printed)
        gold = example.extra["gold_answer"]
        assert any(contains_needle(page, needle) for needle in answer_needles(gold)), (example.uuid, gold)
        assert run_evaluator(example.evaluator.eval_func, gold, example.evaluator.eval_kwargs) == 1, example.uuid


# ---------------------------------------------------------------------------------------------------------------
# Loading, evaluating, reporting


def _write_lines(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def _valid_line(**overrides) -> dict:
    line = {
        "uuid": "6f1e3b8e-2f0c-4c61-9b0a-0a4f6f1d2c3b",
        "question": "How many tables?",
        "answer_format": "An int.",
        "tags": ["single", "table", "objective"],
        "anchor_pdf": ["2bc5cd85-6e11-576a-8814-63a144001700"],
        "reference_pdf": [],
        "conference": [],
        "evaluator": {"eval_func": "eval_int_exact_match", "eval_kwargs": {"gold": 7}},
    }
    return {**line, **overrides}


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "line 2: not valid JSON"),
        ({k: v for k, v in _valid_line().items() if k != "tags"}, "line 2: missing field"),
        (_valid_line(uuid="q-1"), "line 2: field 'uuid'"),
        (_valid_line(question=""), "line 2: field 'question'"),
        (_valid_line(anchor_pdf="2bc5cd85-6e11-576a-8814-63a144001700"), "line 2: field 'anchor_pdf'"),
        (
            _valid_line(evaluator={"eval_func": "eval_nope", "eval_kwargs": {}}),
            "line 2: field 'evaluator': unknown eval_func",
        ),
        (
            _valid_line(
                evaluator={"eval_func": "eval_negation", "eval_kwargs": {"eval_func": "eval_nope", "eval_kwargs": {}}}
            ),
            "line 2: field 'evaluator': unknown eval_func 'eval_nope'",
        ),
        (
            _valid_line(evaluator={"eval_func": "eval_int_exact_match", "eval_kwargs": [7]}),
            "line 2: field 'evaluator.eval_kwargs'",
        ),
        (_valid_line(), "line 2: field 'uuid'.*already used on line 1"),
    ],
)
def test_a_bad_line_is_skipped_and_named_and_the_rest_loads(tmp_path, bad_line, message):
    third = _valid_line(uuid="0b1c6a55-8b9e-4a0e-9d1e-3f0f6c1f2a4d")
    path = _write_lines(tmp_path / "set.jsonl", [_valid_line(), bad_line, third])
    dataset = load_dataset(path)
    assert [e.uuid for e in dataset.examples] == [_valid_line()["uuid"], third["uuid"]]
    (problem,) = dataset.problems
    assert re.search(message, problem)
    (warning,) = dataset.warnings()
    assert warning.startswith(f"{path}, line 2") and warning.endswith("(skipped)")


def test_unknown_tags_are_kept_counted_and_scored_as_their_own_tag(tmp_path):
    lines = [_valid_line(tags=["single", "table", "figure"]), _valid_line(uuid=str(uuid.uuid4()), tags=["figure"])]
    dataset = load_dataset(_write_lines(tmp_path / "set.jsonl", lines))
    assert len(dataset.examples) == 2 and dataset.unknown_tags == {"figure": 2}
    assert any("figure (2)" in line for line in dataset.warnings())
    report = evaluate(dataset.examples, {e.uuid: 7 for e in dataset.examples})
    by_tag = {t.tag: t for t in report.by_tag}
    assert by_tag["figure"].group == "other" and (by_tag["figure"].count, by_tag["figure"].correct) == (2, 2)
    assert report.results()["figure"] == {"score": 1.0, "count": 2, "correct": 2}


def test_keywords_an_evaluator_does_not_take_are_counted_and_ignored(tmp_path):
    line = _valid_line(
        evaluator={
            "eval_func": "eval_conjunction",
            "eval_kwargs": {
                "eval_func_list": ["eval_float_exact_match", "eval_string_exact_match"],
                "eval_kwargs_list": [{"gold": 2.5, "nidigits": 1}, {"gold": "x", "ignore_order": True}],
            },
        }
    )
    dataset = load_dataset(_write_lines(tmp_path / "set.jsonl", [line]))
    assert dataset.ignored_keywords == {
        "eval_float_exact_match: nidigits": 1,
        "eval_string_exact_match: ignore_order": 1,
    }
    assert evaluate(dataset.examples, {line["uuid"]: "[2.5, 'x']"}).overall == 1


def test_load_predictions(tmp_path):
    path = _write_lines(tmp_path / "pred.jsonl", [{"uuid": "a", "answer": 1}, "", {"uuid": "b", "answer": "[1, 2]"}])
    assert load_predictions(path) == {"a": 1, "b": "[1, 2]"}
    _write_lines(path, [{"uuid": "a", "answer": 1}, {"uuid": "a", "answer": 2}])
    with pytest.raises(DatasetError, match="line 2.*predicted twice"):
        load_predictions(path)
    _write_lines(path, [{"uuid": "a"}])
    with pytest.raises(DatasetError, match="line 1"):
        load_predictions(path)


def test_read_predictions_skips_bad_lines_and_keeps_the_first_answer(tmp_path):
    path = _write_lines(
        tmp_path / "pred.jsonl",
        [{"uuid": "a", "answer": 1}, "{oops", {"uuid": "a", "answer": 2}, {"answer": 3}, {"uuid": "b", "answer": None}],
    )
    predictions = read_predictions(path)
    assert predictions.answers == {"a": 1, "b": None}
    assert [p.split(":")[0] for p in predictions.problems] == ["line 2", "line 3", "line 4"]


def test_evaluate_scores_overall_and_per_tag(examples, tmp_path):
    gold = {e.uuid: e.extra["gold_answer"] for e in examples}
    perfect = evaluate(examples, gold)
    assert perfect.overall == 1.0 and not perfect.errors
    assert all(t.score == 1.0 for t in perfect.by_tag)

    first_table = next(e for e in examples if "table" in e.tags)
    partial = {**gold, first_table.uuid: "certainly not"}
    del partial[examples[0].uuid]
    report = evaluate(examples, partial)
    wrong = 1 if examples[0].uuid == first_table.uuid else 2
    assert report.overall == pytest.approx((len(examples) - wrong) / len(examples))
    by_tag = {t.tag: t for t in report.by_tag}
    tables = sum("table" in e.tags for e in examples)
    assert by_tag["table"].count == tables and by_tag["table"].correct < tables
    assert [t.tag for t in report.by_tag][:3] == ["single", "multiple", "retrieval"]

    data = json.loads(report.to_json())
    assert data["count"] == len(examples) and data["unanswered"] == 1
    assert data["by_tag"]["table"]["count"] == tables
    assert len(data["questions"]) == len(examples)
    markdown = report.to_markdown()
    assert "| element | table |" in markdown and "Overall" in markdown
    png = report.to_png(tmp_path / "plots" / "by_tag.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_records_failing_evaluators_and_passes_the_question_to_the_judge(tmp_path):
    class Judge:
        def __init__(self):
            self.prompts = []

        def complete(self, messages):
            self.prompts.append(messages[-1]["content"])
            return "```\nTrue\n```"

    llm_line = _valid_line(
        uuid="0b1c6a55-8b9e-4a0e-9d1e-3f0f6c1f2a4d",
        question="Why does PPI help?",
        tags=["single", "text", "subjective"],
        evaluator={
            "eval_func": "eval_reference_answer_with_llm",
            "eval_kwargs": {"reference_answer": "tighter intervals"},
        },
    )
    examples = load_examples(_write_lines(tmp_path / "set.jsonl", [_valid_line(), llm_line]))
    predictions = {e.uuid: "7" for e in examples}

    without_judge = evaluate(examples, predictions)
    assert [(q.score, q.scored) for q in without_judge.questions] == [(1, True), (0, False)]
    (error,) = without_judge.errors
    assert "needs an LLM endpoint" in error.error and "Not scored (1" in without_judge.to_markdown()
    assert without_judge.overall == 1.0 and without_judge.results()["all"] == {
        "score": 1.0,
        "count": 1,
        "correct": 1,
        "not_scored": 1,
    }

    judge = Judge()
    with_judge = evaluate(examples, predictions, judge=judge)
    assert [q.score for q in with_judge.questions] == [1, 1]
    assert "Why does PPI help?" in judge.prompts[0]
