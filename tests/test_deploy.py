"""deploy/ as it is run: the server behind Debian's nginx with deploy/nginx-proxy.conf, on
loopback, counts the client nginx names (with --trust-proxy) and never a forged one, gives
--public-url on its pages whatever the Host, and the systemd unit passes systemd-analyze."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from serve_support import Process, write_dataset

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
PUBLIC = "https://sokoban.example.org"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _upstream(port: int) -> str:
    """The site file's upstream block, pointed at the test server's port."""
    site = (DEPLOY / "nginx-sokoforge.conf").read_text()
    block = re.search(r"upstream sokoforge \{.*?\}", site, re.S).group(0)
    assert "server 127.0.0.1:8000;" in block
    return block.replace("127.0.0.1:8000", f"127.0.0.1:{port}")


class Nginx:
    """nginx in the foreground on 127.0.0.1, its proxying the deploy/ include verbatim."""

    def __init__(self, tmp: Path, upstream_port: int) -> None:
        self.port = _free_port()
        conf = tmp / "nginx.conf"
        conf.write_text(f"""
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    {_upstream(upstream_port)}
    server {{
        listen 127.0.0.1:{self.port};
        server_name sokoban.example.org;
        include {DEPLOY / "nginx-proxy.conf"};
    }}
}}
""")
        checked = subprocess.run([NGINX, "-t", "-c", str(conf), "-p", str(tmp),
                                  "-g", "daemon off;"], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
        self.proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(tmp),
                                      "-g", "daemon off;"], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and self.proc.poll() is None, "no nginx"
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def _request(port: int, method: str, path: str, source: str, body: dict | None = None,
             headers: dict | None = None) -> tuple[int, str]:
    """A request to nginx from the loopback address ``source`` (a client other than the
    proxy itself), carrying a forged X-Forwarded-For unless told otherwise."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                      source_address=(source, 0))
    sent = {"Content-Type": "application/json", "X-Forwarded-For": "203.0.113.66",
            **(headers or {})}
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=sent)
    res = conn.getresponse()
    out = res.status, res.read().decode()
    conn.close()
    return out


def _clients(log: Path) -> list[str]:
    return [json.loads(line)["client"] for line in log.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("trusted", [True, False])
def test_behind_nginx_limits_count_the_client_nginx_names_only_when_trusted(tmp_path, trusted):
    write_dataset(tmp_path / "datasets", "t1")
    log = tmp_path / "access.log"
    extra = ["--keys-per-address", "1", "--public-url", PUBLIC, "--access-log", str(log),
             "--workers", "2"]
    if trusted:
        extra += ["--trust-proxy", "127.0.0.1"]
    server = Process(tmp_path / "datasets", tmp_path / "s.sqlite", *extra)
    proxy = Nginx(tmp_path, int(server.base.rsplit(":", 1)[1]))
    try:
        first = _request(proxy.port, "POST", "/api/keys", "127.0.0.2", {"name": "near"})
        again = _request(proxy.port, "POST", "/api/keys", "127.0.0.2", {"name": "near2"},
                         {"X-Forwarded-For": "198.51.100.7"})  # another forged address
        other = _request(proxy.port, "POST", "/api/keys", "127.0.0.3", {"name": "far"})
        page = _request(proxy.port, "GET", "/", "127.0.0.2", headers={"Host": "evil.example"})
    finally:
        proxy.stop()
        server.stop()
    assert first[0] == 201 and again[0] == 429, (first, again)
    if trusted:  # each client counted as itself, never as the address it claimed
        assert other[0] == 201, other
        assert sorted(_clients(log)) == ["127.0.0.2"] * 3 + ["127.0.0.3"]  # two workers
    else:  # every client is the proxy: one allowance for all of them
        assert other[0] == 429, other
        assert set(_clients(log)) == {"127.0.0.1"}
    assert page[0] == 200 and f"sokoforge play --url {PUBLIC} " in page[1]
    assert "evil.example" not in page[1]


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path):
    unit = (DEPLOY / "sokoforge.service").read_text()
    assert "--workers" in unit and "--trust-proxy 127.0.0.1" in unit and "--public-url" in unit
    here = unit.replace("/srv/sokoforge/.venv/bin/sokoforge",
                        str(Path(sys.executable).parent / "sokoforge"))
    (tmp_path / "sokoforge.service").write_text(here.replace("/srv/sokoforge", str(ROOT)))
    done = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "sokoforge.service")],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


def test_the_units_command_line_is_one_serve_accepts(tmp_path):
    """Every option of the unit's ExecStart is one of `sokoforge serve`'s."""
    import click

    from sokoforge.cli import main

    unit = (DEPLOY / "sokoforge.service").read_text()
    command = re.search(r"^ExecStart=(.*?)(?<!\\)$", unit, re.S | re.M).group(1)
    words = command.replace("\\\n", " ").split()
    assert words[1] == "serve"
    options = {o for p in main.commands["serve"].params if isinstance(p, click.Option)
               for o in p.opts}
    assert {w for w in words if w.startswith("--")} <= options
