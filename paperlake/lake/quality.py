"""Great Expectations suites over one paper's parsed views: the gate between the parser and the lake.

Two suites. *Blocking* expectations catch broken data (page count differs from the PDF, a box outside its page,
duplicate or missing ids, a chunk over the token limit, a figure panel outside its figure): a paper that fails one
is not published and gets an ``ingest_errors`` row instead. *Warning* expectations flag suspicious parses (no
sections; the text cites "Table 3" but fewer than three tables were found) without stopping anything.
These are plain functions so unit tests can call them; Dagster reports their results as asset checks.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import logging
import re
import sys
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pandas as pd

from paperlake.lake.views import VIEWS, ParsedPaper, to_arrow
from paperlake.parsing import DETECTORS
from paperlake.parsing.table_structure import STRUCTURE_FLAGS

BBOX_TOLERANCE_PT = 2.0
ID_COLUMNS = {
    "metadata": "paper_id",
    "pages": "page_id",
    "sections": "section_id",
    "chunks": "chunk_id",
    "tables": "table_id",
    "table_cells": "cell_id",
    "images": "image_id",
    "equations": "equation_id",
    "references": "reference_id",
    "table_rows": "row_id",
    "table_columns": "column_id",
}
# A table's structure flag: "ok", or the problems found, comma-separated.
_STRUCTURE_VALUE = rf"^(?:ok|(?:{'|'.join(STRUCTURE_FLAGS)})(?:,(?:{'|'.join(STRUCTURE_FLAGS)}))*)$"
_TABLE_MENTION = re.compile(r"\bTable\s+(\d{1,2})\b")
_FIGURE_MENTION = re.compile(r"\b(?:Figure|Fig\.)\s+(\d{1,2})\b")


@dataclass
class ExpectationOutcome:
    name: str
    view: str
    success: bool
    observed: Any = None
    details: str = ""


@dataclass
class QualityReport:
    blocking: list[ExpectationOutcome] = field(default_factory=list)
    warnings: list[ExpectationOutcome] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(outcome.success for outcome in self.blocking)

    @property
    def failures(self) -> list[ExpectationOutcome]:
        return [outcome for outcome in self.blocking if not outcome.success]

    @property
    def suspicious(self) -> list[ExpectationOutcome]:
        return [outcome for outcome in self.warnings if not outcome.success]

    def summary(self) -> str:
        failed = self.failures or self.suspicious
        return (
            "; ".join(
                f"{o.view}: {o.name} (observed {o.observed}){' ' + o.details if o.details else ''}" for o in failed
            )
            or "all expectations met"
        )


# Great Expectations imports these when it is imported: scipy.stats for its KL-divergence expectation, altair for its
# charts. The gate uses neither, and they are a large share of its import, paid by every ingest's gate: they are made
# lazy for that import (:class:`_OnFirstUse`), so each loads on the first use of something it defines, whoever makes
# it; nothing changes but when they load.
_LAZY_FOR_GX = frozenset({"scipy.stats", "altair"})
_GX_IMPORT = threading.Lock()


class _OnFirstUse(importlib.abc.Loader):
    """A module's loader, deferred: the module is made as usual (its name, file and spec set) and runs its code on the
    first attribute it does not have yet, through a module ``__getattr__`` (PEP 562). A package's ``__path__`` is
    such an attribute until then: importing one of its submodules reads it, so the package runs first, as it would
    have been imported first.

    Unlike ``importlib.util.LazyLoader``, whose module runs on any attribute read, one of these answers what
    describes it (``__name__``, ``__file__``, ``__spec__``) without running: code that walks ``sys.modules`` reading
    them leaves it as it is. ``inspect.stack()`` does that (``inspect.getmodule``), and dbt calls it when dagster-dbt
    builds its adapter in the warehouse step's process: with LazyLoader, that loaded both modules there, about a
    second before each dbt build that followed a gate in the same process."""

    def __init__(self, loader: Any):
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        loader, lock = self.loader, threading.RLock()
        module.__spec__.loader = module.__loader__ = loader  # what runs it, as if imported plainly
        path = vars(module).pop("__path__", None)  # a package's, given back when it runs

        def __getattr__(name: str) -> Any:
            with lock:
                if vars(module).get("__getattr__") is __getattr__:  # not run yet
                    del vars(module)["__getattr__"]
                    if path is not None:
                        module.__path__ = path
                    try:
                        loader.exec_module(module)
                    except BaseException:
                        sys.modules.pop(module.__name__, None)  # as a failed import leaves it
                        raise
            return getattr(module, name)

        vars(module)["__getattr__"] = __getattr__


class _LazyFinder:
    """A meta-path finder giving ``names`` modules that run on first use (their spec found by the other finders)."""

    def __init__(self, names: frozenset[str]):
        self.names = names

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _OnFirstUse(spec.loader)
                return spec
        return None


@contextlib.contextmanager
def _lazily(names: frozenset[str]):
    finder = _LazyFinder(names)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def import_gx() -> Any:
    """``great_expectations`` with its expectations, imported once per process with :data:`_LAZY_FOR_GX` lazy."""
    with _GX_IMPORT:
        if "great_expectations.expectations" not in sys.modules:
            with _lazily(_LAZY_FOR_GX - set(sys.modules)):
                import great_expectations.expectations  # noqa: F401  # deferred: great_expectations
    return sys.modules["great_expectations"]


def prepare() -> None:
    """Import Great Expectations and make its context, once per process (seconds of one core): what a step can do
    while its papers are parsed elsewhere, so that the gate then starts at once."""
    _context()


@lru_cache(maxsize=1)
def _context() -> Any:
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    gx = import_gx()
    from great_expectations.data_context.types.base import ProgressBarsConfig  # deferred: great_expectations

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


@lru_cache(maxsize=None)
def _batch_definition(view: str) -> Any:
    """One pandas data source per view, registered once per process (each registration re-serialises the whole
    context configuration, which used to cost more than the validations themselves)."""
    return (
        _context().data_sources.add_pandas(view).add_dataframe_asset(view).add_batch_definition_whole_dataframe("all")
    )


def _validate(view: str, frame: pd.DataFrame, expectations: list[Any]) -> list[ExpectationOutcome]:
    gx = import_gx()

    # The suite is validated as a value, not saved: nothing accumulates in the context from paper to paper.
    suite = gx.ExpectationSuite(name=f"{view}_checks", expectations=expectations)
    result = _batch_definition(view).get_batch(batch_parameters={"dataframe": frame}).validate(suite)
    outcomes = []
    for item in result.results:
        observed = item.result.get("observed_value", item.result.get("unexpected_count"))
        sample = item.result.get("partial_unexpected_list") or []
        outcomes.append(
            ExpectationOutcome(
                name=item.expectation_config.type,
                view=view,
                success=bool(item.success),
                observed=observed.item() if hasattr(observed, "item") else observed,
                details=f"e.g. {sample[:3]}" if sample and not item.success else "",
            )
        )
    return outcomes


def _frames(parsed: ParsedPaper) -> dict[str, pd.DataFrame]:
    return {view: to_arrow(view, parsed.rows(view)).to_pandas() for view in VIEWS}


def _box_overflow(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per boxed element: how far (in points) its box sticks out of its page; malformed boxes → inf."""
    pages = {
        (page.paper_id, page.page_number): (page.page_width, page.page_height) for page in frames["pages"].itertuples()
    }  # keyed by paper too: several papers' views may be validated together
    rows = []
    for view in ("tables", "images", "equations"):
        for element in frames[view].itertuples():
            box = list(element.bbox) if element.bbox is not None else []
            page = pages.get((element.paper_id, element.page_number))
            if len(box) != 4 or page is None or box[2] <= 0 or box[3] <= 0:
                rows.append({"element": f"{view}:{element.ordinal}@p{element.page_number}", "overflow": float("inf")})
                continue
            width, height = page
            x0, y0, w, h = box
            overflow = max(0.0, -x0, -y0, x0 + w - width, y0 + h - height)
            rows.append({"element": f"{view}:{element.ordinal}@p{element.page_number}", "overflow": overflow})
    return pd.DataFrame(rows or [{"element": "none", "overflow": 0.0}])


def _panel_overflow(images: pd.DataFrame) -> pd.DataFrame:
    """One row per figure panel: how far (in points) its box sticks out of its whole figure's box; a panel whose
    parent is missing, on another page or itself a panel → inf."""
    wholes = images[images["parent_image_id"].isna()].drop_duplicates("image_id").set_index("image_id")
    rows = []
    for panel in images[images["parent_image_id"].notna()].itertuples():
        name = f"images:{panel.image_id}@p{panel.page_number}"
        if panel.parent_image_id not in wholes.index:
            rows.append({"element": name, "overflow": float("inf")})
            continue
        parent = wholes.loc[panel.parent_image_id]
        box, parent_box = (list(b) if b is not None else [] for b in (panel.bbox, parent.bbox))
        if parent.page_number != panel.page_number or len(box) != 4 or len(parent_box) != 4:
            rows.append({"element": name, "overflow": float("inf")})
            continue
        (x0, y0, w, h), (px0, py0, pw, ph) = box, parent_box
        overflow = max(0.0, px0 - x0, py0 - y0, x0 + w - (px0 + pw), y0 + h - (py0 + ph))
        rows.append({"element": name, "overflow": overflow})
    return pd.DataFrame(rows)


def _table_structure_expectations(frames: dict[str, pd.DataFrame], gxe: Any) -> dict[str, list[Any]]:
    """Blocking: every table states its structure flag; row and column lines and cells belong to a table of the
    paper and every line has text. (A parsed number is finite: :func:`_finite_numbers`.)"""
    if frames["tables"].empty:
        return {}
    expectations = {
        "tables": [
            gxe.ExpectColumnValuesToNotBeNull(column="table_structure"),
            gxe.ExpectColumnValuesToMatchRegex(column="table_structure", regex=_STRUCTURE_VALUE),
        ]
    }
    tables = frames["tables"].dropna(subset=["table_id"])
    table_keys = (tables["paper_id"].astype(str) + "/" + tables["table_id"]).tolist()
    for view, text in (("table_rows", "row_text"), ("table_columns", "column_text"), ("table_cells", None)):
        if frames[view].empty:
            continue
        # (paper, table): several papers' views may be validated together
        frames[view] = frames[view].assign(
            table_key=frames[view]["paper_id"].astype(str) + "/" + frames[view]["table_id"]
        )
        expectations[view] = [gxe.ExpectColumnValuesToBeInSet(column="table_key", value_set=table_keys)]
        if text:
            expectations[view].append(gxe.ExpectColumnValuesToNotBeNull(column=text))
    return expectations


def _finite_numbers(frames: dict[str, pd.DataFrame], gxe: Any) -> list[ExpectationOutcome]:
    numbers = frames["table_cells"]["number_value"].dropna() if not frames["table_cells"].empty else pd.Series()
    finite = pd.DataFrame({"finite": numbers.map(lambda v: v == v and abs(v) != float("inf"))})
    if finite.empty:
        return []
    return _validate("table_cells", finite, [gxe.ExpectColumnValuesToBeInSet(column="finite", value_set=[True])])


def _blocking(
    frames: dict[str, pd.DataFrame], gxe: Any, max_chunk_tokens: int, page_checks: dict[str, list[Any]]
) -> list[ExpectationOutcome]:
    """The blocking expectations over ``frames`` (one paper's views, or several papers' concatenated), with the
    page-count checks ``page_checks`` (view → expectations; a view's suite runs on ``frames[view]``)."""
    blocking: dict[str, list[Any]] = {view: list(expectations) for view, expectations in page_checks.items()}
    blocking.setdefault("metadata", []).append(gxe.ExpectColumnValuesToNotBeNull(column="title"))
    for view, column in ID_COLUMNS.items():
        if view != "metadata" and not frames[view].empty:
            blocking.setdefault(view, []).extend(
                [gxe.ExpectColumnValuesToBeUnique(column=column), gxe.ExpectColumnValuesToNotBeNull(column=column)]
            )

    for view, detectors in DETECTORS.items():  # every element says which detector found it
        if not frames[view].empty:
            blocking.setdefault(view, []).extend(
                [
                    gxe.ExpectColumnValuesToBeInSet(column="detector", value_set=list(detectors)),
                    gxe.ExpectColumnValuesToNotBeNull(column="detector"),
                ]
            )
    for view, expectations in _table_structure_expectations(frames, gxe).items():
        blocking.setdefault(view, []).extend(expectations)
    if not frames["chunks"].empty:
        blocking.setdefault("chunks", []).append(
            gxe.ExpectColumnMaxToBeBetween(column="token_count", max_value=max_chunk_tokens)
        )
    outcomes: list[ExpectationOutcome] = []
    for view, expectations in blocking.items():
        outcomes += _validate(view, frames[view], expectations)
    outcomes += _finite_numbers(frames, gxe)
    boxes = _box_overflow(frames)
    outcome = _validate(
        "bounding_boxes", boxes, [gxe.ExpectColumnMaxToBeBetween(column="overflow", max_value=BBOX_TOLERANCE_PT)]
    )
    if not outcome[0].success:
        worst = boxes.sort_values("overflow", ascending=False).head(3)
        outcome[0].details = "worst: " + ", ".join(f"{r.element} by {r.overflow:.1f}pt" for r in worst.itertuples())
    outcomes += outcome
    # Blocking, not a warning: a panel is cut from its figure's own elements, so one outside its figure is a wrong
    # link (another figure, another page), and the warehouse would hand out a panel and a figure that disagree.
    panels = _panel_overflow(frames["images"])
    if not panels.empty:
        outcome = _validate(
            "images", panels, [gxe.ExpectColumnMaxToBeBetween(column="overflow", max_value=BBOX_TOLERANCE_PT)]
        )
        if not outcome[0].success:
            worst = panels.sort_values("overflow", ascending=False).head(3)
            outcome[0].details = "panels outside their figure: " + ", ".join(
                f"{r.element} by {r.overflow:.1f}pt" for r in worst.itertuples()
            )
        outcomes += outcome
    return outcomes


def _suspicions(frames: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """One paper's figures for the warning expectations: sections, tables and whole figures found, the highest
    table and figure numbers its text cites, and the share of its tables with a clean structure."""
    text = "\n".join(frames["pages"]["page_content"].fillna(""))
    tables, images = frames["tables"], frames["images"]
    # A figure of several plots is one whole figure plus its panels: only whole figures count against "Figure N".
    return {
        "sections": len(frames["sections"]),
        "tables": len(tables),
        "figures": int(images["parent_image_id"].isna().sum()) if len(images) else 0,
        "cited_tables": max((int(n) for n in _TABLE_MENTION.findall(text)), default=0),
        "cited_figures": max((int(n) for n in _FIGURE_MENTION.findall(text)), default=0),
        # papers without tables count as clean: the expectation is about the tables there are
        "clean_tables": float((tables["table_structure"] == "ok").mean()) if len(tables) else 1.0,
    }


def _warnings(papers: list[dict[str, Any]]) -> list[list[ExpectationOutcome]]:
    """Each paper's warning outcomes, from one Great Expectations validation over a frame of one row per paper
    (:func:`_suspicions`); a row the expectation lists as unexpected is that paper's warning."""
    gx = import_gx()
    gxe = gx.expectations

    frame = pd.DataFrame(papers)
    expectations = {
        # most tables should come out with a header and a rectangular grid; many that do not point at the grids
        "tables structure": gxe.ExpectColumnValuesToBeBetween(column="clean_tables", min_value=0.5),
        "sections": gxe.ExpectColumnValuesToBeBetween(column="sections", min_value=1),
        "tables": gxe.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="tables", column_B="cited_tables", or_equal=True
        ),
        "images": gxe.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="figures", column_B="cited_figures", or_equal=True
        ),
    }
    suite = gx.ExpectationSuite(name="suspicious_parses", expectations=list(expectations.values()))
    result = (
        _batch_definition("papers")
        .get_batch(batch_parameters={"dataframe": frame})
        .validate(suite, result_format={"result_format": "COMPLETE"})
    )
    flagged = {
        label: set(item.result.get("unexpected_index_list") or []) for label, item in zip(expectations, result.results)
    }
    reports = []
    for index, figures in enumerate(papers):
        outcomes = []
        if figures["tables"]:
            outcomes.append(
                ExpectationOutcome(
                    "expect_column_values_to_be_in_set",
                    "tables",
                    index not in flagged["tables structure"],
                    round(1 - figures["clean_tables"], 4),
                    "fewer than half of the tables have a clean structure (header found, rectangular)",
                )
            )
        outcomes.append(
            ExpectationOutcome(
                "expect_table_row_count_to_be_between",
                "sections",
                index not in flagged["sections"],
                figures["sections"],
            )
        )
        for view, found, cited in (("tables", "tables", "cited_tables"), ("images", "figures", "cited_figures")):
            outcomes.append(
                ExpectationOutcome(
                    "expect_table_row_count_to_be_between",
                    view,
                    index not in flagged[view],
                    figures[found],
                    f"text cites up to {view[:-1].replace('image', 'figure')} {figures[cited]}",
                )
            )
        reports.append(outcomes)
    return reports


def validate_papers(items: list[tuple[ParsedPaper, int]], *, max_chunk_tokens: int) -> list[QualityReport]:
    """The gate for several papers (paper, its PDF's page count) at once: each view's blocking expectations are
    validated once over the papers' rows together, their page counts through a frame of one row per paper (a
    validation's fixed cost is most of a small paper's gate). When every expectation holds, every paper passed;
    when one fails, each paper is validated on its own (:func:`validate_paper`), so a failure is its paper's and
    the others pass as they would alone. The warnings are one validation for all the papers, per paper."""
    gxe = import_gx().expectations

    if len(items) <= 1:
        return [
            validate_paper(paper, pdf_page_count=pages, max_chunk_tokens=max_chunk_tokens) for paper, pages in items
        ]
    per_paper = [_frames(paper) for paper, _ in items]
    frames = {view: pd.concat([f[view] for f in per_paper], ignore_index=True) for view in VIEWS}
    counts = pd.DataFrame(
        [
            {
                "pages": len(f["pages"]),
                "expected_pages": pages,
                "metadata_rows": len(f["metadata"]),
                "num_pages": f["metadata"]["num_pages"].iloc[0] if len(f["metadata"]) == 1 else -1,
            }
            for f, (_, pages) in zip(per_paper, items)
        ]
    )
    frames["paper_counts"] = counts
    page_checks = {
        "paper_counts": [
            gxe.ExpectColumnPairValuesToBeEqual(column_A="pages", column_B="expected_pages"),
            gxe.ExpectColumnValuesToBeBetween(column="metadata_rows", min_value=1, max_value=1),
            gxe.ExpectColumnPairValuesToBeEqual(column_A="num_pages", column_B="expected_pages"),
        ]
    }
    blocking = _blocking(frames, gxe, max_chunk_tokens, page_checks)
    if not all(outcome.success for outcome in blocking):
        return [
            validate_paper(paper, pdf_page_count=pages, max_chunk_tokens=max_chunk_tokens) for paper, pages in items
        ]
    warnings = _warnings([_suspicions(f) for f in per_paper])
    return [QualityReport(blocking=list(blocking), warnings=paper_warnings) for paper_warnings in warnings]


def validate_paper(parsed: ParsedPaper, *, pdf_page_count: int, max_chunk_tokens: int) -> QualityReport:
    gxe = import_gx().expectations

    frames = _frames(parsed)
    report = QualityReport()
    # Each view's expectations go to Great Expectations as one suite: one validation per view and paper (a
    # validation's fixed cost is most of a small paper's gate).
    page_checks = {
        "pages": [gxe.ExpectTableRowCountToEqual(value=pdf_page_count)],
        "metadata": [
            gxe.ExpectTableRowCountToEqual(value=1),
            gxe.ExpectColumnValuesToBeBetween(column="num_pages", min_value=pdf_page_count, max_value=pdf_page_count),
        ],
    }
    report.blocking = _blocking(frames, gxe, max_chunk_tokens, page_checks)
    report.warnings = _warnings([_suspicions(frames)])[0]
    return report
