"""Training trajectories: reproducible bytes on any workers, true frames, loadable everywhere."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.dataset as pads
import pytest
from click.testing import CliRunner
from public_support import QUIET, public_and_hidden

from engine.frames import draw, draw_goal
from engine.levels import canonical_id, parse_xsb
from engine.rules import step
from pipeline.errors import PipelineError
from pipeline.spec import load_spec
from pipeline.trajectories import (
    KINDS,
    Plan,
    fresh_levels,
    parse_mix,
    spec_source,
    version_source,
    write_trajectories,
)
from pipeline.workers import Workers
from sokoforge.cli import main


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> Path:
    """A public version (a small W) and a hidden one (tiny) under one datasets folder."""
    return public_and_hidden(tmp_path_factory.mktemp("datasets"), 6)


@pytest.fixture(scope="module")
def written(datasets, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("traj") / "set"
    plan = Plan(version_source(datasets, "pub"), seed=9, episodes=40, shard_episodes=16)
    write_trajectories(plan, out, QUIET)
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_same_seed_gives_the_same_bytes_on_two_workers_and_on_dask(datasets, written,
                                                                    tmp_path):
    plan = Plan(version_source(datasets, "pub"), seed=9, episodes=40, shard_episodes=16)
    write_trajectories(plan, tmp_path / "two", Workers(jobs=2, show_progress=False))
    import distributed
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        write_trajectories(plan, tmp_path / "dask", Workers(
            backend="dask", scheduler=cluster.scheduler_address, show_progress=False))
    reference = _files(written)
    assert len([f for f in reference if f.endswith(".parquet")]) == 6  # 3 shards, 2 tables
    assert _files(tmp_path / "two") == reference
    assert _files(tmp_path / "dask") == reference
    other = Plan(version_source(datasets, "pub"), seed=10, episodes=40, shard_episodes=16)
    write_trajectories(other, tmp_path / "other", QUIET)
    assert _files(tmp_path / "other") != reference


def test_every_frame_is_the_look_drawing_of_the_replayed_state(written):
    episodes = pl.read_parquet(written / "episodes" / "*.parquet")
    frames = pl.read_parquet(written / "frames" / "*.parquet").sort("episode", "step")
    assert set(episodes["kind"]) <= set(KINDS) and episodes.height == 40
    for ep in episodes.iter_rows(named=True):
        level = parse_xsb(ep["level"])
        rows = frames.filter(pl.col("episode") == ep["episode"])
        assert rows.height == ep["length"] + 1 and rows["step"].to_list() == list(
            range(rows.height))
        assert np.frombuffer(ep["goal"], np.uint8).reshape(64, 64, 3).tobytes() == \
            draw_goal(level).tobytes()
        state = level.start
        for r in rows.iter_rows(named=True):
            assert r["frame"] == draw(level, state).tobytes()
            if r["action"] == -1:
                break
            nxt, moved, pushed = step(level, state, r["action"])
            assert (r["pushed"], r["invalid"]) == (pushed, not moved)
            state = nxt
        assert rows["action"][-1] == -1
        assert ep["solved"] == level.is_solved(state)
        if ep["kind"] == "solver":
            assert ep["solved"] and ep["length"] == ep["optimal_moves"]
        elif ep["kind"] == "perturbed":
            assert 1 <= ep["inserted"] <= 3
        else:
            assert ep["solved"] or ep["length"] == ep["max_steps"]


def test_loads_with_pyarrow_and_hugging_face_datasets_offline(written, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets
    table = pads.dataset(written / "frames", format="parquet").to_table()
    ds = datasets.load_dataset(
        "parquet", data_files={"train": str(written / "frames" / "*.parquet")},
        cache_dir=str(tmp_path / "hf"), split="train")
    assert len(ds) == table.num_rows
    first = ds[0]
    assert len(first["frame"]) == 64 * 64 * 3 and first["step"] == 0
    eps = datasets.load_dataset(
        "parquet", data_files=str(written / "episodes" / "*.parquet"),
        cache_dir=str(tmp_path / "hf"), split="train")
    assert sorted(eps["episode"]) == list(range(40))


def test_card_and_manifest_give_counts_seed_look_and_every_shard_sha256(written):
    manifest = json.loads((written / "manifest.json").read_text())
    card = (written / "README.md").read_text()
    assert manifest["seed"] == "9" and "--seed 9" in card and manifest["look"] in card
    frames = pl.read_parquet(written / "frames" / "*.parquet")
    assert sum(c["frames"] for c in manifest["counts"].values()) == frames.height
    assert sum(c["episodes"] for c in manifest["counts"].values()) == 40
    for shard in manifest["shards"]:
        for table in ("episodes", "frames"):
            digest = hashlib.sha256((written / shard[table]["file"]).read_bytes()).hexdigest()
            assert digest == shard[table]["sha256"] and digest in card


def test_fresh_levels_from_a_spec_avoid_the_levels_of_hidden_versions(datasets):
    spec = load_spec("tiny")
    source = spec_source(spec, datasets)
    assert source.record["excluded_versions"] == ["hid"]
    hidden = set(pl.read_parquet(datasets / "hid" / "levels.parquet")["canonical_id"])
    assert hidden <= source.exclude_ids
    first = fresh_levels(spec, 1, 0)
    ids = {canonical_id(x.level) for x in first}
    again = fresh_levels(spec, 1, 0, exclude_ids=frozenset(ids))
    assert not ids & {canonical_id(x.level) for x in again}


def test_spec_episodes_are_optimal_and_in_the_spec_band(tmp_path):
    spec = load_spec("public/A")
    plan = Plan(spec_source(spec, tmp_path / "none"), seed=2, episodes=16,
                mix=(0.0, 1.0, 0.0))
    write_trajectories(plan, tmp_path / "a", QUIET)
    eps = pl.read_parquet(tmp_path / "a" / "episodes" / "*.parquet")
    assert eps["solved"].all() and (eps["length"] == eps["optimal_moves"]).all()
    assert eps["optimal_moves"].is_between(10, 50).all() and (eps["max_steps"] == 80).all()


def test_a_hidden_version_is_refused_and_nothing_is_written(datasets, tmp_path):
    with pytest.raises(PipelineError, match="hidden version"):
        version_source(datasets, "hid")
    result = CliRunner().invoke(main, ["trajectories", str(tmp_path / "t"), "--from", "hid",
                                       "--episodes", "3", "--seed", "1", "--datasets",
                                       str(datasets)])
    assert result.exit_code == 1 and "hidden version" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "t").exists()


def test_an_existing_output_is_refused_and_a_failed_run_leaves_nothing(written, datasets,
                                                                       tmp_path):
    plan = Plan(version_source(datasets, "pub"), seed=9, episodes=4)
    with pytest.raises(PipelineError, match="already exists"):
        write_trajectories(plan, written, QUIET)

    class Broken(Workers):
        def map(self, fn, items, label):
            raise PipelineError("worker lost")

    with pytest.raises(PipelineError):
        write_trajectories(plan, tmp_path / "t", Broken(show_progress=False))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text", ["0.5,0.5", "a,b,c", "0.5,0.6,0.2", "-0.1,0.6,0.5"])
def test_a_bad_mix_is_usage_exit_2_in_one_line(text, tmp_path):
    with pytest.raises(PipelineError, match="--mix"):
        parse_mix(text)
    result = CliRunner().invoke(main, ["trajectories", str(tmp_path / "t"), "--spec", "tiny",
                                       "--episodes", "3", "--seed", "1", "--mix", text])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert result.output.startswith("Error: --mix")


def test_cli_writes_a_set_from_a_spec(tmp_path):
    result = CliRunner().invoke(main, ["trajectories", str(tmp_path / "t"), "--spec", "tiny",
                                       "--episodes", "5", "--seed", "3", "--quiet",
                                       "--datasets", str(tmp_path / "none")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "t" / "manifest.json").is_file()
    both = CliRunner().invoke(main, ["trajectories", str(tmp_path / "u"), "--episodes", "5",
                                     "--seed", "3"])
    assert both.exit_code == 2 and "exactly one of --spec" in both.output


def test_a_themed_spec_draws_each_level_in_its_own_theme_frame_for_frame(tmp_path):
    from engine.look import Look, Theme

    plan = Plan(spec_source(load_spec("public/B"), tmp_path / "none"), seed=4, episodes=10)
    manifest = write_trajectories(plan, tmp_path / "b", QUIET)
    assert manifest["look"] == "themed"
    eps = pl.read_parquet(tmp_path / "b" / "episodes" / "*.parquet")
    frames = pl.read_parquet(tmp_path / "b" / "frames" / "*.parquet")
    assert eps["theme"].null_count() == 0 and eps["theme"].n_unique() == eps.height
    for ep in eps.iter_rows(named=True):
        level, look = parse_xsb(ep["level"]), Look("themed", Theme.from_json(ep["theme"]))
        state = level.start
        rows = frames.filter(pl.col("episode") == ep["episode"]).sort("step")
        for r in rows.iter_rows(named=True):
            assert r["frame"] == draw(level, state, look).tobytes()
            if r["action"] >= 0:
                state = step(level, state, r["action"])[0]
        assert ep["goal"] == draw_goal(level, look).tobytes()
