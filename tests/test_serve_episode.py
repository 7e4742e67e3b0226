"""The pure episode core: play, restarts, scores and snapshots without a server or a store."""

from __future__ import annotations

import subprocess
import sys

from engine.rules import lurd_to_actions
from serve.games.episode import GAME_OVER, EpisodeRun, decode_state, encode_state, new_run


def test_the_core_imports_no_server_web_or_store_module():
    code = ("import sys, serve.games.episode; bad = [m for m in ('aiohttp', 'serve.stores', "
            "'serve.play', 'serve.stores.sqlite', 'asyncpg') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_a_run_played_with_the_solutions_scores_every_episode_solved(data):
    v = data["served"]
    run = new_run(v.levels, v.tiers)
    while run.state != GAME_OVER:
        i = run.in_flight[0]
        run.act(i, lurd_to_actions(data["rows"][i]["solution"])[run.episodes[i].steps])
    score = run.score()
    assert score["solved"] == score["episodes"] == len(v.levels)
    assert score["move_efficiency"] == 1.0


def test_a_snapshot_puts_an_episode_back_without_replaying_its_actions(data):
    level = data["served"].levels[1]
    played = EpisodeRun(level)
    played.begin()
    for action in (1, 3, 3, 0):
        played.play(action)
    snapshot = played.snapshot()
    assert decode_state(snapshot) == played.state and encode_state(played.state) == snapshot
    # the action string is not consulted when a snapshot is there: a wrong one changes nothing
    back = EpisodeRun.restored(level, done=False, solved=False, deadlocked=False,
                               steps=4, actions="LLLL", snapshot=snapshot)
    assert back.state == played.state and back.steps == 4
    assert (back.frame() == played.frame()).all()  # the same picture, in the level's look
    replayed = EpisodeRun.restored(level, done=False, solved=False, deadlocked=False,
                                   steps=4, actions="DRRU", snapshot=None)
    assert replayed.state == played.state  # a row written before snapshots: replayed once


def test_a_level_restart_keeps_the_steps_used_and_the_budget_binds(data):
    level = data["served"].levels[0]
    run = new_run([level], [(0, 0)])
    for _ in range(3):
        run.act(0, 1)
    run.restart_level(0)
    episode = run.episodes[0]
    assert episode.state == level.level.start and episode.steps == 3
    while run.state != GAME_OVER:
        outcome = run.act(0, 0)
    assert outcome.episode_done and not outcome.solved
    assert episode.steps == level.max_steps and "".join(episode.actions).startswith("DDD|")
    run.restart_game()
    assert run.episodes[0].steps == 0 and run.in_flight == [0] and run.state != GAME_OVER
