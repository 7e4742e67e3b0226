"""Safe retries: a change numbered with its ``step`` is played once, however often it is sent;
sent again it is answered as it was first answered, on both faces, through workers and on
PostgreSQL, and the reference client that loses answers scores what an unbroken run scores."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from serve_support import LEVELS, Api, LossyProxy, Process, policy, server, visible_version

from serve.client import RandomAgent, play


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from serve.games.dataset import load_version

    root = tmp_path_factory.mktemp("datasets")
    info = visible_version(root, "t1", "standard", None)
    visible_version(root, "p1", "practice", "public")  # restarts allowed
    return {"root": root, "rows": info["rows"], "served": load_version(root, "t1"),
            "practice": load_version(root, "p1")}


@pytest.fixture(scope="module")
def srv(data, tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "store.sqlite"
    with server([data["served"], data["practice"]], db, keys_per_address_per_day=1000) as running:
        yield running


def begin(base: str, name: str, game: str = "standard",
          parallel: int = 1) -> tuple[Api, str, dict]:
    client = Api(base)
    client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
    card = client.ok("POST", "/api/scorecards")["scorecard_id"]
    return client, card, client.ok(
        "POST", f"/api/scorecards/{card}/games/{game}/start?parallel={parallel}")


def twice(client: Api, path: str, body: dict) -> tuple[int, bytes, bytes]:
    """Send ``body`` twice (each on its own connection); the status and both raw answers."""
    first = client.raw("POST", path, body)
    again = client.raw("POST", path, body)
    assert first[0] == again[0] == 200, (first, again)
    return first[0], first[2], again[2]


def test_a_step_sent_again_is_answered_as_first_and_played_once(srv, data):
    client, card, frame = begin(srv.base, "repeater")
    sid = frame["session_id"]
    assert frame["step"] == 0
    path = f"/api/sessions/{sid}/act"
    answers = {}
    while frame["state"] != "GAME_OVER":
        body = {"action": policy(data["rows"], frame), "step": frame["step"] + 1}
        _, first, again = twice(client, path, body)
        assert first == again  # frame, observation, state and score byte for byte
        answers[body["step"]] = (body, first)
        frame = client.ok("POST", path, body)  # a third time, long after
        assert frame["step"] == body["step"]
    # an early step, sent again once the game is over, is still its first answer
    for step in (1, len(answers) // 2, len(answers)):
        body, first = answers[step]
        assert client.raw("POST", path, body)[2] == first
    assert client.ok("GET", f"/api/sessions/{sid}")["step"] == len(answers)
    replay = client.ok("GET", f"/api/replays/{sid}")
    played = sum(len(e["actions"]) for e in replay["episodes"])
    assert played == len(answers)  # nothing played twice
    assert client.ok("POST", f"/api/scorecards/{card}/close")["total_actions"] == len(answers)


def test_a_step_that_skips_ahead_or_was_another_change_is_a_409_that_says_so(srv):
    client, _, frame = begin(srv.base, "skipper")
    path = f"/api/sessions/{frame['session_id']}/act"
    status, refusal = client.call("POST", path, {"action": 1, "step": 3})
    assert status == 409 and "skips ahead" in refusal["detail"] and "step 1" in refusal["detail"]
    frame = client.ok("POST", path, {"action": 1, "step": 1})
    status, refusal = client.call("POST", path, {"action": 2, "step": 1})
    assert status == 409 and "already played, as action 1" in refusal["detail"]
    status, refusal = client.call("POST", path, {"action": 1, "step": 0})
    assert status == 422
    assert client.ok("GET", f"/api/sessions/{frame['session_id']}")["step"] == 1


def test_a_numbered_restart_sent_again_restarts_once(srv):
    client, _, frame = begin(srv.base, "restarter", "practice")
    sid = frame["session_id"]
    client.ok("POST", f"/api/sessions/{sid}/act", {"action": 1, "step": 1})
    reset = {"step": 2}
    _, first, again = twice(client, f"/api/sessions/{sid}/reset", reset)
    assert first == again
    frame = client.ok("GET", f"/api/sessions/{sid}")
    assert frame["step"] == 2  # one level restart, not a level then a game restart
    status, refusal = client.call("POST", f"/api/sessions/{sid}/act", {"action": 0, "step": 2})
    assert status == 409 and "a level restart" in refusal["detail"]


def test_arc_actions_and_reset_sent_again_are_answered_as_first_and_played_once(srv):
    client, card, _ = begin(srv.base, "arc repeater", "practice")  # a native session too
    card = client.ok("POST", "/api/scorecard/open", {})["card_id"]
    game = "sokoban_p1"
    frame = client.ok("POST", "/api/cmd/RESET", {"card_id": card, "game_id": game})
    guid = frame["guid"]
    steps = [("ACTION2", {}), ("ACTION4", {}), ("RESET", {"card_id": card}),
             ("ACTION5", {}), ("ACTION1", {})]
    for number, (command, extra) in enumerate(steps, 1):
        body = {"game_id": game, "guid": guid, "step": number, **extra}
        _, first, again = twice(client, f"/api/cmd/{command}", body)
        assert first == again, command
    status, refusal = client.call("POST", "/api/cmd/ACTION1",
                                  {"game_id": game, "guid": guid, "step": len(steps) + 2})
    assert status == 409 and refusal["error"] == "STEP_AHEAD"
    native = client.ok("GET", f"/api/sessions/{guid}")
    assert native["step"] == len(steps)
    assert native["episode"]["steps_used"] == 4  # the restart kept the steps used


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_steps_sent_again_across_workers_are_played_once(data, tmp_path, request, store):
    db = tmp_path / "w.sqlite" if store == "sqlite" else request.getfixturevalue(
        "postgres").database()
    served = Process(data["root"], db, "--workers", "2", versions=("t1",))
    try:
        client, _, frame = begin(served.base, "worker repeater")
        path = f"/api/sessions/{frame['session_id']}/act"
        for _ in range(40):  # each on its own connection: either worker may take it
            body = {"action": policy(data["rows"], frame), "step": frame["step"] + 1}
            _, first, again = twice(client, path, body)
            assert first == again
            frame = client.ok("POST", path, body)
            if frame["state"] == "GAME_OVER":
                break
        assert client.ok("GET", f"/api/sessions/{frame['session_id']}")["step"] == body["step"]
        replay = client.ok("GET", f"/api/replays/{frame['session_id']}")
        assert sum(len(e["actions"]) for e in replay["episodes"]) == body["step"]
    finally:
        served.stop()


class CountingAgent(RandomAgent):
    """The random agent, counting the actions it chose (each is sent as one step)."""

    chosen = 0

    def act(self, obs, goal, action_history):
        CountingAgent.chosen += 1
        return super().act(obs, goal, action_history)


@pytest.mark.slow
def test_play_through_a_proxy_that_drops_answers_scores_as_an_unbroken_run(srv, capsys):
    """The proxy closes the connection after the server answered an act, one time in four:
    the client sends the same step again, and nothing is played twice."""
    said: list[str] = []

    def run(base: str, name: str) -> tuple[dict, int]:
        CountingAgent.chosen = 0
        factory = lambda: CountingAgent(7)  # noqa: E731 - one seed: the same actions each run
        outcome = asyncio.run(play(base, factory, name=name, echo=said.append, backoff=0.01))
        return outcome, CountingAgent.chosen

    unbroken, chosen = run(srv.base, "unbroken")
    with LossyProxy(srv.base, rate=0.25, seed=11) as proxy:
        broken, chosen_broken = run(proxy.base, "broken")
    owner = Api(srv.base, next(s for s in reversed(said) if "your key" in s).split()[-1])
    replay = owner.ok("GET", f"/api/replays/{broken['session_id']}")
    played = sum(len(e["actions"]) for e in replay["episodes"])
    applied_twice = played - chosen_broken
    with capsys.disabled():
        print(f"\nretry test: {proxy.dropped} answers dropped, {proxy.passed} passed, "
              f"{chosen_broken} actions chosen, {played} played, {applied_twice} applied twice")
    assert proxy.dropped >= 10
    assert applied_twice == 0 and chosen_broken == chosen
    assert broken["score"] == unbroken["score"]


def test_a_repeated_step_of_a_parallel_session_is_its_first_answer(srv, data):
    client = Api(srv.base)
    client.key = client.ok("POST", "/api/keys", {"name": "parallel repeater"},
                           status=201)["api_key"]
    card = client.ok("POST", "/api/scorecards")["scorecard_id"]
    frame = client.ok("POST", f"/api/scorecards/{card}/games/standard/start?parallel=2")
    path = f"/api/sessions/{frame['session_id']}/act"
    sent = []
    for number in range(1, 13):
        episode = frame["episodes"][number % len(frame["episodes"])]["index"]
        body = {"action": number % 4, "episode": episode, "step": number}
        status, _, answer = client.raw("POST", path, body)
        assert status == 200
        sent.append((body, answer))
        frame = client.ok("GET", f"/api/sessions/{frame['session_id']}")
        if frame["state"] == "GAME_OVER":
            break
    for body, answer in sent:
        assert client.raw("POST", path, body)[2] == answer
    other = {**sent[0][0], "episode": sent[0][0]["episode"] + 1}
    status, refusal = client.call("POST", path, other)
    assert status == 409 and "already played" in refusal["detail"]


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    """``serve --workers 2`` over 18 levels in two tiers of 9: 8 episodes in flight."""
    root = tmp_path_factory.mktemp("wide")
    visible_version(root, "w1", "standard", None, LEVELS * 3)
    served = Process(root, root / "w.sqlite", "--workers", "2", "--sessions-per-key", "50",
                     versions=("w1",))
    try:
        yield served
    finally:
        served.stop()


def test_an_act_sent_again_with_its_episode_step_is_played_once(srv):
    client, _, frame = begin(srv.base, "episode repeater", parallel=2)
    sid, first = frame["session_id"], frame["episodes"][0]
    assert first["step"] == 0
    path = f"/api/sessions/{sid}/act"
    body = {"action": 1, "episode": first["index"], "episode_step": 1}
    _, once, again = twice(client, path, body)
    assert once == again
    other = {"action": 0, "episode": frame["episodes"][1]["index"], "episode_step": 1}
    client.ok("POST", path, other)
    assert client.raw("POST", path, body)[2] == once  # still its first answer, after another
    now = client.ok("GET", f"/api/sessions/{sid}")
    assert now["step"] == 2 and [e["step"] for e in now["episodes"]] == [1, 1]
    status, refusal = client.call("POST", path, {**body, "episode_step": 3})
    assert status == 409 and "skips ahead" in refusal["detail"]
    status, refusal = client.call("POST", path, {**body, "action": 2})
    assert status == 409 and "already played, as action 1" in refusal["detail"]
    status, _ = client.call("POST", path, {"action": 1, "episode_step": 2})
    assert status == 400  # an episode's number without its episode


def test_the_last_act_of_an_episode_sent_again_is_its_first_answer_through_workers(
        two_workers):
    client, _, started = begin(two_workers.base, "last act repeater", parallel=4)
    sid, episode = started["session_id"], started["episodes"][0]
    path = f"/api/sessions/{sid}/act"
    answers = []
    for number in range(1, episode["max_steps"] + 1):  # to the end of its budget
        body = {"action": 0, "episode": episode["index"], "episode_step": number}
        _, once, again = twice(client, path, body)  # each on its own connection: any worker
        assert once == again
        answers.append((body, once))
        if json.loads(once)["last"]["episode_done"]:
            break
    assert json.loads(answers[-1][1])["last"]["episode_done"]
    for body, once in answers[::7] + answers[-1:]:  # the episode is over: still answered
        assert client.raw("POST", path, body)[2] == once
    assert client.ok("GET", f"/api/sessions/{sid}")["step"] == len(answers)


def test_racing_acts_on_different_episodes_through_two_workers_are_all_played(two_workers):
    client, _, frame = begin(two_workers.base, "racer", parallel=8)
    sid, episodes = frame["session_id"], [e["index"] for e in frame["episodes"]]
    rounds = 4
    gate = threading.Barrier(len(episodes))
    statuses: list[int] = []

    def race(episode: int) -> None:
        for number in range(1, rounds + 1):
            gate.wait(10)  # every episode's act sent at the same moment, round after round
            statuses.append(client.raw("POST", f"/api/sessions/{sid}/act", {
                "action": number % 4, "episode": episode, "episode_step": number})[0])

    threads = [threading.Thread(target=race, args=(e,)) for e in episodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert statuses == [200] * (rounds * len(episodes))  # never a 503, never a 409
    now = client.ok("GET", f"/api/sessions/{sid}")
    assert now["step"] == rounds * len(episodes)
    assert {e["index"]: e["step"] for e in now["episodes"]} == dict.fromkeys(episodes, rounds)


@pytest.mark.slow
def test_play_parallel_8_against_two_workers_finishes_without_an_error(two_workers):
    said: list[str] = []
    outcome = asyncio.run(play(two_workers.base, lambda: RandomAgent(3), name="eight at once",
                               parallel=8, echo=said.append, backoff=0.01))
    assert [line for line in said if "retrying" in line] == []
    assert "episodes finished: 18/18" in said
    owner = Api(two_workers.base, next(s for s in said if "your key" in s).split()[-1])
    replay = owner.ok("GET", f"/api/replays/{outcome['session_id']}")
    assert sum(len(e["actions"]) for e in replay["episodes"]) == outcome["score"]["total_actions"]
