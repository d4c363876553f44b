"""The hybrid search's reranker: its features, the order it gives, fitting, and the shipped weights."""

from __future__ import annotations

import json

import numpy as np
import pytest

from paperlake.vectors.config import load_config
from paperlake.vectors.rerank import (
    RerankModel,
    feature_names,
    features,
    fit,
    load_model,
    order,
    weights_path,
)

VIEWS = ("chunks.text_content", "images.image_text", "tables.table_content")


def column(rows: np.ndarray, name: str) -> list[float]:
    return list(rows[:, feature_names(VIEWS).index(name)])


def test_features_measure_what_the_question_names():
    query = "In Figure 3, which accuracy does the 7B model reach on GSM8K?"
    cells = [
        ("chunks.text_content", "We train the model on many tasks."),
        ("images.image_text", "GSM8K accuracy 7B 41.2"),
        ("tables.table_content", "model accuracy 13B"),
    ]
    rows = features(query, cells, VIEWS)
    assert rows.shape == (3, len(feature_names(VIEWS)))
    assert column(rows, "inverse_rank") == [1.0, 0.5, pytest.approx(1 / 3)]
    coverage = column(rows, "coverage")
    assert coverage[1] > coverage[2] > coverage[0]  # gsm8k and 7b are rare among the three; "model" is not
    # tokens with a digit: "3", "7b", "gsm8k"; the figure's words print two of them
    assert column(rows, "numbers") == [0.0, pytest.approx(2 / 3), 0.0]
    assert column(rows, "figure_intent_in_view") == [0.0, 1.0, 0.0]
    assert column(rows, "table_intent_in_view") == [0.0, 0.0, 0.0]
    assert column(rows, "view=images.image_text") == [0.0, 1.0, 0.0]


def test_a_view_the_model_does_not_know_sets_no_indicator():
    rows = features("what?", [("pages.page_content", "text")], VIEWS)
    assert not any(rows[0, 5 : 5 + len(VIEWS)])


def _model(weights: dict[str, float]) -> RerankModel:
    names = feature_names(VIEWS)
    return RerankModel(
        VIEWS,
        np.zeros(len(names)),
        np.ones(len(names)),
        np.asarray([weights.get(name, 0.0) for name in names]),
        0.0,
    )


def test_order_keeps_the_head_and_sorts_the_rest_by_score():
    cells = [("chunks.text_content", f"cell {i}") for i in range(6)]
    cells[5] = ("images.image_text", "cell five")
    by_figure = _model({"view=images.image_text": 1.0})
    assert order(by_figure, "q", cells, keep=3) == [0, 1, 2, 5, 3, 4]  # ties keep the fused order
    assert order(by_figure, "q", cells, keep=0) == [5, 0, 1, 2, 3, 4]
    assert order(by_figure, "q", cells[:2], keep=3) == [0, 1]


def test_a_glued_companion_moves_with_its_hit_and_a_pinned_cell_stays():
    cells = [("chunks.text_content", f"cell {i}") for i in range(6)]
    cells[4] = ("images.image_caption", "caption")
    cells[5] = ("images.image_text", "the figure's words")
    by_words = _model({"view=images.image_text": 1.0})
    glued = [False, False, False, False, False, True]  # the figure's words follow their caption
    assert order(by_words, "q", cells, keep=2, glued=glued) == [0, 1, 4, 5, 2, 3]
    pinned = [False, False, False, True, False, False]  # a rule put cell 3 fourth
    assert order(by_words, "q", cells, keep=2, glued=glued, pinned=pinned) == [0, 1, 4, 5, 3, 2]
    assert order(by_words, "q", cells, keep=2, pinned=[False, False, True, False, False, False]) == [0, 1, 2, 5, 3, 4]


def test_fit_learns_to_put_the_covering_cell_first():
    questions = []
    for n in range(20):
        cells = [("chunks.text_content", "unrelated words here")] * 4 + [("chunks.text_content", f"alpha beta {n}")]
        labels = np.asarray([0, 0, 0, 0, 1], dtype=float)
        questions.append((features(f"alpha beta {n}?", cells, VIEWS), labels))
    model = fit(questions, VIEWS, epochs=300)
    assert model.weights[feature_names(VIEWS).index("coverage")] > 0
    cells = [("chunks.text_content", "unrelated words here")] * 4 + [("chunks.text_content", "alpha beta 99")]
    assert order(model, "alpha beta 99?", cells, keep=0)[0] == 4


def test_weights_fitted_on_other_features_are_refused(tmp_path):
    body = _model({}).to_json()
    assert RerankModel.from_json(body).views == VIEWS
    stale = dict(body, features=body["features"][:-1] + ["something_else"])
    with pytest.raises(ValueError, match="refit them"):
        RerankModel.from_json(stale)
    short = dict(body, weights=body["weights"][:-1])
    with pytest.raises(ValueError, match="do not match"):
        RerankModel.from_json(short)
    path = tmp_path / "weights.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    assert load_model(path).views == VIEWS


def test_the_shipped_weights_load_and_know_every_parsed_text_view():
    """Refit (benchmarks/train_rerank.py) when the warehouse gains an encodable text view: a view the weights do not
    know gets no indicator of its own, and the check below fails. The columns an LLM fills (enrichment) are the
    exception: no home here has them to fit on."""
    from paperlake.enrichment.kinds import KINDS
    from schemas.warehouse import encodable_columns

    model = load_model(weights_path())
    written_by_llm = {f"{kind.table}.{kind.column}" for kind in KINDS.values()}
    text_views = {f"{table}.{column}" for table, column, _ in encodable_columns("text")}
    assert set(model.views) == text_views - written_by_llm
    assert load_config().rerank_pool > load_config().rerank_keep >= 0
