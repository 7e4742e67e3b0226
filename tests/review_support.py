"""Test support for the review: scorecards put straight into a store, played by the engine.

Each scorecard plays one version's levels in order, one stored action per write (with its
arrival in ms, as the server stores it), and is closed with a Score's fields, so the store
holds what a server would have written for the same play, without a server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from engine import episode as core
from engine.levels import parse_xsb
from serve.arena.keys import hash_key
from serve.games.episode import PLAYED
from serve.stores import (
    EpisodeRecord,
    Final,
    KeyRecord,
    ScorecardRecord,
    SessionRecord,
    Write,
    open_store,
)

DAY = "2026-12-01"
T0 = 1_900_000_000.0


def card_id(word: str) -> str:
    """A scorecard id as the server makes them (``sc-`` and 24 hex digits), from a word."""
    import hashlib

    return "sc-" + hashlib.sha256(word.encode()).hexdigest()[:24]


@dataclass
class Card:
    """One scorecard to store: its API key (stored hashed) and name, and per level (in play
    order) the letters ``UDLR.|`` it plays (an episode left unfinished waits out its budget),
    with ``think_ms`` before each episode's first action and ``pace_ms`` between the others."""

    card_id: str
    key: str
    name: str
    plays: Sequence[str]
    opened: float = T0
    think_ms: Sequence[int] = field(default_factory=list)
    pace_ms: int = 20


def levels_of(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / "levels.parquet").sort("index")


async def _put(store, version: str, name: str, levels: pl.DataFrame, card: Card) -> None:
    games = {name: version}
    key = hash_key(card.key)
    if await store.find_key(key) is None:
        await store.create_key(KeyRecord(key, card.name), "addr", DAY, 10_000)
    await store.open_scorecard(ScorecardRecord(card.card_id, key, card.name, games,
                                               card.opened), DAY, 10_000)
    sid = "gs-" + card.card_id.removeprefix("sc-")
    rows = list(levels.iter_rows(named=True))
    await store.create_session(SessionRecord(sid, card.card_id, key, name, version, 1,
                                             "IN_PROGRESS", card.opened, card.opened, 0, "w"),
                               range(len(rows)), 10_000, 10_000, card.opened - 60)
    seq, ms, records = 0, 0, []
    for i, row in enumerate(rows):
        letters = card.plays[i] if i < len(card.plays) else ""
        game = core.begin(parse_xsb(row["xsb"]), int(row["max_steps"]))
        played = ""
        for n, letter in enumerate(letters + "." * int(row["max_steps"])):
            if game.over:
                break
            if letter == "|":  # a level restart: no step used
                game = core.restart(game)
            else:
                game, _ = core.step(game, PLAYED.index(letter))
            played += letter
            ms += (card.think_ms[i] if i < len(card.think_ms) else 100) if n == 0 else card.pace_ms
            record = EpisodeRecord(i, game.over, game.solved, False, game.steps, played)
            await store.write(Write(sid, seq, "w", "w", card.opened + ms / 1000,
                                    PLAYED.index(letter), i, (record,), None, ms))
            seq += 1
        records.append(EpisodeRecord(i, True, game.solved, False, game.steps, played))
    solved = [r for r, row in zip(records, rows, strict=True) if r.solved]
    score = {"episodes": len(rows), "solved": len(solved),
             "success_rate": round(len(solved) / len(rows), 4),
             "move_efficiency": round(sum(
                 int(row["optimal_moves"]) / r.steps for r, row in zip(records, rows, strict=True)
                 if r.solved) / len(solved), 4) if solved else 0.0,
             "avg_steps_solved": round(sum(r.steps for r in solved) / len(solved), 2)
             if solved else 0.0,
             "deadlock_rate": 0.0, "total_actions": sum(r.steps for r in records)}
    result = {**score, "scorecard_id": card.card_id, "name": card.name, "version": version,
              "closed": True, "games": {name: score}, "session_ids": {name: sid},
              "versions": {name: version}}
    await store.close_scorecard(card.card_id, card.opened + ms / 1000 + 1, result,
                                [Final(sid, seq, tuple(records))])


def put_scorecards(location: str, folder: Path, cards: Sequence[Card]) -> None:
    """Store ``cards``, each played on the version in ``folder`` (as its manifest's game), in
    the store at ``location`` (made if need be)."""
    import json

    levels = levels_of(folder)
    game = json.loads((folder / "manifest.json").read_text())["game"]

    async def main() -> None:
        store = open_store(location)
        await store.start()
        try:
            for card in cards:
                await _put(store, folder.name, game, levels, card)
        finally:
            await store.close()
    asyncio.run(main())


def solutions(folder: Path) -> list[str]:
    """Every level's stored optimal solution as the letters a client sends."""
    return [s.upper() for s in levels_of(folder)["solution"].to_list()]
