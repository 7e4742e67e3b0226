"""Compute to solve: tie-break seeds, the ladder, the curves, and a measured build and audit."""

import numpy as np
import polars as pl
import pytest

from engine.agents.ladder import LADDER_BUDGETS, LADDER_SEEDS, LADDER_STEPS, climb
from engine.agents.planner import plan
from engine.agents.validation_agents import AgentSpec, play_agent
from engine.episode import Game
from engine.levels import parse_xsb
from pipeline.difficulty.compute_curve import (
    HIGHEST,
    LOWEST,
    compute_grade,
    failure_at_rule,
    fit_locations,
    fit_slope,
    solve_probability,
)

OPEN = """
#########
#@      #
# $ $ . #
#  $  . #
#     . #
#########"""

CORNERED = """
#####
#$ .#
#  @#
#####"""

CORRIDOR = """
#######
#@    #
# $ . #
#     #
#######"""


def test_tie_break_seeds_change_the_episode_but_every_one_replays_to_solved():
    level = parse_xsb(OPEN)
    episodes = {plan(level, 200, budget=256, seed=s).actions for s in range(6)}
    assert len(episodes) > 1
    assert plan(level, 200, budget=256, seed=0) == plan(level, 200, budget=256)
    for s in range(6):
        result = plan(level, 200, budget=256, seed=s)
        game = Game(level, max_steps=200)
        for a in result.actions:
            game.act(a)
        assert result.solved == game.solved
    with pytest.raises(ValueError, match="seed"):
        plan(level, 10, seed=-1)


def test_ladder_counts_are_the_seeds_own_episodes_below_where_climbing_stopped():
    level = parse_xsb(OPEN)
    ladder = climb(level, 60)
    assert len(ladder.solved) == LADDER_STEPS and ladder.seeds == len(LADDER_SEEDS)
    for k in range(ladder.played + 1):
        assert ladder.solved[k] == sum(plan(level, 60, budget=LADDER_BUDGETS[k], seed=s).solved
                                       for s in LADDER_SEEDS)
    # climbing stopped after two consecutive rungs solved by every seed; the rest count solved
    assert ladder.solved[ladder.played] == ladder.solved[ladder.played - 1] == ladder.seeds
    assert all(s == ladder.seeds for s in ladder.solved[ladder.played:])


def test_ladder_of_an_unsolvable_level_climbs_to_the_top_and_is_censored():
    ladder = climb(parse_xsb(CORNERED), 20)
    assert ladder.solved == (0,) * LADDER_STEPS and ladder.played == LADDER_STEPS - 1
    location, censored = fit_locations(np.array([ladder.solved]), ladder.seeds, 1.0)
    assert location[0] == HIGHEST and censored[0]


def test_curve_fit_recovers_known_locations_and_slope():
    rng = np.random.default_rng(3)
    truth = rng.uniform(4, 15, size=300)
    slope, seeds = 1.3, 16
    rungs = np.log2(LADDER_BUDGETS)
    p = 1 / (1 + np.exp(-slope * (rungs[None, :] - truth[:, None])))
    solved = rng.binomial(seeds, p)
    fitted_slope = fit_slope(solved, seeds)
    assert fitted_slope == pytest.approx(slope, rel=0.15)
    location, censored = fit_locations(solved, seeds, fitted_slope)
    assert not censored.any()
    assert np.abs(location - truth).mean() < 0.35


def test_slope_needs_a_level_with_both_outcomes():
    with pytest.raises(ValueError, match="slope"):
        fit_slope(np.full((4, LADDER_STEPS), 8), 8)


def test_the_ladder_climbs_in_dynamics_calls_from_one_expansion():
    assert LADDER_BUDGETS[0] == 4 and LADDER_BUDGETS[-1] >= 65_536
    assert all(b == 2 * a for a, b in zip(LADDER_BUDGETS, LADDER_BUDGETS[1:], strict=False))
    assert (LOWEST, HIGHEST) == (2.0, float(np.log2(LADDER_BUDGETS[-1])))
    level = parse_xsb(OPEN)
    for budget in LADDER_BUDGETS[:6]:
        assert max(plan(level, 60, budget=budget).calls) <= budget


def test_grades_follow_the_budget_cut_points_and_difficulty_agrees():
    c = np.array([LOWEST, 2.0, 2.01, 5.0, 8.0, 8.01, 11.0, 11.5, HIGHEST])
    assert compute_grade(c).tolist() == [1, 1, 2, 2, 3, 4, 4, 5, 5]
    d = failure_at_rule(c, 0.7)
    assert d[4] == pytest.approx(0.5)
    assert np.array_equal(d > 0.5, compute_grade(c) >= 4)
    assert solve_probability(np.array([8.0]), 2.0, 256)[0] == pytest.approx(0.5)


def test_validation_agents_solve_an_easy_level_and_fail_a_dead_one():
    for agent in (AgentSpec("astar", 64), AgentSpec("greedy", 64)):
        assert play_agent(parse_xsb(CORRIDOR), 30, agent)
        assert not play_agent(parse_xsb(CORNERED), 30, agent)
    with pytest.raises(ValueError, match="unknown validation agent"):
        play_agent(parse_xsb(CORRIDOR), 30, AgentSpec("dfs", 64))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A two-tier tiny game (grades 1 to 4) built with measured compute_to_solve, in a datasets
    folder of its own (a rotation climbs the ladder on a few hundred candidates)."""
    from spec_support import two_tier_tiny

    from pipeline.stages.build import build
    from pipeline.workers import Workers

    datasets = tmp_path_factory.mktemp("measured")
    build("m1", datasets=datasets, spec=two_tier_tiny(compute="measured"), seed=4,
          workers=Workers(show_progress=False))
    return datasets


def test_measured_build_stores_the_ladder_and_ramps_by_it(measured):
    from pipeline.difficulty.compute import with_measured_compute
    from pipeline.workers import Workers

    levels = pl.read_parquet(measured / "m1" / "levels.parquet").sort("index")
    assert levels["compute_measured"].all()
    assert all(len(r) == LADDER_STEPS for r in levels["solve_rates"].to_list())
    again = with_measured_compute(levels, Workers(show_progress=False))
    assert np.array_equal(again["compute_to_solve"].to_numpy(),
                          levels["compute_to_solve"].to_numpy())
    for _, part in levels.group_by("tier"):
        c = part.sort("index")["compute_to_solve"].to_list()
        assert c == sorted(c)
    assert np.array_equal(levels["grade"].to_numpy(),
                          compute_grade(levels["compute_to_solve"].to_numpy()))


def test_a_version_built_with_measured_compute_verifies_against_its_seed(measured):
    from pipeline.stages.verify import verify
    from pipeline.workers import Workers

    outcome = verify("m1", 4, datasets=measured, workers=Workers(show_progress=False))
    assert outcome.rebuilt_sha256 == outcome.expected_sha256
    assert outcome.ok and not outcome.earlier_model and not outcome.problems


def test_audit_replays_the_ladder_and_names_a_tampered_compute(measured, tmp_path):
    import shutil

    from pipeline.audit.audit import audit
    from pipeline.versions.manifest import read_manifest, write_manifest
    from pipeline.versions.tables import sha256_file

    assert audit(measured, "m1").passed
    copy = tmp_path / "datasets"
    shutil.copytree(measured / "m1", copy / "m1")
    path = copy / "m1" / "levels.parquet"
    levels = pl.read_parquet(path)
    levels.with_columns(pl.when(pl.col("index") == 2).then(pl.col("compute_to_solve") + 0.5)
                        .otherwise(pl.col("compute_to_solve")).alias("compute_to_solve")
                        ).write_parquet(path)
    manifest = read_manifest(copy / "m1" / "manifest.json")
    manifest["files"]["levels.parquet"]["sha256"] = sha256_file(path)
    write_manifest(manifest, copy / "m1" / "manifest.json")
    result = audit(copy, "m1")
    failed = {c.name: c for c in result.failed}
    check = failed["compute_to_solve reproduces; difficulty and grade follow from it"]
    assert list(failed) == [check.name]
    assert check.offenders[0].startswith("level 2: compute_to_solve")


@pytest.mark.slow
def test_a_measured_version_rotates_matched_on_measured_compute(measured, tmp_path):
    import shutil

    from pipeline.rotate import rotate
    from pipeline.scores.matching import COMPUTE_TOLERANCE
    from pipeline.workers import Workers

    datasets = tmp_path / "datasets"
    shutil.copytree(measured / "m1", datasets / "m1")
    result = rotate("m2", "m1", datasets=datasets, seed=8, workers=Workers(show_progress=False))
    assert result.equivalence.accepted
    old = pl.read_parquet(datasets / "m1" / "levels.parquet").sort("tier", "slot")
    new = pl.read_parquet(datasets / "m2" / "levels.parquet").sort("tier", "slot")
    assert new["compute_measured"].all()
    gaps = (new["compute_to_solve"] - old["compute_to_solve"]).abs().to_numpy()
    assert (gaps <= COMPUTE_TOLERANCE + 1e-6).all()
    assert new["grade"].to_list() == old["grade"].to_list()
