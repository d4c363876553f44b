"""Offline probes: deterministic AirQA questions per paper, generated from the warehouse, each with an exact answer
and the warehouse row that states it.

Six kinds, so a volume's evaluation exercises every view that retrieval serves:

- ``table_cell``: a number addressed by its table (label and caption gist) and its row and column header paths,
  never by its neighbours in the grid; the cell's (row path, column path) must be unique in its table;
- ``sentence_number``: a number stated in a body sentence, asked for through the sentence's rarest content words
  (a keyword paraphrase, not the sentence);
- ``figure_caption``: which figure a caption describes, asked through the caption's distinctive words;
- ``figure_text``: a label printed inside a figure (a legend entry, an axis title, a diagram's box), asked as the
  label beside another one on the same line of the figure, the figure named by its label and caption gist;
- ``equation_symbol``: what a symbol defined right after a display equation ("where X denotes the …") stands for;
- ``reference_author``: the first author of a cited work, asked by the work's title (its first ten words);
- ``reference_citation``: the first author of a cited work, asked by what the citing sentence says of it (its
  rarest words, the citation left out), answered from ``reference.citing_context``;
- ``sentence_name``: a model, dataset or method name stated in a body sentence, asked like a sentence number.

(A "which section covers …" kind was tried and dropped: retrieved chunks do not carry their section's title, so its
answer is not answer-bearing text for any retrieval, and it scored 0.03–0.38 for every method.)

An answer that is frequent in the paper proves nothing (a retrieval that finds "0.5" somewhere has not found the
evidence), so numbers printed in more than :data:`MAX_NUMBER_SENTENCES` sentences and names or authors mentioned
more than :data:`MAX_NAME_MENTIONS` times are dropped. Every probe is verified before it is kept: its answer must
occur in the evidence row it names (table, column, row id), with the same number matching as answer-bearing
retrieval uses.

The choice among candidates is seeded by the paper id, so a paper's probes are the same on every run and change
only when its warehouse rows (or :data:`PROBES_VERSION`) change.
"""

from __future__ import annotations

import hashlib
import re
import uuid as uuid_lib
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

import duckdb

from paperlake.evaluation.needles import answer_needles, contains_needle
from paperlake.parsing.citations import CITATION
from schemas.warehouse import declared_keys

if TYPE_CHECKING:
    import polars as pl

PROBES_VERSION = "probes-4"
KINDS = (
    "table_cell",
    "sentence_number",
    "figure_caption",
    "figure_text",
    "equation_symbol",
    "reference_author",
    "reference_citation",
    "sentence_name",
    "author_affiliation",
)
KIND_ELEMENT = {
    "table_cell": "table",
    "sentence_number": "text",
    "figure_caption": "image",
    "figure_text": "image",
    "equation_symbol": "formula",
    "reference_author": "metadata",
    "reference_citation": "metadata",
    "sentence_name": "text",
    "author_affiliation": "metadata",
}
PER_PAPER = 16  # probes per paper at most, taken round-robin over the kinds
MAX_NUMBER_SENTENCES = 2  # a number printed in more sentences than this is too common to prove anything
MAX_NAME_MENTIONS = 3
_NAMESPACE = uuid_lib.UUID("6f1d7a52-1d0e-4c55-9a59-2f4d0c8f3e11")
_STOP = frozenset(
    "a an and are as at be been being but by can could did do does done for from had has have how however if in "
    "into is it its may might more most much must not of on one or our over same should so some such than that the "
    "their them then there these they this those through thus to two under up upon us use used uses using very was "
    "we were what when where which while who whom whose why will with within without would also each other only "
    "both between based results result show shows shown table figure section paper work propose proposed approach "
    "method methods model models first second three different further given example number numbers".split()
)
_WORD = re.compile(r"(?<![\w-])[A-Za-z][a-z]*[A-Za-z](?:-[A-Za-z]+)*(?![\w-])")
_NUMBER = re.compile(r"(?<![\w.,\-−])(\d{1,3}(?:,\d{3})+|\d+\.\d+|\d+)(\s?%)?(?![\w.]\d|\d|[A-Za-z])")
_NOT_A_FIGURE = re.compile(
    r"(?:Table|Tab\.|Figure|Fig\.|Section|Sec\.|Eq\.|Equation|Appendix|§|\[|\(|arXiv:?|et al\.,?|Algorithm|Step|Line|"
    r"Layer|Chapter|Theorem|Lemma)\s*$",
    re.I,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")
_DEFINITION = re.compile(
    r"(?:^|\bwhere\b|\band\b|,)\s*(?P<symbol>\$[^$]{1,60}\$|[^\s$,;:]{1,6})\s+"
    r"(?:is|are|denotes|denote|represents|represent|stands for|is defined as|is the number of)\s+"
    r"(?P<definition>(?:the|a|an)\s+[^$,;:.()]{3,80}?)(?=\s*(?:[,;:.]|\band\b|\bwhich\b|\bthat\b|\bwith\b|$))"
)
_BACK_MATTER = re.compile(r"reference|bibliograph|acknowledg", re.I)
_REFERENCE = re.compile(r"^(?P<authors>.+?)\.?\s+(?P<year>(?:19|20)\d\d)[a-z]?\.\s+(?P<title>[^.?!]{15,200})[.?!]")


@dataclass(frozen=True)
class PaperText:
    """What the generators need of one paper, read once from the warehouse."""

    paper_id: str
    paper_key: str
    title: str
    volume: str
    conference: str
    sentences: list[str]
    word_counts: Counter
    number_counts: Counter  # normalised number -> sentences printing it


# ---------------------------------------------------------------------------------------------------------------
# Reading the warehouse


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> pl.DataFrame:
    return con.sql(sql, params=params).pl()


def _has(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return bool(
        con.execute("select count(*) from information_schema.tables where table_name = ?", [table]).fetchall()[0][0]
    )


def paper_text(con: duckdb.DuckDBPyConnection, paper_id: str) -> PaperText | None:
    meta = _frame(
        con,
        "select paper_id::varchar as paper_id, paper_key, title, volume, conference_abbreviation "
        "from metadata where paper_id = ?",
        [paper_id],
    )
    if meta.is_empty():
        return None
    row = meta.row(0, named=True)
    pages = _frame(con, "select page_content from pages where ref_paper_id = ? order by page_number", [paper_id])
    text = "\n".join(t or "" for t in pages["page_content"].to_list())
    sentences = [s.strip() for s in _SENTENCE.split(re.sub(r"\s+", " ", text)) if s.strip()]
    words = Counter(w.lower() for w in _WORD.findall(text) if len(w) >= 4)
    numbers: Counter = Counter()
    for sentence in sentences:
        numbers.update({_number_key(m.group(1)) for m in _ANY_NUMBER.finditer(sentence)})
    return PaperText(
        row["paper_id"],
        row["paper_key"] or "",
        row["title"] or "",
        row["volume"] or "",
        row["conference_abbreviation"] or row["volume"] or "",
        sentences,
        words,
        numbers,
    )


_ANY_NUMBER = re.compile(r"(?<![\d.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?!\d)")


def _number_key(printed: str) -> str:
    """One key per value as papers print it: "4,749" = "4749", "74.10" = "74.1", "70.0" = "70"."""
    plain = printed.replace(",", "")
    return plain.rstrip("0").rstrip(".") if "." in plain else plain


def number_sentences(paper: PaperText, printed: str) -> int:
    """In how many of the paper's sentences the number ``printed`` appears (as a whole number, not inside one)."""
    return paper.number_counts.get(_number_key(printed.replace("%", "").strip()), 0)


# ---------------------------------------------------------------------------------------------------------------
# Helpers shared by the generators


def _seeded(paper_id: str, kind: str, items: list[Any], key: Callable[[Any], str]) -> list[Any]:
    """A deterministic shuffle: the same paper gives the same order on every run."""
    return sorted(items, key=lambda item: hashlib.sha256(f"{paper_id}|{kind}|{key(item)}".encode()).hexdigest())


def _variant(seed: str, templates: tuple[str, ...]) -> str:
    return templates[int(hashlib.sha256(seed.encode()).hexdigest(), 16) % len(templates)]


def _rare_words(paper: PaperText, text: str, count: int, exclude: Iterable[str] = ()) -> list[str]:
    """The ``count`` rarest content words of ``text`` (by frequency in the paper), in their order in ``text``."""
    excluded = {e.lower() for e in exclude}
    words = [
        w
        for w in dict.fromkeys(_WORD.findall(text))
        if len(w) >= 4 and w.lower() not in _STOP and w.lower() not in excluded
    ]
    ranked = sorted(words, key=lambda w: (paper.word_counts.get(w.lower(), 0), -len(w)))[:count]
    return [w for w in words if w in ranked]


def _listing(words: list[str]) -> str:
    quoted = [f"“{w}”" for w in words]
    return ", ".join(quoted[:-1]) + f" and {quoted[-1]}" if len(quoted) > 1 else "".join(quoted)


def _caption_gist(caption: str, words: int = 12) -> str:
    body = re.sub(r"^\s*(?:Table|Tab\.|Figure|Fig\.)\s*[A-Z]?\d+[a-z]?\s*[:.]\s*", "", caption or "").strip()
    first = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0].rstrip(".")
    tokens = first.split()
    gist = " ".join(tokens[:words]) + (" …" if len(tokens) > words else "")
    return gist[:1].lower() + gist[1:] if gist[:2] != gist[:2].upper() else gist


def _decimals(printed: str) -> int | None:
    match = re.search(r"\.(\d+)", printed)
    return len(match.group(1)) if match else None


def _number_evaluator(printed: str) -> tuple[dict[str, Any], str, Any]:
    """Evaluator, answer format and gold for a number as printed ("4,749", "85.30", "12%")."""
    plain = printed.replace(",", "").replace("%", "").strip()
    decimals = _decimals(plain)
    if decimals is None:
        return (
            {"eval_func": "eval_int_exact_match", "eval_kwargs": {"gold": int(plain)}},
            "an integer, digits only" + (" (without the % sign)" if "%" in printed else ""),
            int(plain),
        )
    value = float(plain)
    return (
        {"eval_func": "eval_float_exact_match", "eval_kwargs": {"gold": value, "ndigits": decimals}},
        f"a number with {decimals} decimal place{'s' if decimals > 1 else ''}, as printed"
        + (" (without the % sign)" if "%" in printed else ""),
        value,
    )


def _phrase_evaluator(gold: str, threshold: int) -> dict[str, Any]:
    """A short phrase or name: case-insensitive, and an answer that contains it (a fuller name, an article) passes."""
    return {
        "eval_func": "eval_string_fuzzy_match",
        "eval_kwargs": {"gold": gold, "lowercase": True, "fuzz_method": "partial_ratio", "threshold": threshold},
    }


@dataclass
class Candidate:
    kind: str
    question: str
    answer_format: str
    evaluator: dict[str, Any]
    answer: Any
    evidence: dict[str, Any]  # table, column, row_id, page_number (+ table_id for cells)
    key: str  # what makes the candidate unique within the paper


# ---------------------------------------------------------------------------------------------------------------
# The five generators


def _table_cells(con: duckdb.DuckDBPyConnection, paper: PaperText) -> list[Candidate]:
    import polars as pl  # deferred: polars (an unchanged ingest, which makes no probe, never imports it)

    if not _has(con, "table_cells"):
        return []
    cells = _frame(
        con,
        """
        select c.cell_id, c.cell_text, c.column_header_path, c.row_header_path, c.number_value,
               t.table_id, t.table_label, t.table_caption, t.page_number
        from table_cells c join tables t on t.table_id = c.ref_table_id
        where c.ref_paper_id = ? and c.number_value is not null and not c.is_header and not coalesce(c.is_stub, false)
          and len(c.column_header_path) > 0 and len(c.row_header_path) > 0 and t.table_structure = 'ok'
    """,
        [paper.paper_id],
    )
    if cells.is_empty():
        return []
    cells = cells.with_columns(
        pl.col("column_header_path").list.join(" / ").alias("column_path"),
        pl.col("row_header_path").list.join(" / ").alias("row_path"),
    ).filter(
        pl.len().over(["table_id", "column_path", "row_path"]) == 1,
        pl.col("column_path").str.contains(r"[A-Za-z0-9]{2}"),
        pl.col("row_path").str.contains(r"[A-Za-z0-9]{2}"),
        # a header path holding a measurement is a structure error, not a header
        ~pl.col("column_path").str.contains(r"\d\.\d"),
        ~pl.col("row_path").str.contains(r"\d\.\d"),
    )
    found = []
    for cell in cells.iter_rows(named=True):
        printed = re.sub(r"[^\d.,%\-−]", "", cell["cell_text"] or "").strip(".,")
        if not _NUMBER.fullmatch(printed.replace("−", "").lstrip("-")) or len(printed.strip("%")) < 2:
            continue
        if printed.startswith(("-", "−")):
            continue  # signs are printed many ways; positive values are enough for a probe
        if number_sentences(paper, printed.replace("%", "").replace(",", "")) > MAX_NUMBER_SENTENCES:
            continue
        evaluator, answer_format, gold = _number_evaluator(printed)
        label = cell["table_label"] or "the table"
        gist = _caption_gist(cell["table_caption"] or "")
        about = f"{label} ({gist})" if gist else label
        question = _variant(
            cell["cell_id"],
            (
                "In {about}, what value is reported for {row} in the column {col}?",
                "According to {about}, what is the {col} of {row}?",
                "What number does {about} give for {row} under {col}?",
            ),
        ).format(about=about, row=f"“{cell['row_path']}”", col=f"“{cell['column_path']}”")
        found.append(
            Candidate(
                "table_cell",
                question,
                answer_format,
                evaluator,
                gold,
                {
                    "table": "table_cells",
                    "column": "cell_text",
                    "row_id": cell["cell_id"],
                    "page_number": cell["page_number"],
                    "table_id": cell["table_id"],
                },
                cell["cell_id"],
            )
        )
    return found


def _body_sentences(con: duckdb.DuckDBPyConnection, paper: PaperText) -> Iterable[tuple[dict[str, Any], str]]:
    """(chunk row, sentence) for the prose sentences of the paper's body (no back matter, no math, no citations, no
    table or list flattened into text)."""
    chunks = _frame(
        con,
        "select chunk_id, text_content, page_number, section_title from chunks where ref_paper_id = ? order by ordinal",
        [paper.paper_id],
    )
    for chunk in chunks.iter_rows(named=True):
        if _BACK_MATTER.search(chunk["section_title"] or ""):
            continue
        for sentence in _SENTENCE.split(re.sub(r"\s+", " ", chunk["text_content"] or "")):
            tokens = sentence.split()
            if "$" in sentence or not 8 <= len(tokens) <= 60 or "et al" in sentence:
                continue
            if sum(t.isalpha() and t.islower() for t in tokens) >= len(tokens) / 2:
                yield chunk, sentence


def _sentence_numbers(con: duckdb.DuckDBPyConnection, paper: PaperText) -> list[Candidate]:
    found, seen = [], set()
    for chunk, sentence in _body_sentences(con, paper):
        for match in _NUMBER.finditer(sentence):
            printed = match.group(1) + ("%" if match.group(2) else "")
            plain = match.group(1).replace(",", "")
            if _NOT_A_FIGURE.search(sentence[: match.start()]) or plain in seen:
                continue
            if "." not in plain and not match.group(2) and (int(plain) < 10 or 1900 <= int(plain) <= 2035):
                continue  # small integers and years are everywhere
            if number_sentences(paper, plain) > MAX_NUMBER_SENTENCES:
                continue
            words = _rare_words(paper, sentence, 4)
            if len(words) < 3:
                continue
            seen.add(plain)
            evaluator, answer_format, gold = _number_evaluator(printed)
            where = f" (section “{chunk['section_title']}”)" if chunk["section_title"] else ""
            question = _variant(
                f"{chunk['chunk_id']}|{plain}",
                (
                    "Which number does the paper state where it discusses {words}{where}?",
                    "In the passage mentioning {words}{where}, what figure does the paper report?",
                    "What value is given in the sentence about {words}{where}?",
                ),
            ).format(words=_listing(words), where=where)
            found.append(
                Candidate(
                    "sentence_number",
                    question,
                    answer_format,
                    evaluator,
                    gold,
                    {
                        "table": "chunks",
                        "column": "text_content",
                        "row_id": chunk["chunk_id"],
                        "page_number": chunk["page_number"],
                    },
                    f"{chunk['chunk_id']}|{plain}",
                )
            )
    return found


_NAME = re.compile(r"(?<![\w-])(?:[A-Z][a-z]*[A-Z0-9][A-Za-z0-9]*|[A-Z]{2,}[a-z]*)(?:-[A-Za-z0-9]+)*(?![\w-])")
_GENERIC_NAMES = frozenset(
    "AI API CPU GPU GPUs LLM LLMs LM LMs ML NLP NLU NLG QA RAG SOTA URL PDF PhD US UK EU USA II III IV".split()
)


def _sentence_names(con: duckdb.DuckDBPyConnection, paper: PaperText) -> list[Candidate]:
    """A model, dataset or method name stated in a body sentence (mixed case, digits or acronyms: "RoBERTa",
    "GPT-4", "SQuAD"), asked through the sentence's rarest words; names the paper repeats are dropped."""
    # how often each run of word characters and hyphens occurs: a name is one such run, whole (_NAME's bounds)
    mentions = Counter(re.findall(r"[\w-]+", "\n".join(paper.sentences)))
    found, seen = [], set()
    for chunk, sentence in _body_sentences(con, paper):
        for match in _NAME.finditer(sentence):
            name = match.group(0)
            if name in seen or len(name) < 3 or name.isdigit() or name in _GENERIC_NAMES:
                continue
            if mentions[name] > MAX_NAME_MENTIONS:
                continue
            words = _rare_words(paper, sentence.replace(name, " "), 4, exclude=[name])
            if len(words) < 3:
                continue
            seen.add(name)
            where = f" (section “{chunk['section_title']}”)" if chunk["section_title"] else ""
            question = _variant(
                f"{chunk['chunk_id']}|{name}",
                (
                    "Which model, dataset or method does the paper name where it discusses {words}{where}?",
                    "In the passage about {words}{where}, which named system or resource does the paper mention?",
                ),
            ).format(words=_listing(words), where=where)
            found.append(
                Candidate(
                    "sentence_name",
                    question,
                    "the name as printed in the paper",
                    _phrase_evaluator(name, 90),
                    name,
                    {
                        "table": "chunks",
                        "column": "text_content",
                        "row_id": chunk["chunk_id"],
                        "page_number": chunk["page_number"],
                    },
                    f"{chunk['chunk_id']}|{name}",
                )
            )
    return found


def _has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Whether the warehouse has ``column`` (one built before it was added has not)."""
    sql = "select count(*) from information_schema.columns where table_name = ? and column_name = ?"
    return bool(con.execute(sql, [table, column]).fetchall()[0][0])


def _labelled_figures(con: duckdb.DuckDBPyConnection, paper: PaperText, column: str) -> list[dict[str, Any]]:
    """The paper's whole figures labelled "Figure N" (a label printed once) whose ``column`` is not NULL."""
    images = _frame(
        con,
        f"select image_id, image_caption, image_label, {column}, page_number from images where ref_paper_id = ? "
        f"and parent_image_id is null and image_label is not null and {column} is not null",
        [paper.paper_id],
    )
    labels = Counter(images["image_label"].to_list()) if not images.is_empty() else Counter()
    return [
        image | {"image_label": image["image_label"].strip()}
        for image in images.iter_rows(named=True)
        if labels[image["image_label"]] == 1 and re.fullmatch(r"(?:Figure|Fig\.)\s*\d+", image["image_label"].strip())
    ]


def _figure_captions(con: duckdb.DuckDBPyConnection, paper: PaperText) -> list[Candidate]:
    found = []
    for image in _labelled_figures(con, paper, "image_caption"):
        label = image["image_label"]
        body = re.sub(r"\$[^$]*\$", " ", image["image_caption"])
        words = _rare_words(paper, _caption_gist(body, 30), 4, exclude=label.split())
        if len(words) < 3:
            continue
        question = _variant(
            image["image_id"],
            (
                "Which figure of the paper shows {words}? Give its label.",
                "Name the figure whose caption is about {words}.",
                "In which figure does the paper illustrate {words}?",
            ),
        ).format(words=_listing(words))
        found.append(
            Candidate(
                "figure_caption",
                question,
                'the figure label as printed, e.g. "Figure 2"',
                {
                    "eval_func": "eval_string_exact_match",
                    "eval_kwargs": {"gold": label, "lowercase": True, "ignore_blank": True},
                },
                label,
                {
                    "table": "images",
                    "column": "image_caption",
                    "row_id": image["image_id"],
                    "page_number": image["page_number"],
                },
                image["image_id"],
            )
        )
    return found


_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9 ()\-+/.,:'&]{2,39}")


def _figure_texts(con: duckdb.DuckDBPyConnection, paper: PaperText) -> list[Candidate]:
    """Pairs of labels printed side by side in a figure (``image_text`` keeps a row's labels two spaces apart): the
    question gives the figure and one label, the answer is its neighbour. A label that is a number, repeats in the
    figure, appears in the caption or is frequent in the paper proves nothing and is skipped."""
    if not _has_column(con, "images", "image_text"):
        return []
    found = []
    for image in _labelled_figures(con, paper, "image_text"):
        label = image["image_label"]
        text, caption = image["image_text"], (image["image_caption"] or "").lower()
        gist = _caption_gist(re.sub(r"\$[^$]*\$", " ", image["image_caption"] or ""), 10)
        for line in text.split("\n"):
            parts = [part.strip() for part in line.split("  ") if part.strip()]
            for before, answer in zip(parts, parts[1:]):
                if not all(_LABEL.fullmatch(p) for p in (before, answer)) or before.lower() == answer.lower():
                    continue
                if text.count(answer) > 1 or text.count(before) > 1 or answer.lower() in caption:
                    continue
                if any(paper.word_counts.get(w.lower(), 0) > MAX_NAME_MENTIONS for w in _WORD.findall(answer)):
                    continue
                question = _variant(
                    f"{image['image_id']}|{answer}",
                    (
                        "In {label} of the paper ({gist}), which label is printed right after “{before}”, on the "
                        "same line?",
                        "{label} of the paper shows {gist}. What label follows “{before}” on the same line of the "
                        "figure?",
                    ),
                ).format(label=label, gist=gist or "its figure", before=before)
                found.append(
                    Candidate(
                        "figure_text",
                        question,
                        "the label as printed in the figure",
                        _phrase_evaluator(answer, 90),
                        answer,
                        {
                            "table": "images",
                            "column": "image_text",
                            "row_id": image["image_id"],
                            "page_number": image["page_number"],
                        },
                        f"{image['image_id']}|{before}|{answer}",
                    )
                )
    return found


def _equation_symbols(con: duckdb.DuckDBPyConnection, paper: PaperText) -> list[Candidate]:
    equations = _frame(
        con,
        "select equation_id, equation_number, page_number, context_after from equations "
        "where ref_paper_id = ? and context_after is not null order by ordinal",
        [paper.paper_id],
    )
    found, seen = [], set()
    for equation in equations.iter_rows(named=True):
        after = re.sub(r"\s+", " ", equation["context_after"])[:400]
        for match in _DEFINITION.finditer(after):
            symbol = re.sub(r"\s*\\in\b.*?(\$?)$", r"\1", match.group("symbol").strip())
            if symbol.startswith("$"):
                symbol = re.sub(r"\s+", "", symbol)  # MinerU spaces every LaTeX token: "$W _ { 0 }$" -> "$W_{0}$"
            definition = match.group("definition").strip()
            if not re.fullmatch(r"[A-Za-z0-9\s\-']+", definition):
                continue  # prose only: no math, no glyphs the text layer lost
            bare = symbol.strip("$").strip()
            if (
                not bare
                or symbol in seen
                or len(definition.split()) < 2
                or bare.lower() in _STOP
                or (bare.isalpha() and len(bare) > 3)
            ):
                continue
            seen.add(symbol)
            number = equation["equation_number"]
            where = f"Equation {number}" if number else f"the display equation on page {equation['page_number']}"
            shown = symbol if symbol.startswith("$") else f"“{symbol}”"
            question = _variant(
                equation["equation_id"] + symbol,
                (
                    "In the paper, what does the symbol {symbol} stand for in {where}?",
                    "Right after {where}, the paper defines {symbol}. What is it?",
                ),
            ).format(symbol=shown, where=where)
            found.append(
                Candidate(
                    "equation_symbol",
                    question,
                    "a short noun phrase",
                    _phrase_evaluator(definition, 85),
                    definition,
                    {
                        "table": "equations",
                        "column": "context_after",
                        "row_id": equation["equation_id"],
                        "page_number": equation["page_number"],
                    },
                    f"{equation['equation_id']}|{symbol}",
                )
            )
    return found


def _entry_author(paper: PaperText, content: str | None) -> tuple[str, str, str] | None:
    """A bibliography entry's first author (as printed), that author's surname and the entry's title, when the entry
    reads "Authors. Year. Title." and the author is a person's name of two to four words whose surname is rare in
    the paper (a frequent one proves nothing)."""
    match = _REFERENCE.match(re.sub(r"\s+", " ", content or "").strip())
    if not match:
        return None
    first = re.split(r",|\band\b|&", match.group("authors"))[0].strip()
    names = first.split()
    if not 2 <= len(names) <= 4 or not all(n[:1].isupper() for n in names):
        return None
    surname = names[-1]
    if len(surname) < 3 or paper.word_counts.get(surname.lower(), 0) > MAX_NAME_MENTIONS:
        return None
    return first, surname, match.group("title").strip()


def _reference_authors(con: duckdb.DuckDBPyConnection, paper: PaperText) -> list[Candidate]:
    references = _frame(
        con,
        "select reference_id, reference_content, page_number from reference where ref_paper_id = ? order by ordinal",
        [paper.paper_id],
    )
    found = []
    for reference in references.iter_rows(named=True):
        entry = _entry_author(paper, reference["reference_content"])
        if entry is None or len(entry[2].split()) < 4:
            continue
        first, _, title = entry
        words = title.split()
        title = " ".join(words[:10]) + (" …" if len(words) > 10 else "")  # enough to find it, not a copy of it
        question = _variant(
            reference["reference_id"],
            (
                "Who is the first author of “{title}”, a work the paper cites?",
                "The paper cites “{title}”. Who wrote it (first author)?",
            ),
        ).format(title=title)
        found.append(
            Candidate(
                "reference_author",
                question,
                "the first author's full name as printed",
                _phrase_evaluator(first, 90),
                first,
                {
                    "table": "reference",
                    "column": "reference_content",
                    "row_id": reference["reference_id"],
                    "page_number": reference["page_number"],
                },
                reference["reference_id"],
            )
        )
    return found


def _reference_citations(con: duckdb.DuckDBPyConnection, paper: PaperText) -> list[Candidate]:
    if not _has_column(con, "reference", "citing_context"):
        return []
    references = _frame(
        con,
        "select reference_id, reference_content, citing_context, page_number from reference "
        "where ref_paper_id = ? and citing_context is not null order by ordinal",
        [paper.paper_id],
    )
    found = []
    for reference in references.iter_rows(named=True):
        entry = _entry_author(paper, reference["reference_content"])
        if entry is None:
            continue
        surname = entry[1]
        # the sentence that cites the fewest works says the most about this one
        sentences = sorted(reference["citing_context"].split("\n"), key=lambda line: len(CITATION.findall(line)))
        said = CITATION.sub(" ", sentences[0])
        words = _rare_words(paper, said, 5, exclude=[surname])
        if len(words) < 3:
            continue
        question = _variant(
            reference["reference_id"],
            (
                "Which work does the paper cite where it writes about {words}? Give its first author.",
                "The paper cites a work when discussing {words}. Who is that work's first author?",
            ),
        ).format(words=_listing(words))
        found.append(
            Candidate(
                "reference_citation",
                question,
                "the first author's surname as printed",
                _phrase_evaluator(surname, 90),
                surname,
                {
                    "table": "reference",
                    "column": "citing_context",
                    "row_id": reference["reference_id"],
                    "page_number": reference["page_number"],
                },
                f"{reference['reference_id']}|cited",
            )
        )
    return found


_ORGANISATION = re.compile(
    r"Universit|Institut|College|Inc\b|Corp|Lab\b|Labs\b|Laborator|Research|Academy|Cent(?:er|re)"
)


def _author_affiliations(con: duckdb.DuckDBPyConnection, paper: PaperText) -> list[Candidate]:
    """Where an author works, as the front matter prints it under their name (``metadata.author_affiliations``,
    aligned with ``authors``): the organisation's name, without the city and country that may follow it."""
    if not _has_column(con, "metadata", "author_affiliations") or not _has_column(con, "metadata", "front_matter"):
        return []
    rows = con.execute(
        "select authors, author_affiliations from metadata where paper_id = ?", [paper.paper_id]
    ).fetchall()
    if not rows or not rows[0][0] or not rows[0][1]:
        return []
    found = []
    for author, affiliations in zip(rows[0][0], rows[0][1]):
        parts = [part.strip() for part in (affiliations or "").split(";")[0].split(",") if part.strip()]
        # "Dept of Computer Science, Ben-Gurion University, Israel": the university, not the department
        organisation = next((part for part in parts if _ORGANISATION.search(part)), parts[0] if parts else "")
        if not author or len(organisation) < 3:
            continue
        question = _variant(
            f"{paper.paper_id}|{author}",
            (
                "Which organisation is {author}, an author of the paper, affiliated with?",
                "Where does {author}, one of the paper's authors, work according to the author list?",
            ),
        ).format(author=author)
        found.append(
            Candidate(
                "author_affiliation",
                question,
                "the organisation's name as printed",
                _phrase_evaluator(organisation, 90),
                organisation,
                {"table": "metadata", "column": "front_matter", "row_id": paper.paper_id, "page_number": 1},
                author,
            )
        )
    return found


GENERATORS: dict[str, Callable[[duckdb.DuckDBPyConnection, PaperText], list[Candidate]]] = {
    "table_cell": _table_cells,
    "sentence_number": _sentence_numbers,
    "figure_caption": _figure_captions,
    "figure_text": _figure_texts,
    "equation_symbol": _equation_symbols,
    "reference_author": _reference_authors,
    "reference_citation": _reference_citations,
    "sentence_name": _sentence_names,
    "author_affiliation": _author_affiliations,
}


# ---------------------------------------------------------------------------------------------------------------
# Verification and assembly


def verify(con: duckdb.DuckDBPyConnection, evidence: dict[str, Any], answer: Any) -> bool:
    """Whether ``answer`` is printed in the evidence row's column (a number as papers print it)."""
    table, column = evidence["table"], evidence["column"]
    key = declared_keys().get(table)  # the key that names an evidence row
    if key is None:
        return False
    rows = con.execute(f'select "{column}" from "{table}" where "{key}" = ?', [evidence["row_id"]]).fetchall()
    if not rows or rows[0][0] is None:
        return False
    row = rows[0]
    needles = answer_needles(answer)
    return bool(needles) and any(contains_needle(str(row[0]), n) for n in needles)


def _example(paper: PaperText, candidate: Candidate) -> dict[str, Any]:
    uid = uuid_lib.uuid5(_NAMESPACE, f"{PROBES_VERSION}|{paper.paper_id}|{candidate.kind}|{candidate.key}")
    return {
        "uuid": str(uid),
        "question": candidate.question,
        "answer_format": candidate.answer_format,
        "tags": ["single", KIND_ELEMENT[candidate.kind], "objective"],
        "anchor_pdf": [paper.paper_id],
        "reference_pdf": [],
        "conference": [paper.volume] if paper.volume else [],
        "evaluator": candidate.evaluator,
        "probe_kind": candidate.kind,
        "gold_answer": candidate.answer,
        "paper_key": paper.paper_key,
        "evidence": candidate.evidence,
        "probes_version": PROBES_VERSION,
    }


def paper_probes(con: duckdb.DuckDBPyConnection, paper_id: str, limit: int = PER_PAPER) -> list[dict[str, Any]]:
    """Up to ``limit`` verified probes of one paper, taken round-robin over the kinds (AirQA rows with evidence)."""
    paper = paper_text(con, paper_id)
    if paper is None:
        return []
    pools = {
        kind: _seeded(paper.paper_id, kind, generate(con, paper), key=lambda c: c.key)
        for kind, generate in GENERATORS.items()
    }
    chosen: list[Candidate] = []
    while len(chosen) < limit and any(pools.values()):
        for kind in KINDS:
            while pools[kind] and len(chosen) < limit:  # the next candidate of the kind that verifies
                candidate = pools[kind].pop(0)
                if verify(con, candidate.evidence, candidate.answer):
                    chosen.append(candidate)
                    break
    return [_example(paper, c) for c in chosen]


def volume_papers(con: duckdb.DuckDBPyConnection, volume: str | None = None) -> list[tuple[str, str, str]]:
    """(volume, paper_key, paper_id) of the warehouse's papers, of one volume when given."""
    sql = "select volume, paper_key, paper_id::varchar from metadata"
    rows = con.execute(
        sql + (" where volume = ?" if volume else "") + " order by paper_key", [volume] if volume else []
    ).fetchall()
    return [(v or "", k or "", p) for v, k, p in rows]
