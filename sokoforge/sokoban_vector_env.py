"""``sokoforge/Sokoban-v0`` as a Gymnasium ``VectorEnv``: N boards stepped and drawn by one call.

``gymnasium.make_vec("sokoforge/Sokoban-v0", num_envs=N, vectorization_mode=
"vector_entry_point", version=... | spec=...)`` builds it. Every step is one
``engine.pictures.vector.step_boards`` call over all N boards; the pictures are the single env's,
byte for byte. A sub-env resets on the step after its episode ends (``AutoresetMode.NEXT_STEP``,
the default) or in that same step (``autoreset_mode=AutoresetMode.SAME_STEP``).
"""

from __future__ import annotations

__all__ = [
    "AUTORESET_MODES", "SokobanVectorEnv", "uniform_bounds_shared",
]

from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from engine.pictures.frames import TileAtlas
from engine.pictures.render import SIZE
from engine.pictures.vector import (
    BoardSlots,
    begin_boards,
    frames_of,
    new_episodes,
    new_outcomes,
    restart_boards,
    step_boards,
)
from pipeline.errors import PipelineError
from pipeline.spec import Spec
from pipeline.trajectories import EpisodeLevel
from sokoforge.drawn_levels import FreshLevels
from sokoforge.sokoban_env import observation_space, open_source

INFO_KEYS = ("level", "steps", "noop", "pushed", "max_steps")
AUTORESET_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)


def uniform_bounds_shared(space: spaces.Space) -> spaces.Dict:
    """``space`` (a Dict of Boxes) with each Box's bounds, when uniform, as one value seen at
    every position: a batched Box holds four arrays of its shape (low, high and whether each
    is bounded), four times the pictures' bytes at any N."""
    assert isinstance(space, spaces.Dict)
    for box in space.spaces.values():
        assert isinstance(box, spaces.Box)
        for name in ("low", "high", "bounded_below", "bounded_above"):
            bound = getattr(box, name)
            if bound.size and (bound == bound.flat[0]).all():
                setattr(box, name, np.broadcast_to(bound.flat[0], bound.shape))
    return space


class SokobanVectorEnv(VectorEnv):
    """``num_envs`` Sokoban episodes on 64x64 RGB pictures, stepped together.

    Sources, looks, rewards, ``terminated``/``truncated`` and ``info`` (arrays: ``level``,
    ``steps``, ``noop``, ``pushed``, ``max_steps``) are the single env's. Sub-env k's episode
    j plays a level fixed by the reset seed, k and j. With ``copy=False`` the observations
    (and info arrays) are the env's own buffers, overwritten by the next step: no copy of the
    N pictures per step. ``workers`` processes draw a spec's fresh levels ahead of play
    (``sokoforge.drawn_levels``). ``autoreset_mode`` is ``AutoresetMode.NEXT_STEP`` or
    ``SAME_STEP`` (then ``info["final_obs"]`` and ``info["final_info"]`` hold what the
    ending step showed, for the sub-envs of ``info["_final_obs"]``).

    Args:
        num_envs: how many sub-envs step together.
        version, spec, datasets, allow_hidden, render_mode: the single env's.
        copy: False to be given the env's own observation buffers (no copy per step).
        workers: processes drawing a spec's fresh levels ahead of play.
        autoreset_mode: ``NEXT_STEP`` or ``SAME_STEP``.

    Raises:
        PipelineError: a bad argument (the message names it), ``step`` before ``reset``, or
            actions that are not ``num_envs`` integers 0-3.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8,
                "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, version: str | None = None, *,
                 spec: str | Path | Spec | None = None, datasets: str | Path | None = None,
                 allow_hidden: bool = False, render_mode: str | None = None,
                 copy: bool = True, workers: int = 1,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise PipelineError(f"num_envs must be a positive integer, not {num_envs!r}")
        mode = next((m for m in AUTORESET_MODES if autoreset_mode in (m, m.value)), None)
        if mode is None:
            raise PipelineError(f"autoreset_mode {autoreset_mode!r}: offered are "
                                f"{', '.join(m.value for m in AUTORESET_MODES)}")
        self.autoreset_mode = mode
        self.metadata = {**self.metadata, "autoreset_mode": mode}
        if render_mode not in (None, "rgb_array"):
            raise PipelineError(f"render_mode {render_mode!r}: only 'rgb_array' is offered")
        self.source = open_source(version, spec, datasets, allow_hidden)
        self.num_envs = num_envs
        self.render_mode = render_mode
        self.copy = copy
        self.single_observation_space = observation_space()
        self.observation_space = uniform_bounds_shared(
            batch_space(self.single_observation_space, num_envs))
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
        else:  # slot k: sub-env k's level, refilled as its next episode starts
            self.slots = BoardSlots(num_envs)
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
            self._seeded = True
        e.over[mask] = True
        self._give_levels(np.flatnonzero(mask))
        begin_boards(mask, self._boards, self._episodes, self._levels, self._obs_frames,
                     self._goal_frames, self._out)
        return self._observation(), self._info()

    def step(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray,
                                          np.ndarray, dict[str, Any]]:
        """One action (0 up, 1 down, 2 left, 3 right) per sub-env, all played in one call.

        Raises:
            PipelineError: the env was not reset, or ``actions`` are not ``num_envs``
                integers 0-3.
        """
        if not self._seeded:
            raise PipelineError("call reset() before step()")
        acts = np.asarray(actions)
        if acts.shape != (self.num_envs,) or acts.dtype.kind not in "iu":
            raise PipelineError(f"actions must be {self.num_envs} integers 0-3")
        if acts.dtype.kind == "i" and not isinstance(actions, np.ndarray):
            # a list's True is stored as 1 beside its integers: refused, as the single env does
            flags = [k for k, a in enumerate(actions) if isinstance(a, bool | np.bool_)]
            if flags:
                raise PipelineError(f"actions must be {self.num_envs} integers 0-3: sub-env "
                                    f"{flags[0]}'s is {actions[flags[0]]!r}, a bool")
        if acts.size and (acts.min() < 0 or acts.max() > 3):
            raise PipelineError("actions must be 0 (up), 1 (down), 2 (left) or 3 (right)")
        same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        if self._fresh is not None and not same_step:
            self._give_levels(np.flatnonzero(self._episodes.over))
        step_boards(acts.astype(np.int64, copy=False), self._boards, self._episodes,
                    self._levels, self._obs_frames, self._goal_frames, self._out)
        final = self._restart_ended() if same_step else {}
        out = self._out
        rewards, terminated, truncated = out.reward, out.terminated, out.truncated
        if self.copy:
            rewards, terminated, truncated = rewards.copy(), terminated.copy(), truncated.copy()
        return self._observation(), rewards, terminated, truncated, {**self._info(), **final}

    def _restart_ended(self) -> dict[str, Any]:
        """Same-step autoreset: keep what the sub-envs whose episode just ended showed (as
        ``final_obs`` and ``final_info``), then start their next episodes."""
        out = self._out
        ended = self._episodes.over.copy()
        ks = np.flatnonzero(ended)
        if not ks.size:
            return {}
        final_obs = np.full(self.num_envs, None, dtype=object)
        for k in ks.tolist():
            final_obs[k] = {"obs": self._obs[k].copy(), "goal": self._goal[k].copy()}
        final_info = {key: np.where(ended, getattr(out, key), 0).astype(getattr(out, key).dtype)
                      for key in INFO_KEYS}
        final_info.update({f"_{key}": ended for key in INFO_KEYS})
        self._give_levels(ks)
        restart_boards(ended, self._boards, self._episodes, self._levels, self._obs_frames,
                       self._goal_frames, out)
        return {"final_obs": final_obs, "_final_obs": ended, "final_info": final_info,
                "_final_info": ended}

    def render(self) -> tuple[np.ndarray, ...] | None:
        """Each sub-env's current picture (``render_mode="rgb_array"``)."""
        if self.render_mode != "rgb_array" or not self._seeded:
            return None
        return tuple(self._obs.copy())

    def close_extras(self, **kwargs: Any) -> None:
        if self._fresh is not None:
            self._fresh.close()

    def level_of(self, k: int) -> EpisodeLevel:
        """The level sub-env k (0..N-1) is playing (a fresh one's solution and look included)."""
        if (isinstance(k, bool | np.bool_) or not isinstance(k, int | np.integer)
                or not 0 <= k < self.num_envs):
            raise PipelineError(f"level_of takes a sub-env 0..{self.num_envs - 1}, not {k!r}")
        if self._fresh is None:
            return self.source.levels[int(self._episodes.slot[k])]
        return self._fresh.playing_level(k)

    def _give_levels(self, ks: np.ndarray) -> None:
        """Put the next fresh level of every sub-env k of ``ks`` in its slot (a spec): the
        rows they are in asked for in bulk first, so a row drawn for one serves its block."""
        if self._fresh is None or not ks.size:
            return
        e = self._episodes
        self._fresh.ask_next(ks.tolist())
        for k in ks.tolist():
            chosen, tiles = self._fresh.take(k)
            self.slots.put(k, tiles, chosen.max_steps, start=chosen.level.start)
            e.next_slot[k] = k
        self._fresh.flush()  # the rows after these, drawn while these are played
        self._boards = self.slots.flat
        if self.slots.arrays.start_crates.shape[1] > e.crates.shape[1]:
            self._widen_episodes()

    def _widen_episodes(self) -> None:
        e = self._episodes
        crates = np.zeros((self.num_envs, self.slots.arrays.start_crates.shape[1]), np.int64)
        crates[:, :e.crates.shape[1]] = e.crates
        self._episodes = e._replace(crates=crates)

    def _observation(self) -> dict[str, np.ndarray]:
        if self.copy:  # both pictures in one new array: one allocation, two plain copies
            both = np.empty((2, *self._obs.shape), np.uint8)
            np.copyto(both[0], self._obs)
            np.copyto(both[1], self._goal)
            return {"obs": both[0], "goal": both[1]}
        return {"obs": self._obs, "goal": self._goal}

    def _info(self) -> dict[str, Any]:
        out = self._out
        info: dict[str, Any] = {"level": out.level, "steps": out.steps, "noop": out.noop,
                                "pushed": out.pushed, "max_steps": out.max_steps, **self._masks}
        if self.copy:
            info = {k: v.copy() for k, v in info.items()}
        return info

