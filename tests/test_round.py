"""A round as an operator runs it, end to end, through the commands of the README's runbook:
build hidden -> audit -> open -> serve -> agents play -> close (a late scorecard refused on both
faces) -> standings with their sha256 -> reveal -> rotate -> the next round served beside the
archived leaderboard."""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
import time

import pytest
from serve_support import Api, Process

from pipeline.errors import InputError, PipelineError
from pipeline.rounds import Round, open_round, parse_time, read_round

SOKOFORGE = [sys.executable, "-c", "from sokoforge.cli import main; main()"]


def sokoforge(*args: str, code: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run([*SOKOFORGE, *args], capture_output=True, text=True, timeout=900)
    assert done.returncode == code, (args, done.stdout, done.stderr)
    return done


def _card(client: Api) -> str:
    return client.ok("POST", "/api/scorecards", {})["scorecard_id"]


@pytest.mark.slow
def test_a_round_runs_from_build_to_the_next_round_served_beside_the_archived_one(tmp_path):
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    db = tmp_path / "store.sqlite"
    where = ["--datasets", str(datasets)]
    sokoforge("build", "r1", "--spec", "tiny", "--quiet", *where)  # a secret seed
    sokoforge("audit", "r1", *where)
    closes = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    opened = sokoforge("round", "open", "r1", "--closes", closes, *where)
    assert f"round open until {closes}" in opened.stdout
    refused = sokoforge("reveal", "r1", "--yes", *where, code=1)
    assert "is not closed" in refused.stderr

    server = Process(datasets, db, versions=("r1",))
    try:
        landing = Api(server.base).ok("GET", "/")
        assert f"is open until <b>{closes}</b>" in landing
        scores = {}
        for name, seed in (("alice", "1"), ("bob", "2")):
            played = sokoforge("play", "--url", server.base, "--register", name, "--agent",
                               "random", "--seed", seed)
            scores[name] = json.loads(played.stdout.split("\nscorecard: ")[0])
            scores[name]["scorecard_id"] = played.stdout.split("/scorecards/")[1].strip()
        late = Api(server.base)
        late.key = late.ok("POST", "/api/keys", {"name": "carol"}, status=201)["api_key"]
        unclosed = _card(late)  # opened in time, never closed: not ranked

        closing = sokoforge("round", "close", "r1", "--db", str(db), *where)
        assert "2 ranked name(s)" in closing.stdout

        status, body = late.call("POST", "/api/scorecards", {})
        assert status == 409 and "round of version r1 closed" in body["detail"]
        status, body = late.call("POST", "/api/scorecard/open", {})  # the ARC-AGI-3 face
        assert status == 409 and "round of version r1 closed" in json.dumps(body)
        status, body = late.call("POST", f"/api/scorecards/{unclosed}/close")
        assert status == 409 and "not ranked" in body["detail"]
        assert "is closed</b>" in Api(server.base).ok("GET", "/")
        final = Api(server.base).ok("GET", "/api/leaderboard")  # as served, at the close
    finally:
        server.stop()

    folder = datasets / "r1"
    record = read_round(folder)
    sums = (folder / "standings.sha256").read_text().splitlines()
    for line in sums:  # sha256sum -c
        digest, name = line.split("  ")
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest
    assert record.standings_sha256 == hashlib.sha256(
        (folder / "standings.sha256").read_bytes()).hexdigest()
    assert record.standings_sha256 in closing.stdout
    entries = json.loads((folder / "standings.json").read_text())["entries"]
    rows = list(csv.DictReader((folder / "standings.csv").open()))
    assert sorted(e["name"] for e in entries) == ["alice", "bob"]
    assert [r["scorecard_id"] for r in rows] == [e["scorecard_id"] for e in entries]
    for e in entries:
        assert e["scorecard_id"] == scores[e["name"]]["scorecard_id"]
        assert e["success_rate"] == scores[e["name"]]["success_rate"]

    seed = sokoforge("reveal", "r1", "--yes", *where).stdout.strip()
    sokoforge("verify", "r1", "--seed", seed, *where)
    sokoforge("rotate", "r2", "--from", "r1", "--quiet", *where)
    later = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 7200))
    sokoforge("round", "open", "r2", "--closes", later, *where)

    server = Process(datasets, db, versions=("r2",))
    try:
        anyone = Api(server.base)
        assert "version <code>r2</code>" in anyone.ok("GET", "/")
        board = anyone.ok("GET", "/leaderboard")
        assert "?version=r1" in board and f"is open until <b>{later}</b>" in board
        archived = anyone.ok("GET", "/leaderboard?version=r1")
        assert "is closed</b>" in archived and record.standings_sha256[:16] in archived
        api = anyone.ok("GET", "/api/leaderboard?version=r1")
        assert [e["scorecard_id"] for e in api["entries"]] == [
            e["scorecard_id"] for e in entries]
        # the precision of the board as it was served at the close (its levels' tiers known)
        for shown, kept in zip(final["entries"], entries, strict=True):
            assert shown["scorecard_id"] == kept["scorecard_id"]
            assert shown["success_interval"] == [kept["success_interval_lo"],
                                                 kept["success_interval_hi"]]
            assert shown["indistinguishable_from_above"] == kept["indistinguishable_from_above"]
        assert api["round"]["standings_sha256"] == record.standings_sha256
        player = Api(server.base)
        player.key = player.ok("POST", "/api/keys", {"name": "dave"}, status=201)["api_key"]
        _card(player)  # the next round takes scorecards
    finally:
        server.stop()


def test_a_round_opens_only_into_the_future_and_a_closed_one_stays_closed(tmp_path):
    from serve_support import write_dataset

    write_dataset(tmp_path, "v")
    with pytest.raises(InputError, match="not in the future"):
        open_round(tmp_path, "v", closes=100.0, now=200.0)
    rnd = open_round(tmp_path, "v", closes=300.0, now=200.0)
    assert read_round(tmp_path / "v") == rnd and not rnd.is_over(299.0) and rnd.is_over(300.0)
    (tmp_path / "v" / "round.json").write_text(json.dumps(
        Round("v", 200.0, 300.0, closed=301.0).to_dict()))
    with pytest.raises(PipelineError, match="closed"):
        open_round(tmp_path, "v", closes=900.0, now=400.0)


@pytest.mark.parametrize("text, seconds", [("2026-12-31T23:59Z", 1798761540.0),
                                           ("2026-12-31T23:59:00+00:00", 1798761540.0),
                                           ("2026-12-31 23:59", 1798761540.0)])
def test_closing_times_are_iso_8601_in_utc_unless_a_zone_is_given(text, seconds):
    assert parse_time(text) == seconds


def test_a_closing_time_that_is_not_a_time_is_usage_exit_2(tmp_path):
    from serve_support import write_dataset

    write_dataset(tmp_path, "v")
    done = sokoforge("round", "open", "v", "--closes", "tomorrow", "--datasets", str(tmp_path),
                     code=2)
    assert done.stderr.strip().splitlines() == [
        "Error: 'tomorrow' is not a time: give ISO 8601 such as 2026-12-31T23:59Z (UTC without "
        "a zone), or now"]


def test_standings_rank_each_names_best_with_success_intervals_and_refuse_late_results(
        tmp_path):
    import asyncio

    from serve_support import write_dataset

    from pipeline.precision import interval_from_counts
    from serve.standings import close_round
    from serve.stores import KeyRecord, ScorecardRecord
    from serve.stores.sqlite import SQLiteStore

    write_dataset(tmp_path, "v")
    db = tmp_path / "s.sqlite"

    async def fill() -> None:
        store = SQLiteStore(db)
        await store.start()
        for n, (name, rate, interval, closed) in enumerate([
                ("ann", 0.5, [0.2, 0.8], 150.0), ("bob", 0.7, None, 160.0),
                ("ann", 0.9, [0.6, 1.0], 400.0)]):
            if n < 2:
                await store.create_key(KeyRecord(name, name), "a", "d", 100)
            await store.open_scorecard(ScorecardRecord(f"sc-{n}", name, name, {"g": "v"}, 100.0),
                                       "d", 100)
            score = {"success_rate": rate, "move_efficiency": 0.5, "deadlock_rate": 0.0,
                     "episodes": 6, "solved": int(rate * 6), "avg_steps_solved": 3.0,
                     "total_actions": 40}
            if interval:
                score["success_interval"] = interval
            await store.close_scorecard(f"sc-{n}", closed, {
                **score, "games": {"g": score}, "session_ids": {"g": None},
                "versions": {"g": "v"}}, [])
        await store.close()

    asyncio.run(fill())
    open_round(tmp_path, "v", closes=200.0, now=100.0)
    with pytest.raises(PipelineError,
                       match=r"closed after the round's closing time .*scorecard sc-2 of 'ann'"):
        close_round(tmp_path, "v", str(db), now=300.0)  # ann's best came after the close
    assert not (tmp_path / "v" / "standings.json").exists()
    open_round(tmp_path, "v", closes=500.0, now=100.0)  # the round ran until 500 after all
    done = close_round(tmp_path, "v", str(db), now=600.0)
    # no session to read the levels from: the intervals come from the counts, as the
    # leaderboard's do
    ann, bob = interval_from_counts(5, 6), interval_from_counts(4, 6)
    assert [(r["name"], r["scorecard_id"], r["success_interval_lo"], r["success_interval_hi"])
            for r in done.rows] == [("ann", "sc-2", *ann), ("bob", "sc-1", *bob)]
    assert done.round.closes == 500.0 and done.round.closed == 600.0
    rows = list(csv.DictReader((tmp_path / "v" / "standings.csv").open()))
    assert [r["success_interval_lo"] for r in rows] == [str(ann[0]), str(bob[0])]


def test_a_server_sees_a_round_opened_moved_or_closed_within_a_second_without_a_restart(
        tmp_path):
    from serve_support import write_dataset

    from pipeline.rounds import RoundBook

    write_dataset(tmp_path, "v")
    ticks = [0.0]
    book = RoundBook(tmp_path, clock=lambda: ticks[0])
    assert book.get("v") is None and book.over("v", 1e12) is None
    open_round(tmp_path, "v", closes=300.0, now=100.0)
    assert book.get("v") is None  # looked at less than a second ago
    ticks[0] += 1.0
    assert book.get("v").closes == 300.0 and book.over("v", 299.0) is None
    assert book.over("v", 300.0).version == "v"
    open_round(tmp_path, "v", closes=900.0, now=100.0)
    ticks[0] += 1.0
    assert book.over("v", 300.0) is None and book.get("v").closes == 900.0
    assert book.get("../v") is None and book.get(".hidden") is None
