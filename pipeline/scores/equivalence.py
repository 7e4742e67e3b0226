"""Whether a rotated version is as hard as the one it replaces, in figures and as a verdict.

Both versions are compared slot by slot (same tier and slot) and tier by tier; the rotation
is accepted only if no slot changes crate count or grade, the reference planner's solved
counts differ by at most ``allowed_gap`` levels (3 per 100, rounded up) and, when the agent
panel played both, no panel agent's solved count differs by more than the spec's
``panel_tolerance``.
"""

from __future__ import annotations

__all__ = [
    "EQUIVALENCE_FILE", "Equivalence", "GAP_PER_HUNDRED", "allowed_gap", "compare",
    "planner_solved",
]

import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from engine.agents.planner import plan
from engine.levels import parse_xsb
from pipeline.scores.matching import PanelRule, panel_matrix
from pipeline.versions.tables import as_float, as_int
from pipeline.workers import Workers

GAP_PER_HUNDRED = 3
EQUIVALENCE_FILE = "equivalence.json"  # in a rotated version's stages/ and its report/
_COLUMNS = ("index", "tier", "slot", "n_crates", "optimal_moves", "difficulty", "grade",
            "planner_solved")


def allowed_gap(levels: int) -> int:
    """Planner solved counts may differ by 3 per 100 levels, rounded up: 3 of 100, 1 of 8.

    Rounding up keeps the rule from demanding identical counts on a small set, where one level
    is already more than 3 %; on 100 levels it is exactly the stated 3.
    """
    return math.ceil(GAP_PER_HUNDRED * levels / 100)


def planner_solved(table: pl.DataFrame, workers: Workers | None = None) -> list[bool]:
    """The reference planner's outcome on every row (``xsb`` within ``max_steps``)."""
    items = list(zip(table["xsb"].to_list(), table["max_steps"].to_list(), strict=True))
    return (workers or Workers(show_progress=False)).map(_plays, items, label="planner")


def _plays(item: tuple[str, int]) -> bool:
    return plan(parse_xsb(item[0]), int(item[1])).solved


@dataclass(frozen=True)
class Equivalence:
    """The figures of one comparison of NEW against PREV, and the verdict on them."""

    prev: str
    new: str
    tiers: list[dict[str, Any]]
    largest: dict[str, dict[str, Any]]
    solved: dict[str, int]
    mismatches: list[str]
    # Each panel agent's solved count on both ({"agent", "prev", "new"}) and the spec's
    # panel_tolerance; empty (None) for a verdict given before the panel existed.
    panel: list[dict[str, Any]] = field(default_factory=list)
    panel_tolerance: int | None = None

    @property
    def planner_gap(self) -> int:
        return abs(self.solved["new"] - self.solved["prev"])

    @property
    def panel_off(self) -> list[dict[str, Any]]:
        """The panel agents whose solved counts differ by more than the tolerance."""
        if self.panel_tolerance is None:
            return []
        return [a for a in self.panel if abs(a["new"] - a["prev"]) > self.panel_tolerance]

    @property
    def accepted(self) -> bool:
        return (not self.mismatches and self.planner_gap <= self.solved["allowed_gap"]
                and not self.panel_off)

    def reasons(self) -> list[str]:
        """Why the rotation is refused (empty when it is accepted)."""
        out = list(self.mismatches)
        if self.planner_gap > self.solved["allowed_gap"]:
            out.append(f"the reference planner solves {self.solved['new']}/{self.solved['levels']}"
                       f" of {self.new} and {self.solved['prev']}/{self.solved['levels']} of "
                       f"{self.prev}: a gap of {self.planner_gap}, more than the allowed "
                       f"{self.solved['allowed_gap']}")
        if self.panel_off:
            agents = ", ".join(f"{a['agent']} {a['prev']} -> {a['new']}" for a in self.panel_off)
            out.append(f"panel agents whose solved count moves by more than "
                       f"{self.panel_tolerance} (panel_tolerance) from {self.prev} to "
                       f"{self.new}: {agents}")
        return out

    def to_dict(self) -> dict[str, Any]:
        out = {"prev": self.prev, "new": self.new, "accepted": self.accepted,
               "tiers": self.tiers, "largest_slot_difference": self.largest,
               "planner_solved": self.solved, "slot_mismatches": self.mismatches}
        if self.panel_tolerance is not None:
            out["panel"] = {"tolerance": self.panel_tolerance, "agents": self.panel}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Equivalence:
        panel = data.get("panel") or {}
        return cls(prev=data["prev"], new=data["new"], tiers=data["tiers"],
                   largest=data["largest_slot_difference"], solved=data["planner_solved"],
                   mismatches=data["slot_mismatches"], panel=panel.get("agents", []),
                   panel_tolerance=panel.get("tolerance"))

    def panel_lines(self) -> list[str]:
        """The panel on both versions side by side, one agent a line (none before it)."""
        if self.panel_tolerance is None:
            return []
        levels = self.solved["levels"]
        width = max(len(a["agent"]) for a in self.panel)
        return [f"panel solved on {self.prev} and {self.new} (tolerance "
                f"{self.panel_tolerance} levels):"] + [
            f"  {a['agent']:>{width}}  {a['prev']:>3}/{levels}  {a['new']:>3}/{levels}  "
            f"{a['new'] - a['prev']:+d}" for a in self.panel]

    def lines(self) -> list[str]:
        """The report as a maintainer reads it in a terminal."""
        a, b = self.prev, self.new
        head = ["tier", "levels", f"opt mean {a}", f"opt mean {b}", f"difficulty mean {a}",
                f"difficulty mean {b}", f"planner {a}", f"planner {b}"]
        rows = [[str(t["tier"]), str(t["levels"]), f"{t['prev_mean_optimum']:.2f}",
                 f"{t['new_mean_optimum']:.2f}", f"{t['prev_mean_difficulty']:.4f}",
                 f"{t['new_mean_difficulty']:.4f}", f"{t['prev_planner_solved']}/{t['levels']}",
                 f"{t['new_planner_solved']}/{t['levels']}"] for t in self.tiers]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        table = ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True))
                 for r in [head, *rows]]
        verdict = "accepted" if self.accepted else "REFUSED: " + "; ".join(self.reasons())
        return [f"{b} against {a}: {verdict}", *table, *self.figure_lines(),
                *self.panel_lines()]

    def figure_lines(self) -> list[str]:
        """The largest slot differences and the reference planner's solved counts."""
        a, b = self.prev, self.new
        opt, diff = self.largest["optimal_moves"], self.largest["difficulty"]
        return [f"largest slot difference: optimum {opt['difference']} move(s) in tier "
                f"{opt['tier']} slot {opt['slot']} ({opt['prev']} -> {opt['new']}); difficulty "
                f"{diff['difference']:.4f} in tier {diff['tier']} slot {diff['slot']} "
                f"({diff['prev']:.4f} -> {diff['new']:.4f})",
                f"reference planner solved: {a} {self.solved['prev']}/{self.solved['levels']}, "
                f"{b} {self.solved['new']}/{self.solved['levels']} (allowed gap "
                f"{self.solved['allowed_gap']})"]


def compare(prev_name: str, prev: pl.DataFrame, new_name: str, new: pl.DataFrame,
            panel: PanelRule | None = None) -> Equivalence:
    """Compare two versions' tables (with a ``planner_solved`` column), slot by slot; with
    ``panel`` (both tables need a ``panel`` column), each panel agent's solved count too."""
    keys = ["tier", "slot"]
    if prev.height != new.height or prev.select(keys).sort(keys).rows() != \
            new.select(keys).sort(keys).rows():
        raise ValueError(f"{new_name} and {prev_name} do not have the same tiers and slots")
    both = (prev.select(_COLUMNS).sort("index")
            .join(new.select(_COLUMNS), on=keys, suffix="_new", maintain_order="left"))
    tiers = []
    for (tier,), part in both.group_by("tier", maintain_order=True):
        tiers.append({
            "tier": int(tier), "levels": part.height,
            "prev_mean_optimum": _mean(part["optimal_moves"]),
            "new_mean_optimum": _mean(part["optimal_moves_new"]),
            "prev_mean_difficulty": _mean(part["difficulty"]),
            "new_mean_difficulty": _mean(part["difficulty_new"]),
            "prev_planner_solved": int(part["planner_solved"].sum()),
            "new_planner_solved": int(part["planner_solved_new"].sum()),
        })
    mismatches = [
        f"tier {r['tier']} slot {r['slot']}: {what} {r[col]} in {prev_name}, "
        f"{r[col + '_new']} in {new_name}"
        for r in both.iter_rows(named=True)
        for col, what in (("n_crates", "crates"), ("grade", "grade"))
        if r[col] != r[col + "_new"]]
    return Equivalence(
        prev=prev_name, new=new_name, tiers=tiers,
        largest={"optimal_moves": _largest(both, "optimal_moves"),
                 "difficulty": _largest(both, "difficulty")},
        solved={"prev": int(both["planner_solved"].sum()),
                "new": int(both["planner_solved_new"].sum()),
                "levels": both.height, "allowed_gap": allowed_gap(both.height)},
        mismatches=mismatches,
        panel=[] if panel is None else [
            {"agent": name, "prev": int(p), "new": int(n)} for name, p, n in
            zip(panel.agents, panel_matrix(prev).sum(axis=0), panel_matrix(new).sum(axis=0),
                strict=True)],
        panel_tolerance=None if panel is None else panel.tolerance)


def _mean(s: pl.Series) -> float:
    return as_float(s.cast(pl.Float64).mean())


def _largest(both: pl.DataFrame, column: str) -> dict[str, Any]:
    """The slot whose ``column`` differs most between the versions (first one on ties)."""
    diff = (both[f"{column}_new"].cast(pl.Float64) - both[column].cast(pl.Float64)).abs()
    at = as_int(diff.arg_max())
    cast = int if column == "optimal_moves" else float
    return {"tier": int(both["tier"][at]), "slot": int(both["slot"][at]),
            "prev_index": int(both["index"][at]), "new_index": int(both["index_new"][at]),
            "prev": cast(both[column][at]), "new": cast(both[f"{column}_new"][at]),
            "difference": cast(diff[at])}
