"""Limits trip at their configured numbers; X-Forwarded-For counts only behind trusted proxies."""

from __future__ import annotations

import asyncio
import ipaddress
import json

import pytest
from serve_support import Api, server

from engine.rules import lurd_to_actions
from serve.limits import client_address, parse_networks


class Clock:
    """A settable clock so idle expiry is tested without waiting."""

    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


def register(base: str, name: str, forwarded: str | None = None) -> tuple[int, dict]:
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    return Api(base).call("POST", "/api/keys", {"name": name}, headers=headers)


def keyed(base: str, name: str) -> Api:
    status, body = register(base, name)
    assert status == 201, body
    return Api(base, body["api_key"])


def test_client_address_believes_forwarded_for_only_from_trusted_proxies():
    proxies = parse_networks(["10.0.0.0/8", "127.0.0.1"])
    assert client_address("203.0.113.9", "1.2.3.4", proxies) == "203.0.113.9"
    assert client_address("127.0.0.1", "1.2.3.4", proxies) == "1.2.3.4"
    # a client behind the proxy cannot pick its address by prepending entries
    assert client_address("127.0.0.1", "6.6.6.6, 1.2.3.4, 10.1.1.1", proxies) == "1.2.3.4"
    assert client_address("127.0.0.1", None, proxies) == "127.0.0.1"
    assert client_address("127.0.0.1", "1.2.3.4", ()) == "127.0.0.1"
    assert proxies[0] == ipaddress.ip_network("10.0.0.0/8")
    with pytest.raises(ValueError, match="not an IP"):
        parse_networks(["proxy.example"])


def test_keys_per_address_count_the_peer_when_no_proxy_is_trusted(data, tmp_path):
    with server(data["served"], tmp_path / "s.sqlite", keys_per_address_per_day=2) as s:
        assert register(s.base, "k1", "1.1.1.1")[0] == 201
        assert register(s.base, "k2", "2.2.2.2")[0] == 201
        status, body = register(s.base, "k3", "3.3.3.3")  # spoofed header changes nothing
        assert status == 429 and "2 keys today" in body["detail"]
        # the peer is this machine: the operator testing locally is told what to do
        assert "testing locally? reuse a key" in body["detail"]
        assert "--keys-per-address" in body["detail"]


def test_a_remote_client_at_its_key_limit_gets_no_local_testing_hint(data, tmp_path):
    proxies = parse_networks(["127.0.0.1"])
    with server(data["served"], tmp_path / "s.sqlite", keys_per_address_per_day=1,
                trusted_proxies=proxies) as s:
        assert register(s.base, "r1", "1.1.1.1")[0] == 201
        status, body = register(s.base, "r2", "1.1.1.1")
        assert status == 429 and "testing locally" not in body["detail"]


def test_keys_per_address_follow_forwarded_for_behind_a_trusted_proxy(data, tmp_path):
    proxies = parse_networks(["127.0.0.1"])
    with server(data["served"], tmp_path / "s.sqlite", keys_per_address_per_day=2,
                trusted_proxies=proxies) as s:
        assert register(s.base, "a1", "1.1.1.1")[0] == 201
        assert register(s.base, "a2", "1.1.1.1")[0] == 201
        assert register(s.base, "a3", "1.1.1.1")[0] == 429
        assert register(s.base, "b1", "2.2.2.2")[0] == 201


def test_scorecards_per_key_per_day_trip_at_the_limit(data, tmp_path):
    with server(data["served"], tmp_path / "s.sqlite", scorecards_per_key_per_day=3) as s:
        client = keyed(s.base, "daily")
        opened = [client.ok("POST", "/api/scorecards") for _ in range(3)]
        assert [o["opened_today"] for o in opened] == [1, 2, 3]
        assert opened[0]["daily_limit"] == 3
        status, headers, raw = client.raw("POST", "/api/scorecards")
        assert status == 429 and "3 scorecards today" in json.loads(raw)["detail"]
        assert 0 < int(headers["Retry-After"]) <= 86401
        assert keyed(s.base, "other").call("POST", "/api/scorecards")[0] == 200


def start(client: Api) -> tuple[int, dict]:
    sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
    return client.call("POST", f"/api/scorecards/{sid}/games/standard/start")


def test_sessions_in_flight_per_key_and_in_total_trip_and_finished_ones_free_a_slot(data,
                                                                                    tmp_path):
    with server(data["served"], tmp_path / "s.sqlite", sessions_per_key=2,
                sessions_total=3) as s:
        a, b = keyed(s.base, "ann"), keyed(s.base, "bea")
        first = start(a)[1]
        assert start(a)[0] == 200
        status, body = start(a)
        assert status == 429 and "2 sessions in flight" in body["detail"]
        assert start(b)[0] == 200
        status, body = start(b)
        assert status == 429 and "server has 3 sessions" in body["detail"]
        # finishing a session (not closing its scorecard) frees its slot
        frame = first
        for row in data["rows"]:
            for action in lurd_to_actions(row["solution"]):
                frame = a.ok("POST", f"/api/sessions/{frame['session_id']}/act",
                             {"action": action})
        assert frame["state"] == "GAME_OVER"
        assert start(b)[0] == 200


def test_idle_sessions_expire_after_the_configured_time_and_stop_counting(data, tmp_path):
    clock = Clock()
    with server(data["served"], tmp_path / "s.sqlite", clock=clock, sessions_per_key=1,
                idle_seconds=600) as s:
        client = keyed(s.base, "idler")
        first_card = client.ok("POST", "/api/scorecards")["scorecard_id"]
        frame = client.ok("POST", f"/api/scorecards/{first_card}/games/standard/start")
        path = f"/api/sessions/{frame['session_id']}/act"
        clock.now += 599
        assert client.call("POST", path, {"action": 1})[0] == 200
        assert start(client)[0] == 429
        clock.now += 601
        status, body = client.call("POST", path, {"action": 1})
        assert status == 404 and "expired" in body["detail"]
        second = start(client)[1]
        clock.now += 601  # the background sweep expires idle sessions nobody touches
        swept = asyncio.run_coroutine_threadsafe(s.arena.expire_idle(), s.loop).result(10)
        assert swept == 1
        third_card = client.ok("POST", "/api/scorecards")["scorecard_id"]
        client.ok("POST", f"/api/scorecards/{third_card}/games/standard/start")
        status, _ = client.call("GET", f"/api/sessions/{second['session_id']}")
        assert status == 404
        # the scorecard view says a session is expired, with nothing in flight, as soon as it
        # is idle too long, whether or not an action or the sweep noticed it first
        clock.now += 601
        for card in (first_card, third_card):
            view = client.ok("GET", f"/api/scorecards/{card}")["games"]["standard"]
            assert (view["state"], view["in_flight"], view["tier"]) == ("EXPIRED", [], None)


def test_parallel_above_the_configured_maximum_is_422(data, tmp_path):
    with server(data["served"], tmp_path / "s.sqlite", max_parallel=2) as s:
        client = keyed(s.base, "wide")
        sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
        status, body = client.call("POST",
                                   f"/api/scorecards/{sid}/games/standard/start?parallel=3")
        assert status == 422 and "from 1 to 2" in body["detail"]
        assert client.call("POST",
                           f"/api/scorecards/{sid}/games/standard/start?parallel=2")[0] == 200
