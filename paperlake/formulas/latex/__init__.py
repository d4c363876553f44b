"""LaTeX of display equations → sympy, with a record of how (or why not).

MinerU writes LaTeX the way its formula model sees it: every token spaced out (``\\mathrm { N L L }``), bold and
size wrappers everywhere, numbers as ``\\tag{3}``, multi-line derivations as ``\\begin{array}`` rows. The chain:

1. :func:`normalise_latex` cleans that into compact, display-grade LaTeX (delimiters, tags, ``\\left``/``\\right``,
   spacing and style commands, font wrappers dropped; words inside ``\\mathrm``/``\\text``/``\\operatorname`` joined;
   ``\\cdot``/``\\times`` → ``*``; definition signs → ``:=``; array rows kept as ``\\\\``-separated lines).
2. :func:`split_equations` splits rows into separate equations, joining continuation rows (``= …``) to the row
   before; :func:`split_lhs_rhs` / :func:`split_relations` cut an equation at its top-level relations.
3. :func:`to_sympy` converts one equation. It first tries sympy's own ``parse_latex`` (``convert.PARSERS``) on
   *plain* LaTeX only — where sympy's reading is unambiguous — and otherwise (or when sympy refuses) a rule-based
   rewrite: every name (``W_{q}``, ``\\mathrm{TLD}_{t}``, ``\\hat{y}``, ``x_{i}^{l}``) becomes one placeholder
   symbol that sympy cannot misread, parse_latex does the structure, and the placeholders are swapped back.
   Conventions of the rewrite (documented because they decide meaning):

   * consecutive italic letters are a product (LaTeX's convention) unless they spell a known function
     (``softmax``, ``max`` …) or a name from ``known_symbols`` (e.g. ``MI`` described in the text);
   * ``^{\\top}``, ``^{\\intercal}``, ``^{T}`` on a capital or bold base are transposes (identity on scalars);
     a superscript that is parenthesised, a capital letter, or a short Latin index on an already subscripted
     base (``x_{i}^{l}``) is an index; anything else is a power;
   * ``name(…)`` is a function application for known functions, multi-letter names, conventional function
     letters (f, g, h, p, q, F, G, P, Q, L, ℓ, φ, ψ, σ), argument lists with commas and the left-hand side of a
     definition; otherwise it is a product (``\\lambda_{k}(\\theta_{k}-\\theta_{0})``);
   * bare ``e`` and ``\\pi`` are the constants unless ``known_symbols`` lists them.

A formula that is not computable as a scalar function (expectations, probabilities, argmin/argmax, sets, logic,
integrals, gradients, norms and inner products, sums over index sets, array indexing …) keeps its LaTeX and gets
status ``not_computable`` with the reason; anything else that does not convert is ``failed`` with every attempt's
error recorded.

One module per step, in the order above, each importing only the ones before it: ``tokens`` (the vocabulary and the
token trees), ``normalise``, ``split``, ``names``, ``computability`` (the not-computable scan), ``rewrite``,
``convert``. The Unicode letters and symbols are the ones :mod:`paperlake.formulas.latex.symbols` shares with the
glyph reader.
"""

from __future__ import annotations

from paperlake.formulas.latex.computability import (
    not_computable_reason,
)
from paperlake.formulas.latex.convert import (
    to_sympy,
    vector_symbols,
)
from paperlake.formulas.latex.names import (
    identifier,
    symbol_name,
    symbols_in,
)
from paperlake.formulas.latex.normalise import (
    normalise_latex,
)
from paperlake.formulas.latex.split import (
    split_equations,
    split_lhs_rhs,
    split_relations,
)
from paperlake.formulas.latex.tokens import (
    DEFINING_RELATIONS,
    FUNCTION_LETTERS,
    FUNCTION_WORDS,
    GREEK,
    INEQUALITIES,
    KNOWN_FUNCTION_WORDS,
    RELATIONS,
    TRANSPOSE,
    UNICODE_GREEK,
    UNICODE_SYMBOLS,
    ConversionResult,
    ConversionStatus,
    Node,
    RewriteError,
    build_tree,
    emit,
    tokenize,
)

__all__ = [
    "build_tree",
    "ConversionResult",
    "ConversionStatus",
    "DEFINING_RELATIONS",
    "emit",
    "FUNCTION_LETTERS",
    "FUNCTION_WORDS",
    "GREEK",
    "identifier",
    "INEQUALITIES",
    "KNOWN_FUNCTION_WORDS",
    "Node",
    "normalise_latex",
    "not_computable_reason",
    "RELATIONS",
    "RewriteError",
    "split_equations",
    "split_lhs_rhs",
    "split_relations",
    "symbol_name",
    "symbols_in",
    "to_sympy",
    "tokenize",
    "TRANSPOSE",
    "UNICODE_GREEK",
    "UNICODE_SYMBOLS",
    "vector_symbols",
]
