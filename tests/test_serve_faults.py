"""The server under a hostile client: one answer per request, each built from its own action,
refusals as 4xx with a JSON body (never a 500, never a traceback in the log), sessions capped
per address and keys that another site's page cannot spend."""

from __future__ import annotations

import gzip
import json
import logging
import re
import socket
import threading
import time
import zlib
from pathlib import Path

import pytest
from serve_support import Api, server, visible_version, write_dataset
from test_serve_hostile import post_raw_json, raw

from serve.games.dataset import load_version
from serve.limits import ConnectionLimits, parse_networks


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    write_dataset(root, "t1")
    visible_version(root, "p1", "practice", "public")
    return {"served": load_version(root, "t1"), "practice": load_version(root, "p1")}


@pytest.fixture(scope="module")
def srv(data, tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "store.sqlite"
    with server([data["served"], data["practice"]], db, keys_per_address_per_day=1000,
                connections=ConnectionLimits(header_seconds=1.0, body_seconds=1.0)) as running:
        yield running


def keyed(base: str, name: str) -> Api:
    client = Api(base)
    client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
    return client


def started(client: Api, game: str = "standard") -> tuple[str, dict]:
    card = client.ok("POST", "/api/scorecards")["scorecard_id"]
    return card, client.ok("POST", f"/api/scorecards/{card}/games/{game}/start")


def test_a_reset_after_the_scorecard_closed_is_409_not_a_retry(srv):
    client = keyed(srv.base, "closer")
    card, frame = started(client, "practice")  # a public game: restarts allowed
    for action in (0, 1, 0):
        frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act", {"action": action})
    client.ok("POST", f"/api/scorecards/{card}/close")
    status, body = client.call("POST", f"/api/sessions/{frame['session_id']}/reset")
    assert status == 409 and "closed" in body["detail"]


def test_a_lone_surrogate_in_tags_is_refused_on_both_faces_and_never_stored(srv):
    client = keyed(srv.base, "tagger")
    body = rb'{"tags": ["fine", "\ud800"]}'
    status, answer = post_raw_json(srv.base, "/api/scorecards", body, client.key)
    assert status == 422 and "surrogate" in answer["detail"]
    status, answer = post_raw_json(srv.base, "/api/scorecard/open", body, client.key)
    assert status == 400 and answer["error"] == "VALIDATION_ERROR"
    card = client.ok("POST", "/api/scorecards", {"tags": ["fine"]})["scorecard_id"]
    assert client.ok("GET", f"/api/scorecards/{card}")["tags"] == ["fine"]


@pytest.fixture
def faults(caplog):
    """Every log record at INFO and above, to check that none carries a traceback."""
    caplog.set_level(logging.INFO)
    yield caplog
    assert [r.getMessage() for r in caplog.get_records("call")
            if r.exc_info or r.levelno >= logging.ERROR] == []


def coded(path: str, coding: str, body: bytes, key: str = "") -> bytes:
    """A POST of ``body`` as JSON under ``Content-Encoding: coding``."""
    return (f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            f"X-API-Key: {key}\r\nContent-Encoding: {coding}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.mark.parametrize("coding", ["gzip", "x-gzip"])
def test_a_body_that_is_not_its_content_encoding_is_a_400_with_a_json_detail(srv, faults,
                                                                           coding):
    status, headers, answer = raw(srv.base, coded("/api/keys", coding, b'{"name": "plain"}'))
    detail = json.loads(answer)["detail"]
    assert status == 400 and "Content-Encoding" in detail
    assert headers.get("Connection") == "close"  # the rest of the body is never read as a request


@pytest.mark.parametrize("coding", ["gzip", "x-gzip"])
def test_a_gzip_body_cut_short_or_trailed_by_more_is_a_400_at_once(srv, faults, coding):
    whole = gzip.compress(b'{"name": "never-made"}')
    for body in (whole[:-6], whole[:12], whole + b"more"):
        began = time.monotonic()
        status, _, answer = raw(srv.base, coded("/api/keys", coding, body))
        assert time.monotonic() - began < 0.9  # every announced byte came: nothing to wait on
        assert status == 400 and "Content-Encoding" in json.loads(answer)["detail"], answer


def test_an_x_gzip_body_is_read_as_gzip(srv):
    status, _, answer = raw(srv.base, coded("/api/keys", "x-gzip",
                                            gzip.compress(b'{"name": "zipped-alias"}')))
    assert status == 201 and json.loads(answer)["name"] == "zipped-alias"


@pytest.mark.parametrize("coding", ["deflate", "br", "zstd", "compress", "gzip, deflate", "rot13"])
def test_a_body_in_a_coding_not_taken_is_a_415_at_once_on_both_faces(srv, faults, coding):
    """Only gzip (and its alias x-gzip) is decoded; a lying ``deflate`` that looks like the
    start of a zlib stream is refused with the headers, not waited on until the body's
    deadline."""
    client = keyed(srv.base, f"coder {coding.replace(',', '')}")
    lying = zlib.compress(b'{"name": "never-read", "tags": ["a"]}')[:-6]
    for path, body in (("/api/keys", lying), ("/api/keys", b'{"name": "plain-text"}'),
                       ("/api/scorecard/open", lying)):
        began = time.monotonic()
        status, _, answer = raw(srv.base, coded(path, coding, body, client.key or ""))
        assert time.monotonic() - began < 0.9  # the fixture's body deadline is 1 s
        refusal = json.loads(answer)
        assert status == 415, (path, refusal)
        assert "Content-Encoding" in (refusal.get("detail") or refusal["message"])
        if path.startswith("/api/scorecard/"):
            assert refusal["error"] == "VALIDATION_ERROR"


@pytest.mark.parametrize("announced", [
    b"Content-Length: 500\r\n\r\nab",
    b"Transfer-Encoding: chunked\r\n\r\n5\r\nab",
    b"Content-Length: 500\r\nContent-Encoding: gzip\r\n\r\nab",
    b"Content-Length: 500\r\nContent-Encoding: deflate\r\n\r\nabcdefgh"])
@pytest.mark.slow
def test_a_get_whose_announced_body_never_arrives_leaves_no_traceback(srv, faults, announced):
    host, port = srv.base.removeprefix("http://").split(":")
    for hold in (0.1, 1.5):  # the client leaves before, or after, the server stops waiting
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"GET /api/spec HTTP/1.1\r\nHost: t\r\n" + announced)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            time.sleep(hold)
    time.sleep(0.3)


def answers_until_closed(base: str, parts: list[bytes | float], seconds: float) -> list[bytes]:
    """The status lines the server sends on one connection fed ``parts`` (a float pauses),
    read until it closes it or ``seconds`` pass."""
    host, port = base.removeprefix("http://").split(":")
    got = b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        for part in parts:
            if isinstance(part, float):
                time.sleep(part)
            else:
                sock.sendall(part)
        sock.settimeout(0.2)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
    return re.findall(rb"HTTP/1\.1 \d{3} [A-Za-z ]+", got)


@pytest.mark.slow
def test_a_413_or_a_body_408_is_the_one_answer_on_its_connection(srv):
    head = b"POST /api/keys HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
    too_large = head + b"Content-Length: 100000\r\n\r\n"
    # the rest of the body, sent after the refusal, is not a request whose headers are late
    assert answers_until_closed(srv.base, [too_large, b"x" * 70000, 0.3, b"y" * 30000],
                                3.0) == [b"HTTP/1.1 413 Request Entity Too Large"]
    slow = head + b"Content-Length: 100\r\n\r\n{"
    assert answers_until_closed(srv.base, [slow, 1.5, b" " * 99], 3.0) == [
        b"HTTP/1.1 408 Request Timeout"]


def test_concurrent_acts_on_one_session_each_answer_their_own_stored_step(srv):
    client = keyed(srv.base, "racer")
    _, frame = started(client)
    sid = frame["session_id"]
    # up and down along the wall: no push, and the episode's budget is not used up
    actions = [0, 1] * min(4, (frame["episode"]["max_steps"] - 1) // 2)
    gate = threading.Barrier(len(actions))
    answers: list[dict] = []

    def act(action: int) -> None:
        gate.wait()
        answers.append(client.ok("POST", f"/api/sessions/{sid}/act", {"action": action}))

    threads = [threading.Thread(target=act, args=(a,)) for a in actions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    steps = sorted(a["episode"]["steps_used"] for a in answers)
    assert steps == list(range(1, len(actions) + 1))  # distinct: each its own step
    stored = client.ok("GET", f"/api/replays/{sid}")["episodes"][0]["actions"]
    for answer in answers:  # the k-th stored action is the one answered with step k
        assert stored[answer["episode"]["steps_used"] - 1] == "UDLR"[answer["last"]["action"]]


def test_sessions_in_flight_are_capped_per_address_whatever_the_keys(data, tmp_path):
    proxies = parse_networks(["127.0.0.1"])  # so X-Forwarded-For tells test clients apart
    with server(data["served"], tmp_path / "s.sqlite", sessions_per_key=3, sessions_total=64,
                sessions_per_address=None, trusted_proxies=proxies,
                keys_per_address_per_day=100) as s:
        assert s.arena.limits.address_sessions() == 3  # at least a key's, a 32nd of the total
        near = {"X-Forwarded-For": "203.0.113.7"}
        first, second = keyed(s.base, "first"), keyed(s.base, "second")
        for _ in range(3):
            card = first.ok("POST", "/api/scorecards")["scorecard_id"]
            first.ok("POST", f"/api/scorecards/{card}/games/standard/start", headers=near)
        card = second.ok("POST", "/api/scorecards")["scorecard_id"]
        status, body = second.call("POST", f"/api/scorecards/{card}/games/standard/start",
                                   headers=near)
        assert status == 429 and "this address has 3 sessions" in body["detail"]
        second.ok("POST", f"/api/scorecards/{card}/games/standard/start",
                  headers={"X-Forwarded-For": "198.51.100.9"})  # another address may


def test_key_creation_refuses_other_sites_pages_and_form_posts(srv):
    client = Api(srv.base)
    body = json.dumps({"name": "visitor"}).encode()
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                    {"Origin": "https://elsewhere.example"}, {"Origin": "null"}):
        status, answer = client.call("POST", "/api/keys", data=body, headers=headers)
        assert status == 403 and "another site" in answer["detail"], headers
        status, answer = client.call("GET", "/api/games/anonkey", headers=headers)
        assert status == 400 and "another site" in answer["message"], headers
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        status, answer = client.call("POST", "/api/keys", data=body,
                                     headers={"Content-Type": kind})
        assert status == 415 and "application/json" in answer["detail"]
    host = srv.base.removeprefix("http://")
    client.ok("POST", "/api/keys", data=body, status=201,
              headers={"Sec-Fetch-Site": "same-origin", "Origin": srv.base})
    client.ok("GET", "/api/games/anonkey", headers={"Origin": f"http://{host}"})
    client.ok("GET", "/api/games/anonkey")  # an agent sends neither


def test_the_protocol_reference_says_what_keys_and_scorecard_pages_really_answer(srv):
    """A form's body is a 422 (it is not JSON), a name outside the pattern a 422 naming the
    characters allowed; an unknown scorecard's page is HTML, a malformed id's JSON."""
    from serve.native import NAME_RULE

    docs = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "protocol.md")
    rows: dict[str, str] = {}  # each route's row of the Routes table (the first one)
    for line in docs.read_text().splitlines():
        if line.startswith(("| POST `/api/keys`", "| GET `/scorecards/")):
            rows.setdefault(line.split("`")[1], line)
    client = Api(srv.base)
    status, answer = client.call("POST", "/api/keys", data=b"name=ann", headers={
        "Content-Type": "application/x-www-form-urlencoded"})
    assert status == 422 and "not valid JSON" in answer["detail"]
    status, answer = client.call("POST", "/api/keys", {"name": "ann+bob"})
    assert (status, answer["detail"]) == (422, f"name must be {NAME_RULE}")
    assert f"422 a name that is not {NAME_RULE}, or a body that is not JSON" in rows["/api/keys"]
    assert "`api_key`" in rows["/api/keys"] and "`scorecard_id`" in docs.read_text()
    status, headers, _ = client.raw("GET", "/scorecards/sc-" + "0" * 24)
    assert status == 404 and headers["Content-Type"].startswith("text/html")
    status, headers, body = client.raw("GET", "/scorecards/nope")
    assert status == 404 and json.loads(body)["detail"] == "no scorecard 'nope'"
    assert "404 HTML: no scorecard of that id; JSON" in rows["/scorecards/{scorecard_id}"]


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-2.5e400"])
def test_a_non_finite_number_anywhere_in_a_body_is_a_400_on_both_faces(srv, number):
    client = keyed(srv.base, f"finite {number.decode().lower()}")
    _, frame = started(client)
    for path, body, field in (
            ("/api/scorecards", b'{"opaque": %s}', "detail"),
            ("/api/scorecards", b'{"tags": ["a"], "opaque": {"deep": [1, {"x": %s}]}}', "detail"),
            (f"/api/sessions/{frame['session_id']}/act", b'{"action": %s}', "detail"),
            ("/api/scorecard/open", b'{"opaque": [%s]}', "message")):
        status, refusal = post_raw_json(srv.base, path, body % number, client.key)
        assert status == 400, (path, refusal)
        assert "finite" in refusal[field]
        if field == "message":
            assert refusal["error"] == "VALIDATION_ERROR"
    kept = client.ok("POST", "/api/scorecards", {"opaque": [1.5e300, -0.0]})["scorecard_id"]
    status, _, shown = raw(srv.base, (f"GET /api/scorecards/{kept} HTTP/1.1\r\nHost: t\r\n"
                                      f"X-API-Key: {client.key}\r\nConnection: close\r\n\r\n"
                                      ).encode())
    assert status == 200 and json.loads(shown)["opaque"] == [1.5e300, -0.0]
    assert b"NaN" not in shown and b"Infinity" not in shown  # the name is lower case
