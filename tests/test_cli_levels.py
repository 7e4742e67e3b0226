"""``sokoforge solve`` and ``sokoforge render`` as a maintainer uses them."""

import json

import matplotlib.image
import numpy as np
from click.testing import CliRunner

from engine.levels import parse_levels
from engine.render import render, render_goal
from engine.rules import replay
from pipeline.cli import main

LEVELS = """; push right
#####
#@$.#
#####

; around the corner
######
#@   #
# $  #
#  . #
######
"""
UNSOLVABLE = "#####\n#@ .#\n#$  #\n#####\n"


def run(*args, stdin=None):
    return CliRunner().invoke(main, list(args), input=stdin)


def test_solve_prints_optimum_pushes_and_solution_per_level(tmp_path):
    path = tmp_path / "levels.xsb"
    path.write_text(LEVELS)
    result = run("solve", str(path))
    assert result.exit_code == 0, result.output
    lines = result.output.strip().split("\n")
    assert lines[0] == "level 0 (push right): 1 moves, 1 pushes: R"
    assert lines[1].startswith("level 1 (around the corner): ")


def test_solve_json_lines_in_input_order_replay_to_solved():
    result = run("solve", "--json", "-", stdin=LEVELS)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.strip().split("\n")]
    assert [r["index"] for r in rows] == [0, 1]
    for row, level in zip(rows, parse_levels(LEVELS), strict=True):
        assert set(row) >= {"index", "solvable", "optimal_moves", "optimal_pushes", "solution",
                            "states_expanded"}
        assert row["solvable"] is True and len(row["solution"]) == row["optimal_moves"]
        assert sum(ch.isupper() for ch in row["solution"]) == row["optimal_pushes"]
        assert level.is_solved(replay(level, row["solution"])[-1])


def test_unsolvable_level_exits_1_and_names_it():
    result = run("solve", "--json", "-", stdin=LEVELS + "\n" + UNSOLVABLE)
    assert result.exit_code == 1
    last = json.loads(result.output.strip().split("\n")[2])
    assert last["solvable"] is False
    assert all(last[k] is None for k in
               ("optimal_moves", "optimal_pushes", "solution", "states_expanded"))
    assert "no solution for level 2" in result.output


def test_unreadable_input_exits_2_with_one_line(tmp_path):
    missing = run("solve", str(tmp_path / "nope.xsb"))
    assert missing.exit_code == 2 and "cannot read" in missing.output
    bad = run("solve", "-", stdin="#####\n#@$x#\n#####\n")
    assert bad.exit_code == 2
    assert bad.output.strip().count("\n") == 0 and "unknown character 'x'" in bad.output
    assert isinstance(bad.exception, SystemExit)  # a refusal, not an escaped exception


def test_render_writes_observation_and_goal_side_by_side(tmp_path):
    src = tmp_path / "levels.xsb"
    src.write_text(LEVELS)
    out = tmp_path / "level.png"
    result = run("render", str(src), "--index", "1", "--scale", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    picture = (matplotlib.image.imread(out)[..., :3] * 255).round().astype(np.uint8)
    level = parse_levels(LEVELS)[1]
    assert picture.shape == (64, 132, 3)
    assert np.array_equal(picture[:, :64], render(level))
    assert np.array_equal(picture[:, 68:], render_goal(level))


def test_render_refuses_an_index_past_the_file(tmp_path):
    src = tmp_path / "levels.xsb"
    src.write_text(LEVELS)
    result = run("render", str(src), "--index", "5", "--out", str(tmp_path / "x.png"))
    assert result.exit_code == 2 and "holds 2 level(s)" in result.output


def test_render_refuses_an_out_path_that_is_not_png_before_writing(tmp_path):
    src = tmp_path / "levels.xsb"
    src.write_text(LEVELS)
    for name in ("level.txt", "level"):
        result = run("render", str(src), "--out", str(tmp_path / name))
        assert result.exit_code == 2 and ".png" in result.output
        assert not (tmp_path / name).exists()


def test_errors_on_standard_input_name_it():
    result = run("solve", "-", stdin="#####\n#@$x#\n#####\n")
    assert result.output.startswith("Error: standard input: level 0 (line 1): unknown")


def test_a_level_too_large_to_search_exits_1_and_is_not_called_unsolvable():
    result = run("solve", "--max-states", "2", "-", stdin=LEVELS + "\n" + UNSOLVABLE)
    assert result.exit_code == 1
    assert "too large to search: level 1" in result.output
    assert "no solution for level 2" in result.output and "level 1," not in result.output
