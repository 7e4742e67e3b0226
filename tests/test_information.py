"""A pool's information curve in the audit: what it measures well, and the floor it must keep."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.audit.audit import VersionFacts, check_information
from pipeline.audit.information import RAMP_LEVELS, information_curve
from pipeline.scores.simulated_agents import LevelPopulation
from pipeline.spec import load_spec
from pipeline.versions.tables import write_parquet

SHARES = {0: 0.25, 1: 0.25, 2: 0.3, 3: 0.2}


@pytest.fixture(scope="module")
def spread():
    """A simulated pool of 400 levels in the standard tiers' shares, spread over difficulty
    and discrimination about as a calibrated pool is: (a, b, tiers)."""
    population = LevelPopulation(tiers=(100, 100, 120, 80), tier_means=(-3, -1, 1, 3),
                                 spread=1.5, log_discrimination_sd=0.5)
    b, a = population.draw(np.random.default_rng(7))
    return a, b, population.tier_of_level


def test_a_spread_pool_informs_a_session_beyond_the_ramp_and_says_where_it_runs_out(spread):
    a, b, tiers = spread
    curve = information_curve(a, b, tiers, SHARES, episodes=50)
    inside = (curve.theta >= curve.span[0]) & (curve.theta <= curve.span[1])
    assert curve.span[0] < 0 < curve.span[1] and inside.sum() > 5
    assert (curve.session[inside] >= curve.ramp[inside]).all() and not curve.below_floor().size
    assert (curve.pool >= curve.session).all()  # a session is a part of the pool
    assert np.all(np.diff(curve.success) > 0)  # the equating rises with ability
    # information falls off away from the levels: the extremes hold less than the middle
    middle = int(np.argmin(np.abs(curve.theta)))
    assert curve.session[0] < curve.session[middle] > curve.session[-1]
    lo, hi = curve.well_measured()
    statement = curve.statement()
    assert f"{lo:+.2f} to {hi:+.2f}" in statement and "runs out" in statement
    assert "never below it (the floor)" in statement


def _facts(tiers: np.ndarray) -> VersionFacts:
    table = pl.DataFrame({"index": np.arange(tiers.size), "tier": tiers})
    spec = load_spec("adaptive")
    return VersionFacts("pool", {"spec": spec.to_dict()}, spec, table, [])


def _items(root, a: np.ndarray, b: np.ndarray, tiers: np.ndarray) -> None:
    (root / "pool" / "report").mkdir(parents=True)
    write_parquet(pl.DataFrame({"index": np.arange(a.size), "tier": tiers,
                                "discrimination": a, "difficulty": b}),
                  root / "pool" / "report" / "items.parquet")


def test_a_pool_of_levels_all_alike_fails_the_floor_naming_the_abilities(spread, tmp_path):
    _, _, tiers = spread
    # no level more informative than another: a session is half a ramp, anywhere
    _items(tmp_path, np.ones(tiers.size), np.zeros(tiers.size), tiers)
    check, curve = check_information(_facts(tiers), tmp_path)
    assert not check.passed and curve is not None
    assert str(RAMP_LEVELS) in check.name
    assert check.offenders and all("below the ramp's" in o for o in check.offenders)
    assert curve.session[0] == pytest.approx(curve.ramp[0] / 2)
    assert "falls below the ramp (the floor)" in curve.statement()


def test_a_spread_pool_passes_the_floor(spread, tmp_path):
    a, b, tiers = spread
    _items(tmp_path, a, b, tiers)
    check, curve = check_information(_facts(tiers), tmp_path)
    assert check.passed and curve is not None and curve.episodes == 50


def test_a_pool_never_calibrated_or_calibrated_on_other_levels_fails(spread, tmp_path):
    a, b, tiers = spread
    check, curve = check_information(_facts(tiers), tmp_path)
    assert not check.passed and curve is None and "sokoforge panel pool" in check.offenders[0]
    _items(tmp_path, a[:-1], b[:-1], tiers[:-1])
    check, curve = check_information(_facts(tiers), tmp_path)
    assert not check.passed and "not of these levels" in check.offenders[0]
