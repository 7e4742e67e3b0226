"""The reference client: the CLI plays whole games with any agent and retries what it should."""

from __future__ import annotations

import asyncio
import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from aiohttp import web
from click.testing import CliRunner
from serve_support import (
    Api,
    LossyProxy,
    ServerThread,
    SolutionAgent,
    server,
    solutions_by_goal,
    write_dataset,
)

from serve.client import ClientError, Connection, play
from serve.games.dataset import load_version
from serve.limits import Limits
from serve.play import Arena
from serve.stores.sqlite import SQLiteStore
from sokoforge.cli import main


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    info = write_dataset(root, "t1")
    SolutionAgent.solutions = solutions_by_goal(info["rows"])
    db = tmp_path_factory.mktemp("db") / "store.sqlite"
    with server(load_version(root, "t1"), db, keys_per_address_per_day=100) as running:
        yield running


@pytest.mark.parametrize("parallel", [1, 3])
def test_play_command_scores_what_the_agent_earns_and_ends_with_the_scorecards_page(srv, parallel):
    result = CliRunner().invoke(main, [
        "play", "--url", srv.base + "/", "--register", f"knower {parallel}",
        "--agent", "serve_support:SolutionAgent", "--parallel", str(parallel)])
    assert result.exit_code == 0, result.output
    score = json.loads(result.stdout.split("scorecard:")[0])
    assert score["success_rate"] == 1.0 and score["move_efficiency"] == 1.0
    assert "/api/replays/" not in result.stdout  # a page for people, not a JSON route
    page = result.stdout.strip().splitlines()[-1]
    assert page.startswith(f"scorecard: {srv.base}/scorecards/sc-")
    assert Api(srv.base).call("GET", page.split(srv.base)[1])[0] == 200
    assert "episodes finished: 6/6" in result.stderr


def test_play_command_with_an_existing_key_and_the_random_agent(srv):
    runner = CliRunner()
    first = runner.invoke(main, ["play", "--url", srv.base, "--register", "keeper",
                                 "--agent", "random", "--seed", "1"])
    assert first.exit_code == 0, first.output
    key = next(w for w in first.stderr.split() if w.startswith("lsk-"))
    again = runner.invoke(main, ["play", "--url", srv.base, "--key", key, "--agent", "random"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout.split("scorecard:")[0])["episodes"] == 6


@pytest.mark.parametrize(("args", "message"), [
    (["--register", "refused", "--agent", "nowhere:Agent"], "No module named"),
    (["--register", "refused", "--agent", "json:dumps"], "no reset() method"),
    (["--key", "lsk-unknown", "--agent", "random"], "401"),
    (["--agent", "random"], "exactly one of"),
    (["--url", "nonsense", "--register", "refused"], "http://HOST"),
    (["--url", "ftp://127.0.0.1", "--register", "refused"], "http://HOST"),
])
def test_play_command_refusals_are_one_line(srv, args, message):
    result = CliRunner().invoke(main, ["play", "--url", srv.base, *args])
    assert result.exit_code != 0 and message in result.output
    assert isinstance(result.exception, SystemExit)  # refused, not an escaped exception
    assert len(result.output.strip().splitlines()) == 1


def flaky_server(failures: list[int], retry_after: str | None = None):
    """An app answering the given statuses first, then 200; returns (base, hits, stop)."""
    hits = []

    async def handle(request: web.Request) -> web.Response:
        hits.append(request.path)
        if failures:
            headers = {"Retry-After": retry_after} if retry_after else None
            return web.json_response({"detail": "busy"}, status=failures.pop(0),
                                     headers=headers)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/x", handle)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box = {}

    def run():
        runner = web.AppRunner(app)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        box["base"] = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)

    def stop():
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    return box["base"], hits, stop


async def call_once(base: str, retries: int) -> dict:
    conn = Connection(base, retries=retries, backoff=0.01)
    try:
        return await conn.call("POST", "/x", {})
    finally:
        await conn.close()


def test_client_retries_429_and_5xx_with_backoff_but_not_other_4xx():
    base, hits, stop = flaky_server([429, 503, 500])
    try:
        assert asyncio.run(call_once(base, retries=3)) == {"ok": True} and len(hits) == 4
    finally:
        stop()
    base, hits, stop = flaky_server([404])
    try:
        with pytest.raises(ClientError, match="404"):
            asyncio.run(call_once(base, retries=3))
        assert len(hits) == 1
    finally:
        stop()


def test_client_says_what_it_retries_and_why():
    base, hits, stop = flaky_server([503, 429])
    told: list[str] = []

    async def call() -> dict:
        conn = Connection(base, retries=3, backoff=0.01, notify=told.append)
        try:
            return await conn.call("POST", "/x", {})
        finally:
            await conn.close()

    try:
        assert asyncio.run(call()) == {"ok": True}
    finally:
        stop()
    assert len(told) == 2
    assert told[0].startswith("retrying POST /x in 0.01 s (retry 1 of 3): POST /x: 503")
    assert told[1].startswith("retrying POST /x in 0.02 s (retry 2 of 3): POST /x: 429")


def test_client_does_not_wait_out_a_long_retry_after():
    base, hits, stop = flaky_server([429], retry_after="86400")
    try:
        with pytest.raises(ClientError, match="429"):
            asyncio.run(call_once(base, retries=3))
        assert len(hits) == 1
    finally:
        stop()


def test_client_retries_network_faults_then_gives_up():
    with pytest.raises(ClientError, match="gave up after 2 retries"):
        asyncio.run(call_once("http://127.0.0.1:9", retries=2))


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_lost_answer_to_an_action_is_not_played_twice(tmp_path, parallel):
    """The server plays an action, then drops the connection before answering (as a killed
    server would); the client finds the action played and does not send it again."""
    root = tmp_path / "datasets"
    info = write_dataset(root, "t1")
    SolutionAgent.solutions = solutions_by_goal(info["rows"])
    arena = Arena(load_version(root, "t1"), SQLiteStore(tmp_path / "s.sqlite"), Limits())
    acts, dropped = [], []

    @web.middleware
    async def drop_some_answers(request, handler):
        response = await handler(request)
        if request.path.endswith("/act"):
            acts.append(request.path)
            if len(acts) in (5, 14, 27):
                dropped.append(len(acts))
                request.transport.close()
        return response

    running = ServerThread(arena)
    running.app.middlewares.append(drop_some_answers)
    with running:
        outcome = asyncio.run(play(running.base, SolutionAgent, name="unlucky",
                                   parallel=parallel, echo=lambda line: None))
    assert len(dropped) == 3
    assert outcome["score"]["success_rate"] == 1.0
    assert outcome["score"]["move_efficiency"] == 1.0


def test_play_against_a_port_nobody_listens_on_fails_at_once_in_one_line():
    import socket
    import time

    with socket.socket() as probe:  # a free port, closed again: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    result = CliRunner().invoke(main, ["play", "--url", f"http://127.0.0.1:{port}",
                                       "--register", "nobody"])
    assert time.monotonic() - started < 5
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.output
    assert result.stderr.startswith(f"Error: cannot reach http://127.0.0.1:{port}: ")
    assert "is the server running there?" in result.stderr


def threads_of(pid: int) -> list[int]:
    """The ids of a process's threads, its own first (Linux)."""
    return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))


def _stderr_line_with(proc: subprocess.Popen, text: str, seconds: float) -> None:
    """Read ``proc``'s stderr until a line holds ``text`` (within ``seconds``)."""
    deadline = time.monotonic() + seconds
    line = ""
    while text not in line:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        assert time.monotonic() < deadline and proc.poll() is None, line
        if ready:
            line = proc.stderr.readline()


@pytest.mark.slow
def test_play_ends_on_ctrl_c_at_any_moment_with_130_and_one_line_within_2_s(srv):
    """SIGINT at random moments of real play: an action pending a little (answers 30 ms late)
    or for good (answers 60 s late), or none; to the process, or to one of its threads (the
    kernel gives a process's signal to any thread); each time 130 and one line, within 2 s."""
    rng = random.Random(16)
    script = str(Path(sys.executable).parent / "sokoforge")
    for run, delay in enumerate((0.03, 60.0, 0.03, 60.0)):
        with LossyProxy(srv.base, rate=0.0, seed=run, delay=delay) as proxy:
            proc = subprocess.Popen([script, "play", "--url", proxy.base, "--register",
                                     f"interrupted {run}", "--agent", "random"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                _stderr_line_with(proc, "registered", 60)
                time.sleep(rng.uniform(0.0, 0.6))
                assert proc.poll() is None, "the game ended before the interruption"
                began = time.monotonic()
                os.kill(rng.choice(threads_of(proc.pid)), signal.SIGINT)
                proc.wait(timeout=10)
                took = time.monotonic() - began
                out, err = proc.communicate(timeout=10)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert proc.returncode == 130, (run, err)
        assert took < 2.0, (run, took)
        assert [line for line in err.splitlines() if line.startswith("Error")] == [
            "Error: interrupted"] and "Traceback" not in err, err
        assert out == ""
