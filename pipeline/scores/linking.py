"""Scores linked across a game's rounds: one ability scale over the versions of a line.

Versions rotated from one another (manifest ``rotated_from``) form a line. The agents (key
names) that played several of them link their levels: one item-response model over every
closed scorecard of the line (items are (version, level)) puts every agent on one scale,
with a 95% interval from the curvature of the posterior at the fit. Versions that fewer than
``MIN_LINK_KEYS`` names connect are not linked: each such group is fitted on its own scale,
and the fit says so.
"""

from __future__ import annotations

__all__ = [
    "Ability", "LINE_FILE", "Link", "MIN_LINK_KEYS", "fit_line", "link_line", "link_report_lines",
    "read_line", "scales_of", "version_line", "write_line",
]

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.difficulty.logistic import sigmoid
from pipeline.errors import PipelineError
from pipeline.precision import Z95, success_interval
from pipeline.scores.irt import (
    ABILITY_SD,
    DIFFICULTY_SD,
    LOG_DISCRIMINATION_SD,
    episodes_table,
    fit_2pl,
)
from pipeline.versions.hidden_files import private_writes_in
from pipeline.versions.tables import write_text
from pipeline.versions.version import REPORT_DIR, existing_versions, open_version

LINE_FILE = "line.json"
MIN_LINK_KEYS = 3  # names that played both versions, at least, to put them on one scale


def version_line(datasets: Path, version: str) -> list[str]:
    """Every finished version connected to ``version`` by ``rotated_from``, oldest first
    (a version after the one it was rotated from, siblings by name)."""
    open_version(datasets, version, require_intact=False)  # an unknown name: the one wording
    parent: dict[str, str | None] = {}
    for name in existing_versions(datasets):
        try:
            parent[name] = open_version(datasets, name, require_intact=False).manifest.get(
                "rotated_from")
        except PipelineError:
            continue
    children: dict[str, list[str]] = {}
    for name, p in parent.items():
        if p is not None:
            children.setdefault(p, []).append(name)
    root = version
    while parent.get(root) in parent:
        root = parent[root]  # type: ignore[assignment]
    order, queue = [], [root]
    while queue:
        name = queue.pop(0)
        order.append(name)
        queue.extend(sorted(children.get(name, [])))
    return order


@dataclass(frozen=True)
class Link:
    """Two versions of the line and the names that played both."""

    a: str
    b: str
    keys: int

    @property
    def linked(self) -> bool:
        return self.keys >= MIN_LINK_KEYS


def scales_of(versions: list[str], links: list[Link]) -> list[list[str]]:
    """Groups of versions joined by linking pairs (each group is one scale), in line order."""
    group = {v: i for i, v in enumerate(versions)}
    for link in links:
        if link.linked:
            old, new = group[link.a], group[link.b]
            for v, g in group.items():
                if g == new:
                    group[v] = old
    out: dict[int, list[str]] = {}
    for v in versions:
        out.setdefault(group[v], []).append(v)
    return list(out.values())


@dataclass(frozen=True)
class Ability:
    """An agent on its group's scale: ability, its 95% interval, and raw success per version."""

    name: str
    scale: int
    ability: float
    interval: tuple[float, float]
    versions: dict[str, dict[str, Any]]


def _fit_group(counts: pl.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Abilities and their standard errors of one group's (name, item, trials, solved).

    The errors come from the inverse of the whole posterior information (abilities, item
    difficulties and log discriminations together), so they carry the items' uncertainty."""
    agents = sorted(set(counts["name"].to_list()))
    items = sorted(set(counts["item"].to_list()))
    a_pos = {n: i for i, n in enumerate(agents)}
    i_pos = {n: i for i, n in enumerate(items)}
    agent = np.array([a_pos[n] for n in counts["name"]], dtype=np.int64)
    item = np.array([i_pos[n] for n in counts["item"]], dtype=np.int64)
    n, k = counts["trials"].to_numpy(), counts["solved"].to_numpy()
    theta, b, a = fit_2pl(agent, item, n, k, len(agents), len(items))
    g, m = len(agents), len(items)
    eta = a[item] * (theta[agent] - b[item])
    w = n * sigmoid(eta) * (1 - sigmoid(eta))
    # the information of (theta, b, log a); each pair's linear predictor has gradient
    # (a, -a, eta). Items touch only agents, so the items' 2x2 blocks are folded into the
    # agents' block (Schur complement) instead of inverting the whole matrix.
    ga, gb, gl = a[item], -a[item], eta
    agents_info = np.diag(np.bincount(agent, w * ga * ga, g) + 1 / ABILITY_SD ** 2)
    cross = np.zeros((g, m, 2))
    np.add.at(cross, (agent, item, 0), w * ga * gb)  # type: ignore[arg-type]
    np.add.at(cross, (agent, item, 1), w * ga * gl)  # type: ignore[arg-type]
    blocks = np.empty((m, 2, 2))
    blocks[:, 0, 0] = np.bincount(item, w * gb * gb, m) + 1 / DIFFICULTY_SD ** 2
    blocks[:, 0, 1] = blocks[:, 1, 0] = np.bincount(item, w * gb * gl, m)
    blocks[:, 1, 1] = np.bincount(item, w * gl * gl, m) + 1 / LOG_DISCRIMINATION_SD ** 2
    folded = agents_info - np.einsum("gmi,mij,hmj->gh", cross, np.linalg.inv(blocks), cross)
    covariance = np.linalg.inv(folded)
    return agents, theta, np.sqrt(np.diag(covariance))


def link_line(episodes: Mapping[str, pl.DataFrame],
              tiers: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The linked fit of a line: ``episodes[version]`` holds its closed scorecards' finished
    episodes (name, index, solved), versions in line order; ``tiers[version]`` the tier of
    each level (for the raw success intervals). Returns the figures written to line.json."""
    versions = list(episodes)
    played = {v: set(df["name"].to_list()) for v, df in episodes.items()}
    links = [Link(a, b, len(played[a] & played[b]))
             for i, a in enumerate(versions) for b in versions[i + 1:]]
    scales = [g for g in scales_of(versions, links) if any(played[v] for v in g)]
    notes = [f"{v}: no finished episode of a closed scorecard" for v in versions
             if not played[v]]
    for link in links:
        apart = not any(link.a in g and link.b in g for g in scales)
        if apart and played[link.a] and played[link.b]:
            notes.append(f"{link.a} and {link.b}: only {link.keys} name(s) played both (at "
                         f"least {MIN_LINK_KEYS} link two versions); their abilities are on "
                         "separate scales, not comparable")
    agents: list[Ability] = []
    for s, group in enumerate(scales):
        frames = [episodes[v].select(
            "name", pl.format("{}#{}", pl.lit(v), pl.col("index")).alias("item"),
            pl.col("solved").cast(pl.Int64)) for v in group if episodes[v].height]
        counts = (pl.concat(frames).group_by("name", "item")
                  .agg(pl.len().alias("trials"), pl.col("solved").sum())
                  .sort("name", "item"))
        names, theta, se = _fit_group(counts)
        for name, t, e in zip(names, theta, se, strict=True):
            raw = {}
            for v in group:
                mine = episodes[v].filter(pl.col("name") == name)
                if mine.height == 0:
                    continue
                solved = mine["solved"].to_numpy()
                level_tiers = (tiers[v][mine["index"].to_numpy()]
                               if tiers is not None and v in tiers else None)
                raw[v] = {"episodes": int(mine.height), "solved": int(solved.sum()),
                          "success_rate": round(float(solved.mean()), 4),
                          "success_interval": success_interval(solved, level_tiers)}
            agents.append(Ability(name, s, round(float(t), 4),
                                  (round(float(t - Z95 * e), 4), round(float(t + Z95 * e), 4)),
                                  raw))
    agents.sort(key=lambda x: (x.scale, -x.ability, x.name))
    return {
        "versions": versions,
        "model": "two-parameter logistic over items (version, level) of every version on one "
                 "scale, agents by name, abilities ~ N(0, 1) over the line's names; ability "
                 "interval 95% from the whole posterior information (items' uncertainty "
                 "included)",
        "min_link_keys": MIN_LINK_KEYS,
        "links": [{"a": x.a, "b": x.b, "keys": x.keys, "linked": x.linked} for x in links],
        "scales": scales,
        "notes": notes,
        "agents": [{"name": x.name, "scale": x.scale, "ability": x.ability,
                    "ability_interval": list(x.interval), "versions": x.versions}
                   for x in agents],
    }


def link_report_lines(report: dict[str, Any]) -> list[str]:
    """The fit in words, for the command line."""
    out = [f"line {' -> '.join(report['versions'])}: "
           + ("one scale" if len(report["scales"]) == 1 else
              f"{len(report['scales'])} separate scales: "
              + "; ".join(", ".join(g) for g in report["scales"]))]
    out += [f"  note: {n}" for n in report["notes"]]
    for x in report["agents"]:
        lo, hi = x["ability_interval"]
        raw = ", ".join(f"{v} {r['success_rate']:.0%} [{r['success_interval'][0]:.0%}-"
                        f"{r['success_interval'][1]:.0%}]" for v, r in x["versions"].items())
        out.append(f"  {x['name']}: ability {x['ability']:+.2f} [{lo:+.2f}, {hi:+.2f}]"
                   + (f" (scale {x['scale'] + 1})" if len(report["scales"]) > 1 else "")
                   + f"; raw {raw}")
    return out


def write_line(folder: Path, report: dict[str, Any]) -> Path:
    """Write the fit to ``folder/report/line.json`` (the version's own files untouched)."""
    out = folder / REPORT_DIR / LINE_FILE
    with private_writes_in(folder):
        out.parent.mkdir(exist_ok=True)
        write_text(json.dumps(report, indent=2) + "\n", out)
    return out


def read_line(folder: Path) -> dict[str, Any] | None:
    """The line fit written beside a version, if any (None when absent or unreadable)."""
    try:
        data = json.loads((folder / REPORT_DIR / LINE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    fields = ("versions", "scales", "links", "notes", "model", "agents")
    return data if isinstance(data, dict) and all(k in data for k in fields) else None


def fit_line(datasets: Path, version: str, episodes: Mapping[str, pl.DataFrame],
             browser: bool = True) -> tuple[Path, dict[str, Any]]:
    """Link the line of ``version`` (``version_line``) from ``episodes[v]``, each version's
    finished episodes of closed scorecards (an ``episodes_table``), and write the fit beside
    ``version`` (report/line.json)."""
    versions = version_line(datasets, version)
    found, tiers = {}, {}
    for v in versions:
        table = open_version(datasets, v, require_intact=False).levels().sort("index")
        tiers[v] = table["tier"].to_numpy()
        found[v] = episodes.get(v, episodes_table([]))
        unknown = set(found[v]["index"].to_list()) - set(range(table.height))
        if unknown:
            raise PipelineError(f"the store has episodes of levels {sorted(unknown)[:5]} that "
                                f"{v} does not have")
    if not any(df.height for df in found.values()):
        raise PipelineError(f"the store holds no finished episode of a closed scorecard of the "
                            f"line {', '.join(versions)}")
    report = {"fitted_on": version, "browser_runs": "included" if browser else "excluded",
              **link_line(found, tiers)}
    return write_line(datasets / version, report), report
