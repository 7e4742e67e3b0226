"""``sokoforge/Sokoban-v0`` as a Gymnasium ``VectorEnv``: N boards stepped and drawn by one call.

``gymnasium.make_vec("sokoforge/Sokoban-v0", num_envs=N, vectorization_mode=
"vector_entry_point", version=... | spec=...)`` builds it. Every step is one
``engine.vector.step_boards`` call over all N boards; the pictures are the single env's,
byte for byte. Sub-envs reset on the step after their episode ends (``AutoresetMode.NEXT_STEP``).
"""

from __future__ import annotations

__all__ = ["FreshLevels", "SokobanVectorEnv", "drawn_group"]

from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from engine.frames import TileAtlas
from engine.render import SIZE
from engine.vector import (
    BoardSlots,
    BoardTiles,
    begin_boards,
    frames_of,
    new_episodes,
    new_outcomes,
    step_boards,
)
from pipeline.errors import PipelineError
from pipeline.spec import Spec
from pipeline.trajectories import LEVELS_PER_LAYOUT, EpisodeLevel, fresh_levels
from sokoforge.sokoban_env import observation_space, open_source

AHEAD = 2  # levels left of a sub-env's group when its next group is asked for
INFO_KEYS = ("level", "steps", "noop", "pushed", "max_steps")


class SokobanVectorEnv(VectorEnv):
    """``num_envs`` Sokoban episodes on 64x64 RGB pictures, stepped together.

    Sources, looks, rewards, ``terminated``/``truncated`` and ``info`` (arrays: ``level``,
    ``steps``, ``noop``, ``pushed``, ``max_steps``) are the single env's. Sub-env k's episode
    j plays a level fixed by the reset seed, k and j. With ``copy=False`` the observations
    (and info arrays) are the env's own buffers, overwritten by the next step: no copy of the
    N pictures per step. ``workers`` processes draw a spec's fresh levels ahead of play.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8,
                "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, version: str | None = None,
                 spec: str | Path | Spec | None = None, datasets: str | Path | None = None,
                 allow_hidden: bool = False, render_mode: str | None = None,
                 copy: bool = True, workers: int = 1) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise PipelineError(f"num_envs must be a positive integer, not {num_envs!r}")
        if render_mode not in (None, "rgb_array"):
            raise PipelineError(f"render_mode {render_mode!r}: only 'rgb_array' is offered")
        self.source = open_source(version, spec, datasets, allow_hidden)
        self.num_envs = num_envs
        self.render_mode = render_mode
        self.copy = copy
        self.single_observation_space = observation_space()
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.single_action_space = spaces.Discrete(4)
        self.action_space = spaces.MultiDiscrete(np.full(num_envs, 4))
        self._obs = np.zeros((num_envs, SIZE, SIZE, 3), np.uint8)
        self._goal = np.zeros((num_envs, SIZE, SIZE, 3), np.uint8)
        self._obs_frames = frames_of(self._obs.reshape(num_envs, -1))
        self._goal_frames = frames_of(self._goal.reshape(num_envs, -1))
        self._out = new_outcomes(num_envs)
        self._masks = {f"_{k}": np.ones(num_envs, np.bool_) for k in INFO_KEYS}
        if self.source.spec is None:
            levels = self.source.levels
            self.slots = BoardSlots(len(levels))
            for i, chosen in enumerate(levels):
                self.slots.put(i, TileAtlas.for_level(chosen.level, chosen.look).board_tiles(),
                               chosen.max_steps, chosen.index)
            self._fresh: FreshLevels | None = None
            self._levels = len(levels)
        else:
            self.slots = BoardSlots(2 * num_envs)
            self._fresh = FreshLevels(self.source.spec, self.source.exclude_ids, num_envs,
                                      workers)
            self._levels = 0
        self._boards = self.slots.flat
        self._episodes = new_episodes(num_envs, self.slots.arrays.start_crates.shape[1])
        self._seeded = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode in every sub-env (or those of ``options["reset_mask"]``); a seed
        fixes the level of every later episode of every sub-env."""
        super().reset(seed=seed)
        options = options or {}
        mask = np.asarray(options.get("reset_mask", np.ones(self.num_envs, np.bool_)))
        if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
            raise PipelineError(f"options['reset_mask'] must be {self.num_envs} booleans")
        e = self._episodes
        if seed is not None or not self._seeded:
            words = np.random.SeedSequence(seed).generate_state(self.num_envs, np.uint64)
            e.seed[:] = words
            e.episode[:] = 0
            mask = np.ones(self.num_envs, np.bool_)
            if self._fresh is not None:
                self._fresh.restart(words)
                e.next_slot[:] = -1
            self._seeded = True
        e.over[mask] = True
        self._give_levels()
        begin_boards(mask, self._boards, e, self._levels, self._obs_frames,
                     self._goal_frames, self._out)
        return self._observation(), self._info()

    def step(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray,
                                          np.ndarray, dict[str, Any]]:
        """One action (0 up, 1 down, 2 left, 3 right) per sub-env, all played in one call."""
        if not self._seeded:
            raise PipelineError("call reset() before step()")
        acts = np.asarray(actions)
        if acts.shape != (self.num_envs,) or acts.dtype.kind not in "iu":
            raise PipelineError(f"actions must be {self.num_envs} integers 0-3")
        if acts.size and (acts.min() < 0 or acts.max() > 3):
            raise PipelineError("actions must be 0 (up), 1 (down), 2 (left) or 3 (right)")
        self._give_levels()
        step_boards(acts.astype(np.int64, copy=False), self._boards, self._episodes,
                    self._levels, self._obs_frames, self._goal_frames, self._out)
        out = self._out
        rewards, terminated, truncated = out.reward, out.terminated, out.truncated
        if self.copy:
            rewards, terminated, truncated = rewards.copy(), terminated.copy(), truncated.copy()
        return self._observation(), rewards, terminated, truncated, self._info()

    def render(self) -> tuple[np.ndarray, ...] | None:
        """Each sub-env's current picture (``render_mode="rgb_array"``)."""
        if self.render_mode != "rgb_array" or not self._seeded:
            return None
        return tuple(self._obs.copy())

    def close_extras(self, **kwargs: Any) -> None:
        if self._fresh is not None:
            self._fresh.close()

    def level_of(self, k: int) -> EpisodeLevel:
        """The level sub-env k is playing (a fresh one's solution and look included)."""
        s = int(self._episodes.slot[k])
        if self._fresh is None:
            return self.source.levels[s]
        return self._fresh.placed[s]

    def _give_levels(self) -> None:
        """Put a fresh next level in the free slot of every sub-env that has none (a spec)."""
        if self._fresh is None:
            return
        e = self._episodes
        for k in np.flatnonzero(e.next_slot < 0).tolist():
            ready = self._fresh.next_level(k, wait=bool(e.over[k]))
            if ready is None:
                continue
            # the slot its current episode does not use (the first: either)
            slot = 2 * k + ((1 - (int(e.slot[k]) - 2 * k)) if e.episode[k] else 0)
            chosen, tiles = ready
            self.slots.put(slot, tiles, chosen.max_steps)
            self._fresh.placed[slot] = chosen
            e.next_slot[k] = slot
        self._boards = self.slots.flat
        if self.slots.arrays.start_crates.shape[1] > e.crates.shape[1]:
            self._widen_episodes()

    def _widen_episodes(self) -> None:
        e = self._episodes
        crates = np.zeros((self.num_envs, self.slots.arrays.start_crates.shape[1]), np.int64)
        crates[:, :e.crates.shape[1]] = e.crates
        self._episodes = e._replace(crates=crates)

    def _observation(self) -> dict[str, np.ndarray]:
        if self.copy:
            return {"obs": self._obs.copy(), "goal": self._goal.copy()}
        return {"obs": self._obs, "goal": self._goal}

    def _info(self) -> dict[str, Any]:
        out = self._out
        info: dict[str, Any] = {"level": out.level, "steps": out.steps, "noop": out.noop,
                                "pushed": out.pushed, "max_steps": out.max_steps, **self._masks}
        if self.copy:
            info = {k: v.copy() for k, v in info.items()}
        return info


class FreshLevels:
    """A spec's fresh levels for each sub-env, drawn ahead in worker processes.

    Sub-env k's levels are ``fresh_levels(spec, seed_k, group)`` for groups 0, 1, ... in
    order, so they depend on the seed alone; the next group is asked for as soon as a
    sub-env starts on its current one, so play waits only when drawing is slower than play.
    """

    def __init__(self, spec: Spec, exclude_ids: frozenset[str], envs: int, workers: int) -> None:
        self.spec, self.exclude_ids, self.envs = spec, exclude_ids, envs
        # loky's processes, as the pipeline's workers: no fork of this process, and no
        # ``if __name__ == "__main__"`` needed in the user's script
        from joblib.externals.loky import ProcessPoolExecutor

        self.pool = ProcessPoolExecutor(max(1, workers))
        self.placed: dict[int, EpisodeLevel] = {}
        self.restart(np.zeros(envs, np.uint64))

    def restart(self, seeds: np.ndarray) -> None:
        """Forget every drawn level; sub-env k now draws from ``seeds[k]``."""
        self.seeds = [int(s) for s in seeds]
        self.group = [0] * self.envs
        self.ready: list[deque[tuple[EpisodeLevel, BoardTiles]]] = [
            deque() for _ in range(self.envs)]
        self.pending: list[Future | None] = [None] * self.envs
        self.placed.clear()
        self.fresh = False

    def next_level(self, k: int, wait: bool) -> tuple[EpisodeLevel, BoardTiles] | None:
        """Sub-env k's next level, or None if not drawn yet and ``wait`` is false."""
        if not self.fresh:
            for j in range(self.envs):  # every sub-env's first group, drawn in bulk
                self._ask(j)
            self.fresh = True
        if not self.ready[k]:
            future = self.pending[k]
            if future is None:
                self._ask(k)
                future = self.pending[k]
                assert future is not None
            if not wait and not future.done():
                return None
            self.ready[k].extend(future.result())
            self.pending[k] = None
        chosen = self.ready[k].popleft()
        if len(self.ready[k]) <= AHEAD:
            self._ask(k)
        return chosen

    def _ask(self, k: int) -> None:
        if self.pending[k] is None:
            self.pending[k] = self.pool.submit(drawn_group, self.spec, self.seeds[k],
                                               self.group[k], self.exclude_ids)
            self.group[k] += 1

    def close(self) -> None:
        for future in self.pending:
            if future is not None:
                future.cancel()
        self.pool.shutdown(wait=True)


def drawn_group(spec: Spec, seed: int, group: int, exclude_ids: frozenset[str]
                ) -> list[tuple[EpisodeLevel, BoardTiles]]:
    """One group of fresh levels with their tiles (run in a worker process)."""
    levels = fresh_levels(spec, seed, group, exclude_ids)
    assert len(levels) == LEVELS_PER_LAYOUT
    return [(chosen, TileAtlas.for_level(chosen.level, chosen.look).board_tiles())
            for chosen in levels]
