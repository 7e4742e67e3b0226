"""The audit's pictures: plots of a version's levels by play order and tier, the contact sheet
of every level in the agent's view with its colour legend, and the panel's solved shares.

Each function returns PNG bytes; ``pipeline.audit.audit_report`` writes them beside report.md.
"""

from __future__ import annotations

__all__ = [
    "colour_legend", "contact_sheet", "level_looks", "plot_calibration", "plot_difficulty",
    "plot_histograms", "plot_information", "plot_optima", "plot_panel",
    "plot_pushes_and_slack", "version_curve",
]

import io
from typing import Any

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from engine.levels import parse_xsb
from engine.pictures.look import Look, frame, stored_look
from pipeline.audit.audit import Comparison, VersionFacts, is_imported
from pipeline.audit.information import RAMP_LEVELS, InformationCurve
from pipeline.difficulty.compute_curve import RULE_BUDGET
from pipeline.difficulty.difficulty import load_model
from pipeline.difficulty.reliability import curve, wilson_interval
from pipeline.spec import version_look

_TIER_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")
_DPI = 110

# Small levels holding every kind of cell, drawn like the contact sheet for its legend:
# (name, level, row, column) of the cell that shows each kind.
_LEGEND_XSB = "######\n#@$. #\n#  * #\n######"
_LEGEND_CELLS = (("wall", _LEGEND_XSB, 0, 0), ("floor", _LEGEND_XSB, 2, 2),
                 ("floor, alternate squares", _LEGEND_XSB, 2, 1),
                 ("player", _LEGEND_XSB, 1, 1), ("crate", _LEGEND_XSB, 1, 2),
                 ("goal", _LEGEND_XSB, 1, 3), ("crate on a goal", _LEGEND_XSB, 2, 3),
                 ("player on a goal", "#####\n#+$ #\n#####", 1, 1))


def _colour(tier: int) -> str:
    return _TIER_COLOURS[tier % len(_TIER_COLOURS)]


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight")
    return buf.getvalue()


def _grade_lines(ax: Axes, vertical: bool = False) -> None:
    """The fixed grade cut points as dashed lines, each labelled with its value, and every
    band between them named (grade 1 easiest to 5) at the plot's edge; labels that would
    collide (the first cuts sit close together) are moved apart, in points."""
    cuts = list(load_model().grade_cuts)
    edges = [0.0, *cuts, 1.0]
    line = ax.axvline if vertical else ax.axhline
    # label positions: along the axis in data units, across it in axes fractions
    where = ax.get_xaxis_transform() if vertical else ax.get_yaxis_transform()
    for cut in cuts:
        line(cut, color="#777777", lw=0.9, ls="--", zorder=0)
    mids = [(lo + hi) / 2 for lo, hi in zip(edges, edges[1:], strict=False)]
    if vertical:  # neighbouring cuts' labels alternate in height, in points above the axes
        for i, cut in enumerate(cuts):
            ax.annotate(f"{cut:.2g}", (cut, 1.0), xycoords=where, xytext=(0, 2 + 9 * (i % 2)),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7,
                        color="#555555")
        for g, (lo, hi) in enumerate(zip(edges, edges[1:], strict=False), start=1):
            if hi - lo >= 0.1:  # a narrower band has no room for its name
                ax.text(mids[g - 1], 0.97, f"g{g}", transform=where, ha="center", va="top",
                        fontsize=8, color="#444444", fontweight="bold")
        return
    points = _points_per_unit(ax)
    for cut, at in zip(cuts, _spread(cuts, 9 / points), strict=True):
        ax.annotate(f"{cut:.2g}", (1.0, at), xycoords=where, xytext=(3, 0),
                    textcoords="offset points", ha="left", va="center", fontsize=7,
                    color="#555555")
    for g, at in enumerate(_spread(mids, 10 / points), start=1):
        ax.annotate(f"grade {g}", (1.0, at), xycoords=where, xytext=(32, 0),
                    textcoords="offset points", ha="left", va="center", fontsize=8,
                    color="#444444", fontweight="bold")


def _points_per_unit(ax: Axes) -> float:
    """Typographic points per data unit along the y axis (from the axes' size on the figure)."""
    lo, hi = ax.get_ylim()
    inches = ax.get_position().height * ax.get_figure().get_figheight()  # type: ignore[union-attr]
    return inches * 72 / (hi - lo)


def _spread(positions: list[float], gap: float) -> list[float]:
    """``positions`` (ascending) moved up where needed so that no two are closer than ``gap``."""
    out: list[float] = []
    for p in positions:
        out.append(p if not out else max(p, out[-1] + gap))
    return out


def _order(facts: VersionFacts) -> str:
    """What the x axis of a plot by index is: a build's play order, or an import's file order."""
    return "file order" if is_imported(facts.manifest) else "play order"


def _whole_ticks(ax: Axes, x: bool = True, y: bool = True) -> None:
    """Ticks only at whole numbers on the axes that count (levels, moves, play positions)."""
    for axis, wanted in ((ax.xaxis, x), (ax.yaxis, y)):
        if wanted:
            axis.set_major_locator(MaxNLocator(integer=True))


def _overlay(ax: Axes, comparison: Comparison | None, a: str, b: str,
             column: str) -> None:
    """``b``'s value of ``column`` at each slot ``a`` shares with it, drawn at ``a``'s play
    position: black crosses joined within a tier, so the two follow the same slots."""
    if comparison is None:
        return
    slots = comparison.slots.filter(pl.col(f"{column} {b}").is_not_null())
    for i, (_, part) in enumerate(slots.group_by("tier", maintain_order=True)):
        ax.plot(part[f"index {a}"].to_numpy(), part[f"{column} {b}"].to_numpy(), "x-",
                color="black", lw=0.8, ms=4, alpha=0.7,
                label=f"{b}, same tier and slot" if i == 0 else None)


def plot_optima(facts: VersionFacts, comparison: Comparison | None = None,
                other: str = "") -> bytes:
    """Optimal moves against play order, each slot's band drawn as a bar behind its point."""
    t = facts.table
    fig = Figure(figsize=(11, 4.2))
    ax = fig.subplots()
    banded = t.filter(pl.col("band_lo").is_not_null() & pl.col("band_hi").is_not_null())
    if banded.height:  # an imported collection has none: no bars, and no legend entry
        ax.bar(banded["index"].to_numpy(),
               banded["band_hi"].to_numpy() - banded["band_lo"].to_numpy() + 1,
               bottom=banded["band_lo"].to_numpy() - 0.5, width=0.8, color="#cccccc",
               label="slot band")
    for tier, part in t.group_by("tier", maintain_order=True):
        ok = part["planner_solved"].to_numpy()
        px, py = part["index"].to_numpy(), part["optimal_moves"].to_numpy()
        ax.scatter(px[ok], py[ok], s=22, color=_colour(tier[0]), label=f"tier {tier[0]}")
        ax.scatter(px[~ok], py[~ok], s=30, facecolors="none", edgecolors=_colour(tier[0]),
                   linewidths=1.4)
    _overlay(ax, comparison, facts.name, other, "optimal_moves")
    _whole_ticks(ax)
    ax.set_xlabel(f"{_order(facts)} (index); hollow = reference planner failed")
    ax.set_ylabel("optimal moves")
    ax.set_title(f"{facts.name}: optimal moves" + (" and slot bands" if banded.height else ""))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9, ncol=3)
    return _png(fig)


def plot_difficulty(facts: VersionFacts, comparison: Comparison | None = None,
                    other: str = "") -> bytes:
    """Difficulty against play order with the fixed grade cut points as labelled lines."""
    t = facts.table
    fig = Figure(figsize=(11, 4.2))
    ax = fig.subplots()
    ax.set_ylim(-0.02, 1.02)
    _grade_lines(ax)
    for tier, part in t.group_by("tier", maintain_order=True):
        x, y = part["index"].to_numpy(), part["difficulty"].to_numpy()
        # a line joins levels played one after the other, never across another tier's
        for n, run in enumerate(np.split(np.arange(x.size), np.flatnonzero(np.diff(x) != 1) + 1)):
            ax.plot(x[run], y[run], "o-", ms=4, color=_colour(tier[0]),
                    label=f"tier {tier[0]}" if n == 0 else None)
    _overlay(ax, comparison, facts.name, other, "difficulty")
    _whole_ticks(ax, y=False)
    ax.set_xlabel(f"{_order(facts)} (index); dashed lines: grade cut points")
    ax.set_ylabel(f"difficulty (P planner fails at {RULE_BUDGET} calls/step)")
    ax.set_title(f"{facts.name}: difficulty "
                 + ("in file order" if is_imported(facts.manifest) else "along the ramp"))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9, ncol=3)
    return _png(fig)


def plot_histograms(facts: VersionFacts) -> bytes:
    """Per tier: histogram of optimal moves (top row) and of difficulty (bottom row)."""
    parts = list(facts.table.group_by("tier", maintain_order=True))
    fig = Figure(figsize=(3.2 * len(parts) + 1, 5.4))
    axes = fig.subplots(2, len(parts), squeeze=False)
    for col, (tier, part) in enumerate(parts):
        opt = part["optimal_moves"].to_numpy()
        axes[0, col].hist(opt, bins=range(int(opt.min()), int(opt.max()) + 2),
                          color=_colour(tier[0]))
        axes[0, col].set_title(f"tier {tier[0]} ({part.height} level"
                               f"{'s' if part.height > 1 else ''})")
        _whole_ticks(axes[0, col])
        _whole_ticks(axes[1, col], x=False)
        axes[0, col].set_xlabel("optimal moves")
        axes[1, col].hist(part["difficulty"].to_numpy(), bins=np.linspace(0, 1, 21),
                          color=_colour(tier[0]))
        axes[1, col].set_xlim(0, 1)
        _grade_lines(axes[1, col], vertical=True)
        axes[1, col].set_xlabel("difficulty (dashed: grade cut points)")
    axes[0, 0].set_ylabel("levels")
    axes[1, 0].set_ylabel("levels")
    fig.tight_layout()
    return _png(fig)


def plot_pushes_and_slack(facts: VersionFacts) -> bytes:
    """Per tier: optimal pushes, the budget's slack over the optimum (max_steps minus optimal
    moves), and the slack the reference planner left when it solved (max_steps minus its steps)."""
    t = facts.table
    tiers = sorted(set(t["tier"].to_list()))
    solved = t.filter(pl.col("planner_solved"))
    panels = (
        ("optimal pushes", [t.filter(pl.col("tier") == k)["optimal_pushes"] for k in tiers]),
        ("budget slack: max_steps - optimal moves",
         [t.filter(pl.col("tier") == k).select(pl.col("max_steps").cast(pl.Int64)
                                                - pl.col("optimal_moves"))
          .to_series() for k in tiers]),
        ("planner slack: max_steps - planner steps (solved levels)",
         [solved.filter(pl.col("tier") == k).select(pl.col("max_steps").cast(pl.Int64)
                                                     - pl.col("planner_steps"))
          .to_series() for k in tiers]),
    )
    fig = Figure(figsize=(12.5, 3.8))
    axes = fig.subplots(1, 3)
    rng = np.random.default_rng(0)  # jitter only: the same report for the same version
    for ax, (title, series) in zip(axes, panels, strict=True):
        data = [s.to_numpy().astype(float) for s in series]
        shown = [d if d.size else np.array([np.nan]) for d in data]
        ax.boxplot(shown, positions=range(len(tiers)), widths=0.55, showfliers=False,
                   medianprops={"color": "black"})
        for i, (k, d) in enumerate(zip(tiers, data, strict=True)):
            ax.scatter(i + rng.uniform(-0.18, 0.18, d.size), d, s=9, alpha=0.65,
                       color=_colour(k), zorder=3)
        ax.set_xticks(range(len(tiers)), [f"tier {k}\n(n={d.size})" for k, d in
                                          zip(tiers, data, strict=True)])
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("pushes")
    axes[1].set_ylabel("steps")
    fig.tight_layout()
    return _png(fig)


def version_curve(facts: VersionFacts) -> dict[str, Any]:
    """The version's reliability curve: its stored difficulty against the planner's outcome
    in this audit, by decile."""
    return curve(facts.table["difficulty"].to_numpy(), ~facts.table["planner_solved"].to_numpy())


def plot_calibration(facts: VersionFacts, mine: dict[str, Any],
                     pool: dict[str, Any] | None) -> bytes:
    """Predicted difficulty against the reference planner's observed failure rate, by decile,
    for the version and for the model's held-out calibration pool, with grade cut lines."""
    fig = Figure(figsize=(7.2, 6))
    ax = fig.subplots()
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    _grade_lines(ax, vertical=True)
    ax.plot([0, 1], [0, 1], color="#aaaaaa", lw=1, label="perfect calibration")
    if pool is not None:
        x = [b["predicted_mean"] for b in pool["bins"]]
        y = [b["observed_failure_rate"] for b in pool["bins"]]
        ax.plot(x, y, "s-", color="#555555", ms=5,
                label=f"calibration pool (held out, {pool['levels']} levels): "
                      f"Brier {pool['brier']:.3f}")
    xs = np.array([b["predicted_mean"] for b in mine["bins"]])
    ys = np.array([b["observed_failure_rate"] for b in mine["bins"]])
    lo, hi = np.array([wilson_interval(b["failures"], b["levels"]) for b in mine["bins"]]).T
    ax.errorbar(xs, ys, yerr=[ys - lo, hi - ys], fmt="o-", color="#c62828", ms=6, lw=1.2,
                capsize=3, zorder=3,
                label=f"{facts.name} ({mine['levels']} levels, 95% intervals): "
                      f"Brier {mine['brier']:.3f}")
    ax.set_xlabel("predicted difficulty (decile mean)")
    ax.set_ylabel("observed failure rate of the reference planner")
    ax.set_title(f"{facts.name}: calibration of the difficulty model", pad=22)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, bbox_to_anchor=(0.0, 0.93))
    return _png(fig)


def level_looks(facts: VersionFacts) -> list[Look]:
    """Each level's look, as the server draws it: its stored theme, else its version's look."""
    look = version_look(facts.manifest)
    return [stored_look(look, row) for row in facts.table.iter_rows(named=True)]


def colour_legend(facts: VersionFacts, scale: int = 4) -> bytes:
    """What each colour of the contact sheet means: every kind of cell cut from small levels
    drawn the same way (in the first level's look, without noise; a themed version recolours
    every level), then the label colour of each tier."""
    first = level_looks(facts)[0]
    look = Look(first.name, first.theme)
    cells: list[tuple[str, np.ndarray]] = []
    for name, xsb, r, col in _LEGEND_CELLS:
        level = parse_xsb(xsb)
        c = 64 // max(level.height, level.width)
        top, left = (64 - level.height * c) // 2, (64 - level.width * c) // 2
        drawn = frame(level, None, look)
        tile = drawn[top + r * c: top + (r + 1) * c, left + col * c: left + (col + 1) * c]
        if not any(np.array_equal(tile, seen) for _, seen in cells):  # e.g. no checker
            cells.append((name, tile))
    tiers = sorted(set(facts.table["tier"].to_list()))
    per_row = 4
    rows = -(-len(cells) // per_row) + 2
    width, height = 11.0, 0.45 * rows + 0.2
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    side = 0.34  # inches: square swatches whatever the figure's proportions
    dx, dy = side * per_row / width, side * rows / height
    for i, (name, tile) in enumerate(cells):
        x, y = i % per_row, i // per_row
        big = np.kron(tile, np.ones((scale, scale, 1), dtype=np.uint8))
        y0 = y + (1 - dy) / 2
        ax.imshow(big, extent=(x + 0.02, x + 0.02 + dx, y0 + dy, y0), interpolation="nearest",
                  aspect="auto")
        ax.add_patch(Rectangle((x + 0.02, y0), dx, dy, fill=False, lw=0.8,
                               edgecolor="#555555"))
        ax.text(x + 0.06 + dx, y + 0.5, name, va="center", fontsize=10)
    y = rows - 2
    ax.text(0.02, y + 0.5, "label colour of each tier:", va="center", fontsize=10)
    for j, k in enumerate(tiers):
        ax.text(0.9 + 0.4 * j, y + 0.5, f"tier {k}", va="center", fontsize=10,
                fontweight="bold", color=_colour(k))
    ax.text(0.02, y + 1.5, "label of a level: #index, opt = optimal moves, g = grade; "
            "x = the reference planner failed it", va="center", fontsize=10)
    ax.set_xlim(0, per_row)  # imshow moved the limits to its pictures
    ax.set_ylim(rows, 0)
    return _png(fig)


def contact_sheet(facts: VersionFacts, per_row: int = 10, scale: int = 2) -> bytes:
    """Every level's 64x64 observation in its version's look, labelled with index, optimum
    and grade."""
    n = len(facts.levels)
    per_row = max(1, min(per_row, n))
    rows = max(1, -(-n // per_row))
    tile, gap, label = 64 * scale, 8, 22
    cell_w, cell_h = tile + gap, tile + gap + label
    sheet = np.full((rows * cell_h, per_row * cell_w, 3), 255, dtype=np.uint8)
    for i, (board, look) in enumerate(zip(facts.levels, level_looks(facts), strict=True)):
        r, c = divmod(i, per_row)
        y, x = r * cell_h + label, c * cell_w + gap // 2
        start = frame(board, None, look)
        sheet[y:y + tile, x:x + tile] = np.kron(start, np.ones((scale, scale, 1), dtype=np.uint8))
    dpi = 100
    fig = Figure(figsize=(sheet.shape[1] / dpi, sheet.shape[0] / dpi + 0.4), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, sheet.shape[0] / (sheet.shape[0] + 40)))
    ax.imshow(sheet, interpolation="nearest")
    ax.axis("off")
    for i, cell in enumerate(facts.table.iter_rows(named=True)):
        row, col = divmod(i, per_row)
        mark = " x" if not cell["planner_solved"] else ""
        ax.text(col * cell_w + gap // 2 + tile / 2, row * cell_h + label - 5,
                f"#{cell['index']} opt {cell['optimal_moves']} g{cell['grade']}{mark}",
                ha="center", va="bottom", fontsize=9, color=_colour(cell["tier"]))
    fig.suptitle(f"{facts.name}: every level as the agent sees it "
                 "(#index, optimal moves, grade; x = planner failed)", fontsize=11, y=0.995)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def plot_panel(counts: pl.DataFrame, tier_sizes: dict[int, int]) -> bytes:
    """Share of each tier's levels every panel agent solves: one row of cells per agent."""
    tiers = sorted(tier_sizes)
    share = np.array([[(row.get(f"tier {t}") or 0) / tier_sizes[t] for t in tiers]
                      for row in counts.iter_rows(named=True)])
    fig = Figure(figsize=(1.2 * len(tiers) + 3.2, 0.32 * counts.height + 1.2))
    ax = fig.subplots()
    ax.imshow(share, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for i, row in enumerate(counts.iter_rows(named=True)):
        for j, t in enumerate(tiers):
            ax.text(j, i, f"{row.get(f'tier {t}') or 0}/{tier_sizes[t]}", ha="center",
                    va="center", fontsize=8, color="white" if share[i, j] < 0.6 else "black")
    ax.set_xticks(range(len(tiers)), [f"tier {t}" for t in tiers])
    ax.set_yticks(range(counts.height), [f"{a} ({s})" for a, s in
                                         zip(counts["agent"], counts["solved"], strict=True)])
    ax.set_title("levels solved per tier, by agent (dynamics calls per step)", fontsize=10)
    return _png(fig)


def plot_information(name: str, c: InformationCurve) -> bytes:
    """Test information against ability: a session's, the standard ramp's (the floor) and
    the whole pool's (right axis), the ramp's span shaded, its expected success on top."""
    fig = Figure(figsize=(8.4, 5.2))
    ax = fig.subplots()
    ax.axvspan(*c.span, color="#e8eef7", zorder=0,
               label="abilities the standard ramp spans (its middle 90% of difficulties)")
    ax.plot(c.theta, c.session, "-", color="#c62828", lw=2,
            label=f"a session of {c.episodes} levels")
    ax.plot(c.theta, c.ramp, "--", color="#333333", lw=1.5,
            label=f"the standard ramp, {RAMP_LEVELS} levels (the floor)")
    ax.set_xlabel("ability theta (logits)")
    ax.set_ylabel("test information (1 / standard error squared)")
    ax.set_ylim(0, 1.45 * max(float(c.session.max()), float(c.ramp.max())))  # the legend's room
    ax.grid(alpha=0.3)
    right = ax.twinx()
    right.plot(c.theta, c.pool, ":", color="#1f5fa8", lw=1.5,
               label=f"the whole pool ({name})")
    right.set_ylabel("the whole pool's information", color="#1f5fa8")
    right.set_ylim(0, 1.45 * float(c.pool.max()))
    top = ax.secondary_xaxis("top")
    top.set_xticks(list(c.theta[::8]), [f"{s:.2f}" for s in c.success[::8]])
    top.set_xlabel("expected success on the standard ramp at that ability")
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", fontsize=8)
    ax.set_title(f"{name}: information curve", pad=8)
    fig.tight_layout()
    return _png(fig)
