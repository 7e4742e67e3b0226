"""``sokoforge import``: level collections as people write them become versions that are
served, audited, verified and listed like built ones."""

from __future__ import annotations

import base64
import json
import logging

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from serve_support import Api, server

from engine.level_files import read_collection
from engine.levels import LevelError, canonical_id, parse_xsb, to_xsb
from engine.pictures.look import SHARED, painter
from engine.rules import lurd_to_actions, step
from engine.search.solver import solve
from serve.games.dataset import ForwardSolvability, load_version
from sokoforge.cli import main

# Boards of four sizes (one irregular, one indented, one 16x16 whose solvable-state search does
# not fit), with the metadata collections carry: a file header, headings without ';', Title:
# and Author: lines after a board, a ';' title and a Comment: block holding a wall-like line.
MIXED = """Title: Mixed sizes, made for the import tests
Author: sokoforge tests

Level 1
  ####
###  #
# $ .#
#@   #
######

Level 2
########
#      #
# .$$. #
#  @   #
#      #
#      #
#      #
########
Title: Two in a row
Author: sokoforge tests

; three
Comment:
this block is prose, even where a line looks like a wall
#####
Comment-End
    #####
    #   ####
    # $    #
  ###.## # #
  #   @    #
  # ##     #
  #      ###
  ########

Level 4
################
#              #
#              #
#              #
#              #
#     .  .     #
#     $  $     #
#              #
#      @       #
#     $        #
#     .        #
#              #
#              #
#              #
#              #
################
"""
CORNERED = """Level A
#####
#$  #
#@ .#
#####
"""
# Seven crates: beyond the engine's six, so too large to search.
CROWDED = """Level B
###########
#@$$$$$$$ #
#.......  #
###########
"""


# Five crates in an open 16x16 room: well formed, but its state space is beyond the solver.
HUGE = "Level C\n" + "\n".join(["#" * 16] + ["#" + " " * 14 + "#"] * 3
                                + ["#  $ $ $ $ $   #", "#      @       #", "#  . . . . .   #"]
                                + ["#" + " " * 14 + "#"] * 6 + ["#" * 16]) + "\n"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    src = tmp_path_factory.mktemp("src") / "mixed.sok"
    src.write_text(MIXED)
    result = run("import", "mix", str(src), "--datasets", str(root), "--quiet")
    assert result.exit_code == 0, result.output
    return {"root": root, "src": src, "output": result.output}


def test_collection_reader_keeps_titles_skips_metadata_and_comment_blocks():
    levels = read_collection(MIXED, "mixed.sok")
    assert [fl.title for fl in levels] == ["Level 1", "Two in a row", "three", "Level 4"]
    assert [fl.line for fl in levels] == [5, 12, 28, 38]
    assert [(fl.level.height, fl.level.width) for fl in levels] == [(5, 6), (8, 8), (8, 12),
                                                                   (16, 16)]
    assert [fl.author for fl in levels] == ["sokoforge tests"] * 4
    # the third board's shared indentation is kept, as the shared environment draws it (a
    # column of floor), and is no part of the level's identity
    assert to_xsb(levels[2].level).split("\n")[0] == "    #####"
    unindented = parse_xsb("\n".join(r[2:] for r in levels[2].text.split("\n")))
    assert canonical_id(levels[2].level) == canonical_id(unindented)
    assert not levels[0].level.floor[0, 0] and not levels[0].level.walls[0, 0]


def test_reading_errors_name_the_file_and_the_line():
    with pytest.raises(LevelError, match=r"mixed\.sok line 7, column 4: unknown character 'x'"):
        read_collection(MIXED.replace("# $ .#", "# $x.#", 1), "mixed.sok")
    with pytest.raises(LevelError, match=r"mixed\.sok level 2 'Two in a row' \(line 12\): "
                                         r"no player"):
        read_collection(MIXED.replace("#  @   #", "#      #", 1), "mixed.sok")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="# $.*@+-_\n;:\rTitleComment-End\t", max_size=120))
def test_any_collection_text_either_reads_or_is_refused_in_words(tail):
    try:
        levels = read_collection(MIXED.split("Level 2")[0] + tail, "any.xsb")
    except LevelError as e:
        assert str(e).startswith("any.xsb")
        return
    assert levels[0].title == "Level 1"
    for fl in levels:
        assert (fl.level is None) == (fl.too_large is not None)


def test_budgets_follow_the_rule_of_the_spec_named_on_the_command_line(imported, tmp_path):
    # the tiny spec's rule is max(10, 3 x optimum): level 1 (3 moves) gets the floor
    result = run("import", "tiny", str(imported["src"]), "--spec", "tiny",
                 "--datasets", str(tmp_path), "--quiet")
    assert result.exit_code == 0, result.output
    table = pl.read_parquet(tmp_path / "tiny" / "levels.parquet")
    assert table["max_steps"].to_list() == [max(10, 3 * m) for m in table["optimal_moves"]]
    assert table["max_steps"][0] == 10


def test_a_game_name_must_fit_in_a_url(imported, tmp_path):
    result = run("import", "g", str(imported["src"]), "--game", "a b/c",
                 "--datasets", str(tmp_path), "--quiet")
    assert result.exit_code == 2 and "game name 'a b/c' is not allowed" in result.output


def test_imported_version_keeps_file_order_optima_budgets_and_sources(imported):
    root = imported["root"]
    table = pl.read_parquet(root / "mix" / "levels.parquet")
    assert table["title"].to_list() == ["Level 1", "Two in a row", "three", "Level 4"]
    assert table["n_crates"].to_list() == [1, 2, 1, 3]
    assert table["tier"].to_list() == [0, 1, 0, 2]  # crates - 1, in file order
    for row in table.iter_rows(named=True):
        result = solve(read_collection(row["xsb"])[0].level)
        assert row["optimal_moves"] == result.moves
        assert row["max_steps"] == 3 * row["optimal_moves"]  # the standard spec's rule
    # the 16x16 board's solvable set does not fit: its features are imputed, and said so
    assert table["imputed_features"].to_list()[:3] == ["", "", ""]
    assert "reachable_states" in table["imputed_features"][3]
    assert table["difficulty"].is_finite().all()
    manifest = json.loads((root / "mix" / "manifest.json").read_text())
    assert manifest["seed_commitment"] is None and manifest["seed_source"] == "imported"
    assert manifest["visibility"] == "public" and manifest["game"] == "mixed"
    assert not (root / "mix" / ".gitignore").exists()  # a public version may be committed
    assert table["author"].to_list() == ["sokoforge tests"] * 4
    [source] = manifest["sources"]
    assert source["name"] == "mixed.sok" and source["levels"] == 4
    assert (root / "mix" / "sources" / "mixed.sok").read_text() == MIXED
    import hashlib
    assert source["sha256"] == hashlib.sha256(MIXED.encode()).hexdigest()
    assert not list((root / ".build").glob("mix.import-*")), "the temporary folder is gone"


def _image(b64: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(b64), dtype=np.uint8).reshape(64, 64, 3)


def test_served_frames_of_every_board_size_equal_the_engines_drawing(imported, tmp_path):
    served = load_version(imported["root"], "mix")
    assert served.spec()["boards"] == [[5, 6], [8, 8], [8, 12], [16, 16]]
    # the protocol's tiers are the runs of one crate count, in file order
    assert [t["crates"] for t in served.spec()["tiers"]] == [1, 2, 1, 3]
    assert isinstance(served.levels[3].solvable, ForwardSolvability)
    with server(served, tmp_path / "store.sqlite") as srv:
        client = Api(srv.base)
        client.key = client.ok("POST", "/api/keys", {"name": "importer"}, status=201)["api_key"]
        sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
        frame = client.ok("POST", f"/api/scorecards/{sid}/games/mixed/start")
        frames = 0
        for n, lv in enumerate(served.levels):
            level, state = lv.level, lv.level.start
            assert lv.look == SHARED  # an import is drawn in its spec's look, shared by default
            drawn = painter(level, lv.look)
            assert np.array_equal(_image(frame["observation"]["obs"]), drawn.frame(state, 0))
            assert np.array_equal(_image(frame["observation"]["goal"]), drawn.goal())
            # a fixed walk first (moves, bumps and pushes), then an optimal finish from there
            walk = [3, 0, 2, 1, 3]
            for a in walk:
                state = step(level, state, a)[0]
            if solve(level, state).status != "solved":
                walk, state = [], level.start
            actions = walk + lurd_to_actions(solve(level, state).solution)
            state = level.start
            for i, a in enumerate(actions):
                frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act",
                                  {"action": a})
                frames += 1
                state = step(level, state, a)[0]
                if i < len(actions) - 1:
                    assert not frame["last"]["episode_done"]
                    assert np.array_equal(_image(frame["observation"]["obs"]),
                                          drawn.frame(state, i + 1)), (n, i)
            assert frame["last"]["solved"] and frame["last"]["episode_done"]
        assert frame["state"] == "GAME_OVER" and frame["result"]["solved"] == 4
        assert frames > 40


def test_deadlocks_on_a_board_too_large_for_a_solvable_set_are_judged_with_proof(imported):
    big = load_version(imported["root"], "mix").levels[3]
    level = big.level
    assert not big.is_dead(level.start)
    # the crate left of the player pushed up against the wall rows: a dead square
    cornered = level.start._replace(
        crates=tuple(sorted(c if c != 9 * 16 + 6 else 1 * 16 + 6 for c in level.start.crates)))
    assert big.is_dead(cornered)


@pytest.mark.slow
def test_audit_of_an_import_passes_and_says_what_it_skipped(imported):
    root = imported["root"]
    result = run("audit", "mix", "--datasets", str(root))
    assert result.exit_code == 0, result.output
    assert "SKIP  optima inside their slot bands: an imported collection has no slot" \
        in result.output
    assert "PASS  re-solved optimum equals stored optimum" in result.output
    assert "PASS  stored crate counts match the boards, tier by crate count" in result.output
    checks = json.loads((root / "mix" / "report" / "checks.json").read_text())
    assert checks["passed"] is True
    assert sum(c["skipped"] is not None for c in checks["checks"]) == 3


def test_audit_plots_of_an_import_show_file_order_with_whole_ticks_and_no_bands(imported,
                                                                             monkeypatch):
    """No empty "slot band" legend, integer play positions and counts, and a tier's line
    never joining levels another tier's level stands between."""
    import pipeline.audit.audit_plots as plots
    from pipeline.audit.audit import load_version as audit_facts

    facts = audit_facts(imported["root"], "mix")
    assert facts.table["tier"].to_list() == [0, 1, 0, 2]  # tier 0 is not consecutive
    figures = []
    monkeypatch.setattr(plots, "_png", lambda fig: figures.append(fig) or b"")
    plots.plot_optima(facts)
    plots.plot_difficulty(facts)
    plots.plot_histograms(facts)
    optima, difficulty, histograms = (f.axes for f in figures)
    labels = [t.get_text() for t in optima[0].get_legend().get_texts()]
    assert labels == ["tier 0", "tier 1", "tier 2"] and not optima[0].patches
    assert difficulty[0].get_title() == "mix: difficulty in file order"
    assert optima[0].get_xlabel().startswith("file order")
    for ax in (*optima, *difficulty, *histograms[:3]):
        ticks = ax.get_xticks()
        assert np.allclose(ticks, np.round(ticks)), (ax.get_title(), ticks)
    for ax in histograms:
        ticks = ax.get_yticks()
        assert np.allclose(ticks, np.round(ticks)), ticks
    for line in difficulty[0].get_lines():
        x = line.get_xdata()
        if line.get_marker() == "o":
            assert len(x) < 2 or (np.diff(x) == 1).all(), x


@pytest.mark.slow
def test_audit_re_solves_a_level_with_the_bound_it_was_imported_with(tmp_path):
    # three crates across a 12x12 room: over five million states before the optimum, more
    # than the solver's default bound and within the solve stage's
    rows = ["#" * 12] + ["#" + " " * 10 + "#"] * 10 + ["#" * 12]
    grid = [list(r) for r in rows]
    for r, c, ch in [(1, 1, "@"), (2, 3, "$"), (3, 6, "$"), (4, 8, "$"),
                     (10, 2, "."), (10, 5, "."), (10, 9, ".")]:
        grid[r][c] = ch
    src = tmp_path / "far.xsb"
    src.write_text("\n".join("".join(r) for r in grid) + "\n")
    assert run("import", "far", str(src), "--datasets", str(tmp_path), "--quiet").exit_code == 0
    assert pl.read_parquet(tmp_path / "far" / "levels.parquet")["optimal_moves"][0] == 49
    from pipeline.audit.audit import audit
    result = audit(tmp_path, "far")
    assert result.passed, [c.describe() for c in result.failed]


def test_versions_lists_an_import_as_imported(imported):
    result = run("versions", "--datasets", str(imported["root"]))
    assert result.exit_code == 0, result.output
    [row] = [line for line in result.output.splitlines() if line.startswith("mix ")]
    assert row.split()[1:3] == ["mixed", "4"] and " imported " in row


def test_verify_on_an_import_checks_its_sources_instead_of_a_seed(imported):
    root = imported["root"]
    result = run("verify", "mix", "--datasets", str(root))
    assert result.exit_code == 0, result.output
    assert "mix was imported from 1 file(s): it has no seed" in result.output
    assert "source mixed.sok sha256: match" in result.output
    assert "re-imported levels.parquet sha256" in result.output
    refused = run("verify", "mix", "--seed", "1", "--datasets", str(root))
    assert refused.exit_code == 2 and "no seed" in refused.output
    from pipeline.errors import PipelineError
    from pipeline.stages.verify import verify

    with pytest.raises(PipelineError, match="mix was imported from level files: it has no seed"):
        verify("mix", 1, datasets=root)


def test_verify_on_an_import_fails_when_a_kept_source_was_edited(imported, tmp_path):
    import shutil
    root = tmp_path / "copy"
    shutil.copytree(imported["root"] / "mix", root / "mix")
    kept = root / "mix" / "sources" / "mixed.sok"
    kept.write_text(kept.read_text().replace("Level 1", "Level one"))
    result = run("verify", "mix", "--datasets", str(root))
    assert result.exit_code == 1
    assert "source mixed.sok sha256: MISMATCH" in result.output


def test_import_refuses_unsolvable_and_too_large_levels_naming_each(tmp_path):
    src = tmp_path / "bad.xsb"
    src.write_text(MIXED.split("; three")[0] + CORNERED + "\n" + CROWDED + "\n" + HUGE)
    (tmp_path / "ds").mkdir()
    result = run("import", "bad", str(src), "--datasets", str(tmp_path / "ds"), "--quiet")
    assert result.exit_code == 1
    assert "3 level(s) cannot be imported" in result.output
    assert "bad.xsb level 3 'Level A' (line 24): unsolvable" in result.output
    assert ("bad.xsb level 4 'Level B' (line 30): too large to search (7 crates"
            in result.output)
    assert ("bad.xsb level 5 'Level C' (line 36): too large to search (its states exceed"
            in result.output)
    assert "Traceback" not in result.output
    assert not (tmp_path / "ds" / "bad").exists()
    assert not list((tmp_path / "ds" / ".build").glob("bad.import-*"))


@pytest.mark.parametrize("skip", [[], ["--skip-unsolvable"]])
def test_import_refuses_a_board_solved_at_its_start_naming_its_line(tmp_path, skip):
    src = tmp_path / "solved.xsb"
    src.write_text(CORNERED.replace("Level A", "Level 1").replace("#$  #", "#   #")
                   .replace("#@ .#", "#@$.#") + "\nDone\n#####\n#@**#\n#####\n")
    (tmp_path / "ds").mkdir()
    result = run("import", "done", str(src), *skip, "--datasets", str(tmp_path / "ds"),
                 "--quiet")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "solved.xsb level 2 'Done' (line 8): it is solved at its start" in lines[0]
    assert not (tmp_path / "ds" / "done").exists()


def test_skip_unsolvable_drops_them_with_a_warning(tmp_path, caplog):
    src = tmp_path / "bad.xsb"
    src.write_text(MIXED.split("; three")[0] + CORNERED + "\n" + CROWDED)
    (tmp_path / "ds").mkdir()
    with caplog.at_level(logging.WARNING, logger="pipeline.stages.importing"):
        result = run("import", "kept", str(src), "--skip-unsolvable", "--hidden",
                     "--datasets", str(tmp_path / "ds"), "--quiet")
    assert result.exit_code == 0, result.output
    assert "2 levels imported, 2 skipped" in result.output
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("Level A" in m and "unsolvable" in m for m in warned)
    assert any("Level B" in m and "too large" in m for m in warned)
    table = pl.read_parquet(tmp_path / "ds" / "kept" / "levels.parquet")
    assert table["title"].to_list() == ["Level 1", "Two in a row"]
    manifest = json.loads((tmp_path / "ds" / "kept" / "manifest.json").read_text())
    assert manifest["visibility"] == "hidden" and len(manifest["import"]["skipped"]) == 2
    assert (tmp_path / "ds" / "kept" / ".gitignore").read_text().endswith("\n*\n")
    assert manifest["sources"][0]["imported"] == 2


def test_import_refuses_an_existing_version_name(imported):
    root = imported["root"]
    before = (root / "mix" / "levels.parquet").read_bytes()
    result = run("import", "mix", str(imported["src"]), "--datasets", str(root), "--quiet")
    assert result.exit_code == 1 and "already exists" in result.output
    assert (root / "mix" / "levels.parquet").read_bytes() == before


def test_import_refuses_a_level_another_version_holds(imported, tmp_path):
    src = tmp_path / "again.xsb"
    # the first board of the collection, mirrored: the same level under a reflection
    rows = MIXED.split("\n")[4:9]
    src.write_text("\n".join(r.ljust(6)[::-1].rstrip() for r in rows) + "\n")
    result = run("import", "again", str(src), "--datasets", str(imported["root"]), "--quiet")
    assert result.exit_code == 1
    assert "again.xsb level 1 (line 1) is level 1 of version mix (index 0)" in result.output
    assert not (imported["root"] / "again").exists()


def test_same_files_give_the_same_levels_parquet_bytes(imported, tmp_path):
    result = run("import", "mix", str(imported["src"]), "--datasets", str(tmp_path),
                 "--quiet", "--jobs", "2")
    assert result.exit_code == 0, result.output
    assert ((tmp_path / "mix" / "levels.parquet").read_bytes()
            == (imported["root"] / "mix" / "levels.parquet").read_bytes())
