"""Step 5, rewrite: every name becomes one placeholder symbol sympy cannot misread, for sympy's ``parse_latex`` to read
the structure (the conventions are the package docstring's)."""

from __future__ import annotations

import re

from paperlake.formulas.latex.names import _Atom, _read_atom
from paperlake.formulas.latex.tokens import (
    _NOT_COMPUTABLE_COMMANDS,
    FUNCTION_LETTERS,
    Node,
    RewriteError,
    _as_list,
    _flatten,
    _matching_paren,
    _take_argument,
)

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
                degree = "[" + self.rewrite(nodes[index + 1 : closing]) + "]"
                index = closing + 1
            argument, index = _take_argument(nodes, index)
            pieces.append(rf"\sqrt{degree}{{{self.rewrite(_as_list(argument))}}}")
            return index
        if node in (r"\sum", r"\prod"):
            return self._summation(nodes, index, pieces)
        if node in (
            r"\log",
            r"\ln",
            r"\exp",
            r"\sin",
            r"\cos",
            r"\tan",
            r"\sinh",
            r"\cosh",
            r"\tanh",
            r"\arcsin",
            r"\arccos",
            r"\arctan",
            r"\max",
            r"\min",
        ):
            return self._function_command(nodes, index, pieces)
        if node in (
            r"\lfloor",
            r"\rfloor",
            r"\lceil",
            r"\rceil",
            r"\infty",
            "+",
            "-",
            "*",
            "/",
            "(",
            ")",
            "!",
            ",",
            "|",
        ):
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
            arguments = self.rewrite(nodes[index + 1 : closing])
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
        inside = nodes[index + 1 : _matching_paren(nodes, index)]
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
        start = self.rewrite(lower[equals + 1 :])
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
            text += "(" + self.rewrite(nodes[index + 1 : closing]) + ")"
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
