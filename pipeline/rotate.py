"""Rotation: a new version built like any other, but matched slot by slot to the one it replaces.

``rotate`` runs the ordinary build with a fresh seed and PREV's spec; its select stage is
``matched_select``, which solves and grades the candidates, enlarges the pool with targeted
draws (``pipeline.stages.slot_draws``) a bounded number of times until every level of PREV has its
match, and refuses the version unless it is as hard (see ``pipeline.scores.equivalence``). The agent
panel (``pipeline.difficulty.panel``) plays PREV and the candidates a slot could take: slots are
matched on its outcome vectors too, and each agent's solved count is held within the spec's
``panel_tolerance``. Nothing of a refused rotation is left behind. Slots are matched on
``compute_to_solve``: measured by the ladder when the spec says so, else predicted; a PREV
graded before compute_to_solve existed is regraded by the predictor.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DIFFICULTY_TOLERANCE", "MAX_ENLARGEMENTS", "PANEL_CLOSE", "REFINE_DRAWS", "REFINE_GAP",
    "RotationResult", "check_graded_alike", "draw_targets", "excluded_levels", "graded_alike",
    "matched_select", "rotate", "select_stage",
]

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from engine.agents.panel import PANEL
from engine.level_files import read_collection
from engine.levels import LevelError, canonical_id
from pipeline.difficulty.compute import with_measured_compute
from pipeline.difficulty.difficulty import MODEL_PATH, scores_from_compute
from pipeline.difficulty.panel import PANEL_COLUMN, PANEL_FILE, PANEL_STEPS_COLUMN, write_panel
from pipeline.difficulty.panel import with_outcomes as with_panel
from pipeline.difficulty.reference_play import write_reference
from pipeline.errors import InputError, PipelineError
from pipeline.scores.equivalence import (
    EQUIVALENCE_FILE,
    Equivalence,
    allowed_gap,
    compare,
    planner_solved,
)
from pipeline.scores.items import is_pool, write_items
from pipeline.scores.matching import (
    OPTIMUM_TOLERANCE,
    MatchError,
    PanelRule,
    match,
    panel_matrix,
    targets,
)
from pipeline.seeds import ENLARGE
from pipeline.spec import Spec
from pipeline.stages.build import BuildFolder, Plan, Rotation, StageRun, build
from pipeline.stages.generate import CANDIDATE_SCHEMA
from pipeline.stages.grade import grade, with_predicted_compute
from pipeline.stages.slot_draws import Target, draw, draws_in_round
from pipeline.stages.solve import solve
from pipeline.stages.write import play_order
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.tables import read_parquet, sha256_file, write_parquet, write_text
from pipeline.versions.version import REPORT_DIR, STAGES_DIR, open_version, version_ids
from pipeline.workers import Workers

MAX_ENLARGEMENTS = 5  # rounds of extra candidates for the unmatched slots before giving up
DIFFICULTY_TOLERANCE = 1e-6
REFINE_GAP = 0.25  # a slot whose compute_to_solve differs more gets one more draw once matched
PANEL_CLOSE = 2  # ... and so does one whose panel outcomes differ in more agents than this,
REFINE_DRAWS = 2_400  # per 100 levels: the farthest such slots first, this many draws in all


@dataclass
class RotationResult:
    """The published version, its audit against PREV and the equivalence figures."""

    path: Path
    equivalence: Equivalence
    audit_passed: bool
    failed_checks: list[str]


def excluded_levels(paths: Sequence[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """The records (name, sha256, levels) of ``--exclude`` files and their canonical ids.

    Canonical ids are invariant under the 8 symmetries, so rotations and reflections of a
    listed level are excluded with it.
    """
    files: list[dict[str, Any]] = []
    ids: set[str] = set()
    for path in paths:
        try:
            # read as import reads a collection; a board past the engine's bounds can be in no
            # version, so it has nothing to exclude
            boards = read_collection(Path(path).read_text(), source=str(path))
            levels = [b.level for b in boards if b.level is not None]
        except OSError as e:
            raise PipelineError(f"cannot read --exclude file {path}: {e.strerror}") from None
        except (LevelError, UnicodeDecodeError) as e:
            raise PipelineError(f"--exclude file {path} is not a level file: {e}") from None
        files.append({"name": Path(path).name, "sha256": sha256_file(Path(path)),
                      "levels": len(levels)})
        ids.update(canonical_id(level) for level in levels)
    return files, sorted(ids)


def rotate(new: str, prev: str, *, datasets: Path, exclude: Sequence[Path] = (),
           seed: int | None = None, workers: Workers | None = None) -> RotationResult:
    """Build ``new`` matched to ``prev``, audit it against ``prev`` and report equivalence.

    ``seed`` None draws a secret seed (kept under ``datasets/.secrets``); a given seed is
    public (tests, demos). A refused or impossible rotation raises ``PipelineError`` and leaves
    neither the version, its build folder nor its secret behind.

    Args:
        new, prev: the version to build and the one it is matched to (both under
            ``datasets``).
        datasets: where versions live.
        exclude: level files whose levels (under any symmetry) ``new`` must not hold.
        seed: None for a secret seed.
        workers: the processes the build runs on.

    Raises:
        InputError: no version ``prev``, or an unreadable ``--exclude`` file.
        PipelineError: ``prev`` was imported, or the rotation is refused (no match within
            the tolerances: the message says which slots).
    """
    # its levels are compared with the manifest by the audit that ends the rotation
    prev_version = open_version(datasets, prev, require_intact=False)
    if not prev_version.sha256:
        raise InputError(f"no version {prev!r} to rotate from under {datasets}")
    if prev_version.imported:
        # its slots follow a file, not a spec's tiers and bands: nothing to match slot by slot
        raise PipelineError(f"{prev} was imported from level files; only a built version can "
                            "be rotated")
    spec = prev_version.spec
    files, ids = excluded_levels(exclude)
    rotation: Rotation = {"from": prev, "excluded_files": files, "excluded_ids": ids}
    result = build(new, datasets=datasets, spec=spec, seed=seed, workers=workers,
                   rotation=rotation, select=select_stage)
    with private_writes(is_hidden(spec.to_dict())):  # a hidden version's report is private
        return _report(datasets, new, prev, result.path, workers or Workers())


def select_stage(run: StageRun) -> Path:
    """A rotation's select stage, in place of the spec's in the build's chain."""
    return matched_select(run.folder, run.plan, run.workers, run.exclusion_root)


def matched_select(folder: BuildFolder, plan: Plan, workers: Workers, exclusion_root: Path
                   ) -> Path:
    """The select stage of a rotation: write the matched levels, or refuse the rotation."""
    rotation = plan.rotation
    if rotation is None:
        raise PipelineError(f"the build of {plan.version} is not a rotation")
    prev = rotation["from"]
    prev_levels = graded_alike(
        prev, open_version(exclusion_root, prev, require_intact=False).levels(), workers)
    prev_levels = with_panel(prev_levels.with_columns(
        pl.Series("planner_solved", planner_solved(prev_levels, workers))), workers)
    goal = targets(prev_levels, plan.spec)
    rule = PanelRule(tuple(a.name for a in PANEL), plan.spec.panel_tolerance)
    gap = allowed_gap(goal.height)
    ids = version_ids(exclusion_root, plan.excluded_versions) | set(
        rotation["excluded_ids"])
    layouts = version_ids(exclusion_root, plan.excluded_versions, "wall_layout_id")
    pools = [_graded_pool(folder, "pool", folder.output("generate"), plan.spec, workers, goal)]
    unmatched: list[int] = []
    for round_ in range(MAX_ENLARGEMENTS + 1):
        if round_:
            extra = _enlarge(folder, plan, round_, goal.filter(pl.col("index").is_in(unmatched)),
                             goal, workers)
            if extra is not None:
                pools.append(extra)
        pool = pl.concat(pools, how="vertical_relaxed")
        try:
            rows = match(goal, pool, ids, layouts, planner_gap=gap, panel=rule)
            break
        except MatchError as e:
            if round_ == MAX_ENLARGEMENTS:
                raise PipelineError(
                    f"rotation of {plan.version} from {prev}: {len(e.unmatched)} slot(s) could "
                    f"not be matched after enlarging the pool {MAX_ENLARGEMENTS} times "
                    f"({pool.height} candidates): {e}") from None
            unmatched = sorted(set(unmatched) | set(e.unmatched))
            workers.say(f"select: {len(unmatched)} slot(s) unmatched in a pool of "
                        f"{pool.height}; drawing {draws_in_round(round_ + 1)} more "
                        "candidates for each")
    # One more draw for the slots matched loosely; the match can then only get closer.
    loose = _loose(goal, pool, rows, draws_in_round(round_ + 1))
    if loose:
        workers.say(f"select: {len(loose)} slot(s), the farthest, differ by more than "
                    f"{REFINE_GAP} in compute_to_solve or in more than {PANEL_CLOSE} panel "
                    f"agents; drawing "
                    f"{draws_in_round(round_ + 1)} more candidates for each")
        extra = _enlarge(folder, plan, round_ + 1, goal.filter(pl.col("index").is_in(loose)),
                         goal, workers)
        if extra is not None:
            pool = pl.concat([pool, extra], how="vertical_relaxed")  # the rows above stay
            try:
                rows = match(goal, pool, ids, layouts, planner_gap=gap, panel=rule)
            except MatchError:
                # the larger model not solved within the solver's deterministic budget (on
                # a pool of 1,000 levels): the match already found stands
                workers.say("select: the closer match was not found within the solver's "
                            "budget; the first one stands")
    # Each new level takes the slot (and band) of the PREV level it stands in for; play order
    # is then easiest first within each tier, as in an ordinary build.
    chosen = (pool[rows].drop("slot", "band_lo", "band_hi", "planner_solved", PANEL_COLUMN,
                              PANEL_STEPS_COLUMN)
              .with_columns(goal["slot"], goal["band_lo"], goal["band_hi"]))
    # The verdict replays the planner and the panel on the chosen levels rather than
    # trusting the pool's.
    ordered = play_order(chosen)
    verdict = compare(prev, goal, plan.version, with_panel(ordered.with_columns(
        pl.Series("planner_solved", planner_solved(ordered, workers))), workers), rule)
    if not verdict.accepted:
        raise PipelineError(f"rotation of {plan.version} from {prev} refused: "
                            + "; ".join(verdict.reasons()))
    write_text(json.dumps(verdict.to_dict(), indent=2) + "\n", folder.stages / EQUIVALENCE_FILE)
    # The chosen candidates as drawn (origin included); solve and grade then follow as usual.
    out = folder.output("select")
    write_parquet(chosen.select(list(CANDIDATE_SCHEMA)).sort(["tier", "slot"]), out)
    return out


def graded_alike(name: str, levels: pl.DataFrame, workers: Workers) -> pl.DataFrame:
    """PREV's levels with compute_to_solve, difficulty and grade comparable to new ones.

    A version graded before compute_to_solve existed is regraded by the shipped predictor
    (its files are untouched); one that has it must agree with the shipped model, for
    matching compares values that mean something only when the same model produced them.
    """
    if "compute_to_solve" not in levels.columns:
        workers.say(f"select: {name} predates compute_to_solve; its levels are regraded by "
                    f"{MODEL_PATH.name} for matching")
        try:
            return with_predicted_compute(levels)
        except KeyError as e:
            raise PipelineError(f"{name} lacks grade features ({e}); it cannot be "
                                "matched") from None
    check_graded_alike(name, levels)
    return levels


def check_graded_alike(name: str, levels: pl.DataFrame) -> None:
    """Refuse a PREV whose compute_to_solve, difficulty and grade are not the shipped model's:
    predicted values must be the predictor's, and every difficulty and grade must follow from
    compute_to_solve through the model's curve and the fixed cut points."""
    compute = levels["compute_to_solve"].to_numpy().astype(np.float64)
    measured = levels["compute_measured"].to_numpy().astype(bool)
    try:
        predicted = with_predicted_compute(levels.filter(~pl.col("compute_measured")))
    except KeyError as e:
        raise PipelineError(f"{name} lacks grade features ({e}); it cannot be matched") from None
    want = compute.copy()
    want[~measured] = predicted["compute_to_solve"].to_numpy()
    _, difficulty, grades = scores_from_compute(want)
    stored = levels["difficulty"].to_numpy().astype(np.float64)
    off = np.flatnonzero((np.abs(compute - want) > DIFFICULTY_TOLERANCE)
                         | (np.abs(stored - difficulty) > DIFFICULTY_TOLERANCE)
                         | (levels["grade"].to_numpy() != grades))
    if off.size:
        i = int(off[0])
        raise PipelineError(
            f"{name} was graded by another difficulty model than {MODEL_PATH.name} "
            f"({off.size} levels differ, e.g. level {levels['index'][i]}: stored compute "
            f"{compute[i]:.4f} and difficulty {stored[i]:.4f}, model {want[i]:.4f} and "
            f"{difficulty[i]:.4f}); its difficulties are not comparable, so it cannot be "
            "rotated")


def _loose(goal: pl.DataFrame, pool: pl.DataFrame, rows: list[int], per_slot: int
           ) -> list[int]:
    """Targets (PREV indices) whose chosen candidate differs by more than REFINE_GAP in
    compute_to_solve or by more than PANEL_CLOSE agents in its panel outcomes, farthest
    first, as many as REFINE_DRAWS per 100 levels allow at ``per_slot`` draws each."""
    gaps = np.abs(pool["compute_to_solve"][rows].cast(pl.Float64).to_numpy()
                  - goal["compute_to_solve"].cast(pl.Float64).to_numpy())
    agents = (panel_matrix(pool)[rows] != panel_matrix(goal)).sum(axis=1)
    far = np.maximum(gaps / REFINE_GAP, agents / PANEL_CLOSE)
    loose = np.flatnonzero(far > 1)
    keep = max(1, REFINE_DRAWS * goal.height // 100 // per_slot)
    order = loose[np.argsort(-far[loose], kind="stable")][:keep]
    return [int(goal["index"][int(k)]) for k in sorted(order)]


def _enlarge(folder: BuildFolder, plan: Plan, round_: int, wanted: pl.DataFrame,
             goal: pl.DataFrame, workers: Workers) -> pl.DataFrame | None:
    """Draw, solve and grade candidates for the ``wanted`` targets; None when no draw fit.

    Each target seeks starts within one move of PREV's optimum, inside its slot's band.
    """
    drawn = draw(plan.spec, plan.seed, ENLARGE, round_, draw_targets(wanted), workers)
    if not drawn.height:
        return None
    path = folder.stages / f"enlarge{round_}-generate.parquet"
    write_parquet(drawn, path)
    return _graded_pool(folder, f"enlarge{round_}", path, plan.spec, workers, goal)


def draw_targets(wanted: pl.DataFrame) -> list[Target]:
    """The targeted draws for levels of PREV (``targets`` rows): starts within one move of
    each one's optimum, inside its slot's band, keyed by its index."""
    return [Target(r["tier"], r["slot"], r["index"], (r["band_lo"], r["band_hi"]),
                   (max(r["band_lo"], r["optimal_moves"] - OPTIMUM_TOLERANCE),
                    min(r["band_hi"], r["optimal_moves"] + OPTIMUM_TOLERANCE)))
            for r in wanted.iter_rows(named=True)]


def _graded_pool(folder: BuildFolder, name: str, candidates: Path, spec: Spec,
                 workers: Workers, goal: pl.DataFrame) -> pl.DataFrame:
    """Candidates solved, graded and played by the planner (files ``name``-solve/-grade)."""
    solved = solve(candidates, folder.stages / f"{name}-solve.parquet", workers)
    graded = grade(solved, folder.stages / f"{name}-grade.parquet", workers)
    return _with_planner(read_parquet(graded), spec, workers, goal)


def _with_planner(pool: pl.DataFrame, spec: Spec, workers: Workers, goal: pl.DataFrame
                  ) -> pl.DataFrame:
    """The candidates some target could take (tier, crates, grade, optimum within one move)
    with their step budget, the reference planner's outcome and the panel's; with a
    measured spec, their ladder measured first."""
    budgets = [spec.max_steps(m) for m in pool["optimal_moves"].to_list()]
    pool = pool.with_columns(pl.Series("max_steps", budgets, dtype=pl.Int32))
    if spec.compute == "measured":
        near = goal.select("tier", pl.col("optimal_moves").alias("prev_moves"))
        rows = (pool.with_row_index("row").join(near, on="tier")
                .filter((pl.col("optimal_moves").cast(pl.Int32)
                         - pl.col("prev_moves").cast(pl.Int32)).abs() <= OPTIMUM_TOLERANCE)
                ["row"].unique().sort().to_list())
        pool = with_measured_compute(pool[rows], workers)
    pool = _takeable(pool, goal)
    pool = pool.with_columns(pl.Series("planner_solved", planner_solved(pool, workers)))
    return with_panel(pool, workers)


def _takeable(pool: pl.DataFrame, goal: pl.DataFrame) -> pl.DataFrame:
    """The candidates, in order, with the tier, crate count and grade of some target and an
    optimum within OPTIMUM_TOLERANCE of its: the only ones matching can choose."""
    near = goal.select("tier", "n_crates", "grade", pl.col("optimal_moves").alias("prev_moves"))
    rows = (pool.with_row_index("row").join(near, on=["tier", "n_crates", "grade"])
            .filter((pl.col("optimal_moves").cast(pl.Int32)
                     - pl.col("prev_moves").cast(pl.Int32)).abs() <= OPTIMUM_TOLERANCE)
            ["row"].unique().sort().to_list())
    return pool[rows]


def _report(datasets: Path, new: str, prev: str, path: Path, workers: Workers
            ) -> RotationResult:
    """Write the equivalence figures and the audit of ``new`` against ``prev`` to its report/.

    The figures are those the select stage accepted; an audit that cannot run is reported as
    a failed check rather than hiding them.
    """
    from pipeline.audit.audit import audit
    from pipeline.audit.audit_report import Report

    text = (path / STAGES_DIR / EQUIVALENCE_FILE).read_text()
    figures = Equivalence.from_dict(json.loads(text))
    folder = path / REPORT_DIR
    folder.mkdir(exist_ok=True)
    write_text(text, folder / EQUIVALENCE_FILE)
    try:
        # The audit below shows NEW's panel, and with PREV's the move one agent can expect.
        write_panel(datasets, new, workers)
        write_reference(datasets, new, workers)  # the review's compute frontier
        if is_pool(open_version(datasets, new).manifest):
            write_items(datasets, new)  # a pool's sessions choose by its item parameters
        if not (datasets / prev / REPORT_DIR / PANEL_FILE).is_file():
            write_panel(datasets, prev, workers)
        result = audit(datasets, new, prev)
        Report(result).write(folder)
    except (OSError, KeyError, ValueError, PipelineError) as e:
        return RotationResult(path, figures, False, [f"audit could not run: {e}"])
    return RotationResult(path, figures, result.passed, [c.name for c in result.failed])
