"""sympy's LaTeX parses kept across processes: most of the formula stage's time is sympy's ANTLR parser (a new
process starts with an empty prediction cache, so its first equations are the slowest), and a parse is a pure
function of the LaTeX, the parser and their versions. The same equations come back whenever a paper is ingested
again (a replaced file, a parser or extractor change, a crash repaired, every test of the suite) and the in-process
memo of :func:`paperlake.formulas.latex.convert._parse` dies with its process.

Stored in the embedding cache's SQLite file (``Settings.embeddings``: content-addressed derived values live
together, so an empty cache file is a cold start for both), one row per (sympy and ANTLR runtime version, parser,
sha256 of the LaTeX): the tree as JSON (:func:`dump_tree`: each node's head and children in sympy's own order, atoms
as ``sympy.srepr`` text; ``srepr`` alone reorders an unevaluated product's factors), or the parser's error. A tree
is stored only when :func:`load_tree` rebuilds exactly it, node for node, so a cached parse is the parse; any other
is parsed again each time. Nothing is ``eval``-ed or unpickled: the reader reads literals and calls only sympy's
public names.

A missing, unreadable or locked file only means parsing again: the cache never fails the formula stage.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.metadata
import json
import logging
import sqlite3
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import sympy

log = logging.getLogger(__name__)

Parse = tuple[sympy.Basic | None, str | None]  # (tree, None) or (None, the parser's error)
FLUSH_EVERY = 64  # parses written per transaction while a stage runs (the rest when it ends)


@lru_cache(maxsize=1)
def parser_versions() -> str:
    """What a stored parse depends on besides the LaTeX: sympy's version and the ANTLR runtime's."""
    try:
        antlr = importlib.metadata.version("antlr4-python3-runtime")
    except importlib.metadata.PackageNotFoundError:
        antlr = "none"
    return f"sympy={sympy.__version__};antlr4={antlr}"


class UnreadableTree(ValueError):
    """srepr text :func:`read_srepr` does not rebuild (a construct it does not accept)."""


def _sympy_name(name: str):
    if name.startswith("_") or not hasattr(sympy, name):
        raise UnreadableTree(f"not a sympy name: {name}")
    value = getattr(sympy, name)
    module = getattr(value, "__module__", None) or getattr(type(value), "__module__", "")
    if not module.startswith("sympy"):
        raise UnreadableTree(f"not a sympy name: {name}")
    return value


def _read(node: ast.AST):
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = _read(node.operand)
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            return -operand
        raise UnreadableTree("a minus sign before a non-number")
    if isinstance(node, ast.Name):
        return _sympy_name(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_read(element) for element in node.elts)
    if isinstance(node, ast.Call):
        function = _read(node.func)
        if not callable(function):
            raise UnreadableTree("a call of a non-callable")
        if any(keyword.arg is None for keyword in node.keywords):
            raise UnreadableTree("** arguments")
        arguments = [_read(argument) for argument in node.args]
        keywords = {keyword.arg: _read(keyword.value) for keyword in node.keywords}
        return function(*arguments, **keywords)
    raise UnreadableTree(f"{type(node).__name__} is not part of a sympy tree's srepr")


def read_srepr(text: str) -> Any:
    """What ``sympy.srepr`` printed as ``text`` (an atom: ``Symbol('x')``, ``Integer(2)``, ``oo``; or a function
    head: ``Add``, ``Function('f')``), built with evaluation off. No ``eval``: only literals, tuples and calls of
    sympy's public names are read; anything else raises :class:`UnreadableTree`."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise UnreadableTree(f"not srepr text: {error}") from None
    with sympy.evaluate(False):
        return _read(tree.body)


def _head(expression: sympy.Basic) -> str:
    name = getattr(expression.func, "__name__", "")
    if getattr(sympy, name, None) is expression.func:
        return name
    return sympy.srepr(expression.func)  # an undefined function: Function('f')


def _dump(expression: sympy.Basic) -> list:
    if expression.is_Atom:
        return [sympy.srepr(expression)]
    if not all(isinstance(argument, sympy.Basic) for argument in expression.args):
        raise UnreadableTree(f"{type(expression).__name__} has arguments that are not sympy trees")
    return [_head(expression), [_dump(argument) for argument in expression.args]]


def _load(node: list) -> sympy.Basic:
    if len(node) == 1:
        atom = read_srepr(node[0])
        if not isinstance(atom, sympy.Basic):
            raise UnreadableTree("not a sympy atom")
        return atom
    head, children = node
    function = read_srepr(head)
    if not callable(function):
        raise UnreadableTree(f"{head} is not a function")
    arguments = tuple(_load(child) for child in children)
    # As the parser built it: its trees are unevaluated (Add, Mul, Pow), but some nodes it built with evaluation on
    # (a Sum's summand without the 1* that evaluation off would put there): the node whose arguments come out as
    # given is the one that was built.
    with sympy.evaluate(False):
        node_built = function(*arguments)
    if node_built.args != arguments:
        node_built = function(*arguments)
    return node_built


def _identical(a: sympy.Basic, b: sympy.Basic) -> bool:
    """The same tree node for node (``==`` alone may hold between trees sympy considers equal but built apart)."""
    if a.func != b.func or a != b:  # the class (!=: an undefined function is a new class made per call, equal by name)
        return False
    return a.is_Atom or (len(a.args) == len(b.args) and all(_identical(x, y) for x, y in zip(a.args, b.args)))


def dump_tree(expression: sympy.Basic) -> str:
    """``expression`` as JSON text: atoms as their srepr, every other node as [head, [children]]."""
    return json.dumps(_dump(expression), separators=(",", ":"))


def load_tree(text: str) -> sympy.Basic:
    """The tree :func:`dump_tree` wrote; :class:`UnreadableTree` for text it did not write."""
    try:
        node = json.loads(text)
    except ValueError as error:
        raise UnreadableTree(f"not a stored tree: {error}") from None
    return _load(node)


def storable(expression: sympy.Basic) -> str | None:
    """``expression`` as :func:`dump_tree` text when :func:`load_tree` rebuilds exactly it, else None (not to be
    stored: parsed again each time)."""
    try:
        text = dump_tree(expression)
        rebuilt = load_tree(text)
    except Exception:  # a node the dump or the reader refuses (or sympy raises on): parsed again next time
        return None
    return text if _identical(rebuilt, expression) else None


class LatexParseCache:
    """The parses of one SQLite file (the ``latex_parses`` table), read on demand and written in batches."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.versions = parser_versions()
        self.hits = self.misses = 0
        self._pending: list[tuple] = []
        self._con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self._con.execute("pragma journal_mode=wal")
        self._con.execute("pragma synchronous=normal")
        self._con.execute(
            "create table if not exists latex_parses (versions text not null, parser text not null, "
            "latex_sha256 text not null, tree text, error text, primary key (versions, parser, latex_sha256))"
        )

    @staticmethod
    def _key(latex: str) -> str:
        return hashlib.sha256(latex.encode("utf-8")).hexdigest()

    def get(self, latex: str, parser: str) -> Parse | None:
        try:
            row = self._con.execute(
                "select tree, error from latex_parses where versions = ? and parser = ? and latex_sha256 = ?",
                (self.versions, parser, self._key(latex)),
            ).fetchone()
        except sqlite3.Error as error:  # locked past the timeout, damaged: parse
            log.warning("LaTeX parse cache %s not read: %s", self.path, error)
            row = None
        if row is None:
            self.misses += 1
            return None
        tree, error = row
        if tree is None:
            self.hits += 1
            return None, error
        try:
            expression = load_tree(tree)
        except Exception:  # a row this reader did not write (another version's file, damaged): parse again
            self.misses += 1
            return None
        self.hits += 1
        return expression, None

    def put(self, latex: str, parser: str, parse: Parse) -> None:
        expression, error = parse
        tree = storable(expression) if expression is not None else None
        if expression is not None and tree is None:
            return
        self._pending.append((self.versions, parser, self._key(latex), tree, error))
        if len(self._pending) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        try:
            self._con.execute("begin")
            self._con.executemany("insert or replace into latex_parses values (?, ?, ?, ?, ?)", rows)
            self._con.execute("commit")
        except sqlite3.Error as error:  # not kept: parsed again next time
            log.warning("LaTeX parse cache %s: %d parses not written: %s", self.path, len(rows), error)
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("rollback")

    def close(self) -> None:
        try:
            self.flush()
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._con.close()


_ACTIVE: LatexParseCache | None = None


def active_cache() -> LatexParseCache | None:
    """The cache :func:`latex_parse_cache` opened for the stage running in this process, if any."""
    return _ACTIVE


@contextlib.contextmanager
def latex_parse_cache(path: str | Path | None) -> Iterator[LatexParseCache | None]:
    """Parses in this block are read from and written to the file ``path`` (None: not kept). A file that cannot
    be opened or written is logged and skipped: the block parses as without a cache."""
    global _ACTIVE
    if path is None or _ACTIVE is not None:  # nested: the outer block's cache serves
        yield _ACTIVE
        return
    try:
        cache = LatexParseCache(path)
    except (sqlite3.Error, OSError) as error:
        log.warning("LaTeX parse cache %s not used: %s", path, error)
        yield None
        return
    _ACTIVE = cache
    try:
        yield cache
    finally:
        _ACTIVE = None
        cache.close()
