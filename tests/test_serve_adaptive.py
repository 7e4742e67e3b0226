"""The adaptive game served: each session's levels chosen block by block at the agent's ability,
recorded by the store with the step that ended the block before, padded on an early close, and
played by upstream's client (under ``standard``), the reference client and the ARC face."""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import requests
from arc_agi import Arcade, OperationMode
from arcengine import GameAction, GameState
from click.testing import CliRunner
from serve_support import Api, SolutionAgent, server, solutions_by_goal

from engine.rules import lurd_to_actions
from pipeline.scores.adaptive import (
    MAX_EXPOSURE,
    equated_success,
    over_exposed,
    pad_unplayed,
    posterior,
)
from pipeline.scores.items import model_sd
from pipeline.spec import spec_from_dict
from pipeline.stages.build import build
from pipeline.workers import Workers
from serve.arc import arc_wire as w
from serve.arena.errors import Conflict
from serve.client import play
from serve.games.dataset import DatasetError, load_version
from serve.games.games import Registry
from serve.limits import Limits
from serve.play import Arena
from serve.stores import open_store
from sokoforge.cli import main
from tests.spec_support import two_tier_tiny

POOL, EPISODES, BLOCK = 10, 5, 2  # blocks of episodes 0-1, 2-3 and 4


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """A ten-level pool (two tiers), five episodes a session chosen two at a time, built and
    calibrated as an operator does (``sokoforge panel``), and loaded as a server loads it."""
    datasets = tmp_path_factory.mktemp("datasets")
    spec = spec_from_dict({**two_tier_tiny().to_dict(), "name": "adaptive",
                           "adaptive": {"pool": POOL, "episodes": EPISODES, "parallel": BLOCK}})
    build("pool", datasets=datasets, spec=spec, seed=5, workers=Workers(show_progress=False))
    out = CliRunner().invoke(main, ["panel", "pool", "--datasets", str(datasets), "--quiet"])
    assert out.exit_code == 0, out.output
    rows = pl.read_parquet(datasets / "pool" / "levels.parquet").sort("index").to_dicts()
    return SimpleNamespace(datasets=datasets, version=load_version(datasets, "pool"), rows=rows,
                           solutions=[lurd_to_actions(r["solution"]) for r in rows])


def levels_of(session) -> list[int]:
    return [e.served.index for e in session.episodes]


def solve(run, episode: int, solutions) -> None:
    """Play ``episode`` (in flight) of ``run`` to its solution."""
    for action in solutions[run.episodes[episode].served.index]:
        run.act(episode, action)


def test_a_block_is_chosen_only_once_every_episode_before_it_ended_and_never_a_level_shown(pool):
    entry = Registry([pool.version]).first
    run = entry.new_run(parallel=1)
    assert (run.length, len(run.episodes), run.tiers) == (EPISODES, BLOCK, ((0, 1), (2, 3), (4, 4)))
    solve(run, 0, pool.solutions)
    assert len(run.episodes) == BLOCK and run.in_flight == [1]  # its block is not over
    first = levels_of(run)
    run.act(1, 0)  # a wasted step: still in play
    while not run.episodes[1].done:
        run.act(1, 4)  # waiting out the budget: a failure
    assert len(run.episodes) == 2 * BLOCK and levels_of(run)[:BLOCK] == first
    assert run.in_flight == [2] and [e.index for e in run.episodes] == [0, 1, 2, 3]
    for episode in (2, 3):
        solve(run, episode, pool.solutions)
    solve(run, 4, pool.solutions)
    assert run.state == "GAME_OVER" and len(set(levels_of(run))) == EPISODES
    score = run.score()
    assert score["episodes"] == EPISODES and score["solved"] == 4
    for field, value in (("ability", "theta"), ("equated_success", "value")):
        shape = score[field]
        assert set(shape) == {value, "low", "high"}
        assert shape["low"] <= shape[value] <= shape["high"]
    assert 0 <= score["equated_success"]["low"] <= score["equated_success"]["high"] <= 1
    # its interval holds the model's error on agents outside the panel, as panel measured it
    items = pool.version.pool
    assert items.model_sd == model_sd(pool.datasets / "pool")
    shown = np.array(levels_of(run))
    solved = np.array([e.solved for e in run.episodes])
    a, b = items.discrimination, items.difficulty
    weights = posterior(a, b, shown, solved)
    held = equated_success(a, b, items.ramp, weights, model_sd=items.model_sd)
    assert score["equated_success"] == {"value": held.value, "low": held.low, "high": held.high}
    if items.model_sd > 0:
        bare = equated_success(a, b, items.ramp, weights)
        assert held.high - held.low > bare.high - bare.low


def test_each_level_of_a_one_level_block_is_chosen_after_the_episode_before_ended(pool):
    one = replace(pool.version, pool=replace(pool.version.pool, block=1))
    run = Registry([one]).first.new_run(parallel=4)  # more in flight asked than a block holds
    for episode in range(EPISODES):
        assert len(run.episodes) == episode + 1 and run.in_flight == [episode]
        solve(run, episode, pool.solutions)
    assert run.state == "GAME_OVER" and len(set(levels_of(run))) == EPISODES


def test_two_sessions_of_one_agent_see_different_sequences(pool):
    entry = Registry([pool.version]).first
    sequences = set()
    for _ in range(8):
        run = entry.new_run()
        for episode in range(EPISODES):
            solve(run, episode, pool.solutions)
        sequences.add(tuple(levels_of(run)))
    assert len(sequences) > 1


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    return request.getfixturevalue("postgres").database()


def on_workers(pool, location: str, body, workers: int = 2):
    """Run ``body(*arenas)``: ``workers`` arenas on one store stand for a server's workers."""
    async def main():
        stores = [open_store(location) for _ in range(workers)]
        for s in stores:
            await s.start()
        try:
            return await body(*(Arena(pool.version, s, Limits()) for s in stores))
        finally:
            for s in stores:
                await s.close()
    return asyncio.run(main())


async def started(arena: Arena):
    key = await arena.identify(await arena.create_key("adaptive agent", "127.0.0.1"))
    card, _ = await arena.open_scorecard(key)
    session = await arena.start(key, card.id, "adaptive", 1, "127.0.0.1")
    return key, card, session


async def play_out(arena: Arena, key, session_id: str, episode: int, solutions) -> list[int]:
    """Solve ``episode`` on ``arena``; the levels of the session's episodes once it ended."""
    session = await arena.current(key, session_id)
    levels = levels_of(session)
    for action in solutions[session.episodes[episode].served.index]:
        levels = await arena.act(key, session_id, action, episode,
                                 lambda s, _: levels_of(s))
    return levels


def test_the_recorded_sequence_is_what_a_reload_and_another_worker_serve(pool, location):
    async def body(a: Arena, b: Arena):
        key, card, session = await started(a)
        sid = session.id
        (_, rows), = await a.store.sessions(card.id)
        assert [r.level for r in rows] == levels_of(session) + [None] * (EPISODES - BLOCK)
        await play_out(a, key, sid, 0, pool.solutions)
        chosen = await play_out(a, key, sid, 1, pool.solutions)  # the block ends: 2 more
        assert len(chosen) == 2 * BLOCK
        _, rows = await b.store.session(sid)
        assert [r.level for r in rows] == chosen + [None]  # stored with that last step
        other = await b.current(key, sid)  # another worker: the levels recorded
        assert levels_of(other) == chosen and other.in_flight == [2]
        assert b.cache.exposures.latest("pool") is not None  # its choices keep to the cap
        a.cache.drop(sid)
        assert levels_of(await a.current(key, sid)) == chosen  # a reload: the same
        # the next block ended on worker b while a's copy is behind: a's next step is played
        # on the stored session, on the block b chose
        await play_out(b, key, sid, 2, pool.solutions)
        last = await play_out(b, key, sid, 3, pool.solutions)
        assert len(last) == EPISODES and last[:2 * BLOCK] == chosen
        stale = a.cache.copies[sid]
        assert len(stale.episodes) == 2 * BLOCK  # a's copy has not seen b's choice
        levels = await a.act(key, sid, 0, 4, lambda s, _: levels_of(s))
        assert levels == last
        _, rows = await a.store.session(sid)
        assert [r.level for r in rows] == last
    on_workers(pool, location, body)


def test_a_refused_write_discards_its_choice(pool, tmp_path):
    async def body(a: Arena, b: Arena):
        key, _, session = await started(a)
        sid = session.id
        await play_out(a, key, sid, 0, pool.solutions)
        *most, last = pool.solutions[session.episodes[1].served.index]
        for action in most:
            await a.act(key, sid, action, 1, lambda s, _: None)
        await b.current(key, sid)  # b's copy, at the same step as a's
        theirs = await b.act(key, sid, last, 1, lambda s, _: levels_of(s))  # b ends the block
        # a ends it on its own copy too, choosing a block: its write is refused and its
        # choice dropped with its copy; on the stored session the episode is over
        with pytest.raises(Conflict, match="not in flight"):
            await a.act(key, sid, last, 1, lambda s, _: None)
        assert sid not in a.cache.copies and len(theirs) == 2 * BLOCK
        _, rows = await a.store.session(sid)
        assert [r.level for r in rows] == theirs + [None]
        assert levels_of(await a.current(key, sid)) == theirs
    on_workers(pool, str(tmp_path / "store.sqlite"), body)


def test_closing_early_pads_every_unplayed_episode_as_a_failure_on_its_tiers_easiest_unshown(
        pool, tmp_path):
    async def body(a: Arena, b: Arena):
        key, card, session = await started(a)
        await play_out(a, key, session.id, 0, pool.solutions)
        shown = levels_of(await a.current(key, session.id))
        result = await a.close(key, card.id)
        score = result["games"]["adaptive"]
        assert score["episodes"] == EPISODES and score["solved"] == 1
        items = pool.version.pool
        expected, _ = pad_unplayed(items.difficulty, items.tiers, np.array(shown),
                                   np.array([True, False]), items.targets, EPISODES)
        _, rows = await a.store.session(session.id)
        assert [r.level for r in rows] == expected.tolist()
        assert [(r.done, r.solved, r.steps) for r in rows[BLOCK:]] == [(True, False, 0)] * 3
        played = await a.store.played_episodes(pool.version.version)
        assert [e.level for e in played] == expected.tolist()
        # frozen at close: a server on a refit of the items shows the stored Score
        refit = replace(pool.version, pool=replace(items, difficulty=items.difficulty + 2.0))
        later = Arena(refit, b.store, Limits())
        view = await later.scorecard_view(key, card.id)
        assert view["score"]["ability"] == score["ability"] == result["ability"]
        assert view["score"]["equated_success"] == score["equated_success"]
        assert score["ability"]["low"] <= score["ability"]["theta"] <= score["ability"]["high"]
    on_workers(pool, str(tmp_path / "store.sqlite"), body)


def test_the_spec_says_the_game_is_adaptive_and_shows_no_item_parameters(pool, tmp_path):
    with server(pool.version, tmp_path / "store.sqlite") as running:
        spec = requests.get(f"{running.base}/api/spec", timeout=10).json()
    assert spec["game"] == "adaptive" and spec["episodes"] == EPISODES
    assert spec["adaptive"] == {"pool": POOL, "episodes": EPISODES, "parallel": BLOCK}
    assert spec["order"] == "adaptive" and spec["restarts"] == "none"
    text = json.dumps(spec)
    assert "discrimination" not in text and "difficulty" not in text and "xsb" not in text


def upstream_play(base: str, key: str, parallel: int, solutions_by_goal) -> dict:
    """What upstream's remote_eval.py does: a scorecard opened with no body's games, game
    ``standard`` started with ``?parallel=N``, every episode in flight acted on until
    GAME_OVER, then the close's ``games.standard``."""
    api = Api(base, key)
    card = api.ok("POST", "/api/scorecards")
    frame = api.ok("POST", f"/api/scorecards/{card['scorecard_id']}/games/standard/start"
                           f"?parallel={parallel}")
    plans: dict[int, list[int]] = {}
    while frame["state"] != "GAME_OVER":
        shown = frame["episodes"] if parallel > 1 else [
            {**frame["episode"], "observation": frame["observation"]}]
        ep = shown[0]
        i = ep["index"]
        if i not in plans:
            goal = ep["observation"]["goal"]
            plans[i] = list(solutions_by_goal[goal])
        body = {"action": plans[i].pop(0)} | ({"episode": i} if parallel > 1 else {})
        frame = api.ok("POST", f"/api/sessions/{frame['session_id']}/act", body)
    return api.ok("POST", f"/api/scorecards/{card['scorecard_id']}/close")["games"]["standard"]


@pytest.mark.parametrize("parallel", [1, 3])
def test_upstreams_client_plays_a_pool_served_alone_as_standard(pool, tmp_path, parallel):
    """``sokoforge serve POOL --as standard``: a pool's game under the only name upstream's
    client plays; ``?parallel=N`` beyond the block keeps the block's unplayed in flight."""
    standard = replace(pool.version, game="standard")
    goals = {lv.goal.b64: pool.solutions[lv.index] for lv in standard.levels}
    with server(standard, tmp_path / "store.sqlite") as running:
        key = Api(running.base).ok("POST", "/api/keys", {"name": f"upstream {parallel}"},
                                   status=201)["api_key"]
        assert requests.get(f"{running.base}/api/spec", timeout=10).json()["games"] == [
            "standard"]
        score = upstream_play(running.base, key, parallel, goals)
    assert score["episodes"] == EPISODES and score["solved"] == EPISODES
    assert score["ability"]["low"] <= score["ability"]["theta"] <= score["ability"]["high"]


def test_the_as_option_serves_one_version_only():
    out = CliRunner().invoke(main, ["serve", "a", "b", "--as", "standard"])
    assert out.exit_code == 2 and "give one version" in out.output


@pytest.mark.parametrize("parallel", [1, 2])
def test_the_reference_client_plays_a_pool_to_its_end_and_reports_its_ability(pool, tmp_path,
                                                                            parallel):
    SolutionAgent.solutions = solutions_by_goal(pool.rows)
    with server(pool.version, tmp_path / "store.sqlite") as running:
        outcome = asyncio.run(play(running.base, SolutionAgent, name=f"reference {parallel}",
                                   parallel=parallel, echo=lambda line: None))
    score = outcome["score"]
    assert score["episodes"] == EPISODES and score["success_rate"] == 1.0
    assert score["equated_success"]["low"] <= score["equated_success"]["value"]


def test_the_arc_face_lists_and_plays_a_pool_to_its_episodes_end(pool, tmp_path):
    with server(pool.version, tmp_path / "store.sqlite") as running:
        games = requests.get(f"{running.base}/api/games", timeout=10).json()
        assert [(g["game_id"], g["baseline_actions"]) for g in games] == [
            (w.game_id("pool"), [])]  # no level is known before a session chooses it
        key = Api(running.base).ok("POST", "/api/keys", {"name": "arc"}, status=201)["api_key"]
        arc = Arcade(arc_api_key=key, arc_base_url=running.base,
                     operation_mode=OperationMode.ONLINE)
        env = arc.make("sokoban")
        frame = env.observation_space
        assert frame.win_levels == EPISODES and frame.levels_completed == 0
        steps = 0
        while frame.state is GameState.NOT_FINISHED:
            frame = env.step(GameAction.ACTION5)  # a no-op: every episode waits out its budget
            assert frame is not None, "the toolkit refused or lost an answer"
            steps += 1
        assert frame.state is GameState.GAME_OVER and frame.levels_completed == 0
        card = arc.close_scorecard()
        assert card is not None and card.environments[0].runs[0].actions == steps
        view = Api(running.base, key).ok("GET", f"/api/scorecards/{card.card_id}")
    assert view["score"]["episodes"] == EPISODES and view["score"]["solved"] == 0
    assert view["score"]["ability"]["theta"] < 0  # solving nothing: below the pool's middle


def test_a_numbered_step_sent_again_is_answered_on_the_levels_recorded(pool, tmp_path):
    """A client that lost the answer to the step that ended a block sends it again: the
    answer is replayed from the stored steps on the block then chosen, nothing chosen anew."""
    async def body(a: Arena, _):
        key, _, session = await started(a)
        sid, step = session.id, 0
        for episode in range(BLOCK):
            for action in pool.solutions[session.episodes[episode].served.index]:
                step += 1
                answered = await a.act(key, sid, action, episode, lambda s, _: levels_of(s),
                                       step)
        assert len(answered) == 2 * BLOCK
        for _ in range(3):
            again = await a.act(key, sid, action, BLOCK - 1, lambda s, _: levels_of(s), step)
            assert again == answered
    on_workers(pool, str(tmp_path / "store.sqlite"), body)


def test_a_pool_never_calibrated_is_refused_before_its_levels_are_precomputed(pool, tmp_path):
    shutil.copytree(pool.datasets / "pool", tmp_path / "pool")
    (tmp_path / "pool" / "report" / "items.parquet").unlink()
    with pytest.raises(DatasetError, match="run `sokoforge panel pool` first"):
        load_version(tmp_path, "pool")


def test_a_new_session_passes_over_the_levels_shown_in_too_many_sessions(pool, location):
    """Exposure control: a level that one more showing would take past ``MAX_EXPOSURE`` of
    the sessions is not chosen while its tier has another; padding does not count as shown."""
    async def body(a: Arena, _):
        a.cache.exposures.refresh = 0.0  # read the counts at every start
        key = await a.identify(await a.create_key("exposed agent", "127.0.0.1"))
        tiers = pool.version.pool.tiers
        passed_over = 0
        for _ in range(14):
            shown, sessions = await a.store.shown_levels("pool")
            counts = np.zeros(POOL, dtype=np.int64)
            counts[list(shown)] = list(shown.values())
            blocked = over_exposed(counts, sessions)
            card, _ = await a.open_scorecard(key)
            session = await a.start(key, card.id, "adaptive", 1, "127.0.0.1")
            first = levels_of(session)
            if blocked is not None:
                for level in first:
                    others = (tiers == tiers[level]) & ~blocked
                    others[first] = False
                    assert not blocked[level] or not others.any()
                passed_over += int(blocked.any())
            await a.act(key, session.id, 0, 0, lambda s, _: None)  # a step: level shown
            await a.close(key, card.id)  # the unplayed are padded, never counted as shown
            after, _ = await a.store.shown_levels("pool")
            assert set(after) - set(shown) <= set(first)
        assert passed_over > 0
    on_workers(pool, location, body)


def test_a_process_counts_its_own_choices_so_the_cap_holds_between_two_reads(pool, tmp_path):
    """Sessions started faster than the counts are read again: the process's own choices keep
    them current, so no level goes past the cap (read once, at the first start, the store
    alone would know of no session at all)."""
    async def body(a: Arena, _):
        key = await a.identify(await a.create_key("fast agent", "127.0.0.1"))
        sessions = 20
        for _ in range(sessions):
            card, _ = await a.open_scorecard(key)
            session = await a.start(key, card.id, "adaptive", 1, "127.0.0.1")
            await a.act(key, session.id, 0, 0, lambda s, _: None)
            await a.close(key, card.id)
        shown, counted = await a.store.shown_levels("pool")
        assert counted == sessions
        assert max(shown.values()) / sessions <= MAX_EXPOSURE
        held = a.cache.exposures.latest("pool")
        assert held is not None and held.sessions == sessions  # one read, then its own count
        assert held.counts.sum() == BLOCK * sessions  # each session's first block, chosen
    on_workers(pool, str(tmp_path / "store.sqlite"), body)
