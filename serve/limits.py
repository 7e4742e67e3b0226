"""The server's limits and the one rule for who a request comes from.

Every limit is a field here so the command line can set it; the client address is the
connecting peer unless that peer is a configured proxy, the only case where
``X-Forwarded-For`` is believed. An IPv6 client counts as its /64, the block one host
usually gets, so it cannot multiply its allowances by changing its low bits.
"""

from __future__ import annotations

__all__ = [
    "ConnectionLimits", "IPV6_BLOCK", "Limits", "Network", "address_subject", "client_address",
    "forwarded_client", "parse_networks", "subject_of", "trusted", "until_tomorrow", "utc_day",
]

import hashlib
import ipaddress
from dataclasses import dataclass, field
from datetime import UTC, datetime

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
ADDRESS_SHARE = 32  # by default one address may hold this fraction of the sessions in flight


@dataclass(frozen=True)
class Limits:
    """Allowances per address, key and server, and the idle time after which a session expires."""

    keys_per_address_per_day: int = 5
    scorecards_per_key_per_day: int = 24
    sessions_per_key: int = 3
    sessions_total: int = 200
    idle_seconds: float = 3600.0
    max_parallel: int = 32
    trusted_proxies: tuple[Network, ...] = field(default=())
    sessions_per_address: int | None = None  # None: ``address_sessions`` derives it

    def address_sessions(self) -> int:
        """Sessions one client address may have in flight, whatever its keys: the configured
        number, else a ``ADDRESS_SHARE``th of the server's total (at least one key's)."""
        if self.sessions_per_address is not None:
            return self.sessions_per_address
        return max(self.sessions_per_key, self.sessions_total // ADDRESS_SHARE)

    def public(self) -> dict:
        return {"keys_per_address_per_day": self.keys_per_address_per_day,
                "scorecards_per_key_per_day": self.scorecards_per_key_per_day,
                "sessions_in_flight_per_key": self.sessions_per_key,
                "sessions_in_flight_per_address": self.address_sessions(),
                "sessions_in_flight_total": self.sessions_total,
                "idle_minutes": round(self.idle_seconds / 60, 2),
                "max_parallel": self.max_parallel}


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a connection may take to send a request, and how many one address may hold.

    A request's headers must arrive within ``header_seconds`` of its first byte, its body
    within ``body_seconds`` of the headers; a connection with no request under way closes
    after ``idle_seconds``. ``per_address`` caps open connections per client address
    (``Limits.trusted_proxies`` are not capped: they carry many clients).
    """

    header_seconds: float = 10.0
    body_seconds: float = 30.0
    idle_seconds: float = 60.0
    per_address: int = 64


IPV6_BLOCK = 64


def address_subject(address: str) -> str:
    """What limits count for an address: itself for IPv4 (or an IPv4-mapped IPv6 address),
    its /64 for IPv6; anything unparseable as it is."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/{IPV6_BLOCK}", strict=False))
    return str(ip)


def subject_of(address: str) -> str:
    """The only form in which a client address is kept (what its limits count)."""
    return hashlib.sha256(address.encode()).hexdigest()


def utc_day(now: float) -> str:
    """The UTC day of ``now``, which daily allowances count in."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


def until_tomorrow(now: float) -> int:
    """Seconds to the next UTC midnight, when daily allowances start again."""
    return int(86400 - now % 86400) + 1


def parse_networks(values: tuple[str, ...] | list[str]) -> tuple[Network, ...]:
    """Addresses or CIDR blocks of trusted proxies; ``ValueError`` names a bad one."""
    out = []
    for v in values:
        for part in v.split(","):
            part = part.strip()
            if part:
                try:
                    out.append(ipaddress.ip_network(part, strict=False))
                except ValueError:
                    raise ValueError(f"not an IP address or network: {part!r}") from None
    return tuple(out)


def trusted(address: str, proxies: tuple[Network, ...]) -> bool:
    """Whether ``address`` lies in one of the trusted proxy networks."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in proxies)


def client_address(peer: str | None, forwarded_for: str | None,
                   proxies: tuple[Network, ...]) -> str:
    """The address a request counts against (``address_subject`` of ``forwarded_client``)."""
    return address_subject(forwarded_client(peer, forwarded_for, proxies))


def forwarded_client(peer: str | None, forwarded_for: str | None,
                     proxies: tuple[Network, ...]) -> str:
    """The client's address: the peer itself, unless it is a trusted proxy: then the
    rightmost ``X-Forwarded-For`` entry that is not itself a trusted proxy (entries left of
    it could be forged by anyone)."""
    peer = peer or "unknown"
    if not forwarded_for or not proxies or not trusted(peer, proxies):
        return peer
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        if not trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer
