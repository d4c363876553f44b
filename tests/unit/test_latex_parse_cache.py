"""sympy's LaTeX parses kept across processes (paperlake.formulas.latex.parse_cache): a stored parse rebuilds the
parser's own tree node for node, the reader calls nothing but sympy, a formula stage with a warm cache writes the
same graph as one without, and a damaged or unusable cache file only means parsing again."""

from __future__ import annotations

import sqlite3

import pytest
import sympy

from paperlake.formulas.latex import convert
from paperlake.formulas.latex.parse_cache import (
    LatexParseCache,
    UnreadableTree,
    _identical,
    dump_tree,
    latex_parse_cache,
    load_tree,
    read_srepr,
    storable,
)
from paperlake.formulas.store import update_formula_graph

# constructed: the shapes sympy's parser builds that srepr alone does not give back (an unevaluated product's
# factor order, a Sum built with evaluation on, undefined functions, floats, limits, relations)
LATEX = [
    r"\frac{a}{b} = c^2 + \sqrt{x}",
    r"f(x) = \sum_{i=1}^{n} x_i",
    r"y = -3.5 x",
    r"L = \log(p) - \int_0^1 t dt",
    r"x \leq y",
    r"\lim_{x \to \infty} f(x)",
    r"I_t M",
    r"\Delta W x + W_0 x",
    r"\frac{1}{N} \sum_{k=1}^{N} g(a, b, c)",
    r"x + x",
]


@pytest.mark.parametrize("latex", LATEX)
def test_a_stored_parse_is_the_parsers_tree_node_for_node(latex):
    from sympy.parsing.latex import parse_latex

    expression = parse_latex(latex, strict=True)
    text = storable(expression)
    assert text is not None, sympy.srepr(expression)
    assert _identical(load_tree(text), expression)
    assert sympy.srepr(load_tree(text)) == sympy.srepr(expression)


def test_identical_tells_trees_sympy_calls_equal_apart():
    x = sympy.Symbol("x")
    with sympy.evaluate(False):
        unevaluated = sympy.Add(x, x)
    assert not _identical(unevaluated, 2 * x)
    assert not _identical(sympy.Symbol("a") * sympy.Symbol("b"), sympy.Symbol("b") + sympy.Symbol("a"))
    f = sympy.Function("f")
    assert _identical(f(x), sympy.Function("f")(x))  # a new class per Function("f") call, equal by name


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "eval('1')",
        "Symbol.__class__",
        "(lambda: 1)()",
        "Symbol('x') + Symbol('y')",
        "[x for x in ()]",
        "sympy",  # the module itself is not a sympy name in it
        "Symbol(**{'name': 'x'})",
    ],
)
def test_the_reader_calls_nothing_but_sympys_public_names(text):
    with pytest.raises(UnreadableTree):
        read_srepr(text)
    with pytest.raises(UnreadableTree):
        load_tree(f'["{text}"]' if '"' not in text else "[]")


def test_text_that_was_not_written_by_dump_is_refused():
    for text in ("not json", "{}", '["Add", "x"]', '["os.system", []]', '["Integer(2)", [], []]'):
        with pytest.raises((UnreadableTree, ValueError, TypeError)):
            load_tree(text)
    assert dump_tree(sympy.Integer(2)) == '["Integer(2)"]'


PAPERS = ("naacl2024-116-quantum-lindblad-lm", "emnlp2024-126-embedding-inversion-attack")


def _equations_warehouse(path, corpus, papers) -> None:
    """A warehouse ``equations`` table (the columns the formula stage reads) of these papers' display equations,
    as MinerU wrote them."""
    import json

    import duckdb

    with duckdb.connect(str(path)) as con:
        con.execute(
            "create table equations (equation_id varchar, ref_paper_id varchar, page_number integer, ordinal integer, "
            "latex_source varchar, equation_content varchar, equation_text varchar, equation_number varchar, "
            "bounding_box double[], context varchar, context_after varchar)"
        )
        for paper in papers:
            items = json.loads(next((corpus / "mineru" / paper).glob("*_content_list.json")).read_text())
            equations = [item for item in items if item.get("type") == "equation"]
            assert equations, paper
            for ordinal, item in enumerate(equations):
                con.execute(
                    "insert into equations values (?, ?, ?, ?, 'mineru', ?, null, null, [0, 0, 1, 1], '', '')",
                    [f"{paper}-{ordinal}", paper, item.get("page_idx", 0) + 1, ordinal, item["text"]],
                )


def _graph_outputs(out):
    import pyarrow.parquet as pq

    tables = {p.name: pq.read_table(p).to_pylist() for p in sorted((out / "f").glob("*.parquet"))}
    return tables, (out / "f.ttl").read_bytes()


def test_a_formula_stage_with_a_warm_cache_writes_the_same_graph_and_a_damaged_one_is_parsed_again(tmp_path, corpus):
    """Three formula stages over two real papers' equations, each as a new process would run it (the in-process
    memo cleared): without a cache, with a cold one, with a warm one; then with every stored tree damaged."""
    import duckdb

    home = tmp_path / "home"
    home.mkdir()
    _equations_warehouse(home / "warehouse.duckdb", corpus, PAPERS)
    cache_file = tmp_path / "cache.sqlite"
    outputs, reports = [], []
    for label, cache in (("none", None), ("cold", cache_file), ("warm", cache_file), ("damaged", cache_file)):
        if label == "damaged":
            with sqlite3.connect(cache_file) as con:
                damaged = con.execute(
                    "update latex_parses set tree = ? where tree is not null", ['["Integer("']
                ).rowcount
            assert damaged > 0
        convert._parse.cache_clear()
        with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
            reports.append(
                update_formula_graph(con, tmp_path / label / "f", tmp_path / label / "f.ttl", parse_cache=cache)
            )
        outputs.append(_graph_outputs(tmp_path / label))
    none, cold, warm, damaged = reports
    assert none.parses_cached == none.parses_new == 0
    assert cold.parses_cached == 0 and cold.parses_new > 0
    assert warm.parses_new == 0 and warm.parses_cached == cold.parses_new
    assert damaged.parses_new > 0  # the damaged trees were parsed again (and written anew)
    assert all(output == outputs[0] for output in outputs[1:])
    assert (
        sum(r[0] for r in sqlite3.connect(cache_file).execute("select count(*) from latex_parses")) == cold.parses_new
    )


def test_an_unusable_cache_file_is_skipped_with_a_warning(tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache's folder would be")
    convert._parse.cache_clear()
    with latex_parse_cache(blocker / "cache.sqlite") as cache:
        assert cache is None
        assert convert._parse("x + 1", "antlr")[0] is not None
    assert "LaTeX parse cache" in caplog.text
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    with latex_parse_cache(garbage) as cache:
        assert cache is None


def test_errors_are_kept_too_and_versions_separate_entries(tmp_path):
    cache = LatexParseCache(tmp_path / "c.sqlite")
    cache.put(r"\frac{", "antlr", (None, "LaTeXParsingError: missing }"))
    cache.flush()
    assert cache.get(r"\frac{", "antlr") == (None, "LaTeXParsingError: missing }")
    other = LatexParseCache(tmp_path / "c.sqlite")
    other.versions = "sympy=0.0;antlr4=0.0"
    assert other.get(r"\frac{", "antlr") is None
    cache.close()
    other.close()
