"""What the difficulty fit reads: each version's played episodes of closed scorecards, from a
server's store (a SQLite file or a PostgreSQL URL) through the ``Store`` interface, each on the
level it showed (its recorded ``level``: in an adaptive game no episode's index is its level).

Closing a scorecard ends every episode it never reached as unsolved; such an episode, with no
step taken, says nothing of its level or its player, so it is not a trial of the fit."""

from __future__ import annotations

__all__ = ["closed_episodes", "is_played"]

from collections.abc import Sequence

import polars as pl

from pipeline.scores.irt import episodes_table
from serve.stores import PlayedEpisode, Store, read_store


def closed_episodes(location: str, versions: Sequence[str],
                    browser: bool = True) -> dict[str, pl.DataFrame]:
    """Each version's ``pipeline.scores.irt.episodes_table`` of played episodes (``played``) from
    the store at ``location`` (read once for all of them), runs played in the browser left out
    unless ``browser``; ``StoreError`` when the store cannot be read."""
    async def read(store: Store) -> dict[str, list[PlayedEpisode]]:
        return {v: await store.played_episodes(v, include_browser=browser) for v in versions}

    played = read_store(location, read)
    return {v: episodes_table((e.name, e.scorecard_id, e.level, e.solved, e.steps, e.closed)
                              for e in episodes if is_played(e))
            for v, episodes in played.items()}


def is_played(episode: PlayedEpisode) -> bool:
    """Whether an episode is a trial: finished after at least one step (a level restart takes
    none, but is no step of play either)."""
    return episode.done and (episode.steps > 0 or episode.solved)
