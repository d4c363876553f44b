"""Step 1, normalise: MinerU's spaced-out LaTeX → compact display-grade LaTeX (see :func:`normalise_latex`)."""

from __future__ import annotations

import re

from paperlake.formulas.latex.tokens import (
    _ACCENTS,
    _ALIGN_ENVIRONMENTS,
    _DELIMITER_SIZERS,
    _DROP_WITH_ARGUMENT,
    _DROPPED,
    _FONT_WRAPPERS,
    _OPERATOR_WRAPPERS,
    _STYLED_LETTERS,
    _TEXT_WRAPPERS,
    _TRAILING_NUMBER,
    _VARIANTS,
    FUNCTION_WORDS,
    RELATIONS,
    UNICODE_GREEK,
    UNICODE_SYMBOLS,
    Node,
    _as_list,
    _flatten,
    _is_letter,
    _take_argument,
    _unwrap,
    _word,
    build_tree,
    emit,
    tokenize,
)

# --------------------------------------------------------------------------------------------- normalising


def normalise_latex(latex: str) -> str:
    """Display-grade, compact LaTeX of one display equation (array rows stay ``\\\\``-separated)."""
    text = latex.strip()
    for delimiter in ("$$", "$", r"\[", r"\]", r"\(", r"\)"):
        if text.startswith(delimiter):
            text = text[len(delimiter) :]
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
                out.extend(["[", *_clean(nodes[index + 1 : closing], False), "]"])
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
        out.extend(
            [
                r"\begin",
                [name if name not in _ALIGN_ENVIRONMENTS else "matrix"],
                *_clean(body, False),
                r"\end",
                [name if name not in _ALIGN_ENVIRONMENTS else "matrix"],
            ]
        )
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
