"""The audit's tables: version metadata, two versions compared tier by tier and slot by slot,
the panel's counts and the item-response refit, as polars frames the report renders.
"""

from __future__ import annotations

__all__ = [
    "bins_table", "cell_text", "comparison_slots", "comparison_tiers", "information_table",
    "irt_agents", "irt_levels", "irt_note", "md_table", "panel_counts", "version_metadata",
]

import io
import platform
from collections.abc import Mapping
from datetime import datetime
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any

import polars as pl

from pipeline.audit.audit import (
    AuditResult,
    VersionFacts,
)
from pipeline.audit.information import InformationCurve
from pipeline.difficulty.compute_curve import grade_rule
from pipeline.difficulty.difficulty import load_model
from pipeline.difficulty.panel import solved_counts
from pipeline.versions.tables import as_float

_LIBRARIES = ("numpy", "numba", "ortools", "polars", "pyarrow", "matplotlib")


def md_table(df: pl.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |"
    sep = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(cell_text(v) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join([head, sep, *body])


def cell_text(v: object) -> str:
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


def bins_table(bins: list[dict[str, Any]]) -> pl.DataFrame:
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
    generator: Mapping[str, Any] = m.get("generator", {})
    spec = facts.spec
    commit: Mapping[str, Any] = m.get("seed_commitment") or {}
    commitment = commit.get("sha256")
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


def information_table(c: InformationCurve, step: int = 4) -> pl.DataFrame:
    """The information curve every ``step`` abilities (one logit apart on the default grid):
    the standard ramp's expected success, each test's information, a session's standard
    error and how many times the ramp's information it holds."""
    rows = []
    for i in range(0, c.theta.size, step):
        rows.append({
            "ability": round(float(c.theta[i]), 2),
            "standard success": round(float(c.success[i]), 3),
            "in the ramp's span": bool(c.span[0] <= c.theta[i] <= c.span[1]),
            "pool": round(float(c.pool[i]), 1),
            f"session of {c.episodes}": round(float(c.session[i]), 1),
            "standard ramp": round(float(c.ramp[i]), 1),
            "session / ramp": round(float(c.session[i] / max(c.ramp[i], 1e-12)), 2),
            "session's standard error": round(float(c.session[i]) ** -0.5, 2)
            if c.session[i] > 0 else None,
        })
    return pl.DataFrame(rows)
