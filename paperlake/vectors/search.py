"""Vector search over one collection and one view, as the agent's RetrieveFromVectorstore action does it.

Scores are reported larger-is-better whatever the backend returns, and results keep the backend's order:
- BM25: Milvus Lite returns the BM25 score negated as a distance (a Milvus server returns it positive); we report
  ``abs(distance)``, the BM25 score itself.
- COSINE / IP: the similarity as returned. L2: the negated distance.
- hybrid: the fused score (see below).

Hybrid search fuses a BM25 and a dense route over the same cells. The client-side fusions search the configured
route collections (``text_bm25_en`` and the MiniLM collection: Milvus Lite keeps BM25 statistics per segment, so
this makes the BM25 route exactly the BM25 search), or the two fields of ``text_hybrid`` when those are not live;
each route returns its top ``candidates_per_route`` ids, and the two lists are fused here, because neither
Milvus ranker fits routes of unequal strength. RRF takes no weights, and WeightedRanker normalises BM25 with
arctan, which squeezes the top BM25 scores together so that even a 0.9/0.1 weighting let the weaker dense route
reorder them (measured on the labelled queries). The default, ``convex``, is a convex combination of the routes'
scores min-max normalised within this query's candidates (Σ wᵢ·(sᵢ − minᵢ)/(maxᵢ − minᵢ); a cell a route did
not return gets 0 from it), with weights from the config; ``rrf`` is weighted reciprocal rank fusion,
Σ wᵢ/(k + rankᵢ). ``milvus-rrf`` and ``milvus-weighted`` fuse inside Milvus with ``hybrid_search`` (RRFRanker(k),
which takes no weights, or WeightedRanker(weights)): the same result a Milvus server would compute, kept for
comparison and for deployments that want the fusion server-side; they search ``text_hybrid``. ``hybrid=True`` on a
single-vector collection searches the configured hybrid collection instead, and each hit names the collection that
answered (the hybrid one for fused hits).

A filter is validated before Milvus sees it (see ``filters``); whatever Milvus still refuses or fails on is raised as
:class:`SearchFailed`, one line naming the collection, never as a raw ``MilvusException``.
"""

from __future__ import annotations

import re
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterator, Sequence

from paperlake.vectors.config import FUSIONS, CollectionSpec, VectorFieldSpec
from paperlake.vectors.filters import FilterError, quote_literal, validate_filter
from paperlake.vectors.pymilvus_names import AnnSearchRequest, MilvusException, RRFRanker, WeightedRanker
from paperlake.vectors.rerank import load_model, order
from paperlake.vectors.store import VectorStore

__all__ = ["FilterError", "Hit", "SearchFailed", "candidates", "glued", "search"]

_MAX_REASON_CHARS = 300


class SearchFailed(RuntimeError):
    """Milvus refused or failed a search; the message is one line naming the collection and Milvus' reason."""


@dataclass(frozen=True)
class Hit:
    score: float
    pdf_id: str
    page_number: int
    table_name: str
    column_name: str
    primary_key: str
    text: str | None
    bbox: list[float] | None
    collection: str
    entity_id: str = ""
    placed: bool = False  # put where it is by a rule of the search (a named object, an intent's lift), not by scores


def _score(metric: str, distance: float) -> float:
    if metric == "BM25":
        return abs(distance)
    if metric == "L2":
        return -distance
    return distance


def _query_vector(store: VectorStore, vector: VectorFieldSpec, query: str):
    if vector.kind == "bm25":
        return bm25_query(query)
    return store.query_vector(vector.encoder, query)


# "delta_t", "W^Q", "x_{i}": a symbol typed as LaTeX's source; the analyzer keeps "delta_t" one token, which no text
# holds (MinerU prints "\\delta _ { t }": "delta", "t"; the text layer "δ")
_TYPED_SYMBOL = re.compile(r"(?<=\w)[_^]\{?(?=\w)|(?<=\w)\}")


def bm25_query(query: str) -> str:
    """The question as the BM25 route reads it: a symbol typed with ``_`` or ``^`` split into its letters, and a
    Greek letter followed by its name ("δ" → "δ delta"), since MinerU's LaTeX spells the letters out."""
    text = _TYPED_SYMBOL.sub(" ", query)
    named = []
    for char in dict.fromkeys(unicodedata.normalize("NFKC", text)):
        name = unicodedata.name(char, "")
        if name.startswith(("GREEK SMALL LETTER ", "GREEK CAPITAL LETTER ")) and " WITH " not in name:
            named.append(name.rsplit(" ", 1)[-1].lower())
    return " ".join([text, *named]) if named else text


def search(
    store: VectorStore,
    query: str,
    collection: str,
    table_name: str | None = None,
    column_name: str | None = None,
    filter: str = "",
    limit: int = 5,
    hybrid: bool = False,
    weights: Sequence[float] | None = None,
    fusion: str | None = None,
    rerank: bool = True,
) -> list[Hit]:
    """Top ``limit`` entities of ``collection`` for ``query``, restricted to the view and the (validated) filter.

    On a hybrid collection, ``fusion`` (``convex`` | ``rrf`` | ``milvus-rrf`` | ``milvus-weighted``) and ``weights``
    (one per vector field) override the configured ones. A client-side fusion over every view (no table or column)
    keeps its first ``hybrid.rerank_keep`` hits and orders the rest of its first ``hybrid.rerank_pool`` candidates by
    :mod:`paperlake.vectors.rerank` (``rerank=False``, or a pool of 0, leaves the fused order); a hit keeps its fused
    score. Raises :class:`FilterError` for a bad filter, :class:`SearchFailed` when Milvus fails.
    """
    with _milvus_failures(collection):
        return _search(
            store, query, collection, table_name, column_name, filter, limit, hybrid, weights, fusion, rerank=rerank
        )


def candidates(store: VectorStore, query: str, collection: str, filter: str = "", limit: int = 5) -> list[Hit]:
    """What :func:`search` over every view of a hybrid ``collection`` reorders for a top-``limit`` request: its first
    ``hybrid.rerank_pool`` candidates in the fused order (``benchmarks/train_rerank.py`` fits the model on them)."""
    with _milvus_failures(collection):
        return _search(store, query, collection, None, None, filter, limit, True, None, None, pooled=True)


@contextmanager
def _milvus_failures(collection: str) -> Iterator[None]:
    """Whatever Milvus raises, as :class:`SearchFailed`: one line naming the collection and Milvus' reason."""
    try:
        yield
    except MilvusException as problem:
        reason = " ".join(str(problem.message or problem).split())
        if len(reason) > _MAX_REASON_CHARS:
            reason = reason[: _MAX_REASON_CHARS - 1] + "…"
        raise SearchFailed(f"Milvus failed the search of {collection}: {reason}") from problem


def _search(
    store: VectorStore,
    query: str,
    collection: str,
    table_name: str | None,
    column_name: str | None,
    filter: str,
    limit: int,
    hybrid: bool,
    weights: Sequence[float] | None,
    fusion: str | None,
    *,
    rerank: bool = True,
    pooled: bool = False,
) -> list[Hit]:
    if not query or not query.strip():
        raise ValueError("empty query")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as problem:
        raise ValueError(
            f"the query is not valid Unicode at character {problem.start + 1} "
            "(an unpaired surrogate: undecodable input bytes)"
        ) from None
    if limit <= 0:
        raise ValueError("limit must be positive")
    spec = store.config.collection(collection)
    if hybrid and not spec.is_hybrid:
        spec = store.config.collection(store.config.hybrid_collection)
    if not store.is_available(spec):
        raise ValueError(f"collection {spec.name} is not active here: {store.config.inactive_reason(spec)}")
    if weights is not None and len(weights) != len(spec.vectors):
        raise ValueError(
            f"{spec.name} fuses {len(spec.vectors)} routes "
            f"({', '.join(v.field for v in spec.vectors)}); got {len(weights)} weights"
        )
    fusion = fusion or store.config.fusion
    if fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {FUSIONS}, got {fusion!r}")

    clauses = [f"({validated})"] if (validated := validate_filter(filter)) else []
    if not store.exists(spec.name):
        return []
    store.load(spec.name)
    partitions = None
    if table_name is not None and column_name is not None:
        partition = store.view_partition(spec.name, table_name, column_name, create=False)
        if partition is not None:
            partitions = [partition]  # holds exactly this view, so no view predicate: Milvus Lite evaluates it per row
        elif spec.is_hybrid and not fusion.startswith("milvus-") and _routes(store, spec)[0][0].name != spec.name:
            # a hybrid collection without this view (`without_views`: the table lines) searched through its route
            # collections: each route looks up its own partition of the view, and BM25's holds every text cell
            partitions = []
        else:
            return []
    else:
        if column_name is not None:
            clauses.insert(0, f"column_name == {quote_literal(column_name)}")
        if table_name is not None:
            clauses.insert(0, f"table_name == {quote_literal(table_name)}")
    expression = " and ".join(clauses)

    output_fields = list(_output_fields(spec))
    if spec.is_hybrid:
        depth = max(store.config.candidates_per_route, limit)
        if weights is None:
            weights = store.config.hybrid_weights or [1.0] * len(spec.vectors)
        if fusion.startswith("milvus-"):
            requests = [
                AnnSearchRequest(
                    data=[_query_vector(store, v, query)],
                    anns_field=v.field,
                    param=dict(v.search_params),
                    limit=depth,
                    expr=expression or None,
                )
                for v in spec.vectors
            ]
            ranker = RRFRanker(store.config.rrf_k) if fusion == "milvus-rrf" else WeightedRanker(*weights)
            found = store.client.hybrid_search(
                spec.name, requests, ranker, limit=limit, output_fields=output_fields, partition_names=partitions
            )
            return [_hit(spec, "fused", raw) for raw in (found[0] if found else [])]
        # Each route returns ids and scores only (one light field: Milvus Lite assembles every output field of every
        # candidate in Python, so fetching the text of 2 x depth candidates cost more than both searches); the fused
        # top ``limit`` are then fetched by primary key, which every collection shares.
        fused, sources = _route_and_fuse(
            store, spec, query, expression, partitions, table_name, column_name, depth, weights, fusion
        )
        placed: set[str] = set()
        if partitions is None:  # every view: the equations' passages and the front matter among them
            fused = _quoted_first(store, sources, fused, query)
            named = _named_equation_ids(store, sources, expression, query)
            named += _named_figure_ids(store, sources, expression, query, [key for key, _ in fused])
            named += _named_table_ids(store, sources, expression, query, fused)
            named += _cited_entry_ids(store, sources, expression, query)
            named += _front_matter_ids(store, sources, expression, query)
            named += _own_title_ids(store, sources, expression, query)
            named += _acknowledgment_ids(store, sources, expression, query)
            asked = [] if named else [intent for intent in _INTENTS if intent[0].search(query)]
            if len(asked) > 1:  # a symbol in a question about a plot or a cited work ("(k, epsilon)-anonymity")
                asked = [intent for intent in asked if intent[0] is not _ASKS_SYMBOL]
            for _, views, cells in asked:
                within = f"({expression}) and {views}" if expression else views
                best, _ = _route_and_fuse(store, spec, query, within, None, None, None, depth, weights, fusion)
                if views == _REFERENCE_ROWS:
                    best = _best_references(store, sources, best)
                fused = _second(fused, [key for key, _ in best[:cells]])
                placed.update(key for key, _ in best[:cells])
            fused = _named_first(fused, named)
            placed.update(named)
        # the reranker's pool: every view only (a view's own search has nothing to reorder across views)
        pool = store.config.rerank_pool if partitions is None and (rerank or pooled) else 0
        fused = fused[: max(limit, pool)]
        rows: dict[str, dict] = {}
        for source in dict.fromkeys(sources):
            missing = [key for key, _ in fused if key not in rows]
            if missing:
                rows.update(
                    (str(row["id"]), row) for row in store.client.get(source, ids=missing, output_fields=output_fields)
                )
        # a cell deleted between the two calls (a concurrent re-sync) is dropped rather than reported without fields
        found = [(key, score) for key, score in fused if key in rows]
        if partitions is None:  # every view: a citing sentence brings the entry it cites, a caption its figure's words
            found = _companions_after(store, sources[0], found, rows, output_fields, max(limit, pool), limit)
        if pool and not pooled:
            cells = [rows[key] for key, _ in found]
            shown = order(
                load_model(),
                query,
                [(f"{cell.get('table_name')}.{cell.get('column_name')}", cell.get("text") or "") for cell in cells],
                store.config.rerank_keep,
                glued(
                    [(cell.get("table_name"), cell.get("column_name")) for cell in cells],
                    [cell.get("primary_key") for cell in cells],
                ),
                [key in placed for key, _ in found],
            )
            found = [found[index] for index in shown]
        if not pooled:
            found = found[:limit]
        return [
            replace(_hit(spec, "fused", {**rows[key], "distance": score}), placed=key in placed) for key, score in found
        ]
    vector = spec.vectors[0]
    results = store.client.search(
        spec.name,
        data=[_query_vector(store, vector, query)],
        anns_field=vector.field,
        search_params={"params": dict(vector.search_params)},
        filter=expression,
        limit=limit,
        output_fields=output_fields,
        partition_names=partitions,
    )
    return [_hit(spec, vector.metric, raw) for raw in (results[0] if results else [])]


def _route_and_fuse(
    store: VectorStore,
    spec: CollectionSpec,
    query: str,
    expression: str,
    partitions: list[str] | None,
    table_name: str | None,
    column_name: str | None,
    depth: int,
    weights: Sequence[float],
    fusion: str,
) -> tuple[list[tuple[str, float]], list[str]]:
    """Each route's ``depth`` best (ids and scores), fused; and the collections searched."""
    pairs = _routes(store, spec)
    routes: list[list[tuple[str, float]]] = [[] for _ in pairs]
    scales: list = [None] * len(pairs)
    sources = []
    for index, (route_spec, vector) in enumerate(pairs):
        route_partitions = partitions
        if partitions is not None:
            route_partition = store.view_partition(route_spec.name, table_name, column_name, create=False)
            if route_partition is None:
                continue
            route_partitions = [route_partition]
        store.load(route_spec.name)
        seen = vector.kind == "dense" and store.config.coverage_weighting and route_spec.modality == "text"
        found = store.client.search(
            route_spec.name,
            data=[_query_vector(store, vector, query)],
            anns_field=vector.field,
            search_params={"params": dict(vector.search_params)},
            filter=expression,
            limit=depth,
            output_fields=["text"] if seen else ["pdf_id"],
            partition_names=route_partitions,
        )
        raws = found[0] if found else []
        routes[index] = [(str(raw["id"]), _score(vector.metric, float(raw["distance"]))) for raw in raws]
        if seen and raws:
            texts = [(raw.get("entity", raw).get("text") or "") for raw in raws]
            fractions = store.encoders.get(vector.encoder).seen_fractions(texts)
            scales[index] = {str(raw["id"]): fraction for raw, fraction in zip(raws, fractions)}
        sources.append(route_spec.name)
    return fuse(routes, weights, fusion, store.config.rrf_k, scales), sources


def fuse(
    routes: Sequence[Sequence[tuple[str, float]]],
    weights: Sequence[float],
    fusion: str = "convex",
    rrf_k: int = 60,
    scales: Sequence[dict[str, float] | None] | None = None,
) -> list[tuple[str, float]]:
    """Fuse ranked routes, each a best-first list of (id, larger-is-better score), into (id, fused score), best first.

    ``convex``: Σ wᵢ·(sᵢ − minᵢ)/(maxᵢ − minᵢ) over the route's own list (a route whose scores are all equal gives
    each of its hits 1); ``rrf``: Σ wᵢ/(rrf_k + rankᵢ). An id a route did not return gets nothing from it.
    ``scales`` (one per route, or None) multiplies a route's contribution per id: coverage weighting passes the share
    of each cell the dense encoder saw, so a vector of a page's first quarter speaks for a quarter of the page. Ties
    keep the order of first appearance, routes taken in field order.
    """
    if fusion not in ("convex", "rrf"):
        raise ValueError(f"client-side fusion is convex or rrf, got {fusion!r}")
    scales = list(scales) if scales is not None else [None] * len(routes)
    scores: dict[str, float] = {}
    for weight, route, scale in zip(weights, routes, scales):
        if not route:
            continue
        low = min(score for _, score in route)
        high = max(score for _, score in route)
        for rank, (key, score) in enumerate(route, 1):
            if fusion == "rrf":
                part = weight / (rrf_k + rank)
            else:
                part = weight * ((score - low) / (high - low) if high > low else 1.0)
            if scale is not None:
                part *= scale.get(key, 1.0)
            scores[key] = scores.get(key, 0.0) + part
    return sorted(scores.items(), key=lambda item: -item[1])


# "Equation (3)", "Eq. 3", "equation 12": a question that names a numbered equation
_EQUATION_REFERENCE = re.compile(r"\b(?:equation|eq\.)\s*\(?(\d{1,3})\)?", re.IGNORECASE)
_EQUATION_VIEW = ("equations", "equation_passage")


def _named_equation_ids(store: VectorStore, sources: list[str], expression: str, query: str) -> list[str]:
    """The entities of the equations' passages (``Equation N`` first, then the sentences around the formula) for
    every equation the question names by its number, within the search's filter (one paper, as a rule)."""
    numbers = list(dict.fromkeys(match.group(1) for match in _EQUATION_REFERENCE.finditer(query)))
    if not numbers or not sources:
        return []
    rows = _view_cells(store, sources[0], expression, *_EQUATION_VIEW)
    heads = {
        str(row["id"]): (row.get("text") or "").split("\n", 1)[0].replace("(", "").replace(")", "").strip()
        for row in rows
    }
    return [key for number in numbers for key, head in heads.items() if head == f"Equation {number}"]


_NAMED_LIMIT = 1000  # equations' passages read to find the named ones (a paper has tens)

_QUOTED_DEPTH = 20  # fused candidates whose texts are read (quoted strings, a named table's lines)
_NAMED_OBJECTS = 3  # objects put first for a question that names them: those of a few papers at most


def _quoted_first(
    store: VectorStore, sources: list[str], fused: list[tuple[str, float]], query: str
) -> list[tuple[str, float]]:
    """Among the first fused candidates, those printing more of the strings the question quotes ("the label
    “Threshold”") first, the fused order kept otherwise: a quoted string is asked for as it is printed, which
    neither route holds to (BM25 weighs its words as any others, the dense route hardly sees them)."""
    quoted = _quoted_strings(query)
    if not quoted or not fused or not sources:
        return fused
    head = fused[:_QUOTED_DEPTH]
    texts = {
        str(row["id"]): _flat(row.get("text") or "")
        for row in store.client.get(sources[0], ids=[key for key, _ in head], output_fields=["text"])
    }
    printed = {key: sum(q in texts.get(key, "") for q in quoted) for key, _ in head}
    if not any(printed.values()):
        return fused
    top = fused[0][1]
    reordered = sorted(head, key=lambda pair: -printed[pair[0]])  # stable: the fused order within each count
    return [(key, top + printed[key] * 1e-7 if printed[key] else score) for key, score in reordered] + fused[
        _QUOTED_DEPTH:
    ]


_TABLE_REFERENCE = re.compile(r"\b(?:table|tab\.)\s*([A-Z]?\d{1,3}(?:\.\d{1,2})?)\b", re.IGNORECASE)
_TABLE_VIEWS = ("tables", "table_rows", "table_columns")


def _view_cells(store: VectorStore, source: str, expression: str, table: str, column: str) -> list[dict]:
    """Every cell of one view within the search's filter: its id, text and row's primary key."""
    view = f"table_name == {quote_literal(table)} and column_name == {quote_literal(column)}"
    return store.client.query(
        source,
        filter=f"({expression}) and {view}" if expression else view,
        output_fields=["text", "primary_key"],
        limit=_NAMED_LIMIT,
    )


def _named_table_ids(
    store: VectorStore, sources: list[str], expression: str, query: str, fused: list[tuple[str, float]]
) -> list[str]:
    """The cells of every table the question names by its number ("Table 2", "Tab. 2", "Table A.1"), within the
    search's filter, when that leaves a few tables (one paper's, as a rule): its row and column lines among the
    first fused candidates, in the fused order, then its content (every cell of it). Short cells elsewhere that
    share the question's labels (a plot's legend, a sentence naming the same model) otherwise outrank them."""
    numbers = list(dict.fromkeys(match.group(1) for match in _TABLE_REFERENCE.finditer(query)))
    if not numbers or not sources:
        return []
    rows = _view_cells(store, sources[0], expression, "tables", "table_caption")
    labels = [re.compile(rf"(?:table|tab\.)\s*{re.escape(number)}\b", re.IGNORECASE) for number in numbers]
    wanted = [row["primary_key"] for label in labels for row in rows if label.match((row.get("text") or "").strip())]
    if not wanted or len(wanted) > _NAMED_OBJECTS:
        return []
    head = [key for key, _ in fused[:_QUOTED_DEPTH]]
    lines = [
        str(row["id"])
        for row in store.client.get(sources[0], ids=head, output_fields=["text", "table_name"])
        if row.get("table_name") in _TABLE_VIEWS[1:]
        and any(label.match((row.get("text") or "").strip()) for label in labels)
    ]
    lines.sort(key=head.index)
    contents = store.client.query(
        sources[0],
        filter=f"table_name == 'tables' and column_name == 'table_content' and primary_key in "
        f"[{', '.join(quote_literal(key) for key in wanted)}]",
        output_fields=["primary_key"],
        limit=_NAMED_LIMIT,
    )
    contents.sort(key=lambda row: wanted.index(row["primary_key"]))
    return lines[:2] + [str(row["id"]) for row in contents]


_CITING_VIEW = ("reference", "citing_context")
_ENTRY_VIEW = ("reference", "reference_content")
# a cell's hit brings its row's companion cell: a citing sentence its reference entry, a caption its figure's words
_COMPANIONS = {_CITING_VIEW: _ENTRY_VIEW, ("images", "image_caption"): ("images", "image_text")}


def glued(views: Sequence[tuple[str, str]], primary_keys: Sequence[str]) -> list[bool]:
    """For each hit, whether it is the companion (:data:`_COMPANIONS`) of the hit before it: the reranker moves the
    two as one (``paperlake.vectors.rerank.order``)."""
    return [
        index > 0 and _COMPANIONS.get(views[index - 1]) == views[index] and primary_keys[index - 1] == key
        for index, key in enumerate(primary_keys)
    ]


def _companions_after(
    store: VectorStore,
    source: str,
    found: list[tuple[str, float]],
    rows: dict[str, dict],
    output_fields: list[str],
    limit: int,
    shown: int,
) -> list[tuple[str, float]]:
    """Each hit of a view with a companion (:data:`_COMPANIONS`) followed by its row's companion cell, at the hit's
    score, unless the companion is among the first ``shown`` hits (a companion further down moves up); cut back to
    ``limit``. A question names a cited work by what the paper does with it, which is the citing sentence, and asks
    who or what it is, which is the entry; it names a figure by what it shows, which is the caption, and asks what it
    prints, which is the figure's words."""
    wanted: dict[str, tuple[tuple[str, str], str]] = {}
    for key, _ in found:
        view = (rows[key].get("table_name"), rows[key].get("column_name"))
        if view in _COMPANIONS:
            wanted[key] = (_COMPANIONS[view], rows[key]["primary_key"])
    if not wanted:
        return found
    companion_of: dict[tuple[tuple[str, str], str], dict] = {}
    for view in dict.fromkeys(companion for companion, _ in wanted.values()):
        keys = [primary for companion, primary in wanted.values() if companion == view]
        table, column = view
        partition = store.view_partition(source, table, column)  # the view's own partition: a far shorter scan
        for row in store.client.query(
            source,
            filter=f"table_name == {quote_literal(table)} and column_name == {quote_literal(column)} and "
            f"primary_key in [{', '.join(quote_literal(key) for key in dict.fromkeys(keys))}]",
            output_fields=output_fields,
            limit=_NAMED_LIMIT,
            partition_names=[partition] if partition else None,
        ):
            companion_of[(view, row["primary_key"])] = row
    present = {key for key, _ in found[:shown]}
    emitted: set[str] = set()
    result: list[tuple[str, float]] = []
    for key, score in found:
        if key in emitted:
            continue  # a companion that moved up, met again at its own place
        result.append((key, score))
        emitted.add(key)
        present.add(key)
        companion = companion_of.get(wanted.get(key))
        if companion is not None and (companion_id := str(companion["id"])) not in present:
            rows.setdefault(companion_id, companion)
            present.add(companion_id)
            emitted.add(companion_id)
            result.append((companion_id, score))
    return result[:limit]


# a citation as papers print it: "He et al., 2021", "He et al. (2021)", "Yu and Ananiadou, 2024b", "(Speer, 2022)"
_CITATION = re.compile(
    r"\b([A-Z][\w'’-]+)(?:\s+et\s+al\.?,?|\s+(?:and|&)\s+[A-Z][\w'’-]+,?|,)\s*\(?((?:19|20)\d\d)([a-z]?)\)?(?!\d)"
)


def _cited_entry_ids(store: VectorStore, sources: list[str], expression: str, query: str) -> list[str]:
    """The reference entries, within the search's filter, of the works the question cites as the paper does ("the
    NLI model (He et al., 2021)"), when that leaves a few: an entry holds the surname and the year, but is one short
    cell among many that print the same surname (its citing sentences, the page of the bibliography)."""
    citations = list(dict.fromkeys(_CITATION.findall(query)))
    if not citations or not sources:
        return []
    rows = _view_cells(store, sources[0], expression, *_ENTRY_VIEW)
    named = []
    for surname, year, suffix in citations:
        printed = re.compile(rf"\b{re.escape(year)}{suffix or '[a-z]?'}\b")
        matches = [
            str(row["id"])
            for row in rows
            if re.search(rf"\b{re.escape(surname)}\b", row.get("text") or "") and printed.search(row.get("text") or "")
        ]
        if len(matches) <= _NAMED_OBJECTS:
            named += matches
    return named


_FIGURE_REFERENCE = re.compile(r"\b(?:figure|fig\.)\s*(\d{1,3})\b", re.IGNORECASE)


# A question about what a figure shows, the figure not named by its number: a plot, a chart, a diagram, a legend, an
# axis ("the bar chart of …", "the legend of the overview diagram"). "Figure" alone is not one: "what figure does the
# paper report" asks for a number.
_ASKS_FIGURE = re.compile(
    r"\b(?:plots?|plotted|charts?|diagrams?|legends?|ax[ie]s|heat ?maps?|histograms?|curves?|panels?|bars?|"
    r"scatter|violin|illustrations?)\b",
    re.IGNORECASE,
)
# A question about a cited work: what the paper cites, borrows or follows, a prior or earlier work, whose idea it is
_ASKS_CITED = re.compile(
    r"(?:^|[,;:]\s*)whose\b|"  # "Whose method …?", not "the figure whose caption …"
    r"\b(?:cit(?:e|es|ed|ing|ations?)|prior|earlier|previous|"
    r"(?:which|what)\s+(?:\w+\s+)?(?:paper|work|study|software|toolkit|library|release|textbook|book)'?s?|"
    r"(?:paper|work|study|article)\s+(?:introducing|proposing|(?:that|which)\s+(?:introduced|proposed))|"
    # "that paper's title", "the title of their paper": a cited work's (not "this paper's title")
    r"(?:that|its|their)\s+(?:[\w-]+\s+){0,2}?(?:[\w-]+'s\s+)?title|title\s+of\s+(?:that|their|its)"
    r")\b",
    re.IGNORECASE,
)
# A question that names a mathematical symbol as typed ("delta_t", "W^Q", "x_{i}"), as printed ("λ"), or by a Greek
# letter's name in lower case without an article ("the role of lambda"; not "the delta between two runs", "Lambda
# Labs"), the equation not named by its number: the symbol's definition is in an equation's passage, a short cell
# whose other words the question seldom shares
_GREEK_NAMES = (
    "alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|vartheta|iota|kappa|lambda|mu|nu|xi|rho|sigma|tau|"
    "upsilon|phi|varphi|chi|psi|omega"
)
_ASKS_SYMBOL = re.compile(
    r"(?<![\w-])[A-Za-z]\w{0,5}[_^]\{?\w{1,4}\}?(?![\w-])|[α-ωΑ-Ω]|"
    rf"(?<![\w-])(?<!\bthe )(?<!\ba )(?<!\ban )(?:{_GREEK_NAMES})(?![\w-])"
)
# Per intent, the views whose best cells follow the first hit, and how many: the words such a question asks about are
# a few short labels or one entry, which longer passages sharing the question's other words outrank; the citing
# sentences bring their entries after them (:data:`_COMPANIONS`), the captions their figure's words
_REFERENCE_ROWS = "table_name == 'reference'"
_INTENTS = (
    (_ASKS_FIGURE, "table_name == 'images'", 2),
    (_ASKS_CITED, _REFERENCE_ROWS, 2),
    (_ASKS_SYMBOL, f"table_name == '{_EQUATION_VIEW[0]}' and column_name == '{_EQUATION_VIEW[1]}'", 1),
)


def _best_references(store: VectorStore, sources: list[str], fused: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Reference rows, best first, each scored by the sum of its cells' fused scores (its citing sentences and its
    entry): the best as its citing sentence (which brings its entry, :data:`_COMPANIONS`), the others as their
    entries (each as its other cell when that one did not rank). One sentence often cites several works ("NanoGPT
    (Karpathy, 2022)" beside "the protocol of (Lee et al., 2024)") and is then the citing sentence of each; the
    entry that also has the question's words is the work asked about, and the runner-up's entry is where it is."""
    if not fused or not sources:
        return fused
    rows = store.client.get(sources[0], ids=[key for key, _ in fused], output_fields=["primary_key", "column_name"])
    cells = {str(row["id"]): row for row in rows}
    totals: dict[str, float] = {}
    citing: dict[str, str] = {}
    entry: dict[str, str] = {}
    for key, score in fused:
        row = cells.get(key)
        if row is None:
            continue
        primary = row["primary_key"]
        totals[primary] = totals.get(primary, 0.0) + score
        (citing if row["column_name"] == _CITING_VIEW[1] else entry).setdefault(primary, key)
    ranked = sorted(totals, key=lambda primary: -totals[primary])  # stable: ties keep the fused order
    shown = [citing.get(primary) or entry[primary] for primary in ranked[:1]]
    shown += [entry.get(primary) or citing[primary] for primary in ranked[1:]]
    return [(key, totals[primary]) for key, primary in zip(shown, ranked)]


def _named_figure_ids(
    store: VectorStore, sources: list[str], expression: str, query: str, ranked: list[str]
) -> list[str]:
    """The cells of every figure the question names by its number ("Figure 3", "Fig. 3"), within the search's
    filter, when that leaves a few figures (one paper's, as a rule): neither route ranks them first, since the
    question's other words often describe the figure as its caption does not, or quote one of its labels. A figure's
    caption and words are ordered by what the question quotes, then by the question's words each has and the other
    lacks, then by the fused order (``ranked``); else the caption comes first."""
    numbers = list(dict.fromkeys(match.group(1) for match in _FIGURE_REFERENCE.finditer(query)))
    if not numbers or not sources:
        return []
    rows = _view_cells(store, sources[0], expression, "images", "image_caption")
    wanted = [
        row["primary_key"]
        for number in numbers
        for row in rows
        if re.match(rf"(?:figure|fig\.)\s*{number}\b", (row.get("text") or "").strip(), re.IGNORECASE)
    ]
    if not wanted or len(wanted) > _NAMED_OBJECTS:
        return []
    cells = store.client.query(
        sources[0],
        filter=f"table_name == 'images' and primary_key in [{', '.join(quote_literal(key) for key in wanted)}]",
        output_fields=["primary_key", "column_name", "text"],
        limit=_NAMED_LIMIT,
    )
    words = _words(query)
    quoted = _quoted_strings(query)
    own = {}  # per cell: the question's quoted strings it prints, then its words that the figure's other cells lack
    for row in cells:
        others = set().union(
            *(_words(o.get("text") or "") for o in cells if o is not row and o["primary_key"] == row["primary_key"])
        )
        text = row.get("text") or ""
        own[str(row["id"])] = (
            sum(q in _flat(text) for q in quoted),
            len((words & _words(text)) - others),
        )
    rank = {key: index for index, key in enumerate(ranked)}
    order = {"image_caption": 0, "image_text": 1}
    cells.sort(
        key=lambda row: (
            wanted.index(row["primary_key"]),
            tuple(-n for n in own[str(row["id"])]),
            rank.get(str(row["id"]), len(rank)),
            order.get(row["column_name"], 2),
        )
    )
    return [str(row["id"]) for row in cells]


_QUOTED = re.compile(r"[“\"]([^”\"]{1,80})[”\"]")


def _quoted_strings(query: str) -> list[str]:
    """The strings a question quotes, as :func:`_flat` writes texts."""
    return [_flat(q) for q in _QUOTED.findall(query) if q.strip()]


def _flat(text: str) -> str:
    return " ".join(text.lower().split())


def _words(text: str) -> set[str]:
    return {word for word in re.findall(r"\w[\w'’-]*", text.lower()) if len(word) > 2}


# A question about where its authors work: an affiliation or an e-mail; an organisation of a kind that an author is
# from, works at or belongs to ("which company released the model the authors fine-tune?" is not one); where a named
# person works
_AFFILIATION_WORD = re.compile(r"\baffiliat\w*|\be-?mail", re.IGNORECASE)
_ORGANISATION_KIND = re.compile(
    r"\b(?:organi[sz]ations?|institutions?|institutes?|universit(?:y|ies)|compan(?:y|ies)|labs?|laborator(?:y|ies)|"
    r"departments?)\b",
    re.IGNORECASE,
)
_AUTHOR_FROM = re.compile(r"\bauthors?\b[^?]*?\b(?:from|work\w*|based|belong\w*)\b", re.IGNORECASE)
_PERSON_FROM = re.compile(r"\b(?:is|are)\s+[A-Z][\w'’-]+\s+[A-Z][\w'’-]+\s+(?:from|at|with)\b")
_WHERE_SOMEONE_WORKS = re.compile(r"\b[Ww]here\b[^?]*?(?:\bauthors?\b|\b[A-Z][\w'’-]+\s+[A-Z][\w'’-]+)[^?]*\bwork")


# A question about who wrote the paper itself ("the first author of the survey", "the last-listed author of the X
# paper", "who wrote this paper"), not a work it cites ("Who is that work's first author?", "the first author of the
# paper introducing them")
_AUTHORSHIP = re.compile(
    r"\b(?:(?:first|second|third|last|corresponding|senior|lead|sole)(?:-(?:listed|named|mentioned))?\s+"
    r"authors?\s+of|who\s+(?:wrote|authored))\s+(?:the|this)\s+(?:[\w-]+\s+){0,2}?(?:paper|survey|article|study)\b",
    re.IGNORECASE,
)


def _asks_affiliation(query: str) -> bool:
    return bool(
        _AFFILIATION_WORD.search(query)
        or (_AUTHORSHIP.search(query) and not _ASKS_CITED.search(query))
        or (_ORGANISATION_KIND.search(query) and (_AUTHOR_FROM.search(query) or _PERSON_FROM.search(query)))
        or _WHERE_SOMEONE_WORKS.search(query)
    )


_FRONT_MATTER_VIEW = ("metadata", "front_matter")
_CAPITALISED = re.compile(r"(?<=\s)[A-Z][\w\-'’]+")


def _front_matter_ids(store: VectorStore, sources: list[str], expression: str, query: str) -> list[str]:
    """For a question about affiliations, the front matter (authors, affiliations, e-mails) within the search's
    filter that names a person the question names, if a few do; when none does, the front matter of the filter's
    papers if they are a few. Neither route ranks it first: the question's words are "affiliated" and a name, and
    the name is printed in the references and their citing sentences too, often more than once."""
    if not sources or not _asks_affiliation(query):
        return []
    rows = _view_cells(store, sources[0], expression, *_FRONT_MATTER_VIEW)
    names = set(_CAPITALISED.findall(query))
    named = [str(row["id"]) for row in rows if names & set(re.findall(r"[\w\-'’]+", row.get("text") or ""))]
    if named:  # a name many front matters print ("University" in "Besides Stanford University, …") picks none
        return named if len(named) <= _NAMED_OBJECTS else []
    return [str(row["id"]) for row in rows] if expression and len(rows) <= _NAMED_OBJECTS else []


# A question about the paper's own title ("the full subtitle of the ARES paper", "this paper's title"); a cited work's
# title is _ASKS_CITED's ("that paper's title", "the title of their paper", "the paper introducing X")
_ASKS_OWN_TITLE = re.compile(
    r"\bsub-?title\b|"
    r"\btitle\s+of\s+(?:the|this)\s+(?:[\w-]+\s+){0,2}?(?:paper|article|study|survey|work)\b|"
    r"\b(?:the|this)\s+(?:[\w-]+\s+){0,2}?(?:paper|article|study|survey)'s\s+(?:full\s+)?title\b|"
    r"\bwhat\s+is\s+(?:the|this)\s+(?:paper|article|study|survey)\s+(?:called|titled)\b",
    re.IGNORECASE,
)
_TITLE_VIEW = ("metadata", "title")


def _own_title_ids(store: VectorStore, sources: list[str], expression: str, query: str) -> list[str]:
    """For a question about the paper's own title, the titles of the filter's papers if they are a few: the title
    shares a word or two with such a question, which every passage about the paper's method shares too."""
    if not sources or not expression or not _ASKS_OWN_TITLE.search(query) or _ASKS_CITED.search(query):
        return []
    rows = _view_cells(store, sources[0], expression, *_TITLE_VIEW)
    return [str(row["id"]) for row in rows] if len(rows) <= _NAMED_OBJECTS else []


# A question about who funded or supported the work: the answer is in the acknowledgments
_ASKS_FUNDING = re.compile(
    r"\b(?:fund(?:ed|ing|s|ers?)?|grants?|sponsor\w*|acknowledg\w*|financ\w*\s+support\w*|"
    r"supported\s+(?:in\s+part\s+)?by)\b",
    re.IGNORECASE,
)
_ACKNOWLEDGMENTS = re.compile(r"^\W*(?:\d+\W*)?acknowledge?ments?\b|^\W*funding\b", re.IGNORECASE)


def _acknowledgment_ids(store: VectorStore, sources: list[str], expression: str, query: str) -> list[str]:
    """For a question about funding, the acknowledgments sections of the filter's papers if they are a few: a
    funder's name is seldom a word of the question, and "supported" or "grant" are words of any method section."""
    if not sources or not expression or not _ASKS_FUNDING.search(query):
        return []
    titles = _view_cells(store, sources[0], expression, "sections", "section_title")
    keys = [row["primary_key"] for row in titles if _ACKNOWLEDGMENTS.search(row.get("text") or "")]
    if not keys or len(keys) > _NAMED_OBJECTS:
        return []
    view = "table_name == 'sections' and column_name == 'section_content'"
    rows = store.client.query(
        sources[0],
        filter=f"({expression}) and {view} and primary_key in [{', '.join(quote_literal(key) for key in keys)}]",
        output_fields=["primary_key"],
        limit=_NAMED_LIMIT,
    )
    return [str(row["id"]) for row in rows]


def _second(fused: list[tuple[str, float]], cells: list[str]) -> list[tuple[str, float]]:
    """``cells`` right after the fused first (at its score), then the fused order: their view's best, brought up
    without displacing the best of every view."""
    if not fused or not cells:
        return fused
    first, top = fused[0]
    lifted = [(key, top) for key in cells if key != first]
    return [fused[0], *lifted] + [(key, score) for key, score in fused[1:] if key not in set(cells)]


def _named_first(fused: list[tuple[str, float]], named: list[str]) -> list[tuple[str, float]]:
    """The named objects' entities first (scored just above the best fused score), then the fused order."""
    if not named:
        return fused
    top = fused[0][1] if fused else 1.0
    first = [(key, top + (len(named) - rank) * 1e-6) for rank, key in enumerate(dict.fromkeys(named))]
    return first + [(key, score) for key, score in fused if key not in set(named)]


def _routes(store: VectorStore, spec: CollectionSpec) -> list[tuple[CollectionSpec, VectorFieldSpec]]:
    """The (collection, vector field) searched for each of a hybrid collection's fields: the configured route
    collections when they are all live here (so the BM25 route is exactly what a BM25 search returns: Milvus Lite
    keeps BM25 statistics per segment, and two collections of the same cells can score them differently), else the
    hybrid collection's own fields."""
    names = store.config.hybrid_routes
    if names and spec.name == store.config.hybrid_collection:
        specs = [store.config.collection(name) for name in names]
        if all(store.is_available(s) and store.client.has_collection(s.name) for s in specs):
            return [(s, s.vectors[0]) for s in specs]
    return [(spec, vector) for vector in spec.vectors]


def _output_fields(spec: CollectionSpec) -> tuple[str, ...]:
    content = "text" if spec.modality == "text" else "bbox"
    return ("pdf_id", "page_number", "table_name", "column_name", "primary_key", content)


def _hit(spec: CollectionSpec, metric: str, raw: dict) -> Hit:
    entity = raw.get("entity", raw)
    return Hit(
        score=_score(metric, float(raw["distance"])),
        pdf_id=entity["pdf_id"],
        page_number=int(entity["page_number"]),
        table_name=entity["table_name"],
        column_name=entity["column_name"],
        primary_key=entity["primary_key"],
        text=entity.get("text") if spec.modality == "text" else None,
        bbox=list(entity["bbox"]) if spec.modality == "image" and entity.get("bbox") is not None else None,
        collection=spec.name,
        entity_id=str(raw.get("id", "")),
    )
