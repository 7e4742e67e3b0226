"""Training trajectories: reproducible bytes on any workers, true frames, loadable everywhere."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.dataset as pads
import pytest
from click.testing import CliRunner
from public_support import QUIET, public_and_hidden

from engine.levels import canonical_id, parse_xsb
from engine.pictures.frames import draw, draw_goal
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


@pytest.mark.slow
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


def test_the_cards_loading_snippet_runs_as_written_from_the_dataset_folder(written, tmp_path):
    card = (written / "README.md").read_text()
    snippet = card.split("## Loading", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(tmp_path / "hf"), "HF_HOME": str(tmp_path / "hf-home")}
    done = subprocess.run([sys.executable, "-c", snippet + "\nprint(picture.shape, "
                           "len(first['frame']))"], cwd=written, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["(64,", "64,", "3)", str(64 * 64 * 3)]


@pytest.mark.slow
def test_the_readmes_reading_snippet_runs_as_written_from_the_repositorys_root(written, tmp_path):
    """Run where its `datasets/` folder of versions could shadow Hugging Face's package."""
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    part = readme.split("### Training trajectories", 1)[1].split("\n### ", 1)[0]
    snippet = part.split("```python\n", 1)[1].split("```", 1)[0].replace("OUT", str(written))
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(tmp_path / "hf"), "HF_HOME": str(tmp_path / "hf-home")}
    shown = "\nprint(picture.shape, len(ds['train']))"
    done = subprocess.run([sys.executable, "-c", snippet + shown], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    frames = pl.read_parquet(written / "frames" / "*.parquet").height
    assert done.stdout.split() == ["(64,", "64,", "3)", str(frames)]


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


def test_cli_writes_a_set_from_a_spec_excluding_the_repositorys_hidden_versions_from_anywhere(
        tmp_path, monkeypatch):
    monkeypatch.delenv("SOKOFORGE_DATASETS", raising=False)
    monkeypatch.chdir(tmp_path)  # no datasets/ here: the repository's is the one read
    result = CliRunner().invoke(main, ["trajectories", "t", "--spec", "tiny",
                                       "--episodes", "5", "--seed", "3", "--quiet"])
    assert result.exit_code == 0, result.output
    card = (tmp_path / "t" / "README.md").read_text()
    assert "demo" in card.split("(excluded: ", 1)[1].split(")", 1)[0].split(", ")
    both = CliRunner().invoke(main, ["trajectories", str(tmp_path / "u"), "--episodes", "5",
                                     "--seed", "3"])
    assert both.exit_code == 2 and "exactly one of --spec" in both.output


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_datasets_folder_that_is_not_there_is_refused_not_read_as_empty(tmp_path, how,
                                                                         monkeypatch):
    missing = str(tmp_path / "none")
    args = ["trajectories", str(tmp_path / "t"), "--spec", "tiny", "--episodes", "5",
            "--seed", "3"]
    if how == "option":
        args += ["--datasets", missing]
    else:
        monkeypatch.setenv("SOKOFORGE_DATASETS", missing)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert f"no datasets folder at {missing}" in result.output
    assert not (tmp_path / "t").exists()


def test_a_themed_spec_draws_each_level_in_its_own_theme_frame_for_frame(tmp_path):
    from engine.pictures.look import Look, Theme

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


def test_the_card_opens_with_the_hubs_front_matter_and_datasets_reads_its_configs(written,
                                                                                  tmp_path):
    import yaml

    import datasets

    card = (written / "README.md").read_text()
    assert card.startswith("---\n")
    header = yaml.safe_load(card.split("---\n")[1])
    frames = pl.read_parquet(written / "frames" / "*.parquet").height
    assert header["license"] == "cc-by-4.0" == json.loads(
        (written / "manifest.json").read_text())["license"]
    assert header["size_categories"] == ["n<1K" if frames < 1000 else "1K<n<10K"]
    assert [(c["config_name"], c["data_files"], c.get("default", False))
            for c in header["configs"]] == [
        ("frames", [{"split": "train", "path": "frames/*.parquet"}], True),
        ("episodes", [{"split": "train", "path": "episodes/*.parquet"}], False)]
    assert "--license cc-by-4.0" in card
    # the folder alone, as the Hub would read it: its configs name the tables
    episodes = datasets.load_dataset(str(written), "episodes", split="train",
                                     cache_dir=str(tmp_path / "hf"))
    assert sorted(episodes["episode"]) == list(range(40))
    refused = CliRunner().invoke(main, ["trajectories", str(tmp_path / "x"), "--spec", "tiny",
                                        "--episodes", "1", "--seed", "1", "--license", "CC BY"])
    assert refused.exit_code == 2 and "--license 'CC BY': expected a license id" in refused.output
