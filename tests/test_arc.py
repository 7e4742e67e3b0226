"""The ARC-AGI-3 face, played through the arc-agi toolkit itself in online mode.

A server runs on 127.0.0.1 over a small dataset; agents built on ``arc_agi.Arcade`` play it
unchanged. The toolkit drops (answers None for) any frame its ``FrameData`` model refuses, so
every non-None step is an answer the toolkit validated.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import socket
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from aiohttp import web
from arc_agi import Arcade, OperationMode
from arcengine import FrameData, GameAction, GameState
from serve.app import build_app
from serve.dataset import load_version
from serve.limits import Limits
from serve.play import Arena
from serve.sqlite_store import SQLiteStore

from engine.levels import parse_xsb
from engine.solver import solve
from serve import arc_wire as w

VERSION = "arc1"
GAME_ID = w.game_id(VERSION)
LEVELS = [  # (tier, xsb): easiest first, two tiers
    (0, "#####\n#@$.#\n#####"),
    (0, "######\n#@   #\n# $  #\n#  . #\n######"),
    (1, "#######\n#@    #\n# $$  #\n#  .. #\n#######"),
]
LETTER_ACTION = {"u": GameAction.ACTION1, "d": GameAction.ACTION2, "l": GameAction.ACTION3,
                 "r": GameAction.ACTION4}
QUIET = logging.getLogger("arc-test")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


def write_version(root: Path) -> list[dict]:
    """A finished dataset version of LEVELS (levels.parquet and its manifest); its rows."""
    rows = []
    for i, (tier, xsb) in enumerate(LEVELS):
        level = parse_xsb(xsb)
        result = solve(level)
        rows.append({"index": i, "tier": tier, "n_crates": level.n_crates,
                     "height": level.height, "width": level.width, "xsb": xsb,
                     "optimal_moves": result.moves, "optimal_pushes": result.pushes,
                     "solution": result.solution, "max_steps": 3 * result.moves})
    folder = root / VERSION
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "levels.parquet")
    digest = hashlib.sha256((folder / "levels.parquet").read_bytes()).hexdigest()
    manifest = {"format": 1, "version": VERSION, "game": "standard", "spec": {},
                "files": {"levels.parquet": {"sha256": digest, "rows": len(rows)}}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return rows


class Server:
    """The application on its own event loop in a thread, bound to a free loopback port."""

    def __init__(self, app: web.Application) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._call(self._start())

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    async def _start(self) -> None:
        await self.runner.setup()
        await web.SockSite(self.runner, self.sock).start()

    def stop(self) -> None:
        self._call(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    rows = write_version(root)
    arena = Arena(load_version(root, VERSION), SQLiteStore(root / "serve.db"),
                  Limits(keys_per_address_per_day=100))
    server = Server(build_app(arena))
    yield server.url, rows
    server.stop()


def new_key(url: str, name: str) -> str:
    r = requests.post(f"{url}/api/keys", json={"name": name}, timeout=10)
    assert r.status_code == 201, r.text
    return r.json()["api_key"]


def arcade(url: str, key: str) -> Arcade:
    return Arcade(arc_api_key=key, arc_base_url=url, operation_mode=OperationMode.ONLINE,
                  logger=QUIET)


def play_until_over(env, choose) -> list:
    """Step with ``choose(frame)`` until WIN or GAME_OVER; every answer must validate."""
    frames = [env.observation_space]
    while frames[-1].state is GameState.NOT_FINISHED:
        frame = env.step(choose(frames[-1]))
        assert frame is not None, "the toolkit refused or lost an answer"
        frames.append(frame)
    return frames


def test_solution_agent_completes_every_level_and_reaches_the_leaderboard(served):
    url, rows = served
    key = new_key(url, "arc-solver")
    arc = arcade(url, key)
    assert [e.game_id for e in arc.get_environments()] == [GAME_ID]
    env = arc.make("sokoban")
    assert env is not None and env.info.game_id == GAME_ID
    first = env.observation_space
    assert first.state is GameState.NOT_FINISHED and first.full_reset
    assert first.win_levels == len(rows) and first.levels_completed == 0
    assert env.action_space == [GameAction.ACTION1, GameAction.ACTION2, GameAction.ACTION3,
                                GameAction.ACTION4]
    moves = [LETTER_ACTION[c.lower()] for row in rows for c in row["solution"]]
    plan = iter(moves)
    frames = play_until_over(env, lambda frame: next(plan))
    assert len(frames) - 1 == len(moves)
    last = frames[-1]
    assert last.state is GameState.WIN and last.levels_completed == len(rows)
    # every solved level shows its last picture, then the next level's first one
    ends = [i for i in range(1, len(frames)) if frames[i].levels_completed
            > frames[i - 1].levels_completed]
    assert [len(frames[i].frame) for i in ends] == [2] * (len(rows) - 1) + [1]
    card = arc.close_scorecard()
    assert card is not None and card.total_levels_completed == len(rows)
    assert card.environments[0].runs[0].state is GameState.WIN
    assert card.score == 100.0
    board = requests.get(f"{url}/api/leaderboard", params={"version": VERSION}, timeout=10).json()
    mine = [e for e in board["entries"] if e["name"] == "arc-solver"]
    assert mine and mine[0]["success_rate"] == 1.0 and mine[0]["move_efficiency"] == 1.0


def test_random_agent_over_all_seven_actions_runs_to_the_end(served, monkeypatch):
    url, rows = served
    # configured only by the environment, with an empty key and a base URL ending in '/'
    monkeypatch.setenv("OPERATION_MODE", "online")
    monkeypatch.setenv("ARC_BASE_URL", url + "/")
    monkeypatch.setenv("ARC_API_KEY", "")
    arc = Arcade(logger=QUIET)
    assert arc.arc_api_key.startswith("lsk-")  # from GET /api/games/anonkey
    env = arc.make(GAME_ID)
    assert env is not None
    rng = random.Random(7)
    actions = [GameAction.from_id(n) for n in range(1, 8)]
    frames = play_until_over(env, lambda f: rng.choice(actions))
    assert frames[-1].state in (GameState.WIN, GameState.GAME_OVER)
    # ACTION5-7 and blocked moves still use steps: every step was one action of the budget
    card = arc.get_scorecard()
    played = card.environments[0].runs[0]
    assert played.actions == len(frames) - 1 <= sum(r["max_steps"] for r in rows)
    assert played.levels_completed == frames[-1].levels_completed
    # after the end, an action is refused and RESET shows the final picture again
    assert env.step(GameAction.ACTION1) is None
    again = env.reset()
    assert again is not None and again.state == frames[-1].state and not again.full_reset
    assert arc.close_scorecard() is not None


def _post(url, path, key, body):
    return requests.post(f"{url}{path}", json=body, headers={"X-API-Key": key}, timeout=10)


def _started(url, key):
    card = _post(url, "/api/scorecard/open", key, {"tags": ["t"]}).json()["card_id"]
    r = _post(url, "/api/cmd/RESET", key, {"card_id": card, "game_id": GAME_ID})
    assert r.status_code == 200, r.text
    return card, FrameData.model_validate(r.json())


def test_reset_on_a_running_game_returns_its_frame_and_changes_nothing(served):
    url, _ = served
    key = new_key(url, "arc-resetter")
    card, start = _started(url, key)
    moved = FrameData.model_validate(
        _post(url, "/api/cmd/ACTION4", key, {"game_id": GAME_ID, "guid": start.guid}).json())
    for body in ({"card_id": card, "game_id": GAME_ID, "guid": start.guid},
                 {"card_id": card, "game_id": "sokoban"}):
        again = FrameData.model_validate(_post(url, "/api/cmd/RESET", key, body).json())
        assert again.guid == start.guid and not again.full_reset
        assert again.frame == moved.frame[-1:] and again.levels_completed == moved.levels_completed
    view = requests.get(f"{url}/api/scorecard/{card}", headers={"X-API-Key": key},
                        timeout=10).json()
    assert view["environments"][0]["runs"][0]["actions"] == 1


def test_refusals_use_the_api_error_shape_and_change_nothing(served):
    url, _ = served
    owner, other = new_key(url, "arc-owner"), new_key(url, "arc-other")
    card, start = _started(url, owner)
    act = {"game_id": GAME_ID, "guid": start.guid}

    def refused(r, status, code):
        assert r.status_code == status, r.text
        body = r.json()
        assert body["error"] == code and body["message"]

    refused(requests.post(f"{url}/api/cmd/ACTION1", json=act, timeout=10), 401,
            w.AUTHENTICATION_ERROR)
    refused(_post(url, "/api/cmd/ACTION1", "lsk-nope", act), 401, w.AUTHENTICATION_ERROR)
    refused(_post(url, "/api/cmd/ACTION1", other, act), 404, w.GAME_NOT_STARTED_ERROR)
    refused(_post(url, "/api/cmd/ACTION1", owner, {**act, "guid": "gs-unknown"}), 404,
            w.GAME_NOT_STARTED_ERROR)
    refused(_post(url, "/api/cmd/ACTION1", owner, {**act, "game_id": "ls20"}), 404,
            w.GAME_NOT_AVAILABLE_ERROR)
    refused(_post(url, "/api/cmd/ACTION6", owner, {**act, "x": 64, "y": 0}), 400,
            w.VALIDATION_ERROR)
    refused(_post(url, "/api/cmd/ACTION1", owner, {"game_id": GAME_ID}), 400, w.VALIDATION_ERROR)
    refused(_post(url, "/api/cmd/ACTION5", owner, {**act, "reasoning": "x" * 20000}), 400,
            w.VALIDATION_ERROR)
    refused(_post(url, "/api/cmd/RESET", other, {"card_id": card, "game_id": GAME_ID}), 404,
            w.GAME_NOT_STARTED_ERROR)
    refused(_post(url, "/api/scorecard/close", other, {"card_id": card}), 404,
            w.NOT_FOUND_ERROR)
    refused(requests.get(f"{url}/api/games/ls20", timeout=10), 404, w.GAME_NOT_AVAILABLE_ERROR)
    # none of the refused calls used a step or closed the card
    view = requests.get(f"{url}/api/scorecard/{card}", headers={"X-API-Key": owner},
                        timeout=10).json()
    assert view["closed"] is False and view["environments"][0]["runs"][0]["actions"] == 0
    # a no-op action with its reasoning is answered, echoed, and uses one step
    noop = _post(url, "/api/cmd/ACTION6", owner, {**act, "x": 3, "y": 4, "reasoning": '{"a":1}'})
    frame = FrameData.model_validate(noop.json())
    assert frame.action_input.id is GameAction.ACTION6
    assert frame.action_input.data == {"game_id": GAME_ID, "x": 3, "y": 4}
    assert frame.action_input.reasoning == '{"a":1}' and frame.frame == start.frame
    closed = _post(url, "/api/scorecard/close", owner, {"card_id": card})
    assert closed.status_code == 200 and closed.json()["result"]["solved"] == 0
    refused(_post(url, "/api/cmd/ACTION1", owner, act), 400, w.VALIDATION_ERROR)
    refused(_post(url, "/api/cmd/RESET", owner, {"card_id": card, "game_id": GAME_ID}), 400,
            w.VALIDATION_ERROR)
    # closing again answers the same scorecard
    assert _post(url, "/api/scorecard/close", owner, {"card_id": card}).json() == closed.json()


def test_no_op_actions_survive_a_restart_of_the_server(tmp_path):
    rows = write_version(tmp_path)
    assert rows[0]["max_steps"] == 3

    def start() -> Server:
        arena = Arena(load_version(tmp_path, VERSION), SQLiteStore(tmp_path / "serve.db"),
                      Limits())
        return Server(build_app(arena))

    server = start()
    key = new_key(server.url, "arc-restart")
    card, first = _started(server.url, key)
    act = {"game_id": GAME_ID, "guid": first.guid}
    # two no-ops and a move into the wall use up the first level's 3 steps, unsolved
    answers = [FrameData.model_validate(_post(server.url, f"/api/cmd/ACTION{n}", key, act).json())
               for n in (5, 7, 3)]
    assert [len(a.frame) for a in answers] == [1, 1, 2]
    assert answers[0].frame == first.frame and answers[2].frame[0] == first.frame[0]
    server.stop()
    server = start()
    try:
        again = FrameData.model_validate(
            _post(server.url, "/api/cmd/RESET", key, {"card_id": card, "game_id": GAME_ID}).json())
        assert again.guid == first.guid and again.frame == answers[2].frame[-1:]
        view = requests.get(f"{server.url}/api/scorecard/{card}", headers={"X-API-Key": key},
                            timeout=10).json()
        run = view["environments"][0]["runs"][0]
        assert run["level_actions"] == [3, 0, 0] and run["levels_completed"] == 0
        nxt = _post(server.url, "/api/cmd/ACTION2", key, act)
        assert FrameData.model_validate(nxt.json()).state is GameState.NOT_FINISHED
    finally:
        server.stop()
