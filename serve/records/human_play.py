"""How people fared on a version: per-level solve rates of the runs played in the browser.

The runs are read from a server's store (the closed scorecards whose source is ``browser``);
an episode counts for a level when the person took at least one step in it, so a run left
after level 3 says nothing about level 40.
"""

from __future__ import annotations

__all__ = ["LevelRate", "browser_episodes", "rates_markdown", "solve_rates"]

from collections.abc import Iterable
from dataclasses import dataclass

from serve.stores import PlayedEpisode, read_store


@dataclass(frozen=True)
class LevelRate:
    """One level's people: how many played it and how many of them solved it."""

    index: int
    players: int
    solved: int

    @property
    def rate(self) -> float:
        return self.solved / self.players if self.players else 0.0


def solve_rates(episodes: Iterable[PlayedEpisode]) -> list[LevelRate]:
    """Per level played at least once, in level order."""
    counts: dict[int, list[int]] = {}
    for e in episodes:
        if e.steps > 0:
            played = counts.setdefault(e.level, [0, 0])
            played[0] += 1
            played[1] += e.solved
    return [LevelRate(i, n, s) for i, (n, s) in sorted(counts.items())]


def browser_episodes(location: str, version: str) -> list[PlayedEpisode]:
    """The episodes of ``version``'s closed scorecards played in the browser, from the store
    at ``location`` (a SQLite file, which must exist, or a PostgreSQL URL); ``StoreError``
    when it cannot be read."""
    return read_store(location, lambda store: store.played_episodes(version, browser_only=True))


def rates_markdown(version: str, rates: list[LevelRate]) -> str:
    """The rates as a Markdown section."""
    lines = [f"# People on {version}", "",
             "Runs played in the browser (closed scorecards of source `browser`); a level "
             "counts the people who took a step in it.", "",
             "| level | people | solved | solve rate |", "| ---: | ---: | ---: | ---: |"]
    lines += [f"| {r.index + 1} | {r.players} | {r.solved} | {r.rate:.0%} |" for r in rates]
    return "\n".join(lines) + "\n"
