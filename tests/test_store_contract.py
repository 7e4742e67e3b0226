"""The Store contract, one suite run against every backend (SQLite and a real PostgreSQL).

Two store objects on one database stand for two processes (workers or servers) sharing it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace

import pytest

from serve.stores import (
    EpisodeRecord,
    Final,
    KeyRecord,
    ScorecardRecord,
    SessionRecord,
    StaleSession,
    StoreConflict,
    StoreError,
    StoreLimit,
    Write,
    open_store,
)

DAY = "2026-12-01"
NOW = 1_900_000_000.0


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path):
    """Where a fresh store lives, for each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    return request.getfixturevalue("postgres").database()


def run(location: str, body, stores: int = 1):
    """Run ``body(*stores)`` with ``stores`` started store objects on ``location``."""
    async def main():
        opened = [open_store(location) for _ in range(stores)]
        for s in opened:
            await s.start()
        try:
            return await body(*opened)
        finally:
            for s in opened:
                await s.close()
    return asyncio.run(main())


def card(n: int = 1, key: str = "k1", games=None) -> ScorecardRecord:
    return ScorecardRecord(f"sc-{key}-{n}", key, f"name {key}", games or {"standard": "v1"},
                           NOW)


def session(n: int = 1, key: str = "k1", card_n: int = 1, game: str = "standard",
            at: float = NOW) -> SessionRecord:
    return SessionRecord(f"gs-{key}-{n}", f"sc-{key}-{card_n}", key, game, "v1", 1,
                         "IN_PROGRESS", at, at, 0, "w0")


def step(sid: str, expected: int, expected_writer: str, writer: str, steps: int,
         state: str | None = None, at: float = NOW) -> Write:
    row = EpisodeRecord(0, state is not None, False, False, steps, "U" * steps, f"{steps}:1,2",
                        level=0)
    return Write(sid, expected, expected_writer, writer, at, 0, 0, (row,), state)


async def opened_session(store, key: str = "k1", n: int = 1) -> None:
    await store.create_key(KeyRecord(key, f"name {key}"), "addr", DAY, 100)
    await store.open_scorecard(card(n, key), DAY, 100)
    await store.create_session(session(n, key, n), range(3), 10, 10, NOW - 60)


def test_keys_are_unique_by_folded_name_and_counted_per_subject_and_day(location):
    async def body(store):
        assert await store.create_key(KeyRecord("h1", "Ann"), "addr", DAY, 2) == 1
        with pytest.raises(StoreConflict):
            await store.create_key(KeyRecord("h2", "ann"), "addr", DAY, 2)
        assert await store.create_key(KeyRecord("h3", "Bea"), "addr", DAY, 2) == 2
        with pytest.raises(StoreLimit) as over:
            await store.create_key(KeyRecord("h4", "Cid"), "addr", DAY, 2)
        assert over.value.count == 2
        assert await store.create_key(KeyRecord("h4", "Cid"), "addr", "2026-12-02", 2) == 1
        assert await store.find_key("h1") == KeyRecord("h1", "Ann")
        assert await store.find_key("h2") is None
    run(location, body)


def test_scorecards_keep_their_games_and_are_counted_per_key_and_day(location):
    async def body(store):
        games = {"standard": "v1", "expert": "x3"}
        assert await store.open_scorecard(card(1, games=games), DAY, 2) == 1
        assert await store.open_scorecard(card(2), DAY, 2) == 2
        with pytest.raises(StoreLimit):
            await store.open_scorecard(card(3), DAY, 2)
        got = await store.scorecard("sc-k1-1")
        assert got.games == games and got.version == "v1" and got.closed is None
        assert await store.scorecard("sc-nope") is None
    run(location, body)


def test_a_scorecard_plays_each_game_once_and_none_once_closed(location):
    async def body(store):
        await opened_session(store)
        with pytest.raises(StoreConflict, match="started"):
            await store.create_session(session(2), range(3), 10, 10, NOW - 60)
        await store.create_session(session(3, game="expert"), range(3), 10, 10, NOW - 60)
        result = {"success_rate": 0, "move_efficiency": 0, "deadlock_rate": 0, "games": {},
                  "session_ids": {}, "versions": {}}
        await store.close_scorecard("sc-k1-1", NOW, result, [])
        with pytest.raises(StoreConflict, match="closed"):
            await store.create_session(session(4, game="other"), range(3), 10, 10, NOW - 60)
    run(location, body)


def test_sessions_in_flight_are_counted_per_key_and_in_total_across_stores(location):
    async def body(a, b):
        for key in ("k1", "k2"):
            await a.create_key(KeyRecord(key, key), "addr", DAY, 100)
            for n in (1, 2, 3):
                await a.open_scorecard(card(n, key), DAY, 100)
        await a.create_session(session(1, "k1", 1), range(3), 2, 3, NOW - 60)
        await b.create_session(session(2, "k1", 2), range(3), 2, 3, NOW - 60)
        with pytest.raises(StoreLimit) as mine:
            await b.create_session(session(3, "k1", 3), range(3), 2, 3, NOW - 60)
        assert (mine.value.kind, mine.value.count) == ("key", 2)
        await a.create_session(session(1, "k2", 1), range(3), 2, 3, NOW - 60)
        with pytest.raises(StoreLimit) as everyone:
            await b.create_session(session(2, "k2", 2), range(3), 2, 3, NOW - 60)
        assert (everyone.value.kind, everyone.value.count) == ("total", 3)
        # sessions idle since before the cutoff no longer count, expired or not
        await b.create_session(session(2, "k2", 2), range(3), 2, 3, NOW + 1)
    run(location, body, stores=2)


def test_sessions_in_flight_are_counted_per_address_whatever_the_key_across_stores(location):
    async def body(a, b):
        for key in ("k1", "k2", "k3"):
            await a.create_key(KeyRecord(key, key), "addr", DAY, 100)
            await a.open_scorecard(card(1, key), DAY, 100)
        await a.create_session(session(1, "k1"), range(3), 5, 10, NOW - 60, address="near",
                                per_address=2)
        await b.create_session(session(1, "k2"), range(3), 5, 10, NOW - 60, address="near",
                                per_address=2)
        with pytest.raises(StoreLimit) as near:
            await b.create_session(session(1, "k3"), range(3), 5, 10, NOW - 60, address="near",
                                per_address=2)
        assert (near.value.kind, near.value.count) == ("address", 2)
        await a.create_session(session(1, "k3"), range(3), 5, 10, NOW - 60, address="far",
                                per_address=2)
    run(location, body, stores=2)


def test_an_action_is_stored_only_on_the_expected_count_and_writer(location):
    async def body(a, b):
        await opened_session(a)
        await a.write(step("gs-k1-1", 0, "w0", "A", 1))
        # another process that still believes the session is at step 0
        with pytest.raises(StaleSession):
            await b.write(step("gs-k1-1", 0, "w0", "B", 1))
        # the right count, but a writer that did not write the step it builds on
        with pytest.raises(StaleSession):
            await b.write(step("gs-k1-1", 1, "w0", "B", 2))
        assert await b.head("gs-k1-1") == (1, "A", "IN_PROGRESS", NOW)
        await b.write(step("gs-k1-1", 1, "A", "B", 2, at=NOW + 5))
        record, rows = await a.session("gs-k1-1")
        assert (record.seq, record.writer, record.last_active) == (2, "B", NOW + 5)
        assert rows[0] == EpisodeRecord(0, False, False, False, 2, "UU", "2:1,2", level=0)
        assert rows[1] == EpisodeRecord(1, False, False, False, 0, "", None, level=1)
        assert await a.miscounted() == 0
    run(location, body, stores=2)


def test_each_episode_keeps_its_level_chosen_at_creation_or_by_the_write_that_ended_the_one_before(
        location):
    """An adaptive session's first level is stored with the session, the next ones unchosen
    (None); a write stores the next level with the step that ended the episode before, and
    only if that write is accepted; a row written without a level keeps the one it has."""
    async def body(a, b):
        await a.create_key(KeyRecord("k1", "name k1"), "addr", DAY, 100)
        await a.open_scorecard(card(1), DAY, 100)
        await a.create_session(session(1), [7, None, None], 10, 10, NOW - 60)
        _, rows = await b.session("gs-k1-1")
        assert [r.level for r in rows] == [7, None, None]
        ended = EpisodeRecord(0, True, True, False, 3, "UUU", "3:1,2", level=7)
        chosen = EpisodeRecord(1, False, False, False, 0, "", None, level=4)
        await a.write(Write("gs-k1-1", 0, "w0", "A", NOW, 0, 0, (ended, chosen)))
        # a process that missed that step chooses another level: refused, nothing stored
        other = EpisodeRecord(1, False, False, False, 0, "", None, level=9)
        with pytest.raises(StaleSession):
            await b.write(Write("gs-k1-1", 0, "w0", "B", NOW, 0, 0, (ended, other)))
        await b.write(Write("gs-k1-1", 1, "A", "B", NOW, 0, 1,
                            (EpisodeRecord(1, False, False, False, 1, "U", "1:1,2"),)))
        _, rows = await a.session("gs-k1-1")
        assert [r.level for r in rows] == [7, 4, None]
        assert rows[1] == EpisodeRecord(1, False, False, False, 1, "U", "1:1,2", level=4)
    run(location, body, stores=2)


def test_stored_steps_are_read_back_in_order_up_to_a_number_from_any_store(location):
    async def body(a, b):
        await opened_session(a)
        changes = [(0, 2), (0, 5), (1, 3), (-1, 6)]
        for seq, (episode, action) in enumerate(changes):
            write = step("gs-k1-1", seq, "w0" if seq == 0 else "A", "A", seq + 1)
            await a.write(replace(write, action=action, episode=episode))
        assert await b.steps("gs-k1-1", 4) == changes
        assert await b.steps("gs-k1-1", 2) == changes[:2]
        assert await b.steps("gs-k1-1", 9) == changes  # all there are
        assert await b.steps("gs-unknown", 3) == []
    run(location, body, stores=2)


def test_concurrent_writes_of_one_step_from_two_stores_store_exactly_one(location):
    async def body(a, b):
        await opened_session(a)
        results = await asyncio.gather(
            *(s.write(step("gs-k1-1", 0, "w0", name, 1)) for s, name in
              ((a, "A"), (b, "B"), (a, "C"), (b, "D"))), return_exceptions=True)
        assert sum(r is None for r in results) == 1
        assert all(isinstance(r, StaleSession) for r in results if r is not None)
        record, _ = await a.session("gs-k1-1")
        assert record.seq == 1 and await b.miscounted() == 0
    run(location, body, stores=2)


def test_concurrent_changes_of_the_stored_session_from_two_stores_are_all_applied_in_turn(
        location):
    """Each ``update_session`` reads the session as the other left it: none is refused."""
    def next_step(name: str):
        def change(record, rows):
            return step(record.id, record.seq, record.writer, name, rows[0].steps + 1), name
        return change

    async def body(a, b):
        await opened_session(a)
        names = [f"W{i}" for i in range(8)]
        done = await asyncio.gather(*((a if i % 2 else b).update_session(
            "gs-k1-1", next_step(n)) for i, n in enumerate(names)))
        assert done == names
        record, rows = await b.session("gs-k1-1")
        assert record.seq == len(names) and rows[0].actions == "U" * len(names)
        assert await a.update_session("gs-unknown", next_step("X")) is None

        def refuse(record, rows):
            raise LookupError("refused")
        with pytest.raises(LookupError):
            await b.update_session("gs-k1-1", refuse)
        assert (await a.head("gs-k1-1"))[0] == len(names) and await a.miscounted() == 0
    run(location, body, stores=2)


def test_an_ended_or_expired_session_takes_no_more_actions_but_a_revival_restarts_it(location):
    async def body(store):
        await opened_session(store)
        await store.write(step("gs-k1-1", 0, "w0", "A", 1, state="GAME_OVER"))
        with pytest.raises(StaleSession):
            await store.write(step("gs-k1-1", 1, "A", "A", 2))
        fresh = tuple(EpisodeRecord(i, False, False, False, 0, "", None, i) for i in range(3))
        await store.write(Write("gs-k1-1", 1, "A", "A", NOW, 6, -1, fresh, "IN_PROGRESS"))
        assert (await store.head("gs-k1-1"))[2] == "IN_PROGRESS"
        assert (await store.session("gs-k1-1"))[1] == list(fresh)  # every row written
        assert await store.expire(NOW - 1) == 0  # active at NOW
        assert await store.expire(NOW + 1, "gs-other") == 0
        assert await store.expire(NOW + 1, "gs-k1-1") == 1
        assert await store.expire(NOW + 1) == 0  # already expired
        with pytest.raises(StaleSession):
            await store.write(step("gs-k1-1", 2, "A", "A", 1))
        record, _ = await store.session("gs-k1-1")
        assert record.state == "EXPIRED" and record.seq == 2
    run(location, body)


def result_of(rate: float, games=("standard",)) -> dict:
    score = {"success_rate": rate, "move_efficiency": 0.5, "deadlock_rate": 0.1, "episodes": 3}
    return {**score, "games": {g: score for g in games},
            "session_ids": {g: None for g in games}, "versions": {g: "v1" for g in games}}


def test_closing_is_once_refused_when_a_session_moved_and_ranks_each_names_best(location):
    async def body(store):
        await opened_session(store, "k1", 1)
        await store.open_scorecard(card(2, "k1"), DAY, 100)
        await opened_session(store, "k2", 1)
        await store.write(step("gs-k1-1", 0, "w0", "A", 1))
        rows = (EpisodeRecord(0, True, False, True, 1, "U", "1:1,2"),)
        with pytest.raises(StaleSession):
            await store.close_scorecard("sc-k1-1", NOW, result_of(0.9), [
                Final("gs-k1-1", 0, rows)])
        assert (await store.scorecard("sc-k1-1")).closed is None
        first = await store.close_scorecard("sc-k1-1", NOW, result_of(0.2),
                                            [Final("gs-k1-1", 1, rows)])
        again = await store.close_scorecard("sc-k1-1", NOW + 1, result_of(0.9), [])
        assert again == first and (await store.scorecard("sc-k1-1")).result == first
        record, episodes = await store.session("gs-k1-1")
        assert record.state == "GAME_OVER" and episodes[0].deadlocked
        await store.close_scorecard("sc-k1-2", NOW + 2, result_of(0.6), [])
        await store.close_scorecard("sc-k2-1", NOW + 3, result_of(0.4), [])
        board = await store.leaderboard("v1", 10)
        assert [(s.name, s.result["success_rate"]) for s in board] == [
            ("name k1", 0.6), ("name k2", 0.4)]
        assert await store.leaderboard("v2", 10) == []
        assert await store.versions() == ["v1"]
    run(location, body)


def test_a_rounds_board_ranks_each_names_best_closed_before_a_time_and_no_anonymous_key(
        location):
    """A round's board: a name's late best (a server that did not know the round) gives way
    to its best in time, and the keys minted for keyless play are left out."""
    async def body(store):
        for n, (key, name, rate, at) in enumerate([
                ("k1", "ann", 0.5, NOW), ("k1", "ann", 0.9, NOW + 10),
                ("k2", "anon-0a1b2c3d4e5f", 1.0, NOW), ("k3", "bob", 0.4, NOW)], 1):
            if n != 2:
                await store.create_key(KeyRecord(key, name), "addr", DAY, 100)
            await store.open_scorecard(ScorecardRecord(f"sc-{key}-{n}", key, name,
                                                       {"standard": "v1"}, NOW - 100), DAY, 100)
            await store.close_scorecard(f"sc-{key}-{n}", at, result_of(rate), [])
        everyone = await store.leaderboard("v1", 10)
        assert [(s.name, s.result["success_rate"]) for s in everyone] == [
            ("anon-0a1b2c3d4e5f", 1.0), ("ann", 0.9), ("bob", 0.4)]
        board = await store.leaderboard("v1", 10, before=NOW + 10, exclude_anonymous=True)
        assert [(s.name, s.result["success_rate"]) for s in board] == [("ann", 0.5),
                                                                      ("bob", 0.4)]
    run(location, body)


def test_among_runs_that_solved_nothing_one_that_walked_away_ranks_below_one_that_played(
        location):
    """A run that played every episode (one deadlocked) outranks one that took two steps and
    closed (no deadlock, two episodes never played): unplayed episodes count as lost."""
    async def body(store):
        played = (EpisodeRecord(0, True, False, True, 5, "UUUUU", "1:1,2"),
                  EpisodeRecord(1, True, False, False, 9, "L" * 9, "1:1,2"),
                  EpisodeRecord(2, True, False, False, 9, "R" * 9, "1:1,2"))
        walked = (EpisodeRecord(0, True, False, False, 2, "UD", "1:1,2"),)
        for key, rows, deadlocks, at in (("k1", played, 1 / 3, NOW), ("k2", walked, 0.0,
                                                                       NOW - 10)):
            await opened_session(store, key)
            score = {"success_rate": 0.0, "move_efficiency": 0.0, "deadlock_rate": deadlocks,
                     "episodes": 3}
            result = {**score, "games": {"standard": score},
                      "session_ids": {"standard": f"gs-{key}-1"}, "versions": {"standard": "v1"}}
            await store.close_scorecard(f"sc-{key}-1", at, result,
                                        [Final(f"gs-{key}-1", 0, rows)])
        board = await store.leaderboard("v1", 10)
        assert [s.name for s in board] == ["name k1", "name k2"]
    run(location, body)


def test_a_scorecard_keeps_its_source_and_meta_and_browser_runs_can_be_filtered(location):
    """Runs played in the browser are told apart from agents' for the audit and the fit."""
    async def body(store):
        meta = {"tags": ["human", "t2"], "source_url": "https://x.example/a", "opaque": {"n": 1}}
        for key, source in (("k1", "browser"), ("k2", None)):
            await store.create_key(KeyRecord(key, f"name {key}"), "addr", DAY, 100)
            record = ScorecardRecord(f"sc-{key}-1", key, f"name {key}", {"standard": "v1"}, NOW,
                                     source=source, meta=meta if source else None)
            await store.open_scorecard(record, DAY, 100)
            await store.create_session(session(1, key, 1), range(3), 10, 10, NOW - 60)
            rows = (EpisodeRecord(0, True, source is not None, False, 4, "UDLR", "1:1,2"),
                    EpisodeRecord(1, True, False, True, 2, "LL", "1:1,2"))
            result = {**result_of(0.5), "session_ids": {"standard": f"gs-{key}-1"}}
            await store.close_scorecard(f"sc-{key}-1", NOW, result, [Final(f"gs-{key}-1", 0,
                                                                           rows)])
        browser = await store.scorecard("sc-k1-1")
        assert (browser.source, browser.meta) == ("browser", meta)
        agent = await store.scorecard("sc-k2-1")
        assert (agent.source, agent.meta) == (None, None)
        everyone = await store.played_episodes("v1")
        assert [(e.name, e.source, e.index, e.solved, e.steps, e.deadlocked)
                for e in everyone if e.index < 2] == [
            ("name k1", "browser", 0, True, 4, False), ("name k1", "browser", 1, False, 2, True),
            ("name k2", None, 0, False, 4, False), ("name k2", None, 1, False, 2, True)]
        assert {e.name for e in await store.played_episodes("v1", include_browser=False)} == {
            "name k2"}
        assert {e.name for e in await store.played_episodes("v1", browser_only=True)} == {
            "name k1"}
        assert await store.played_episodes("v2") == []
        assert [s.source for s in await store.leaderboard("v1", 10)] == ["browser", None]
    run(location, body)


def test_played_episodes_are_every_game_on_the_version_of_closed_scorecards_with_their_end(
        location):
    """The one read of results (the audit's people, the difficulty fit): each session on the
    version of a closed scorecard, whether its result ranked it or not, open ones left out."""
    async def body(store):
        for key in ("k1", "k2"):
            await store.create_key(KeyRecord(key, f"name {key}"), "addr", DAY, 100)
            await store.open_scorecard(card(1, key, {"standard": "v1", "other": "v2"}), DAY,
                                       100)
            await store.create_session(session(1, key, 1), range(3), 10, 10, NOW - 60)
        await store.create_session(
            SessionRecord("gs-k1-2", "sc-k1-1", "k1", "other", "v2", 1, "IN_PROGRESS", NOW,
                          NOW), range(2), 10, 10, NOW - 60)
        rows = (EpisodeRecord(0, True, True, False, 4, "UDLR", "1:1,2"),
                EpisodeRecord(1, True, False, True, 2, "LL", "1:1,2"))
        await store.close_scorecard("sc-k1-1", NOW, {**result_of(0.5), "games": {}},
                                    [Final("gs-k1-1", 0, rows), Final("gs-k1-2", 0, ())])
        played = await store.played_episodes("v1")
        assert [(e.scorecard_id, e.index, e.level, e.solved, e.steps, e.done)
                for e in played] == [
            ("sc-k1-1", 0, 0, True, 4, True), ("sc-k1-1", 1, 1, False, 2, True),
            ("sc-k1-1", 2, 2, False, 0, False)]
        assert [(e.index, e.done) for e in await store.played_episodes("v2")] == [
            (0, False), (1, False)]
    run(location, body)


def execute(location: str, statement: str) -> None:
    """Run one statement on the backend directly, as an operator (or damage) would."""
    if location.startswith("postgresql"):
        import asyncpg

        async def go():
            conn = await asyncpg.connect(location)
            try:
                await conn.execute(statement)
            finally:
                await conn.close()
        asyncio.run(go())
    else:
        with sqlite3.connect(location) as conn:
            conn.execute(statement)


def test_a_store_of_a_newer_schema_is_refused(location):
    async def body(store):
        await store.create_key(KeyRecord("h", "n"), "a", DAY, 1)
    run(location, body)
    execute(location, "INSERT INTO schema_version VALUES (99)" if location.startswith(
        "postgresql") else "UPDATE meta SET v='99' WHERE k='schema'")
    with pytest.raises(StoreError, match="schema 99, newer"):
        run(location, lambda store: asyncio.sleep(0))


def test_stored_actions_missing_from_a_session_fail_the_integrity_check(location):
    async def played(store):
        await opened_session(store)
        for n in range(3):
            await store.write(step("gs-k1-1", n, "w0" if n == 0 else "A", "A", n + 1))
        await store.integrity("the store")
    run(location, played)
    execute(location, "DELETE FROM actions WHERE seq = 2")

    async def check(store):
        assert await store.miscounted() == 1
        with pytest.raises(StoreError, match="1 session"):
            await store.integrity("the store")
    run(location, check)


def test_played_sessions_read_a_versions_closed_scorecards_with_their_played_episodes_and_actions(
        location):
    """The review's one read: each closed scorecard with a session on the version, in the
    order they opened, its sessions there with the episodes that took a step or were
    solved and every stored action with its arrival; open scorecards and other versions'
    sessions left out."""
    async def body(store):
        for key in ("k1", "k2", "k3"):
            await opened_session(store, key, 1)
        await store.create_session(
            SessionRecord("gs-k1-2", "sc-k1-1", "k1", "other", "v2", 1, "IN_PROGRESS", NOW,
                          NOW), range(2), 10, 10, NOW - 60)
        for seq, ms in enumerate((5, 9)):
            await store.write(replace(step("gs-k1-1", seq, "w0" if seq == 0 else "A", "A",
                                           seq + 1), ms=ms))
        await store.write(replace(step("gs-k2-1", 0, "w0", "A", 1), ms=None))
        rows = (EpisodeRecord(0, True, True, False, 2, "UU", None, 0),)
        await store.close_scorecard("sc-k1-1", NOW + 2, {**result_of(0.5), "games": {}},
                                    [Final("gs-k1-1", 2, rows), Final("gs-k1-2", 0, ())])
        await store.close_scorecard("sc-k2-1", NOW + 1, {**result_of(0.0), "games": {}},
                                    [Final("gs-k2-1", 1, ())])
        got = await store.played_sessions("v1")
        assert [card.id for card, _ in got] == ["sc-k1-1", "sc-k2-1"]  # k3 is still open
        (_, first), (_, second) = got
        assert [p.session.id for p in first] == ["gs-k1-1"]  # its v2 session is not on v1
        assert first[0].episodes == rows and first[0].actions == ((0, 0, 5), (0, 0, 9))
        assert second[0].episodes[0].steps == 1 and second[0].actions == ((0, 0, None),)
        assert [e.index for e in second[0].episodes] == [0]  # the two untouched are left out
        assert await store.played_sessions("v9") == []
    run(location, body)


def test_each_stored_action_keeps_when_it_arrived_in_order_from_any_store(location):
    """Arrival times (ms since the session's start) come back one per stored action, in
    order, whichever store wrote them; a refused write leaves no time behind."""
    async def body(a, b):
        await opened_session(a, "k1", 1)
        await opened_session(a, "k2", 1)
        times = [0, 40, 41, 7_200_000]
        for seq, ms in enumerate(times):
            store = (a, b)[seq % 2]
            write = step("gs-k1-1", seq, "w0" if seq == 0 else "A", "A", seq + 1)
            await store.write(replace(write, ms=ms))
        with pytest.raises(StaleSession):
            await b.write(replace(step("gs-k1-1", 0, "w0", "B", 1), ms=99))
        await b.write(replace(step("gs-k2-1", 0, "w0", "A", 1), ms=None))
        got = await b.action_times(["gs-k1-1", "gs-k2-1", "gs-unknown"])
        assert got == {"gs-k1-1": times, "gs-k2-1": [None], "gs-unknown": []}
        assert await a.action_times([]) == {}
    run(location, body, stores=2)


def write_previous_schema(location: str) -> None:
    """A store as the servers before arrival times wrote it (SQLite schema 4, PostgreSQL 3),
    holding one session with two stored actions."""
    rows = ["INSERT INTO keys VALUES ('k1', 'old', 'old', 0)",
            "INSERT INTO sessions (id, scorecard_id, key_hash, game, version, parallel, state, "
            "created, last_active, seq, writer) VALUES ('gs-old', 'sc-old', 'k1', 'standard', "
            "'v1', 1, 'IN_PROGRESS', 1, 2, 2, 'w')",
            "INSERT INTO episodes (session_id, idx, done, solved, deadlocked, steps, actions) "
            "VALUES ('gs-old', 0, false, false, false, 2, 'UD')",
            "INSERT INTO actions VALUES ('gs-old', 1, 0, 0, 1.5)",
            "INSERT INTO actions VALUES ('gs-old', 2, 0, 1, 2.0)"]
    if location.startswith("postgresql"):
        from serve.stores.postgres import MIGRATIONS
        previous = 3
        script = ["CREATE TABLE schema_version (version integer NOT NULL)"]
        for version in range(1, previous + 1):
            script += [MIGRATIONS[version], f"INSERT INTO schema_version VALUES ({version})"]
        rows.insert(1, "INSERT INTO scorecards (id, key_hash, name, games, opened) VALUES "
                       "('sc-old', 'k1', 'old', '{\"standard\": \"v1\"}', 1)")
        execute(location, ";\n".join(script + rows))
        return
    from serve.stores.sqlite_file import MIGRATIONS as SQLITE_MIGRATIONS
    from serve.stores.sqlite_file import SCHEMA
    with sqlite3.connect(location) as conn:
        conn.executescript(SCHEMA)
        for version in range(2, 5):
            conn.executescript(SQLITE_MIGRATIONS[version])
        conn.executescript("INSERT INTO meta VALUES ('schema', '4'), ('acked', '0');"
                           "INSERT INTO scorecards (id, key_hash, name, version, game, opened, "
                           "games) VALUES ('sc-old', 'k1', 'old', 'v1', 'standard', 1, "
                           "'{\"standard\": \"v1\"}');" + ";".join(rows))


def test_a_store_written_before_arrival_times_loads_and_its_actions_have_none(location):
    write_previous_schema(location)

    async def body(store):
        _, rows = await store.session("gs-old")
        assert [(r.index, r.level) for r in rows] == [(0, 0)]  # every old episode on its own
        assert await store.action_times(["gs-old"]) == {"gs-old": [None, None]}
        assert await store.steps("gs-old", 9) == [(0, 0), (0, 1)]
        await store.write(replace(step("gs-old", 2, "w", "A", 3), ms=1500))
        assert await store.action_times(["gs-old"]) == {"gs-old": [None, None, 1500]}
        assert await store.miscounted() == 0
    run(location, body)


def fill_up(location: str, monkeypatch) -> None:
    """Make the store's disk full from now on: on SQLite the test hook that caps its pages at
    those it has (as a full disk would), on PostgreSQL a trigger that fails every insert with
    the server's own disk-full error (SQLSTATE 53100)."""
    if not location.startswith("postgresql"):
        from serve.stores.sqlite import MAX_PAGES_ENV
        monkeypatch.setenv(MAX_PAGES_ENV, "1")
        return
    execute(location, """
        CREATE FUNCTION no_space() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
            RAISE EXCEPTION 'could not extend file: No space left on device'
                USING ERRCODE = 'disk_full';
        END $$;
        CREATE TRIGGER no_space BEFORE INSERT ON actions FOR EACH ROW EXECUTE FUNCTION no_space();
        CREATE TRIGGER no_space BEFORE INSERT ON keys FOR EACH ROW EXECUTE FUNCTION no_space();
        CREATE TRIGGER no_space BEFORE INSERT ON scorecards FOR EACH ROW
            EXECUTE FUNCTION no_space();""")


def test_a_full_disk_refuses_writes_as_unavailable_and_changes_nothing(location, monkeypatch):
    """Actions, keys and scorecards on a full disk raise ``StoreUnavailable`` saying so (the
    server's 503), each changing nothing; what is stored still reads back."""
    from serve.stores import StoreUnavailable

    run(location, opened_session)
    fill_up(location, monkeypatch)

    async def body(store):
        stored = 0
        with pytest.raises(StoreUnavailable, match="disk is full"):
            for _ in range(5000):
                await store.write(step("gs-k1-1", stored, "w0" if stored == 0 else "A", "A",
                                       stored + 1))
                stored += 1
        assert (await store.head("gs-k1-1"))[0] == stored
        assert len((await store.action_times(["gs-k1-1"]))["gs-k1-1"]) == stored
        assert await store.miscounted() == 0
        with pytest.raises(StoreUnavailable, match="disk is full"):
            for n in range(5000):
                await store.create_key(KeyRecord(f"h{n}", f"name{n}"), "addr", DAY, 10**6)
        with pytest.raises(StoreUnavailable, match="disk is full"):
            for n in range(5000):
                await store.open_scorecard(card(n + 10, "k1"), DAY, 10**6)
        assert (await store.scorecard("sc-k1-1")).key_hash == "k1"
    run(location, body)


def test_a_store_keeps_one_identity_of_its_own_across_opens_and_another_store_has_another(
        location, request):
    async def body(a, b):
        return await a.identity(), await b.identity()

    first, second = run(location, body, stores=2)
    again, _ = run(location, body, stores=2)
    assert first == second == again and len(first) == 32 and location not in first
    other = (location + ".other" if not location.startswith("postgres")
             else request.getfixturevalue("postgres").database())
    assert run(other, body, stores=2)[0] != first
