"""A round as an operator runs it: the README's runbook run as written (build hidden -> panel
-> audit -> open -> serve -> agents play -> close -> digests -> reveal -> publish -> verify ->
rotate -> the next round served beside the published one), and each of its parts on its own:
closing times to the millisecond, a close that cannot race the servers nor change anything
when it cannot read the store, standings that are the board, their routes, reveal and
publish refused out of turn, and anonymous play left unranked."""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import hashlib
import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import warm_cli
from click.testing import CliRunner
from serve_support import Api, Process, play, server, write_dataset
from spec_support import two_tier_tiny_file

from pipeline import seeds
from pipeline.errors import InputError, PipelineError
from pipeline.versions.hidden_files import GITIGNORE, keep_hidden_out_of_git
from pipeline.versions.publish import PUBLISHED_FILES
from pipeline.versions.rounds import (
    NOTICE_SECONDS,
    RECHECK_SECONDS,
    STANDINGS_FILES,
    Round,
    RoundBook,
    exact,
    iso,
    open_round,
    parse_time,
    read_round,
    record_round,
)
from sokoforge.cli import main

README = Path(__file__).resolve().parent.parent / "README.md"
SEED = 424242


def sokoforge(*args: str, code: int = 0) -> subprocess.CompletedProcess:
    done = warm_cli.run(list(args), timeout=900)
    assert done.returncode == code, (args, done.stdout, done.stderr)
    return done


def runbook() -> list[str]:
    """The README's round runbook, one command a line, its comments left out."""
    text = README.read_text(encoding="utf-8")
    block = text.split("## Running a round", 1)[1].split("```\n", 2)[1]
    return [re.sub(r"\s+#\s.*$", "", line).strip() for line in block.splitlines()
            if line.strip()]


def digest_line() -> str:
    """The runbook's line that checks the standings' digests."""
    return next(line for line in runbook() if "sha256sum -c" in line)


def secret_version(root: Path, version: str) -> dict:
    """``write_dataset`` as a hidden version of the secret seed ``SEED``, kept out of git."""
    info = write_dataset(root, version)
    path = root / version / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(seed_source="secret",
                    seed_commitment={"salt": "5a17", "sha256": seeds.commitment(SEED, "5a17")})
    path.write_text(json.dumps(manifest, indent=2))
    seeds.write_secret(root, version, SEED)
    keep_hidden_out_of_git(root / version, manifest)
    return {**info, "manifest": manifest}


def fill(db: Path, cards: list[tuple[str, str, float, float]], version: str = "v") -> None:
    """A store whose keys (``key``, named ``name``) each closed a scorecard of ``version``
    with success ``rate`` at time ``closed``, from a card list of those four."""
    from serve.stores import KeyRecord, ScorecardRecord
    from serve.stores.sqlite import SQLiteStore

    async def run() -> None:
        store = SQLiteStore(db)
        await store.start()
        made = set()
        for n, (key, name, rate, closed) in enumerate(cards):
            if key not in made:
                await store.create_key(KeyRecord(key, name), "a", "d", 100)
                made.add(key)
            await store.open_scorecard(ScorecardRecord(f"sc-{n}", key, name, {"g": version},
                                                       100.0), "d", 100)
            score = {"success_rate": rate, "move_efficiency": 0.5, "deadlock_rate": 0.0,
                     "episodes": 6, "solved": int(rate * 6), "avg_steps_solved": 3.0,
                     "total_actions": 40}
            await store.close_scorecard(f"sc-{n}", closed, {
                **score, "games": {"g": score}, "session_ids": {"g": None},
                "versions": {"g": version}}, [])
        await store.close()

    asyncio.run(run())


def recorded_serving(root: Path, version: str, db: str) -> None:
    """Record in ``version``'s round log that the store ``db`` served it, as a server serving
    the round does (``round close`` ranks only from such a store)."""
    from pipeline.versions.round_log import record_served
    from serve.stores import read_store

    record_served(root / version, read_store(db, lambda store: store.identity()), "now")


def no_wait(seconds: float) -> None:
    """A close's wait, skipped: the tests give the close its time."""


def closed_round(root: Path, db: Path, version: str = "v") -> None:
    """``version``, hidden, with a round closed over a store of two named players."""
    from serve.records.standings import close_round

    secret_version(root, version)
    fill(db, [("k1", "ann", 0.5, 150.0), ("k2", "bob", 0.7, 160.0)], version)
    open_round(root, version, closes=200.0, now=100.0)
    recorded_serving(root, version, str(db))
    close_round(root, version, str(db), now=300.0)


# -- closing times -----------------------------------------------------------------------------
def test_a_round_opens_only_into_the_future_and_a_closed_one_stays_closed(tmp_path):
    write_dataset(tmp_path, "v")
    with pytest.raises(InputError, match="not in the future"):
        open_round(tmp_path, "v", closes=100.0, now=200.0)
    rnd = open_round(tmp_path, "v", closes=300.0, now=200.0)
    assert read_round(tmp_path / "v") == rnd and not rnd.is_over(299.0) and rnd.is_over(300.0)
    (tmp_path / "v" / "round.json").write_text(json.dumps(
        Round("v", 200.0, 300.0, closed=301.0).to_dict()))
    with pytest.raises(PipelineError, match="closed"):
        open_round(tmp_path, "v", closes=900.0, now=400.0)


def test_a_round_whose_closing_time_has_passed_is_reopened_only_when_asked_and_says_so(
        tmp_path):
    write_dataset(tmp_path, "v")
    open_round(tmp_path, "v", closes=200.0, now=100.0)
    assert open_round(tmp_path, "v", closes=150.0 + NOTICE_SECONDS, now=150.0).closes == (
        150.0 + NOTICE_SECONDS)  # a future closing time moves as before
    with pytest.raises(PipelineError, match="has passed; pass --reopen"):
        open_round(tmp_path, "v", closes=900.0, now=300.0)
    assert read_round(tmp_path / "v").closes == 150.0 + NOTICE_SECONDS
    args = ["round", "open", "v", "--closes", "2099-01-01T00:00Z", "--datasets", str(tmp_path)]
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code == 1 and refused.output.count("\n") == 1, refused.output
    assert "--reopen" in refused.output and read_round(tmp_path / "v").closes < 200.0
    reopened = CliRunner().invoke(main, [*args, "--reopen"])
    assert reopened.exit_code == 0, reopened.output
    assert reopened.output == ("v: round reopened until 2099-01-01T00:00:00.000Z (it was over "
                               f"since {iso(150.0 + NOTICE_SECONDS)})\n")
    assert read_round(tmp_path / "v").closes == parse_time("2099-01-01T00:00Z")


def test_a_closing_time_moved_earlier_must_leave_every_server_time_to_read_it(tmp_path):
    write_dataset(tmp_path, "v")
    open_round(tmp_path, "v", closes=900.0, now=100.0)
    with pytest.raises(InputError, match="earlier by less than"):
        open_round(tmp_path, "v", closes=101.0, now=100.0)
    assert open_round(tmp_path, "v", closes=100.0 + NOTICE_SECONDS, now=100.0).closes == (
        100.0 + NOTICE_SECONDS)
    assert NOTICE_SECONDS > RECHECK_SECONDS  # a server reads the time before it comes


@pytest.mark.parametrize("text, seconds", [("2026-12-31T23:59Z", 1798761540.0),
                                           ("2026-12-31T23:59:00+00:00", 1798761540.0),
                                           ("2026-12-31 23:59", 1798761540.0),
                                           ("2026-12-31T23:59:59.125Z", 1798761599.125),
                                           ("2026-12-31T23:59:59.125000+00:00", 1798761599.125)])
def test_closing_times_are_iso_8601_in_utc_unless_a_zone_is_given(text, seconds):
    assert parse_time(text) == seconds


def test_closing_times_are_recorded_to_the_millisecond_and_a_finer_fraction_is_refused(
        tmp_path):
    write_dataset(tmp_path, "v")
    closes = parse_time("2099-12-31T23:59:59.057Z")
    open_round(tmp_path, "v", closes=closes, now=100.0)
    record = json.loads((tmp_path / "v" / "round.json").read_text())
    assert record["closes"] == "2099-12-31T23:59:59.057Z" == iso(closes)
    assert read_round(tmp_path / "v").closes == closes == exact(closes)
    with pytest.raises(InputError, match="finer than a millisecond"):
        parse_time("2099-12-31T23:59:59.0571Z")


@pytest.mark.parametrize("closes, says", [
    ("9999-12-31T23:59:59-12:00", "after 9999-12-31T23:59:59.999Z"),
    ("0001-01-01T00:00:00+14:00", "before 0001-01-01T00:00:00.000Z"),
    ("0001-01-01T00:00Z", "the closing time 0001-01-01T00:00:00.000Z is not in the future"),
    ("2099-01-01T00:00:00.1234567Z", "finer than a millisecond"),
    ("2099-01-01 00:00:00.1234Z", "finer than a millisecond"),  # each form ISO 8601 allows
    ("20990101T000000.1234Z", "finer than a millisecond"),
    ("tomorrow", "is not a time: give ISO 8601 such as 2026-12-31T23:59Z (UTC without a "
                 "zone), or now")])
def test_a_closing_time_that_cannot_be_recorded_is_one_line_exit_2(tmp_path, closes, says):
    write_dataset(tmp_path, "v")
    done = CliRunner().invoke(main, ["round", "open", "v", "--closes", closes, "--datasets",
                                     str(tmp_path)])
    assert done.exit_code == 2 and isinstance(done.exception, SystemExit)
    lines = done.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and says in lines[0], done.output
    assert not (tmp_path / "v" / "round.json").exists()


def test_a_server_refuses_at_the_closing_time_itself_and_rereads_only_to_learn_a_new_one(
        tmp_path):
    write_dataset(tmp_path, "v")
    ticks = [0.0]
    book = RoundBook(tmp_path, clock=lambda: ticks[0])
    assert book.get("v") is None and book.over("v", 1e12) is None
    open_round(tmp_path, "v", closes=300.25, now=100.0)
    assert book.get("v") is None  # looked at less than a second ago
    ticks[0] += 1.0
    assert book.get("v").closes == 300.25 and book.over("v", 300.249) is None
    assert book.over("v", 300.25).version == "v"  # the time known, compared on each request
    open_round(tmp_path, "v", closes=900.0, now=100.0)
    ticks[0] += 1.0
    assert book.over("v", 300.25) is None and book.get("v").closes == 900.0
    assert book.get("../v") is None and book.get(".hidden") is None


# -- the close -----------------------------------------------------------------------------------
def test_standings_rank_each_named_players_best_closed_in_time_leaving_late_and_anonymous_out(
        tmp_path):
    from pipeline.precision import interval_from_counts
    from serve.records.standings import close_round

    write_dataset(tmp_path, "v")
    db = tmp_path / "s.sqlite"
    fill(db, [("k1", "ann", 0.5, 150.0), ("k2", "bob", 0.7, 160.0),
              ("k1", "ann", 0.9, 400.0),  # after the close: a server that did not know it
              ("k3", "anon-0123456789ab", 1.0, 170.0)])  # keyless play is not ranked
    open_round(tmp_path, "v", closes=200.0, now=100.0)
    recorded_serving(tmp_path, "v", str(db))
    done = close_round(tmp_path, "v", str(db), now=300.0)
    ann, bob = interval_from_counts(3, 6), interval_from_counts(4, 6)
    assert [(r["rank"], r["name"], r["scorecard_id"], r["success_interval_lo"],
             r["success_interval_hi"]) for r in done.rows] == [
        (1, "bob", "sc-1", *bob), (2, "ann", "sc-0", *ann)]
    assert done.round.closes == 200.0 and done.round.closed == 300.0
    rows = list(csv.DictReader((tmp_path / "v" / "standings.csv").open()))
    assert [r["success_interval_lo"] for r in rows] == [str(bob[0]), str(ann[0])]
    assert rows[0]["submitted_at"] == "1970-01-01T00:02:40.000Z"


def test_closing_early_announces_a_time_every_server_reads_before_it_comes(tmp_path):
    from serve.records.standings import GRACE_SECONDS, close_round

    write_dataset(tmp_path, "v")
    db = tmp_path / "s.sqlite"
    fill(db, [("k1", "ann", 0.5, 150.0)])
    ticks = [1000.0]
    book = RoundBook(tmp_path, clock=lambda: ticks[0])
    open_round(tmp_path, "v", closes=5000.0, now=100.0)
    assert book.get("v").closes == 5000.0  # what a running server knows
    waited: list[float] = []
    seen: list[tuple] = []

    def wait(seconds: float) -> None:  # the servers' view while the close waits
        waited.append(seconds)
        ticks[0] += RECHECK_SECONDS  # the server's next look, before the announced time
        rnd = book.get("v")
        seen.append((ticks[0] < rnd.closes, rnd.closes, book.over("v", rnd.closes - 0.001),
                     book.over("v", rnd.closes) is not None))

    recorded_serving(tmp_path, "v", str(db))
    done = close_round(tmp_path, "v", str(db), now=1000.0123, sleep=wait)
    announced = exact(1000.0123 + NOTICE_SECONDS)
    assert done.round.closes == announced and read_round(tmp_path / "v").closes == announced
    assert waited == [pytest.approx(announced + GRACE_SECONDS - 1000.0123)]
    assert seen == [(True, announced, None, True)]


def test_closing_twice_gives_the_same_bytes_and_refuses_a_store_that_ranks_otherwise(
        tmp_path):
    from serve.records.standings import close_round

    write_dataset(tmp_path, "v")
    db = tmp_path / "s.sqlite"
    # closed at .056 of the closing second: in time, the closing time being .057
    fill(db, [("k1", "ann", 0.5, 600.056), ("k2", "bob", 0.7, 600.057)])
    open_round(tmp_path, "v", closes=5000.0, now=100.0)
    recorded_serving(tmp_path, "v", str(db))
    close_round(tmp_path, "v", str(db), now=600.057 - NOTICE_SECONDS, sleep=no_wait)
    folder = tmp_path / "v"
    names = ("round.json", "standings.json", "standings.csv", "standings.sha256")
    first = {n: (folder / n).read_bytes() for n in names}
    assert read_round(folder).closes == 600.057
    assert [e["name"] for e in json.loads(first["standings.json"])["entries"]] == ["ann"]
    recorded_serving(tmp_path, "v", str(db))
    again = close_round(tmp_path, "v", str(db), now=700.0, sleep=no_wait)
    assert {n: (folder / n).read_bytes() for n in names} == first
    assert [r["name"] for r in again.rows] == ["ann"]
    other = tmp_path / "other.sqlite"
    fill(other, [("k3", "cy", 0.9, 500.0)])
    recorded_serving(tmp_path, "v", str(other))  # (two servers, each on its own store)
    with pytest.raises(PipelineError, match="now ranks otherwise"):
        close_round(tmp_path, "v", str(other), now=800.0)
    assert {n: (folder / n).read_bytes() for n in names} == first


def test_the_standings_carry_each_rows_review_verdict_and_the_close_writes_the_review(
        tmp_path):
    """The close runs the fair-play review: a decoder replaying the optimal solutions is
    ranked first and marked ``needs review``, the reference planner ``consistent``."""
    import shutil

    from review_support import T0, Card, card_id, levels_of, put_scorecards, solutions

    from engine.agents.panel import PanelAgent, episode
    from engine.levels import parse_xsb
    from pipeline.versions.rounds import COLUMNS
    from serve.records.standings import close_round

    demo = Path(__file__).resolve().parent.parent / "datasets" / "demo"
    (tmp_path / "v").mkdir()
    for name in ("levels.parquet", "manifest.json"):
        shutil.copy(demo / name, tmp_path / "v" / name)
    levels = levels_of(tmp_path / "v")
    planner = ["".join("UDLR"[a] for a in episode(parse_xsb(x), int(m),
                                                  PanelAgent("planner", 256)).actions)
               for x, m in zip(levels["xsb"], levels["max_steps"], strict=True)]
    db = tmp_path / "s.sqlite"
    put_scorecards(str(db), tmp_path / "v", [
        Card(card_id("dec"), "key-1", "decoder", solutions(tmp_path / "v")),
        Card(card_id("plan"), "key-2", "planner", planner, opened=T0 + 5)])
    open_round(tmp_path, "v", closes=T0 + 3600, now=T0 - 1)
    recorded_serving(tmp_path, "v", str(db))
    done = close_round(tmp_path, "v", str(db), now=T0 + 7200)
    assert COLUMNS[-1] == "review"
    assert [(r["name"], r["review"]) for r in done.rows] == [
        ("decoder", "needs review"), ("planner", "consistent")]  # a flag: the rank stands
    rows = list(csv.DictReader((tmp_path / "v" / "standings.csv").open()))
    assert [r["review"] for r in rows] == ["needs review", "consistent"]
    report = json.loads((tmp_path / "v" / "report" / "review.json").read_text())
    assert {c["scorecard_id"]: c["verdict"] for c in report["scorecards"]} == {
        card_id("dec"): "needs review", card_id("plan"): "consistent"}
    first = (tmp_path / "v" / "standings.sha256").read_bytes()
    recorded_serving(tmp_path, "v", str(db))
    close_round(tmp_path, "v", str(db), now=T0 + 7300)  # again: the same bytes
    assert (tmp_path / "v" / "standings.sha256").read_bytes() == first


@pytest.mark.parametrize("store", ["missing.sqlite", "garbage.sqlite"])
def test_a_close_that_cannot_open_its_store_changes_nothing(tmp_path, store):
    write_dataset(tmp_path, "v")
    (tmp_path / "garbage.sqlite").write_bytes(b"not a database" * 100)
    open_round(tmp_path, "v", closes=time.time() + 3600, now=100.0)
    before = (tmp_path / "v" / "round.json").read_bytes()
    done = CliRunner().invoke(main, ["round", "close", "v", "--db", str(tmp_path / store),
                                     "--datasets", str(tmp_path)])
    assert done.exit_code in (1, 2) and len(done.output.strip().splitlines()) == 1, done.output
    assert (tmp_path / "v" / "round.json").read_bytes() == before
    assert not (tmp_path / "v" / "standings.json").exists()


def test_round_status_says_where_the_round_stands(tmp_path):
    from serve.records.standings import close_round

    write_dataset(tmp_path, "v")

    def status() -> str:
        done = CliRunner().invoke(main, ["round", "status", "v", "--datasets", str(tmp_path)])
        assert done.exit_code == 0, done.output
        return done.output.strip()

    assert status().startswith("v: no round")
    open_round(tmp_path, "v", closes=time.time() + 3600)
    assert status().startswith("v: round open until ")
    (tmp_path / "v" / "round.json").write_text(json.dumps(Round("v", 100.0, 200.0).to_dict()))
    assert status() == ("v: round over since 1970-01-01T00:03:20.000Z, not closed: sokoforge "
                        "round close v --db STORE")
    db = tmp_path / "s.sqlite"
    fill(db, [("k1", "ann", 0.5, 150.0)])
    recorded_serving(tmp_path, "v", str(db))
    done = close_round(tmp_path, "v", str(db), now=300.0)
    assert status() == ("v: round closed at 1970-01-01T00:03:20.000Z; standings "
                        f"sha256 {done.round.standings_sha256}")


# -- the board, the routes, anonymous play -----------------------------------------------------
def test_the_board_of_a_round_ranks_what_its_standings_rank(tmp_path):
    from serve.games.dataset import load_version
    from serve.records.standings import close_round

    write_dataset(tmp_path, "v")
    db = tmp_path / "s.sqlite"
    # ann's best was closed late, by a server of the fleet that did not know the round
    fill(db, [("k1", "ann", 0.5, 150.0), ("k2", "bob", 0.7, 160.0),
              ("k1", "ann", 0.9, 400.0), ("k3", "anon-0123456789ab", 1.0, 170.0)])
    open_round(tmp_path, "v", closes=200.0, now=100.0)
    recorded_serving(tmp_path, "v", str(db))
    rows = close_round(tmp_path, "v", str(db), now=300.0).rows
    with server(load_version(tmp_path, "v"), db, rounds=RoundBook(tmp_path)) as running:
        board = Api(running.base).ok("GET", "/api/leaderboard?version=v")
    assert [(e["name"], e["scorecard_id"], e["success_interval"]) for e in board["entries"]] == [
        (r["name"], r["scorecard_id"], [r["success_interval_lo"], r["success_interval_hi"]])
        for r in rows]
    assert [e["name"] for e in board["entries"]] == ["bob", "ann"]


def test_a_closed_rounds_standings_are_served_and_linked_from_its_archived_board(tmp_path):
    from serve.games.dataset import load_version

    db = tmp_path / "s.sqlite"
    closed_round(tmp_path, db, "2026-12")  # the README's name
    write_dataset(tmp_path, "new")
    folder = tmp_path / "2026-12"
    # the README's line, as written, from the folder that holds datasets/
    (tmp_path / "datasets").symlink_to(tmp_path)
    checked = subprocess.run(["bash", "-c", digest_line()], cwd=tmp_path, capture_output=True,
                             text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines() == ["standings.json: OK", "standings.csv: OK"]
    with server(load_version(tmp_path, "new"), db, rounds=RoundBook(tmp_path)) as running:
        anyone = Api(running.base)
        assert anyone.ok("GET", "/api/standings/2026-12") == json.loads(
            (folder / "standings.json").read_text())
        for name in ("standings.json", "standings.csv", "standings.sha256"):
            status, headers, raw = anyone.raw("GET", f"/api/standings/2026-12/{name}")
            assert status == 200 and raw == (folder / name).read_bytes(), name
        for path in ("/api/standings/new", "/api/standings/nope/standings.csv",
                     "/api/standings/2026-12/manifest.json", "/api/standings/..%2F2026-12"):
            status, body = anyone.call("GET", path)
            assert status in (404, 422) and isinstance(body, dict), (path, status, body)
        page = anyone.ok("GET", "/leaderboard?version=2026-12")
        assert "is closed</b>" in page and "href='/leaderboard?version=2026-12'" not in page
        for link in ("/api/standings/2026-12", "/api/standings/2026-12/standings.csv",
                     "/api/standings/2026-12/standings.sha256"):
            assert f"href='{link}'" in page
        (folder / "standings.csv").write_text("rank,name\n1,mallory\n")  # not the recorded
        assert anyone.call("GET", "/api/standings/2026-12/standings.csv")[0] == 404


def test_an_unserved_versions_open_round_is_not_shown_and_dot_names_are_refused(tmp_path):
    """The board of a version this server does not serve says nothing of its round until it
    is closed; ``.`` and ``..`` are no version's names (a 422 in JSON, the page's too)."""
    from serve.games.dataset import load_version

    write_dataset(tmp_path, "v")
    secret_version(tmp_path, "h")
    closes = time.time() + 3600
    open_round(tmp_path, "h", closes=closes)
    with server(load_version(tmp_path, "v"), tmp_path / "s.sqlite",
                rounds=RoundBook(tmp_path)) as running:
        client = Api(running.base)
        board = client.ok("GET", "/api/leaderboard?version=h")
        page = client.ok("GET", "/leaderboard?version=h")
        refused = [client.raw("GET", f"{path}?version={name}") for path in (
            "/api/leaderboard", "/leaderboard") for name in (".", "..")]
    assert "round" not in board and iso(closes)[:16] not in page
    assert [(status, headers["Content-Type"].split(";")[0]) for status, headers, _ in
            refused] == [(422, "application/json")] * 4
    assert all("version must be" in json.loads(body)["detail"] for _, _, body in refused)


def test_anonymous_keys_play_unranked_in_a_round_with_their_own_allowance(tmp_path):
    from serve.games.dataset import load_version

    info = write_dataset(tmp_path, "v")
    open_round(tmp_path, "v", closes=time.time() + 3600)
    db = tmp_path / "s.sqlite"
    with server(load_version(tmp_path, "v"), db, rounds=RoundBook(tmp_path),
                keys_per_address_per_day=2) as running:
        anon = [Api(running.base) for _ in range(3)]
        for n, client in enumerate(anon):
            status, body = client.call("GET", "/api/games/anonkey")
            if n < 2:
                assert status == 200, body
                client.key = body["api_key"]
            else:  # anonymous keys have their own allowance ...
                assert status == 429 and "anonymous keys" in body["message"], body
        named = Api(running.base)
        named.key = named.ok("POST", "/api/keys", {"name": "ann"}, status=201)["api_key"]
        named.ok("POST", "/api/keys", {"name": "bob"}, status=201)  # ... apart from named ones
        for client in (anon[0], named):
            card = client.ok("POST", "/api/scorecards", {})["scorecard_id"]
            frame = client.ok("POST", f"/api/scorecards/{card}/games/standard/start")
            play(client, info["rows"], frame, limit=None if client is anon[0] else 3)
            client.ok("POST", f"/api/scorecards/{card}/close")
        board = Api(running.base).ok("GET", "/api/leaderboard?version=v")
    assert [e["name"] for e in board["entries"]] == ["ann"]


def test_a_name_starting_like_an_anonymous_key_is_refused(tmp_path):
    from serve.games.dataset import load_version

    write_dataset(tmp_path, "v")
    with server(load_version(tmp_path, "v"), tmp_path / "s.sqlite") as running:
        status, body = Api(running.base).call("POST", "/api/keys", {"name": "Anon-me"})
    assert status == 409 and "kept for anonymous keys" in body["detail"]


# -- reveal and publish --------------------------------------------------------------------------
def test_reveal_refuses_a_served_version_and_a_hidden_one_without_a_closed_round_unless_forced(
        tmp_path):
    from pipeline.versions.serving import ServedVersions
    from pipeline.versions.versions import reveal

    secret_version(tmp_path, "v")
    with pytest.raises(PipelineError, match="hidden and has had no round"):
        reveal(tmp_path, "v")
    open_round(tmp_path, "v", closes=time.time() + 3600)
    with pytest.raises(PipelineError, match="is not closed"):
        reveal(tmp_path, "v")
    (tmp_path / "v" / "round.json").write_text(json.dumps(
        Round("v", 100.0, 200.0, closed=300.0, standings_sha256="0" * 64).to_dict()))
    serving = ServedVersions([tmp_path / "v"])
    try:
        done = CliRunner().invoke(main, ["reveal", "v", "--yes", "--datasets", str(tmp_path)])
        assert done.exit_code == 1 and str(SEED) not in done.output
        assert "a server on this machine is serving v" in done.output
        assert not (tmp_path / "v" / "reveal.json").exists()
        assert reveal(tmp_path, "v", force=True).seed == SEED
    finally:
        serving.release()
    assert reveal(tmp_path, "v").seed == SEED  # closed and no longer served


def test_reveal_refuses_a_version_a_running_server_serves_until_it_stops(tmp_path):
    secret_version(tmp_path, "v")
    (tmp_path / "v" / "round.json").write_text(json.dumps(
        Round("v", 100.0, 200.0, closed=300.0, standings_sha256="0" * 64).to_dict()))
    served = Process(tmp_path, tmp_path / "s.sqlite", "--workers", "2", versions=("v",))
    try:
        done = sokoforge("reveal", "v", "--yes", "--datasets", str(tmp_path), code=1)
        assert done.stderr.strip() == ("Error: a server on this machine is serving v: stop it "
                                       "first; or pass --force to reveal it anyway")
        assert str(SEED) not in done.stdout + done.stderr
        assert not (tmp_path / "v" / "reveal.json").exists()
    finally:
        served.stop()
    done = sokoforge("reveal", "v", "--yes", "--datasets", str(tmp_path))
    assert done.stdout.strip() == str(SEED)


def test_publish_needs_a_closed_revealed_round_and_makes_the_version_a_public_practice_set(
        tmp_path):
    from pipeline.versions.publish import publish_round
    from pipeline.versions.serving import ServedVersions
    from pipeline.versions.versions import reveal
    from serve.games.dataset import load_version
    from serve.games.games import is_public
    from serve.records.standings import close_round

    db = tmp_path / "s.sqlite"
    secret_version(tmp_path, "v")
    with pytest.raises(PipelineError, match="no closed round"):
        publish_round(tmp_path, "v")
    fill(db, [("k1", "ann", 0.5, 150.0)])
    open_round(tmp_path, "v", closes=200.0, now=100.0)
    recorded_serving(tmp_path, "v", str(db))
    close_round(tmp_path, "v", str(db), now=300.0)
    with pytest.raises(PipelineError, match="is not revealed"):
        publish_round(tmp_path, "v")
    reveal(tmp_path, "v")
    folder = tmp_path / "v"
    assert (folder / GITIGNORE).is_file()
    serving = ServedVersions([folder])
    try:
        with pytest.raises(PipelineError, match="is serving v"):
            publish_round(tmp_path, "v")
    finally:
        serving.release()
    done = publish_round(tmp_path, "v", now=400.0)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["visibility"] == "public" and manifest["public_seed"] == str(SEED)
    assert manifest["game"] == "v"  # its own game, beside the next round's
    assert not (folder / GITIGNORE).exists() and done.first_time
    assert {p.name for p in done.files} == set(PUBLISHED_FILES)
    assert all(p.is_file() and p.stat().st_mode & 0o044 == 0o044 for p in done.files)
    assert read_round(folder).published == 400.0
    assert not publish_round(tmp_path, "v").first_time
    # the next server serves it as a practice set: played, unranked, its board the standings
    book = RoundBook(tmp_path)
    assert book.over("v", time.time()) is None
    with server(load_version(tmp_path, "v"), db, rounds=book) as running:
        assert is_public(running.arena.games.first.version)
        player = Api(running.base)
        player.key = player.ok("POST", "/api/keys", {"name": "cy"}, status=201)["api_key"]
        card = player.ok("POST", "/api/scorecards", {})["scorecard_id"]
        player.ok("POST", f"/api/scorecards/{card}/games/v/start")
        player.ok("POST", f"/api/scorecards/{card}/close")
        board = Api(running.base).ok("GET", "/api/leaderboard?version=v")
        page = Api(running.base).ok("GET", "/leaderboard?version=v")
    assert [e["name"] for e in board["entries"]] == ["ann"]
    assert board["round"]["state"] == "published" and "practice set" in page


def test_files_written_into_a_hidden_version_after_its_build_are_its_owners_alone(tmp_path):
    """round.json, the standings, reveal.json (the seed) and the reports written after the
    build are 0600 like the rest of a hidden version, whatever the umask, until publish."""
    from pipeline.scores.irt import episodes_table, refit
    from pipeline.versions.rounds import STANDINGS_FILES
    from pipeline.versions.versions import reveal

    before = os.umask(0o022)
    try:
        closed_round(tmp_path, tmp_path / "s.sqlite")
        reveal(tmp_path, "v")
        irt, _ = refit(tmp_path, "v", episodes_table(
            [("ann", "sc-0", 0, True, 4, 150.0), ("bob", "sc-1", 0, False, 9, 160.0)]))
    finally:
        os.umask(before)
    folder = tmp_path / "v"
    written = [folder / name for name in ("round.json", "reveal.json", *STANDINGS_FILES)]
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in [*written, irt]}
    assert modes == {p.name: "0o600" for p in [*written, irt]}


# -- the runbook -------------------------------------------------------------------------------
def _agents(base: str, info: dict) -> dict:
    """Two agents through `sokoforge play`, an anonymous ARC-AGI-3 run, a late scorecard
    and one left open, on the server at ``base``; the agents' scores by name."""
    scores = {}
    for name, seed in (("alice", "1"), ("bob", "2")):
        played = sokoforge("play", "--url", base, "--register", name, "--agent", "random",
                           "--seed", seed)
        scores[name] = json.loads(played.stdout.split("\nscorecard: ")[0])
        scores[name]["scorecard_id"] = played.stdout.split("/scorecards/")[1].strip()
    anon = Api(base)
    anon.key = anon.ok("GET", "/api/games/anonkey")["api_key"]
    card = anon.ok("POST", "/api/scorecard/open", {})["card_id"]
    anon.ok("POST", "/api/scorecard/close", {"card_id": card})
    late = Api(base)
    late.key = late.ok("POST", "/api/keys", {"name": "carol"}, status=201)["api_key"]
    info["late"] = late
    info["unclosed"] = late.ok("POST", "/api/scorecards", {})["scorecard_id"]
    return scores


@pytest.mark.slow
def test_the_readmes_round_runbook_runs_as_written_through_publish(tmp_path):
    """Each line of the README's runbook as written, in a folder laid out as the repository
    (datasets/ beside the store), with the `tiny` spec's first two tiers for builds and closing
    times an hour ahead; `... &` serves in the background until `kill %1`."""
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    spec = two_tier_tiny_file(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sokoforge").write_text(
        f"#!/bin/sh\nexec {shlex.join(warm_cli.command())} \"$@\"\n")
    (bin_dir / "sokoforge").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "SOKOFORGE_DATASETS": str(datasets)}
    closes = iso(time.time() + 3600)
    running: Process | None = None
    info: dict = {}
    outputs: dict[str, str] = {}
    try:
        for line in runbook():
            command = re.sub(r"--closes \S+", f"--closes {closes}", line)
            if command.startswith(("sokoforge build ", "sokoforge rotate ")):
                command += f" --spec {spec} --quiet" if "build" in command else " --quiet"
            if command.endswith("&"):  # a server, in the background
                args = shlex.split(command.rstrip("&"))[2:]
                db = args[args.index("--db") + 1]
                versions = tuple(a for a in args if not a.startswith("--") and a != db)
                running = Process(datasets, tmp_path / db, versions=versions, cwd=tmp_path)
                if versions == ("2026-12",):
                    landing = Api(running.base).ok("GET", "/")
                    assert f"is open until <b>{closes}</b>" in landing
                    info["scores"] = _agents(running.base, info)
                continue
            if command == "kill %1":
                assert running is not None
                running.stop()
                running = None
                continue
            assigned = re.fullmatch(r"(\w+)=\$\((.*)\)", command)
            done = subprocess.run(["bash", "-c", assigned.group(2) if assigned else command],
                                  cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=900)
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            outputs[line] = done.stdout
            if assigned:
                env[assigned.group(1)] = done.stdout.strip()
            if command.startswith("sokoforge round close"):
                late = info["late"]
                status, body = late.call("POST", "/api/scorecards", {})
                assert status == 409 and "round of version 2026-12 closed" in body["detail"]
                status, body = late.call("POST", "/api/scorecard/open", {})  # ARC-AGI-3 face
                assert status == 409 and "round of version 2026-12 closed" in json.dumps(body)
                status, body = late.call("POST", f"/api/scorecards/{info['unclosed']}/close")
                assert status == 409 and "not ranked" in body["detail"]
                info["final"] = Api(running.base).ok("GET", "/api/leaderboard")

        assert running is not None  # the last line: the next round, the published one beside
        anyone = Api(running.base)
        assert "version <code>2027-01</code>" in anyone.ok("GET", "/")
        board = anyone.ok("GET", "/leaderboard")  # both served games' boards
        assert f"is open until <b>{closes}</b>" in board and "practice set" in board
        archived = anyone.ok("GET", "/leaderboard?version=2026-12")
        assert "/api/standings/2026-12/standings.sha256" in archived
        served = anyone.ok("GET", "/api/standings/2026-12")
        practice = Api(running.base)
        practice.key = practice.ok("POST", "/api/keys", {"name": "dave"},
                                   status=201)["api_key"]
        card = practice.ok("POST", "/api/scorecards", {})["scorecard_id"]
        practice.ok("POST", f"/api/scorecards/{card}/games/2026-12/start")
        practice.ok("POST", f"/api/scorecards/{card}/close")  # a practice run, not ranked
        api = anyone.ok("GET", "/api/leaderboard?version=2026-12")
        assert "2026-12" in anyone.ok("GET", "/play/2026-12")  # people may practise it too
    finally:
        if running is not None:
            running.stop()

    folder = datasets / "2026-12"
    record = read_round(folder)
    assert record.published is not None and not (folder / GITIGNORE).exists()
    assert record.standings_sha256 == hashlib.sha256(
        (folder / "standings.sha256").read_bytes()).hexdigest()
    assert outputs["sokoforge round status 2026-12"].startswith("2026-12: round open until ")
    entries = json.loads((folder / "standings.json").read_text())["entries"]
    assert served["entries"] == entries
    assert sorted(e["name"] for e in entries) == ["alice", "bob"]  # no anonymous run, no late
    scores = info["scores"]
    for e in entries:
        assert e["scorecard_id"] == scores[e["name"]]["scorecard_id"]
        assert e["success_rate"] == scores[e["name"]]["success_rate"]
    for shown, kept in zip(info["final"]["entries"], entries, strict=True):
        assert shown["scorecard_id"] == kept["scorecard_id"]
        assert shown["success_interval"] == [kept["success_interval_lo"],
                                             kept["success_interval_hi"]]
    assert [e["scorecard_id"] for e in api["entries"]] == [e["scorecard_id"] for e in entries]
    assert {e["review"] for e in entries} <= {"consistent", "needs review"}  # reviewed
    assert info["final"]["reviewed"] is True and [e["review"] for e in info["final"][
        "entries"]] == [e["review"] for e in entries]
    assert (folder / "report" / "panel.parquet").is_file()  # the runbook ran the panel ...
    audited = outputs["sokoforge audit 2026-12"]
    assert "fit for a round: yes" in audited and "no agent panel" not in audited
    assert "## Agent panel" in (folder / "report" / "report.md").read_text()  # ... the audit too
    # the published folder, checked with the README's own lines, as anyone would
    published = {**env, "SEED": json.loads((folder / "manifest.json").read_text())[
        "public_seed"]}
    for line in (digest_line(), next(x for x in runbook() if x.startswith("sokoforge verify"))):
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=published,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
    listed = sokoforge("versions", "--datasets", str(datasets)).stdout
    row = next(r for r in listed.splitlines() if r.startswith("2026-12 "))
    assert " public " in row and f" published {iso(record.published)} " in row
    # committed as the README says: the published files, under the repository's .gitignore
    (tmp_path / ".gitignore").write_text((README.parent / ".gitignore").read_text())
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "datasets/2026-12"], cwd=tmp_path, check=True)
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout.split()
    assert sorted(staged) == sorted(f"datasets/2026-12/{n}" for n in PUBLISHED_FILES)


# -- the bound and clearings beside sealed standings ---------------------------------------------
@pytest.mark.slow
def test_standings_closed_now_carry_k_and_a_clearing_leaves_them_sealed_and_is_published(
        tmp_path):
    from pipeline.versions.publish import publish_round
    from pipeline.versions.versions import reveal
    from serve.records.clearing import clear_scorecard
    from serve.records.standings import close_round

    db = tmp_path / "s.sqlite"
    closed_round(tmp_path, db)
    folder = tmp_path / "v"
    head = json.loads((folder / "standings.json").read_text())
    assert head["bound"]["text"] == (f"on this version, more than {head['bound']['solved']} of "
                                     f"{head['bound']['levels']} solved needs source review")
    sealed = {n: (folder / n).read_bytes() for n in ("standings.json", "standings.csv",
                                                     "standings.sha256")}
    digest = read_round(folder).standings_sha256
    done = clear_scorecard(tmp_path, "v", str(db), "sc-1", "read its source", now=400.0)
    assert (done.name, done.solved) == ("bob", 4)
    assert stat_mode(folder / "clearances.json") == 0o600  # a hidden version's, its owner's
    close_round(tmp_path, "v", str(db), now=500.0)  # again, after the clearing: the same bytes
    assert {n: (folder / n).read_bytes() for n in sealed} == sealed
    assert read_round(folder).standings_sha256 == digest
    reveal(tmp_path, "v")
    published = publish_round(tmp_path, "v", now=600.0)
    assert {p.name for p in published.files} == {*PUBLISHED_FILES, "clearances.json",
                                                 "clearances.sha256"}
    (folder / "clearances.json").write_text((folder / "clearances.json").read_text() + " ")
    with pytest.raises(PipelineError, match="does not match clearances.sha256"):
        publish_round(tmp_path, "v")


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_round_sealed_before_standings_carried_k_closes_again_to_its_own_bytes(tmp_path):
    from pipeline.versions.rounds import standings_bytes, write_standings
    from serve.records.standings import close_round, legacy_rows, standings

    db = tmp_path / "s.sqlite"
    secret_version(tmp_path, "v")
    fill(db, [("k1", "ann", 0.5, 150.0), ("k2", "bob", 0.7, 160.0)])
    open_round(tmp_path, "v", closes=200.0, now=100.0)
    # the files as a close before this change wrote them: no bound, p to 4 decimals
    before = standings_bytes("v", legacy_rows(standings(str(db), "v", 200.0)))
    assert b'"bound"' not in before["standings.json"]
    write_standings(tmp_path / "v", before)
    digest = hashlib.sha256(before["standings.sha256"]).hexdigest()
    (tmp_path / "v" / "round.json").write_text(json.dumps(
        Round("v", 100.0, 200.0, closed=300.0, standings_sha256=digest).to_dict()))
    recorded_serving(tmp_path, "v", str(db))
    close_round(tmp_path, "v", str(db), now=400.0)
    assert {n: (tmp_path / "v" / n).read_bytes() for n in before} == before
    assert read_round(tmp_path / "v").standings_sha256 == digest


def test_a_paired_p_value_never_reads_a_rounded_zero():
    from pipeline.precision import shown_p

    assert shown_p(1.234e-9) == 1.23e-9 and shown_p(0.00004) == 4e-05
    assert shown_p(0.123456) == 0.1235 and shown_p(0.0) == 0.0 and shown_p(1.0) == 1.0


def test_a_close_from_a_store_that_did_not_serve_the_round_is_refused_and_changes_nothing(
        tmp_path, monkeypatch):
    """The issue's steps: the server ran on k9.sqlite, and ``round close`` without ``--db``
    reads the sokoforge.sqlite another server left here: refused, naming why (by the stores'
    ids, never a location), and the round is not closed; the right store closes it."""
    from serve.records.standings import close_round

    write_dataset(tmp_path, "v")
    served, stray = tmp_path / "k9.sqlite", tmp_path / "sokoforge.sqlite"
    fill(served, [("k1", "ann", 0.5, 150.0)])
    fill(stray, [])
    open_round(tmp_path, "v", closes=200.0, now=100.0)
    before = (tmp_path / "v" / "round.json").read_bytes()
    with pytest.raises(PipelineError, match="no server has served"):  # none recorded yet
        close_round(tmp_path, "v", str(served), now=300.0)
    recorded_serving(tmp_path, "v", str(served))
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, ["round", "close", "v", "--datasets", str(tmp_path)],
                              env={"SOKOFORGE_DB": None})
    assert done.exit_code == 1 and "did not serve v's round" in done.output, done.output
    assert len(done.output.strip().splitlines()) == 1
    assert (tmp_path / "v" / "round.json").read_bytes() == before
    assert not (tmp_path / "v" / "standings.json").exists()
    assert [r["name"] for r in close_round(tmp_path, "v", str(served), now=300.0).rows] == [
        "ann"]
    log = (tmp_path / "v" / "round.log").read_text()
    assert str(tmp_path) not in log and "k9" not in log  # ids, never where a store is


def test_a_server_records_the_store_it_serves_a_round_from_in_the_round_log(tmp_path):
    from pipeline.versions.round_log import served_by
    from serve.games.dataset import load_version
    from serve.stores import read_store

    write_dataset(tmp_path, "v")
    open_round(tmp_path, "v", closes=time.time() + 600)
    db = tmp_path / "s.sqlite"
    with server(load_version(tmp_path, "v"), db, rounds=RoundBook(tmp_path)):
        pass
    assert served_by(tmp_path / "v") == {read_store(str(db), lambda s: s.identity())}


def test_a_wrong_close_is_undone_by_an_explicit_logged_command_before_publication_only(
        tmp_path):
    folder = tmp_path / "v"
    closed_round(tmp_path, tmp_path / "s.sqlite")
    sha = read_round(folder).standings_sha256
    runner = CliRunner()
    args = ["round", "undo-close", "v", "--datasets", str(tmp_path)]
    assert runner.invoke(main, args).exit_code == 2  # --reason is required
    done = runner.invoke(main, [*args, "--reason", "closed from the wrong --db"])
    assert done.exit_code == 0 and "undone" in done.output, done.output
    rnd = read_round(folder)
    assert rnd.closed is None and rnd.standings_sha256 is None and rnd.closes == 200.0
    assert not any((folder / n).exists() for n in STANDINGS_FILES)
    events = [json.loads(line) for line in (folder / "round.log").read_text().splitlines()]
    assert events[-1]["reason"] == "closed from the wrong --db"
    assert events[-1]["standings_sha256"] == sha
    again = runner.invoke(main, args + ["--reason", "twice"])
    assert again.exit_code == 1 and "not closed" in again.output
    from serve.records.standings import close_round

    close_round(tmp_path, "v", str(tmp_path / "s.sqlite"), now=300.0)
    assert read_round(folder).standings_sha256 == sha  # closed again from the right store
    record_round(folder, dataclasses.replace(read_round(folder), published=400.0))
    late = runner.invoke(main, [*args, "--reason", "too late"])
    assert late.exit_code == 1 and "published" in late.output, late.output
    assert read_round(folder).standings_sha256 == sha
