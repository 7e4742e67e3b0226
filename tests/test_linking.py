"""Scores linked across a line of versions by the agents that played several of them."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from pipeline.scores.linking import (
    MIN_LINK_KEYS,
    link_line,
    read_line,
    version_line,
)
from pipeline.scores.simulated_agents import LevelPopulation, line_check, play
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


def test_linking_recovers_simulated_abilities_with_intervals_that_cover_them():
    checks = [line_check(30, 3, 0.5, seed) for seed in range(4)]
    assert all(c["scales"] == 1.0 for c in checks)
    assert min(c["correlation"] for c in checks) >= 0.95
    coverage = float(np.mean([c["coverage"] for c in checks]))  # 120 intervals
    assert 0.88 <= coverage <= 0.99, checks


def _episodes(names: list[str], theta: dict[str, float], shift: float,
              rng: np.random.Generator) -> pl.DataFrame:
    b, a = LevelPopulation().draw(rng)
    rows = [(n, i, bool(s)) for n in names for i, s in enumerate(play(theta[n], b + shift, a,
                                                                      rng))]
    return pl.DataFrame(rows, schema={"name": pl.String, "index": pl.Int64,
                                      "solved": pl.Boolean}, orient="row")


def test_an_agent_on_a_harder_round_scores_lower_raw_but_the_same_ability():
    """Same true ability, one on an easy version and one on a hard one: the raw success
    differs, the linked abilities agree within their intervals."""
    rng = np.random.default_rng(4)
    linkers = [f"l{i}" for i in range(12)]
    theta = {**{n: float(t) for n, t in zip(linkers, np.linspace(-1.5, 1.5, 12), strict=True)},
             "easy-only": 0.0, "hard-only": 0.0}
    report = link_line({"v1": _episodes(linkers + ["easy-only"], theta, -0.8, rng),
                        "v2": _episodes(linkers + ["hard-only"], theta, 0.8, rng)})
    agents = {x["name"]: x for x in report["agents"]}
    easy, hard = agents["easy-only"], agents["hard-only"]
    assert easy["versions"]["v1"]["success_rate"] - hard["versions"]["v2"]["success_rate"] > 0.15
    assert abs(easy["ability"] - hard["ability"]) < 0.6
    assert easy["ability_interval"][0] < 0.0 < easy["ability_interval"][1]
    assert report["scales"] == [["v1", "v2"]] and report["notes"] == []


def test_too_few_shared_keys_leave_two_versions_on_separate_scales_and_say_so():
    rng = np.random.default_rng(5)
    theta = {f"a{i}": float(t) for i, t in enumerate(np.linspace(-1, 1, 10))}
    names = list(theta)
    report = link_line({"v1": _episodes(names[:6], theta, 0.0, rng),
                        "v2": _episodes(names[6 - (MIN_LINK_KEYS - 1):], theta, 0.0, rng)})
    assert report["scales"] == [["v1"], ["v2"]]
    assert report["links"] == [{"a": "v1", "b": "v2", "keys": MIN_LINK_KEYS - 1,
                                "linked": False}]
    assert any("separate scales, not comparable" in n for n in report["notes"])
    assert {x["scale"] for x in report["agents"]} == {0, 1}


def _version(datasets: Path, name: str, parent: str | None) -> None:
    shutil.copytree(DEMO, datasets / name)
    manifest = json.loads((datasets / name / "manifest.json").read_text())
    manifest.update(version=name, rotated_from=parent)
    (datasets / name / "manifest.json").write_text(json.dumps(manifest))


async def _close(location: Path | str, plays: dict[str, list[str]],
                 theta: dict[str, float]) -> None:
    """Each name closes one scorecard of every level on each version it plays."""
    rng = np.random.default_rng(9)
    store = open_store(str(location))
    await store.start()
    try:
        for n in theta:
            await store.create_key(KeyRecord(f"k-{n}", n), "c", "d", 10_000)
        for v, names in plays.items():
            b, a = LevelPopulation().draw(rng)
            for n in names:
                card, session = f"c-{v}-{n}", f"s-{v}-{n}"
                await store.open_scorecard(ScorecardRecord(card, f"k-{n}", n, {"standard": v},
                                                           1.0), "d", 10_000)
                await store.create_session(SessionRecord(session, card, f"k-{n}", "standard", v,
                                                         1, "PLAYING", 1.0, 1.0), range(100),
                                           10_000, 10_000, 0.0)
                solved = play(theta[n], b, a, rng)
                await store.close_scorecard(
                    card, 2.0, {"success_rate": float(solved.mean()), "move_efficiency": 1.0,
                                "deadlock_rate": 0.0, "games": {}},
                    [Final(session, 0, tuple(EpisodeRecord(i, True, bool(s), False, 10, "")
                                             for i, s in enumerate(solved)))])
    finally:
        await store.close()


THETA = {f"agent{i}": float(t) for i, t in enumerate(np.linspace(-1.5, 1.5, 10))}
_NAMES = list(THETA)
LINE_PLAYS = {"demo": _NAMES[:8], "demo-r1": _NAMES[2:], "demo-r2": _NAMES[9:]}


@pytest.fixture(scope="module")
def line(tmp_path_factory):
    root = tmp_path_factory.mktemp("line")
    datasets = root / "datasets"
    _version(datasets, "demo", None)
    _version(datasets, "demo-r1", "demo")
    _version(datasets, "demo-r2", "demo-r1")
    _version(datasets, "other", None)
    db = root / "store.sqlite"
    asyncio.run(_close(db, LINE_PLAYS, THETA))
    return datasets, db


def test_a_line_is_every_version_rotated_from_one_another_oldest_first(line):
    datasets, _ = line
    assert version_line(datasets, "demo-r1") == ["demo", "demo-r1", "demo-r2"]
    assert version_line(datasets, "other") == ["other"]


def test_irt_line_links_the_versions_and_says_which_too_few_keys_link(line):
    datasets, db = line
    result = CliRunner().invoke(main, ["irt", "demo-r2", "--line", "--db", str(db),
                                       "--datasets", str(datasets)])
    assert result.exit_code == 0, result.output
    assert "line demo -> demo-r1 -> demo-r2: 2 separate scales: demo, demo-r1; demo-r2" \
        in result.output
    assert "demo-r1 and demo-r2: only 1 name(s) played both" in result.output
    report = read_line(datasets / "demo-r2")
    assert report is not None and report["fitted_on"] == "demo-r2"
    both = {x["name"]: x for x in report["agents"]}["agent5"]
    assert set(both["versions"]) == {"demo", "demo-r1"}
    lo, hi = both["ability_interval"]
    assert lo < both["ability"] < hi
    assert all(r["success_interval"][0] <= r["success_rate"] <= r["success_interval"][1]
               for r in both["versions"].values())
    # the versions' own files never change
    assert (datasets / "demo-r2" / "levels.parquet").read_bytes() == (
        DEMO / "levels.parquet").read_bytes()


def test_irt_line_without_any_closed_scorecard_refuses_in_one_line(line):
    datasets, db = line
    result = CliRunner().invoke(main, ["irt", "other", "--line", "--db", str(db),
                                       "--datasets", str(datasets)])
    assert result.exit_code == 2
    assert "no finished episode of a closed scorecard" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_irt_line_on_a_postgresql_store_links_what_it_links_on_sqlite(line, postgres, tmp_path):
    datasets, db = line
    url = postgres.database()
    asyncio.run(_close(url, LINE_PLAYS, THETA))
    outputs, reports = [], []
    for store in (str(db), url):
        copy = tmp_path / f"datasets-{len(reports)}"
        shutil.copytree(datasets, copy)
        result = CliRunner().invoke(main, ["irt", "demo-r1", "--line", "--db", store,
                                           "--datasets", str(copy)])
        assert result.exit_code == 0, result.output
        outputs.append(result.output.replace(str(copy), "DATASETS"))
        reports.append((copy / "demo-r1" / "report" / "line.json").read_bytes())
    assert outputs[0] == outputs[1] and reports[0] == reports[1]
    assert "agent5" in outputs[1]
