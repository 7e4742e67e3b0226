"""Loopback only: connections and name lookups of anything but this machine fail loudly.

Tests of third-party clients (the ARC-AGI-3 toolkit calls its public server unless told not
to) install it, in process or in a child process, so a misconfiguration fails the test
instead of reaching the internet.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

LOOPBACK_NAMES = ("localhost", "localhost.", "ip6-localhost")


class NotLoopback(AssertionError):
    """A connection or lookup of an address other than loopback."""


def is_loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def install(patch: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch ``socket`` (through ``patch``: pytest's ``monkeypatch.setattr`` undoes it)."""
    connect, connect_ex, getaddrinfo = (socket.socket.connect, socket.socket.connect_ex,
                                        socket.getaddrinfo)

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not is_loopback(address[0]):
            raise NotLoopback(f"connection to {address!r} refused: loopback only")

    def guarded_connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        return connect(sock, address)

    def guarded_connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return connect_ex(sock, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not is_loopback(host):
            raise NotLoopback(f"name lookup of {host!r} refused: loopback only")
        return getaddrinfo(host, *args, **kwargs)

    patch(socket.socket, "connect", guarded_connect)
    patch(socket.socket, "connect_ex", guarded_connect_ex)
    patch(socket, "getaddrinfo", guarded_getaddrinfo)
