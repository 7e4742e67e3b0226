"""Hostile connections: slow or idle clients are cut off in time, one address cannot hold every
socket, and running out of descriptors neither floods the log nor stops the server for good."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
import warm_cli
from serve_support import Api, server

from serve.limits import ConnectionLimits

ROOT = Path(__file__).resolve().parent.parent


def connect(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def read_until_closed(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took;
    fails if it is still open after ``limit`` seconds."""
    t0 = time.monotonic()
    sock.settimeout(limit)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except TimeoutError:
        pytest.fail(f"connection still open after {limit} s; received {got[:200]!r}")
    except ConnectionResetError:
        pass
    return got, time.monotonic() - t0


def status_and_body(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


SLOW = ConnectionLimits(header_seconds=0.5, body_seconds=0.5, idle_seconds=0.5)


@pytest.mark.slow
def test_an_idle_connection_is_closed_after_the_idle_timeout(data, tmp_path):
    with server(data["served"], tmp_path / "s.sqlite", connections=SLOW) as s:
        sock = connect(s.base)
        got, took = read_until_closed(sock, 5)
        assert got == b"" and took < 3
        # and so is one left idle after a request was answered (keep-alive)
        sock = connect(s.base)
        sock.sendall(b"GET /api/spec HTTP/1.1\r\nHost: x\r\n\r\n")
        got, took = read_until_closed(sock, 5)
        assert got.startswith(b"HTTP/1.1 200") and took < 3


def test_a_partial_header_is_answered_408_within_the_header_timeout(data, tmp_path):
    limits = ConnectionLimits(header_seconds=0.5, body_seconds=30, idle_seconds=30)
    with server(data["served"], tmp_path / "s.sqlite", connections=limits) as s:
        sock = connect(s.base)
        sock.sendall(b"GET /api/spec HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        for _ in range(3):  # trickling bytes does not extend the deadline
            time.sleep(0.2)
            sock.sendall(b"a")
        got, took = read_until_closed(sock, 5)
        status, body = status_and_body(got)
        assert status == 408 and "headers" in body["detail"] and took < 3


@pytest.mark.parametrize("path", ["/api/keys", "/api/scorecard/close"])
def test_a_short_body_is_answered_408_within_the_body_timeout(data, tmp_path, path):
    limits = ConnectionLimits(header_seconds=30, body_seconds=0.5, idle_seconds=30)
    with server(data["served"], tmp_path / "s.sqlite", connections=limits) as s:
        key = Api(s.base).ok("POST", "/api/keys", {"name": "slowpoke"}, status=201)["api_key"]
        sock = connect(s.base)
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nX-API-Key: {key}\r\n"
                     "Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"na".encode())
        got, took = read_until_closed(sock, 5)
        status, body = status_and_body(got)
        assert status == 408 and took < 3, got
        assert body.get("detail", body.get("message")) == "the request body did not arrive in time"


def test_the_per_address_cap_refuses_one_connection_more_with_429(data, tmp_path):
    limits = ConnectionLimits(per_address=3)
    with server(data["served"], tmp_path / "s.sqlite", connections=limits) as s:
        held = [connect(s.base) for _ in range(3)]
        time.sleep(0.2)
        extra = connect(s.base)
        got, _ = read_until_closed(extra, 5)
        status, body = status_and_body(got)
        assert status == 429 and b"\r\nRetry-After: " in got and "connections" in body["detail"]
        held.pop().close()
        time.sleep(0.2)
        assert Api(s.base).call("GET", "/api/spec")[0] == 200  # a freed slot is usable again
        for sock in held:
            sock.close()


def test_a_trusted_proxy_is_not_capped_since_it_carries_many_clients(data, tmp_path):
    from serve.limits import parse_networks

    with server(data["served"], tmp_path / "s.sqlite", connections=ConnectionLimits(
            per_address=2), trusted_proxies=parse_networks(["127.0.0.1"])) as s:
        held = [connect(s.base) for _ in range(4)]
        time.sleep(0.2)
        assert Api(s.base).call("GET", "/api/spec")[0] == 200
        for sock in held:
            sock.close()


DESCRIPTORS = 160  # the server's limit


@pytest.mark.slow
def test_running_out_of_descriptors_logs_a_few_lines_and_the_server_recovers(data, tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = warm_cli.start(
            ["serve", "--datasets", str(data["root"]), "--version", "t1", "--db",
             str(tmp_path / "s.sqlite"), "--port", "0", "--connections-per-address", "10000",
             "--idle-timeout", "600", "--header-timeout", "600"],
            stdout=out, stderr=out, cwd=ROOT, env=env, nofile=DESCRIPTORS)
    try:
        deadline = time.monotonic() + 120
        while b"serving" not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        base = log.read_text().split(" on ")[1].split(" ")[0]
        host, port = base.removeprefix("http://").split(":")
        held = []
        for _ in range(400):  # more than the server has descriptors, and than its backlog
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex((host, int(port)))
            held.append(sock)
        deadline = time.monotonic() + 20
        while "cannot accept connections" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
        time.sleep(2.5)  # two more retry rounds of accept() (one a second), no more lines
        text = log.read_text()
        assert len(text.splitlines()) < 10 and "Traceback" not in text, text[-2000:]
        for sock in held:
            sock.close()
        deadline = time.monotonic() + 20
        while True:
            try:
                if Api(base).call("GET", "/api/spec")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the server did not answer again"
            time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(30)
