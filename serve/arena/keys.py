"""API keys: created within a daily allowance per address, kept hashed, identified from a
cache of the keys this process has seen."""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
from collections.abc import Callable

from serve.arena.errors import Conflict, Limited, Unauthorized
from serve.limits import Limits, subject_of, until_tomorrow, utc_day
from serve.stores import ANONYMOUS, KeyRecord, Store, StoreConflict, StoreLimit

__all__ = ["KEY_PREFIX", "Keys", "hash_key"]

KEY_PREFIX = "lsk-"


def hash_key(api_key: str) -> str:
    """The only form in which a key is kept."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_network(address, strict=False).is_loopback
    except ValueError:
        return False


class Keys:
    """Creating and identifying keys over a ``Store`` (a key is immutable once stored, so
    every record found is cached)."""

    def __init__(self, store: Store, limits: Limits, clock: Callable[[], float]) -> None:
        self.store = store
        self.limits = limits
        self.clock = clock
        self._known: dict[str, KeyRecord] = {}

    async def create(self, name: str, address: str, anonymous: bool = False) -> str:
        """A new key bound to ``name``; the caller shows it once, the store keeps its hash.

        An ``anonymous`` key (``name`` starts with ``ANONYMOUS``, a prefix no other key may
        take) plays but is never ranked in a round, and an address's anonymous keys count
        against their own daily allowance, not against its named keys'."""
        if anonymous != name.casefold().startswith(ANONYMOUS):
            raise Conflict(f"names starting with {ANONYMOUS!r} are kept for anonymous keys; "
                           "choose another")
        api_key = KEY_PREFIX + secrets.token_urlsafe(24)
        record = KeyRecord(hash_key(api_key), name)
        limit = self.limits.keys_per_address_per_day
        counter = ("anonymous " if anonymous else "") + subject_of(address)
        try:
            await self.store.create_key(record, counter, utc_day(self.clock()), limit)
        except StoreConflict:
            raise Conflict(f"the name {name!r} is taken; choose another") from None
        except StoreLimit:
            hint = ""
            if _loopback(address):  # the operator testing on this machine
                hint = ("; testing locally? reuse a key (sokoforge play --key KEY) or start "
                        "the server with --keys-per-address 1000")
            kind = "anonymous keys" if anonymous else "keys"
            raise Limited(f"this address created {limit} {kind} today, the daily limit; "
                          f"try again tomorrow (UTC){hint}", until_tomorrow(self.clock())
                          ) from None
        self._known[record.key_hash] = record
        return api_key

    async def identify(self, api_key: str | None) -> KeyRecord:
        """The record of a known key; ``Unauthorized`` for a missing or unknown one."""
        if not api_key:
            raise Unauthorized("missing API key: send it as the X-API-Key header "
                               "(create one with POST /api/keys)")
        if not api_key.isascii():
            # keys are ASCII; a request can carry any byte, which arrives decoded to surrogates
            raise Unauthorized("unknown API key: create one with POST /api/keys")
        digest = hash_key(api_key)
        record = self._known.get(digest)
        if record is None:
            record = await self.store.find_key(digest)
            if record is None:
                raise Unauthorized("unknown API key: create one with POST /api/keys")
            self._known[digest] = record
        return record

    async def owner_of(self, api_key: str | None) -> KeyRecord | None:
        """The key's record if it is a known key, else None (for routes open to everyone)."""
        try:
            return await self.identify(api_key)
        except Unauthorized:
            return None
