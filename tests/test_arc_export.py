"""``sokoforge arc-export``: a public version as a local game of the ARC-AGI-3 toolkit, run by
``arc_agi.Arcade`` in OFFLINE mode and by the toolkit's own ``listen_and_serve``, answering
every action as the server's ARC face does (same frames, states, counts and restarts).

Nothing here may leave this machine: the toolkit is told OFFLINE, its base URL is a closed
loopback port, and ``loopback.install`` fails any other connection or name lookup.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import random
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import loopback
import numpy as np
import pytest
import requests
from arc_agi import Arcade, OperationMode
from arcengine import GameAction, GameState
from click.testing import CliRunner
from serve_support import server, visible_version, write_dataset

from engine.pictures.look import ARC_INDEX
from pipeline.versions.tables import read_parquet
from serve.arc import arc_wire as w
from serve.arc.arc_export import export_arc_game
from serve.games.dataset import load_version
from sokoforge.cli import main

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ROOT / "datasets"
VERSION = "public-S"
GAME_ID = w.game_id(VERSION)
LETTER_ACTION = {"u": GameAction.ACTION1, "d": GameAction.ACTION2, "l": GameAction.ACTION3,
                 "r": GameAction.ACTION4}
CLOSED_PORT_URL = "http://127.0.0.1:9"  # discard: nothing listens, and it is loopback
QUIET = logging.getLogger("arc-export-test")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """The toolkit configured not to call out (the environment outranks constructor arguments
    for OPERATION_MODE=competition), and any attempt to do so an error."""
    monkeypatch.setenv("OPERATION_MODE", "offline")
    monkeypatch.setenv("ARC_BASE_URL", CLOSED_PORT_URL)
    monkeypatch.setenv("ARC_API_KEY", "local-only")
    loopback.install(monkeypatch.setattr)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("environment_files")
    done = export_arc_game(DATASETS, VERSION, out)
    rows = read_parquet(DATASETS / VERSION / "levels.parquet").sort("index").to_dicts()
    return {"out": out, "done": done, "rows": rows}


@pytest.fixture(scope="module")
def practice_versions(tmp_path_factory):
    """Two small public versions whose spec says RESET restarts nothing, or only the level
    (that one drawn in the 16-colour ``arc`` look)."""
    root = tmp_path_factory.mktemp("datasets")
    for mode, look in (("none", "shared"), ("level", "arc")):
        visible_version(root, f"r{mode}", f"r{mode}", "public")
        path = root / f"r{mode}" / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest["spec"].update(restarts=mode, look=look)
        path.write_text(json.dumps(manifest))
    return root


@pytest.fixture(scope="module")
def servers(practice_versions, tmp_path_factory):
    """A sokoforge server on 127.0.0.1 for each version (the toolkit's online client finds a
    game by its base id, which names a server's first game): game id -> (URL, key)."""
    versions = [load_version(DATASETS, VERSION)] + [
        load_version(practice_versions, f"r{m}") for m in ("none", "level")]
    db = tmp_path_factory.mktemp("db")
    with ExitStack() as stack:
        out = {}
        for v in versions:
            running = stack.enter_context(server(v, db / f"{v.version}.sqlite",
                                                 keys_per_address_per_day=1000))
            r = requests.post(f"{running.base}/api/keys", json={"name": "arc-export"},
                              timeout=10)
            assert r.status_code == 201, r.text
            out[w.game_id(v.version)] = (running.base, r.json()["api_key"])
        yield out


def offline_arcade(environments: Path, recordings: Path) -> Arcade:
    return Arcade(operation_mode=OperationMode.OFFLINE, environments_dir=str(environments),
                  recordings_dir=str(recordings), logger=QUIET)


def online_arcade(url: str, key: str) -> Arcade:
    return Arcade(arc_api_key=key, arc_base_url=url, operation_mode=OperationMode.ONLINE,
                  logger=QUIET)


def seen(frame) -> tuple:
    """What an agent sees of an answer: state, counts, full_reset and every frame's bytes."""
    return (frame.state, frame.levels_completed, frame.win_levels, frame.full_reset,
            tuple(np.asarray(f, dtype=np.int8).tobytes() for f in frame.frame))


def act(env, action: GameAction):
    return env.reset() if action is GameAction.RESET else env.step(action)


def solution_actions(rows: list[dict]) -> list[GameAction]:
    return [LETTER_ACTION[c.lower()] for row in rows for c in row["solution"]]


def over(frame) -> bool:
    return frame.state in (GameState.WIN, GameState.GAME_OVER)


def lockstep(local, remote, choose, limit: int = 5000) -> list:
    """Play ``choose(step)`` on both games until the local one ends; every answer the same.
    Returns the answers, the first RESET's included."""
    assert seen(local.observation_space) == seen(remote.observation_space)
    frames = [local.observation_space]
    for n in range(limit):
        action = choose(n)
        mine, theirs = act(local, action), act(remote, action)
        assert mine is not None and theirs is not None, (n, action)
        assert seen(mine) == seen(theirs), f"step {n}: {action.name} answered differently"
        frames.append(mine)
        if over(mine):
            return frames
    raise AssertionError(f"no end after {limit} actions")


def test_export_writes_the_toolkit_layout_with_the_arc_face_game_object(exported, tmp_path):
    folder = exported["out"] / GAME_ID / VERSION
    assert exported["done"].folder == folder and exported["done"].game_id == GAME_ID
    assert sorted(p.name for p in folder.iterdir()) == ["metadata.json", "sokoban.py"]
    metadata = json.loads((folder / "metadata.json").read_text())
    served = load_version(DATASETS, VERSION)
    face = w.game_info(VERSION, served.game, [lv.optimal_moves for lv in served.levels], "game")
    assert metadata == {**face, "date_downloaded": served.manifest["created"]}
    assert metadata["baseline_actions"] == [r["optimal_moves"] for r in exported["rows"]]
    # the source stands alone: numpy and arcengine, nothing of sokoforge
    tree = ast.parse((folder / "sokoban.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names} | {n.module.split(".")[0] for n in ast.walk(tree)
                                     if isinstance(n, ast.ImportFrom)}
    assert imported == {"__future__", "numpy", "arcengine"}
    # the same version writes the same bytes
    again = export_arc_game(DATASETS, VERSION, tmp_path)
    for name in ("metadata.json", "sokoban.py"):
        assert (again.folder / name).read_bytes() == (folder / name).read_bytes()


def test_exported_source_documents_the_arc_palette_map_of_the_look(exported):
    namespace: dict = {}
    source = (exported["done"].folder / "sokoban.py").read_text()
    exec(compile(source, "sokoban.py", "exec"), namespace)
    assert namespace["GAME"]["palette"] == ARC_INDEX
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| ARC palette index"))
    assert [int(cell.split()[0]) for cell in row.strip("|").split("|")[1:]] == list(
        ARC_INDEX.values())


def test_offline_game_wins_on_the_stored_solutions_with_the_server_frames(exported, servers,
                                                                        tmp_path):
    url, key = servers[GAME_ID]
    arc = offline_arcade(exported["out"], tmp_path / "recordings")
    assert [e.game_id for e in arc.get_environments()] == [GAME_ID]
    local = arc.make(GAME_ID, save_recording=True)
    remote = online_arcade(url, key).make(GAME_ID)
    assert local is not None and remote is not None
    first = local.observation_space
    assert first.state is GameState.NOT_FINISHED and first.full_reset
    assert (first.levels_completed, first.win_levels) == (0, len(exported["rows"]))
    plan = solution_actions(exported["rows"])
    frames = lockstep(local, remote, lambda n: plan[n])
    assert len(frames) - 1 == len(plan)
    assert frames[-1].state is GameState.WIN
    assert frames[-1].levels_completed == len(exported["rows"])
    card = arc.close_scorecard()
    assert card is not None and card.score == 100.0
    recorded = list((tmp_path / "recordings").rglob(f"{GAME_ID}-*.jsonl"))
    assert len(recorded) == 1
    lines = [json.loads(line) for line in recorded[0].read_text().splitlines()]
    assert len(lines) == len(frames) and lines[-1]["data"]["state"] == "WIN"


@pytest.mark.parametrize("version, reset_share", [(VERSION, 0.02), ("rnone", 0.1),
                                                  ("rlevel", 0.1)])
@pytest.mark.slow
def test_random_play_with_resets_answers_as_the_server_to_the_end(exported, servers,
                                                                  practice_versions, tmp_path,
                                                                  version, reset_share):
    """Every action, ACTION5-7 (a step, no move), blocked moves, budgets running out and
    RESET as the version's restarts say (game: level or whole game; none; level), in the
    shared and the arc look."""
    game_id = w.game_id(version)
    url, key = servers[game_id]
    out = exported["out"]
    if version != VERSION:
        out = tmp_path / "environment_files"
        export_arc_game(practice_versions, version, out)
    local = offline_arcade(out, tmp_path / "recordings").make(game_id)
    remote = online_arcade(url, key).make(game_id)
    rng = random.Random(game_id)
    actions = [GameAction.from_id(n) for n in range(1, 8)]

    def choose(n: int) -> GameAction:
        if n in (40, 41):  # twice in a row: the second, after no action, restarts the game
            return GameAction.RESET
        return GameAction.RESET if rng.random() < reset_share else rng.choice(actions)

    frames = lockstep(local, remote, choose)
    assert frames[-1].state is GameState.GAME_OVER
    resets = [f.full_reset for f in frames[1:] if f.action_input.id is GameAction.RESET]
    ended = [len(f.frame) == 2 for f in frames[1:]]
    assert sum(ended) >= 3 and len(resets) >= 3  # levels ended, resets of each kind played
    assert any(resets) == (game_id == GAME_ID) and not all(resets)
    if version == "rlevel":  # the server refuses a RESET after the end
        again = local.reset()
        assert seen(again)[:4] == (GameState.GAME_OVER, frames[-1].levels_completed,
                                   frames[-1].win_levels, False)
        assert again.frame[0].tobytes() == np.asarray(frames[-1].frame[-1]).tobytes()
        return
    # after the end: 'game' starts every level again, 'none' shows the last frame
    mine, theirs = local.reset(), remote.reset()
    assert seen(mine) == seen(theirs)
    assert mine.full_reset == (game_id == GAME_ID)
    for action in (GameAction.ACTION4, GameAction.ACTION2, GameAction.RESET):
        if over(mine):
            break
        mine, theirs = act(local, action), act(remote, action)
        assert seen(mine) == seen(theirs)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_readmes_toolkit_snippet_runs_as_written_on_the_export(exported, tmp_path,
                                                                  monkeypatch):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    part = text.split("## In the ARC-AGI-3 toolkit", 1)[1]
    snippet = part.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("ENVIRONMENTS_DIR", str(exported["out"]))  # else ./environment_files
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(snippet, scope)
    assert scope["env"] is not None and scope["env"].observation_space is not None


def test_listen_and_serve_plays_the_export_and_records_it(exported, tmp_path):
    """The toolkit's own local server (as the ARC Prize harness runs submissions) plays the
    export to WIN for the toolkit's own client, and writes the run's recording."""
    port = _free_port()
    recordings = tmp_path / "recordings"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import loopback; loopback.install(); "
            "from arc_agi import Arcade, OperationMode; "
            "Arcade(operation_mode=OperationMode.OFFLINE, environments_dir=sys.argv[2], "
            "recordings_dir=sys.argv[3]).listen_and_serve(host='127.0.0.1', "
            "port=int(sys.argv[4]), save_all_recordings=True)")
    env = {**os.environ, "OPERATION_MODE": "offline", "ARC_BASE_URL": CLOSED_PORT_URL,
           "ARC_API_KEY": "local-only"}
    with open(tmp_path / "server.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).parent),
                                 str(exported["out"]), str(recordings), str(port)],
                                cwd=tmp_path, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
            try:
                if requests.get(f"{url}/api/healthcheck", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "listen_and_serve did not start"
            time.sleep(0.2)
        arc = online_arcade(url, "local-agent")
        assert [e.game_id for e in arc.get_environments()] == [GAME_ID]
        card_id = arc.open_scorecard(tags=["arc-export"])
        game = arc.make(GAME_ID, scorecard_id=card_id)
        assert game is not None
        plan = solution_actions(exported["rows"])
        for action in plan:
            last = game.step(action)
            assert last is not None
        assert last.state is GameState.WIN and last.levels_completed == len(exported["rows"])
        card = arc.close_scorecard(card_id)
        assert card is not None and card.environments[0].runs[0].state is GameState.WIN
    finally:
        proc.terminate()
        proc.wait(30)
    recorded = list((recordings / card_id).glob(f"{GAME_ID}-*.jsonl"))
    assert len(recorded) == 1, (tmp_path / "server.log").read_text()[-2000:]
    events = [json.loads(line)["data"] for line in recorded[0].read_text().splitlines()]
    assert len(events) == 1 + len(plan)  # the RESET that started it, then every action
    assert events[-1]["state"] == "WIN"
    assert events[-1]["levels_completed"] == len(exported["rows"])
    assert np.array_equal(np.array(events[-1]["frame"][-1], dtype=np.int8), last.frame[-1])


def test_hidden_versions_and_bad_names_are_refused_in_one_line(tmp_path):
    def refused(args: list[str], code: int) -> str:
        result = CliRunner().invoke(main, ["arc-export", *args])
        assert result.exit_code == code, result.output
        assert isinstance(result.exception, SystemExit), result.exception
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
        return lines[0]

    out = str(tmp_path / "out")
    assert "demo is a hidden version" in refused(["demo", out, "--datasets", str(DATASETS)], 1)
    assert "no version 'nope'" in refused(["nope", out, "--datasets", str(DATASETS)], 2)
    assert "is not allowed" in refused([VERSION, out, "--game-id", "a-b", "--datasets",
                                        str(DATASETS)], 2)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("game_id", ["..", ".", ".hidden", "../up", "a/b", "/abs", ""])
def test_a_game_id_that_is_not_one_safe_path_segment_is_refused_and_nothing_written(
        tmp_path, game_id):
    out = tmp_path / "box" / "out"
    result = CliRunner().invoke(main, ["arc-export", VERSION, str(out), "--game-id", game_id,
                                       "--datasets", str(DATASETS)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "is not allowed" in lines[0], result.output
    assert not any(tmp_path.rglob("*"))  # neither OUT nor anything beside it


def test_an_imported_version_that_says_no_visibility_is_exported(tmp_path):
    """Imported collections are public unless they say otherwise (as the server shows them)."""
    write_dataset(tmp_path / "datasets", "imp")
    path = tmp_path / "datasets" / "imp" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["generator"]["method"] = "imported"
    path.write_text(json.dumps(manifest))
    done = export_arc_game(tmp_path / "datasets", "imp", tmp_path / "out", "sk_imp")
    assert done.game_id == "sk_imp" and done.folder == tmp_path / "out" / "sk_imp" / "imp"
    arc = offline_arcade(tmp_path / "out", tmp_path / "recordings")
    env = arc.make("sk_imp")
    assert env is not None and env.observation_space.win_levels == done.levels == 6


def test_the_guard_refuses_any_address_but_loopback():
    with pytest.raises(loopback.NotLoopback):
        socket.create_connection(("192.0.2.1", 80), timeout=1)  # TEST-NET-1, never routed
    with pytest.raises(loopback.NotLoopback):
        socket.getaddrinfo("three.arcprize.org", 443)
    assert loopback.is_loopback("127.0.0.1") and loopback.is_loopback("::1")
