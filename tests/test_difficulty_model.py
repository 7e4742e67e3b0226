"""The shipped difficulty model: its file, its scorer, its calibration code."""

import json
import math

import numpy as np
import polars as pl
import pytest

from pipeline.calibrate import PoolSize, calibrate, pool_spec
from pipeline.difficulty.compute_curve import GRADE_BUDGETS, grade_rule
from pipeline.difficulty.difficulty import (
    FEATURES,
    MODEL_PATH,
    DifficultyModel,
    load_model,
    score_levels,
)
from pipeline.difficulty.rank_metrics import roc_auc
from pipeline.spec import load_spec
from pipeline.stages.generate import generate
from pipeline.stages.grade import grade, grade_features
from pipeline.stages.solve import solve
from pipeline.workers import Workers

WORKERS = Workers(jobs=1, show_progress=False)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """A small graded pool drawn with the pipeline's own stages (1-3 crates)."""
    folder = tmp_path_factory.mktemp("pool")
    spec = pool_spec(load_spec("tiny"), 4)
    generate(spec, 99, folder / "candidates.parquet", WORKERS)
    solve(folder / "candidates.parquet", folder / "solved.parquet", WORKERS)
    grade(folder / "solved.parquet", folder / "graded.parquet", WORKERS)
    return folder


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    return calibrate(load_spec("tiny"), 5, PoolSize(5, 4), tmp_path_factory.mktemp("cal"),
                     WORKERS)


def _by_hand(raw: dict, row: dict) -> tuple[float, float, int]:
    """The model written out: compute = clip(b0 + sum w (T(x) - mean) / scale, 2, 18);
    difficulty = 1 - sigmoid(slope (8 - compute)); grade = first budget cut it fits under."""
    c = raw["intercept"]
    for f in raw["features"]:
        x = float(row[f["column"]])
        x = math.log1p(x) if f["transform"] == "log1p" else x
        c += f["weight"] * (x - f["mean"]) / f["scale"]
    c = float(np.float32(min(max(c, 2.0), 18.0)))  # log2 of 4 and of 262,144 calls
    difficulty = 1.0 - 1.0 / (1.0 + math.exp(-raw["slope"] * (math.log2(256) - c)))
    grade = 1 + sum(c > math.log2(b) for b in raw["grade_budgets"])
    return c, difficulty, grade


def test_shipped_model_file_records_its_fit_and_its_checks():
    raw = json.loads(MODEL_PATH.read_text())
    assert raw["format"] == 3 and raw["grade_budgets"] == [4, 32, 256, 2048]
    assert raw["unit"] == "dynamics calls per step" and "calls" in raw["target"]
    assert raw["ladder"]["budgets"] == [4, 262_144] and raw["planner"]["rule_budget"] == 256
    assert [f["column"] for f in raw["features"]] == [c for c, _ in FEATURES]
    assert raw["fit"]["levels"] >= 300 and raw["held_out"]["levels"] >= 300
    assert raw["held_out"]["spearman"] > raw["held_out"]["spearman_optimal_moves"]
    assert raw["grades"] == grade_rule()
    assert raw["test_retest"]["compute_to_solve_pearson"] >= 0.9
    assert {r["crates"] for r in raw["generalisation"]} == {1, 2, 3, 4}
    for key in ("fit_date", "pool", "planner", "ladder", "l2"):
        assert key in raw


def test_grade_stage_scores_levels_exactly_as_the_model_file_says(pool):
    raw = json.loads(MODEL_PATH.read_text())
    graded = pl.read_parquet(pool / "graded.parquet")
    assert graded.height >= 8
    for row in graded.iter_rows(named=True):
        compute, difficulty, grade_ = _by_hand(raw, row)
        assert row["compute_to_solve"] == pytest.approx(compute, abs=1e-5)
        assert row["difficulty"] == pytest.approx(difficulty, rel=1e-5, abs=1e-7)
        assert row["grade"] == grade_
        assert row["compute_measured"] is False


def test_difficulty_agrees_with_the_grade_at_the_rule_budget(pool):
    graded = pl.read_parquet(pool / "graded.parquet")
    hard = graded["grade"].to_numpy() >= 4
    assert np.array_equal(hard, graded["difficulty"].to_numpy() > 0.5)


def test_scoring_needs_only_the_feature_columns(pool):
    features = pl.read_parquet(pool / "graded.parquet").select([c for c, _ in FEATURES])
    compute, difficulty, grades = score_levels(features)
    assert compute.dtype == np.float32 and grades.dtype == np.int8
    assert ((compute >= 2) & (compute <= 18)).all()
    assert ((difficulty > 0) & (difficulty < 1)).all()
    with pytest.raises(KeyError, match="optimal_moves"):
        score_levels(features.drop("optimal_moves"))


def test_model_survives_a_json_round_trip_and_refuses_other_cut_points():
    model = load_model()
    again = DifficultyModel.from_json(json.loads(json.dumps(model.to_json())))
    assert again.columns == model.columns and again.slope == model.slope
    assert np.array_equal(again.weights, model.weights)
    with pytest.raises(ValueError, match="grade budgets"):
        DifficultyModel.from_json({**model.to_json(), "grade_budgets": [4, 32, 512, 2048]})
    with pytest.raises(ValueError, match="format 2"):  # counted expanded states, not calls
        DifficultyModel.from_json({**model.to_json(), "format": 2})
    assert tuple(model.to_json()["grade_budgets"]) == GRADE_BUDGETS


def test_calibration_validates_on_a_disjoint_pool_with_correct_metrics(calibration):
    fit_ids = set(calibration.fit_pool["canonical_id"].to_list())
    held = calibration.held_out_pool
    assert not fit_ids & set(held["canonical_id"].to_list())
    info = calibration.model.info
    assert info["held_out"]["levels"] == held.height
    measured = held["compute_to_solve"].to_numpy()
    predicted = calibration.model.compute_to_solve(held)
    assert info["held_out"]["mean_absolute_error"] == pytest.approx(
        np.abs(predicted - measured).mean(), abs=1e-4)
    assert info["pool"]["held_out_seed"] != info["pool"]["seed"]
    retest = info["test_retest"]
    assert retest["levels"] == held.height
    assert not set(retest["seed_sets"][0]) & set(retest["seed_sets"][1])
    assert -1 <= retest["compute_to_solve_pearson"] <= 1


def test_generalisation_table_counts_agent_failures_per_crate_tier(calibration):
    held = calibration.held_out_pool
    rows = calibration.model.info["generalisation"]
    assert {r["agent"] for r in rows} == {f"{k}-{b}" for k in ("astar", "greedy")
                                          for b in (64, 256, 1024)}
    for r in rows:
        at = held.filter(pl.col("n_crates") == r["crates"])
        assert r["levels"] == at.height and 0 <= r["failures"] <= at.height
        if r["auc_compute_to_solve"] is not None:
            assert r["gain"] == pytest.approx(r["auc_compute_to_solve"]
                                              - r["auc_optimal_moves"], abs=2e-4)
    # One AUC recomputed from the agents' own play, so the table is not taken on trust.
    from engine.agents.validation_agents import AgentSpec, play_agent
    from engine.levels import parse_xsb

    row = next(r for r in rows if r["auc_compute_to_solve"] is not None)
    at = held.filter(pl.col("n_crates") == row["crates"])
    kind, budget = row["agent"].split("-")
    failed = np.array([not play_agent(parse_xsb(x), int(m), AgentSpec(kind, int(budget)))
                       for x, m in zip(at["xsb"], at["max_steps"], strict=True)])
    assert failed.sum() == row["failures"]
    assert row["auc_compute_to_solve"] == pytest.approx(
        roc_auc(at["compute_to_solve"].to_numpy(), failed), abs=1e-4)


def test_features_stage_leaves_scoring_to_the_model(pool):
    features = pl.read_parquet(pool / "solved.parquet")
    assert "difficulty" not in features.columns
    grade_features(pool / "solved.parquet", pool / "features.parquet", WORKERS)
    table = pl.read_parquet(pool / "features.parquet")
    assert set(c for c, _ in FEATURES) <= set(table.columns)
    assert "difficulty" not in table.columns and "compute_to_solve" not in table.columns


@pytest.mark.slow
def test_calibrate_command_writes_a_model_and_reports_its_figures(tmp_path):
    from click.testing import CliRunner

    from sokoforge.cli import main

    out = tmp_path / "model.json"
    result = CliRunner().invoke(main, ["calibrate", "--spec", "tiny", "--fit-per-tier", "5",
                                       "--held-out-per-tier", "3", "--jobs", "1", "--seed", "5",
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    model = load_model(out)
    assert model.info["pool"]["seed"] == 5 and model.info["fit"]["levels"] >= 10
    assert "test-retest on " in result.output and "auc_compute_to_solve" in result.output


def test_calibrate_command_refuses_an_unknown_template_in_one_line(tmp_path):
    from click.testing import CliRunner

    from sokoforge.cli import main

    result = CliRunner().invoke(main, ["calibrate", "--spec", "nosuch", "--out",
                                       str(tmp_path / "m.json")])
    assert result.exit_code == 2  # unreadable input
    assert result.output.startswith("Error: spec 'nosuch' not found")
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "m.json").exists()
