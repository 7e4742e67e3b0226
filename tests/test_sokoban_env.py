"""The Gymnasium environment: registered by one import, checked by Gymnasium, the engine's rules."""

from __future__ import annotations

from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from public_support import QUIET, public_and_hidden

import sokoforge_gym
from engine.levels import parse_xsb
from engine.pictures.frames import draw, draw_goal
from engine.rules import BadAction, lurd_to_actions
from pipeline.errors import PipelineError
from pipeline.spec import load_spec, spec_from_dict
from pipeline.stages.build import build
from pipeline.versions.tables import read_parquet


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> Path:
    """A public version (a small W) and a hidden one (tiny) under one datasets folder."""
    return public_and_hidden(tmp_path_factory.mktemp("datasets"), 4)


def test_one_import_registers_the_environment():
    assert sokoforge_gym.ENV_ID == "sokoforge/Sokoban-v0"
    assert "sokoforge/Sokoban-v0" in gymnasium.registry


def test_passes_gymnasium_env_checker_on_a_version_and_on_a_spec(datasets):
    check_env(gymnasium.make("sokoforge/Sokoban-v0", version="pub",
                             datasets=datasets).unwrapped)
    check_env(gymnasium.make("sokoforge/Sokoban-v0", spec="tiny", datasets=datasets).unwrapped)


def test_reset_with_a_seed_picks_the_same_level_and_shows_it_in_the_look(datasets):
    env = gymnasium.make("sokoforge/Sokoban-v0", version="pub", datasets=datasets)
    obs, info = env.reset(seed=4)
    again, info2 = env.reset(seed=4)
    assert info["level"] == info2["level"] and np.array_equal(obs["obs"], again["obs"])
    levels = read_parquet(datasets / "pub" / "levels.parquet")
    level = parse_xsb(levels["xsb"][info["level"]])
    assert obs["obs"].dtype == np.uint8 and obs["obs"].shape == (64, 64, 3)
    assert np.array_equal(obs["obs"], draw(level)) and np.array_equal(obs["goal"],
                                                                      draw_goal(level))
    assert {env.reset(seed=s)[1]["level"] for s in range(20)} == set(range(4))


def test_the_optimal_solution_earns_reward_one_and_terminates(datasets):
    env = gymnasium.make("sokoforge/Sokoban-v0", version="pub", datasets=datasets)
    levels = read_parquet(datasets / "pub" / "levels.parquet")
    _, info = env.reset(seed=0, options={"level": 2})
    actions = lurd_to_actions(levels["solution"][2])
    rewards = []
    for i, a in enumerate(actions):
        _, reward, terminated, truncated, info = env.step(a)
        rewards.append(reward)
        assert terminated == (i == len(actions) - 1) and not truncated
    assert rewards == [0.0] * (len(actions) - 1) + [1.0]
    assert info["steps"] == len(actions)


def test_the_budget_truncates_and_a_blocked_move_is_a_noop(datasets):
    env = gymnasium.make("sokoforge/Sokoban-v0", version="pub", datasets=datasets)
    obs, info = env.reset(seed=1)
    assert info["max_steps"] == 40
    level = parse_xsb(read_parquet(datasets / "pub" / "levels.parquet")["xsb"][info["level"]])
    width = level.width
    # a wall-bound direction from the start: the move is a no-op that still costs a step
    blocked = next(a for a, d in enumerate((-width, width, -1, 1))
                   if level.walls.flat[level.start.player + d])
    truncated = False
    for step in range(1, 41):
        after, reward, terminated, truncated, info = env.step(blocked)
        assert info["noop"] and info["steps"] == step and reward == 0.0 and not terminated
        assert np.array_equal(after["obs"], obs["obs"])
        assert truncated == (step == 40)
    assert truncated


def test_only_integer_actions_0_to_3_are_taken_and_a_refused_one_uses_no_step(datasets):
    env = gymnasium.make("sokoforge/Sokoban-v0", version="pub", datasets=datasets).unwrapped
    env.reset(seed=0)
    for bad in (True, False, np.bool_(True), 1.0, np.float32(2), 4, -1, "1", None):
        with pytest.raises(BadAction, match="action must be 0"):
            env.step(bad)
    for steps, good in enumerate((np.int64(1), np.uint8(2), 3, np.int32(0)), start=1):
        assert env.step(good)[4]["steps"] == steps


def test_a_hidden_version_is_refused_unless_the_caller_allows_it(datasets):
    with pytest.raises(PipelineError, match="hidden version.*allow_hidden=True"):
        gymnasium.make("sokoforge/Sokoban-v0", version="hid", datasets=datasets)
    env = gymnasium.make("sokoforge/Sokoban-v0", version="hid", datasets=datasets,
                         allow_hidden=True)
    assert env.reset(seed=0)[0]["obs"].shape == (64, 64, 3)


def test_a_spec_draws_fresh_levels_reproducibly(datasets):
    env = gymnasium.make("sokoforge/Sokoban-v0", spec="public/A", datasets=datasets)
    first = env.reset(seed=7)[0]["obs"]
    assert np.array_equal(env.reset(seed=7)[0]["obs"], first)
    assert not np.array_equal(env.reset(seed=8)[0]["obs"], first)
    assert env.reset(seed=7)[1]["max_steps"] == 80


def test_an_imported_public_collection_is_an_environment_and_a_hidden_one_is_not(tmp_path):
    from pipeline.stages.importing import import_collection

    src = tmp_path / "two.xsb"
    src.write_text("; one\n#####\n#@$.#\n#####\n\n; two\n######\n#@ $.#\n######\n")
    other = tmp_path / "other.xsb"
    other.write_text("#######\n#@ $ .#\n#######\n")
    import_collection("mine", [src], datasets=tmp_path, visibility="public")
    import_collection("secret", [other], datasets=tmp_path, visibility="hidden")
    env = gymnasium.make("sokoforge/Sokoban-v0", version="mine", datasets=tmp_path)
    _, info = env.reset(seed=0, options={"level": 1})
    rewards = [env.step(3)[1] for _ in range(2)]
    assert rewards == [0.0, 1.0]
    with pytest.raises(PipelineError, match="hidden version"):
        gymnasium.make("sokoforge/Sokoban-v0", version="secret", datasets=tmp_path)


def test_a_themed_version_is_shown_in_each_level_s_own_theme(tmp_path):
    from engine.pictures.look import stored_look

    build("themed", datasets=tmp_path, spec=spec_from_dict(
        {**load_spec("public/B").to_dict(), "tiers": [
            {"levels": 3, "crates": 3, "wall_density": 0.1, "band": [10, 50]}]}),
        seed=3, workers=QUIET)
    env = gymnasium.make("sokoforge/Sokoban-v0", version="themed", datasets=tmp_path)
    rows = read_parquet(tmp_path / "themed" / "levels.parquet").to_dicts()
    for i, row in enumerate(rows):
        obs, _ = env.reset(seed=0, options={"level": i})
        level, look = parse_xsb(row["xsb"]), stored_look("themed", row)
        assert np.array_equal(obs["obs"], draw(level, None, look))
        assert np.array_equal(obs["goal"], draw_goal(level, look))


def test_the_gymnasium_envs_doctest_passes():
    import doctest

    import sokoforge.sokoban_env

    result = doctest.testmod(sokoforge.sokoban_env)
    assert result.attempted >= 6 and result.failed == 0
