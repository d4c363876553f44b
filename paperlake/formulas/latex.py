"""LaTeX of display equations → sympy, with a record of how (or why not).

MinerU writes LaTeX the way its formula model sees it: every token spaced out (``\\mathrm { N L L }``), bold and
size wrappers everywhere, numbers as ``\\tag{3}``, multi-line derivations as ``\\begin{array}`` rows. The chain:

1. :func:`normalise_latex` cleans that into compact, display-grade LaTeX (delimiters, tags, ``\\left``/``\\right``,
   spacing and style commands, font wrappers dropped; words inside ``\\mathrm``/``\\text``/``\\operatorname`` joined;
   ``\\cdot``/``\\times`` → ``*``; definition signs → ``:=``; array rows kept as ``\\\\``-separated lines).
2. :func:`split_equations` splits rows into separate equations, joining continuation rows (``= …``) to the row
   before; :func:`split_lhs_rhs` / :func:`split_relations` cut an equation at its top-level relations.
3. :func:`to_sympy` converts one equation. It first tries sympy's own ``parse_latex`` (antlr, then lark) on
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
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, Union

import sympy
from sympy.core.function import AppliedUndef

Node = Union[str, list["Node"]]

ConversionStatus = Literal["parsed", "not_computable", "failed"]

GREEK = frozenset(
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi omicron pi "
    "varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma "
    "Upsilon Phi Psi Omega ell hbar digamma".split()
)
UNICODE_GREEK = {
    "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\epsilon", "ϵ": r"\epsilon",
    "ζ": r"\zeta", "η": r"\eta", "θ": r"\theta", "ι": r"\iota", "κ": r"\kappa", "λ": r"\lambda", "μ": r"\mu",
    "ν": r"\nu", "ξ": r"\xi", "π": r"\pi", "ρ": r"\rho", "σ": r"\sigma", "τ": r"\tau", "υ": r"\upsilon",
    "φ": r"\phi", "ϕ": r"\phi", "χ": r"\chi", "ψ": r"\psi", "ω": r"\omega", "Γ": r"\Gamma", "Δ": r"\Delta",
    "Θ": r"\Theta", "Λ": r"\Lambda", "Ξ": r"\Xi", "Π": r"\Pi", "Σ": r"\Sigma", "Φ": r"\Phi", "Ψ": r"\Psi",
    "Ω": r"\Omega", "ℓ": r"\ell", "ℏ": r"\hbar",
}
UNICODE_SYMBOLS = {
    "−": "-", "–": "-", "×": r"\times", "·": r"\cdot", "⋅": r"\cdot", "≤": r"\leq", "≥": r"\geq",
    "≠": r"\neq", "≈": r"\approx", "∈": r"\in", "∑": r"\sum", "∏": r"\prod", "√": r"\sqrt", "∞": r"\infty",
    "′": "'", "⊤": r"\top", "…": r"\ldots", "⋯": r"\cdots", "∗": "*",
}
_VARIANTS = {
    r"\varepsilon": r"\epsilon", r"\vartheta": r"\theta", r"\varphi": r"\phi", r"\varrho": r"\rho",
    r"\varsigma": r"\sigma", r"\varpi": r"\pi", r"\dfrac": r"\frac", r"\tfrac": r"\frac", r"\le": r"\leq",
    r"\ge": r"\geq", r"\ne": r"\neq", r"\leqslant": r"\leq", r"\geqslant": r"\geq", r"\lt": "<", r"\gt": ">",
    r"\coloneqq": ":=", r"\triangleq": ":=", r"\doteq": ":=", r"\eqqcolon": "=:", r"\rightarrow": r"\to",
    r"\intercal": r"\top", r"\vert": "|", r"\lvert": "|", r"\rvert": "|", r"\Vert": r"\|", r"\lVert": r"\|",
    r"\rVert": r"\|", r"\lbrace": r"\{", r"\rbrace": r"\}", r"\lbrack": "[", r"\rbrack": "]", r"\dots": r"\ldots",
    r"\dotsc": r"\ldots", r"\dotsb": r"\ldots", r"\dotsm": r"\ldots", r"\widehat": r"\hat",
    r"\widetilde": r"\tilde", r"\overline": r"\bar", r"\overrightarrow": r"\vec", r"\ast": "*", r"\star": "*",
    r"\cdot": "*", r"\times": "*", r"\div": "/", r"\land": r"\wedge", r"\lor": r"\vee", r"\lnot": r"\neg",
    r"\gets": r"\leftarrow", r"\implies": r"\Rightarrow",
}
_DROPPED = frozenset(
    r"\displaystyle \textstyle \scriptstyle \scriptscriptstyle \, \; \: \! \quad \qquad \hfill \enspace "
    r"\thinspace \medspace \thickspace \nonumber \notag \limits \nolimits \bf \rm \it \sf \tt \bfseries "
    r"\boldmath".split()
) | {"~", "\\ "}
_DROP_WITH_ARGUMENT = frozenset({r"\tag", r"\tag*", r"\label", r"\phantom", r"\hphantom", r"\vphantom", r"\color"})
_DELIMITER_SIZERS = frozenset(
    r"\left \right \big \Big \bigg \Bigg \bigl \bigr \Bigl \Bigr \biggl \biggr \Biggl \Biggr \middle".split()
)
_FONT_WRAPPERS = frozenset(r"\mathbf \boldsymbol \pmb \bm \mathbfit \mathbold \boxed".split())
_TEXT_WRAPPERS = frozenset(
    r"\mathrm \text \textrm \textit \mathit \textnormal \mathsf \mathtt \textbf \textsf \texttt \mbox".split()
)
_OPERATOR_WRAPPERS = frozenset({r"\operatorname", r"\operatorname*"})
_STYLED_LETTERS = {r"\mathcal": "cal", r"\mathbb": "bb", r"\mathfrak": "frak", r"\mathscr": "scr"}
_ACCENTS = {r"\hat": "hat", r"\tilde": "tilde", r"\bar": "bar", r"\vec": "vec", r"\dot": "dot", r"\ddot": "ddot",
            r"\check": "check", r"\breve": "breve", r"\acute": "acute", r"\grave": "grave"}
FUNCTION_WORDS = {
    "log": r"\log", "ln": r"\ln", "exp": r"\exp", "sin": r"\sin", "cos": r"\cos", "tan": r"\tan",
    "sinh": r"\sinh", "cosh": r"\cosh", "tanh": r"\tanh", "max": r"\max", "min": r"\min", "det": r"\det",
    "sup": r"\sup", "inf": r"\inf", "lim": r"\lim", "arg": r"\arg", "Pr": r"\Pr",
}
_ALIGN_ENVIRONMENTS = frozenset(
    "array aligned align align* alignat alignat* alignedat gathered gather gather* split eqnarray eqnarray* "
    "multline multline* equation equation* subequations".split()
)
RELATIONS = {
    "=": "=", ":=": ":=", "=:": ":=", r"\equiv": ":=", r"\approx": "approx", r"\simeq": "approx",
    r"\leq": "<=", r"\geq": ">=", "<": "<", ">": ">", r"\neq": "!=", r"\propto": "propto", r"\sim": "sim",
    r"\ll": "<<", r"\gg": ">>", r"\iff": "iff", r"\Leftrightarrow": "iff", r"\Rightarrow": "implies",
    r"\to": "to", r"\mapsto": "mapsto", r"\longrightarrow": "to", r"\in": "in", r"\subset": "subset",
    r"\subseteq": "subset", r"\vdash": "entails", r"\models": "entails", r"\cong": "approx",
}
DEFINING_RELATIONS = frozenset({"=", ":=", "approx"})
INEQUALITIES = {"<=": sympy.LessThan, ">=": sympy.GreaterThan, "<": sympy.StrictLessThan,
                ">": sympy.StrictGreaterThan}

# Commands whose meaning puts a formula outside scalar computation, with the reason we record.
_NOT_COMPUTABLE_COMMANDS = {
    r"\int": "integral", r"\oint": "integral", r"\iint": "integral", r"\nabla": "gradient",
    r"\partial": "partial derivative", r"\langle": "inner product or bra-ket",
    r"\rangle": "inner product or bra-ket", r"\|": "vector norm",
    r"\forall": "logic (quantifier)", r"\exists": "logic (quantifier)", r"\vdash": "logic (entailment)",
    r"\models": "logic (entailment)", r"\wedge": "logic (conjunction)", r"\vee": "logic (disjunction)",
    r"\neg": "logic (negation)", r"\iff": "logic (equivalence)", r"\Leftrightarrow": "logic (equivalence)",
    r"\Rightarrow": "logic (implication)", r"\to": "mapping", r"\mapsto": "mapping",
    r"\longrightarrow": "mapping", r"\leftarrow": "assignment arrow", r"\in": "set membership",
    r"\notin": "set membership", r"\subset": "set notation", r"\subseteq": "set notation",
    r"\cup": "set notation", r"\cap": "set notation", r"\setminus": "set notation", r"\emptyset": "set notation",
    r"\arg": "optimisation (argmin/argmax)", r"\sup": "supremum", r"\inf": "infimum", r"\lim": "limit",
    r"\Pr": "probability notation", r"\sim": "distribution notation", r"\mid": "conditional notation",
    r"\ldots": "ellipsis (a pattern, not an expression)", r"\cdots": "ellipsis (a pattern, not an expression)",
    r"\vdots": "ellipsis (a pattern, not an expression)", r"\ddots": "ellipsis (a pattern, not an expression)",
    r"\#": "counting notation", r"\propto": "proportionality", r"\otimes": "tensor product",
    r"\odot": "element-wise (Hadamard) product of vectors or matrices",
    r"\oplus": "direct sum", r"\circ": "function composition", r"\dagger": "conjugate transpose (operators)",
}
_NOT_COMPUTABLE_WORDS = {
    "argmin": "optimisation (argmin/argmax)", "argmax": "optimisation (argmin/argmax)",
    "Pr": "probability notation", "Cov": "covariance of random variables", "Var": "variance of random variables",
    "tr": "matrix trace", "Tr": "matrix trace", "trace": "matrix trace", "diag": "matrix operation",
    "proj": "projection operator", "softmax": "vector function (softmax)", "Reshape": "tensor operation",
}
_NOT_COMPUTABLE_STYLED = {
    "bbE": "expectation", "bbP": "probability notation", "bb1": "indicator function", "bbR": "set notation",
    "bbN": "set notation", "bbZ": "set notation", "calO": "asymptotic notation",
}

KNOWN_FUNCTION_WORDS = frozenset(FUNCTION_WORDS) | {"softmax", "sigmoid", "relu", "ReLU", "Tr", "tr", "argmin",
                                                  "argmax", "sqrt", "abs", "sgn"}
FUNCTION_LETTERS = frozenset({"f", "g", "h", "p", "q", "F", "G", "P", "Q", "L", "ell", "calL", "phi", "psi",
                              "sigma"})
_SCALAR_FUNCTIONS = {
    "sigmoid": lambda x: 1 / (1 + sympy.exp(-x)),
    "relu": lambda x: sympy.Max(0, x),
    "max": sympy.Max,
    "min": sympy.Min,
    "exp": sympy.exp,
    "log": sympy.log,
    "ln": sympy.log,
    "sqrt": sympy.sqrt,
    "abs": sympy.Abs,
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "sinh": sympy.sinh,
    "cosh": sympy.cosh,
    "tanh": sympy.tanh,
}
TRANSPOSE = sympy.Function("transpose")
_TOKEN = re.compile(r"\\(?:operatorname|tag)\*|\\[A-Za-z]+|\\.|:=|=:|\s+|.", re.S)
_TRAILING_NUMBER = re.compile(r"(?:\\q?quad|\\hfill|~|\\[,;:]|[,.])\s*\(\s*\d+[a-z]?\s*\)\s*$")
_DIGITS = re.compile(r"^-?\d+(\.\d+)?$")


@dataclass
class ConversionResult:
    """One equation's way from LaTeX to sympy, including the failures on the way."""

    latex: str
    normalised: str
    status: ConversionStatus
    expr: sympy.Basic | None = None
    lhs: sympy.Basic | None = None
    rhs: sympy.Basic | None = None
    relation: str | None = None
    step: str | None = None
    reason: str | None = None
    attempts: list[str] = field(default_factory=list)
    symbols: dict[str, str] = field(default_factory=dict)
    indices: dict[str, frozenset[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    label: str | None = None
    not_computable_sides: list[str] = field(default_factory=list)
    written: list[sympy.Basic] = field(default_factory=list, repr=False)  # each side as parsed, before evaluation

    @property
    def parsed(self) -> bool:
        return self.expr is not None


class RewriteError(ValueError):
    """The rule-based rewrite could not express the LaTeX; ``non_computable`` marks reasons of meaning."""

    def __init__(self, message: str, *, non_computable: bool = False):
        super().__init__(message)
        self.non_computable = non_computable


# ---------------------------------------------------------------------------------------------- token trees


def tokenize(latex: str) -> list[str]:
    """LaTeX → tokens (commands, control symbols, single characters); whitespace dropped."""
    return [token for token in _TOKEN.findall(latex) if not token.isspace()]


def build_tree(tokens: list[str]) -> list[Node]:
    """Tokens → nested lists, one list per brace group. Unbalanced braces are tolerated (MinerU slips)."""
    root: list[Node] = []
    stack = [root]
    for token in tokens:
        if token == "{":
            group: list[Node] = []
            stack[-1].append(group)
            stack.append(group)
        elif token == "}":
            if len(stack) > 1:
                stack.pop()
        else:
            stack[-1].append(token)
    return root


def emit(nodes: list[Node]) -> str:
    """Tree → compact LaTeX (a space only where a command would run into a following letter)."""
    pieces: list[str] = []
    for node in nodes:
        text = "{" + emit(node) + "}" if isinstance(node, list) else node
        if pieces and re.fullmatch(r"\\[A-Za-z]+\*?", pieces[-1]) and text[:1].isalpha():
            pieces.append(" ")
        pieces.append(text)
    return "".join(pieces)


def _flatten(node: Node) -> list[str]:
    if isinstance(node, str):
        return [node]
    return [token for child in node for token in _flatten(child)]


def _as_list(node: Node | None) -> list[Node]:
    """An argument as a node list; a missing argument (LaTeX cut short) is empty."""
    if node is None:
        return []
    return node if isinstance(node, list) else [node]


def _unwrap(node: Node) -> Node:
    """``{{x}}`` → ``x``: single-element groups are only grouping."""
    while isinstance(node, list) and len(node) == 1:
        node = node[0]
    return node


def _take_argument(nodes: list[Node], index: int) -> tuple[Node | None, int]:
    """The argument starting at ``index`` (a group or one token) and the index after it."""
    if index < len(nodes):
        return nodes[index], index + 1
    return None, index


def _is_letter(node: Node) -> bool:
    return isinstance(node, str) and len(node) == 1 and node.isascii() and node.isalpha()


def _word(node: Node) -> str | None:
    """The text of a group made only of letters, digits and hyphens (``N L L - L N`` → ``NLL-LN``)."""
    tokens = _flatten(node)
    if tokens and all(re.fullmatch(r"[A-Za-z0-9\-]+", token) for token in tokens):
        return "".join(tokens).strip("-") or None
    return None


# --------------------------------------------------------------------------------------------- normalising


def normalise_latex(latex: str) -> str:
    """Display-grade, compact LaTeX of one display equation (array rows stay ``\\\\``-separated)."""
    text = latex.strip()
    for delimiter in ("$$", "$", r"\[", r"\]", r"\(", r"\)"):
        if text.startswith(delimiter):
            text = text[len(delimiter):]
        if text.endswith(delimiter):
            text = text[: -len(delimiter)]
    for source, target in {**UNICODE_GREEK, **UNICODE_SYMBOLS}.items():
        text = text.replace(source, f" {target} ")
    text = _TRAILING_NUMBER.sub("", text.strip())
    text = re.sub(r"(\\cdot\s*){3}", r"\\cdots ", text)
    text = re.sub(r"\\operatorname\s*\*", r"\\operatorname*", text)
    tree = _clean(build_tree(tokenize(text)))
    rows = _split_rows(tree)
    return r" \\ ".join(emit(row) for row in rows if row)


def _clean(nodes: list[Node], top_level: bool = True) -> list[Node]:
    """One pass over a node list: drop decoration, unwrap fonts, join words, tidy scripts and relations."""
    out: list[Node] = []
    base: Node | None = None  # the name the next script attaches to, for the transpose convention
    bold_base = False
    index = 0
    while index < len(nodes):
        node = nodes[index]
        index += 1
        if isinstance(node, list):
            cleaned = _clean(node, top_level=False)
            follows_script = index < len(nodes) and nodes[index] in ("^", "_")
            if follows_script and len(cleaned) != 1:
                out.append(cleaned)
            else:
                out.extend(cleaned)
            base = out[-1] if out else None
            continue
        node = _VARIANTS.get(node, node)
        if node in _DROP_WITH_ARGUMENT:
            _, index = _take_argument(nodes, index)
            continue
        if node in _DELIMITER_SIZERS:
            if index < len(nodes) and nodes[index] == ".":
                index += 1
            continue
        if node in _DROPPED:
            continue
        if node == r"\cal":
            argument, index = _take_argument(nodes, index)
            out.extend([r"\mathcal", _clean(_as_list(argument), False)])
            continue
        if node in _FONT_WRAPPERS:
            argument, index = _take_argument(nodes, index)
            content = _clean(_as_list(argument), False) if argument is not None else []
            out.extend(content)
            base, bold_base = (content[-1] if content else None), True
            continue
        if node in _TEXT_WRAPPERS or node in _OPERATOR_WRAPPERS:
            argument, index = _take_argument(nodes, index)
            content = _text_wrapper(node, argument)
            if content[:1] == ["^"]:  # MinerU's ``\mathsf{^{T}}``: a script that lost its base
                out.extend(_script("^", content[1] if len(content) > 1 else None, base, bold_base))
            else:
                out.extend(content)
            continue
        if node in _ACCENTS or node in _STYLED_LETTERS:
            argument, index = _take_argument(nodes, index)
            out.extend([node, _unwrap_group(_clean(_as_list(argument), False))])
            continue
        if node in (r"\overset", r"\stackrel", r"\underset"):
            over, index = _take_argument(nodes, index)
            under, index = _take_argument(nodes, index)
            out.extend(_overset(node, over, under))
            continue
        if node in (r"\underbrace", r"\overbrace"):
            argument, index = _take_argument(nodes, index)
            out.extend(_clean(_as_list(argument), False))
            if index < len(nodes) and nodes[index] in ("_", "^"):
                index += 2
            continue
        if node in (r"\frac", r"\binom"):
            first, index = _take_argument(nodes, index)
            second, index = _take_argument(nodes, index)
            out.extend([node, _clean(_as_list(first), False), _clean(_as_list(second), False)])
            continue
        if node == r"\sqrt":
            out.append(node)
            if index < len(nodes) and nodes[index] == "[":
                closing = nodes.index("]", index) if "]" in nodes[index:] else index
                out.extend(["[", *_clean(nodes[index + 1: closing], False), "]"])
                index = closing + 1
            argument, index = _take_argument(nodes, index)
            out.append(_clean(_as_list(argument), False))
            continue
        if node == r"\begin":
            environment, index = _take_argument(nodes, index)
            index = _environment(nodes, index, _word(environment or "") or "", out)
            continue
        if node in ("^", "_"):
            argument, index = _take_argument(nodes, index)
            out.extend(_script(node, argument, base, bold_base))
            continue
        out.append(node)
        base, bold_base = node, False
    return _tidy(out, top_level)


def _unwrap_group(nodes: list[Node]) -> list[Node]:
    return [_unwrap(nodes)] if len(nodes) == 1 else nodes


def _text_wrapper(command: str, argument: Node | None) -> list[Node]:
    """``\\mathrm{l n}`` → ``\\ln``; ``\\mathrm{N L L}`` → ``\\mathrm{NLL}``; other content is kept cleaned."""
    if argument is None:
        return []
    cleaned = _clean(_as_list(argument), False)
    if cleaned and cleaned[0] == "^":
        return cleaned
    word = _word(cleaned)
    if word is None:
        return cleaned
    if word in FUNCTION_WORDS:
        return [FUNCTION_WORDS[word]]
    wrapper = r"\operatorname" if command in _OPERATOR_WRAPPERS else r"\mathrm"
    return [wrapper, [word]]


def _overset(command: str, over: Node | None, base: Node | None) -> list[Node]:
    """``\\overset{def}{=}`` → ``:=``; ``\\overset{(a)}{\\leq}`` → ``\\leq``; anything else is kept."""
    cleaned_base = _clean(_as_list(base), False) if base is not None else []
    cleaned_over = _clean(_as_list(over), False) if over is not None else []
    if len(cleaned_base) == 1 and isinstance(cleaned_base[0], str) and cleaned_base[0] in RELATIONS:
        over_text = "".join(_flatten(cleaned_over))
        if cleaned_base[0] == "=" and ("def" in over_text or over_text in (r"\triangle", r"\Delta")):
            return [":="]
        return cleaned_base
    return [command, cleaned_over, cleaned_base]


def _script(kind: str, argument: Node | None, base: Node | None, bold_base: bool) -> list[Node]:
    """Primes, transposes and redundant braces in sub/superscripts."""
    cleaned = _clean(_as_list(argument), False) if argument is not None else []
    tokens = _flatten(cleaned)
    if kind == "^" and tokens and all(token in (r"\prime", "'") for token in tokens):
        return ["'" * len(tokens)]
    if kind == "^" and tokens in ([r"\top"], ["T"], [r"\mathrm", "T"], [r"\mathsf", "T"]):
        capital_base = _is_letter(base) and base.isupper()
        if tokens != ["T"] or capital_base or bold_base:
            return ["^", [r"\top"]]
    return [kind, _unwrap_group(cleaned) if len(cleaned) == 1 else cleaned]


def _environment(nodes: list[Node], index: int, name: str, out: list[Node]) -> int:
    """Unwrap alignment environments into ``\\\\``-separated rows; keep matrices and cases as environments."""
    depth, end = 1, index
    while end < len(nodes):
        if nodes[end] == r"\begin":
            depth += 1
        elif nodes[end] == r"\end":
            depth -= 1
            if depth == 0:
                break
        end += 1
    body = nodes[index:end]
    after = end + 2 if end < len(nodes) else end
    if name == "array" and body and isinstance(body[0], list):
        body = body[1:]  # the column specification
    has_relation = any(token in RELATIONS or token == ":=" for token in _flatten(body))
    if name in _ALIGN_ENVIRONMENTS and has_relation:
        cleaned = _clean(body, top_level=False)
        out.extend(node for node in cleaned if node != "&")
    else:
        out.extend([r"\begin", [name if name not in _ALIGN_ENVIRONMENTS else "matrix"], *_clean(body, False),
                    r"\end", [name if name not in _ALIGN_ENVIRONMENTS else "matrix"]])
    return after


def _tidy(nodes: list[Node], top_level: bool) -> list[Node]:
    """Join ``:`` ``=`` into ``:=``, three dots into ``\\ldots``, ``\\cdots`` runs; drop row-final punctuation."""
    out: list[Node] = []
    for node in nodes:
        if node == "=" and out and out[-1] == ":":
            out[-1] = ":="
        elif node == ":" and out and out[-1] == "=":
            out[-1] = "=:"
        elif node == "." and len(out) >= 2 and out[-1] == "." and out[-2] == ".":
            out[-2:] = [r"\ldots"]
        elif node == "*" and len(out) >= 2 and out[-1] == "*" and out[-2] == "*":
            out[-2:] = [r"\cdots"]
        elif node == r"\ldots" and out and out[-1] == r"\ldots":
            continue
        else:
            out.append(node)
    if top_level:
        out = _strip_row_punctuation(out)
    return out


def _strip_row_punctuation(nodes: list[Node]) -> list[Node]:
    out: list[Node] = []
    for node in [*nodes, r"\\"]:
        if node == r"\\":
            while out and out[-1] in (",", ".", ";"):
                out.pop()
        out.append(node)
    return out[:-1]


def _split_rows(nodes: list[Node]) -> list[list[Node]]:
    rows: list[list[Node]] = [[]]
    depth = 0  # inside a kept environment (a matrix) rows and cells belong to it
    for node in nodes:
        depth += node == r"\begin"
        depth -= node == r"\end"
        if node in (r"\\", "&") and depth == 0:  # a top-level '&' outside any environment separates equations
            rows.append([])
        else:
            rows[-1].append(node)
    return [_strip_row_punctuation(row) for row in rows]


# -------------------------------------------------------------------------------------- splitting equations


def split_equations(latex: str) -> list[str]:
    """Rows of a (normalised) display equation as separate equations; continuation rows (``= …``, or ``+ …``
    after an equation) join the row before."""
    normalised = normalise_latex(latex)
    equations: list[str] = []
    for row in normalised.split(r" \\ "):
        row = row.strip()
        if not row:
            continue
        tokens = tokenize(row)
        starts_with_relation = _relation_at(build_tree(tokens), 0) is not None
        continues_sum = tokens[0] in ("+", "-") and bool(equations) and bool(split_relations(equations[-1])[1])
        if (starts_with_relation or continues_sum) and equations:
            equations[-1] = normalise_latex(f"{equations[-1]} {row}")
        else:
            equations.append(row)
    return equations


def _relation_at(nodes: list[Node], index: int) -> str | None:
    node = nodes[index]
    if isinstance(node, str) and node in RELATIONS:
        return node
    return None


def split_relations(latex: str) -> tuple[list[str], list[str]]:
    """Top-level segments and the relations between them: ``a = b \\leq c`` → ([a, b, c], ['=', '<='])."""
    tree = build_tree(tokenize(latex))
    segments: list[list[Node]] = [[]]
    relations: list[str] = []
    depth = 0
    for index, node in enumerate(tree):
        if isinstance(node, str) and node in ("(", "["):
            depth += 1
        elif isinstance(node, str) and node in (")", "]") and depth:
            depth -= 1
        relation = _relation_at(tree, index) if depth == 0 else None
        if relation is not None:
            relations.append(RELATIONS[relation])
            segments.append([])
        else:
            segments[-1].append(node)
    return [emit(segment) for segment in segments], relations


def split_lhs_rhs(latex: str) -> tuple[str | None, str | None, str]:
    """``(lhs, relation, rhs)`` at the first top-level relation; ``(None, None, latex)`` for a bare expression.

    A leading relation (a continuation row such as ``= …``) gives ``lhs=None``; ``rhs`` keeps any further
    relations (``a = b = c`` → ``('a', '=', 'b = c')``).
    """
    normalised = normalise_latex(latex)
    segments, relations = split_relations(normalised)
    if not relations:
        return None, None, normalised
    return (segments[0] or None), relations[0], _rejoin(segments[1:], relations[1:])


def _rejoin(segments: list[str], relations: list[str]) -> str:
    symbols = {value: key for key, value in RELATIONS.items()}
    pieces = [segments[0]]
    for relation, segment in zip(relations, segments[1:]):
        pieces.extend([symbols.get(relation, relation), segment])
    return " ".join(pieces)


# ---------------------------------------------------------------------------------- names and identifiers


def identifier(raw: str) -> str:
    """A Python identifier for a symbol spelled ``raw`` (``d_{k}`` → ``d_k``, ``w_{k+1}`` → ``w_kp1``)."""
    text = raw.replace("\\", "").replace("'", "prime")
    text = text.replace("+", "p").replace("-", "m").replace("*", "star").replace("<", "lt").replace(">", "gt")
    text = re.sub(r"[{}\s]", "", text)
    text = re.sub(r"[^0-9A-Za-z_]+", "_", text)
    text = re.sub(r"_+", "_", text).strip("_")
    if not text:
        return "x"
    return f"v_{text}" if text[0].isdigit() else text


def symbol_name(latex: str) -> str | None:
    """The identifier the formula chain uses for an inline symbol (``$\\lambda$``, ``W_{q}``, ``λ``), or None.

    Lets text mining (parameter descriptions, constants) name symbols exactly as the parsed formulas do.
    """
    normalised = normalise_latex(latex)
    if not normalised:
        return None
    nodes = build_tree(tokenize(normalised))
    atom, end = _read_atom(nodes, 0, frozenset())
    if atom is None or atom.power is not None:
        return None
    if end < len(nodes) and nodes[end] == "(":  # ``p_{x,i}(v)``: the function's name
        try:
            end = _matching_paren(nodes, end) + 1
        except RewriteError:
            return None
    return atom.identifier if end == len(nodes) else None


def symbols_in(latex: str) -> dict[str, str]:
    """``{identifier: LaTeX}`` of every name in an equation, parsed or not (for describing symbols)."""
    found: dict[str, str] = {}

    def walk(nodes: list[Node]) -> None:
        index = 0
        while index < len(nodes):
            node = nodes[index]
            if isinstance(node, list):
                walk(node)
                index += 1
                continue
            atom, end = _read_atom(nodes, index, frozenset())
            if atom is None:
                index += 1
                continue
            if atom.identifier.split("_")[0] not in _NOT_COMPUTABLE_STYLED:  # operators such as E[·], P(·)
                found.setdefault(atom.identifier, atom.latex)
            if atom.power is not None:
                walk(_as_list(atom.power))
            index = end

    walk(build_tree(tokenize(normalise_latex(latex))))
    return found


@dataclass
class _Atom:
    identifier: str
    latex: str
    multi_letter: bool
    subscript_tokens: frozenset[str]
    power: Node | None = None
    transpose: bool = False


def _read_atom(nodes: list[Node], index: int, known_words: frozenset[str]) -> tuple[_Atom | None, int]:
    """A name at ``index`` with its sub/superscripts, or ``(None, index)`` when none starts there."""
    start = index
    node = nodes[index]
    if isinstance(node, list):
        return None, start
    base: str | None = None
    multi_letter = False
    if _is_letter(node):
        run = ""
        probe = index
        while probe < len(nodes) and _is_letter(nodes[probe]):
            run += nodes[probe]
            probe += 1
        base = next((word for word in sorted(known_words, key=len, reverse=True)
                     if len(word) > 1 and run.startswith(word)), None)
        if base is None:
            base = next((word for word in sorted(KNOWN_FUNCTION_WORDS, key=len, reverse=True)
                         if run.startswith(word) and _probe_is(nodes, index + len(word), "(")), node)
        multi_letter = len(base) > 1
        index += len(base)
    elif isinstance(node, str) and node.lstrip("\\") in GREEK and node.startswith("\\"):
        base = node[1:]
        index += 1
    elif node in (r"\mathrm", r"\operatorname") and index + 1 < len(nodes):
        word = _word(nodes[index + 1])
        if word is None:
            return None, start
        base, multi_letter = word, len(word) > 1
        index += 2
    elif node in _STYLED_LETTERS and index + 1 < len(nodes):
        inner = _word(nodes[index + 1])
        if inner is None:
            return None, start
        base = _STYLED_LETTERS[node] + inner
        index += 2
    elif node in _ACCENTS and index + 1 < len(nodes):
        inner_nodes = _as_list(nodes[index + 1])
        inner, inner_end = _read_atom(inner_nodes, 0, known_words) if inner_nodes else (None, 0)
        if inner is None or inner_end != len(inner_nodes):
            return None, start
        base = inner.identifier + _ACCENTS[node]
        multi_letter = inner.multi_letter
        index += 2
    if base is None:
        return None, start
    raw = base
    subscripts: set[str] = set()
    power: Node | None = None
    transpose = False
    name_end = index  # the name's own LaTeX ends here (a transpose or power is not part of it)
    while index < len(nodes) and power is None:
        marker = nodes[index]
        if marker == "'" or (isinstance(marker, str) and set(marker) == {"'"}):
            raw += "prime" * len(marker)
            index += 1
            name_end = index
        elif marker == "_" and index + 1 < len(nodes):
            tokens = _subscript_tokens(nodes[index + 1])
            subscripts.update(tokens)
            raw += "_{" + "".join(_script_text(nodes[index + 1])) + "}"
            index += 2
            name_end = index
        elif marker == "^" and index + 1 < len(nodes):
            kind = _superscript_kind(nodes[index + 1], has_subscript=bool(subscripts), base=base)
            if kind == "transpose":
                transpose = True
            elif kind == "power":
                power = nodes[index + 1]
            else:
                suffix = "".join(_script_text(nodes[index + 1])) if kind == "index" else kind
                raw += "^{" + suffix + "}"
                subscripts.update(_subscript_tokens(nodes[index + 1]) if kind == "index" else ())
                name_end = index + 2
            index += 2
        else:
            break
    source = emit(nodes[start:name_end])
    return _Atom(identifier(raw.replace("^", "_")), source, multi_letter, frozenset(subscripts), power,
                 transpose), index


def _probe_is(nodes: list[Node], index: int, token: str) -> bool:
    return index < len(nodes) and nodes[index] == token


def _script_text(node: Node) -> list[str]:
    """Flatten a script into name pieces: Greek commands by name, styled letters with their prefix."""
    pieces: list[str] = []
    for token in _flatten(node):
        if token in _STYLED_LETTERS:
            pieces.append(_STYLED_LETTERS[token])
        elif token in (r"\mathrm", r"\operatorname") or token in _ACCENTS:
            continue
        elif token.startswith("\\"):
            pieces.append(token[1:] if token[1:].isalpha() else "")
        else:
            pieces.append(token)
    return [piece for piece in pieces if piece]


def _subscript_tokens(node: Node) -> set[str]:
    """The index names in a script (``k``, ``i`` in ``{x,i}``; ``t`` in ``{t_{k}}``) for the summation check."""
    text = "".join(piece if piece.isalnum() else " " for piece in _script_text(node))
    names: set[str] = set()
    for token in text.split():
        if token.isdigit():
            continue
        names.add(token)
        if token.isalpha() and len(token) <= 3 and token.islower():
            names.update(token)
    return names


def _superscript_kind(node: Node, *, has_subscript: bool, base: str) -> str:
    """Decide what a superscript means: ``transpose``, ``star``, ``dagger``, ``index`` or ``power``."""
    tokens = _flatten(node)
    text = "".join(_script_text(node))
    if tokens == [r"\top"]:
        return "transpose"
    if tokens in (["*"], [r"\ast"], [r"\star"]):
        return "star"
    if tokens == [r"\dagger"]:
        return "dagger"
    if tokens and (tokens[0] == "(" and tokens[-1] == ")" or tokens[0] in (r"\mathrm", r"\operatorname")):
        return "index"
    if _DIGITS.match(text) or re.fullmatch(r"\\frac\{?\d+\}?\{?\d+\}?", text) or text in ("-1", "2", "3"):
        return "power"
    if len(tokens) == 1 and _is_letter(tokens[0]) and tokens[0].isupper():
        return "index"
    if has_subscript and re.fullmatch(r"[A-Za-z]{1,3}([+\-]\d)?", text) and base != "e":
        return "index"
    return "power"


# ------------------------------------------------------------------------------------ not-computable scan


def not_computable_reason(latex: str) -> str | None:
    """Why a (normalised) equation is not a scalar computation, or None when nothing says so."""
    tree = build_tree(tokenize(latex))
    return _scan(tree)


def _scan(nodes: list[Node]) -> str | None:
    for index, node in enumerate(nodes):
        if isinstance(node, list):
            reason = _scan(node)
            if reason:
                return reason
            continue
        following = nodes[index + 1] if index + 1 < len(nodes) else None
        if node in _NOT_COMPUTABLE_COMMANDS:
            return _NOT_COMPUTABLE_COMMANDS[node]
        if node in _STYLED_LETTERS and following is not None:
            key = _STYLED_LETTERS[node] + (_word(following) or "")
            if key in _NOT_COMPUTABLE_STYLED:
                return _NOT_COMPUTABLE_STYLED[key]
        if node in (r"\mathrm", r"\operatorname") and following is not None:
            word = _word(following) or ""
            if word in _NOT_COMPUTABLE_WORDS:
                return _NOT_COMPUTABLE_WORDS[word]
        if node in (r"\max", r"\min") and following == "_":
            return "optimisation over a set (min/max with a subscript)"
        if node in (r"\sum", r"\prod"):
            reason = _summation_reason(nodes, index)
            if reason:
                return reason
        if node == r"\begin":
            environment = _word(following or "") or ""
            return "matrix" if environment != "cases" else "piecewise definition (cases)"
        if node == r"\{" and not (index and nodes[index - 1] in (r"\max", r"\min")):
            return "set notation"
        if node == "[" and index and _is_letter(nodes[index - 1]):
            return "array indexing"
        if node == "[" and _bracket_has_comma(nodes, index):
            return "list, interval or commutator notation"
        if node in (":", r"\colon"):
            return "mapping or type signature (':')"
    letters = "".join(node for node in nodes if _is_letter(node))
    for word in ("softmax", "argmin", "argmax", "Pr", "Tr"):
        if word in letters and _letters_spell(nodes, word):
            return _NOT_COMPUTABLE_WORDS.get(word, f"{word} notation")
    return None


def _bracket_has_comma(nodes: list[Node], index: int) -> bool:
    depth = 0
    for node in nodes[index:]:
        if node in ("(", "["):
            depth += 1
        elif node in (")", "]"):
            depth -= 1
            if depth == 0:
                return False
        elif node == "," and depth == 1:
            return True
    return False


def _letters_spell(nodes: list[Node], word: str) -> bool:
    for start in range(len(nodes) - len(word) + 1):
        if all(nodes[start + offset] == letter for offset, letter in enumerate(word)):
            return True
    return False


def _summation_reason(nodes: list[Node], index: int) -> str | None:
    lower = upper = None
    probe = index + 1
    while probe + 1 < len(nodes) and nodes[probe] in ("_", "^"):
        if nodes[probe] == "_":
            lower = nodes[probe + 1]
        else:
            upper = nodes[probe + 1]
        probe += 2
    lower_tokens = _flatten(lower) if lower is not None else []
    if "=" not in lower_tokens:
        return "sum or product over an unspecified index set"
    if upper is None:
        return "sum or product without an upper bound"
    after_equals = lower_tokens[lower_tokens.index("=") + 1:]
    if any(token in RELATIONS or token in ("|", r"\mid") for token in after_equals):
        return "sum or product with a condition on the index"
    return None


# ---------------------------------------------------------------------------------------------- rewriting


class _Rewriter:
    """Turns one side of a normalised equation into LaTeX whose every name is a placeholder ``Z_{n}``."""

    def __init__(self, known_symbols: frozenset[str], known_words: frozenset[str]):
        self.known_symbols = known_symbols
        self.known_words = known_words
        self.placeholders: dict[str, str] = {}
        self.symbols: dict[str, str] = {}
        self.indices: dict[str, frozenset[str]] = {}

    def placeholder(self, name: str, latex: str = "") -> str:
        if name not in self.placeholders:
            self.placeholders[name] = f"Z_{{{len(self.placeholders) + 1}}}"
        if latex:
            self.symbols.setdefault(name, latex)
        return self.placeholders[name]

    def rewrite(self, nodes: list[Node], *, lhs: bool = False) -> str:
        pieces: list[str] = []
        index = 0
        while index < len(nodes):
            index = self._step(nodes, index, pieces, lhs=lhs and index == 0)
        return " ".join(piece for piece in pieces if piece)

    def _step(self, nodes: list[Node], index: int, pieces: list[str], *, lhs: bool) -> int:
        node = nodes[index]
        if isinstance(node, list):
            pieces.append("(" + self.rewrite(node) + ")")
            return index + 1
        if node in (r"\frac", r"\binom"):
            first, index = _take_argument(nodes, index + 1)
            second, index = _take_argument(nodes, index)
            pieces.append(f"{node}{{{self.rewrite(_as_list(first))}}}{{{self.rewrite(_as_list(second))}}}")
            return index
        if node == r"\sqrt":
            index += 1
            degree = ""
            if index < len(nodes) and nodes[index] == "[":
                if "]" not in nodes[index:]:
                    raise RewriteError("unclosed root degree [")
                closing = nodes.index("]", index)
                degree = "[" + self.rewrite(nodes[index + 1: closing]) + "]"
                index = closing + 1
            argument, index = _take_argument(nodes, index)
            pieces.append(rf"\sqrt{degree}{{{self.rewrite(_as_list(argument))}}}")
            return index
        if node in (r"\sum", r"\prod"):
            return self._summation(nodes, index, pieces)
        if node in (r"\log", r"\ln", r"\exp", r"\sin", r"\cos", r"\tan", r"\sinh", r"\cosh", r"\tanh",
                    r"\arcsin", r"\arccos", r"\arctan", r"\max", r"\min"):
            return self._function_command(nodes, index, pieces)
        if node in (r"\lfloor", r"\rfloor", r"\lceil", r"\rceil", r"\infty", "+", "-", "*", "/", "(", ")", "!",
                    ",", "|"):
            pieces.append(node)
            return index + 1
        if node == ";":
            pieces.append(",")
            return index + 1
        if node in ("[", "]"):
            pieces.append("(" if node == "[" else ")")
            return index + 1
        if re.fullmatch(r"[0-9.]", node):
            pieces.append(node)
            return index + 1
        if node in ("^", "_"):
            argument, after = _take_argument(nodes, index + 1)
            if node == "_":
                raise RewriteError("subscript on an expression (a sequence or set builder)", non_computable=True)
            if _flatten(argument) == [r"\top"] and pieces:
                start = _opening_piece(pieces) if pieces[-1] == ")" else len(pieces) - 1
                pieces[start:] = [f"{self.placeholder('transpose')}({' '.join(pieces[start:])})"]
            else:
                pieces.append("^{" + self.rewrite(_as_list(argument)) + "}")
            return after
        atom, after = _read_atom(nodes, index, self.known_words)
        if atom is None:
            reason = _NOT_COMPUTABLE_COMMANDS.get(node)
            if reason:
                raise RewriteError(reason, non_computable=True)
            raise RewriteError(f"unsupported LaTeX {node!r}")
        return self._atom(atom, nodes, after, pieces, lhs=lhs)

    def _atom(self, atom: _Atom, nodes: list[Node], index: int, pieces: list[str], *, lhs: bool) -> int:
        name = atom.identifier
        self.indices[name] = atom.subscript_tokens
        applied = index < len(nodes) and nodes[index] == "(" and atom.power is None
        if applied and self._is_application(atom, nodes, index, lhs=lhs):
            closing = _matching_paren(nodes, index)
            arguments = self.rewrite(nodes[index + 1: closing])
            text = f"{self.placeholder(name, atom.latex)}({arguments})"
            index = closing + 1
        else:
            text = self.placeholder(name, atom.latex)
            if applied:
                text += r" \cdot"
        if atom.transpose:
            text = f"{self.placeholder('transpose')}({text})"
        if atom.power is not None:
            text = f"{{{text}}}^{{{self.rewrite(_as_list(atom.power))}}}"
        pieces.append(text)
        return index

    def _is_application(self, atom: _Atom, nodes: list[Node], index: int, *, lhs: bool) -> bool:
        name = atom.identifier
        if name in self.known_symbols and not atom.multi_letter:
            return False
        if lhs or atom.multi_letter or name.split("_")[0] in FUNCTION_LETTERS:
            return True
        inside = nodes[index + 1: _matching_paren(nodes, index)]
        argument, end = _read_atom(inside, 0, self.known_words) if inside else (None, 0)
        if argument is not None and end == len(inside):
            return True  # ``v_{H}(\bar{u})``: a name applied to one name; products are written with operators
        depth = 0
        for node in inside:
            depth += node in ("(", "[")
            depth -= node in (")", "]")
            if node in (",", ";") and depth == 0:
                return True
        return False

    def _summation(self, nodes: list[Node], index: int, pieces: list[str]) -> int:
        command = nodes[index]
        index += 1
        lower = upper = None
        while index + 1 < len(nodes) and nodes[index] in ("_", "^"):
            if nodes[index] == "_":
                lower = _as_list(nodes[index + 1])
            else:
                upper = _as_list(nodes[index + 1])
            index += 2
        if lower is None or "=" not in lower or upper is None:
            raise RewriteError("sum or product over an unspecified index set", non_computable=True)
        equals = lower.index("=")
        variable = self.rewrite(lower[:equals])
        start = self.rewrite(lower[equals + 1:])
        pieces.append(f"{command}_{{{variable}={start}}}^{{{self.rewrite(upper)}}}")
        return index

    def _function_command(self, nodes: list[Node], index: int, pieces: list[str]) -> int:
        command = nodes[index]
        index += 1
        text = command
        if index + 1 < len(nodes) and nodes[index] == "_" and command == r"\log":
            text += "_{" + self.rewrite(_as_list(nodes[index + 1])) + "}"
            index += 2
        if index + 1 < len(nodes) and nodes[index] == "^":
            text += "^{" + self.rewrite(_as_list(nodes[index + 1])) + "}"
            index += 2
        if command in (r"\max", r"\min") and index < len(nodes) and nodes[index] == r"\{":
            closing = nodes.index(r"\}", index) if r"\}" in nodes[index:] else len(nodes)
            text += "(" + self.rewrite(nodes[index + 1: closing]) + ")"
            index = closing + 1
        pieces.append(text)
        return index


def _opening_piece(pieces: list[str]) -> int:
    """Index of the ``(`` piece that the final ``)`` piece closes."""
    depth = 0
    for position in range(len(pieces) - 1, -1, -1):
        depth += pieces[position] == ")"
        depth -= pieces[position] == "("
        if depth == 0:
            return position
    raise RewriteError("unbalanced parentheses")


def _matching_paren(nodes: list[Node], index: int) -> int:
    depth = 0
    for position in range(index, len(nodes)):
        if nodes[position] == "(":
            depth += 1
        elif nodes[position] == ")":
            depth -= 1
            if depth == 0:
                return position
    raise RewriteError("unbalanced parentheses")


# --------------------------------------------------------------------------------------------- converting


_DIRECT_COMMANDS = frozenset(f"\\{name}" for name in GREEK - {"ell", "hbar", "digamma"}) | frozenset(
    r"\frac \sqrt \log \ln \exp \sin \cos \tan \sinh \cosh \tanh \infty \binom \lfloor \rfloor \lceil \rceil "
    r"\sum \prod".split()
)


def _direct_parse_allowed(latex: str, known_words: frozenset[str]) -> str | None:
    """Why sympy's own reading of this LaTeX might differ from the conventions above (None = plain enough)."""
    tokens = tokenize(latex)
    for token in tokens:
        if token.startswith("\\") and token not in _DIRECT_COMMANDS:
            return f"uses {token}"
    tree = build_tree(tokens)
    return _direct_tree_reason(tree, known_words)


def _direct_tree_reason(nodes: list[Node], known_words: frozenset[str]) -> str | None:
    for index, node in enumerate(nodes):
        previous = nodes[index - 1] if index else None
        if isinstance(node, list):
            reason = _direct_tree_reason(node, known_words)
            if reason:
                return reason
            continue
        if node == "(" and previous is not None and (
                _is_letter(previous) or isinstance(previous, list) or previous == "'"
                or (isinstance(previous, str) and previous.lstrip("\\") in GREEK)):
            return "a name followed by '(' (function or product?)"
        if node == "^" and index + 1 < len(nodes):
            exponent = "".join(_flatten(nodes[index + 1]))
            if not _DIGITS.match(exponent) and previous != "e":
                return "a symbolic superscript (power or index?)"
        if node == "_" and index + 1 < len(nodes):
            script = _flatten(nodes[index + 1])
            if len(script) != 1 and not _DIGITS.match("".join(script)):
                return "a compound subscript"
        if node in ("[", r"\{", r"\|", ";"):
            return f"uses {node}"
    letters = "".join(node if _is_letter(node) else " " for node in nodes)
    for word in list(FUNCTION_WORDS) + list(_SCALAR_FUNCTIONS) + sorted(known_words):
        if len(word) > 1 and word in letters:
            return f"letters spelling {word!r}"
    return None


def to_sympy(latex: str, known_symbols: Iterable[str] | None = None,
             vectors: Iterable[str] | None = None) -> ConversionResult:
    """Convert one display equation (or expression) to sympy, recording the step that worked or why none did.

    ``known_symbols`` are parameter names (identifiers or LaTeX) known from the context; they resolve
    multi-letter names (``MI``) and products written like applications (``c(a+b)``). ``vectors`` are the base
    names written as vectors (:func:`vector_symbols` of the original LaTeX, which normalisation unbolds); by
    default they are read from ``latex`` itself.
    """
    normalised = normalise_latex(latex)
    result = ConversionResult(latex=latex, normalised=normalised, status="failed")
    if not normalised:
        result.reason = "empty equation"
        return result
    if r" \\ " in normalised:
        parts = split_equations(normalised)
        if len(parts) > 1:
            result.reason = f"contains {len(parts)} equations; convert each from split_equations()"
            return result
        normalised = result.normalised = parts[0]
    known = frozenset(filter(None, (_known_name(symbol) for symbol in (known_symbols or ()))))
    known_words = frozenset(name.split("_")[0] for name in known if len(name.split("_")[0]) > 1)
    result.label, normalised = _strip_label(normalised)
    segments, relations = split_relations(normalised)
    reason = not_computable_reason(normalised)
    if relations and not segments[0]:
        result.notes.append("continuation of a previous equation (starts with a relation)")
        segments, relations = segments[1:], relations[1:]
    sides = _convert_sides(segments, relations, known, known_words, result)
    if sides is None:
        rewrite_reason = next(iter(result.not_computable_sides), None)
        if reason or rewrite_reason:
            result.status, result.reason = "not_computable", reason or rewrite_reason
        else:
            result.reason = next((attempt for attempt in result.attempts if attempt.startswith("rewrite")),
                                 result.attempts[-1])
        return result
    _assemble(result, *sides)
    bases = vector_symbols(latex) if vectors is None else frozenset(vectors)
    vector_reason = _scalar_misreading(result, bases)
    if vector_reason:  # the scalar tree is wrong, not just uncomputable: it must not become a key or a template
        result.expr = result.lhs = result.rhs = None
        result.notes.append(f"no sympy form: {vector_reason}")
        reason = reason or vector_reason
    if reason:
        result.status, result.reason = "not_computable", reason
    elif result.status != "not_computable":
        result.status = "parsed"
    return result


_BOLD_WRAPPERS = frozenset(r"\mathbf \boldsymbol \pmb \bm \mathbfit \mathbold".split())
_ARROWS = frozenset({r"\vec", r"\overrightarrow"})


def vector_symbols(latex: str) -> frozenset[str]:
    """Names the LaTeX writes as vectors or matrices: bold (``\\mathbf{x}``, ``\\boldsymbol``, ``\\bm``) or with an
    arrow (``\\vec{x}``). MinerU sometimes emits an empty ``\\mathbf{ }`` right before the bold letter; the letter
    that follows counts. A name is given by its base letter(s), so ``\\mathbf{e}_{i}`` marks ``e_i`` and ``e_i'``."""
    bases: set[str] = set()

    def walk(nodes: list[Node]) -> None:
        for index, node in enumerate(nodes):
            if isinstance(node, list):
                walk(node)
                continue
            if node not in _BOLD_WRAPPERS and node not in _ARROWS:
                continue
            argument = nodes[index + 1] if index + 1 < len(nodes) else None
            content = [token for token in _flatten(argument) if token.strip()] if argument is not None else []
            if not content and index + 2 < len(nodes):  # ``\mathbf { } e``: the bold letter follows
                content = [token for token in _flatten(nodes[index + 2]) if token.strip()]
            letters = [token.lstrip("\\") for token in content[:1] if _is_letter(token) or
                       token.lstrip("\\") in GREEK]
            for letter in letters:
                bases.add(f"{letter}vec" if node in _ARROWS else letter)

    walk(build_tree(tokenize(latex)))
    return frozenset(bases)


def _is_vector(name: str, bases: frozenset[str]) -> bool:
    return name.split("_")[0].removesuffix("prime") in bases


def _scalar_misreading(result: ConversionResult, bases: frozenset[str]) -> str | None:
    """Why the scalar reading of a parsed formula is wrong, or None.

    Reading every symbol as a number lets sympy cancel what only cancels for numbers: the glide reflection
    ``e − 2 (e·l)/(l·l) l + t`` becomes ``t − e``. So (a) a symbol the formula writes but its evaluated scalar
    tree has lost means the scalar reading is wrong, and (b) a product of two symbols written as vectors is a dot,
    element-wise or outer product, which no scalar template computes.
    """
    if not result.written:
        return None
    written = set().union(*(side.free_symbols for side in result.written))
    kept = set().union(*(side.free_symbols for side in (result.lhs, result.rhs, result.expr) if side is not None))
    vectors = sorted(symbol.name for symbol in written if _is_vector(symbol.name, bases))
    lost = sorted(symbol.name for symbol in written - kept if isinstance(symbol, sympy.Symbol))
    if lost:
        about = (f"{', '.join(vectors)} are written as vectors, so its products are dot products" if vectors
                 else "the formula is not a scalar identity")
        return f"read as scalars it cancels {', '.join(lost)} ({about}); no scalar template"
    for side in result.written:
        for node in sympy.preorder_traversal(side):
            if isinstance(node, sympy.Mul):
                factors = [argument for argument in node.args if any(
                    _is_vector(symbol.name, bases) for symbol in argument.free_symbols)]
                if len(factors) >= 2:
                    names = sorted({symbol.name for factor in factors for symbol in factor.free_symbols
                                    if _is_vector(symbol.name, bases)})
                    return (f"product of vectors {' and '.join(names)} (a dot, element-wise or outer product); "
                            "no scalar template")
            if isinstance(node, sympy.Pow) and any(_is_vector(symbol.name, bases)
                                                   for symbol in node.base.free_symbols):
                return f"power of the vector {node.base}; no scalar template"
    return None


_LEAD_WORDS = frozenset({"where", "with", "and", "s.t.", "st", "then", "hence", "thus"})


def _strip_label(latex: str) -> tuple[str | None, str]:
    """``Model A: y = …`` → (``Model A``, ``y = …``); a leading ``where`` is dropped. Other colons stay."""
    tree = build_tree(tokenize(latex))
    if len(tree) >= 2 and tree[0] == r"\mathrm" and (_word(tree[1]) or "").lower() in _LEAD_WORDS:
        tree = tree[2:]
    colon = next((i for i, node in enumerate(tree) if node in (":", r"\colon")), None)
    if colon is None:
        return None, emit(tree)
    prefix = tree[:colon]
    words = [_word(node) for node in prefix if isinstance(node, list)]
    textual = all(node == r"\mathrm" or isinstance(node, list) or _is_letter(node) for node in prefix)
    remainder = emit(tree[colon + 1:])
    if prefix and textual and any(words) and split_relations(remainder)[1]:
        return " ".join(word for word in words if word), remainder
    return None, emit(tree)


def _known_name(symbol: str) -> str | None:
    if symbol.isidentifier():
        return symbol
    return symbol_name(symbol)


def _convert_sides(segments: list[str], relations: list[str], known: frozenset[str], known_words: frozenset[str],
                   result: ConversionResult) -> tuple[list[sympy.Basic], list[str]] | None:
    """The left side and the first right side (of a chain ``a = b = c``) that converts, with their relations."""
    if not relations:
        expression = _convert_side(segments[0], known, known_words, result, lhs=False)
        return ([expression], []) if expression is not None else None
    lhs = _convert_side(segments[0], known, known_words, result, lhs=True)
    if lhs is None:
        return None
    for position in range(1, len(segments)):
        rhs = _convert_side(segments[position], known, known_words, result, lhs=False)
        if rhs is not None:
            if position > 1:
                result.notes.append(f"used right-hand side {position} of the chain; earlier ones did not convert")
            between = relations[:position]
            relation = next((item for item in between if item not in DEFINING_RELATIONS), between[0])
            return [lhs, rhs], [relation]
    return None


def _convert_side(latex: str, known: frozenset[str], known_words: frozenset[str], result: ConversionResult,
                  *, lhs: bool) -> sympy.Basic | None:
    """One side: direct parse when the LaTeX is plain, else (or on refusal) the placeholder rewrite."""
    if not latex.strip():
        result.attempts.append("empty side of a relation")
        return None
    refusal = _direct_parse_allowed(latex, known_words)
    if refusal is None:
        expected = _atom_identifiers(build_tree(tokenize(latex))) | {"pi", "e"}
        for backend in ("antlr", "lark"):
            expression, error = _parse(latex, backend)
            if expression is not None:
                expression = _from_direct(expression, known, expected, result)
                if expression is not None:
                    result.step = result.step or backend
                    return expression
                error = "produced names that are not plain symbols"
            result.attempts.append(f"{backend}: {error}")
    else:
        result.attempts.append(f"direct parse skipped: {refusal}")
    rewriter = _Rewriter(known, known_words)
    try:
        rewritten = rewriter.rewrite(build_tree(tokenize(latex)), lhs=lhs)
    except RewriteError as error:
        result.attempts.append(f"rewrite: {error}")
        if error.non_computable:
            result.not_computable_sides.append(str(error))
        return None
    except (IndexError, ValueError, RecursionError) as error:  # malformed LaTeX the rules did not foresee
        result.attempts.append(f"rewrite: malformed LaTeX ({type(error).__name__}: {error})")
        return None
    for backend in ("antlr", "lark"):
        expression, error = _parse(rewritten, backend)
        if expression is not None:
            result.step = f"rewrite+{backend}" if result.step in (None, "antlr", "lark") else result.step
            return _from_rewrite(expression, rewriter, known, result)
        result.attempts.append(f"rewrite+{backend}: {error}")
    return None


@lru_cache(maxsize=8192)
def _parse(latex: str, backend: str) -> tuple[sympy.Basic | None, str | None]:
    """sympy's LaTeX parser, memoised: most of the formula stage's time, and a pure function of the text (the same
    LaTeX recurs within a paper, across the rewrite steps and across papers, and sympy's trees are immutable)."""
    from sympy.parsing.latex import parse_latex

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if backend == "antlr":
                expression = parse_latex(latex, strict=True)
            else:
                expression = parse_latex(latex, backend="lark")
    except Exception as error:  # the parsers raise many types (LaTeXParsingError, lark errors, TypeError …)
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        return None, f"{type(error).__name__}: {message[:160]}"
    if not isinstance(expression, sympy.Basic):
        return None, "ambiguous parse"
    return expression, None


def _unevaluated_replace(expression: sympy.Basic, mapping: dict[sympy.Basic, sympy.Basic]) -> sympy.Basic:
    """The parsed tree with our names, as written: ``xreplace`` alone would already cancel ``ab/b`` to ``a``."""
    with sympy.evaluate(False):
        return expression.xreplace(mapping)


def _rebuild(expression: sympy.Basic) -> sympy.Basic:
    """Re-create every node with evaluation on, so equal formulas get equal trees."""
    if expression.is_Atom:
        return expression
    return expression.func(*[_rebuild(argument) for argument in expression.args])


def _constant_for(name: str, known: frozenset[str]) -> sympy.Basic | None:
    if name in known:
        return None
    return {"pi": sympy.pi, "e": sympy.E}.get(name)


def _atom_identifiers(nodes: list[Node]) -> set[str]:
    """Every name the conventions above would read in this LaTeX (a superset is fine: it is a check)."""
    names: set[str] = set()
    for index, node in enumerate(nodes):
        if isinstance(node, list):
            names |= _atom_identifiers(node)
            continue
        atom, _ = _read_atom(nodes, index, frozenset())
        if atom is not None:
            names.add(atom.identifier)
            if atom.power is not None:
                names |= _atom_identifiers(_as_list(atom.power))
    return names


def _from_direct(expression: sympy.Basic, known: frozenset[str], expected: set[str],
                 result: ConversionResult) -> sympy.Basic | None:
    """Accept sympy's reading only if it found exactly the names we would (``d\\theta`` is not ``dtheta``)."""
    mapping: dict[sympy.Basic, sympy.Basic] = {}
    # in name order: a set of symbols iterates in an order that changes with the process's hash seed, and the
    # names recorded here become the formula's parameters, in this order
    for symbol in sorted(expression.free_symbols | _bound_symbols(expression), key=lambda s: str(s.name)):
        raw = str(symbol.name)
        name = identifier(raw)
        if re.search(r"[*()\s]", raw) or name not in expected:
            return None
        match = re.match(r"^[^_]+_\{?(.*?)\}?$", raw)
        result.indices[name] = frozenset({match.group(1)} - {""}) if match and not match.group(1).isdigit() \
            else frozenset()
        result.symbols.setdefault(name, raw if "\\" in raw or "_" in raw else raw)
        mapping[symbol] = _constant_for(name, known) or sympy.Symbol(name)
    result.written.append(_unevaluated_replace(expression, mapping))
    expression = _rebuild(expression.xreplace(mapping))
    return _known_functions(expression)


def _bound_symbols(expression: sympy.Basic) -> set[sympy.Symbol]:
    bound: set[sympy.Symbol] = set()
    for node in sympy.preorder_traversal(expression):
        if isinstance(node, (sympy.Sum, sympy.Product)):
            bound.update(limit[0] for limit in node.limits)
    return bound


def _from_rewrite(expression: sympy.Basic, rewriter: _Rewriter, known: frozenset[str],
                  result: ConversionResult) -> sympy.Basic:
    by_placeholder = {placeholder: name for name, placeholder in rewriter.placeholders.items()}
    mapping: dict[sympy.Basic, sympy.Basic] = {}
    for symbol in expression.free_symbols | _bound_symbols(expression):
        name = by_placeholder.get(str(symbol.name), identifier(str(symbol.name)))
        mapping[symbol] = _constant_for(name, known) or sympy.Symbol(name)
    result.written.append(_unevaluated_replace(expression, mapping))
    expression = expression.xreplace(mapping)

    def named(application: AppliedUndef) -> sympy.Basic:
        name = by_placeholder.get(application.func.__name__, application.func.__name__)
        return (TRANSPOSE if name == "transpose" else sympy.Function(name))(*application.args)

    expression = _rebuild(expression.replace(lambda node: isinstance(node, AppliedUndef), named))
    result.symbols.update({name: latex for name, latex in rewriter.symbols.items() if name != "transpose"})
    result.indices.update(rewriter.indices)
    if TRANSPOSE in {application.func for application in expression.atoms(AppliedUndef)}:
        result.notes.append("transposes are read as identities on scalars")
    return _known_functions(expression)


def _known_functions(expression: sympy.Basic) -> sympy.Basic:
    """``max``/``min`` from the antlr parser and word functions (sigmoid, relu) → sympy functions."""
    def known(node: sympy.Basic) -> bool:
        return isinstance(node, AppliedUndef) and node.func.__name__.lower() in _SCALAR_FUNCTIONS

    def evaluate(application: AppliedUndef) -> sympy.Basic:
        return _SCALAR_FUNCTIONS[application.func.__name__.lower()](*application.args)

    return _rebuild(expression.replace(known, evaluate))


def _assemble(result: ConversionResult, parsed: list[sympy.Basic], relations: list[str]) -> None:
    """The formula's expression: an equation for a definition, a relational for an inequality."""
    if not relations:
        result.rhs = result.expr = parsed[0]
        return
    result.lhs = parsed[0]
    result.relation = relations[0]
    result.rhs = parsed[1]
    if relations[0] in DEFINING_RELATIONS:
        result.expr = sympy.Eq(parsed[0], parsed[1], evaluate=False)
        if relations[0] == "approx":
            result.notes.append("approximation read as an equality")
    elif relations[0] in INEQUALITIES:
        result.expr = INEQUALITIES[relations[0]](parsed[0], parsed[1], evaluate=False)
        result.status, result.reason = "not_computable", "inequality: states a bound, not a value"
    else:  # a mapping, membership or logical relation: its sides parsed, but it states no equation
        result.status, result.reason = "not_computable", f"relation {relations[0]!r} is not a definition"
