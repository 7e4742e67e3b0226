"""The adaptive game's choices: each block of a session's levels, chosen as the agent plays.

A session of a pool (``serve.games.pool``) plays ``episodes`` levels in blocks of ``block``.
When every episode of a block has ended, the next block is chosen at the ability estimated
from the outcomes so far (``pipeline.scores.adaptive``: the most informative levels, at
random among the top few of the tier the content balance picks, never one already shown).
Each choice draws fresh randomness, so two sessions of one agent see different sequences;
the store records every choice (``EpisodeRecord.level``), and a session rebuilt from the
store replays the recorded levels rather than choosing again.

Serving choices, stated once:

- A client's ``?parallel=N`` is how many episodes it plays at once; in flight are at most N
  of the current block's unplayed episodes (all of them when N is at least the spec's
  ``parallel``), and a block is never opened before the one before it has ended.
- Exposure is held by the random pick among the ``TOP`` most informative levels of a tier,
  and capped: each process knows how many sessions showed each level (read from the store,
  and counted as it chooses: ``serve.arena.exposure``), and a choice passes over a level
  that would then be shown in more than ``MAX_EXPOSURE`` of them (``over_exposed``).
- Upstream's client plays only the game named ``standard``: ``sokoforge serve POOL --as
  standard`` serves a pool alone under that name (``/api/spec`` and the scorecards then
  name it ``standard``, and its ``adaptive`` object says what it is; the ARC face's
  ``/api/games`` names a game by its version, as for any game).
"""

from __future__ import annotations

__all__ = ["Choices", "ExposureCap"]

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from pipeline.scores.adaptive import (
    choose_block,
    equated_success,
    estimate,
    pad_unplayed,
    posterior,
)
from serve.games.dataset import ServedLevel
from serve.games.episode import Ability, EpisodeRun, Equated
from serve.games.pool import Pool


class ExposureCap(Protocol):
    """How often a pool's levels were shown, as the process serving it knows it
    (``serve.arena.exposure``): what to pass over, and what was chosen."""

    def blocked(self) -> np.ndarray | None:
        """The levels one more showing would take past the cap (None: no cap yet)."""

    def shown(self, levels: Sequence[int]) -> None:
        """``levels`` were just chosen for a session."""


@dataclass(eq=False)
class Choices:
    """One session's ``Chooser`` on ``pool`` (whose version's levels are ``levels``).

    ``recorded``: the levels the store holds for the session's first episodes, given again
    where a block reaches them (a replay of stored steps); past them, ``rng`` chooses,
    passing over the levels ``cap`` says were shown in too many sessions while a tier has
    others, and telling it what it chose."""

    pool: Pool
    levels: Sequence[ServedLevel]
    recorded: Sequence[int] = ()
    rng: np.random.Generator = field(default_factory=np.random.default_rng)
    cap: ExposureCap | None = None

    @property
    def episodes(self) -> int:
        return self.pool.episodes

    @staticmethod
    def _outcomes(episodes: list[EpisodeRun]) -> tuple[np.ndarray, np.ndarray]:
        """The levels ``episodes`` showed and which of them were solved."""
        return (np.array([e.served.index for e in episodes], dtype=np.int64),
                np.array([e.solved for e in episodes], dtype=bool))

    def _runs(self, start: int, levels: Sequence[int]) -> list[EpisodeRun]:
        return [EpisodeRun(self.levels[lv], place=start + i) for i, lv in enumerate(levels)]

    def block(self, episodes: list[EpisodeRun], size: int) -> list[EpisodeRun]:
        """The next ``size`` episodes: the recorded levels, else chosen at the ability
        ``episodes`` (all ended) show."""
        start = len(episodes)
        known = list(self.recorded[start:start + size])
        if len(known) == size:
            return self._runs(start, known)
        pool = self.pool
        shown, solved = self._outcomes(episodes)
        theta = estimate(pool.discrimination, pool.difficulty, shown, solved).theta
        blocked = None if self.cap is None else self.cap.blocked()
        picks = choose_block(theta, pool.discrimination, pool.difficulty, pool.tiers, shown,
                             pool.targets, parallel=size, rng=self.rng, blocked=blocked)
        if self.cap is not None:
            self.cap.shown(picks)
        return self._runs(start, picks)

    def padding(self, episodes: list[EpisodeRun]) -> list[EpisodeRun]:
        """The episodes a session closed early did not play: each a failure on the easiest
        level not yet shown of the tier the balance picks next (``pad_unplayed``)."""
        pool = self.pool
        shown, solved = self._outcomes(episodes)
        levels, _ = pad_unplayed(pool.difficulty, pool.tiers, shown, solved, pool.targets,
                                 pool.episodes)
        runs = self._runs(len(episodes), levels[len(episodes):].tolist())
        for run in runs:
            run.finish(False)
        return runs

    def measure(self, episodes: list[EpisodeRun]) -> tuple[Ability, Equated]:
        """The ability ``episodes`` show, and the success it equates to on the standard
        game's ramp, each with its 95% interval."""
        pool = self.pool
        shown, solved = self._outcomes(episodes)
        a, b = pool.discrimination, pool.difficulty
        ability = estimate(a, b, shown, solved)
        equated = equated_success(a, b, pool.ramp, posterior(a, b, shown, solved),
                                  model_sd=pool.model_sd)
        return ({"theta": ability.theta, "low": ability.low, "high": ability.high},
                {"value": equated.value, "low": equated.low, "high": equated.high})
