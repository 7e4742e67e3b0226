"""Human runs count: the audit shows per-level solve rates of the runs played in the browser,
and the store's read of closed runs can leave them out (for the difficulty fit)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from serve_support import Api, server

from engine.rules import lurd_to_actions
from serve.games.dataset import load_version
from serve.records.human_play import LevelRate, browser_episodes, solve_rates
from serve.stores import PlayedEpisode
from sokoforge.cli import main

DEMO = Path(__file__).resolve().parent.parent / "datasets" / "demo"


def run(base: str, name: str, source: str | None, solutions: list[str], solve: int,
        then: int = 0) -> None:
    """A closed scorecard solving the first ``solve`` levels, then ``then`` steps into the
    next one (which ends unsolved at closing)."""
    client = Api(base)
    client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
    card = client.ok("POST", "/api/scorecards", {"source": source} if source else None)
    frame = client.ok("POST", f"/api/scorecards/{card['scorecard_id']}/games/standard/start")
    for index in range(solve):
        for action in lurd_to_actions(solutions[index]):
            frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act",
                              {"action": action})
    for _ in range(then):
        frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 0})
    client.ok("POST", f"/api/scorecards/{card['scorecard_id']}/close")


def test_solve_rates_count_only_the_levels_a_person_stepped_in():
    def ep(card: str, index: int, solved: bool, steps: int) -> PlayedEpisode:
        return PlayedEpisode(card, "k", "n", "browser", index, solved, steps, False, level=index)

    rates = solve_rates([ep("a", 0, True, 5), ep("a", 1, False, 3), ep("a", 2, False, 0),
                         ep("b", 0, False, 9), ep("b", 1, True, 4)])
    assert rates == [LevelRate(0, 2, 1), LevelRate(1, 2, 1)]
    assert rates[0].rate == 0.5


@pytest.mark.slow
def test_the_audit_shows_how_people_fared_on_each_level_and_leaves_agents_out(tmp_path):
    root = tmp_path / "datasets"
    (root / "demo").mkdir(parents=True)
    for name in ("levels.parquet", "manifest.json"):
        shutil.copyfile(DEMO / name, root / "demo" / name)
    solutions = pq.read_table(DEMO / "levels.parquet", columns=["solution"]).column(
        "solution").to_pylist()
    db = tmp_path / "store.sqlite"
    with server(load_version(root, "demo"), db) as srv:
        run(srv.base, "person one", "browser", solutions, 2, then=3)
        run(srv.base, "person two", "browser", solutions, 1)
        run(srv.base, "an agent", None, solutions, 0, then=5)
    everyone = browser_episodes(str(db), "demo")
    assert {e.name for e in everyone} == {"person one", "person two"}

    result = CliRunner().invoke(main, ["audit", "demo", "--datasets", str(root),
                                       "--db", str(db)])
    assert result.exit_code == 0, result.output
    people = (root / "demo" / "report" / "people.md").read_text()
    assert "| 1 | 2 | 2 | 100% |" in people  # both solved level 1
    assert "| 2 | 1 | 1 | 100% |" in people  # one played level 2 and solved it
    assert "| 3 | 1 | 0 | 0% |" in people  # and stepped in level 3 without solving it
    assert "| 4 |" not in people and people in result.output

    result = CliRunner().invoke(main, ["audit", "demo", "--datasets", str(root),
                                       "--db", str(tmp_path / "missing.sqlite")])
    assert result.exit_code == 2 and "no store at" in result.output
    assert "Traceback" not in result.output
