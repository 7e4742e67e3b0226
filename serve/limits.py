"""The server's limits and the one rule for who a request comes from.

Every limit is a field here so the command line can set it; the client address is the
connecting peer unless that peer is a configured proxy, the only case where
``X-Forwarded-For`` is believed.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


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

    def public(self) -> dict:
        return {"keys_per_address_per_day": self.keys_per_address_per_day,
                "scorecards_per_key_per_day": self.scorecards_per_key_per_day,
                "sessions_in_flight_per_key": self.sessions_per_key,
                "sessions_in_flight_total": self.sessions_total,
                "idle_minutes": round(self.idle_seconds / 60, 2),
                "max_parallel": self.max_parallel}


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


def _trusted(address: str, proxies: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in proxies)


def client_address(peer: str | None, forwarded_for: str | None,
                   proxies: tuple[Network, ...]) -> str:
    """The address a request counts against.

    The peer itself, unless it is a trusted proxy: then the rightmost ``X-Forwarded-For``
    entry that is not itself a trusted proxy (entries left of it could be forged by anyone).
    """
    peer = peer or "unknown"
    if not forwarded_for or not _trusted(peer, proxies):
        return peer
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer
