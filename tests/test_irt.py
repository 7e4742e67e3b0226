"""Refitting difficulty from closed scorecards: simulated agents of known ability in a store."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from pipeline.difficulty.rank_metrics import spearman
from pipeline.scores.irt import fit_2pl, refit
from serve.records.results import closed_episodes as read_closed
from serve.stores import (
    EpisodeRecord,
    Final,
    KeyRecord,
    ScorecardRecord,
    SessionRecord,
    open_store,
)
from sokoforge.cli import main

DEMO = Path(__file__).resolve().parent.parent / "datasets" / "demo"
LEVELS = 100
AGENTS = 40


def _truth() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(12)
    return np.linspace(-2.0, 2.0, AGENTS), rng.normal(0.0, 1.5, LEVELS)


def closed_episodes(db: Path | str, version: str, browser: bool = True) -> pl.DataFrame:
    """The finished episodes of ``version``'s closed scorecards in the store ``db``."""
    return read_closed(str(db), [version], browser)[version]


async def _fill(location: Path | str, version: str, open_card: bool = False,
                truth: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """Every simulated agent closes one scorecard of all levels; solved ~ its ability."""
    ability, difficulty = truth or _truth()
    rng = np.random.default_rng(7)
    store = open_store(str(location))
    await store.start()
    try:
        for a, theta in enumerate(ability):
            key = f"k{a}"
            await store.create_key(KeyRecord(key, f"agent{a:02d}"), "c", "d", 10_000)
            card = f"card{a}"
            await store.open_scorecard(ScorecardRecord(card, key, f"agent{a:02d}",
                                                       {"standard": version}, 1.0), "d", 10_000)
            session = f"s{a}"
            await store.create_session(SessionRecord(session, card, key, "standard", version,
                                                     1, "PLAYING", 1.0, 1.0), range(LEVELS),
                                       10_000, 10_000, 0.0)
            p = 1 / (1 + np.exp(-1.5 * (theta - difficulty)))
            solved = rng.random(LEVELS) < p
            final = [EpisodeRecord(i, True, bool(s), not s, 10, "") for i, s in enumerate(solved)]
            if open_card and a == 0:
                continue  # an open scorecard is not evidence yet
            await store.close_scorecard(card, 2.0, {"success_rate": float(solved.mean()),
                                                    "move_efficiency": 1.0,
                                                    "deadlock_rate": 0.0, "games": {}},
                                        [Final(session, 0, tuple(final))])
    finally:
        await store.close()


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    root = tmp_path_factory.mktemp("irt")
    datasets = root / "datasets"
    shutil.copytree(DEMO, datasets / "demo")
    db = root / "store.sqlite"
    asyncio.run(_fill(db, "demo", open_card=True))
    return datasets, db


def test_reading_the_store_takes_finished_episodes_of_closed_scorecards_only(filled):
    _, db = filled
    episodes = closed_episodes(db, "demo")
    assert episodes.height == (AGENTS - 1) * LEVELS
    assert "agent00" not in set(episodes["name"].to_list())
    assert closed_episodes(db, "other").height == 0


def test_only_played_episodes_are_trials_and_a_names_scorecards_pool_them(tmp_path):
    """A scorecard closed early ends the levels it never reached unsolved with no step: no
    trial. One name's two scorecards are one agent's trials, each played level once per
    scorecard that played it."""
    async def fill() -> None:
        store = open_store(str(tmp_path / "s.sqlite"))
        await store.start()
        await store.create_key(KeyRecord("k", "ann"), "c", "d", 10)
        for n, played in enumerate((3, 0, 2)):  # levels played in each of ann's scorecards
            card, session = f"card{n}", f"s{n}"
            await store.open_scorecard(ScorecardRecord(card, "k", "ann", {"standard": "demo"},
                                                       1.0), "d", 10)
            await store.create_session(SessionRecord(session, card, "k", "standard", "demo",
                                                     1, "PLAYING", 1.0, 1.0), range(6), 10, 10, 0.0)
            final = [EpisodeRecord(i, True, i == 0 and i < played, False,
                                   4 if i < played else 0, "U" * (4 if i < played else 0))
                     for i in range(6)]
            await store.close_scorecard(card, 2.0, {"success_rate": 0.0, "move_efficiency": 0.0,
                                                    "deadlock_rate": 0.0, "games": {}},
                                        [Final(session, 0, tuple(final))])
        await store.close()

    asyncio.run(fill())
    episodes = closed_episodes(tmp_path / "s.sqlite", "demo")
    assert sorted(zip(episodes["scorecard"].to_list(), episodes["index"].to_list(),
                      strict=True)) == [("card0", 0), ("card0", 1), ("card0", 2),
                                        ("card2", 0), ("card2", 1)]
    datasets = tmp_path / "datasets"
    shutil.copytree(DEMO, datasets / "demo")
    _, report = refit(datasets, "demo", episodes)
    assert report["episodes"] == 5 and report["scorecards"] == 2
    assert report["agents"][0] | {"ability": 0} == {"name": "ann", "ability": 0,
                                                     "scorecards": 2, "episodes": 5,
                                                     "solved": 2}


def test_fit_recovers_the_simulated_difficulty_order_and_abilities(filled):
    datasets, db = filled
    manifest = (datasets / "demo" / "manifest.json").read_bytes()
    levels = (datasets / "demo" / "levels.parquet").read_bytes()
    out, report = refit(datasets, "demo", closed_episodes(db, "demo"))
    ability, difficulty = _truth()
    fitted = np.array([lv["empirical_difficulty"] for lv in report["levels"]])
    assert [lv["index"] for lv in report["levels"]] == list(range(LEVELS))
    assert spearman(fitted, difficulty) >= 0.9
    by_name = {a["name"]: a["ability"] for a in report["agents"]}
    fitted_ability = np.array([by_name[f"agent{a:02d}"] for a in range(1, AGENTS)])
    assert spearman(fitted_ability, ability[1:]) >= 0.9
    assert json.loads(out.read_text()) == report
    assert out == datasets / "demo" / "report" / "irt.json"
    # the finished version's own files never change
    assert (datasets / "demo" / "manifest.json").read_bytes() == manifest
    assert (datasets / "demo" / "levels.parquet").read_bytes() == levels


def test_fit_on_exact_probabilities_keeps_levels_everyone_solves_finite():
    agent = np.repeat(np.arange(3), 2)
    level = np.tile(np.arange(2), 3)
    trials = np.full(6, 4)
    solved = np.array([4, 0, 4, 1, 4, 2])  # level 0 always solved, level 1 rarely
    theta, b, a = fit_2pl(agent, level, trials, solved, 3, 2)
    assert np.isfinite(b).all() and b[0] < b[1]
    assert theta[0] < theta[1] < theta[2]


@pytest.mark.slow
def test_irt_command_reports_and_the_audit_shows_the_section(filled):
    datasets, db = filled
    result = CliRunner().invoke(main, ["irt", "demo", "--db", str(db), "--datasets",
                                       str(datasets)])
    assert result.exit_code == 0, result.output
    assert "39 agents" in result.output and "Spearman of empirical difficulty" in result.output
    from pipeline.audit.audit import audit
    from pipeline.audit.audit_report import Report

    markdown = Report(audit(datasets, "demo")).markdown()
    assert "## Difficulty from real results" in markdown


def test_irt_refuses_a_store_whose_tables_are_not_a_stores_in_one_line(filled, tmp_path):
    datasets, db = filled
    # its scorecards lost the column that says where they were played
    damaged = tmp_path / "damaged.sqlite"
    shutil.copy(db, damaged)
    with sqlite3.connect(damaged) as conn:
        conn.execute("ALTER TABLE scorecards DROP COLUMN source")
    result = CliRunner().invoke(main, ["irt", "demo", "--db", str(damaged), "--no-browser",
                                       "--datasets", str(datasets)])
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: cannot refit demo: cannot read the store {damaged}")
    assert len(result.output.strip().splitlines()) == 1


def test_irt_refuses_a_sqlite_file_that_is_not_a_store_and_leaves_it_untouched(filled, tmp_path):
    datasets, _ = filled
    other = tmp_path / "notes.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    before = other.read_bytes()
    result = CliRunner().invoke(main, ["irt", "demo", "--db", str(other), "--datasets",
                                       str(datasets)])
    assert result.exit_code == 2 and "is not a sokoforge store" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite"]


def test_irt_leaves_out_scorecards_a_store_marks_as_played_in_a_browser(filled, tmp_path):
    _, db = filled
    copy = tmp_path / "tagged.sqlite"
    shutil.copy(db, copy)
    with sqlite3.connect(copy) as conn:
        conn.execute("UPDATE scorecards SET source='browser' WHERE name='agent05'")
    kept = closed_episodes(copy, "demo", browser=False)
    assert "agent05" not in set(kept["name"].to_list())
    assert closed_episodes(copy, "demo", browser=True).height == kept.height + LEVELS


def test_irt_refuses_a_missing_store_or_version_in_one_line(filled, tmp_path):
    datasets, db = filled
    for args in (["demo", "--db", str(tmp_path / "none.sqlite")],
                 ["nosuch", "--db", str(db)],
                 ["demo", "--db", "postgresql://user:hunter2@127.0.0.1/store"]):
        result = CliRunner().invoke(main, ["irt", *args, "--datasets", str(datasets)])
        assert result.exit_code == 2 and result.output.startswith("Error: cannot refit")
        assert len(result.output.strip().splitlines()) == 1 and "hunter2" not in result.output


def test_irt_on_a_postgresql_store_fits_what_it_fits_on_sqlite_for_the_same_scorecards(
        filled, postgres, tmp_path):
    datasets, filled_db = filled
    db = tmp_path / "store.sqlite"
    shutil.copy(filled_db, db)
    url = postgres.database()
    asyncio.run(_fill(url, "demo", open_card=True))
    # a person's run on both, left out with --no-browser
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE scorecards SET source='browser' WHERE name='agent07'")
    asyncio.run(_mark_browser(url, "agent07"))
    for flags in ([], ["--no-browser"]):
        outputs, reports = [], []
        for store in (str(db), url):
            copy = tmp_path / f"datasets-{len(flags)}-{len(reports)}"
            shutil.copytree(datasets, copy)
            result = CliRunner().invoke(main, ["irt", "demo", "--db", store, *flags,
                                               "--datasets", str(copy)])
            assert result.exit_code == 0, result.output
            outputs.append(result.output.replace(str(copy), "DATASETS"))
            reports.append((copy / "demo" / "report" / "irt.json").read_bytes())
        assert outputs[0] == outputs[1] and reports[0] == reports[1]
        assert ("38 agents" if flags else "39 agents") in outputs[1]


async def _mark_browser(url: str, name: str) -> None:
    """Mark ``name``'s scorecards as played in the browser, as an operator's SQL would."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute("UPDATE scorecards SET source='browser' WHERE name=$1", name)
    finally:
        await conn.close()


def test_irt_command_says_the_rank_correlation_is_undefined_when_no_level_is_solved(filled,
                                                                                    tmp_path):
    datasets, _ = filled
    db = tmp_path / "hopeless.sqlite"
    asyncio.run(_fill(db, "demo", truth=(np.array([-50.0]), np.zeros(LEVELS))))
    result = CliRunner().invoke(main, ["irt", "demo", "--db", str(db), "--datasets",
                                       str(datasets)])
    assert result.exit_code == 0, result.output
    assert "(0/100 solved)" in result.output and "None" not in result.output
    assert "compute_to_solve: undefined (one of them is the same for every level" in result.output


def test_a_rounds_fit_pools_only_the_scorecards_closed_within_the_round(tmp_path):
    """ann solved 3 levels in the round; a practice scorecard she played after publication
    (all 6 levels, none solved) is not part of the round's fit, and the output says so."""
    from pipeline.versions.rounds import Round, record_round

    async def fill() -> None:
        store = open_store(str(tmp_path / "s.sqlite"))
        await store.start()
        await store.create_key(KeyRecord("k", "ann"), "c", "d", 10)
        for n, (closed, solved) in enumerate(((20.0, 3), (90.0, 0))):  # the round, practice
            card, session = f"card{n}", f"s{n}"
            await store.open_scorecard(ScorecardRecord(card, "k", "ann", {"standard": "demo"},
                                                       closed - 5), "d", 10)
            await store.create_session(SessionRecord(session, card, "k", "standard", "demo",
                                                     1, "PLAYING", 1.0, 1.0), range(6), 10, 10, 0.0)
            final = [EpisodeRecord(i, True, i < solved, False, 4, "UUUU") for i in range(6)]
            await store.close_scorecard(card, closed, {"success_rate": 0.0, "games": {},
                                                       "move_efficiency": 0.0,
                                                       "deadlock_rate": 0.0},
                                        [Final(session, 0, tuple(final))])
        await store.close()

    asyncio.run(fill())
    datasets = tmp_path / "datasets"
    shutil.copytree(DEMO, datasets / "demo")
    episodes = closed_episodes(tmp_path / "s.sqlite", "demo")
    assert episodes["scorecard"].n_unique() == 2  # the store holds both
    record_round(datasets / "demo", Round("demo", 10.0, 30.0, 31.0, "0" * 64, 60.0))
    result = CliRunner().invoke(main, ["irt", "demo", "--db", str(tmp_path / "s.sqlite"),
                                       "--datasets", str(datasets)])
    assert result.exit_code == 0, result.output
    assert "ann: ability" in result.output and "(3/6 solved)" in result.output
    assert "pooled: 1 scorecards closed within the round" in result.output
    assert "1 closed outside it left out" in result.output
    report = json.loads((datasets / "demo" / "report" / "irt.json").read_text())
    assert report["scorecards"] == 1 and report["pooled"]["left_out"] == 1
    (datasets / "demo" / "round.json").unlink()  # no round: every closed scorecard
    _, report = refit(datasets, "demo", episodes)
    assert report["agents"][0]["solved"] == 3 and report["agents"][0]["episodes"] == 12
    assert report["pooled"] == {"round": None, "scorecards": 2, "left_out": 0}
