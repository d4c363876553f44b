"""Step 6, convert: one equation → sympy, directly where sympy reads plain LaTeX unambiguously, else through the
rewrite; the record of how (or why not)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from functools import lru_cache

import sympy
from sympy.core.function import AppliedUndef

from paperlake.formulas.latex.computability import not_computable_reason
from paperlake.formulas.latex.names import _read_atom, identifier, symbol_name
from paperlake.formulas.latex.normalise import normalise_latex
from paperlake.formulas.latex.parse_cache import active_cache
from paperlake.formulas.latex.rewrite import _Rewriter
from paperlake.formulas.latex.split import split_equations, split_relations
from paperlake.formulas.latex.tokens import (
    _DIGITS,
    _SCALAR_FUNCTIONS,
    DEFINING_RELATIONS,
    FUNCTION_WORDS,
    GREEK,
    INEQUALITIES,
    TRANSPOSE,
    ConversionResult,
    Node,
    RewriteError,
    _as_list,
    _flatten,
    _is_letter,
    _word,
    build_tree,
    emit,
    tokenize,
)

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
        if (
            node == "("
            and previous is not None
            and (
                _is_letter(previous)
                or isinstance(previous, list)
                or previous == "'"
                or (isinstance(previous, str) and previous.lstrip("\\") in GREEK)
            )
        ):
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


def to_sympy(
    latex: str, known_symbols: Iterable[str] | None = None, vectors: Iterable[str] | None = None
) -> ConversionResult:
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
    size = len(tokenize(normalised))
    if size > MAX_CONVERT_TOKENS:
        result.reason = f"too long to convert: {size} tokens (the limit is {MAX_CONVERT_TOKENS})"
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
            result.reason = next(
                (attempt for attempt in result.attempts if attempt.startswith("rewrite")), result.attempts[-1]
            )
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
            letters = [token.lstrip("\\") for token in content[:1] if _is_letter(token) or token.lstrip("\\") in GREEK]
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
        about = (
            f"{', '.join(vectors)} are written as vectors, so its products are dot products"
            if vectors
            else "the formula is not a scalar identity"
        )
        return f"read as scalars it cancels {', '.join(lost)} ({about}); no scalar template"
    for side in result.written:
        for node in sympy.preorder_traversal(side):
            if isinstance(node, sympy.Mul):
                factors = [
                    argument
                    for argument in node.args
                    if any(_is_vector(symbol.name, bases) for symbol in argument.free_symbols)
                ]
                if len(factors) >= 2:
                    names = sorted(
                        {
                            symbol.name
                            for factor in factors
                            for symbol in factor.free_symbols
                            if _is_vector(symbol.name, bases)
                        }
                    )
                    return (
                        f"product of vectors {' and '.join(names)} (a dot, element-wise or outer product); "
                        "no scalar template"
                    )
            if isinstance(node, sympy.Pow) and any(_is_vector(symbol.name, bases) for symbol in node.base.free_symbols):
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
    remainder = emit(tree[colon + 1 :])
    if prefix and textual and any(words) and split_relations(remainder)[1]:
        return " ".join(word for word in words if word), remainder
    return None, emit(tree)


def _known_name(symbol: str) -> str | None:
    if symbol.isidentifier():
        return symbol
    return symbol_name(symbol)


def _convert_sides(
    segments: list[str],
    relations: list[str],
    known: frozenset[str],
    known_words: frozenset[str],
    result: ConversionResult,
) -> tuple[list[sympy.Basic], list[str]] | None:
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


def _convert_side(
    latex: str, known: frozenset[str], known_words: frozenset[str], result: ConversionResult, *, lhs: bool
) -> sympy.Basic | None:
    """One side: direct parse when the LaTeX is plain, else (or on refusal) the placeholder rewrite."""
    if not latex.strip():
        result.attempts.append("empty side of a relation")
        return None
    refusal = _direct_parse_allowed(latex, known_words)
    if refusal is None:
        expected = _atom_identifiers(build_tree(tokenize(latex))) | {"pi", "e"}
        for backend in PARSERS:
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
    for backend in PARSERS:
        expression, error = _parse(rewritten, backend)
        if expression is not None:
            result.step = f"rewrite+{backend}" if result.step in (None, "antlr", "lark") else result.step
            return _from_rewrite(expression, rewriter, known, result)
        result.attempts.append(f"rewrite+{backend}: {error}")
    return None


# The longest equation (tokens after normalising) converted. sympy's LaTeX parser slows down faster than the length: a
# sum of a few hundred products took minutes; the sample's longest display has 410 tokens. Longer
# ones fail, saying so, instead of holding the formula stage (a size, not a clock: the same equation gives the same
# graph on every machine).
MAX_CONVERT_TOKENS = 1500

# sympy's LaTeX parsers tried in turn. Not lark: on the sample's 451 equations (both backends) it was tried 33 times,
# after antlr had refused, slowly each time (an Earley parser: a fifth of the cold formula stage), and gave one formula,
# a section heading misread as an equation ("B Details of Models and Data"). ``_parse`` still reads "lark".
PARSERS = ("antlr",)


@lru_cache(maxsize=8192)
def _parse(latex: str, backend: str) -> tuple[sympy.Basic | None, str | None]:
    """sympy's LaTeX parser, memoised: most of the formula stage's time, and a pure function of the text (the same
    LaTeX recurs within a paper, across the rewrite steps and across papers, and sympy's trees are immutable). In a
    stage that opened a parse cache (:mod:`paperlake.formulas.latex.parse_cache`), also across processes."""

    cache = active_cache()
    if cache is not None and (stored := cache.get(latex, backend)) is not None:
        return stored
    parsed = _parse_now(latex, backend)
    if cache is not None:
        cache.put(latex, backend, parsed)
    return parsed


def _parse_now(latex: str, backend: str) -> tuple[sympy.Basic | None, str | None]:
    from sympy.parsing.latex import parse_latex  # deferred: antlr

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


def _from_direct(
    expression: sympy.Basic, known: frozenset[str], expected: set[str], result: ConversionResult
) -> sympy.Basic | None:
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
        result.indices[name] = (
            frozenset({match.group(1)} - {""}) if match and not match.group(1).isdigit() else frozenset()
        )
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


def _from_rewrite(
    expression: sympy.Basic, rewriter: _Rewriter, known: frozenset[str], result: ConversionResult
) -> sympy.Basic:
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
