"""The agent panel: its stepper agrees with the rules, it is deterministic, its families differ,
and ``sokoforge panel`` writes the table the audit shows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.agents.panel import PANEL, PANEL_BUDGETS, PANEL_FAMILIES, PanelAgent, episode, play
from engine.agents.planner import _successor, state_key
from engine.levels import State, parse_xsb
from engine.rules import board_array, replay, step_kernel
from pipeline.audit.audit import audit
from pipeline.audit.audit_report import Report
from pipeline.difficulty.panel import PANEL_FILE
from pipeline.spec import load_spec
from pipeline.stages.build import build
from pipeline.workers import Workers
from sokoforge.cli import main

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "datasets" / "demo"
LEVELS = 8  # levels of the small version the tests play (the tiny game)


def _demo_rows() -> pl.DataFrame:
    table = pl.read_parquet(DEMO / "levels.parquet").sort("index")
    return table.filter(pl.int_range(pl.len()).over("tier") < 3)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A datasets folder with ``small``: a version of the tiny game (8 levels)."""
    datasets = tmp_path_factory.mktemp("datasets")
    build("small", datasets=datasets, spec=load_spec("tiny"), seed=3,
          workers=Workers(show_progress=False))
    return datasets


def _key_state(key: int, n_crates: int) -> tuple[int, tuple[int, ...]]:
    return key & 255, tuple(sorted((key >> (8 * (i + 1))) & 255 for i in range(n_crates)))


@settings(max_examples=60, deadline=None)
@given(level_at=st.integers(0, 99), walk=st.lists(st.integers(0, 3), max_size=60))
def test_the_panels_stepper_agrees_with_the_rules_on_random_walks(level_at, walk):
    table = pl.read_parquet(DEMO / "levels.parquet").sort("index")
    level = parse_xsb(table["xsb"][level_at])
    board, passable = board_array(level), np.ascontiguousarray(level.floor.ravel())
    offs = np.array([-level.width, level.width, -1, 1], np.int64)
    player, crates = level.start.player, np.array(sorted(level.start.crates), np.int64)
    key = state_key(level.start)
    for action in walk:
        before = crates.copy()
        player, slot = step_kernel(board, level.width, player, crates, action)
        key, pushed = _successor(key, action, passable, offs, level.n_crates)
        assert _key_state(key, level.n_crates) == (player, tuple(crates))
        assert (pushed >= 0) == (slot >= 0)
        if pushed >= 0:
            assert pushed in crates and pushed not in before


def test_every_family_plays_at_every_budget_and_the_reference_planner_is_in_it():
    assert {a.family for a in PANEL} == set(PANEL_FAMILIES) and len(PANEL_FAMILIES) >= 3
    assert {a.budget for a in PANEL} == set(PANEL_BUDGETS)
    assert PanelAgent("planner", 256) in PANEL
    with pytest.raises(ValueError, match="unknown panel agent"):
        play(parse_xsb(_demo_rows()["xsb"][0]), 30, PanelAgent("oracle", 256))


def test_a_solved_episode_replays_to_a_solved_state_within_its_steps():
    level = parse_xsb("#######\n#@    #\n# $ . #\n#     #\n#######")
    for agent in PANEL:
        solved, steps = play(level, 30, agent)
        assert solved and 3 <= steps <= 30, agent
    unsolvable = parse_xsb("#####\n#$ .#\n#  @#\n#####")
    assert not any(play(unsolvable, 20, a)[0] for a in PANEL)


def test_the_families_search_differently_and_budgets_help():
    rows = pl.read_parquet(DEMO / "levels.parquet").sort("index")
    levels = [(parse_xsb(x), int(m)) for x, m in zip(rows["xsb"], rows["max_steps"],
                                                      strict=True)][::2]
    solved = {a: tuple(play(lv, m, a)[0] for lv, m in levels) for a in PANEL}
    for budget in PANEL_BUDGETS:
        vectors = {solved[PanelAgent(f, budget)] for f in PANEL_FAMILIES}
        assert len(vectors) == len(PANEL_FAMILIES), budget  # no two families agree throughout
    for family in PANEL_FAMILIES:
        counts = [sum(solved[PanelAgent(family, b)]) for b in PANEL_BUDGETS]
        assert counts[-1] > counts[0], family


def test_the_rollout_agent_is_deterministic_per_seed():
    rows = _demo_rows().filter(pl.col("tier") >= 1)
    agent = PanelAgent("rollout", 256)
    runs = {seed: [play(parse_xsb(x), int(m), agent, seed) for x, m in
                   zip(rows["xsb"], rows["max_steps"], strict=True)] for seed in (0, 1)}
    again = [play(parse_xsb(x), int(m), agent, 0) for x, m in
             zip(rows["xsb"], rows["max_steps"], strict=True)]
    assert runs[0] == again
    assert runs[0] != runs[1]  # the seed draws the rollouts' moves


def test_panel_writes_one_row_per_level_and_agent_with_the_same_bytes_each_time(small):
    runner = CliRunner()
    out = runner.invoke(main, ["panel", "small", "--datasets", str(small), "--quiet"])
    assert out.exit_code == 0, out.output
    path = small / "small" / "report" / PANEL_FILE
    first = path.read_bytes()
    frame = pl.read_parquet(path)
    assert frame.columns == ["index", "agent", "family", "budget", "solved", "steps", "pushes"]
    assert (frame.filter(pl.col("solved"))["pushes"] > 0).all()
    assert frame.height == LEVELS * len(PANEL)
    assert frame["agent"][:len(PANEL)].to_list() == [a.name for a in PANEL]
    assert set(frame["index"]) == set(range(LEVELS))
    assert (frame.filter(~pl.col("solved"))["steps"] >= 0).all()
    for agent in PANEL:
        line = next(x for x in out.output.splitlines() if x.split()[0] == agent.name)
        solved = int(frame.filter(pl.col("agent") == agent.name)["solved"].sum())
        assert line.split()[1] == f"{solved}/{LEVELS}"
    again = runner.invoke(main, ["panel", "small", "--datasets", str(small), "--quiet",
                                 "--jobs", "2"])
    assert again.exit_code == 0, again.output
    assert path.read_bytes() == first


def test_panel_of_a_missing_version_is_one_line_and_exit_2(small):
    out = CliRunner().invoke(main, ["panel", "nope", "--datasets", str(small)])
    assert out.exit_code == 2 and out.output.strip().splitlines()[-1].startswith("Error: ")


def test_the_audit_shows_the_panel_per_tier_and_keeps_its_file(small):
    CliRunner().invoke(main, ["panel", "small", "--datasets", str(small), "--quiet"])
    stored = (small / "small" / "report" / PANEL_FILE).read_bytes()
    report = Report(audit(small, "small"))
    assert "panel.png" in report.images
    table = report.panel
    assert table["agent"].to_list() == [a.name for a in PANEL]
    assert (table.select(pl.col("^tier .*$")).sum_horizontal() == table["solved"]).all()
    markdown = report.markdown()
    assert "## Agent panel" in markdown and "planner-256" in markdown
    report.write(small / "small" / "report")
    assert (small / "small" / "report" / PANEL_FILE).read_bytes() == stored
    assert "Agent panel" in (small / "small" / "report" / "report.html").read_text()


def test_a_state_key_round_trips_through_the_panels_packing():
    state = State(9, (10, 17, 12))
    assert _key_state(state_key(state), 3) == (9, (10, 12, 17))


def test_an_episodes_actions_replay_through_the_rules_to_its_outcome_from_any_state():
    rows = _demo_rows().filter(pl.col("tier") >= 1)
    for xsb, max_steps in zip(rows["xsb"], rows["max_steps"], strict=True):
        level = parse_xsb(xsb)
        for agent in PANEL:
            played = episode(level, int(max_steps), agent, seed=1)
            assert (played.solved, played.steps) == play(level, int(max_steps), agent, 1)
            states = replay(level, "".join("udlr"[a] for a in played.actions))
            assert len(played.actions) == played.steps
            assert level.is_solved(states[-1]) == played.solved, agent
    level = parse_xsb("#######\n#@    #\n# $ . #\n#     #\n#######")
    moved = State(level.start.player + 1, level.start.crates)
    solved = set()
    for agent in PANEL:
        played = episode(level, 30, agent, state=moved)
        last = replay(level, "".join("udlr"[a] for a in played.actions), moved)[-1]
        assert level.is_solved(last) == played.solved, agent
        solved |= {agent.family} if played.solved else set()
    assert "planner" in solved and "breadth" in solved
