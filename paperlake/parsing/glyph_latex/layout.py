"""Layout: :class:`Reader` reads a region's pre-grouped atoms into LaTeX (rows, matrices, braces, radicals,
fractions, limits, scripts along the baseline)."""

from __future__ import annotations

import statistics

from paperlake.parsing.glyph_latex.atoms import Atom, compound_atom, dominant_size, join_tokens

# ------------------------------------------------------------------------------------------------ layout


class Reader:
    """Reads one region's atoms into LaTeX; keeps the notes of what it had to guess."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self.guesses = 0

    # -- rows of a multi-line display

    def rows(self, atoms: list[Atom]) -> list[list[Atom]]:
        main_size = dominant_size(atoms)
        rules = [a for a in atoms if a.kind == "rule"]
        # Numerators and denominators do not vote for a row of their own.
        voters = [
            a
            for a in atoms
            if a.kind in {"letter", "digit", "word", "rel", "bin", "ord", "open", "close"}
            and not a.big
            and a.size >= 0.8 * main_size
            and not any(r.x0 - 1 <= a.cx <= r.x1 + 1 and abs(a.cy - r.cy) < 1.6 * main_size for r in rules)
        ]
        clusters: list[list[Atom]] = []
        for atom in sorted(voters, key=lambda a: a.baseline):
            if clusters and atom.baseline - clusters[-1][-1].baseline <= 0.3 * main_size:
                clusters[-1].append(atom)
            else:
                clusters.append([atom])
        # A row is a baseline with real content, or at least a relation or operator that starts a continued line;
        # a lone stray glyph does not make one.
        lines: list[float] = []
        for cluster in clusters:
            if len(cluster) >= 2 or len(clusters) == 1 or cluster[0].kind in {"rel", "bin"}:
                y = statistics.median(a.baseline for a in cluster)
                if not lines or y - lines[-1] > 1.2 * main_size:
                    lines.append(y)
        for fence in (a for a in atoms if a.big and a.kind in {"open", "close", "fence"}):
            spanned = [y for y in lines if fence.y0 < y - 0.3 * main_size and y < fence.y1 + 0.1 * main_size]
            lines = [y for y in lines if y not in spanned[1:]]
        if len(lines) <= 1:
            return [atoms]
        cuts = [self._cut_between(atoms, upper, lower, main_size) for upper, lower in zip(lines, lines[1:])]
        rows: list[list[Atom]] = [[] for _ in lines]
        for atom in atoms:
            y = atom.baseline if atom.kind not in {"rule", "frac"} else atom.cy
            rows[sum(1 for c in cuts if y > c)].append(atom)
        return [r for r in rows if r]

    @staticmethod
    def _cut_between(atoms: list[Atom], upper: float, lower: float, size: float) -> float:
        """The widest empty horizontal band between two baselines, not splitting a fraction or a limit."""
        low, high = upper + 0.1 * size, lower - 0.75 * size
        if high <= low:
            return (upper + lower) / 2
        intervals = sorted((a.y0, a.y1) for a in atoms if a.y1 > low and a.y0 < high)
        for rule in (a for a in atoms if a.kind in {"rule", "bigop"} and low < a.cy < high + size):
            near = [a for a in atoms if a is not rule and rule.x0 - 1 <= a.cx <= rule.x1 + 1]
            above = [a.y1 for a in near if a.y1 <= rule.y0 + 0.5 and rule.y0 - a.y1 < 0.6 * size]
            below = [a.y0 for a in near if a.y0 >= rule.y1 - 0.5 and a.y0 - rule.y1 < 0.6 * size]
            intervals.append((min(above, default=rule.y0), max(below, default=rule.y1)))
        intervals.sort()
        best, best_width, cursor = (upper + lower) / 2, -1.0, low
        for y0, y1 in intervals + [(high, high)]:
            if y0 > cursor and y0 - cursor > best_width:
                best, best_width = (cursor + min(y0, high)) / 2, y0 - cursor
            cursor = max(cursor, y1)
            if cursor >= high:
                break
        return best

    # -- structure within a row

    def layout(self, atoms: list[Atom]) -> str:
        if not atoms:
            return ""
        atoms = self._group_arrays(atoms)
        atoms = self._group_braces(atoms)
        atoms = self._group_radicals(atoms)
        atoms = self._group_rules(atoms)
        atoms = self._group_limits(atoms)
        return self._baseline(atoms) if atoms else ""

    def _group_arrays(self, atoms: list[Atom]) -> list[Atom]:
        """Several lines between a pair of tall delimiters (or after a lone tall brace) form a matrix (cases)."""
        fences = sorted((a for a in atoms if a.big and a.kind in {"open", "close", "fence"}), key=lambda a: a.x0)
        for left in fences:
            if left not in atoms or left.kind == "close":
                continue
            height = left.y1 - left.y0
            right = next(
                (
                    a
                    for a in fences
                    if a.x0 > left.x1
                    and a is not left
                    and a.kind != "open"
                    and abs(a.y0 - left.y0) < 0.15 * height
                    and abs(a.y1 - left.y1) < 0.15 * height
                ),
                None,
            )
            if right is None and left.latex != r"\{":
                continue
            limit = right.x0 if right else float("inf")
            inside = [
                a
                for a in atoms
                if a is not left
                and a is not right
                and left.x1 - 0.5 <= a.cx <= limit
                and left.y0 - 1 <= a.cy <= left.y1 + 1
            ]
            rows = self.rows(inside) if inside else []
            if len(rows) < 2:
                continue
            columns = _column_gaps([a for row in rows for a in row])
            body = r" \\ ".join(" & ".join(self.layout(cell) for cell in _cells(row, columns)) for row in rows)
            if right is None:
                latex = rf"\begin{{cases}}{body}\end{{cases}}"
            else:
                latex = rf"\left{left.latex}\begin{{matrix}}{body}\end{{matrix}}\right{right.latex}"
            parts = [left, *inside] + ([right] if right else [])
            compound = compound_atom(latex, "ord", parts, left.baseline, left.size)
            compound.axis_y = left.axis_y
            gone = {id(a) for a in parts}
            atoms = [a for a in atoms if id(a) not in gone] + [compound]
        return atoms

    def _group_braces(self, atoms: list[Atom]) -> list[Atom]:
        """A horizontal brace under (over) main-size content with a small label beyond it."""
        for brace in [a for a in atoms if a.kind == "hbrace"]:
            spanned = [a for a in atoms if a is not brace and brace.x0 - 1 <= a.cx <= brace.x1 + 1]
            above = [a for a in spanned if a.cy < brace.cy and brace.y0 - a.y1 < 1.5 * brace.size]
            below = [a for a in spanned if a.cy > brace.cy and a.y0 - brace.y1 < 1.5 * brace.size]
            under = dominant_size(above) >= dominant_size(below) if above and below else bool(above)
            content, label = (above, below) if under else (below, above)
            command, script = (r"\underbrace", "_") if under else (r"\overbrace", "^")
            latex = f"{command}{{{self.layout(content)}}}" + (f"{script}{{{self.layout(label)}}}" if label else "")
            parts = [brace, *content, *label]
            compound = compound_atom(
                latex,
                "ord",
                parts,
                _dominant_baseline(content) if content else brace.cy,
                dominant_size(content) if content else brace.size,
            )
            gone = {id(a) for a in parts}
            atoms = [a for a in atoms if id(a) not in gone] + [compound]
        return atoms

    def _group_radicals(self, atoms: list[Atom]) -> list[Atom]:
        radicals = sorted((a for a in atoms if a.kind == "radical"), key=lambda a: a.y1 - a.y0, reverse=True)
        for radical in radicals:
            if radical not in atoms:
                continue
            bar = min(
                (
                    r
                    for r in atoms
                    if r.kind == "rule" and abs(r.x0 - radical.x1) < 2.0 and abs(r.cy - radical.y0) < 2.0
                ),
                key=lambda r: abs(r.x0 - radical.x1),
                default=None,
            )
            if bar is None:
                self.notes.append("radical without an overbar")
                self.guesses += 1
                continue
            inside = [
                a
                for a in atoms
                if a is not radical
                and a is not bar
                and radical.x1 - 0.5 <= a.cx <= bar.x1 + 0.5
                and bar.cy <= a.cy <= radical.y1 + 0.5
            ]
            # An index (\sqrt[n]) is small, over the radical's left arm, within its height.
            height = radical.y1 - radical.y0
            index = [
                a
                for a in atoms
                if a is not radical
                and a is not bar
                and a not in inside
                and a.size < 0.9 * radical.size
                and radical.x0 - 0.5 * radical.size <= a.cx <= radical.cx
                and a.cy < radical.cy
                and a.y1 > radical.y0 + 0.2 * height
            ]
            body = self.layout(inside)
            latex = rf"\sqrt[{self.layout(index)}]{{{body}}}" if index else rf"\sqrt{{{body}}}"
            baseline = _dominant_baseline(inside) if inside else radical.y1
            size = dominant_size(inside) if inside else radical.size
            compound = compound_atom(latex, "ord", [radical, bar, *inside, *index], baseline, size)
            atoms = [a for a in atoms if a not in inside and a not in index and a is not radical and a is not bar]
            atoms.append(compound)
        return atoms

    def _group_rules(self, atoms: list[Atom]) -> list[Atom]:
        """Fraction bars own what lies over and under them; a rule with only glyphs under it is an overline."""
        for rule in sorted((a for a in atoms if a.kind == "rule"), key=lambda a: a.width, reverse=True):
            if rule not in atoms:
                continue
            spanned = [a for a in atoms if a is not rule and rule.x0 - 1 <= a.cx <= rule.x1 + 1]
            above = [a for a in spanned if a.y1 <= rule.y0 + 0.6 and a.cy < rule.cy]
            below = [a for a in spanned if a.y0 >= rule.y1 - 0.6 and a.cy > rule.cy]
            glyphs_above, glyphs_below = (any(a.kind != "rule" for a in side) for side in (above, below))
            if glyphs_above and glyphs_below and self._is_fraction_bar(rule, atoms):
                numerator, denominator = self.layout(above), self.layout(below)
                size = max(a.size for a in above + below if a.kind != "rule")
                latex = rf"\frac{{{numerator}}}{{{denominator}}}"
                compound = compound_atom(latex, "frac", [rule, *above, *below], rule.cy + 0.25 * size, size)
                compound.axis_y = rule.cy
                atoms = [a for a in atoms if a is not rule and a not in above and a not in below] + [compound]
            elif under := [a for a in below if a.kind != "rule" and a.y0 - rule.y1 < 0.5 * a.size]:
                under = [a for a in below if a.kind != "rule" and a.y0 - rule.y1 < 0.9 * a.size]
                latex = rf"\overline{{{self.layout(under)}}}"
                compound = compound_atom(latex, "ord", [rule, *under], _dominant_baseline(under), dominant_size(under))
                atoms = [a for a in atoms if a is not rule and a not in under] + [compound]
            elif over := [a for a in above if a.kind != "rule" and rule.y0 - a.y1 < 0.4 * a.size]:
                over = [a for a in above if a.kind != "rule" and rule.y0 - a.y1 < 0.9 * a.size]
                latex = rf"\underline{{{self.layout(over)}}}"
                compound = compound_atom(latex, "ord", [rule, *over], _dominant_baseline(over), dominant_size(over))
                atoms = [a for a in atoms if a is not rule and a not in over] + [compound]
            else:
                self.notes.append("a rule that is neither a fraction bar nor an overline")
                self.guesses += 1
                atoms = [a for a in atoms if a is not rule]
        return atoms

    @staticmethod
    def _is_fraction_bar(rule: Atom, atoms: list[Atom]) -> bool:
        """TeX draws a fraction bar across the whole of numerator and denominator: nothing next to it overhangs.
        An overline inside a stacked limit has the line above it sticking out on both sides."""
        for a in atoms:
            if a is rule or a.kind == "rule" or not (a.x1 > rule.x0 and a.x0 < rule.x1):
                continue
            near = rule.y0 - a.y1 < 0.9 * a.size if a.cy < rule.cy else a.y0 - rule.y1 < 0.9 * a.size
            if near and (a.x0 < rule.x0 - 1.5 or a.x1 > rule.x1 + 1.5) and not (a.y0 < rule.cy < a.y1):
                return False
        return True

    def _group_limits(self, atoms: list[Atom]) -> list[Atom]:
        """Limits centred under and over \\sum, \\prod, \\max ... and labels over relations (\\overset);
        scripts set beside an operator stay scripts."""
        operators = [a for a in atoms if a.kind in {"bigop", "limword"} or (a.kind == "rel" and not a.big)]
        if not operators:
            return atoms
        lower = self._assign_limits([o for o in operators if o.kind != "rel"], atoms, below=True)
        upper = self._assign_limits(operators, atoms, below=False, taken={id(a) for r in lower.values() for a in r})
        for op in operators:
            below_part, above_part = lower.get(id(op), []), upper.get(id(op), [])
            if not below_part and not above_part:
                continue
            if op.kind == "rel":
                latex = rf"\overset{{{self._stacked(above_part)}}}{{{op.latex}}}"
                compound = compound_atom(latex, "rel", [op, *above_part], op.baseline, op.size)
            else:
                latex = op.latex
                if below_part:
                    latex += f"_{{{self._stacked(below_part)}}}"
                if above_part:
                    latex += f"^{{{self._stacked(above_part)}}}"
                compound = compound_atom(latex, "limits", [op, *below_part, *above_part], op.baseline, op.size)
                compound.axis_y = op.axis_y
            gone = {id(a) for a in below_part + above_part} | {id(op)}
            atoms = [a for a in atoms if id(a) not in gone] + [compound]
        return atoms

    def _stacked(self, members: list[Atom]) -> str:
        """A limit of one line, or of several stacked lines (\\substack)."""
        lines: list[list[Atom]] = []
        for a in sorted(members, key=lambda a: a.y0):
            if lines and a.y0 < max(b.y1 for b in lines[-1]) - 0.5:
                lines[-1].append(a)
            else:
                lines.append([a])
        if len(lines) == 1:
            return self.layout(members)
        return r"\substack{" + r" \\ ".join(self.layout(line) for line in lines) + "}"

    def _assign_limits(
        self, operators: list[Atom], atoms: list[Atom], below: bool, taken: set[int] | None = None
    ) -> dict[int, list[Atom]]:
        """Each operator's limit: the atoms centred on it in the band under (or over) it. Neighbouring operators'
        limits can touch; the atoms between two seeds go to whichever split keeps both limits centred."""
        taken = taken or set()
        op_ids = {id(o) for o in operators}
        bands: dict[int, list[Atom]] = {}
        seeds: dict[int, list[Atom]] = {}
        for op in operators:
            reach = (0.8 if op.kind != "rel" else 0.6) * op.size
            if below:
                band = [
                    a
                    for a in atoms
                    if id(a) not in op_ids
                    and id(a) not in taken
                    and a.cy > op.y1
                    and a.y0 >= op.y1 - 0.5
                    and a.y0 - op.y1 < 3 * reach
                ]
                first_line = [a for a in band if a.y0 - op.y1 < reach]
            else:
                band = [
                    a
                    for a in atoms
                    if id(a) not in op_ids
                    and id(a) not in taken
                    and a.cy < op.y0
                    and a.y1 <= op.y0 + 0.5
                    and op.y0 - a.y1 < 3 * reach
                ]
                first_line = [a for a in band if op.y0 - a.y1 < reach]
            if op.kind == "rel":
                band = first_line = [a for a in first_line if a.size < 0.9 * op.size]
            bands[id(op)] = band
            seeds[id(op)] = [a for a in first_line if min(a.x1, op.x1) - max(a.x0, op.x0) > 0]
        seeded = {id(a): id(op) for op in operators for a in seeds[id(op)]}
        runs: dict[int, list[Atom]] = {}
        for op in operators:
            run = self._grow(seeds[id(op)], bands[id(op)], {k for k, owner in seeded.items() if owner != id(op)}, below)
            if run:
                runs[id(op)] = run
        ordered = sorted((o for o in operators if id(o) in runs), key=lambda o: o.cx)
        for left_op, right_op in zip(ordered, ordered[1:]):
            left_run, right_run = runs[id(left_op)], runs[id(right_op)]
            contested = [a for a in left_run if a in right_run]
            if not contested:
                continue
            contested.sort(key=lambda a: a.cx)
            left_core = [a for a in left_run if a not in contested]
            right_core = [a for a in right_run if a not in contested]
            best = min(
                range(len(contested) + 1),
                key=lambda k: (
                    _centre_offset(left_op, left_core + contested[:k])
                    + _centre_offset(right_op, right_core + contested[k:])
                ),
            )
            runs[id(left_op)], runs[id(right_op)] = left_core + contested[:best], right_core + contested[best:]
        result = {}
        for op in operators:
            run = runs.get(id(op))
            if not run:
                continue
            width = max(a.x1 for a in run) - min(a.x0 for a in run)
            if _centre_offset(op, run) <= max(2.5, 0.15 * width):
                result[id(op)] = run
        return result

    @staticmethod
    def _grow(seed: list[Atom], band: list[Atom], forbidden: set[int], below: bool) -> list[Atom]:
        """Grow sideways over small gaps along the seed's line, then onto stacked lines further out."""
        members = [a for a in seed if id(a) not in forbidden]
        if not members:
            return []
        gap = 0.5 * max(a.size for a in members)
        grown = True
        while grown:
            grown = False
            left, right = min(a.x0 for a in members), max(a.x1 for a in members)
            top, bottom = min(a.y0 for a in members), max(a.y1 for a in members)
            for a in band:
                if a in members or id(a) in forbidden:
                    continue
                beside = (
                    a.y0 < bottom
                    and a.y1 > top
                    and (0 <= left - a.x1 < gap or 0 <= a.x0 - right < gap or (a.x0 < right and a.x1 > left))
                )
                stacked = (
                    (-0.5 <= a.y0 - bottom < 0.5 * a.size if below else -0.5 <= top - a.y1 < 0.5 * a.size)
                    and a.x0 < right
                    and a.x1 > left
                )
                if beside or stacked:
                    members.append(a)
                    grown = True
        return members

    def _baseline(self, atoms: list[Atom]) -> str:
        """Left to right along the dominant baseline; what sits off it in a smaller size is a script."""
        size = dominant_size(atoms)
        baseline = _dominant_baseline(atoms)
        ordered = sorted(atoms, key=lambda a: a.x0)
        items: list[tuple[Atom | None, list[Atom], list[Atom]]] = []  # (base, subscripts, superscripts)
        pending: list[Atom] = []

        def close_scripts() -> None:
            if not pending:
                return
            subs, sups = self._split_scripts(pending, baseline, size)
            if items and not items[-1][1] and not items[-1][2]:
                base = items[-1][0]
                items[-1] = (base, subs, sups)
            else:
                items.append((None, subs, sups))
            pending.clear()

        on_baseline: set[int] = set()
        previous_on_baseline = True
        for atom in ordered:
            if self._on_baseline(atom, baseline, size) or (
                previous_on_baseline and self._inline_small(atom, baseline, size)
            ):
                on_baseline.add(id(atom))
                previous_on_baseline = True
            else:
                previous_on_baseline = False
        if not on_baseline:  # nothing to hang scripts on (a lone prime, a stray): read it as one line
            on_baseline = {id(a) for a in ordered}
        for atom in ordered:
            if id(atom) in on_baseline:
                close_scripts()
                items.append((atom, [], []))
            else:
                pending.append(atom)
        close_scripts()
        return self._emit(items)

    @staticmethod
    def _on_baseline(atom: Atom, baseline: float, size: float) -> bool:
        if atom.axis_y is not None:  # fractions, big operators and delimiters are centred on the math axis
            return abs(atom.axis_y - (baseline - 0.25 * size)) <= 0.22 * size
        if atom.kind == "prime":
            return False
        return atom.size >= 0.85 * size and abs(atom.baseline - baseline) <= 0.25 * size

    @staticmethod
    def _inline_small(atom: Atom, baseline: float, size: float) -> bool:
        """A smaller glyph sitting exactly on the baseline: small capitals or footnote-size text, unless it
        follows a script (then it is a script of that script that happens to land on the baseline)."""
        return atom.kind != "prime" and abs(atom.baseline - baseline) <= 0.06 * size

    def _split_scripts(self, scripts: list[Atom], baseline: float, size: float) -> tuple[list[Atom], list[Atom]]:
        """Superscripts sit above the base's baseline, subscripts below; deeper levels follow their parent."""
        first_level = max(a.size for a in scripts)
        subs: list[Atom] = []
        sups: list[Atom] = []
        parents: list[tuple[Atom, list[Atom]]] = []
        for atom in sorted(scripts, key=lambda a: a.x0):
            if atom.size >= 0.9 * first_level or not parents:
                offset = atom.baseline - baseline
                if atom.kind == "prime" or offset < -0.08 * size:
                    target = sups
                elif offset > 0.02 * size:
                    target = subs
                else:
                    self.guesses += 1
                    target = subs if atom.y1 > baseline else sups
                target.append(atom)
                parents.append((atom, target))
            else:
                _, target = min(parents, key=lambda p: (atom.x0 < p[0].x0, abs(atom.x0 - p[0].x1)))
                target.append(atom)
        return subs, sups

    def _emit(self, items: list[tuple[Atom | None, list[Atom], list[Atom]]]) -> str:
        tokens: list[str] = []
        bases = [b for b, _, _ in items]
        pairs = _pair_big_delimiters(bases)
        for base, subs, sups in items:
            if base is None:
                token = "{}"
            else:
                token = pairs.get(id(base), base.latex)
            if subs:
                token += f"_{{{self.layout(subs)}}}"
            if sups:
                token += f"^{{{self.layout(sups)}}}"
            tokens.append(token)
        return join_tokens(tokens)


def _column_gaps(atoms: list[Atom]) -> list[float]:
    """x positions where no cell of any row has ink over a gap of at least an em: column boundaries."""
    size = dominant_size(atoms)
    spans = sorted((a.x0, a.x1) for a in atoms if a.kind != "rule")
    gaps: list[float] = []
    reach = spans[0][1]
    for x0, x1 in spans[1:]:
        if x0 - reach >= 0.9 * size:
            gaps.append((reach + x0) / 2)
        reach = max(reach, x1)
    return gaps


def _cells(row: list[Atom], columns: list[float]) -> list[list[Atom]]:
    cells: list[list[Atom]] = [[] for _ in range(len(columns) + 1)]
    for a in row:
        cells[sum(1 for x in columns if a.cx > x)].append(a)
    return cells


def _centre_offset(op: Atom, run: list[Atom]) -> float:
    return abs((min(a.x0 for a in run) + max(a.x1 for a in run)) / 2 - op.cx)


def _pair_big_delimiters(bases: list[Atom | None]) -> dict[int, str]:
    """Big delimiters that open and close at the same level become \\left ... \\right pairs."""
    stack: list[Atom] = []
    pairs: dict[int, str] = {}
    for atom in bases:
        if atom is None or not atom.big or atom.kind not in {"open", "close", "fence"}:
            continue
        opening = atom.kind == "open" or (
            atom.kind == "fence" and not any(s.kind == "fence" and s.latex == atom.latex for s in stack)
        )
        if opening:
            stack.append(atom)
        elif stack:
            partner = stack.pop()
            pairs[id(partner)] = r"\left" + partner.latex
            pairs[id(atom)] = r"\right" + atom.latex
    return pairs


def _dominant_baseline(atoms: list[Atom]) -> float:
    size = dominant_size(atoms)
    # Big operators (and the limits grouped with them) sit on their own glyph origin, a few points off the
    # baseline in fonts that do not centre them the way cmex does: they never decide where the baseline is.
    candidates = [
        a for a in atoms if a.kind not in {"rule", "limits", "bigop"} and not a.big and abs(a.size - size) < 0.15 * size
    ]
    if not candidates:
        candidates = [a for a in atoms if a.kind != "rule"] or atoms
    clusters: list[list[Atom]] = []
    for a in sorted(candidates, key=lambda atom: atom.baseline):
        if clusters and a.baseline - clusters[-1][-1].baseline < 0.25 * size:
            clusters[-1].append(a)
        else:
            clusters.append([a])

    def weight(a: Atom) -> float:
        return max(a.width, 0.5) * (2.0 if a.kind in {"rel", "bin"} else 1.0)

    best = max(clusters, key=lambda cluster: sum(weight(a) for a in cluster))
    return max(best, key=weight).baseline
