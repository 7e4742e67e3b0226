"""Whether a version is being served on this machine: a server holds a shared ``flock`` on
each served version's manifest for as long as it runs (its forked workers inherit it, and it
ends with the last of them, however they end), and a command that must not run under a
server (``reveal``, ``round publish``) asks for it exclusively without waiting.
"""

from __future__ import annotations

__all__ = ["ServedVersions", "is_served"]

import contextlib
import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from pipeline.versions.version import MANIFEST_FILE


class ServedVersions:
    """The claim of one server on the folders of the versions it serves."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self.fds: list[int] = []
        try:
            for folder in folders:
                fd = os.open(folder / MANIFEST_FILE, os.O_RDONLY)
                self.fds.append(fd)
                fcntl.flock(fd, fcntl.LOCK_SH)  # waits only for a check under way
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def is_served(folder: Path) -> bool:
    """Whether a server on this machine is serving the version in ``folder``."""
    try:
        fd = os.open(folder / MANIFEST_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
