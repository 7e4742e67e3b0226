"""``sokoforge solve`` and ``sokoforge render`` as a maintainer uses them."""

import json
from pathlib import Path

import matplotlib.image
import numpy as np
from click.testing import CliRunner

from engine.levels import parse_levels
from engine.pictures.look import ARC, SHARED, SHARED_THEME, Look, Theme, painter
from engine.rules import replay
from sokoforge.cli import main

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
    assert lines[0] == "level 1 (push right): 1 moves, 1 pushes: R"
    assert lines[1].startswith("level 2 (around the corner): ")


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
    assert "no solution for level 3" in result.output


def test_unreadable_input_exits_2_with_one_line(tmp_path):
    missing = run("solve", str(tmp_path / "nope.xsb"))
    assert missing.exit_code == 2 and "cannot read" in missing.output
    bad = run("solve", "-", stdin="#####\n#@$x#\n#####\n")
    assert bad.exit_code == 2
    assert bad.output.strip().count("\n") == 0 and "unknown character 'x'" in bad.output
    assert isinstance(bad.exception, SystemExit)  # a refusal, not an escaped exception


def rendered(tmp_path, *args):
    src = tmp_path / "levels.xsb"
    src.write_text(LEVELS)
    out = tmp_path / "level.png"
    result = run("render", str(src), "--index", "1", "--scale", "1", "--out", str(out), *args)
    assert result.exit_code == 0, result.output
    picture = (matplotlib.image.imread(out)[..., :3] * 255).round().astype(np.uint8)
    assert picture.shape == (64, 132, 3)
    return picture[:, :64], picture[:, 68:]


def test_render_writes_observation_and_goal_side_by_side_in_the_shared_look(tmp_path):
    obs, goal = rendered(tmp_path)
    drawn = painter(parse_levels(LEVELS)[1], SHARED)
    assert np.array_equal(obs, drawn.frame()) and np.array_equal(goal, drawn.goal())


def test_render_draws_the_state_after_the_actions_in_the_given_look(tmp_path):
    obs, goal = rendered(tmp_path, "--actions", "rdR", "--look", "arc")
    level = parse_levels(LEVELS)[1]
    drawn = painter(level, ARC)
    assert np.array_equal(obs, drawn.frame(replay(level, "rdR")[-1]))
    assert np.array_equal(goal, drawn.goal())
    assert not np.array_equal(obs, drawn.frame())


def test_render_draws_a_theme_file(tmp_path):
    theme = Theme.from_dict({**SHARED_THEME.to_dict(), "floor": [10, 200, 30], "checker": False})
    path = tmp_path / "theme.json"
    path.write_text(theme.to_json())
    obs, goal = rendered(tmp_path, "--theme", str(path), "--actions", "r")
    level = parse_levels(LEVELS)[1]
    drawn = painter(level, Look("themed", theme))
    assert np.array_equal(obs, drawn.frame(replay(level, "r")[-1]))
    assert np.array_equal(goal, drawn.goal())
    assert (obs == [10, 200, 30]).all(axis=-1).any()


def test_render_refuses_a_bad_theme_or_actions_in_one_line(tmp_path):
    src = tmp_path / "levels.xsb"
    src.write_text(LEVELS)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    bad_colour = tmp_path / "colour.json"
    bad_colour.write_text(json.dumps({**SHARED_THEME.to_dict(), "wall": [1, 2]}))
    out = tmp_path / "x.png"
    for args, says in [(["--theme", str(bad_json)], "not valid JSON"),
                       (["--theme", str(bad_colour)], "wall is [1, 2]"),
                       (["--theme", str(tmp_path / "none.json")], "cannot read --theme"),
                       (["--actions", "rdx"], "not a LURD letter: 'x'")]:
        result = run("render", str(src), "--out", str(out), *args)
        assert result.exit_code == 2, (args, result.output)
        assert says in result.output and result.output.strip().count("\n") == 0
        assert isinstance(result.exception, SystemExit)
        assert not out.exists()


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
    assert result.output.startswith("Error: standard input line 2, column 4: unknown")


def test_a_level_too_large_to_search_exits_1_and_is_not_called_unsolvable():
    result = run("solve", "--max-states", "2", "-", stdin=LEVELS + "\n" + UNSOLVABLE)
    assert result.exit_code == 1
    assert "too large to search: level 2" in result.output
    assert "no solution for level 3" in result.output and "level 2," not in result.output


COLLECTION = """Title: A pack
Author: someone

Level 1
#####
#@$.#
#####
Title: Line

  ######
  #    #
  # $@ #
  # .  #
  ######
Comment:
an indented room
Comment-End
"""


def test_solve_and_render_read_a_collection_file_as_import_does(tmp_path):
    path = tmp_path / "pack.sok"
    path.write_text(COLLECTION)
    result = run("solve", str(path))
    assert result.exit_code == 0, result.output
    assert result.output.split("\n")[:2] == ["level 1 (Line): 1 moves, 1 pushes: R",
                                             "level 2: 3 moves, 1 pushes: ulD"]
    out = tmp_path / "room.png"
    drawn = run("render", str(path), "--index", "1", "--scale", "1", "--out", str(out))
    assert drawn.exit_code == 0, drawn.output
    picture = (matplotlib.image.imread(out)[..., :3] * 255).round().astype(np.uint8)
    # drawn as the shared environment draws the text: the indentation is a column of floor
    room = parse_levels("  ######\n  #    #\n  # $@ #\n  # .  #\n  ######\n")[0]
    assert room.width == 8
    assert np.array_equal(picture[:, :64], painter(room, SHARED).frame())


def test_solve_names_a_board_past_16x16_too_large_and_solves_the_rest():
    wide = "#" * 18 + "\n#@$." + " " * 13 + "#\n" + "#" * 18 + "\n"
    result = run("solve", "-", stdin=LEVELS + "\n" + wide)
    assert result.exit_code == 1
    assert "level 3: too large: board is 3x18, larger than 16x16" in result.output
    assert result.output.startswith("level 1 (push right): 1 moves")


def test_render_refuses_a_board_past_16x16_in_one_line(tmp_path):
    path = tmp_path / "wide.xsb"
    path.write_text("#" * 18 + "\n#@$." + " " * 13 + "#\n" + "#" * 18 + "\n")
    result = run("render", str(path), "--out", str(tmp_path / "w.png"))
    assert result.exit_code == 2 and "larger than 16x16" in result.output
    assert result.output.strip().count("\n") == 0 and not (tmp_path / "w.png").exists()


def test_readme_pictures_of_the_looks_are_what_render_draws(tmp_path):
    docs = Path(__file__).resolve().parent.parent / "docs" / "looks"
    for name, args in [("shared", ["--look", "shared"]), ("arc", ["--look", "arc"]),
                       ("themed", ["--theme", str(docs / "themed.json")]),
                       ("themed-noise", ["--theme", str(docs / "themed-noise.json")])]:
        out = tmp_path / f"{name}.png"
        result = run("render", str(docs / "level.xsb"), "--actions", "rrUru", "--scale", "2",
                     "--out", str(out), *args)
        assert result.exit_code == 0, result.output
        assert np.array_equal(matplotlib.image.imread(out), matplotlib.image.imread(
            docs / f"{name}.png")), f"docs/looks/{name}.png is stale: redraw it (README, Looks)"


def test_render_into_a_missing_folder_is_a_usage_error(tmp_path):
    path = tmp_path / "levels.xsb"
    path.write_text(LEVELS)
    result = run("render", str(path), "--out", str(tmp_path / "nowhere" / "level.png"))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"Error: cannot write {tmp_path / 'nowhere' / 'level.png'}: no writable folder there"]


DEMO = Path(__file__).resolve().parent.parent / "datasets" / "demo"


def _frames(path: Path) -> list[np.ndarray]:
    from PIL import Image, ImageSequence

    with Image.open(path) as image:
        return [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(image)]


def test_render_animates_a_versions_stored_solution_step_by_step_in_its_look_labelled(
        tmp_path):
    import polars as pl

    from engine.levels import parse_xsb
    from engine.pictures.look import stored_look
    from pipeline.spec import version_look
    from pipeline.versions.manifest import read_manifest
    from sokoforge.cli.levels import labelled

    row = pl.read_parquet(DEMO / "levels.parquet").sort("index").row(5, named=True)
    level = parse_xsb(row["xsb"])
    drawn = painter(level, stored_look(version_look(read_manifest(DEMO / "manifest.json")), row))
    states = replay(level, row["solution"])
    moves = row["solution"]
    # a version by its folder, or by its name under --datasets, as every command takes it
    for name, given in (("solution.gif", [str(DEMO)]),
                        ("solution.png", ["demo", "--datasets", str(DEMO.parent)])):
        result = run("render", *given, "--index", "5", "--solution", "--scale", "1",
                     "--gif", str(tmp_path / name))  # GIF, and an animated PNG
        assert result.exit_code == 0, result.output
        frames = _frames(tmp_path / name)
        assert len(frames) == len(moves) + 1 == len(states)
        for step, frame in enumerate(frames):
            assert np.array_equal(frame[:64, :64], drawn.frame(states[step], step)), (name, step)
            assert np.array_equal(frame[:64, 68:], drawn.goal())
            # beneath the boards, the level, the step and the move that led there
            said = (f"level 6  step {step}/{len(moves)}  {moves[step - 1]}" if step else
                    f"level 6  start  0/{len(moves)}") + ("  solved" if step == len(moves) else "")
            assert np.array_equal(frame[64:], labelled(frame[:64], said)[64:]), (name, step)
        assert level.is_solved(states[-1])


def test_render_takes_a_version_by_name_from_anywhere_as_the_readme_writes_it(tmp_path,
                                                                             monkeypatch):
    """`sokoforge render public-S --index 3 --solution --gif s.gif`, from a folder outside the
    repository and with no --datasets: the name is read under the repository's datasets/."""
    import polars as pl

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SOKOFORGE_DATASETS", raising=False)
    result = run("render", "public-S", "--index", "3", "--solution", "--gif", "s.gif")
    assert result.exit_code == 0, result.output
    row = pl.read_parquet(DEMO.parent / "public-S" / "levels.parquet").sort("index").row(
        3, named=True)
    assert len(_frames(tmp_path / "s.gif")) == row["optimal_moves"] + 1


def test_render_solves_a_level_file_to_animate_it_or_plays_given_actions(tmp_path):
    path = tmp_path / "levels.xsb"
    path.write_text(LEVELS)
    solved = run("render", str(path), "--index", "1", "--solution", "--gif",
                 str(tmp_path / "s.gif"))
    assert solved.exit_code == 0, solved.output
    optimum = json.loads(run("solve", "--json", str(path)).output.splitlines()[1])
    assert len(_frames(tmp_path / "s.gif")) == 1 + optimum["optimal_moves"]
    given = run("render", str(path), "--index", "1", "--actions", "rr", "--gif",
                str(tmp_path / "a.gif"))
    assert given.exit_code == 0 and len(_frames(tmp_path / "a.gif")) == 3
    # a step that changes nothing (into a wall) lengthens the frame before it
    still = run("render", str(path), "--index", "1", "--actions", "rrrrr", "--gif",
                str(tmp_path / "w.gif"))
    assert still.exit_code == 0 and len(_frames(tmp_path / "w.gif")) == 4
    for args, message in ((["--solution", "--actions", "r", "--out", str(tmp_path / "x.png")],
                           "exclude each other"),
                          ([], "exactly one of --out PNG and --gif"),
                          (["--gif", str(tmp_path / "x.mp4")], "name a .gif file")):
        out = run("render", str(path), *args)
        assert out.exit_code == 2 and message in out.output, out.output
    unsolvable = tmp_path / "no.xsb"
    unsolvable.write_text(UNSOLVABLE)
    refused = run("render", str(unsolvable), "--solution", "--gif", str(tmp_path / "n.gif"))
    assert refused.exit_code == 1 and "level 1 has no solution to show" in refused.output
