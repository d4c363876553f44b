"""How close glyph-reconstructed LaTeX comes to MinerU's LaTeX for the same display equations.

For every ``"type": "equation"`` entry in ``corpus/mineru/<paper>/*_content_list.json`` the equation's box (MinerU's
0–1000 scale, converted to points with the page size in ``layout.json(.gz)``) is read back from
``corpus/inbox/<volume>/<paper>.pdf`` with :func:`paperlake.parsing.glyph_latex.reconstruct_latex` and compared with
MinerU's LaTeX (``$$`` and ``\\tag`` stripped):

- **sympy-equivalent**: both sides parse with sympy's ``parse_latex`` (strict) after the same light clean-up, and
  ``simplify(a - b) == 0`` (for relations: same relation, and both sides equivalent pairwise);
- **similar**: ``rapidfuzz.fuzz.ratio`` of the two comparison keys
  (:func:`~paperlake.parsing.glyph_latex.latex_comparison_key`) / 100;
- **matched** when sympy-equivalent or similarity ≥ 0.8.

MinerU's LaTeX is itself a model's reading of the page image, not ground truth: a mismatch can be either side's
error. The JSON written to ``benchmarks/results/latex.json`` keeps every pair so that a reader can judge.

Run: ``python benchmarks/latex.py [--corpus DIR] [--papers STEM ...] [--limit N] [--pad POINTS] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import signal
import statistics
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import pymupdf
from rapidfuzz import fuzz

from paperlake.parsing.glyph_latex import latex_comparison_key, reconstruct_latex
from paperlake.parsing.mineru_backend import split_equation

MATCH_THRESHOLD = 0.8
DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "latex.json"


# ------------------------------------------------------------------------------------------------ corpus


def equations(corpus: Path, papers: list[str] | None = None):
    """Yield (paper stem, pdf path, page index, bbox in points, MinerU LaTeX) for every MinerU display equation."""
    for folder in sorted((corpus / "mineru").iterdir()):
        stem = folder.name
        if not folder.is_dir() or (papers and stem not in papers):
            continue
        content = next(folder.glob("*_content_list.json"), None)
        if content is None:
            continue
        entries = [e for e in json.loads(content.read_text()) if e.get("type") == "equation"]
        if not entries:
            continue
        layout_path = folder / "layout.json"
        layout = (
            json.loads(layout_path.read_text())
            if layout_path.exists()
            else json.loads(gzip.open(folder / "layout.json.gz").read())
        )
        pdf = corpus / "inbox" / stem.split("-")[0] / f"{stem}.pdf"
        for entry in entries:
            page_index = entry["page_idx"]
            width, height = layout["pdf_info"][page_index]["page_size"]
            x0, y0, x1, y1 = entry["bbox"]
            bbox = (x0 * width / 1000, y0 * height / 1000, x1 * width / 1000, y1 * height / 1000)
            latex, _number = split_equation(entry.get("text", ""))
            yield stem, pdf, page_index, bbox, latex, entry.get("text", "")


# ------------------------------------------------------------------------------------------------ sympy equivalence


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Timeout


_SYMPY_DROP = re.compile(
    r"\\(left|right|big|Big|bigg|Bigg|displaystyle|textstyle|limits|nolimits)\b|\\[,;:!]|"
    r"\\q?quad\b|&|\\\\"
)
_SYMPY_WRAPPER = re.compile(
    r"\\(mathrm|operatorname\*?|text|mathbf|boldsymbol|pmb|bm|mathit|mathcal|mathbb|"
    r"widehat|hat|widetilde|tilde|overline|bar)\s*\{([^{}]*)\}"
)
_SYMPY_BARE_WRAPPER = re.compile(
    r"\\(mathrm|operatorname\*?|mathbf|boldsymbol|pmb|bm|mathcal|mathbb|cal|bf|rm|"
    r"widehat|hat|widetilde|tilde|overline|bar)\b\s*"
)
_RELATIONS = re.compile(r"(\\leq?\b|\\geq?\b|\\neq?\b|\\approx\b|\\iff\b|\\Leftrightarrow\b|(?<![<>!])=|<|>)")


def _sympy_ready(latex: str) -> str:
    """The same light clean-up for both sides: what sympy's grammar rejects but does not change the maths
    (font and accent wrappers are dropped with their braces, so ``\\mathrm{d}p`` and ``{\\rm d} p`` agree)."""
    text = re.sub(r"\\begin\{[^}]*\}(\{[^}]*\})?|\\end\{[^}]*\}", "", latex)
    text = _SYMPY_DROP.sub(" ", text)
    text = re.sub(r"\\(overset|stackrel)\s*\{[^{}]*\}\s*\{\s*(=|\\leq?|\\geq?)\s*\}", r" \2 ", text)
    text = text.replace(r"\mid", "|")
    previous = None
    while previous != text:
        previous, text = text, _SYMPY_WRAPPER.sub(_unwrap, text)
    text = _SYMPY_BARE_WRAPPER.sub("", text)
    text = text.replace(r"\colon", ":").replace(r"\coloneqq", "=").replace(r"\Pr", "Pr")
    text = re.sub(r":\s*=", "=", text)
    text = re.sub(r"\{\s*([=+-])\s*\}", r"\1", text)  # MinerU's { = } and { - }
    text = re.sub(r"\\(ldots|cdots|dots)\b", r"\\ldots", text)
    text = re.sub(r"\\land\b", r"\\wedge", re.sub(r"\\lor\b", r"\\vee", text))
    text = re.sub(r"[.,\s]+$", "", text.strip())
    return text


_SYMPY_FUNCTIONS = {"min", "max", "log", "ln", "exp", "sin", "cos", "tan", "sup", "inf", "lim", "det"}


def _unwrap(match: re.Match) -> str:
    """``\\mathrm{l n}`` → ``\\ln`` (a function sympy knows), other wrapped text → its letters."""
    inner = match.group(2).replace(" ", "")
    return (
        f"\\{inner} " if match.group(1).startswith(("mathrm", "operatorname")) and inner in _SYMPY_FUNCTIONS else inner
    )


def _relation_chain(latex: str) -> tuple[list[str], list[str]]:
    """Split ``a = b \\leq c`` at top-level relations into operands and relations (sympy cannot chain them)."""
    operands, relations, depth, start = [], [], 0, 0
    i = 0
    while i < len(latex):
        ch = latex[i]
        depth += ch in "{([" and not latex[max(0, i - 1)] == "\\"
        depth -= ch in "})]" and not latex[max(0, i - 1)] == "\\"
        match = _RELATIONS.match(latex, i) if depth == 0 else None
        if match:
            operands.append(latex[start:i])
            relations.append({"\\le": "\\leq", "\\ge": "\\geq", "\\ne": "\\neq"}.get(match.group(0), match.group(0)))
            start = i = match.end()
            continue
        i += 1
    operands.append(latex[start:])
    return operands, relations


def sympy_equivalent(a: str, b: str, seconds: int = 3) -> tuple[bool | None, str]:
    """True/False when both sides parse with sympy (strict), None when either does not, with the reason. Relation
    chains must have the same relations, and each operand must simplify to the same expression."""
    from sympy import simplify
    from sympy.parsing.latex import parse_latex

    left_operands, left_relations = _relation_chain(_sympy_ready(a))
    right_operands, right_relations = _relation_chain(_sympy_ready(b))
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(seconds)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            left = [parse_latex(x, strict=True) if x.strip() else None for x in left_operands]
            right = [parse_latex(x, strict=True) if x.strip() else None for x in right_operands]
            if left_relations != right_relations or len(left) != len(right):
                return False, "different relations"
            if any((x is None) != (y is None) for x, y in zip(left, right)):
                return False, "an operand missing on one side"
            return all(x is None or simplify(x - y) == 0 for x, y in zip(left, right)), "simplify"
    except _Timeout:
        return None, "timeout"
    except Exception as error:  # any parser failure means "not comparable by sympy"
        return None, f"parse: {type(error).__name__}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def parses(latex: str) -> bool:
    from sympy.parsing.latex import parse_latex

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for operand in _relation_chain(_sympy_ready(latex))[0]:
                if operand.strip():
                    parse_latex(operand, strict=True)
        return True
    except Exception:
        return False


# ------------------------------------------------------------------------------------------------ failure classes


def failure_class(mineru: str, ours: str, notes: list[str]) -> str:
    """Why a pair did not match, as far as the two strings tell (first that applies)."""
    if not ours:
        return "missing glyphs (empty region)"
    if any(n.startswith("unmapped glyph") for n in notes):
        return "unmapped glyphs"
    plain = [re.sub(r"\\math(bf|bb|cal|frak|sf|tt|scr)", "", latex_comparison_key(x)) for x in (mineru, ours)]
    if fuzz.ratio(*plain) >= 95:
        return "alphabet only (bold / calligraphic / blackboard differ)"
    if (
        re.search(r"\\begin\{(array|[pbBvV]?matrix)\}\s*\{?\s*[clr]{2,}", mineru)
        and "\\\\" in mineru
        and not re.search(r"\\begin\{array\}\s*\{\s*[rl]{1,2}\s*\}", mineru)
    ):
        return "matrix"
    if "\\\\" in mineru or "\\\\" in ours:
        return "multi-line"
    if mineru.count(r"\frac") >= 2 or re.search(r"\\frac\s*\{[^{}]*\\frac", mineru):
        return "fraction nesting"
    if re.search(r"\\(left|right|big|Big|bigg|Bigg)", mineru) and not ours.count(r"\left"):
        return "CMEX delimiters"
    if re.search(r"\\(sum|prod|int|min|max|operatorname\*)", mineru):
        return "big operators / limits"
    if re.search(r"\\(hat|widehat|tilde|widetilde|bar|overline|vec|dot)\b", mineru):
        return "accents"
    return "scripts / other"


# ------------------------------------------------------------------------------------------------ main


def run(corpus: Path, papers: list[str] | None, limit: int | None, pad: float = 0.0) -> dict:
    documents: dict[Path, pymupdf.Document] = {}
    records = []
    for index, (stem, pdf, page_index, bbox, mineru, raw) in enumerate(equations(corpus, papers)):
        if limit is not None and index >= limit:
            break
        document = documents.setdefault(pdf, pymupdf.open(pdf))
        page = document[page_index]
        started = time.perf_counter()
        result = reconstruct_latex(page, (bbox[0] - pad, bbox[1] - pad, bbox[2] + pad, bbox[3] + pad))
        seconds = time.perf_counter() - started
        key_mineru, key_ours = latex_comparison_key(mineru), latex_comparison_key(result.latex)
        similarity = fuzz.ratio(key_mineru, key_ours) / 100 if key_mineru or key_ours else 1.0
        equivalent, why = sympy_equivalent(mineru, result.latex) if result.latex else (None, "empty")
        matched = bool(equivalent) or similarity >= MATCH_THRESHOLD
        records.append(
            {
                "paper": stem,
                "page": page_index + 1,
                "bbox": [round(v, 2) for v in bbox],
                "mineru": mineru,
                "mineru_number": split_equation(raw)[1],
                "ours": result.latex,
                "our_number": result.equation_number,
                "confidence": result.confidence,
                "notes": result.notes,
                "similarity": round(similarity, 3),
                "sympy_equivalent": equivalent,
                "sympy_reason": why,
                "ours_parses": parses(result.latex) if result.latex else False,
                "matched": matched,
                "seconds": round(seconds, 4),
                "failure_class": None if matched else failure_class(mineru, result.latex, result.notes),
                "key_mineru": key_mineru,
                "key_ours": key_ours,
            }
        )
    return summarise(records)


def summarise(records: list[dict]) -> dict:
    total = len(records)

    def share(n: int) -> float:
        return round(n / total, 3) if total else 0.0

    similarities = [r["similarity"] for r in records]
    bins = Counter(min(int(s * 10), 9) for s in similarities)
    per_paper: dict[str, dict] = defaultdict(lambda: {"equations": 0, "matched": 0})
    for r in records:
        per_paper[r["paper"]]["equations"] += 1
        per_paper[r["paper"]]["matched"] += r["matched"]
    for stats in per_paper.values():
        stats["matched_share"] = round(stats["matched"] / stats["equations"], 3)
    failures: dict[str, dict] = {}
    for r in sorted((r for r in records if not r["matched"]), key=lambda r: r["similarity"]):
        entry = failures.setdefault(r["failure_class"], {"count": 0, "examples": []})
        entry["count"] += 1
        if len(entry["examples"]) < 3:
            entry["examples"].append({k: r[k] for k in ("paper", "page", "similarity", "mineru", "ours")})
    numbers_expected = [r for r in records if r["mineru_number"]]
    seconds = [r["seconds"] for r in records]
    return {
        "total_equations": total,
        "matched": sum(r["matched"] for r in records),
        "matched_share": share(sum(r["matched"] for r in records)),
        "sympy_equivalent_share": share(sum(bool(r["sympy_equivalent"]) for r in records)),
        "sympy_both_parse_share": share(sum(r["sympy_equivalent"] is not None for r in records)),
        "similarity_at_least_0.8_share": share(sum(s >= MATCH_THRESHOLD for s in similarities)),
        "similarity_at_least_0.9_share": share(sum(s >= 0.9 for s in similarities)),
        "identical_normalised_share": share(sum(r["key_mineru"] == r["key_ours"] for r in records)),
        "similarity_mean": round(statistics.mean(similarities), 3) if similarities else 0.0,
        "similarity_median": round(statistics.median(similarities), 3) if similarities else 0.0,
        "similarity_histogram": {f"{b / 10:.1f}-{(b + 1) / 10:.1f}": bins.get(b, 0) for b in range(10)},
        "ours_parses_with_sympy_share": share(sum(r["ours_parses"] for r in records)),
        "equation_numbers": {
            "mineru_has_number": len(numbers_expected),
            "ours_same_number": sum(r["our_number"] == r["mineru_number"] for r in numbers_expected),
            "ours_number_where_mineru_has_none": sum(bool(r["our_number"]) and not r["mineru_number"] for r in records),
        },
        "per_paper": dict(sorted(per_paper.items())),
        "failure_classes": dict(sorted(failures.items(), key=lambda kv: -kv[1]["count"])),
        "seconds_per_equation": {
            "mean": round(statistics.mean(seconds), 4) if seconds else 0.0,
            "median": round(statistics.median(seconds), 4) if seconds else 0.0,
            "max": round(max(seconds), 4) if seconds else 0.0,
        },
        "normalisation": latex_comparison_key.__doc__.strip(),
        "records": records,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--papers", nargs="*")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--pad",
        type=float,
        default=0.0,
        help="grow (or with a negative value shrink) every box by this many points: how much the "
        "result depends on the layout model drawing tight boxes",
    )
    args = parser.parse_args(argv)
    report = run(args.corpus, args.papers, args.limit, args.pad)
    report["box_padding_points"] = args.pad
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print(
        f"equations: {report['total_equations']}   matched: {report['matched']} ({report['matched_share']:.1%})"
        f"   sympy-equivalent: {report['sympy_equivalent_share']:.1%}"
        f"   similarity>=0.8: {report['similarity_at_least_0.8_share']:.1%}"
        f"   ours parse with sympy: {report['ours_parses_with_sympy_share']:.1%}"
    )
    print(
        f"stricter: similarity>=0.9: {report['similarity_at_least_0.9_share']:.1%}"
        f"   identical after normalisation: {report['identical_normalised_share']:.1%}"
    )
    print(
        f"similarity mean {report['similarity_mean']}, median {report['similarity_median']}; histogram "
        + ", ".join(f"{k}: {v}" for k, v in report["similarity_histogram"].items())
    )
    numbers = report["equation_numbers"]
    print(
        f"equation numbers: {numbers['ours_same_number']}/{numbers['mineru_has_number']} agree with MinerU's tag;"
        f" {numbers['ours_number_where_mineru_has_none']} found where MinerU has none"
    )
    print("per paper:")
    for stem, stats in report["per_paper"].items():
        print(f"  {stem:45s} {stats['matched']:3d}/{stats['equations']:<3d} {stats['matched_share']:.0%}")
    print("failure classes:")
    for name, entry in report["failure_classes"].items():
        print(f"  {name:32s} {entry['count']}")
    timing = report["seconds_per_equation"]
    print(f"seconds per equation: mean {timing['mean']}, median {timing['median']}, max {timing['max']}")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
