"""The formula graph's LLM hooks through the real ``openai`` client against the scripted stub server: parameter
descriptions for what the text left open, the gray-zone judge, and templates for LaTeX the rules reject (kept only
when they pass the AST whitelist and the parameter check). Without an endpoint nothing is called."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from paperlake.config import Settings
from paperlake.formulas import FormulaGraph, formulas_from_equation
from paperlake.formulas.llm import FormulaAssistant, formula_assistant
from paperlake.runtime.llm import ChatClient
from support.openai_stub import start_stub


def assistant(stub, tmp_path: Path, cache: bool = False) -> FormulaAssistant:
    return FormulaAssistant(
        ChatClient(
            base_url=stub.base_url,
            api_key="k",
            model="stub-model",
            max_retries=0,
            cache_dir=tmp_path / "llm-cache" if cache else None,
        )
    )


def row(latex: str, paper: str = "paper-a", equation: str = "eq-1", after: str = "") -> dict:
    return {
        "equation_id": equation,
        "paper_id": paper,
        "page_number": 1,
        "equation_latex": latex,
        "context": "",
        "context_after": after,
    }


def descriptions(formula) -> dict[str, str]:
    return {parameter.name: parameter.description for parameter in formula.parameters}


def test_no_endpoint_means_no_assistant(tmp_path: Path) -> None:
    assert formula_assistant(Settings(home=tmp_path, milvus_uri=str(tmp_path / "m.db"))) is None


def test_llm_describes_only_what_the_text_left_open_and_answers_are_cached(tmp_path: Path) -> None:
    answer = '```json\n{"\\\\alpha": "the slope of the line", "x": "WRONG: the text already says", "\\\\beta": ""}\n```'
    with start_stub([answer], tmp_path) as stub:
        helper = assistant(stub, tmp_path, cache=True)
        equation = row(r"y = \alpha x + \beta", after="where $x$ is the input feature.")
        (formula,) = formulas_from_equation(equation, describer=helper.describe_parameters)
        (again,) = formulas_from_equation(equation, describer=helper.describe_parameters)  # from the cache
        assert len(stub.requests()) == 1
    assert descriptions(formula) == {"alpha": "the slope of the line", "beta": "", "x": "the input feature"}
    assert descriptions(again) == descriptions(formula)
    assert helper.client.usage.cached_calls == 1
    prompt = stub.requests()[0]["messages"][0]["content"]
    assert r"\alpha" in prompt and "input feature" in prompt and stub.requests()[0]["temperature"] == 0.0


def test_malformed_answers_change_nothing(tmp_path: Path) -> None:
    script = ["Sure! alpha is the slope and beta the offset.", '{"same": "maybe"}', "no json at all"]
    with start_stub(script, tmp_path) as stub:
        helper = assistant(stub, tmp_path)
        (formula,) = formulas_from_equation(row(r"y = \alpha x + \beta"), describer=helper.describe_parameters)
        (first,) = formulas_from_equation(row(r"y = \alpha x + \beta", paper="p1"))
        (second,) = formulas_from_equation(row(r"u = \gamma v", paper="p2"))
        assert helper.same_formula(second, first) is False
        (failed,) = formulas_from_equation(row(r"y = x \bmod n"), proposer=helper.propose_template)
    assert descriptions(formula) == {"alpha": "", "beta": "", "x": ""}
    assert formula.status == "validated"
    assert failed.status == "failed" and failed.template is None
    assert any(note.startswith("LLM template unavailable: MalformedAnswer") for note in failed.notes)
    assert helper.counts["describe_malformed"] == helper.counts["judge_malformed"] == 1
    assert len(helper.errors) == 3


def test_a_proposed_template_is_validated_or_refused_with_its_reason(tmp_path: Path) -> None:
    good = json.dumps({"output": "y", "expression": "x % n", "parameters": ["x", "n"]})
    smuggler = json.dumps({"output": "y", "expression": "__import__('os').system('true')", "parameters": []})
    invented = json.dumps({"output": "y", "expression": "x % m", "parameters": ["x", "m"]})
    attribute = json.dumps({"output": "y", "expression": "x.real % n", "parameters": ["x", "n"]})
    with start_stub([good, smuggler, invented, attribute], tmp_path) as stub:
        helper = assistant(stub, tmp_path)
        results = [
            formulas_from_equation(row(r"y = x \bmod n", equation=f"eq-{i}"), proposer=helper.propose_template)[0]
            for i in range(4)
        ]
    accepted, *refused = results
    assert accepted.status == "templated" and accepted.conversion_step == "llm" and accepted.reason is None
    assert accepted.template == "x % n" and [p.name for p in accepted.parameters] == ["n", "x"]
    from paperlake.formulas import build_tool

    assert build_tool(accepted)(x=17, n=5).value == 2
    reasons = [next(note for note in formula.notes if note.startswith("LLM template rejected")) for formula in refused]
    assert "outside the whitelist" in reasons[0] or "unknown name" in reasons[0]
    assert "['m'] are not symbols of the formula" in reasons[1]
    assert "Attribute" in reasons[2]
    assert all(
        formula.status == "failed" and formula.template is None and "\\bmod" in formula.reason for formula in refused
    )
    assert r"\bmod" in stub.requests()[0]["messages"][0]["content"]


def test_the_judge_decides_the_gray_zone(tmp_path: Path) -> None:
    def gray(texts: list[str]) -> np.ndarray:  # every pair of formulas at cosine 0.85
        return np.array([[1.0, 0.0] if "paper one" in text else [0.85, np.sqrt(1 - 0.85**2)] for text in texts])

    def add(graph: FormulaGraph, latex: str, paper: str, context: str, judge) -> None:
        graph.add_equations(
            [{**row(latex, paper=paper, equation=f"{paper}-eq"), "context": context}], embed=gray, judge=judge
        )

    script = ['{"same": true, "reason": "both are the F1 score"}', '{"same": false}', "I cannot tell"]
    with start_stub(script, tmp_path) as stub:
        helper = assistant(stub, tmp_path)
        graphs = []
        for _ in script:
            graph = FormulaGraph()
            add(graph, r"F = \frac{2 P R}{P + R}", "p1", "paper one: the F1 score", helper.same_formula)
            add(graph, r"F = \frac{2 p r}{p + r + 1}", "p2", "paper two: a smoothed F1", helper.same_formula)
            graphs.append(graph)
        assert len(stub.requests()) == 3
    merged, different, unreadable = graphs
    assert len(merged.formulas) == 1
    (only,) = merged.formulas.values()
    assert [occurrence.matched_by for occurrence in only.occurrences] == ["new", "judge"]
    assert len(different.formulas) == len(unreadable.formulas) == 2
    assert all(
        any(note.startswith("possibly_same") for note in formula.notes) for formula in unreadable.formulas.values()
    )
    assert helper.counts == {"judge_calls": 3, "judge_same": 1, "judge_different": 1, "judge_malformed": 1}
