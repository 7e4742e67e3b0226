"""The vector env: the single env's pictures and rules for N boards in one call, by seed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium
import numpy as np
import polars as pl
import pytest
from gymnasium.utils.env_checker import (
    check_reset_return_type,
    check_reset_seed_determinism,
    check_returned_data_not_reused,
)
from gymnasium.vector import AutoresetMode, VectorEnv
from public_support import QUIET, public_and_hidden

import sokoforge_gym  # noqa: F401  (registers the environment)
from engine.pictures.frames import draw, draw_goal
from engine.pictures.look import add_noise, noise_table
from engine.pictures.pixel_noise import add_noise_kernel, noise_steps, noise_words
from engine.rules import step
from pipeline.errors import PipelineError
from pipeline.spec import load_spec, spec_from_dict
from pipeline.stages.build import build
from pipeline.trajectories import fresh_levels
from pipeline.versions.tables import read_parquet, sha256_file, write_parquet
from sokoforge.drawn_levels import KEPT, FreshLevels

ENV = "sokoforge/Sokoban-v0"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> Path:
    """Public versions in every look (``pub`` shared, ``arcs`` arc, ``noisy`` themed with
    pixel noise, each a small W or tiny build) and the hidden ``hid``."""
    root = public_and_hidden(tmp_path_factory.mktemp("datasets"), 4)
    warmup = load_spec("public/W").to_dict()
    warmup["tiers"][0]["levels"] = 3
    build("arcs", datasets=root, spec=spec_from_dict({**warmup, "look": "arc"}), seed=6,
          workers=QUIET)
    tiny = {**load_spec("tiny").to_dict(), "look": "themed", "noise": True,
            "visibility": "public"}
    tiny["tiers"] = tiny["tiers"][:2]
    build("noisy", datasets=root, spec=spec_from_dict(tiny), seed=7, workers=QUIET)
    return root


def make_vec(datasets: Path, n: int, **kwargs) -> VectorEnv:
    return gymnasium.make_vec(ENV, num_envs=n, vectorization_mode="vector_entry_point",
                              datasets=datasets, **kwargs)


def test_make_vec_builds_the_vector_env_with_next_step_autoreset(datasets):
    env = make_vec(datasets, 3, version="pub")
    assert isinstance(env.unwrapped, VectorEnv) and env.num_envs == 3
    assert env.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert env.observation_space["obs"].shape == (3, 64, 64, 3)
    assert env.single_observation_space == gymnasium.make(ENV, version="pub",
                                                          datasets=datasets).observation_space
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    assert set(info) >= {"level", "steps", "noop", "pushed", "_level"}


@pytest.mark.parametrize("version", ["pub", "arcs", "noisy"])
def test_every_sub_env_shows_the_single_env_s_frames_across_autoresets(datasets, version):
    n, steps = 3, 120
    env = make_vec(datasets, n, version=version)
    obs, info = env.reset(seed=11)
    singles = [gymnasium.make(ENV, version=version, datasets=datasets) for _ in range(n)]
    for k, single in enumerate(singles):
        first, _ = single.reset(options={"level": int(info["level"][k])})
        assert np.array_equal(first["obs"], obs["obs"][k])
        assert np.array_equal(first["goal"], obs["goal"][k])
    rng = np.random.default_rng(3)
    ended, resets = [False] * n, 0
    for _ in range(steps):
        actions = rng.integers(0, 4, n)
        obs, reward, terminated, truncated, info = env.step(actions)
        for k, single in enumerate(singles):
            if ended[k]:  # the step after an end starts the next episode, action ignored
                expected, _ = single.reset(options={"level": int(info["level"][k])})
                assert reward[k] == 0.0 and not terminated[k] and not truncated[k]
                assert info["steps"][k] == 0
                ended[k], resets = False, resets + 1
            else:
                expected, r, term, trunc, one = single.step(int(actions[k]))
                assert (reward[k], terminated[k], truncated[k]) == (r, term, trunc)
                assert [info[key][k] for key in ("steps", "noop", "pushed", "level")] == \
                    [one[key] for key in ("steps", "noop", "pushed", "level")]
                ended[k] = term or trunc
            assert np.array_equal(obs["obs"][k], expected["obs"])
            assert np.array_equal(obs["goal"][k], expected["goal"])
    assert resets >= n  # every sub-env went through an autoreset


def test_the_seed_fixes_every_sub_env_s_levels_and_frames(datasets):
    def run(seed: int) -> tuple[list, np.ndarray]:
        env = make_vec(datasets, 4, version="pub")
        obs, info = env.reset(seed=seed)
        levels, rng = [info["level"].tolist()], np.random.default_rng(0)
        for _ in range(90):
            obs, *_, info = env.step(rng.integers(0, 4, 4))
            levels.append(info["level"].tolist())
        return levels, obs["obs"]

    levels, frames = run(5)
    again, same = run(5)
    other, _ = run(6)
    assert levels == again and np.array_equal(frames, same)
    assert levels != other


def test_passes_gymnasium_s_checks_and_copy_false_returns_its_own_buffers(datasets):
    # (check_step_determinism asks for Python bools, a single env's; the seed test covers it)
    env = make_vec(datasets, 1, version="pub")
    for check in (check_reset_return_type, check_reset_seed_determinism,
                  check_returned_data_not_reused):
        check(env)
    shared = make_vec(datasets, 2, version="pub", copy=False)
    first, _ = shared.reset(seed=0)
    after, *_ = shared.step(np.array([0, 1]))
    assert first["obs"] is after["obs"]  # the buffer itself, brought up to date in place


def test_bad_actions_are_refused(datasets):
    env = make_vec(datasets, 2, version="pub")
    env.reset(seed=0)
    for bad in (np.array([0, 4]), np.array([0.0, 1.0]), np.array([1])):
        with pytest.raises(PipelineError, match="actions"):
            env.step(bad)


@pytest.mark.parametrize("vector", [True, False])
def test_a_version_holding_a_level_solved_at_its_start_is_refused_not_rewarded(
        datasets, tmp_path, vector):
    """A public version whose level 0 was edited to a solved board (its manifest updated)."""
    shutil.copytree(datasets / "pub", tmp_path / "pub")
    levels = tmp_path / "pub" / "levels.parquet"
    table = read_parquet(levels)
    xsb = table["xsb"].to_list()
    write_parquet(table.with_columns(pl.Series("xsb", ["#####\n#@**#\n#####", *xsb[1:]])),
                  levels)
    manifest = json.loads((tmp_path / "pub" / "manifest.json").read_text())
    manifest["files"]["levels.parquet"]["sha256"] = sha256_file(levels)
    (tmp_path / "pub" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PipelineError, match="pub level 0: it is solved at its start"):
        if vector:
            make_vec(tmp_path, 2, version="pub")
        else:
            gymnasium.make(ENV, version="pub", datasets=tmp_path)


def test_only_integer_actions_0_to_3_are_taken_as_the_single_env_takes_them(datasets):
    env = make_vec(datasets, 2, version="pub").unwrapped
    env.reset(seed=0)
    for bad in ([True, False], np.array([1.0, 2.0]), [0, 4], [-1, 0], [0], [[0, 1]], ["0", "1"],
                [0, True], (np.bool_(True), 2)):
        with pytest.raises(PipelineError, match="actions must be"):
            env.step(bad)
    for dtype in (np.int64, np.uint8, np.int32):
        assert env.step(np.array([1, 3], dtype=dtype))[4]["steps"].tolist() == [1, 1]
        env.reset(seed=0)


def test_level_of_takes_a_sub_env_0_to_n_minus_1_only(datasets):
    env = make_vec(datasets, 2, version="pub").unwrapped
    _, info = env.reset(seed=0)
    assert [env.level_of(k).index for k in (0, np.int64(1))] == info["level"].tolist()
    for bad in (-1, 2, True, 1.0, "0"):
        with pytest.raises(PipelineError, match=r"level_of takes a sub-env 0\.\.1"):
            env.level_of(bad)


def test_a_hidden_version_is_refused_unless_the_caller_allows_it(datasets):
    with pytest.raises(PipelineError, match="hidden version"):
        make_vec(datasets, 2, version="hid")
    env = make_vec(datasets, 2, version="hid", allow_hidden=True)
    assert env.reset(seed=0)[0]["obs"].shape == (2, 64, 64, 3)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_a_spec_s_fresh_levels_are_drawn_ahead_by_seed_and_drawn_as_the_look_does(datasets,
                                                                                  mode):
    def run(seed: int) -> list[list]:
        env = make_vec(datasets, 2, spec="tiny", autoreset_mode=mode)
        obs, info = env.reset(seed=seed)
        states = [env.unwrapped.level_of(k).level.start for k in range(2)]
        played, rng = [], np.random.default_rng(1)
        for _ in range(250):
            levels = [env.unwrapped.level_of(k) for k in range(2)]
            played.append([(chosen.level.walls.tobytes(), chosen.level.start)
                           for chosen in levels])
            actions = rng.integers(0, 4, 2)
            obs, _, _, _, info = env.step(actions)
            for k in range(2):
                chosen = env.unwrapped.level_of(k)
                if info["steps"][k] == 0:
                    states[k] = chosen.level.start
                else:
                    states[k] = step(chosen.level, states[k], int(actions[k]))[0]
                assert np.array_equal(obs["obs"][k], draw(chosen.level, states[k], chosen.look,
                                                          int(info["steps"][k])))
                assert np.array_equal(obs["goal"][k], draw_goal(chosen.level, chosen.look))
                assert info["level"][k] == -1
        env.close()
        return played

    first = run(3)
    assert run(3) == first
    assert len({level for row in first for level in row}) > 2  # fresh levels, not one


@pytest.mark.parametrize("version", ["pub", "noisy"])
def test_same_step_autoreset_shows_the_single_env_s_frames_and_keeps_the_final_ones(
        datasets, version):
    n, steps = 3, 120
    env = make_vec(datasets, n, version=version, autoreset_mode=AutoresetMode.SAME_STEP)
    assert env.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    obs, info = env.reset(seed=11)
    singles = [gymnasium.make(ENV, version=version, datasets=datasets) for _ in range(n)]
    for k, single in enumerate(singles):
        single.reset(options={"level": int(info["level"][k])})
    rng = np.random.default_rng(3)
    resets = 0
    for _ in range(steps):
        actions = rng.integers(0, 4, n)
        obs, reward, terminated, truncated, info = env.step(actions)
        for k, single in enumerate(singles):
            expected, r, term, trunc, one = single.step(int(actions[k]))
            assert (reward[k], terminated[k], truncated[k]) == (r, term, trunc)
            if term or trunc:  # the last picture kept, the next episode's start returned
                assert info["_final_obs"][k] and info["_final_info"][k]
                assert np.array_equal(info["final_obs"][k]["obs"], expected["obs"])
                assert np.array_equal(info["final_obs"][k]["goal"], expected["goal"])
                final = info["final_info"]
                assert [final[key][k] for key in ("steps", "noop", "pushed", "level")] == \
                    [one[key] for key in ("steps", "noop", "pushed", "level")]
                expected, _ = single.reset(options={"level": int(info["level"][k])})
                assert info["steps"][k] == 0 and not info["noop"][k]
                resets += 1
            else:
                assert "_final_obs" not in info or not info["_final_obs"][k]
                assert [info[key][k] for key in ("steps", "noop", "pushed", "level")] == \
                    [one[key] for key in ("steps", "noop", "pushed", "level")]
            assert np.array_equal(obs["obs"][k], expected["obs"])
            assert np.array_equal(obs["goal"][k], expected["goal"])
    assert resets >= n
    for check in (check_reset_return_type, check_reset_seed_determinism,
                  check_returned_data_not_reused):
        check(make_vec(datasets, 1, version=version, autoreset_mode="SameStep"))


def test_an_unknown_autoreset_mode_is_refused(datasets):
    with pytest.raises(PipelineError, match="autoreset_mode"):
        make_vec(datasets, 2, version="pub", autoreset_mode=AutoresetMode.DISABLED)
    env = make_vec(datasets, 2, version="pub", autoreset_mode="SameStep")
    assert env.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP


@pytest.mark.slow
def test_a_sub_env_s_fresh_levels_depend_on_the_seed_and_its_index_alone(datasets):
    # sub-env k's j-th level: level k % 8 of the group j drawn from the seed of its block of 8,
    # whatever the number of sub-envs, the workers, or the order the levels are taken in
    spec = load_spec("tiny")
    words = np.random.SeedSequence(4).generate_state(10, np.uint64)
    few, many = FreshLevels(spec, frozenset(), 3, 1), FreshLevels(spec, frozenset(), 10, 2)
    few.restart(words[:3])
    many.restart(words)
    try:
        many.ask_next(range(10))
        taken = {k: [many.take(k)[0] for _ in range(2)] for k in (9, 2, 0, 1)}
        for k in (0, 1, 2):
            again = [few.take(k)[0] for _ in range(2)]
            assert [c.level for c in again] == [c.level for c in taken[k]]
            assert [c.level for c in again] == [
                fresh_levels(spec, int(words[0]), j)[k].level for j in range(2)]
        assert [c.level for c in taken[9]] == [
            fresh_levels(spec, int(words[8]), j)[1].level for j in range(2)]
    finally:
        few.close()
        many.close()


@pytest.mark.slow
def test_a_spec_sub_env_holds_a_few_kilobytes_besides_its_pictures(datasets):
    n = 16
    env = make_vec(datasets, n, spec="tiny", copy=False)
    env.reset(seed=2)
    inner, rng = env.unwrapped, np.random.default_rng(0)
    fresh = inner._fresh
    most = 0
    for _ in range(150):
        env.step(rng.integers(0, 4, n))
        assert all(len(rows) <= KEPT for rows in fresh.rows)
        most = max(most, fresh.nbytes)
    held = inner.slots.nbytes + most + sum(a.nbytes for a in (*inner._episodes, *inner._out))
    assert fresh.taken.sum() > n  # sub-envs went through their first levels
    assert held / n < 8_000  # one board slot (about 4 KB) and compressed rows of levels
    env.close()


def test_the_batched_observation_space_holds_one_value_per_bound_not_one_per_pixel(datasets):
    env = make_vec(datasets, 64, version="pub")
    for box in env.observation_space.spaces.values():
        for bound in (box.low, box.high, box.bounded_below, box.bounded_above):
            assert bound.shape == (64, 64, 64, 3) and not any(bound.strides)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert env.observation_space.contains(env.observation_space.sample())
    assert not env.observation_space.contains({**obs, "obs": obs["obs"][:63]})


@pytest.mark.parametrize("std", [0.4, 2.5, 6.0])
def test_the_numba_noise_is_add_noise_byte_for_byte(std):
    rng = np.random.default_rng(int(std * 10))
    clean = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    steps = noise_steps(std)
    assert np.array_equal(steps.low + np.searchsorted(steps.breaks, np.arange(65536),
                                                      side="right"), noise_table(std))
    for key, number in ((123456789, 0), (2**62 + 5, 7), (99, -1)):
        frame = clean.reshape(-1).copy()
        add_noise_kernel(frame, *noise_words(key, number), steps.low, steps.breaks,
                         steps.coarse)
        assert np.array_equal(frame.reshape(64, 64, 3), add_noise(clean, std, key, number))
