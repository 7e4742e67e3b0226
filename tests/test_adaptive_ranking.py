"""The adaptive game's readers and ranking: pooled ability, its tie marks, the pool's refit,
the review and every reader on the level each episode recorded."""

from __future__ import annotations

import asyncio
import sqlite3

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from pipeline.scores.adaptive import estimate
from pipeline.scores.pooled import Shown, above_probability, marks_above, pooled
from pipeline.stages.build import build
from pipeline.versions.rounds import POOLED_COLUMNS, bound_text
from pipeline.workers import Workers
from serve.arena.images import ImageCache
from serve.arena.leaderboard import Leaderboard
from serve.arena.replays import Replays
from serve.arena.rounds import Rounds
from serve.browser import pages
from serve.games.dataset import load_version
from serve.games.games import Registry
from serve.games.pool import Pool
from serve.records.pooled_board import Board, pooled_entries, read_board
from serve.records.ranking_precision import RankingPrecision
from serve.records.results import closed_episodes
from serve.records.review import play_of, store_reviews
from serve.records.standings import pooled_standings
from serve.stores import (
    EpisodeRecord,
    Final,
    KeyRecord,
    PlayedEpisode,
    PlayedSession,
    ScorecardRecord,
    SessionRecord,
    Standing,
    open_store,
)
from sokoforge.cli import main
from tests.test_adaptive_pool import SEED, small_pool

# a pool of 40 levels in two tiers, difficulties spread over the scale, ten a session
LEVELS = 40
TIERS = np.repeat([0, 1], LEVELS // 2)
SYNTHETIC = Pool(discrimination=np.full(LEVELS, 1.5), difficulty=np.linspace(-3.0, 3.0, LEVELS),
                 tiers=TIERS, targets={0: 0.5, 1: 0.5}, ramp=np.full(LEVELS, 1 / LEVELS),
                 episodes=10, block=1, model_sd=0.02)
BOARD = Board(SYNTHETIC, (10,) * LEVELS)
# the built pool's sessions: (name, levels shown in play order, solved)
SESSIONS = [("alpha", [7, 2, 5, 0, 9], [True, True, True, True, False]),
            ("alpha", [3, 6, 8, 1, 4], [True, True, True, True, True]),
            ("beta", [6, 1, 2, 5, 3], [True, False, False, False, False])]


def played(name: str, card: str, levels: list[int], solved: list[bool],
           closed: float = 10.0) -> list[PlayedEpisode]:
    """A closed session's episodes as the store reads them back, episode i on levels[i]."""
    return [PlayedEpisode(card, f"key-{name}", name, None, i, s, 10 if s else 5, False,
                          closed=closed, level=lv)
            for i, (lv, s) in enumerate(zip(levels, solved, strict=True))]


def test_a_name_with_one_lucky_session_does_not_outrank_a_higher_pooled_ability():
    # lucky: nine of ten middling levels, once; steady: seven of ten hard levels, four times
    middling, hard = list(range(15, 25)), list(range(24, 34))
    lucky = played("lucky", "sc-lucky", middling, [True] * 9 + [False])
    steady = [e for i in range(4) for e in played(
        "steady", f"sc-steady{i}", hard, [True] * 7 + [False] * 3, closed=float(i))]
    board = pooled_entries(lucky + steady, BOARD)
    assert [e["name"] for e in board] == ["steady", "lucky"]
    # by its best session's success (the standard board's rule) lucky would lead
    assert board[1]["success_rate"] == 0.9 > board[0]["success_rate"] == 0.7
    assert board[0]["scorecards"] == 4 and board[0]["episodes"] == 40
    assert board[0]["ability"]["low"] < board[0]["ability"]["theta"] < board[0]["ability"]["high"]
    assert 0 < board[0]["equated_success"]["value"] < 1
    assert board[0]["scorecard_id"] == "sc-steady3"  # its latest


def test_a_session_closed_early_is_pooled_with_its_unplayed_episodes_as_failures():
    short = Shown((20, 21, 22), (True, True, True))
    fit = pooled(SYNTHETIC, [short])
    assert fit.levels == SYNTHETIC.episodes
    assert fit.ability.theta < estimate(SYNTHETIC.discrimination, SYNTHETIC.difficulty,
                                        np.array(short.levels), np.array(short.solved)).theta


def test_adaptive_ties_read_the_posterior_probability_of_the_order():
    def posterior(solved: int, sessions: int) -> np.ndarray:
        levels = tuple(range(15, 25))
        shown = Shown(levels, (True,) * solved + (False,) * (10 - solved))
        return pooled(SYNTHETIC, [shown] * sessions).posterior

    strong, close, weak = posterior(7, 6), posterior(6, 6), posterior(2, 6)
    assert above_probability(strong, close) + above_probability(close, strong) == (
        pytest.approx(1.0))
    first, near, far = marks_above([strong, close, weak])
    assert first is None
    assert near is not None and near.indistinguishable and near.p_value >= 0.05
    assert far is not None and not far.indistinguishable and far.p_value < 0.05


@pytest.fixture(scope="module")
def pool_store(tmp_path_factory):
    """The small pool built and calibrated, and a store of three closed sessions on it."""
    root = tmp_path_factory.mktemp("pool")
    datasets = root / "datasets"
    build("pool", datasets=datasets, spec=small_pool(), seed=SEED,
          workers=Workers(show_progress=False))
    out = CliRunner().invoke(main, ["panel", "pool", "--datasets", str(datasets), "--quiet"])
    assert out.exit_code == 0, out.output
    solutions = pl.read_parquet(datasets / "pool" / "levels.parquet").sort("index")["solution"]
    db = root / "store.sqlite"

    async def fill() -> None:
        store = open_store(str(db))
        await store.start()
        try:
            for n, (name, levels, solved) in enumerate(SESSIONS):
                key, card, session = f"key-{name}", f"sc-{n:024x}", f"gs-{n}"
                if n == 0 or name != SESSIONS[n - 1][0]:
                    await store.create_key(KeyRecord(key, name), "c", "d", 100)
                await store.open_scorecard(ScorecardRecord(card, key, name,
                                                           {"adaptive": "pool"}, 1.0 + n),
                                           "d", 100)
                await store.create_session(SessionRecord(session, card, key, "adaptive", "pool",
                                                         1, "GAME_OVER", 1.0 + n, 1.0 + n),
                                           levels, 100, 100, 0.0)
                final = tuple(EpisodeRecord(i, True, s, False,
                                            len(solutions[lv]) if s else 3,
                                            solutions[lv].upper() if s else "UDL")
                              for i, (lv, s) in enumerate(zip(levels, solved, strict=True)))
                score = {"success_rate": sum(solved) / 5, "move_efficiency": 1.0,
                         "deadlock_rate": 0.0, "ability": {"theta": 0.0, "low": -1.0,
                                                           "high": 1.0}}
                await store.close_scorecard(card, 2.0 + n, {
                    **score, "games": {"adaptive": score}, "versions": {"adaptive": "pool"},
                    "session_ids": {"adaptive": session}}, [Final(session, 0, final)])
        finally:
            await store.close()

    asyncio.run(fill())
    return datasets, db


@pytest.fixture(scope="module")
def games(pool_store):
    """The pool as a server serves it."""
    return Registry([load_version(pool_store[0], "pool")])


@pytest.mark.slow
def test_the_readers_take_an_episodes_recorded_level_not_its_index(pool_store, games):
    datasets, db = pool_store
    table = closed_episodes(str(db), ["pool"])["pool"]
    first = table.filter(pl.col("scorecard") == f"sc-{0:024x}").sort("index")
    assert first["index"].to_list() == [0, 2, 5, 7, 9]  # the levels shown, not episodes 0-4

    async def read():
        store = open_store(str(db))
        await store.start()
        try:
            replays = Replays(games, store, ImageCache(), lambda: 0.0)
            frames = await replays.replay_frames("gs-0", 0, KeyRecord("key-alpha", "alpha"))
            cards = await store.played_sessions("pool")
            standing = Standing(f"sc-{0:024x}", "gs-0", "alpha", 2.0,
                                {"episodes": 10, "solved": 4})
            outcomes = await RankingPrecision(store).outcomes(standing)
            return frames, cards, outcomes
        finally:
            await store.close()

    frames, cards, outcomes = asyncio.run(read())
    level7 = games.first.version.levels[7]
    assert frames["episode"] == 0 and frames["optimal"] == level7.optimal_moves
    assert frames["solved"] and len(frames["sequence"]) == level7.optimal_moves + 1
    assert np.flatnonzero(outcomes).tolist() == [0, 2, 5, 7]  # solved, by the level played
    levels = {lv.index: (lv.level, lv.max_steps) for lv in games.first.version.levels}
    card, sessions = cards[0]
    rows = play_of(card, [PlayedSession(s.session, s.episodes, s.actions) for s in sessions],
                   levels).rows
    assert rows["index"].to_list() == [7, 2, 5, 0, 9]
    assert rows.filter(pl.col("index") == 7)["pushes"].item() > 0  # replayed on level 7


@pytest.mark.slow
def test_the_review_of_a_pool_judges_the_levels_shown_with_its_bound_equated(pool_store):
    datasets, db = pool_store
    done = store_reviews(datasets, "pool", str(db))
    assert [r.name for r in done.reviews] == ["alpha", "alpha", "beta"]
    whole = next(s for s in done.reviews[1].signals if s.name == "whole_score")
    chances = done.reference.levels.filter(pl.col("index").is_in(SESSIONS[1][1]))
    assert whole.value == 5 and whole.reference == pytest.approx(
        float(chances["frontier_chance"].sum()), rel=1e-3)
    assert done.equated_bound is not None and 0.0 < done.equated_bound <= 1.0
    assert "equated success above" in bound_text(3, 10, done.equated_bound)


@pytest.mark.slow
def test_pool_standings_rank_each_name_once_by_pooled_ability(pool_store):
    datasets, db = pool_store
    rows = pooled_standings(str(db), "pool", 100.0, read_board(datasets / "pool"),
                            {f"sc-{2:024x}": "needs review"})
    assert [r["name"] for r in rows] == ["alpha", "beta"]
    assert all(list(r) == list(POOLED_COLUMNS) for r in rows)
    assert rows[0]["scorecards"] == 2 and rows[0]["episodes"] == 10
    assert rows[0]["ability_lo"] < rows[0]["ability"] < rows[0]["ability_hi"]
    assert rows[1]["review"] == "needs review" and rows[0]["review"] is None
    assert rows[1]["paired_p_above"] is not None


@pytest.mark.slow
def test_irt_on_a_pool_refits_items_parquet_and_leaves_closed_scores(pool_store):
    datasets, db = pool_store
    items = datasets / "pool" / "report" / "items.parquet"
    before, cards = pl.read_parquet(items), sqlite_results(db)
    try:
        out = CliRunner().invoke(main, ["irt", "pool", "--db", str(db),
                                        "--datasets", str(datasets)])
        assert out.exit_code == 0, out.output
        assert "refit on its panel and" in out.output and "3 closed scorecards" in out.output
        after = pl.read_parquet(items)
        assert after.columns == before.columns and after["index"].to_list() == list(range(10))
        moved = np.abs(after["difficulty"].to_numpy() - before["difficulty"].to_numpy())
        assert moved.max() > 0.01  # the store's outcomes moved it
        assert sqlite_results(db) == cards  # a closed Score keeps what its close gave it
    finally:
        before.write_parquet(items)  # the other tests read the panel's calibration


def sqlite_results(db) -> list[str]:
    """Every scorecard's stored result, by id."""
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT result FROM scorecards ORDER BY id")]



@pytest.mark.slow
def test_the_served_board_of_a_pool_ranks_names_by_pooled_ability_and_says_so(pool_store,
                                                                              games):
    _, db = pool_store

    async def read():
        store = open_store(str(db))
        await store.start()
        try:
            return await Leaderboard(games, store, Rounds(None, lambda: 0.0)).standings(
                "pool")
        finally:
            await store.close()

    board = asyncio.run(read())
    assert board["adaptive"] and "pooled" in board["precision"]["ability"]
    assert [(e["name"], e["scorecards"]) for e in board["entries"]] == [("alpha", 2),
                                                                         ("beta", 1)]
    page = pages.leaderboard([board])
    assert "equated success" in page and "do not compare it across games" in page
