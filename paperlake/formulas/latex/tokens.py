"""The vocabulary of the formula chain (which commands are dropped, wrappers, relations, function words, what is not
computable) and its token trees: LaTeX → tokens → nested groups, and back."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Union

import sympy

from paperlake.formulas.latex.symbols import GREEK_LETTERS, GREEK_NAMES, LETTER_VARIANTS, SYMBOLS

Node = Union[str, list["Node"]]

ConversionStatus = Literal["parsed", "not_computable", "failed"]

GREEK = GREEK_NAMES
# The letters equation and context text are read with, from the shared tables, every variant letter read as its
# letter (ε and ϵ are one ``\\epsilon`` parameter). Not yet the Greek capitals that print as Latin ones, nor the
# look-alikes µ (micro) and ∆ (increment): with ∆ the parameter describer reads "W0 represent the pre-trained
# weight, ∆Wup …" as defining Delta (checked on the sample's equations: the only change it makes).
_TEXT_LETTERS = "αβγδεϵζηθικλμνξπρστυφϕχψωΓΔΘΛΞΠΣΦΨΩℓℏ"
UNICODE_GREEK = {
    char: LETTER_VARIANTS.get(command, command)
    for char, command in ((c, GREEK_LETTERS.get(c) or SYMBOLS[c][0]) for c in _TEXT_LETTERS)
}
# The symbols equation text is rewritten from before it is read (a prime is an apostrophe here, as in
# ``\\theta'``); everything else as the shared table writes it.
UNICODE_SYMBOLS = {char: "'" if char == "′" else SYMBOLS[char][0] for char in "−–×·⋅≤≥≠≈∈∑∏√∞′⊤…⋯∗"}
_VARIANTS = {
    **LETTER_VARIANTS,
    r"\dfrac": r"\frac",
    r"\tfrac": r"\frac",
    r"\le": r"\leq",
    r"\ge": r"\geq",
    r"\ne": r"\neq",
    r"\leqslant": r"\leq",
    r"\geqslant": r"\geq",
    r"\lt": "<",
    r"\gt": ">",
    r"\coloneqq": ":=",
    r"\triangleq": ":=",
    r"\doteq": ":=",
    r"\eqqcolon": "=:",
    r"\rightarrow": r"\to",
    r"\intercal": r"\top",
    r"\vert": "|",
    r"\lvert": "|",
    r"\rvert": "|",
    r"\Vert": r"\|",
    r"\lVert": r"\|",
    r"\rVert": r"\|",
    r"\lbrace": r"\{",
    r"\rbrace": r"\}",
    r"\lbrack": "[",
    r"\rbrack": "]",
    r"\dots": r"\ldots",
    r"\dotsc": r"\ldots",
    r"\dotsb": r"\ldots",
    r"\dotsm": r"\ldots",
    r"\widehat": r"\hat",
    r"\widetilde": r"\tilde",
    r"\overline": r"\bar",
    r"\overrightarrow": r"\vec",
    r"\ast": "*",
    r"\star": "*",
    r"\cdot": "*",
    r"\times": "*",
    r"\div": "/",
    r"\land": r"\wedge",
    r"\lor": r"\vee",
    r"\lnot": r"\neg",
    r"\gets": r"\leftarrow",
    r"\implies": r"\Rightarrow",
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
_ACCENTS = {
    r"\hat": "hat",
    r"\tilde": "tilde",
    r"\bar": "bar",
    r"\vec": "vec",
    r"\dot": "dot",
    r"\ddot": "ddot",
    r"\check": "check",
    r"\breve": "breve",
    r"\acute": "acute",
    r"\grave": "grave",
}
FUNCTION_WORDS = {
    "log": r"\log",
    "ln": r"\ln",
    "exp": r"\exp",
    "sin": r"\sin",
    "cos": r"\cos",
    "tan": r"\tan",
    "sinh": r"\sinh",
    "cosh": r"\cosh",
    "tanh": r"\tanh",
    "max": r"\max",
    "min": r"\min",
    "det": r"\det",
    "sup": r"\sup",
    "inf": r"\inf",
    "lim": r"\lim",
    "arg": r"\arg",
    "Pr": r"\Pr",
}
_ALIGN_ENVIRONMENTS = frozenset(
    "array aligned align align* alignat alignat* alignedat gathered gather gather* split eqnarray eqnarray* "
    "multline multline* equation equation* subequations".split()
)
RELATIONS = {
    "=": "=",
    ":=": ":=",
    "=:": ":=",
    r"\equiv": ":=",
    r"\approx": "approx",
    r"\simeq": "approx",
    r"\leq": "<=",
    r"\geq": ">=",
    "<": "<",
    ">": ">",
    r"\neq": "!=",
    r"\propto": "propto",
    r"\sim": "sim",
    r"\ll": "<<",
    r"\gg": ">>",
    r"\iff": "iff",
    r"\Leftrightarrow": "iff",
    r"\Rightarrow": "implies",
    r"\to": "to",
    r"\mapsto": "mapsto",
    r"\longrightarrow": "to",
    r"\in": "in",
    r"\subset": "subset",
    r"\subseteq": "subset",
    r"\vdash": "entails",
    r"\models": "entails",
    r"\cong": "approx",
}
DEFINING_RELATIONS = frozenset({"=", ":=", "approx"})
INEQUALITIES = {"<=": sympy.LessThan, ">=": sympy.GreaterThan, "<": sympy.StrictLessThan, ">": sympy.StrictGreaterThan}

# Commands whose meaning puts a formula outside scalar computation, with the reason we record.
_NOT_COMPUTABLE_COMMANDS = {
    r"\int": "integral",
    r"\oint": "integral",
    r"\iint": "integral",
    r"\nabla": "gradient",
    r"\partial": "partial derivative",
    r"\langle": "inner product or bra-ket",
    r"\rangle": "inner product or bra-ket",
    r"\|": "vector norm",
    r"\forall": "logic (quantifier)",
    r"\exists": "logic (quantifier)",
    r"\vdash": "logic (entailment)",
    r"\models": "logic (entailment)",
    r"\wedge": "logic (conjunction)",
    r"\vee": "logic (disjunction)",
    r"\neg": "logic (negation)",
    r"\iff": "logic (equivalence)",
    r"\Leftrightarrow": "logic (equivalence)",
    r"\Rightarrow": "logic (implication)",
    r"\to": "mapping",
    r"\mapsto": "mapping",
    r"\longrightarrow": "mapping",
    r"\leftarrow": "assignment arrow",
    r"\in": "set membership",
    r"\notin": "set membership",
    r"\subset": "set notation",
    r"\subseteq": "set notation",
    r"\cup": "set notation",
    r"\cap": "set notation",
    r"\setminus": "set notation",
    r"\emptyset": "set notation",
    r"\arg": "optimisation (argmin/argmax)",
    r"\sup": "supremum",
    r"\inf": "infimum",
    r"\lim": "limit",
    r"\Pr": "probability notation",
    r"\sim": "distribution notation",
    r"\mid": "conditional notation",
    r"\ldots": "ellipsis (a pattern, not an expression)",
    r"\cdots": "ellipsis (a pattern, not an expression)",
    r"\vdots": "ellipsis (a pattern, not an expression)",
    r"\ddots": "ellipsis (a pattern, not an expression)",
    r"\#": "counting notation",
    r"\propto": "proportionality",
    r"\otimes": "tensor product",
    r"\odot": "element-wise (Hadamard) product of vectors or matrices",
    r"\oplus": "direct sum",
    r"\circ": "function composition",
    r"\dagger": "conjugate transpose (operators)",
}
_NOT_COMPUTABLE_WORDS = {
    "argmin": "optimisation (argmin/argmax)",
    "argmax": "optimisation (argmin/argmax)",
    "Pr": "probability notation",
    "Cov": "covariance of random variables",
    "Var": "variance of random variables",
    "tr": "matrix trace",
    "Tr": "matrix trace",
    "trace": "matrix trace",
    "diag": "matrix operation",
    "proj": "projection operator",
    "softmax": "vector function (softmax)",
    "Reshape": "tensor operation",
}
_NOT_COMPUTABLE_STYLED = {
    "bbE": "expectation",
    "bbP": "probability notation",
    "bb1": "indicator function",
    "bbR": "set notation",
    "bbN": "set notation",
    "bbZ": "set notation",
    "calO": "asymptotic notation",
}

KNOWN_FUNCTION_WORDS = frozenset(FUNCTION_WORDS) | {
    "softmax",
    "sigmoid",
    "relu",
    "ReLU",
    "Tr",
    "tr",
    "argmin",
    "argmax",
    "sqrt",
    "abs",
    "sgn",
}
FUNCTION_LETTERS = frozenset({"f", "g", "h", "p", "q", "F", "G", "P", "Q", "L", "ell", "calL", "phi", "psi", "sigma"})
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
