"""Normalisation: :func:`latex_comparison_key`, the key under which two LaTeX strings that render alike compare
equal (used by the benchmark and the tests)."""

from __future__ import annotations

import re

from paperlake.formulas.latex.symbols import TEX_FUNCTION_NAMES

# ------------------------------------------------------------------------------------------------ normalisation

_DROP_COMMANDS = {
    r"\left",
    r"\right",
    r"\big",
    r"\Big",
    r"\bigg",
    r"\Bigg",
    r"\bigl",
    r"\bigr",
    r"\Bigl",
    r"\Bigr",
    r"\biggl",
    r"\biggr",
    r"\Biggl",
    r"\Biggr",
    r"\middle",
    r"\displaystyle",
    r"\textstyle",
    r"\scriptstyle",
    r"\scriptscriptstyle",
    r"\limits",
    r"\nolimits",
    r"\,",
    r"\;",
    r"\:",
    r"\!",
    r"\ ",
    r"\quad",
    r"\qquad",
    r"\enspace",
    r"\thinspace",
    r"\medspace",
    r"\thickspace",
    r"\hfill",
    r"\nonumber",
    r"\notag",
    r"\rm",
    r"\mathrm",
    r"\operatorname",
    r"\operatorname*",
    r"\text",
    r"\textrm",
    r"\textit",
    r"\mathit",
    r"\mbox",
    r"\mathnormal",
    r"\hbox",
    r"\it",
    r"\up",
    r"\tt",
}
_BOLD = {r"\mathbf", r"\boldsymbol", r"\pmb", r"\bm", r"\bf", r"\textbf", r"\mathbold", r"\bold"}
_SYNONYMS = {
    r"\le": r"\leq",
    r"\ge": r"\geq",
    r"\leqslant": r"\leq",
    r"\geqslant": r"\geq",
    r"\ne": r"\neq",
    r"\to": r"\rightarrow",
    r"\gets": r"\leftarrow",
    r"\longrightarrow": r"\rightarrow",
    r"\longleftarrow": r"\leftarrow",
    r"\Longrightarrow": r"\Rightarrow",
    r"\Longleftarrow": r"\Leftarrow",
    r"\Longleftrightarrow": r"\iff",
    r"\Leftrightarrow": r"\iff",
    r"\implies": r"\Rightarrow",
    r"\vert": "|",
    r"\lvert": "|",
    r"\rvert": "|",
    r"\mid": "|",
    r"\Vert": r"\|",
    r"\lVert": r"\|",
    r"\rVert": r"\|",
    r"\parallel": r"\|",
    r"\lbrace": r"\{",
    r"\rbrace": r"\}",
    r"\lbrack": "[",
    r"\rbrack": "]",
    r"\ldots": r"\dots",
    r"\cdots": r"\dots",
    r"\dotsc": r"\dots",
    r"\dotsb": r"\dots",
    r"\widehat": r"\hat",
    r"\widetilde": r"\tilde",
    r"\overline": r"\bar",
    r"\stackrel": r"\overset",
    r"\dfrac": r"\frac",
    r"\tfrac": r"\frac",
    r"\ast": "*",
    r"\intercal": r"\top",
    r"\cal": r"\mathcal",
    r"\Bbb": r"\mathbb",
    r"\colon": ":",
    r"\coloneqq": ":=",
    r"\prime": "'",
    r"\lnot": r"\neg",
    r"\land": r"\wedge",
    r"\lor": r"\vee",
    r"\emptyset": r"\varnothing",
    r"\bot": r"\perp",
    r"\dag": r"\dagger",
    r"\varepsilon": r"\epsilon",
    r"\textless": "<",
    r"\textgreater": ">",
    r"\sp": "^",
    r"\sb": "_",
    r"\dot{=}": r"\doteq",
    r"\triangleq": r"\triangleq",
    r"\gt": ">",
    r"\lt": "<",
}
_FUNCTION_COMMANDS = {"\\" + name for name in TEX_FUNCTION_NAMES} | {r"\arg"}
_ACCENTS = {r"\hat", r"\tilde", r"\bar", r"\vec", r"\dot", r"\ddot", r"\check", r"\breve"}
_TOKEN = re.compile(r"\\[A-Za-z]+\*?|\\.|[^\s]")


def _tokens(latex: str) -> list[str]:
    return _TOKEN.findall(latex)


def _skip_group(tokens: list[str], start: int) -> int:
    """Index after the brace group (or single token) beginning at ``start``."""
    if start >= len(tokens):
        return start
    if tokens[start] != "{":
        return start + 1
    depth = 0
    for i in range(start, len(tokens)):
        depth += tokens[i] == "{"
        depth -= tokens[i] == "}"
        if depth == 0:
            return i + 1
    return len(tokens)


def latex_comparison_key(latex: str) -> str:
    """A comparison key: two LaTeX strings that render alike (up to spacing, sizing and wrapper choices) get the
    same key.

    Removed: whitespace, ``$``/``$$``, ``\\tag{…}``, ``\\left``/``\\right`` and ``\\big``-family sizes, spacing
    commands, ``\\displaystyle``, ``\\phantom{…}`` with its content, alignment (``&``, the ``array``/``aligned``/
    ``matrix`` environments and their column specs; ``\\\\`` stays), upright-text wrappers (``\\mathrm``,
    ``\\operatorname(*)``, ``\\text``), braces that only group (not after ``^``, ``_`` or a command) and braces
    around a single token, and leading/trailing ``.``/``,``. Unified: every bold wrapper → ``\\mathbf``, letter
    by letter like the other alphabets (``\\mathbf{XY}`` = ``\\mathbf X\\mathbf Y``), and outside an accent;
    operator commands (``\\log``, ``\\max``) → their letters (so ``\\mathrm{l n}`` = ``\\ln``);
    ``\\underset{a}{op}`` → ``op_{a}``; ``\\substack``/``\\atop`` → stacked lines; ``cases`` → ``\\{``;
    synonyms (``\\le``/``\\leq``, ``\\widehat``/``\\hat``, ``\\overline``/``\\bar``, ``\\stackrel``/``\\overset``,
    ``\\vert``/``\\mid``/``|``, ``\\ldots``/``\\cdots``/``\\cdot\\cdot\\cdot``/``...`` → ``\\dots``,
    ``\\prime`` → ``'``, ``\\varepsilon`` → ``\\epsilon``, ``\\longrightarrow`` → ``\\rightarrow``).
    ``\\cdot`` and ``\\times`` stay distinct: they are different glyphs.
    """
    text = latex.strip()
    text = re.sub(r"^\$+|\$+$", "", text)
    text = re.sub(r"\\tag\*?\s*\{[^{}]*\}", "", text)
    tokens = _rewrite_underset(_tokens(text))
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in {r"\begin", r"\end"}:
            j = _skip_group(tokens, i + 1)
            env = "".join(tokens[i + 1 : j]).strip("{}")
            if tok == r"\begin" and env in {"array", "tabular", "alignat", "alignat*"} and tokens[j : j + 1] == ["{"]:
                j = _skip_group(tokens, j)
            delimiters = {
                "pmatrix": ("(", ")"),
                "bmatrix": ("[", "]"),
                "Bmatrix": (r"\{", r"\}"),
                "vmatrix": ("|", "|"),
                "Vmatrix": (r"\|", r"\|"),
                "cases": (r"\{", ""),
            }
            if env in delimiters:
                out.append(delimiters[env][0 if tok == r"\begin" else 1])
            i = j
            continue
        if tok in {r"\phantom", r"\hphantom", r"\vphantom", r"\hspace", r"\vspace", r"\hspace*"}:
            i = _skip_group(tokens, i + 1)
            continue
        if tok in {"&", "~", r"\substack"} or tok in _DROP_COMMANDS:
            i += 1
            continue
        if tok in _BOLD:
            out.append(r"\mathbf")
        elif tok in _FUNCTION_COMMANDS:
            out.extend(tok[1:])
        elif tok == r"\atop":
            out.append(r"\\")
        else:
            out.append(_SYNONYMS.get(tok, tok))
        i += 1
    out = _collapse_dots(out)
    out = _spread_alphabets(out)
    out = _strip_braces(out)
    while out and out[-1] in {".", ","}:
        out.pop()
    while out and out[0] in {".", ","}:
        out.pop(0)
    return "".join(out)


_ALPHABETS = {r"\mathbf", r"\mathbb", r"\mathcal", r"\mathfrak", r"\mathsf", r"\mathtt", r"\mathscr"}


def _spread_alphabets(tokens: list[str]) -> list[str]:
    """``\\mathbf{XY}`` → ``\\mathbf X \\mathbf Y``: an alphabet applies letter by letter."""
    result: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] in _ALPHABETS and tokens[i + 1 : i + 2] == ["{"]:
            end = _skip_group(tokens, i + 1)
            inner = tokens[i + 2 : end - 1]
            if len(inner) > 1 and all(len(t) == 1 and t.isalnum() for t in inner):
                for t in inner:
                    result.extend([tokens[i], t])
                i = end
                continue
        result.append(tokens[i])
        i += 1
    return result


def _rewrite_underset(tokens: list[str]) -> list[str]:
    """``\\underset{a}{op}`` → ``{op}_{a}`` (how ``\\operatorname*{op}_{a}`` and ``\\min_{a}`` are written)."""
    while r"\underset" in tokens:
        i = tokens.index(r"\underset")
        below_end = _skip_group(tokens, i + 1)
        base_end = _skip_group(tokens, below_end)
        below, base = tokens[i + 1 : below_end], tokens[below_end:base_end]
        tokens = tokens[:i] + ["{", *base, "}", "_", *below] + tokens[base_end:]
    return tokens


def _collapse_dots(tokens: list[str]) -> list[str]:
    result: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i : i + 3] in ([r"\cdot"] * 3, ["."] * 3):
            result.append(r"\dots")
            i += 3
        else:
            result.append(tokens[i])
            i += 1
    return result


_TWO_ARGUMENTS = {r"\frac", r"\overset", r"\underset", r"\binom", r"\cfrac"}
_ONE_ARGUMENT = {r"\sqrt", r"\underbrace", r"\overbrace", r"\underline", r"\not", *_ACCENTS, *_ALPHABETS}


def _strip_braces(tokens: list[str]) -> list[str]:
    """Drop braces that only group (every group that is not the argument of ``^``, ``_`` or a command), then
    braces around a single token (``x^{2}`` → ``x^2``), so that ``{ : = }``, ``{\\pmb x}`` and ``\\pmb{x}``
    compare alike."""
    arguments: set[int] = set()  # positions of "{" that open an argument
    for i, tok in enumerate(tokens):
        count = 2 if tok in _TWO_ARGUMENTS else 1 if tok in _ONE_ARGUMENT or tok in {"^", "_"} else 0
        j = i + 1
        if tok == r"\sqrt" and tokens[j : j + 1] == ["["]:
            j = tokens.index("]", j) + 1 if "]" in tokens[j:] else j
        for _ in range(count):
            if tokens[j : j + 1] != ["{"]:
                break
            arguments.add(j)
            j = _skip_group(tokens, j)
    kept: list[str] = []
    stack: list[bool] = []
    for i, tok in enumerate(tokens):
        if tok == "{":
            stack.append(i in arguments)
            if i in arguments:
                kept.append(tok)
        elif tok == "}" and stack:
            if stack.pop():
                kept.append(tok)
        elif tok != "}":
            kept.append(tok)
    result: list[str] = []
    i = 0
    while i < len(kept):
        if (
            kept[i] == r"\mathbf"
            and kept[i + 1 : i + 2] == ["{"]
            and i + 4 < len(kept)
            and kept[i + 2] in _ACCENTS
            and kept[i + 3] not in {"{", "}"}
            and kept[i + 4] == "}"
        ):
            result.extend([kept[i + 2], "{", r"\mathbf", kept[i + 3], "}"])  # bold outside or inside the accent
            i += 5
        elif kept[i] == "{" and i + 2 < len(kept) and kept[i + 2] == "}" and kept[i + 1] not in {"{", "}"}:
            result.append(kept[i + 1])
            i += 3
        elif kept[i] == "{" and i + 1 < len(kept) and kept[i + 1] == "}":
            i += 2
        else:
            result.append(kept[i])
            i += 1
    return result
