"""Audit of a finished version: recompute what can be recomputed and check every promise.

Each check re-derives its facts from the level text itself (the solver's optimum, canonical
ids from the board), so editing one column of one row makes exactly the matching check fail.
"""

from __future__ import annotations

__all__ = [
    "AuditRefused", "AuditResult", "Check", "Comparison", "TierPair", "VersionFacts", "audit",
    "check_bands", "check_board_crates", "check_budgets", "check_compute", "check_crates",
    "check_difficulty_order", "check_information", "check_manifest", "check_optima",
    "check_solutions", "check_traps", "check_unique_ids", "compare_versions", "deadlock_facts",
    "deadlock_summary", "is_imported", "load_version", "read_rotation", "tier_summary",
]

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from engine.agents.planner import plan
from engine.levels import Level, LevelError, canonical_id, parse_xsb
from engine.rules import ACTIONS, step
from engine.search.index import StateSpaceTooLarge
from engine.search.reachable import push_reachable_stats
from engine.search.reverse import solvable_set
from engine.search.solver import solve
from pipeline.audit.information import RAMP_LEVELS, InformationCurve, information_curve
from pipeline.difficulty.panel import PANEL_FILE
from pipeline.errors import InputError, PipelineError
from pipeline.scores.equivalence import EQUIVALENCE_FILE
from pipeline.scores.items import is_pool, read_items
from pipeline.scores.round_move import RoundMove, move_between
from pipeline.spec import Spec
from pipeline.stages.grade import first_push_traps
from pipeline.stages.importing import tier_of
from pipeline.stages.solve import search_bound
from pipeline.versions.manifest import IMPORTED, Manifest
from pipeline.versions.tables import as_float, as_int, read_parquet, sha256_file
from pipeline.versions.version import (
    LEVELS_FILE,
    MANIFEST_FILE,
    REPORT_DIR,
    STAGES_DIR,
    open_version,
)

_MAX_LISTED = 12


@dataclass(frozen=True)
class Check:
    """One audit promise: its name, whether it holds, and the levels that break it."""

    name: str
    passed: bool
    offenders: tuple[str, ...] = ()
    skipped: str = ""  # why the promise does not apply to this version (then it passes)

    @property
    def status(self) -> str:
        return "SKIP" if self.skipped else "PASS" if self.passed else "FAIL"

    def describe(self, limit: int = _MAX_LISTED) -> str:
        if self.skipped:
            return self.skipped
        shown = "; ".join(self.offenders[:limit])
        more = f" (+{len(self.offenders) - limit} more)" if len(self.offenders) > limit else ""
        return shown + more


@dataclass
class VersionFacts:
    """A version's table with everything the audit recomputed, one row per level."""

    name: str
    manifest: Manifest
    spec: Spec
    table: pl.DataFrame
    levels: list[Level] = field(repr=False)
    rotation: dict[str, Any] | None = None  # the rotation verdict (equivalence.json), if any
    sha256: str = ""  # the levels file's, as read when the version was opened


@dataclass
class AuditResult:
    """Facts of the audited version (and the comparison one) plus the checks."""

    facts: VersionFacts
    checks: list[Check]
    against: VersionFacts | None = None
    comparison: Comparison | None = None
    # report/irt.json of the version when `sokoforge irt` has written one (pipeline.scores.irt)
    irt: dict[str, Any] | None = None
    # how far one agent's score is expected to move from ``against`` to this version
    move: RoundMove | None = None
    # report/panel.parquet of the version when `sokoforge panel` has written one, as stored
    panel: bytes | None = None
    # a calibrated pool's information curve (pipeline.audit.information)
    information: InformationCurve | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


class AuditRefused(InputError):
    """An audit request that makes no sense as asked (a version against itself)."""


@dataclass(frozen=True)
class TierPair:
    """A tier of the audited version and the tier of the other one it is compared with."""

    tier: int
    other_tier: int
    crates: int
    levels: int
    other_levels: int


@dataclass(frozen=True)
class Comparison:
    """What two versions share (tiers with the same crate count, slot by slot) and what not.

    ``slots`` has one row per slot of the audited version, the other version's columns
    suffixed with its name and empty where it has no such slot.
    """

    pairs: tuple[TierPair, ...]
    not_compared: tuple[str, ...]
    slots: pl.DataFrame


def load_version(root: Path, version: str) -> VersionFacts:
    """Read a version, replay its levels through solver and planner, and collect the facts."""
    # a levels file that differs from the manifest is a failed check, not a refusal
    opened = open_version(root, version, require_intact=False)
    if not opened.sha256:
        raise FileNotFoundError(f"version {version!r} not found under {root} "
                                f"(needs {LEVELS_FILE} and {MANIFEST_FILE})")
    folder, manifest, spec = opened.folder, opened.manifest, opened.spec
    table = opened.levels().sort("index")
    try:
        levels = [parse_xsb(x) for x in table["xsb"]]
    except LevelError as e:
        raise PipelineError(f"{folder / LEVELS_FILE}: a level does not parse ({e})") from None
    solved_moves, planner_ok, planner_steps, ids = [], [], [], []
    dead, traps = [], []
    for level, budget in zip(levels, table["max_steps"], strict=True):
        # the bound the solve stage and imports searched with: a level they proved must not
        # read as unsolved here for want of room
        result = solve(level, max_states=search_bound(level))
        solved_moves.append(result.moves if result.status == "solved" else None)
        outcome = plan(level, int(budget))
        planner_ok.append(outcome.solved)
        planner_steps.append(outcome.steps)
        ids.append(canonical_id(level))
        dead_fraction, first_traps = deadlock_facts(level)
        dead.append(dead_fraction)
        traps.append(first_traps)
    tiers = table["tier"].to_numpy()
    if "slot" in table.columns:
        slots = table["slot"].to_numpy().astype(np.int64)
    else:  # a set without slot numbers plays its slots in order
        slots = np.zeros(len(tiers), dtype=np.int64)
        for t in np.unique(tiers):
            where = np.flatnonzero(tiers == t)
            slots[where] = np.arange(where.size)
    bands = [(None, None) if is_imported(manifest)
             else spec.tiers[int(t)].band(int(s)) if 0 <= int(t) < len(spec.tiers) else (-1, -1)
             for t, s in zip(tiers, slots, strict=True)]
    table = table.drop("slot", "band_lo", "band_hi", strict=False).with_columns(
        pl.Series("slot", slots, dtype=pl.Int64),
        pl.Series("band_lo", [b[0] for b in bands], dtype=pl.Int64),
        pl.Series("band_hi", [b[1] for b in bands], dtype=pl.Int64),
        pl.Series("solver_moves", solved_moves, dtype=pl.Int64),
        pl.Series("planner_solved", planner_ok, dtype=pl.Boolean),
        pl.Series("planner_steps", planner_steps, dtype=pl.Int64),
        pl.Series("computed_id", ids, dtype=pl.String),
        pl.Series("audit_dead_fraction", dead, dtype=pl.Float64),
        pl.Series("audit_first_push_traps", traps, dtype=pl.Int64),
    )
    return VersionFacts(version, manifest, spec, table, levels, read_rotation(folder),
                        opened.sha256)


def read_rotation(folder: Path) -> dict[str, Any] | None:
    """The verdict a rotation recorded in the version's stages (None for a plain build)."""
    path = folder / STAGES_DIR / EQUIVALENCE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable rotation verdict ({e})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a readable rotation verdict")
    return data


def deadlock_facts(level: Level) -> tuple[float | None, int | None]:
    """Recomputed from the board: the share of reachable states that are dead (no longer
    solvable), and how many pushes available at the start lead straight into one."""
    try:
        sset = solvable_set(level)
        stats = push_reachable_stats(level, sset)
    except StateSpaceTooLarge:  # a board too large to enumerate: no figure rather than a guess
        return None, None
    fraction = stats.dead / stats.reachable if stats.reachable else 0.0
    return float(fraction), first_push_traps(level, sset)


def _rows(facts: VersionFacts) -> list[dict[str, Any]]:
    return facts.table.to_dicts()


def check_manifest(facts: VersionFacts, root: Path) -> Check:
    """The manifest's sha256 and row count describe the levels file on disk."""
    files: Mapping[str, Mapping[str, Any]] = facts.manifest.get("files", {})
    entry = files.get(LEVELS_FILE, {})
    actual = facts.sha256 or sha256_file(root / facts.name / LEVELS_FILE)
    bad = []
    if entry.get("sha256") != actual:
        bad.append(f"{LEVELS_FILE}: manifest sha256 {str(entry.get('sha256'))[:12]}..., "
                   f"file {actual[:12]}...")
    if entry.get("rows") != facts.table.height:
        bad.append(f"{LEVELS_FILE}: manifest rows {entry.get('rows')}, file {facts.table.height}")
    return Check("manifest sha256 matches levels.parquet", not bad, tuple(bad))


def check_optima(facts: VersionFacts) -> Check:
    """Every level re-solved by the forward solver has the stored optimum."""
    bad = [f"level {r['index']}: stored {r['optimal_moves']}, solver "
           f"{'unsolved' if r['solver_moves'] is None else r['solver_moves']}"
           for r in _rows(facts) if r["solver_moves"] != r["optimal_moves"]]
    return Check("re-solved optimum equals stored optimum", not bad, tuple(bad))


def check_solutions(facts: VersionFacts) -> Check:
    """Every stored solution replays legally (pushes where it says so) to solved, optimally."""
    bad = []
    for r, level in zip(_rows(facts), facts.levels, strict=True):
        lurd = r["solution"] or ""
        problem = _replay_problem(level, lurd)
        if problem is None and r["solver_moves"] is not None and len(lurd) != r["solver_moves"]:
            problem = f"{len(lurd)} moves, optimum is {r['solver_moves']}"
        pushes = sum(ch.isupper() for ch in lurd)
        if problem is None and pushes != r["optimal_pushes"]:
            problem = f"{pushes} pushes, stored {r['optimal_pushes']}"
        if problem is not None:
            bad.append(f"level {r['index']}: {problem}")
    return Check("stored solution replays to solved in optimal moves", not bad, tuple(bad))


def _replay_problem(level: Level, lurd: str) -> str | None:
    state = level.start
    for i, ch in enumerate(lurd):
        if ch.lower() not in ACTIONS:
            return f"letter {i + 1} {ch!r} is not LURD"
        state, moved, pushed = step(level, state, ACTIONS.index(ch.lower()))
        if not moved:
            return f"move {i + 1} {ch!r} is blocked"
        if pushed != ch.isupper():
            return f"move {i + 1} {ch!r} {'pushes' if pushed else 'does not push'}"
    return None if level.is_solved(state) else "does not end solved"


def check_budgets(facts: VersionFacts) -> Check:
    """Every step budget is the spec's rule applied to the level's true optimum."""
    bad = []
    for r in _rows(facts):
        optimum = r["solver_moves"] if r["solver_moves"] is not None else r["optimal_moves"]
        want = facts.spec.max_steps(optimum)
        if r["max_steps"] != want:
            bad.append(f"level {r['index']}: max_steps {r['max_steps']}, rule gives {want}")
    return Check("budgets follow the spec rule", not bad, tuple(bad))


def check_bands(facts: VersionFacts) -> Check:
    """Every level's true optimum lies in its slot's band (bands recomputed from the spec)."""
    bad = []
    for r in _rows(facts):
        optimum = r["solver_moves"] if r["solver_moves"] is not None else r["optimal_moves"]
        if not r["band_lo"] <= optimum <= r["band_hi"]:
            bad.append(f"level {r['index']} (tier {r['tier']} slot {r['slot']}): optimum "
                       f"{optimum} outside {r['band_lo']}-{r['band_hi']}")
    return Check("optima inside their slot bands", not bad, tuple(bad))


def check_crates(facts: VersionFacts) -> Check:
    """Tiers hold the spec's levels, each with the tier's crate count (on the board itself)."""
    bad = []
    for r, level in zip(_rows(facts), facts.levels, strict=True):
        tier = r["tier"]
        if not 0 <= tier < len(facts.spec.tiers):
            bad.append(f"level {r['index']}: tier {tier} not in the spec")
            continue
        want = facts.spec.tiers[tier].crates
        if level.n_crates != want or r["n_crates"] != want:
            bad.append(f"level {r['index']} (tier {tier}): {level.n_crates} crates on the board,"
                       f" {r['n_crates']} stored, tier has {want}")
    for t, tier in enumerate(facts.spec.tiers):
        count = int((facts.table["tier"] == t).sum())
        if count != tier.levels:
            bad.append(f"tier {t}: {count} levels, spec has {tier.levels}")
    return Check("crates per tier as the spec says", not bad, tuple(bad))


def check_traps(facts: VersionFacts) -> Check:
    """Every level has the spec's number of first pushes into a dead state (recounted)."""
    want = facts.spec.min_first_push_traps
    bad = []
    for r, level in zip(_rows(facts), facts.levels, strict=True):
        traps = first_push_traps(level, solvable_set(level))
        if traps < want:
            bad.append(f"level {r['index']}: {traps} first-push traps, spec needs {want}")
    return Check(f"at least {want} first-push trap(s) per level", not bad, tuple(bad))


def check_difficulty_order(facts: VersionFacts) -> Check:
    """Within each tier, difficulty never decreases along play order."""
    bad = []
    rows = _rows(facts)
    for prev, cur in zip(rows, rows[1:], strict=False):
        if prev["tier"] == cur["tier"] and cur["difficulty"] < prev["difficulty"]:
            bad.append(f"level {cur['index']}: difficulty {cur['difficulty']:.3f} after "
                       f"{prev['difficulty']:.3f}")
    return Check("difficulty non-decreasing within each tier", not bad, tuple(bad))


def check_compute(facts: VersionFacts) -> Check:
    """compute_to_solve is the model's (predicted rows) or the ladder's, replayed here
    (measured rows), and difficulty and grade follow from it through the curve and the cuts."""
    from pipeline.difficulty.compute import with_measured_compute
    from pipeline.difficulty.difficulty import score_levels, scores_from_compute
    from pipeline.versions.manifest import difficulty_model_sha256
    from pipeline.workers import Workers

    name = "compute_to_solve reproduces; difficulty and grade follow from it"
    graded_by = facts.manifest.get("generator", {}).get("difficulty_model")
    if graded_by is not None and graded_by != difficulty_model_sha256():
        # The slope, the predictor and the cuts are the model's: an earlier model's values
        # cannot be recomputed by this one, and a refit must not fail every published version.
        return Check(name, True, skipped=f"graded by an earlier difficulty model "
                     f"(sha256 {graded_by[:12]}); its compute_to_solve is not recomputed")
    t = facts.table
    measured = t["compute_measured"].to_numpy().astype(bool)
    want = t["compute_to_solve"].to_numpy().astype(np.float64)
    if (~measured).any():
        want[~measured] = score_levels(t.filter(~pl.col("compute_measured")))[0]
    rates: list = [None] * t.height
    if measured.any():
        replayed = with_measured_compute(t.filter(pl.col("compute_measured")),
                                         Workers(show_progress=False))
        want[measured] = replayed["compute_to_solve"].to_numpy()
        for at, rate in zip(np.flatnonzero(measured), replayed["solve_rates"].to_list(),
                            strict=True):
            rates[at] = rate
    _, difficulty, grades = scores_from_compute(want)
    bad = []
    for i, r in enumerate(_rows(facts)):
        problems = []
        if abs(r["compute_to_solve"] - want[i]) > 1e-4:
            problems.append(f"compute_to_solve {r['compute_to_solve']:.4f}, "
                            f"{'ladder' if measured[i] else 'model'} gives {want[i]:.4f}")
        if measured[i] and r["solve_rates"] != rates[i]:
            problems.append("solve rates differ from the ladder's replay")
        if abs(r["difficulty"] - difficulty[i]) > 1e-6 or r["grade"] != grades[i]:
            problems.append(f"difficulty {r['difficulty']:.4f} grade {r['grade']}, the curve "
                            f"gives {difficulty[i]:.4f} grade {grades[i]}")
        if problems:
            bad.append(f"level {r['index']}: " + "; ".join(problems))
    return Check(name, not bad, tuple(bad))


def check_unique_ids(facts: VersionFacts, root: Path) -> Check:
    """No level (up to rotation and reflection) repeats in the version or in any other one."""
    bad = []
    first_seen: dict[str, int] = {}
    for r in _rows(facts):
        cid = r["computed_id"]
        if cid in first_seen:
            bad.append(f"level {r['index']}: same level as {first_seen[cid]} ({cid})")
        else:
            first_seen[cid] = r["index"]
        if r["canonical_id"] != cid:
            bad.append(f"level {r['index']}: stored canonical id {r['canonical_id']}, "
                       f"board gives {cid}")
    for other in sorted(p.name for p in root.iterdir() if p.is_dir()):
        path = root / other / LEVELS_FILE
        if other == facts.name or other.startswith(".") or not path.is_file():
            continue
        theirs = read_parquet(path, columns=["index", "canonical_id"])
        shared = {cid: idx for cid, idx in zip(theirs["canonical_id"], theirs["index"],
                                               strict=True) if cid in first_seen}
        for cid, idx in sorted(shared.items(), key=lambda kv: first_seen[kv[0]]):
            bad.append(f"level {first_seen[cid]}: shared with {other} level {idx} ({cid})")
    return Check("no canonical id repeated within the version or shared with another",
                 not bad, tuple(bad))


def check_information(facts: VersionFacts, root: Path
                      ) -> tuple[Check, InformationCurve | None]:
    """A pool's sessions inform at least as much as the standard ramp over the abilities it
    spans (the floor, ``pipeline.audit.information``); a pool never calibrated fails, for it
    cannot be served. Also the curve itself, when there are item parameters."""
    name = (f"a session informs at least as much as the standard ramp's {RAMP_LEVELS} levels "
            "over the abilities the ramp spans")
    try:
        items = read_items(root / facts.name)
    except PipelineError as e:
        return Check(name, False, (str(e),)), None
    if items["index"].to_list() != facts.table["index"].to_list() or (
            items["tier"].to_list() != facts.table["tier"].to_list()):
        return Check(name, False, (f"report/items.parquet is not of these levels: run "
                                   f"`sokoforge panel {facts.name}` again",)), None
    spec = facts.spec
    assert spec.adaptive is not None  # a pool's spec has [adaptive]
    curve = information_curve(items["discrimination"].to_numpy().astype(np.float64),
                              items["difficulty"].to_numpy().astype(np.float64),
                              items["tier"].to_numpy(), spec.tier_shares(),
                              episodes=spec.adaptive.episodes)
    inside = (curve.theta >= curve.span[0]) & (curve.theta <= curve.span[1])
    bad = tuple(f"ability {t:+.2f}: a session's information {s:.1f} below the ramp's {r:.1f}"
                for t, s, r, ok in zip(curve.theta, curve.session, curve.ramp, inside,
                                       strict=True) if ok and s < r)
    return Check(name, not bad, bad), curve


def is_imported(manifest: Mapping[str, Any]) -> bool:
    """Whether a version came from level files (``sokoforge import``) rather than a spec."""
    return manifest.get("seed_source") == IMPORTED


def check_board_crates(facts: VersionFacts) -> Check:
    """Every stored crate count is the board's own and the tier follows from it (an import's
    tiers come from its boards, not from the spec)."""
    rows = _rows(facts)
    bad = [f"level {r['index']}: {level.n_crates} crates on the board, {r['n_crates']} stored"
           for r, level in zip(rows, facts.levels, strict=True) if r["n_crates"] != level.n_crates]
    bad += [f"level {r['index']}: tier {r['tier']}, its {level.n_crates} crates give "
            f"{tier_of(level.n_crates)}" for r, level in zip(rows, facts.levels, strict=True)
            if r["tier"] != tier_of(level.n_crates)]
    return Check("stored crate counts match the boards, tier by crate count", not bad,
                 tuple(bad))


def audit(root: Path, version: str, against: str | None = None) -> AuditResult:
    """Load ``version`` (and ``against``), run every check and return the result.

    An imported version is held to every promise a collection can make; the spec's band,
    tier and ramp promises are reported as skipped, with the reason.
    """
    if against == version:
        raise AuditRefused(f"cannot audit {version} against itself: --against names another "
                           "version to compare with")
    facts = load_version(root, version)
    if is_imported(facts.manifest):
        spec_checks = [
            Check("optima inside their slot bands", True,
                  skipped="an imported collection has no slot bands; its optima are the files'"),
            check_board_crates(facts),
            Check("crates per tier as the spec says", True,
                  skipped="an imported collection's tiers hold whatever levels of each crate "
                          "count its files have, in file order"),
            Check("difficulty non-decreasing within each tier", True,
                  skipped="play order is file order, not a difficulty ramp"),
        ]
    else:
        spec_checks = [check_bands(facts), check_crates(facts), check_difficulty_order(facts)]
        if facts.spec.min_first_push_traps:
            spec_checks.append(check_traps(facts))
    checks = [
        check_manifest(facts, root),
        check_optima(facts),
        check_solutions(facts),
        check_budgets(facts),
        *spec_checks,
        check_unique_ids(facts, root),
    ]
    if "compute_to_solve" in facts.table.columns:  # versions graded before it have none
        checks.insert(-1, check_compute(facts))
    curve = None
    if is_pool(facts.manifest):
        informs, curve = check_information(facts, root)
        checks.append(informs)
    irt_path = root / version / REPORT_DIR / "irt.json"
    irt = json.loads(irt_path.read_text()) if irt_path.is_file() else None
    panel_path = root / version / REPORT_DIR / PANEL_FILE
    panel = panel_path.read_bytes() if panel_path.is_file() else None
    if not against:
        return AuditResult(facts, checks, irt=irt, panel=panel, information=curve)
    other = load_version(root, against)
    move = move_between(root, against, version, other.table["tier"].to_numpy(),
                        facts.table["tier"].to_numpy())
    return AuditResult(facts, checks, other, compare_versions(facts, other), irt, move, panel,
                       curve)


def tier_summary(facts: VersionFacts) -> pl.DataFrame:
    """One row per tier: sizes, optimum spread, pushes, budgets, difficulty, grades, planner."""
    rows = []
    for t, part in facts.table.group_by("tier", maintain_order=True):
        opt = part["optimal_moves"]
        grades = part["grade"].to_list()
        rows.append({
            "tier": int(t[0]),
            "levels": part.height,
            "crates": ",".join(str(c) for c in sorted(set(part["n_crates"].to_list()))),
            "opt min": as_int(opt.min()),
            "opt median": as_float(opt.median()),
            "opt max": as_int(opt.max()),
            "pushes mean": round(as_float(part["optimal_pushes"].mean()), 1),
            "budget": f"{as_int(part['max_steps'].min())}-{as_int(part['max_steps'].max())}",
            "difficulty mean": round(as_float(part["difficulty"].mean()), 3),
            **({"compute median": round(as_float(part["compute_to_solve"].median()), 2)}
               if "compute_to_solve" in part.columns else {}),
            "difficulty range": (f"{as_float(part['difficulty'].min()):.3f}-"
                                 f"{as_float(part['difficulty'].max()):.3f}"),
            "grades 1-5": " ".join(str(grades.count(g)) for g in range(1, 6)),
            "planner solved": f"{int(part['planner_solved'].sum())}/{part.height}",
        })
    return pl.DataFrame(rows)


def deadlock_summary(facts: VersionFacts) -> pl.DataFrame:
    """One row per tier: mean and largest dead fraction of the reachable states, first-push
    traps in all and per level, and the share of levels with at least one such trap."""
    rows = []
    for t, part in facts.table.group_by("tier", maintain_order=True):
        dead = part["audit_dead_fraction"].drop_nulls()
        traps = part["audit_first_push_traps"].drop_nulls()
        rows.append({
            "tier": int(t[0]),
            "levels": part.height,
            "dead fraction mean": round(as_float(dead.mean()), 3) if dead.len() else None,
            "dead fraction max": round(as_float(dead.max()), 3) if dead.len() else None,
            "first-push traps": int(traps.sum()) if traps.len() else None,
            "traps per level": round(as_float(traps.mean()), 2) if traps.len() else None,
            "levels with a trap": (f"{int((traps > 0).sum())}/{traps.len()} "
                                   f"({100 * as_float((traps > 0).mean()):.0f}%)"
                                   if traps.len() else "boards too large to enumerate"),
        })
    return pl.DataFrame(rows)


_SLOT_COLUMNS = ("index", "n_crates", "optimal_moves", "optimal_pushes", "max_steps",
                 "difficulty", "grade", "planner_solved")


def compare_versions(a: VersionFacts, b: VersionFacts) -> Comparison:
    """Pair each tier of ``a`` with the first unpaired tier of ``b`` that has the same crate
    count, align their slots by number, and say in words what cannot be compared."""
    free = list(range(len(b.spec.tiers)))
    pairs, notes = [], []
    if a.spec.to_dict() != b.spec.to_dict():
        notes.append(f"{a.name} (game {a.spec.name}) and {b.name} (game {b.spec.name}) have "
                     "different specs: only tiers with the same crate count are compared, slot "
                     "by slot, and their slot bands may differ")
    for t, tier in enumerate(a.spec.tiers):
        match = next((u for u in free if b.spec.tiers[u].crates == tier.crates), None)
        if match is None:
            taken = any(u.crates == tier.crates for u in b.spec.tiers)
            notes.append(f"tier {t} of {a.name} ({tier.crates} crates): {b.name} has no "
                         f"{'other ' if taken else ''}tier with {tier.crates} crates; "
                         "not compared")
            continue
        free.remove(match)
        other = b.spec.tiers[match]
        pairs.append(TierPair(t, match, tier.crates, tier.levels, other.levels))
        if other.levels != tier.levels:
            short, name = ((a.name, b.name) if tier.levels < other.levels
                           else (b.name, a.name))
            notes.append(f"tier {t} of {a.name} has {tier.levels} slots, tier {match} of "
                         f"{b.name} {other.levels}: slots {min(tier.levels, other.levels)}-"
                         f"{max(tier.levels, other.levels) - 1} of {name} have no counterpart "
                         f"in {short}")
    for u in free:
        crates = b.spec.tiers[u].crates
        notes.append(f"tier {u} of {b.name} ({crates} crates): no tier of {a.name} left with "
                     f"{crates} crates; not compared")
    mapping = pl.DataFrame({"other_tier": [p.other_tier for p in pairs],
                            "tier": [p.tier for p in pairs]},
                           schema={"other_tier": pl.Int64, "tier": pl.Int64})
    left = a.table.select(pl.col("tier").cast(pl.Int64), "slot", *_SLOT_COLUMNS)
    right = (b.table.select(pl.col("tier").cast(pl.Int64).alias("other_tier"), "slot",
                            *_SLOT_COLUMNS)
             .join(mapping, on="other_tier", how="inner"))
    slots = left.join(right, on=["tier", "slot"], how="left", suffix=f" {b.name}",
                      maintain_order="left").sort(["tier", "slot"], maintain_order=True)
    slots = slots.rename({c: f"{c} {a.name}" for c in _SLOT_COLUMNS}).rename(
        {"other_tier": f"tier {b.name}"})
    return Comparison(tuple(pairs), tuple(notes), slots)
