"""What a hostile client sends: ids that no store can hold, forged Host headers, malformed
HTTP, proxies' IPv6 clients; each is refused in JSON with a 4xx, never a 500."""

from __future__ import annotations

import json
import socket

import pytest
from serve_support import Api, server

from serve.limits import address_subject, client_address, parse_networks


def raw(base: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` as it is; the status, headers and body of the answer."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
            head, sep, body = got.partition(b"\r\n\r\n")
            if sep:
                headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
                length = int(headers.get("Content-Length", -1))
                if len(body) >= length >= 0:
                    break
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    return int(lines[0].split()[1]), dict(x.split(": ", 1) for x in lines[1:]), body


def post_raw_json(base: str, path: str, body: bytes, key: str) -> tuple[int, dict]:
    status, _, answer = raw(base, (f"POST {path} HTTP/1.1\r\nHost: t\r\nX-API-Key: {key}\r\n"
                                   f"Content-Type: application/json\r\n"
                                   f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                                   ).encode() + body)
    return status, json.loads(answer)


@pytest.mark.parametrize(("path", "body"), [
    ("/api/scorecard/close", rb'{"card_id": "\ud800"}'),
    ("/api/cmd/ACTION1", rb'{"game_id": "sokoban", "guid": "\ud800"}'),
    ("/api/cmd/RESET", rb'{"card_id": "\udfff", "game_id": "sokoban"}'),
    ("/api/cmd/RESET", rb'{"card_id": "sc-000000000000000000000000", "game_id": "\udfff"}'),
    ("/api/cmd/ACTION1", b'{"game_id": "sokoban", "guid": "gs-\xff\xfe"}'),
])
def test_lone_surrogates_and_undecodable_ids_on_the_arc_face_are_4xx_in_its_shape(srv, path,
                                                                                  body):
    key = Api(srv.base).ok("POST", "/api/keys", {"name": f"arc {len(path)}{len(body)}"},
                           status=201)["api_key"]
    status, answer = post_raw_json(srv.base, path, body, key)
    assert 400 <= status < 500 and set(answer) == {"error", "message"}, (status, answer)


def test_lone_surrogates_and_undecodable_ids_on_the_native_face_are_4xx_with_a_detail(srv):
    client = Api(srv.base)
    key = client.ok("POST", "/api/keys", {"name": "native odd"}, status=201)["api_key"]
    status, answer = post_raw_json(srv.base, "/api/keys", rb'{"name": "ab\ud800"}', key)
    assert status == 422 and "surrogate" in answer["detail"]
    status, answer = post_raw_json(srv.base, "/api/sessions/gs-%ED%A0%80/act",
                                   b'{"action": 1}', key)
    assert status == 404 and "no session" in answer["detail"]
    for path in ("/api/replays/gs-%ED%A0%80", "/api/replays/%ff%fe",
                 "/api/leaderboard?version=%ED%A0%80", "/api/scorecard/%ED%A0%80",
                 "/api/games/sokoban-%ff"):
        status, _, answer = raw(srv.base, f"GET {path} HTTP/1.1\r\nHost: t\r\nX-API-Key: {key}"
                                          f"\r\nConnection: close\r\n\r\n".encode())
        assert 400 <= status < 500 and json.loads(answer), (path, status, answer)


def landing(base: str, host: bytes | None) -> tuple[int, str]:
    header = b"" if host is None else b"Host: " + host + b"\r\n"
    status, _, body = raw(base, b"GET / HTTP/1.1\r\n" + header + b"Connection: close\r\n\r\n")
    return status, body.decode()


@pytest.mark.parametrize("host", [b"localhost:abc", b"x:99999", b"[", b"", b"evil.example",
                                  b"evil.example:8443"])
def test_the_home_page_never_fails_on_a_host_header_and_never_echoes_it(srv, host):
    status, page = landing(srv.base, host)
    assert status == 200 and "evil" not in page
    assert f"--url {srv.base} " in page  # the listening address, not the client's word


def test_the_pages_give_the_configured_public_url(data, tmp_path):
    with server(data["served"], tmp_path / "s.sqlite",
                public="https://sokoban.example.org/play/") as s:
        status, page = landing(s.base, b"evil.example")
        assert status == 200 and "evil" not in page and s.base not in page
        assert "--url https://sokoban.example.org/play " in page
        assert "ARC_BASE_URL=https://sokoban.example.org/play " in page


@pytest.mark.parametrize("url", ["ftp://x", "http://", "http://h:99999", "http://h/?q=1",
                                 "https://u:p@h", "not a url"])
def test_a_bad_public_url_is_refused_before_serving(url):
    from serve.app import public_url

    with pytest.raises(ValueError):
        public_url(url)


def test_every_429_says_when_to_retry_on_both_faces(data, tmp_path):
    with server(data["served"], tmp_path / "s.sqlite", keys_per_address_per_day=1,
                scorecards_per_key_per_day=1, sessions_per_key=1) as s:
        anon = Api(s.base)
        # A named key spends the address's one key of the day; anonymous keys have their own
        # allowance, spent by the first anonymous key.
        key = anon.ok("POST", "/api/keys", {"name": "first"}, status=201)["api_key"]
        anon.ok("GET", "/api/games/anonkey")
        client = Api(s.base, key)
        refusals = [anon.raw("POST", "/api/keys", {"name": "second"}),
                    anon.raw("GET", "/api/games/anonkey")]
        card = client.ok("POST", "/api/scorecard/open", {})["card_id"]
        refusals += [client.raw("POST", "/api/scorecard/open", {}),
                     client.raw("POST", "/api/scorecards")]
        client.ok("POST", "/api/cmd/RESET", {"card_id": card, "game_id": "sokoban"})
        for status, headers, body in refusals:
            assert status == 429 and int(headers["Retry-After"]) > 0, (status, headers, body)
            answer = json.loads(body)  # the native face's detail, the ARC face's message
            assert "try again" in answer.get("detail", answer.get("message", "")), answer


def test_ipv6_clients_behind_a_trusted_proxy_count_per_64(data, tmp_path):
    assert address_subject("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64"
    assert address_subject("::ffff:203.0.113.9") == "203.0.113.9"
    assert address_subject("203.0.113.9") == "203.0.113.9"
    proxies = parse_networks(["127.0.0.1"])
    assert client_address("127.0.0.1", "2001:db8::5", proxies) == "2001:db8::/64"
    assert client_address("2001:db8::7", None, ()) == "2001:db8::/64"
    with server(data["served"], tmp_path / "s.sqlite", keys_per_address_per_day=2,
                trusted_proxies=proxies) as s:
        def register(name: str, address: str) -> int:
            return Api(s.base).call("POST", "/api/keys", {"name": name},
                                    headers={"X-Forwarded-For": address})[0]

        assert [register(f"v6 {i}", f"2001:db8:0:7::{i:x}") for i in range(1, 5)] == [
            201, 201, 429, 429]
        assert register("v6 other", "2001:db8:0:8::1") == 201  # another /64 has its own


def test_a_malformed_request_gets_json_that_does_not_echo_it(srv):
    for request in (b"GET /api/spec HTTP/1.1\r\nX-API-Key lsk-secret-value\r\n\r\n",
                    b"GET / HTTP/1.1\r\nX-API-Key: lsk-secret-value\r\n\r\n",  # no Host
                    b"GET /\x00lsk-secret-value HTTP/1.1\r\nHost: t\r\n\r\n",
                    b"GET /api/spec HTTP/1.1\r\nX-API-Key: lsk-secret-value" + b"a" * 9000
                    + b"\r\n\r\n"):
        status, headers, body = raw(srv.base, request)
        assert 400 <= status < 500 and headers["Content-Type"].startswith("application/json")
        assert b"lsk-secret" not in body and json.loads(body)["detail"]


def test_html_pages_send_security_headers_and_refusals_are_json(srv):
    client = Api(srv.base)
    for path in ("/", "/leaderboard", "/api/docs"):
        status, headers, _ = client.raw("GET", path)
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["X-Content-Type-Options"] == "nosniff"
    for method, path, body in (("GET", "/nowhere", None), ("DELETE", "/", None),
                               ("POST", "/api/keys", "x" * 70000),
                               ("GET", "/leaderboard?limit=0", None),
                               ("GET", "/api/scorecard/open", None)):
        status, headers, answer = client.raw(method, path, body)
        assert 400 <= status < 500 and headers["Content-Type"].startswith("application/json")
        assert json.loads(answer)


@pytest.mark.parametrize(("args", "option"), [
    (["--public-url", "ftp://x"], "--public-url"),
    (["--header-timeout", "nan"], "--header-timeout"),
    (["--body-timeout", "nan"], "--body-timeout"),
    (["--idle-timeout", "nan"], "--idle-timeout"),
])
def test_the_serve_command_refuses_a_bad_connection_setting_in_one_line(tmp_path, args, option):
    from click.testing import CliRunner

    from sokoforge.cli import main

    result = CliRunner().invoke(main, ["serve", "--datasets", str(tmp_path), "--version", "t1",
                                       *args])
    assert result.exit_code == 2 and option in result.output
    assert isinstance(result.exception, SystemExit)
    assert len(result.output.strip().splitlines()) == 1
