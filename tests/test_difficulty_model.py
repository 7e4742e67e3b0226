"""The shipped difficulty model: its file, its scorer, its calibration code."""

import json
import math

import numpy as np
import polars as pl
import pytest

from pipeline.calibrate import PoolSize, calibrate, grade_rule, pool_spec
from pipeline.difficulty import FEATURES, MODEL_PATH, DifficultyModel, load_model, score_levels
from pipeline.generate import generate
from pipeline.grade import grade, grade_features
from pipeline.solve import solve
from pipeline.spec import load_spec
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


def _by_hand(raw: dict, row: dict) -> float:
    """The model's formula written out: sigmoid of intercept + sum w * (T(x) - mean) / scale."""
    z = raw["intercept"]
    for f in raw["features"]:
        x = float(row[f["column"]])
        x = math.log1p(x) if f["transform"] == "log1p" else x
        z += f["weight"] * (x - f["mean"]) / f["scale"]
    return 1.0 / (1.0 + math.exp(-z))


def test_shipped_model_file_records_its_fit_and_beats_optimal_length():
    raw = json.loads(MODEL_PATH.read_text())
    assert [f["column"] for f in raw["features"]] == [c for c, _ in FEATURES]
    assert raw["fit"]["levels"] >= 2000
    assert sorted(raw["fit"]["by_crates"]) == ["1", "2", "3", "4"]
    assert raw["held_out"]["auc"] > raw["held_out"]["auc_optimal_moves"]
    assert raw["held_out"]["auc"] >= 0.85
    assert raw["grade_cuts"] == sorted(raw["grade_cuts"]) and len(raw["grade_cuts"]) == 4
    assert raw["grades"] == grade_rule(tuple(raw["grade_cuts"]))
    for key in ("fit_date", "pool", "planner", "l2"):
        assert key in raw


def test_grade_stage_scores_levels_exactly_as_the_model_file_says(pool):
    raw = json.loads(MODEL_PATH.read_text())
    graded = pl.read_parquet(pool / "graded.parquet")
    assert graded.height >= 8
    for row in graded.iter_rows(named=True):
        want = _by_hand(raw, row)
        assert row["difficulty"] == pytest.approx(want, rel=1e-5, abs=1e-7)
        assert row["grade"] == 1 + sum(np.float32(want) >= c for c in raw["grade_cuts"])


def test_scoring_needs_only_the_feature_columns(pool):
    features = pl.read_parquet(pool / "graded.parquet").select([c for c, _ in FEATURES])
    difficulty, grades = score_levels(features)
    assert difficulty.dtype == np.float32 and grades.dtype == np.int8
    assert ((difficulty > 0) & (difficulty < 1)).all()
    assert set(grades.tolist()) <= {1, 2, 3, 4, 5}
    with pytest.raises(KeyError, match="optimal_moves"):
        score_levels(features.drop("optimal_moves"))


def test_grades_follow_the_cut_points():
    model = load_model()
    cuts = model.grade_cuts
    probes = np.array([0.0, cuts[0] - 1e-6, cuts[0], cuts[1], cuts[2] + 1e-6, cuts[3], 1.0])
    assert model.grade(probes).tolist() == [1, 1, 2, 3, 4, 5, 5]


def test_model_survives_a_json_round_trip():
    model = load_model()
    again = DifficultyModel.from_json(json.loads(json.dumps(model.to_json())))
    assert again.columns == model.columns and again.grade_cuts == model.grade_cuts
    assert np.array_equal(again.weights, model.weights)
    with pytest.raises(ValueError, match="increasing grade cut points"):
        DifficultyModel.from_json({**model.to_json(), "grade_cuts": [0.5, 0.2, 0.6, 0.8]})


def test_calibration_validates_on_a_disjoint_pool_with_correct_metrics(tmp_path):
    result = calibrate(load_spec("tiny"), 5, PoolSize(5, 4), tmp_path, WORKERS)
    fit_ids = set(result.fit_pool["canonical_id"].to_list())
    assert not fit_ids & set(result.held_out_pool["canonical_id"].to_list())
    held = result.held_out_pool
    info = result.model.info["held_out"]
    assert info["levels"] == held.height
    failed = ~held["planner_solved"].to_numpy()
    assert info["planner_failures"] == int(failed.sum())
    # This seed's held-out pool has both outcomes, so the AUC below is always checked.
    assert 0 < failed.sum() < held.height
    # AUC as the share of (failed, solved) pairs ordered right, ties half: counted directly.
    d = result.model.difficulty(held)
    pos, neg = d[failed], d[~failed]
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert info["auc"] == pytest.approx(pairs / (pos.size * neg.size), abs=1e-4)
    assert result.model.info["pool"]["held_out_seed"] != result.model.info["pool"]["seed"]


def test_features_stage_leaves_scoring_to_the_model(pool):
    features = pl.read_parquet(pool / "solved.parquet")
    assert "difficulty" not in features.columns
    grade_features(pool / "solved.parquet", pool / "features.parquet", WORKERS)
    table = pl.read_parquet(pool / "features.parquet")
    assert set(c for c, _ in FEATURES) <= set(table.columns)
    assert "difficulty" not in table.columns


def test_calibrate_command_writes_a_model_and_reports_its_figures(tmp_path):
    from click.testing import CliRunner

    from pipeline.cli import main

    out = tmp_path / "model.json"
    result = CliRunner().invoke(main, ["calibrate", "--spec", "tiny", "--fit-per-tier", "5",
                                       "--held-out-per-tier", "3", "--jobs", "1", "--seed", "5",
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    model = load_model(out)
    assert model.info["pool"]["seed"] == 5 and model.info["fit"]["levels"] >= 10
    assert "held_out: " in result.output and "AUC" in result.output


def test_calibrate_command_refuses_an_unknown_template_in_one_line(tmp_path):
    from click.testing import CliRunner

    from pipeline.cli import main

    result = CliRunner().invoke(main, ["calibrate", "--spec", "nosuch", "--out",
                                       str(tmp_path / "m.json")])
    assert result.exit_code == 2  # unreadable input
    assert result.output.startswith("Error: spec 'nosuch' not found")
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "m.json").exists()


def test_calibration_refuses_a_pool_the_planner_always_solves(tmp_path):
    from pipeline.errors import PipelineError
    from pipeline.spec import spec_from_dict

    data = load_spec("tiny").to_dict()
    data["tiers"] = data["tiers"][:1]  # one crate: the planner never fails
    with pytest.raises(PipelineError, match="solved every one of the 4 fit-pool levels"):
        calibrate(spec_from_dict(data), 3, PoolSize(4, 2), tmp_path, WORKERS)
