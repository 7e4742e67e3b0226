"""The red team: its decoder reads every board off the frames exactly, its disguises push
nothing, and through a real server the review flags the replayed scorecard while it passes
an honest agent within the rule, and a decoder whose levels the reference solves too
(``sokoforge review --json``)."""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from red_team import (
    ChosenDecoder,
    Decoder,
    Entrant,
    PaddedDecoder,
    PanelPlayer,
    decode,
    detour,
    optimal,
    play_team,
    turn,
    with_detours,
)
from serve_support import LEVELS, server

from engine.agents.panel import PanelAgent, episode
from engine.levels import parse_xsb, to_xsb
from engine.pictures.look import ARC, Look, draw_theme, painter
from engine.rules import actions_to_lurd, board_array, replay, step_on
from pipeline.difficulty.panel import PANEL_FILE, write_panel
from pipeline.spec import spec_from_dict
from pipeline.stages.build import build
from pipeline.workers import Workers
from serve.client import RandomAgent
from serve.games.dataset import load_version
from sokoforge.cli import main

DEMO = Path(__file__).resolve().parent.parent / "datasets" / "demo"
VERSION = "red"
SPECS = Path(__file__).resolve().parent.parent / "pipeline" / "specs"
LEVELS_PER_TIER = 8


def _demo() -> pl.DataFrame:
    return pl.read_parquet(DEMO / "levels.parquet").sort("index")


def _walked(level, rng: np.random.Generator, steps: int):
    board, state = board_array(level), level.start
    for a in rng.integers(4, size=steps):
        state = step_on(board, level.width, state, int(a))[0]
    return state


def test_the_decoder_reads_every_board_and_state_of_the_shared_look_exactly():
    rng = np.random.default_rng(7)
    texts = _demo()["xsb"].to_list() + [t.strip("\n") for t in LEVELS]  # 8x8 and smaller
    for text in texts:
        level = parse_xsb(text)
        drawn = painter(level)
        for state in (level.start, _walked(level, rng, 30)):
            read = decode(drawn.frame(state), drawn.goal())
            assert to_xsb(read) == to_xsb(level.with_start(state)), text


def test_the_decoder_refuses_a_frame_it_cannot_draw_again():
    level = parse_xsb(_demo()["xsb"][40])
    for look in (ARC, Look("themed", draw_theme(np.random.default_rng(1), noise=False))):
        drawn = painter(level, look)
        rgb = (drawn.frame() if look is not ARC
               else drawn.colours.take(drawn.elements(), axis=0))
        with pytest.raises(ValueError, match="shared look"):
            decode(rgb, drawn.goal())


def _pushes(level, actions: list[int]) -> int:
    return sum(ch.isupper() for ch in actions_to_lurd(level, level.start, actions))


def test_detours_push_nothing_and_the_disguised_solution_still_solves_within_its_budget():
    rng = np.random.default_rng(3)
    for text in _demo()["xsb"].to_list()[::7]:
        level = parse_xsb(text)
        way = detour(level, level.start, 6, rng)
        assert replay(level, actions_to_lurd(level, level.start, way))[-1] == level.start
        assert _pushes(level, way) == 0
        solution = optimal(level)
        disguised = with_detours(level, solution, rng, most=len(solution))
        end = replay(level, actions_to_lurd(level, level.start, disguised))[-1]
        assert level.is_solved(end) and len(solution) < len(disguised) <= 2 * len(solution)
        assert _pushes(level, disguised) == _pushes(level, solution)


def test_a_panel_player_on_the_decoded_frames_plays_the_panels_episode():
    rows = _demo().filter(pl.col("tier") >= 1)[::5]
    for text, max_steps in zip(rows["xsb"], rows["max_steps"], strict=True):
        level = parse_xsb(text)
        drawn, board = painter(level), board_array(level)
        for agent in (PanelAgent("planner", 64), PanelAgent("greedy", 256),
                      PanelAgent("breadth", 256), PanelAgent("rollout", 1024)):
            player, state, history = PanelPlayer(agent, 0), level.start, []
            player.reset()
            while len(history) < max_steps and not level.is_solved(state):
                history.append(player.act(drawn.frame(state), drawn.goal(), history))
                state = step_on(board, level.width, state, history[-1])[0]
            panel = episode(level, int(max_steps), agent)
            assert history[:panel.steps] == list(panel.actions), agent
            assert level.is_solved(state) or not panel.solved  # solved as the panel solved it


def _hard_game():
    """The standard game's two hardest tiers, a few levels each: where the panel within the
    rule stops solving, or stops pushing optimally, so a few levels tell a solver apart."""
    data = tomllib.loads((SPECS / "standard.toml").read_text())
    data["name"] = "hard"
    data["tiers"] = [{**tier, "levels": LEVELS_PER_TIER} for tier in data["tiers"][2:]]
    return spec_from_dict(data)


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    """A small version of the standard game's hardest tiers with its panel, served on a fresh
    store, and a small red team played through it: the store, and each judged scorecard."""
    datasets = tmp_path_factory.mktemp("datasets")
    quiet = Workers(show_progress=False)
    build(VERSION, datasets=datasets, spec=_hard_game(), seed=3, workers=quiet)
    write_panel(datasets, VERSION, quiet)
    db = tmp_path_factory.mktemp("db") / "store.sqlite"
    honest = PanelAgent("planner", 256)
    team = [Entrant("decoder", "cheater", (lambda: Decoder(1),)),
            Entrant("probe then replay", "cheater", (lambda: RandomAgent(2),
                                                      lambda: Decoder(3))),
            Entrant("planner-256", "honest", (lambda: PanelPlayer(honest, 0),)),
            Entrant("planner-256 turned", "honest", (lambda: PanelPlayer(honest, 0, 3),))]
    with server(load_version(datasets, VERSION), db, keys_per_address_per_day=1000) as running:
        cards = asyncio.run(play_team(running.base, team, prefix="red "))
    return {"datasets": datasets, "db": db,
            "cards": {c.entrant.row: c for c in cards if c.judged}}


@pytest.mark.slow
def test_the_honest_player_over_http_solves_what_the_panel_solved(reviewed):
    panel = pl.read_parquet(reviewed["datasets"] / VERSION / "report" / PANEL_FILE)
    expected = panel.filter(pl.col("agent") == "planner-256")["solved"].sum()
    assert reviewed["cards"]["planner-256"].score["solved"] == expected
    assert reviewed["cards"]["decoder"].score["move_efficiency"] == 1.0


@pytest.mark.slow
def test_the_review_flags_the_replay_and_passes_honest_play_and_what_the_reference_reaches(
        reviewed):
    out = CliRunner().invoke(main, ["review", VERSION, "--db", str(reviewed["db"]),
                                    "--datasets", str(reviewed["datasets"]), "--json"])
    assert out.exit_code == 0, out.output
    lines = {d["scorecard_id"]: d for d in map(json.loads, out.stdout.splitlines())}
    verdicts = {row: lines[card.scorecard_id]["verdict"]
                for row, card in reviewed["cards"].items()}
    # the reference's plays solve all 16 of these levels between them (its best 14), most
    # of them in optimal pushes: nothing in a decoder's play of them tells it from them
    assert verdicts == {"decoder": "consistent", "probe then replay": "needs review",
                        "planner-256": "consistent", "planner-256 turned": "consistent"}, {
        row: lines[card.scorecard_id]["evidence"] for row, card in reviewed["cards"].items()}
    flags = {row: {g["name"] for g in lines[card.scorecard_id]["signals"] if g["flags"]}
             for row, card in reviewed["cards"].items()}
    assert "replay" in flags["probe then replay"]
    decoder = lines[reviewed["cards"]["decoder"].scorecard_id]
    assert decoder["solved"] == decoder["bound"] == 16 and decoder["frontier_solved"] >= 12
    assert decoder["reason"].startswith("consistent: 16 solved, within the bound of 16")


def test_a_turned_board_is_the_same_game_and_its_moves_turn_back():
    for text in _demo()["xsb"].to_list()[::9] + [LEVELS[4].strip("\n")]:
        level = parse_xsb(text)
        assert turn(level, 0).level == level and turn(level, 0).back == (0, 1, 2, 3)
        for symmetry in range(1, 8):
            turned = turn(level, symmetry)
            solution = optimal(turned.level)
            assert len(solution) == len(optimal(level))
            back = [turned.back[a] for a in solution]
            end = replay(level, actions_to_lurd(level, level.start, back))[-1]
            assert level.is_solved(end), (text, symmetry)


def test_the_padded_decoder_solves_every_level_nearly_always_with_more_pushes_than_needed():
    decoder, padded = PaddedDecoder(0), []
    rows = _demo()[::6]
    for text, pushes, budget in zip(rows["xsb"], rows["optimal_pushes"], rows["max_steps"],
                                    strict=True):
        level = parse_xsb(text)
        plan = decoder.plan(level, first=True)
        lurd = actions_to_lurd(level, level.start, plan)
        assert level.is_solved(replay(level, lurd)[-1]) and len(plan) <= budget
        padded.append(sum(ch.isupper() for ch in lurd) > pushes)
    assert sum(padded) >= 0.9 * len(padded)  # a level whose every opening is optimal is kept


def test_a_decoder_that_chose_its_levels_solves_them_off_their_optimal_pushes_and_no_other():
    from engine.levels import canonical_id

    rows = _demo()[:40:10]  # easy levels: the padded opening's searches stay small
    levels = [parse_xsb(t) for t in rows["xsb"]]
    chosen = frozenset(canonical_id(level) for level in levels[::2])
    for k, (level, pushes, budget) in enumerate(zip(levels, rows["optimal_pushes"],
                                                    rows["max_steps"], strict=True)):
        cheater = ChosenDecoder(k, chosen)
        cheater.reset()
        drawn, board, state, history = painter(level), board_array(level), level.start, []
        while len(history) < budget and not level.is_solved(state):
            history.append(cheater.act(drawn.frame(state), drawn.goal(), history))
            state = step_on(board, level.width, state, history[-1])[0]
        made = _pushes(level, history)
        if k % 2 == 0:
            assert level.is_solved(state) and made >= pushes, k
        else:
            assert not level.is_solved(state) and made == 0, k
