"""Every method and every action/observation format end to end: the real ``openai`` client against the stub."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.env import AgentEnv
from agent.formats import ACTION_FORMATS, OUTPUT_FORMATS, render_action
from agent.loop import LoopConfig
from agent.methods import METHODS, first_retrieval, run_method
from agent.recap import choose_recap_answer
from agent.run import ask, retrieval_only
from paperlake.runtime.llm import ChatClient, LLMNotConfigured
from support.agent_fixtures import CALIBRATION, LORETTA, TABLE_ID, env, home, settings_for  # noqa: F401
from support.openai_stub import start_stub

TASK = {
    "uuid": "6a3bb0a4-6c5e-4b6e-9d55-0d6d1c1a2b3c",
    "question": "What SST-2 accuracy does RankCal reach in Table 2?",
    "answer_format": "a float",
    "anchor_pdf": [CALIBRATION],
    "tags": ["single", "table", "objective"],
}
TABLE_SQL = f"SELECT table_id, table_content, page_number FROM tables WHERE ref_paper_id = '{CALIBRATION}'"


def turn(name: str, parameters: dict[str, Any], action_format: str = "markdown", thought: str = "next") -> str:
    return f"[Thought]: {thought}\n[Action]:\n{render_action(name, parameters, action_format)}"


def fenced(answer: str) -> str:
    return f"The context says so.\n```txt\n{answer}\n```"


def run(
    method: str,
    script: list,
    tmp_path: Path,
    env: AgentEnv,  # noqa: F811
    action_format: str = "markdown",
    config: LoopConfig | None = None,
    task: dict | None = None,
):
    with start_stub(script, tmp_path / "stub") as stub:
        llm = ChatClient(base_url=stub.base_url, api_key="k", model="stub-model", sleep=lambda _: None)
        result = run_method(method, task or TASK, env, llm, action_format, config or LoopConfig())
        return result, stub.requests()


def texts(request: dict) -> list[str]:
    found = []
    for message in request["messages"]:
        content = message["content"]
        found += [content] if isinstance(content, str) else [p.get("text", "") for p in content]
    return found


@pytest.mark.parametrize("action_format", ACTION_FORMATS)
def test_neusym_rag_in_every_action_format(tmp_path: Path, env, action_format: str) -> None:  # noqa: F811
    script = [
        turn("RetrieveFromDatabase", {"sql": TABLE_SQL}, action_format, "The values are in Table 2."),
        turn("GenerateAnswer", {"answer": 71.2}, action_format, f"Row {TABLE_ID} gives RankCal 71.2."),
    ]
    result, requests = run("neusym_rag", script, tmp_path, env, action_format)
    assert result.status == "answered" and result.answer == 71.2
    assert [t.action_type for t in result.trajectory] == [
        "RetrieveFromVectorstore",
        "RetrieveFromDatabase",
        "GenerateAnswer",
    ]
    table = next(c for c in result.citations if c.row_id == TABLE_ID)
    assert (table.basis, table.paper_id, table.page_number, table.bbox) == (
        "referenced",
        CALIBRATION,
        2,
        [72.0, 400.0, 468.0, 120.0],
    )
    assert table.title == "Rank Calibration for Language Model Uncertainty"
    system = requests[0]["messages"][0]["content"]
    marker = {
        "markdown": "RetrieveFromDatabase(sql=",
        "json": '"action_type": "RetrieveFromDatabase"',
        "xml": "<action_type>RetrieveFromDatabase</action_type>",
        "yaml": "action_type: RetrieveFromDatabase",
    }
    assert marker[action_format] in system
    assert "<td>71.2</td>" in requests[1]["messages"][-1]["content"]
    assert result.usage.calls == 2 and result.usage.prompt_tokens > 0
    assert all(r["max_tokens"] == LoopConfig().max_completion_tokens for r in requests)
    assert table.label() == (
        "Rank Calibration for Language Model Uncertainty, p. 2, bbox [72, 400, 468, 120], "
        f"tables.table_content, row {TABLE_ID}"
    )
    assert json.loads(json.dumps(result.to_dict()))["answer"] == 71.2
    assert result.prediction() == {"uuid": TASK["uuid"], "answer": 71.2}


@pytest.mark.parametrize("output_format", OUTPUT_FORMATS)
def test_every_observation_format_reaches_the_model(tmp_path: Path, env, output_format: str) -> None:  # noqa: F811
    env.output_format = output_format
    script = [turn("RetrieveFromDatabase", {"sql": TABLE_SQL}), turn("GenerateAnswer", {"answer": 71.2})]
    result, requests = run("iterative_sym_rag", script, tmp_path, env)
    observation = requests[1]["messages"][-1]["content"]
    expected = {
        "json": '{"table_id": "' + TABLE_ID,
        "markdown": "| table_id | table_content | page_number |",
        "html": "<table><thead><tr><th>table_id</th>",
        "string": "[row 1]\ntable_id: " + TABLE_ID,
    }
    assert observation.startswith("[Observation]:\n") and expected[output_format] in observation
    assert result.answered


def test_view_image_sends_an_image_message(tmp_path: Path, env) -> None:  # noqa: F811
    script = [
        turn("ViewImage", {"paper_id": CALIBRATION, "page_number": 2, "bounding_box": [72, 100, 328, 200]}),
        turn("GenerateAnswer", {"answer": "DD2"}, thought="The figure shows DD2 higher."),
    ]
    result, requests = run("neusym_rag", script, tmp_path, env)
    last = requests[1]["messages"][-1]
    assert last["role"] == "user" and isinstance(last["content"], list)
    url = last["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    image_citation = next(c for c in result.citations if c.source == "ViewImage")
    assert image_citation.bbox == [72.0, 100.0, 328.0, 200.0] and image_citation.page_number == 2
    # the figure in view is named with its caption and the words printed in it (images.image_text)
    said = last["content"][0]["text"]
    assert "Figure 3 at [72, 100, 328, 200]" in said and "WER of DD2 and NV1" in said
    assert "DD2  NV1 / Word error rate (%) / 12.4  17.9" in said


def test_view_image_of_a_region_without_figures_names_none(tmp_path: Path, env) -> None:  # noqa: F811
    script = [
        turn("ViewImage", {"paper_id": CALIBRATION, "page_number": 2, "bounding_box": [400, 600, 100, 100]}),
        turn("GenerateAnswer", {"answer": "none"}),
    ]
    _, requests = run("neusym_rag", script, tmp_path, env)
    said = requests[1]["messages"][-1]["content"][0]["text"]
    assert "is attached as an image" in said and "Figures in view" not in said


def test_only_the_latest_images_are_resent(tmp_path: Path, env) -> None:  # noqa: F811
    view = turn("ViewImage", {"paper_id": CALIBRATION, "page_number": 1})
    script = [
        view,
        turn("ViewImage", {"paper_id": CALIBRATION, "page_number": 2}),
        turn("GenerateAnswer", {"answer": 1}),
    ]
    result, requests = run("neusym_rag", script, tmp_path, env, config=LoopConfig(image_turns=1))
    last = requests[-1]["messages"]
    images = [p for m in last if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image_url"]
    assert len(images) == 1 and "no longer shown" in last[-3]["content"]
    assert result.answered


def test_malformed_model_output_becomes_an_observation(tmp_path: Path, env) -> None:  # noqa: F811
    script = [
        "I am not sure what to do here.",
        "[Action]: RetrieveFromDatabase(sql=SELECT 1)",
        "[Action]: DropEverything(now=True)",
        turn("GenerateAnswer", {"answer": 71.2}),
    ]
    result, requests = run("neusym_rag", script, tmp_path, env)
    assert result.answered
    assert [t.error_type for t in result.trajectory[1:4]] == ["parse_error"] * 3
    feedback = json.loads(requests[1]["messages"][-1]["content"].split("\n", 1)[1])
    assert feedback["error_type"] == "parse_error" and "GenerateAnswer" in feedback["next_valid_step"]
    assert "unknown action 'DropEverything'" in requests[3]["messages"][-1]["content"]


def test_mathrag_gates_the_formula_workflow(tmp_path: Path, env) -> None:  # noqa: F811
    script = [
        turn("CallTool", {"tool_name": "relative_gain", "parameters": {"a": 71.2, "b": 68.5}}),
        turn("CreateDynamicTool", {"formula_id": "f-relative-gain"}),
        turn("RetrieveMathKnowledge", {"query": "relative improvement in percent"}),
        turn("CallTool", {"tool_name": "relative_gain", "parameters": {"a": 71.2, "b": 68.5}}),
        turn("CreateDynamicTool", {"formula_id": "unknown-formula"}),
        turn("CreateDynamicTool", {"formula_id": "f-relative-gain"}),
        turn("CallTool", {"tool_name": "gain", "parameters": {}}),
        turn("CallTool", {"tool_name": "relative_gain", "parameters": {"a": 71.2, "b": 68.5}}),
        turn("GenerateAnswer", {"answer": 3.94}, thought="Formula f-relative-gain gives 3.94."),
    ]
    task = TASK | {
        "question": "By how many percent does RankCal improve on the baseline on SST-2?",
        "answer_format": "a float rounded to 2 decimal places",
    }
    result, requests = run("mathrag", script, tmp_path, env, task=task)
    steps = [(t.action_type, t.error_type) for t in result.trajectory if not t.seeded]
    assert steps == [
        ("CallTool", "workflow"),
        ("CreateDynamicTool", "workflow"),
        ("RetrieveMathKnowledge", None),
        ("CallTool", "workflow"),
        ("CreateDynamicTool", "workflow"),
        ("CreateDynamicTool", None),
        ("CallTool", "workflow"),
        ("CallTool", None),
        ("GenerateAnswer", None),
    ]
    errors = [json.loads(t.observation) for t in result.trajectory if t.error_type == "workflow"]
    assert errors[0]["next_valid_step"].startswith("RetrieveMathKnowledge(")
    assert errors[1]["next_valid_step"].startswith("RetrieveMathKnowledge(")
    assert errors[2]["next_valid_step"] == "CreateDynamicTool(formula_id='f-relative-gain')"
    assert "was not retrieved" in errors[3]["message"]
    assert errors[4]["next_valid_step"].startswith("CallTool(tool_name='relative_gain'")
    computed = result.trajectory[-2].observation
    assert computed.startswith("relative_gain(") and "3.941605" in computed
    assert result.answer == 3.94
    assert any(c.row_id == "f-relative-gain" and c.basis == "referenced" for c in result.citations)
    assert "next_valid_step" in requests[1]["messages"][-1]["content"]


def test_turn_exhaustion_is_not_an_answer(tmp_path: Path, env) -> None:  # noqa: F811
    script = [turn("RetrieveFromDatabase", {"sql": TABLE_SQL})] * 2
    result, requests = run("neusym_rag", script, tmp_path, env, config=LoopConfig(max_turns=2))
    assert result.status == "turns_exhausted" and result.answer is None and result.citations == []
    assert len(requests) == 2 and "71.2" in result.trajectory[-1].observation


def test_llm_500_mid_run_is_retried(tmp_path: Path, env) -> None:  # noqa: F811
    script = [
        turn("RetrieveFromDatabase", {"sql": TABLE_SQL}),
        {"status": 500},
        turn("GenerateAnswer", {"answer": 71.2}),
    ]
    result, requests = run("neusym_rag", script, tmp_path, env)
    assert result.answered and result.usage.retries == 1 and len(requests) == 3
    assert requests[1]["messages"] == requests[2]["messages"]


def test_llm_400_is_reported(tmp_path: Path, env) -> None:  # noqa: F811
    script = [turn("RetrieveFromDatabase", {"sql": TABLE_SQL}), {"status": 400, "error": "prompt too long"}]
    result, requests = run("neusym_rag", script, tmp_path, env)
    assert result.status == "llm_error" and result.answer is None
    assert "400" in result.error and "prompt too long" in result.error and len(requests) == 2


def test_sliding_window_and_token_budget(tmp_path: Path, env) -> None:  # noqa: F811
    script = [turn("RetrieveFromDatabase", {"sql": f"SELECT {i} AS n"}) for i in range(5)]
    script.append(turn("GenerateAnswer", {"answer": 4}))
    result, requests = run("neusym_rag", script, tmp_path, env, config=LoopConfig(history_window=2))
    assert result.answered
    last = requests[-1]["messages"]
    assert len(last) == 2 + 2 * 2 and "turn(s) are omitted" in last[1]["content"]
    assert '"n": 4' in last[-1]["content"]

    budget, _ = run(
        "neusym_rag",
        [turn("RetrieveFromDatabase", {"sql": "SELECT 1"})] * 3,
        tmp_path / "b",
        env,
        config=LoopConfig(token_budget=10),
    )
    assert budget.status == "budget_exhausted" and budget.answer is None and budget.usage.calls == 1


def _method_script(method: str) -> list:
    vector = {
        "query": "SST-2 accuracy RankCal",
        "collection_name": "text_bm25_en",
        "table_name": "tables",
        "column_name": "table_content",
        "filter": f"pdf_id == '{CALIBRATION}'",
        "limit": 3,
    }
    answer = turn("GenerateAnswer", {"answer": 71.2})
    return {
        "question_only": [fenced("71.2")],
        "title_with_abstract": [fenced("71.2")],
        "full_text_with_cutoff": [fenced("71.2")],
        "classic_rag": [fenced("71.2")],
        "iterative_classic_rag": [turn("ClassicRetrieve", {"query": "SST-2 accuracy", "limit": 2}), answer],
        "two_stage_neu_rag": [turn("RetrieveFromVectorstore", vector), fenced("71.2")],
        "iterative_neu_rag": [turn("RetrieveFromVectorstore", vector), answer],
        "two_stage_sym_rag": [turn("RetrieveFromDatabase", {"sql": TABLE_SQL}), fenced("71.2")],
        "iterative_sym_rag": [turn("RetrieveFromDatabase", {"sql": TABLE_SQL}), answer],
        "two_stage_hybrid_rag": [turn("RetrieveFromDatabase", {"sql": TABLE_SQL}), fenced("71.2")],
        "neusym_rag": [turn("RetrieveFromDatabase", {"sql": TABLE_SQL}), answer],
        "mathrag": [turn("RetrieveFromDatabase", {"sql": TABLE_SQL}), answer],
        "recap": [
            "[Restate]: RankCal's SST-2 accuracy.\n[Extract]: 71.2 (Table 2, RankCal, SST-2)\n"
            "[Compute]: none\n[Answer]: 71.2\n[Present]: 71.2"
        ],
        "hdrag": [
            "[Ranking]: 1, 2",
            "[Restate]: RankCal's SST-2 accuracy.\n[Extract]: 71.2 (Table 2, row RankCal, column SST-2)\n"
            "[Compute]: none\n[Answer]: 71.2\n[Present]: 71.2",
        ],
    }[method]


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_end_to_end(tmp_path: Path, env, method: str) -> None:  # noqa: F811
    result, requests = run(method, _method_script(method), tmp_path, env)
    assert result.status == "answered", result.error
    assert str(result.answer) == "71.2"
    assert len(requests) == len(_method_script(method))
    prompt = "\n".join(texts(requests[-1]))
    assert "What SST-2 accuracy does RankCal reach" in prompt
    if method == "question_only":
        assert "[Context]" not in prompt and result.citations == []
    else:
        assert result.citations and all(c.paper_id == CALIBRATION for c in result.citations)
        assert all(c.page_number in (1, 2) for c in result.citations)
    if method.startswith("two_stage"):
        assert result.trajectory[1].ok and "[Retrieved by your action]" in prompt


def test_recap_uses_the_calculator_for_numeric_answers(tmp_path: Path, env) -> None:  # noqa: F811
    task = TASK | {
        "question": "By how many percent does RankCal improve on the baseline on SST-2?",
        "answer_format": "a float rounded to 2 decimal places",
    }
    response = (
        "[Restate]: relative gain.\n[Extract]: RankCal 71.2, Baseline 68.5 (Table 2)\n"
        "[Compute]: (71.2-68.5)/68.5*100 is about 4\n[Answer]: 4.0\n"
        "[Present]: (71.2 - 68.5) / 68.5 * 100"
    )
    result, _ = run("recap", [response], tmp_path, env, task=task)
    assert result.answer == 3.94 and result.trajectory[-1].parameters["chosen"] == "calculator"


def test_hdrag_reranks_row_and_column_entities_then_computes(tmp_path: Path, env) -> None:  # noqa: F811
    """The ensemble's candidates are the table's rows, columns and the table; the model's ranking decides the
    context (unknown numbers are ignored, the rest is filled in ensemble order) and RECAP computes the answer."""
    from agent.hdrag import hdrag_candidates
    from agent.task import Task

    task = TASK | {
        "question": "By how many points does RankCal beat the Baseline on SST-2?",
        "answer_format": "a float rounded to 1 decimal place",
    }
    candidates = hdrag_candidates(env, Task.from_any(task))
    assert {c.table_name for c in candidates} == {"table_rows", "table_columns", "tables"}
    assert all(c.bbox is not None and [float(v) for v in c.bbox] == [72.0, 400.0, 468.0, 120.0] for c in candidates)
    sst = next(i for i, c in enumerate(candidates, 1) if c.text.startswith("Table 2") and "Column: SST-2" in c.text)
    script = [
        f"[Ranking]: {sst}, 99, {sst}",
        "[Restate]: the gap.\n[Extract]: RankCal 71.2, Baseline 68.5 (column SST-2)\n[Compute]: 2.7\n"
        "[Answer]: 2.7\n[Present]: 71.2 - 68.5",
    ]
    with start_stub(script, tmp_path / "stub") as stub:
        llm = ChatClient(base_url=stub.base_url, api_key="k", model="stub-model", sleep=lambda _: None)
        result = run_method("hdrag", task, env, llm, k=2)
        requests = stub.requests()
    assert result.status == "answered" and result.answer == 2.7
    rerank = result.trajectory[1]
    assert rerank.action_type == "rerank" and rerank.parameters == {"order": [sst]}
    answer_prompt = "\n".join(texts(requests[1]))
    assert "Column: SST-2" in answer_prompt and answer_prompt.index("Column: SST-2") < answer_prompt.index("[Restate]")
    assert "[Candidates]" in texts(requests[0])[-1] and "(1) [" in texts(requests[0])[-1]
    assert result.citations and all(c.paper_id == CALIBRATION for c in result.citations)


def test_hdrag_shows_a_lines_values_with_its_summary(env) -> None:  # noqa: F811
    """A hit on a row's LLM summary alone still brings the row's values (what RECAP computes from)."""
    from agent.hdrag import hdrag_candidates
    from agent.task import Task

    items = hdrag_candidates(env, Task.from_any(TASK | {"question": "Which proposed calibration method leads?"}))
    rankcal = next(i for i in items if i.table_name == "table_rows" and "RankCal" in i.text)
    assert "SST-2: 71.2" in rankcal.text and "[Summary]: The proposed calibration method" in rankcal.text
    assert rankcal.column_name == "row_text"


def test_hdrag_keeps_the_ensemble_order_when_the_rerank_fails(tmp_path: Path, env) -> None:  # noqa: F811
    script = [
        {"status": 400, "error": "bad request"},
        "[Restate]: x\n[Extract]: 71.2\n[Compute]: none\n[Answer]: 71.2\n[Present]: 71.2",
    ]
    with start_stub(script, tmp_path / "stub") as stub:
        llm = ChatClient(base_url=stub.base_url, api_key="k", model="stub-model", sleep=lambda _: None)
        result = run_method("hdrag", TASK, env, llm, k=2)
    assert result.status == "answered" and result.answer == 71.2
    assert result.trajectory[1].action_type == "rerank" and not result.trajectory[1].ok


@pytest.mark.parametrize(
    ("answer_format", "llm_answer", "expression", "expected"),
    [
        ("a float rounded to 2 decimal places", "4.0", "(71.2 - 68.5) / 68.5 * 100", (3.94, "calculator")),
        ("an integer", "3", "7 + 2 * 3 / 2", (10, "calculator")),
        ("a float", "1.5", "3 / 2 = 1.5", (1.5, "calculator")),
        ("a string, the method name", "RankCal", "71.2 - 68.5", ("RankCal", "llm")),
        ("a Python list of two floats", "[1.0, 2.0]", "1 + 1", ("[1.0, 2.0]", "llm")),
        ("a float", "2.7", "NONE", ("2.7", "llm")),
        ("a float", "2.7", "__import__('os')", ("2.7", "llm")),
        ("a float", "2.7", "71.2 - ", ("2.7", "llm")),
    ],
)
def test_recap_rule(answer_format: str, llm_answer: str, expression: str, expected: tuple) -> None:
    assert choose_recap_answer(answer_format, llm_answer, expression) == expected


def test_first_retrieval_and_retrieval_only_metrics_need_no_llm(home: Path, env) -> None:  # noqa: F811
    examples = [
        TASK | {"evaluator": {"eval_func": "eval_float_exact_match", "eval_kwargs": {"gold": 71.2}}},
        {
            "uuid": "7a3bb0a4-6c5e-4b6e-9d55-0d6d1c1a2b3c",
            "question": "Which paper adapts language models with tensor-train adapters?",
            "answer_format": "the title",
            "anchor_pdf": [],
            "reference_pdf": [],
            "conference": ["naacl2024"],
            "tags": ["retrieval", "text", "objective"],
            "evaluator": {
                "eval_func": "eval_paper_relevance_with_reference_answer",
                "eval_kwargs": {"reference_answer": "LoRETTA: Low-Rank Economic Tensor-Train Adaptation"},
            },
        },
        TASK
        | {
            "uuid": "8a3bb0a4-6c5e-4b6e-9d55-0d6d1c1a2b3c",
            "tags": ["single", "text", "objective"],
            "evaluator": {"eval_func": "eval_bool_exact_match", "eval_kwargs": {"gold": True}},
        },
    ]
    settings = settings_for(home)
    for method in METHODS:
        for example in examples:
            items = first_retrieval(method, example, env, 3)
            assert all(hasattr(i, "text") and hasattr(i, "paper_id") and hasattr(i, "page_number") for i in items)
    classic = retrieval_only(examples, settings, "classic_rag", 3, env=env)
    assert [q.kind for q in classic.questions] == ["answer", "paper", "no_gold"]
    assert [q.hit for q in classic.questions[:2]] == [1, 1] and classic.hit_at_k == 1.0
    assert classic.by_tag()["retrieval"]["hit_at_k"] == 1.0
    blind = retrieval_only(examples, settings, "question_only", 3, env=env)
    assert blind.hit_at_k == 0.0 and blind.to_dict()["scored"] == 2
    assert first_retrieval("classic_rag", examples[1], env, 3)[0].paper_id == LORETTA


def test_neural_first_retrieval_ranks_every_view_by_score(env) -> None:  # noqa: F811
    """Not a turn per view: the front matter (no per-view list named it) and an equation come first when they
    answer best."""
    where = TASK | {"question": "Which university are Xinmeng Huang and Shuo Li affiliated with?"}
    assert [(i.table_name, i.column_name) for i in first_retrieval("two_stage_neu_rag", where, env, 3)][0] == (
        "metadata",
        "front_matter",
    )
    formula = TASK | {"question": "RCE = sum |r_i - c_i|: what does the equation compute?"}
    assert first_retrieval("two_stage_neu_rag", formula, env, 3)[0].table_name == "equations"
    calls = env.vectors.calls[-1]
    assert (calls["table_name"], calls["column_name"]) == (None, None) and CALIBRATION in calls["filter"]
    # a figure's caption and the words inside it, both ranked, are one item holding both
    figure = TASK | {"question": "What word error rate of DD2 and NV1 does Figure 3 show?"}
    items = [i for i in first_retrieval("two_stage_neu_rag", figure, env, 3) if i.table_name == "images"]
    assert len(items) == 1 and "WER of DD2" in items[0].text and "12.4" in items[0].text, items
    assert items[0].column_name in ("image_caption,image_text", "image_text,image_caption")


def test_retrieval_only_opens_the_stores_itself(home: Path) -> None:  # noqa: F811
    metrics = retrieval_only(
        [TASK | {"evaluator": {"eval_func": "eval_float_exact_match", "eval_kwargs": {"gold": 71.2}}}],
        settings_for(home),
        "two_stage_sym_rag",
        3,
    )
    assert metrics.hit_at_k == 1.0 and metrics.error is None


_ABSOLUTE = re.compile(r"(?<![\w.:/<>~-])/(?:[\w.@+-]+/)+[\w.@+-]+")


def test_prompts_carry_no_absolute_paths(tmp_path: Path, home: Path, env) -> None:  # noqa: F811
    script = [
        turn("RetrieveFromDatabase", {"sql": "SELECT paper_id, pdf_path FROM metadata"}),
        turn("RetrieveFromDatabase", {"sql": "SELECT * FROM duckdb_databases()"}),
        turn("RetrieveFromDatabase", {"sql": "SELECT * FROM read_csv('/etc/passwd')"}),
        turn("ViewImage", {"paper_id": LORETTA, "page_number": 1}),
        turn("GenerateAnswer", {"answer": "done"}),
    ]
    result, requests = run("neusym_rag", script, tmp_path, env)
    assert result.answered
    forbidden = [str(home), str(tmp_path), str(Path.home()), str(Path.cwd())]
    for request in requests:
        for message in request["messages"]:
            if message["role"] == "assistant":
                continue
            content = message["content"]
            for text in [content] if isinstance(content, str) else [p.get("text", "") for p in content]:
                assert not any(root in text for root in forbidden)
                assert not _ABSOLUTE.search(text), _ABSOLUTE.search(text).group(0)
    assert "<local>" in "\n".join(texts(requests[1]))


def test_ask_end_to_end_with_the_real_stores(tmp_path: Path, home: Path) -> None:  # noqa: F811
    script = [turn("GenerateAnswer", {"answer": 71.2}, thought="The first retrieval shows 71.2.")]
    with start_stub(script * 2, tmp_path / "stub") as stub:
        settings = settings_for(home, stub.base_url)
        result = ask(TASK["question"], settings, paper_ids=[CALIBRATION], answer_format="a float")
        again = ask(TASK["question"], settings, paper_ids=[CALIBRATION], answer_format="a float")
        requests = stub.requests()
    assert result.answered and result.answer == 71.2 and result.citations
    assert result.trajectory[0].seeded and result.trajectory[0].action_type in (
        "RetrieveFromDatabase",
        "RetrieveFromVectorstore",
    )
    assert again.answer == 71.2 and again.usage.cached_calls == 1 and len(requests) == 1
    with pytest.raises(ValueError, match="UUID"):
        ask("q", settings, paper_ids=["../etc"])
    with pytest.raises(ValueError, match="unknown method"):
        ask("q", settings, method="magic")


def test_ask_without_an_endpoint_fails_before_opening_anything(tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "nowhere")
    with pytest.raises(LLMNotConfigured):
        ask("What is RCE?", settings)


def test_two_stage_falls_back_to_the_first_retrieval_when_stage_one_is_malformed(tmp_path: Path, env) -> None:  # noqa: F811
    result, requests = run("two_stage_sym_rag", ["let me think about SQL", fenced("71.2")], tmp_path, env)
    assert result.trajectory[1].error_type == "parse_error"
    assert result.answered and result.answer == "71.2"
    assert "[Retrieved by your action]" not in "\n".join(texts(requests[1]))
    assert any(c.basis == "contains_answer" for c in result.citations)


@pytest.mark.parametrize(
    ("gold", "text", "found"),
    [
        (74.1, "BROS: 74.10; TEDS", True),
        (4749, "Ambig.: 4,749;", True),
        (1234567, "1,234,567", True),
        (-2.1, "drops by −2.1 points", True),
        ("−0.144", "-0.151 -0.144", True),  # a minus as the PDF prints it, a hyphen as MinerU writes it
        ("−0.144", "0.144", False),
        (12, "12.0", True),
        (97.2, "97.20%", True),
        (74.1, "174.1", False),
        (74.1, "74.15", False),
        (4749, "14,749", False),
        (456, "123,456", False),
        # text as laid out: a line break is a space, a hyphen between letters may be a line break's, kept or dropped
        ("Three random sampled output", "Nor. y\nThree random\nsampled output", True),
        ("The data-production dispositif", "Miceli. 2022. The dataproduction dispositif. Proc.", True),
        ("pre-training", "geometric pre-\ntraining", True),
        ("3-5", "35 runs", False),  # a hyphen between digits is a range, not a line break's
        ("random sampled", "randomly sampled", False),
        ("7, 47", "Params (B): 7,47; Tokens", True),  # no space after a comma, as MinerU writes a cell
        ("7, 47", "7 47", False),
        ("α = 0.85, β = 0.45", "Values: α = 0.85 , β = 0.45 Q max", True),  # MinerU's space before a comma
        ("x: y", "x : y", True),
        ("a, b", "a b", False),
    ],
)
def test_answer_bearing_numbers_match_as_papers_print_them(gold, text, found) -> None:
    from agent.evidence import answer_needles, contains_needle

    assert any(contains_needle(text, needle) for needle in answer_needles(gold)) is found
