"""A Gymnasium environment over sokoforge levels: a public version's, or fresh ones of a spec.

``import sokoforge_gym`` (or ``register()``) registers ``sokoforge/Sokoban-v0``. Reward is 1
on the step that solves the level and 0 otherwise; an episode terminates when solved and is
truncated when the level's step budget is used up: the episode core's outcome
(``engine.episode``), not recomputed here.
"""

from __future__ import annotations

__all__ = [
    "ENV_ID", "SokobanEnv", "observation_space", "open_source", "register",
]

from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np
from gymnasium import spaces

from engine.episode import Episode, UnplayableLevel, begin, check_playable
from engine.episode import step as play
from engine.pictures.look import Painter, painter
from engine.pictures.render import SIZE
from engine.rules import check_move
from pipeline.errors import PipelineError
from pipeline.spec import Spec, load_spec

if TYPE_CHECKING:
    from pipeline.trajectories import LevelSource

ENV_ID = "sokoforge/Sokoban-v0"


class SokobanEnv(gymnasium.Env):
    """Sokoban on 64x64 RGB pictures: ``obs`` (the board now) and ``goal`` (crates on goals).

    Give ``version`` (a public version under ``datasets``; a hidden one only with
    ``allow_hidden=True``) or ``spec`` (a name, path or ``Spec``: each reset draws a fresh
    level). Actions: 0 up, 1 down, 2 left, 3 right. ``info``: ``steps`` used, ``noop``
    (the action did not move the player), ``pushed``, ``level`` (index in the version).
    Pictures are in the version's look (each level's own theme in a themed version).

    Args:
        version: a version's name under ``datasets`` (public, unless ``allow_hidden``).
        spec: instead of ``version``, a spec (name, path or ``Spec``) to draw fresh levels of.
        datasets: the datasets folder (default: ``pipeline.versions.datasets_folder``'s).
        allow_hidden: let a hidden version be played (a maintainer's tool).
        render_mode: None or ``"rgb_array"``.

    Raises:
        PipelineError: a bad render mode, version or spec (the message says which), a level
            index out of range in ``reset``, or ``step`` before ``reset``.
        BadAction: ``step`` with an action that is not 0-3 (``engine.rules``).

    >>> import gymnasium, sokoforge_gym
    >>> env = gymnasium.make("sokoforge/Sokoban-v0", version="public-A")
    >>> obs, info = env.reset(seed=0, options={"level": 0})
    >>> obs["obs"].shape, info["steps"], info["max_steps"]
    ((64, 64, 3), 0, 80)
    >>> obs, reward, terminated, truncated, info = env.step(0)  # up
    >>> reward, terminated, truncated, info["steps"]
    (0.0, False, False, 1)
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}

    def __init__(self, version: str | None = None, spec: str | Path | Spec | None = None,
                 datasets: str | Path | None = None, allow_hidden: bool = False,
                 render_mode: str | None = None) -> None:
        if render_mode not in (None, "rgb_array"):
            raise PipelineError(f"render_mode {render_mode!r}: only 'rgb_array' is offered")
        self.source = open_source(version, spec, datasets, allow_hidden)
        self.render_mode = render_mode
        self.look = self.source.look
        self.observation_space = observation_space()
        self.action_space = spaces.Discrete(4)
        self._episode: Episode | None = None
        self._painter: Painter | None = None
        self._goal = np.zeros((SIZE, SIZE, 3), np.uint8)
        self._index: int | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode on a level drawn with ``seed`` (or ``options={"level": i}``).

        Raises:
            PipelineError: ``options["level"]`` is not a level index of the version.
        """
        from pipeline.trajectories import fresh_levels

        super().reset(seed=seed)
        options = options or {}
        if self.source.spec is not None:
            draw_seed = int(self.np_random.integers(2**63))
            chosen = fresh_levels(self.source.spec, draw_seed, 0, self.source.exclude_ids)[0]
        else:
            n = len(self.source.levels)
            index = options.get("level", int(self.np_random.integers(n)))
            if not isinstance(index, int | np.integer) or not 0 <= index < n:
                raise PipelineError(f"options['level'] must be a level index 0..{n - 1}")
            chosen = self.source.levels[int(index)]
        self._index = chosen.index
        self._episode = begin(chosen.level, chosen.max_steps)
        self._painter = painter(chosen.level, chosen.look)
        self._goal = self._painter.goal()
        return self._observation(), {"steps": 0, "noop": False, "pushed": False,
                                     "level": self._index, "max_steps": chosen.max_steps}

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool,
                                         dict[str, Any]]:
        """One action: reward 1.0 when it solves the level, else 0.0.

        Raises:
            PipelineError: the env was not reset.
            BadAction: ``action`` is not 0-3.
        """
        if self._episode is None:
            raise PipelineError("call reset() before step()")
        check_move(action)  # True or 1.0 is not action 1; WAIT is the server's alone
        self._episode, result = play(self._episode, int(action))
        info = {"steps": self._episode.steps, "noop": not result.moved, "pushed": result.pushed,
                "level": self._index, "max_steps": self._episode.max_steps}
        return (self._observation(), 1.0 if result.solved else 0.0, result.terminated,
                result.truncated, info)

    def render(self) -> np.ndarray | None:
        """The current observation picture (``render_mode="rgb_array"``)."""
        if self.render_mode != "rgb_array" or self._episode is None:
            return None
        return self._observation()["obs"]

    def _observation(self) -> dict[str, np.ndarray]:
        """The picture of the state after ``steps`` actions (a noisy look's noise is fixed by
        the step) and the goal picture."""
        if self._painter is None or self._episode is None:
            raise PipelineError("call reset() before observing")
        return {"obs": self._painter.frame(self._episode.state, self._episode.steps),
                "goal": self._goal.copy()}


def open_source(version: str | None, spec: str | Path | Spec | None,
                datasets: str | Path | None, allow_hidden: bool) -> LevelSource:
    """The levels an environment plays: a public version's (a hidden one only with
    ``allow_hidden``) or a spec's fresh ones; ``datasets`` found as every command finds it
    (``pipeline.versions.datasets_folder``: the argument, $SOKOFORGE_DATASETS, the repository's)."""
    from pipeline.trajectories import spec_source, version_source
    from pipeline.versions.datasets_folder import datasets_folder

    if (version is None) == (spec is None):
        raise PipelineError("give exactly one of version=... and spec=...")
    root = datasets_folder(datasets)
    if version is not None:
        source = version_source(
            root, version, allow_hidden=allow_hidden,
            instead="use a public version or spec=..., or pass allow_hidden=True (a "
                    "maintainer's tool: never train on a hidden set)")
        for chosen in source.levels:  # the vector env would reward a solved start
            try:
                check_playable(chosen.level, chosen.max_steps)
            except UnplayableLevel as e:
                raise PipelineError(f"{version} level {chosen.index}: {e}") from None
        return source
    assert spec is not None
    return spec_source(spec if isinstance(spec, Spec) else load_spec(spec), root)


def observation_space() -> spaces.Dict:
    """One observation: the picture of the board now (``obs``) and of the goal (``goal``)."""
    picture = spaces.Box(0, 255, (SIZE, SIZE, 3), np.uint8)
    return spaces.Dict({"obs": picture, "goal": picture})


def register() -> None:
    """Register ``sokoforge/Sokoban-v0`` with Gymnasium (once; later calls do nothing), with
    its vector env for ``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")``."""
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="sokoforge.sokoban_env:SokobanEnv",
                           vector_entry_point="sokoforge.sokoban_vector_env:SokobanVectorEnv")
