"""A real, throw-away PostgreSQL server for tests: ``initdb`` in a temporary folder, a free
port on 127.0.0.1, its socket in that folder, stopped and deleted at the end.

PostgreSQL refuses to run as root, so as root the cluster runs as ``nobody`` in a folder
owned by it. ``make test`` installs Debian's ``postgresql`` package when it is missing.
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "sokoforge"


def binaries() -> Path:
    """The newest PostgreSQL server's bin folder."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: run `make test` (it installs "
                           "Debian's postgresql package)")
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One PostgreSQL server; ``database()`` makes a fresh, empty database and returns its URL."""

    def __init__(self) -> None:
        self.bin = binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="sokoforge-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.count = 0
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.folder, "nobody", "nogroup")
            self.as_user = ["runuser", "-u", "nobody", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, cwd=self.folder)

    def start(self) -> Cluster:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, "-A", "trust",
                  "-E", "UTF8", "--no-sync")
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c max_connections=200")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options,
                  "-l", str(self.folder / "log"), "-w", "start")
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database's URL."""
        import asyncpg

        self.count += 1
        name = f"t{self.count}"

        async def create() -> None:
            conn = await asyncpg.connect(self.url())
            try:
                await conn.execute(f"CREATE DATABASE {name}")
            finally:
                await conn.close()

        asyncio.run(create())
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
