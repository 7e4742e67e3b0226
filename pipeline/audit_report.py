"""The audit's outputs: plots, contact sheet, report.md, a self-contained report.html, summary.

Images are written as PNG files next to report.md and inlined as base64 in report.html, so the
HTML opens offline with nothing beside it.
"""

from __future__ import annotations

__all__ = [
    "Report", "colour_legend", "comparison_slots", "comparison_tiers", "contact_sheet",
    "irt_agents", "irt_levels", "irt_note", "level_looks", "panel_counts", "plot_calibration",
    "plot_difficulty", "plot_histograms", "plot_optima", "plot_panel", "plot_pushes_and_slack",
    "swap_in", "version_curve", "version_metadata",
]

import base64
import html
import io
import json
import os
import platform
import shutil
import tempfile
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from engine.ladder import LADDER_BUDGETS, LADDER_SEEDS
from engine.levels import parse_xsb
from engine.look import Look, frame, stored_look
from engine.planner import CALLS_PER_EXPANSION
from pipeline.audit import (
    AuditResult,
    Check,
    Comparison,
    VersionFacts,
    deadlock_summary,
    tier_summary,
)
from pipeline.compute_curve import RULE_BUDGET, grade_rule
from pipeline.difficulty import load_model
from pipeline.equivalence import EQUIVALENCE_FILE, Equivalence
from pipeline.irt import IRT_FILE
from pipeline.linking import LINE_FILE
from pipeline.panel import PANEL_FILE, solved_counts
from pipeline.reliability import curve, load_pool_curve, wilson_interval
from pipeline.spec import version_look
from pipeline.tables import as_float

_TIER_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")
_DPI = 110
_LIBRARIES = ("numpy", "numba", "ortools", "polars", "pyarrow", "matplotlib")
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
    band between them named (grade 1 easiest to 5) at the plot's edge."""
    cuts = list(load_model().grade_cuts)
    edges = [0.0, *cuts, 1.0]
    line = ax.axvline if vertical else ax.axhline
    # label positions: along the axis in data units, across it in axes fractions
    where = ax.get_xaxis_transform() if vertical else ax.get_yaxis_transform()
    for i, cut in enumerate(cuts):
        line(cut, color="#777777", lw=0.9, ls="--", zorder=0)
        if vertical:  # neighbouring cuts can sit close: labels alternate in height
            ax.text(cut, 1.01 + 0.04 * (i % 2), f"{cut:.2g}", transform=where, ha="center",
                    va="bottom", fontsize=7, color="#555555")
        else:
            ax.text(1.005, cut, f"{cut:.2g}", transform=where, ha="left", va="center",
                    fontsize=7, color="#555555")
    for g, (lo, hi) in enumerate(zip(edges, edges[1:], strict=False), start=1):
        mid = (lo + hi) / 2
        if vertical and hi - lo < 0.1:  # too narrow to name beside its neighbours
            continue
        if vertical:
            ax.text(mid, 0.97, f"g{g}", transform=where, ha="center", va="top", fontsize=8,
                    color="#444444", fontweight="bold")
        else:
            ax.text(1.035, mid, f"grade {g}", transform=where, ha="left", va="center",
                    fontsize=8, color="#444444", fontweight="bold")


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
    x = t["index"].to_numpy()
    ax.bar(x, t["band_hi"].to_numpy() - t["band_lo"].to_numpy() + 1,
           bottom=t["band_lo"].to_numpy() - 0.5, width=0.8, color="#cccccc", label="slot band")
    for tier, part in t.group_by("tier", maintain_order=True):
        ok = part["planner_solved"].to_numpy()
        px, py = part["index"].to_numpy(), part["optimal_moves"].to_numpy()
        ax.scatter(px[ok], py[ok], s=22, color=_colour(tier[0]), label=f"tier {tier[0]}")
        ax.scatter(px[~ok], py[~ok], s=30, facecolors="none", edgecolors=_colour(tier[0]),
                   linewidths=1.4)
    _overlay(ax, comparison, facts.name, other, "optimal_moves")
    ax.set_xlabel("play order (index); hollow = reference planner failed")
    ax.set_ylabel("optimal moves")
    ax.set_title(f"{facts.name}: optimal moves and slot bands")
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
        ax.plot(part["index"].to_numpy(), part["difficulty"].to_numpy(), "o-", ms=4,
                color=_colour(tier[0]), label=f"tier {tier[0]}")
    _overlay(ax, comparison, facts.name, other, "difficulty")
    ax.set_xlabel("play order (index); dashed lines: grade cut points")
    ax.set_ylabel(f"difficulty (P planner fails at {RULE_BUDGET} calls/step)")
    ax.set_title(f"{facts.name}: difficulty along the ramp")
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
        axes[0, col].set_title(f"tier {tier[0]} ({part.height} levels)")
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
    ax.set_title(f"{facts.name}: calibration of the difficulty model", pad=16)
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


def _md_table(df: pl.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |"
    sep = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join([head, sep, *body])


def _cell(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != v:  # NaN: nothing to show
            return ""
        return f"{v:.3f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))
    return "" if v is None else str(v)


def comparison_tiers(result: AuditResult) -> pl.DataFrame:
    """Per pair of compared tiers: both versions' sizes, optimum, difficulty, planner solved."""
    a, b, comparison = result.facts, result.against, result.comparison
    assert b is not None and comparison is not None
    rows = []
    for p in comparison.pairs:
        pa_ = a.table.filter(pl.col("tier") == p.tier)
        pb = b.table.filter(pl.col("tier") == p.other_tier)
        rows.append({
            "tier": p.tier, f"tier {b.name}": p.other_tier, "crates": p.crates,
            f"levels {a.name}": pa_.height, f"levels {b.name}": pb.height,
            f"opt mean {a.name}": _mean(pa_["optimal_moves"]),
            f"opt mean {b.name}": _mean(pb["optimal_moves"]),
            f"difficulty mean {a.name}": _mean(pa_["difficulty"]),
            f"difficulty mean {b.name}": _mean(pb["difficulty"]),
            f"planner {a.name}": f"{int(pa_['planner_solved'].sum())}/{pa_.height}",
            f"planner {b.name}": f"{int(pb['planner_solved'].sum())}/{pb.height}",
        })
    if not rows:
        return pl.DataFrame({"tier": []})
    return pl.DataFrame(rows)


def _mean(s: pl.Series) -> float | None:
    return round(as_float(s.mean()), 3) if s.len() else None


def comparison_slots(result: AuditResult) -> pl.DataFrame:
    """Slot by slot (tier, slot): both versions' optimum, difficulty, grade, planner outcome."""
    a, b, comparison = result.facts, result.against, result.comparison
    assert b is not None and comparison is not None
    cols = ["tier", "slot", f"tier {b.name}"] + [
        f"{c} {n}" for c in ("index", "optimal_moves", "difficulty", "grade", "planner_solved")
        for n in (a.name, b.name)]
    return comparison.slots.select(cols).with_columns(
        pl.col(f"difficulty {a.name}").round(3), pl.col(f"difficulty {b.name}").round(3))


def _bins_table(bins: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame([{"bin": b["bin"], "levels": b["levels"],
                          "predicted": b["predicted_mean"],
                          "failed": b["observed_failure_rate"]} for b in bins])


def _versions_of(packages: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in packages.items())


def _installed(name: str) -> str:
    try:
        return package_version(name)
    except PackageNotFoundError:
        return "not installed"


def version_metadata(facts: VersionFacts, audited_at: datetime) -> list[tuple[str, str]]:
    """What the version is and what audited it, as (field, value) rows."""
    m = facts.manifest
    generator = m.get("generator", {})
    spec = facts.spec
    commitment = (m.get("seed_commitment") or {}).get("sha256")
    if m.get("seed_source") == "public":
        seed = f"public: {m.get('public_seed', 'given at build time')}"
    elif commitment:
        seed = f"secret: only its salted sha256 commitment {commitment[:16]}... is published"
    else:  # an imported collection: its source files stand where a seed would
        files = ", ".join(f"{s.get('name')} ({str(s.get('sha256'))[:12]}...)"
                          for s in m.get("sources", []))
        seed = f"none ({m.get('seed_source')}); sources: {files or 'not recorded'}"
    tiers = "; ".join(f"tier {t}: {tier.levels} x {tier.crates} crate(s), bands "
                      f"{tier.band_start[0]}-{tier.band_start[1]} to "
                      f"{tier.band_end[0]}-{tier.band_end[1]}"
                      for t, tier in enumerate(spec.tiers))
    built = {"sokoforge": generator.get("package_version", "not recorded"),
             **generator.get("libraries", {})}
    audited = {"sokoforge": _installed("sokoforge"),
               **{name: _installed(name) for name in _LIBRARIES}}
    budget = f"step budget max({spec.budget_floor}, {spec.budget_multiple} x optimal moves)"
    if commitment or m.get("seed_source") == "public":
        game = (f"{spec.name}, {spec.height}x{spec.width}, {spec.n_levels} levels, method "
                f"{spec.method}, {budget}; {tiers}")
    else:
        game = (f"levels from files; {budget} (the rule of spec {spec.name}); tiers are the "
                "levels of each crate count")
    model = load_model()
    return [
        ("version", facts.name),
        ("created", m.get("created", "not recorded")),
        ("spec", game),
        ("seed", seed),
        ("rotated from", m.get("rotated_from") or "none (a fresh build)"),
        ("levels.parquet sha256", m["files"]["levels.parquet"]["sha256"]),
        ("built with", _versions_of(built)),
        ("audited with", f"{_versions_of(audited)}; Python {platform.python_version()}"),
        ("difficulty model", f"fitted {model.info.get('fit_date', '?')}; {grade_rule()}"),
        ("audit time", audited_at.strftime("%Y-%m-%d %H:%M:%S UTC")),
    ]


def panel_counts(result: AuditResult) -> pl.DataFrame | None:
    """Each panel agent's solved levels, in all and per tier (``report/panel.parquet``)."""
    if result.panel is None:
        return None
    frame = pl.read_parquet(io.BytesIO(result.panel))
    return solved_counts(frame, result.facts.table.select("index", "tier"))


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


_PANEL_NOTE = ("Each agent replans after every step within its budget of dynamics calls per "
               "step: planner = the reference planner (learning real-time A*), greedy = greedy "
               "best-first over box distances, breadth = a breadth-first lookahead, rollout = "
               "random rollouts. From report/panel.parquet (sokoforge panel).")


def irt_note(irt: dict) -> str:
    """One paragraph on the item-response refit (``report/irt.json``)."""
    return (f"Two-parameter item-response model fitted on {irt['episodes']} finished episodes of "
            f"{irt['scorecards']} closed scorecards ({len(irt['agents'])} agents; browser runs "
            f"{irt['browser_runs']}). Spearman of the empirical difficulty with "
            f"{irt['spearman_empirical_vs']}: {irt['spearman']}.")


def irt_agents(irt: dict) -> pl.DataFrame:
    """The agents' fitted abilities, strongest first."""
    return pl.DataFrame([{"agent": a["name"], "ability": a["ability"],
                          "solved": f"{a['solved']}/{a['episodes']}"} for a in irt["agents"]])


def irt_levels(irt: dict, limit: int = 10) -> pl.DataFrame:
    """The levels real agents found hardest, beside their compute_to_solve and grade."""
    rows = sorted(irt["levels"], key=lambda lv: -lv["empirical_difficulty"])[:limit]
    return pl.DataFrame([{k: lv[k] for k in ("index", "tier", "solve_rate",
                                              "empirical_difficulty", "compute_to_solve",
                                              "grade")} for lv in rows])


class Report:
    """All pieces of one audit report, rendered as Markdown, HTML and a terminal summary."""

    def __init__(self, result: AuditResult, audited_at: datetime | None = None) -> None:
        self.result = result
        self.audited_at = audited_at or datetime.now(UTC)
        facts, other, comparison = result.facts, result.against, result.comparison
        other_name = other.name if other is not None else ""
        self.tiers = tier_summary(facts)
        self.deadlocks = deadlock_summary(facts)
        self.metadata = version_metadata(facts, self.audited_at)
        self.rotation = (Equivalence.from_dict(facts.rotation)
                         if facts.rotation is not None else None)
        self.curve = version_curve(facts)
        self.pool_curve = load_pool_curve()
        self.images = {
            "optima.png": ("Optimal moves against play order",
                           plot_optima(facts, comparison, other_name)),
            "difficulty.png": ("Difficulty against play order",
                               plot_difficulty(facts, comparison, other_name)),
            "calibration.png": ("Calibration: predicted difficulty against planner failures",
                                plot_calibration(facts, self.curve, self.pool_curve)),
            "histograms.png": ("Per-tier histograms", plot_histograms(facts)),
            "pushes_slack.png": ("Pushes and budget slack per tier",
                                 plot_pushes_and_slack(facts)),
            "contact_sheet.png": ("Contact sheet", contact_sheet(facts)),
            "legend.png": ("Legend of the contact sheet", colour_legend(facts)),
        }
        self.panel = panel_counts(result)
        if self.panel is not None:
            sizes = {int(t): n for t, n in
                     facts.table.group_by("tier").len().sort("tier").iter_rows()}
            self.images["panel.png"] = ("Agent panel: levels solved per tier",
                                        plot_panel(self.panel, sizes))
        if other is not None:
            self.images["against_contact_sheet.png"] = (f"Contact sheet of {other.name}",
                                                        contact_sheet(other))

    def _title(self) -> str:
        a = self.result.facts.name
        return f"Audit of {a}" + (f" against {self.result.against.name}"
                                  if self.result.against else "")

    def _headline(self) -> str:
        r = self.result
        solved = int(r.facts.table["planner_solved"].sum())
        verdict = "all checks pass" if r.passed else f"{len(r.failed)} check(s) FAIL"
        rotation = ""
        if self.rotation is not None:
            rotation = ("; rotation from " + self.rotation.prev + " "
                        + ("accepted" if self.rotation.accepted else "REFUSED"))
        game = r.facts.manifest.get("game") or r.facts.spec.name
        return (f"{r.facts.table.height} levels, game {game}; "
                f"reference planner solves {solved}/{r.facts.table.height}; {verdict}"
                f"{rotation}")

    def _model_note(self) -> str:
        model = load_model()
        held = model.info.get("held_out", {})
        t = self.result.facts.table
        if "compute_to_solve" not in t.columns:
            return ("graded before compute_to_solve existed: difficulty and grade are those "
                    "stored (the chance that the reference planner fails, from the model of "
                    "their day)")
        measured = int(t["compute_measured"].sum())
        return (f"compute_to_solve = log2 of the per-step budget in dynamics calls (the "
                f"rule's currency; one planner expansion is {CALLS_PER_EXPANSION} calls) at which "
                f"the reference planner solves half the time: measured by the ladder (budgets "
                f"{LADDER_BUDGETS[0]:,} to {LADDER_BUDGETS[-1]:,} calls per step, "
                f"{len(LADDER_SEEDS)} tie-break seeds) on {measured} of {t.height} levels, "
                f"predicted from grade features on the rest (pipeline/specs/difficulty.json, "
                f"fitted "
                f"{model.info.get('fit_date', '?')}; held-out MAE "
                f"{held.get('mean_absolute_error', '?')}, Spearman {held.get('spearman', '?')})."
                f" Grades: {grade_rule()}. difficulty = the curve's chance of failing at "
                f"{RULE_BUDGET} calls per step, "
                f"so the grade cut points in difficulty are "
                f"{[round(c, 3) for c in model.grade_cuts]}.")

    def calibration_lines(self) -> list[str]:
        """The Brier scores of the version and of the calibration pool, in words."""
        c = self.curve
        lines = [f"{self.result.facts.name}: Brier score {c['brier']:.4f} over {c['levels']} "
                 f"levels ({c['failures']} planner failures; predicting the base rate for every "
                 f"level would score {c['brier_base_rate']:.4f}); lower is better"]
        pool = self.pool_curve
        fitted = load_model().info.get("fit_date")
        if pool is None:
            lines.append("calibration pool: no stored curve (run scripts/pool_curve.py)")
        elif pool.get("model_fit_date") != fitted:
            lines.append(f"calibration pool: the stored curve belongs to the model fitted "
                         f"{pool.get('model_fit_date')}, not to this one ({fitted}); run "
                         "scripts/pool_curve.py")
        else:
            lines.append(f"calibration pool (held out, seed {pool['pool']['seed']}, "
                         f"{pool['levels']} levels, {pool['failures']} planner failures): "
                         f"Brier score {pool['brier']:.4f} (base rate "
                         f"{pool['brier_base_rate']:.4f}); model fitted "
                         f"{pool.get('model_fit_date', '?')}")
        return lines

    def calibration_tables(self) -> list[tuple[str, pl.DataFrame]]:
        """Bin by bin (deciles of predicted difficulty, fewer bins below 10 levels): the mean
        prediction and the observed failure rate, of the version and of the pool."""
        out = [(self.result.facts.name, _bins_table(self.curve["bins"]))]
        if self.pool_curve is not None:
            out.append(("calibration pool", _bins_table(self.pool_curve["bins"])))
        return out

    def rotation_table(self) -> pl.DataFrame:
        """The rotation verdict's tier figures, as the rotate command printed them."""
        e = self.rotation
        assert e is not None
        return pl.DataFrame([{
            "tier": t["tier"], "levels": t["levels"],
            f"opt mean {e.prev}": round(t["prev_mean_optimum"], 2),
            f"opt mean {e.new}": round(t["new_mean_optimum"], 2),
            f"difficulty mean {e.prev}": round(t["prev_mean_difficulty"], 4),
            f"difficulty mean {e.new}": round(t["new_mean_difficulty"], 4),
            f"planner {e.prev}": f"{t['prev_planner_solved']}/{t['levels']}",
            f"planner {e.new}": f"{t['new_planner_solved']}/{t['levels']}",
        } for t in e.tiers])

    def rotation_panel_table(self) -> pl.DataFrame:
        """The panel on PREV and NEW side by side: each agent's solved count on both."""
        e = self.rotation
        assert e is not None
        levels = e.solved["levels"]
        return pl.DataFrame([{
            "agent": a["agent"], f"solved {e.prev}": f"{a['prev']}/{levels}",
            f"solved {e.new}": f"{a['new']}/{levels}", "difference": f"{a['new'] - a['prev']:+d}",
            "within tolerance": "yes" if abs(a["new"] - a["prev"]) <= (e.panel_tolerance or 0)
            else "NO"} for a in e.panel])

    def markdown(self) -> str:
        r = self.result
        out = [f"# {self._title()}", "", self._headline(), "", self._model_note(), "",
               "## Version", "", "| field | value |", "| --- | --- |"]
        out += [f"| {k} | {v} |" for k, v in self.metadata]
        if self.rotation is not None:
            lines = self.rotation.lines()
            out += ["", "## Rotation verdict", "", lines[0], "", _md_table(self.rotation_table()),
                    "", *[f"- {line}" for line in self.rotation.figure_lines()]]
            if self.rotation.panel:
                out += ["", _md_table(self.rotation_panel_table())]
        out += ["", "## Checks", ""]
        for c in r.checks:
            out.append(f"- **{c.status}** {c.name}" + (f": {c.describe(50)}" if _detail(c)
                                                        else ""))
        out += ["", "## Tiers", "", _md_table(self.tiers), "",
                "## Deadlocks", "", _DEADLOCK_NOTE, "", _md_table(self.deadlocks), "",
                "## Calibration", "", *[f"- {line}" for line in self.calibration_lines()]]
        for name, table in self.calibration_tables():
            out += ["", f"{name}, by bin of predicted difficulty:", "", _md_table(table)]
        if r.irt is not None:
            out += ["", "## Difficulty from real results", "", irt_note(r.irt), "",
                    _md_table(irt_agents(r.irt)), "", "Hardest levels by empirical difficulty:",
                    "", _md_table(irt_levels(r.irt))]
        if self.panel is not None:
            out += ["", "## Agent panel", "", _PANEL_NOTE, "", _md_table(self.panel)]
        if r.against is not None and r.comparison is not None:
            out += ["", f"## {r.facts.name} against {r.against.name}", "",
                    _md_table(comparison_tiers(r)), ""]
            out += [f"- {note}" for note in r.comparison.not_compared] or [
                "- every tier and slot compared"]
            out += ["", "### Slot by slot", "", _md_table(comparison_slots(r))]
        if r.move is not None:
            out += ["", _MOVE_HEADING, "", r.move.statement, "", _md_table(r.move.table())]
        out += ["", "## Plots", ""]
        for name, (caption, _) in self.images.items():
            out += [f"### {caption}", "", f"![{caption}]({name})", ""]
            if name == "legend.png":
                out += [_LEGEND_NOTE, ""]
        return "\n".join(out) + "\n"

    def html(self) -> str:
        r = self.result
        imgs = {name: (caption, base64.b64encode(png).decode("ascii"))
                for name, (caption, png) in self.images.items()}

        def figure(name: str, note: str = "") -> str:
            caption, data = imgs[name]
            return (f"<figure><img alt='{html.escape(caption)}' "
                    f"src='data:image/png;base64,{data}'>"
                    + (f"<figcaption>{html.escape(note)}</figcaption>" if note else "")
                    + "</figure>")

        sections: list[tuple[str, str, str]] = []  # (anchor, heading, body)
        meta = "".join(f"<tr><th>{html.escape(k)}</th><td class='l'>{html.escape(v)}</td></tr>"
                       for k, v in self.metadata)
        sections.append(("version", "Version", f"<table class='meta'>{meta}</table>"))
        if self.rotation is not None:
            lines = self.rotation.lines()
            cls = "pass" if self.rotation.accepted else "fail"
            body = (f"<p><b class='{cls}'>{html.escape(lines[0])}</b></p>"
                    + _html_table(self.rotation_table())
                    + "<ul>" + "".join(f"<li>{html.escape(x)}</li>"
                                       for x in self.rotation.figure_lines())
                    + "</ul>")
            if self.rotation.panel:
                body += _html_table(self.rotation_panel_table())
            sections.append(("rotation", "Rotation verdict", body))
        checks = "".join(
            f"<li><b class='{c.status.lower()}'>{c.status}</b> {html.escape(c.name)}"
            + (f": {html.escape(c.describe(50))}" if _detail(c) else "") + "</li>"
            for c in r.checks)
        sections.append(("checks", "Checks", f"<ul>{checks}</ul>"))
        sections.append(("tiers", "Tiers", _html_table(self.tiers)))
        sections.append(("deadlocks", "Deadlocks",
                         f"<p>{html.escape(_DEADLOCK_NOTE)}</p>" + _html_table(self.deadlocks)))
        calibration = ("<div class='row'>" + figure("calibration.png") + "<div>"
                       + "<ul>" + "".join(f"<li>{html.escape(x)}</li>"
                                          for x in self.calibration_lines()) + "</ul>"
                       + "<div class='row'>" + "".join(
                           f"<div><p class='note'>{html.escape(name)}, by bin of predicted "
                           f"difficulty</p>{_html_table(table)}</div>"
                           for name, table in self.calibration_tables())
                       + "</div></div></div>")
        sections.append(("calibration", "Calibration", calibration))
        if r.irt is not None:
            sections.append(("irt", "Difficulty from real results",
                             f"<p>{html.escape(irt_note(r.irt))}</p>"
                             + _html_table(irt_agents(r.irt))
                             + "<p>Hardest levels by empirical difficulty:</p>"
                             + _html_table(irt_levels(r.irt))))
        if self.panel is not None:
            sections.append(("panel", "Agent panel",
                             f"<p class='note'>{html.escape(_PANEL_NOTE)}</p>"
                             + "<div class='row'>" + figure("panel.png")
                             + f"<div>{_html_table(self.panel)}</div></div>"))
        if r.against is not None and r.comparison is not None:
            notes = r.comparison.not_compared or ("every tier and slot compared",)
            body = (_html_table(comparison_tiers(r)) + "<ul class='notes'>"
                    + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
            sections.append(("against", f"{r.facts.name} against {r.against.name}", body))
        if r.move is not None:
            sections.append(("move", _MOVE_HEADING.lstrip("# "),
                             f"<p>{html.escape(r.move.statement)}</p>"
                             + _html_table(r.move.table())))
        sections.append(("plots", "Along the ramp",
                         figure("optima.png") + figure("difficulty.png")))
        sections.append(("distributions", "Distributions per tier",
                         figure("histograms.png") + figure("pushes_slack.png")))
        sheet = figure("legend.png", _LEGEND_NOTE) + figure("contact_sheet.png")
        sections.append(("sheet", "Contact sheet", sheet))
        if "against_contact_sheet.png" in imgs:
            sections.append(("sheet-against", imgs["against_contact_sheet.png"][0],
                             figure("against_contact_sheet.png")))
        if r.against is not None and r.comparison is not None:
            sections.append(("slots", "Slot by slot", _html_table(comparison_slots(r))))
        nav = " &middot; ".join(f"<a href='#{a}'>{html.escape(h)}</a>" for a, h, _ in sections)
        body = "".join(f"<section id='{a}'><h2>{html.escape(h)}</h2>{b}</section>"
                       for a, h, b in sections)
        head = (f"<h1>{html.escape(self._title())}</h1>"
                f"<p class='head {'pass' if r.passed else 'fail'}'>"
                f"{html.escape(self._headline())}</p>"
                f"<p class='note'>{html.escape(self._model_note())}</p><nav>{nav}</nav>")
        return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
                f"<title>{html.escape(self._title())}</title><style>{_STYLE}</style></head>"
                f"<body>{head}{body}</body></html>\n")

    def summary(self) -> str:
        r = self.result
        lines = [self._title(), self._headline(), ""]
        cols = ["tier", "levels", "crates", "opt min", "opt median", "opt max", "difficulty mean",
                "grades 1-5", "planner solved"]
        lines += _text_table(self.tiers.select(cols))
        if r.against is not None and r.comparison is not None:
            lines += ["", f"against {r.against.name}:"]
            if r.comparison.pairs:
                lines += _text_table(comparison_tiers(r))
            lines += [f"- {note}" for note in r.comparison.not_compared]
        if r.move is not None:
            lines += ["", r.move.statement]
        lines += ["", *self.calibration_lines(), ""]
        for c in r.checks:
            lines.append(f"{c.status}  {c.name}" + (f": {c.describe(4)}" if _detail(c) else ""))
        return "\n".join(lines)

    def checks_json(self) -> str:
        """The verdict for programs (``sokoforge versions`` reads it), check by check."""
        r = self.result
        return json.dumps({
            "version": r.facts.name,
            "against": r.against.name if r.against else None,
            "passed": r.passed,
            "checks": [{"name": c.name, "passed": c.passed, "offenders": list(c.offenders),
                        "skipped": c.skipped or None} for c in r.checks],
        }, indent=2) + "\n"

    def files(self) -> dict[str, bytes]:
        """Every file of the report by name: the PNGs, report.md, report.html, checks.json,
        and the rotation verdict (equivalence.json) of a rotated version."""
        out = {name: png for name, (_, png) in self.images.items()}
        out["report.md"] = self.markdown().encode("utf-8")
        out["report.html"] = self.html().encode("utf-8")
        out["checks.json"] = self.checks_json().encode("utf-8")
        if self.result.facts.rotation is not None:
            out[EQUIVALENCE_FILE] = (json.dumps(self.result.facts.rotation, indent=2)
                                     + "\n").encode("utf-8")
        return out

    def write(self, folder: Path) -> list[Path]:
        """Write the report into a fresh folder beside ``folder``, then swap it in: a report
        that fails half-way leaves the previous one whole. The files of ``KEPT`` (written
        there by other commands) are carried over."""
        folder.parent.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(prefix=f".{folder.name}-new-", dir=folder.parent))
        try:
            files = self.files()
            for name, data in files.items():
                (fresh / name).write_bytes(data)
            for name in KEPT:  # what other commands wrote there outlives a new report
                if name not in files and (folder / name).is_file():
                    shutil.copy2(folder / name, fresh / name)
            os.chmod(fresh, 0o755)
            swap_in(fresh, folder)
        except BaseException:
            shutil.rmtree(fresh, ignore_errors=True)
            raise
        return [folder / name for name in sorted(os.listdir(folder))]


def swap_in(fresh: Path, folder: Path) -> None:
    """Replace ``folder`` (if any) by ``fresh`` with two renames; the old one is then removed.

    Between the renames there is no ``folder`` at all, never one mixing old and new files;
    if the second rename fails the old folder is put back.
    """
    if not folder.exists():
        os.rename(fresh, folder)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{folder.name}-old-", dir=folder.parent))
    os.rmdir(old)  # a free name to move the old report to
    os.rename(folder, old)
    try:
        os.rename(fresh, folder)
    except BaseException:
        os.rename(old, folder)
        raise
    shutil.rmtree(old, ignore_errors=True)


_DEADLOCK_NOTE = ("Recomputed from each board: dead fraction = share of the states reachable "
                  "from the start from which the level can no longer be solved; a first-push "
                  "trap = a push available at the start that leads straight into such a state.")
_LEGEND_NOTE = ("Each kind of cell as the contact sheet below draws it (the agent's view), "
                "and the colours of the level labels.")
_STYLE = ("body{font-family:sans-serif;max-width:1400px;margin:1em auto;padding:0 1em;"
          "color:#222}h1{margin-bottom:0.2em}h2{border-bottom:1px solid #ccc;"
          "padding-bottom:2px;margin-top:1.4em}"
          "table{border-collapse:collapse;font-size:13px;margin:0.4em 0}"
          "td,th{border:1px solid #bbb;padding:3px 7px;text-align:right}"
          "th{background:#eee}td.l{text-align:left}table.meta th{text-align:left}"
          "img{max-width:100%;display:block;margin:0.5em 0}figure{margin:0.6em 0}"
          "figcaption{font-size:13px;color:#555}"
          ".row{display:flex;gap:1.5em;align-items:flex-start;flex-wrap:wrap}"
          ".row figure{flex:0 1 640px}.row>div{flex:1 1 420px}"
          ".pass{color:#1a7f37}.skip{color:#8a6d00}.fail{color:#c62828}.head{font-size:16px;font-weight:bold}"
          ".note{font-size:13px;color:#555}nav{font-size:14px;margin:0.6em 0}"
          "nav a{color:#1f5fa8}ul.notes li{color:#8a4b00}")


def _detail(check: Check) -> bool:
    """A check's detail is shown when it failed or was skipped (the reason)."""
    return not check.passed or bool(check.skipped)


def _html_table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
                   for row in df.iter_rows())
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _text_table(df: pl.DataFrame) -> list[str]:
    cells = [list(df.columns)] + [[_cell(v) for v in row] for row in df.iter_rows()]
    widths = [max(len(row[i]) for row in cells) for i in range(len(df.columns))]
    return ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
# report/ files other commands write: the difficulty refit, the line's fit, the agent panel
KEPT = (IRT_FILE, LINE_FILE, PANEL_FILE)
_MOVE_HEADING = "### How far one agent's score moves between the rounds"
