"""Scores' precision over HTTP: success intervals on every face, paired marks on the
leaderboard, and a line's linked abilities, from a real server on 127.0.0.1."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from serve_support import Api, server

from engine.rules import lurd_to_actions
from pipeline.precision import paired_p_value, success_interval
from pipeline.scores.linking import LINE_FILE, link_line


def _agent(srv, name: str) -> Api:
    client = Api(srv.base)
    client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
    return client


def _play(client: Api, rows: list[dict], solve: int) -> tuple[str, dict, dict]:
    """Solve the first ``solve`` levels, then close: (scorecard id, last Frame, Score)."""
    sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
    frame = client.ok("POST", f"/api/scorecards/{sid}/games/standard/start")
    for row in rows[:solve]:
        for action in lurd_to_actions(row["solution"]):
            frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act",
                              {"action": action})
    return sid, frame, client.ok("POST", f"/api/scorecards/{sid}/close")


def test_every_score_carries_its_interval_on_both_faces_and_the_pages(srv, data):
    rows = data["rows"]
    tiers = [r["tier"] for r in rows]
    solver = _agent(srv, "solver")
    sid, frame, score = _play(solver, rows, len(rows))
    expected = success_interval([True] * len(rows), tiers)
    assert frame["state"] == "GAME_OVER" and frame["result"]["success_interval"] == expected
    assert score["success_interval"] == expected == score["games"]["standard"][
        "success_interval"]
    lo, hi = expected
    assert 0 < lo < 1.0 == hi  # six levels say little, even all solved
    assert solver.ok("POST", f"/api/scorecards/{sid}/close") == score
    view = solver.ok("GET", f"/api/scorecards/{sid}")
    assert view["score"]["success_interval"] == expected
    arc = solver.ok("GET", f"/api/scorecard/{sid}")
    assert arc["success_interval"] == expected == arc["result"]["success_interval"]
    page = solver.call("GET", f"/scorecards/{sid}")[1]
    assert f"95% interval {lo:.0%}&ndash;100%" in page


def test_leaderboard_marks_entries_a_paired_test_cannot_tell_from_the_one_above(data, tmp_path):
    with server(data["served"], tmp_path / "board.sqlite", keys_per_address_per_day=1000) as srv:
        _marks(srv, data["rows"])


def _marks(srv, rows: list[dict]) -> None:
    """On a board of its own: solver, then nobody, then nearly between them."""
    _play(_agent(srv, "solver"), rows, len(rows))
    _play(_agent(srv, "nobody"), rows, 0)
    board = Api(srv.base).ok("GET", "/api/leaderboard")
    names = [e["name"] for e in board["entries"]]
    assert names == ["solver", "nobody"]
    top, last = board["entries"]
    assert top["indistinguishable_from_above"] is None and top["paired_p_above"] is None
    # six levels all one way: the exact sign test gives 2 / 2^6
    assert last["paired_p_above"] == pytest.approx(2 / 64, abs=1e-4)
    assert last["indistinguishable_from_above"] is False
    assert last["success_interval"] == success_interval([False] * len(rows),
                                                        [r["tier"] for r in rows])
    assert "McNemar" in board["precision"]["indistinguishable_from_above"]
    # one that solved all but the last level sits between them and cannot be told from either
    _play(_agent(srv, "nearly"), rows, len(rows) - 1)
    entries = Api(srv.base).ok("GET", "/api/leaderboard")["entries"]
    assert [e["name"] for e in entries] == ["solver", "nearly", "nobody"]
    solved = {"solver": np.ones(6, bool), "nearly": np.arange(6) < 5, "nobody": np.zeros(6, bool)}
    for above, entry in zip(entries, entries[1:], strict=False):
        p = paired_p_value(solved[above["name"]], solved[entry["name"]])
        assert entry["paired_p_above"] == pytest.approx(p, abs=1e-4)
        assert entry["indistinguishable_from_above"] is (p >= 0.05)
    assert [e["indistinguishable_from_above"] for e in entries] == [None, True, True]
    page = Api(srv.base).call("GET", "/leaderboard")[1]
    assert page.count("&asymp; above</span></td>") == 2 and "interval</th>" in page


def test_the_line_leaderboard_shows_linked_abilities_once_irt_wrote_them(srv, data, request):
    client = Api(srv.base)
    status, body = client.call("GET", "/api/leaderboard/line")
    assert status == 404 and "sokoforge irt t1 --line" in body["detail"]
    rng = np.random.default_rng(1)
    episodes = {v: pl.DataFrame(
        [(f"a{g}", i, bool(rng.random() < 0.3 + 0.1 * g)) for g in range(5) for i in range(6)],
        schema={"name": pl.String, "index": pl.Int64, "solved": pl.Boolean}, orient="row")
        for v in ("t0", "t1")}
    report = link_line(episodes)
    folder = data["root"] / "t1" / "report"
    folder.mkdir(exist_ok=True)
    (folder / LINE_FILE).write_text(json.dumps(report))
    request.addfinalizer((folder / LINE_FILE).unlink)  # the module's other boards have no line
    line = client.ok("GET", "/api/leaderboard/line")
    assert line["version"] == "t1" and line["versions"] == ["t0", "t1"]
    assert [e["rank"] for e in line["entries"]] == [1, 2, 3, 4, 5]
    first = line["entries"][0]
    assert first["ability_interval"][0] < first["ability"] < first["ability_interval"][1]
    assert set(first["versions"]["t1"]) >= {"success_rate", "success_interval"}
    page = client.call("GET", "/leaderboard")[1]
    assert "line t0 → t1: ability on one scale" in page
    assert client.call("GET", "/api/leaderboard/line?game=nope")[0] == 404
