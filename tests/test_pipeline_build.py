"""Building versions of the tiny spec end to end: content, determinism, resume, refusals."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
import warm_cli
from click.testing import CliRunner

from engine.levels import canonical_id, parse_xsb, wall_layout_id
from engine.rules import replay
from pipeline.errors import PipelineError
from pipeline.seeds import REDRAW, commitment, secret_path
from pipeline.spec import load_spec, spec_from_dict
from pipeline.stages.build import STAGES, BuildFolder, build
from pipeline.stages.verify import verify
from pipeline.versions.tables import sha256_file
from pipeline.workers import Workers
from sokoforge.cli import main

SEED = 11
QUIET = Workers(show_progress=False)
QUIET2 = Workers(jobs=2, show_progress=False)


@pytest.fixture(scope="module")
def tiny():
    return load_spec("tiny")


@pytest.fixture(scope="module")
def built(tmp_path_factory, tiny):
    """One version ``v1`` of the tiny spec, built in one go with one worker."""
    datasets = tmp_path_factory.mktemp("datasets")
    result = build("v1", datasets=datasets, spec=tiny, seed=SEED, workers=QUIET)
    return datasets, result.path


def _levels(path: Path) -> pl.DataFrame:
    return pl.read_parquet(path / "levels.parquet")


def test_build_publishes_levels_and_manifest_with_the_format_types(built, tiny):
    datasets, path = built
    assert path == datasets / "v1"
    assert sorted(p.name for p in path.iterdir()) == [".gitignore", "levels.parquet",
                                                      "manifest.json", "stages"]
    assert (path / ".gitignore").read_text().splitlines()[-1] == "*"  # a hidden version
    assert not (datasets / ".build" / "v1").exists()
    schema = pq.read_schema(path / "levels.parquet")
    expected = [("index", "int16"), ("tier", "int8"), ("n_crates", "int8"), ("height", "int8"),
                ("width", "int8"), ("xsb", "string"), ("optimal_moves", "int16"),
                ("optimal_pushes", "int16"), ("solution", "string"), ("max_steps", "int16"),
                ("difficulty", "float"), ("grade", "int8"), ("canonical_id", "string")]
    assert [(f.name, str(f.type)) for f in schema][:len(expected)] == expected
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["format"] == 1 and manifest["version"] == "v1"
    assert manifest["game"] == "tiny" and manifest["spec"] == tiny.to_dict()
    assert manifest["files"]["levels.parquet"] == {
        "sha256": sha256_file(path / "levels.parquet"), "rows": tiny.n_levels}
    assert manifest["seed_commitment"]["sha256"] == commitment(
        SEED, manifest["seed_commitment"]["salt"])
    assert manifest["rotated_from"] is None and manifest["excluded_versions"] == []
    assert str(SEED) not in json.dumps(manifest["seed_commitment"])


def test_every_stored_solution_replays_to_solved_in_optimal_moves(built):
    df = _levels(built[1])
    for row in df.iter_rows(named=True):
        level = parse_xsb(row["xsb"])
        states = replay(level, row["solution"])
        assert len(states) - 1 == row["optimal_moves"] == len(row["solution"])
        assert level.is_solved(states[-1])
        assert not level.is_solved(states[0])
        assert sum(ch.isupper() for ch in row["solution"]) == row["optimal_pushes"]


def test_levels_follow_the_spec_bands_crates_and_budgets(built, tiny):
    df = _levels(built[1])
    assert df["index"].to_list() == list(range(tiny.n_levels))
    assert df["tier"].to_list() == sorted(df["tier"].to_list())
    for row in df.iter_rows(named=True):
        tier = tiny.tiers[row["tier"]]
        level = parse_xsb(row["xsb"])
        assert row["n_crates"] == level.n_crates == tier.crates
        assert (row["band_lo"], row["band_hi"]) == tier.band(row["slot"])
        assert row["band_lo"] <= row["optimal_moves"] <= row["band_hi"]
        assert row["max_steps"] == max(tiny.budget_floor,
                                       tiny.budget_multiple * row["optimal_moves"])
        assert row["canonical_id"] == canonical_id(level)
        assert (row["height"], row["width"]) == (8, 8)
        assert not any(level.goals.flat[c] for c in level.start.crates)
    for t, tier in enumerate(tiny.tiers):
        rows = df.filter(pl.col("tier") == t)
        assert sorted(rows["slot"].to_list()) == list(range(tier.levels))
        assert rows["difficulty"].to_list() == sorted(rows["difficulty"].to_list())


def test_no_canonical_id_or_wall_layout_repeats_within_a_version(built):
    df = _levels(built[1])
    assert df["canonical_id"].n_unique() == df.height
    layouts = [wall_layout_id(parse_xsb(x)) for x in df["xsb"]]
    assert len(set(layouts)) == df.height


@pytest.mark.slow
def test_two_workers_give_the_same_bytes_as_one(built, tiny, tmp_path):
    datasets, path = built
    other = build("v1", datasets=tmp_path, spec=tiny, seed=SEED, workers=QUIET2).path
    for name in ["levels.parquet"] + [f"stages/{s}.parquet" for s in STAGES[:-1]]:
        assert (other / name).read_bytes() == (path / name).read_bytes(), name


def test_a_later_version_shares_no_canonical_id_with_earlier_ones(built, tiny):
    datasets, path = built
    later = build("v2", datasets=datasets, spec=tiny, seed=SEED, workers=QUIET).path
    try:
        first, second = _levels(path), _levels(later)
        assert not set(first["canonical_id"]) & set(second["canonical_id"])
        assert json.loads((later / "manifest.json").read_text())["excluded_versions"] == [
            {"version": "v1", "sha256": sha256_file(path / "levels.parquet")}]
    finally:
        shutil.rmtree(later)


def test_building_an_existing_version_is_refused(built, tiny):
    datasets, path = built
    before = sha256_file(path / "levels.parquet")
    with pytest.raises(PipelineError, match="version v1 already exists"):
        build("v1", datasets=datasets, spec=tiny, seed=SEED, workers=QUIET)
    result = CliRunner().invoke(main, ["build", "v1", "--seed", "1", "--spec", "tiny",
                                       "--datasets", str(datasets), "--quiet"])
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error: version v1 already exists")
    # CliRunner keeps a traceback out of the output: an uncaught exception shows here instead.
    assert isinstance(result.exception, SystemExit)
    assert len(result.output.strip().splitlines()) == 1
    assert sha256_file(path / "levels.parquet") == before


def test_stages_run_one_at_a_time_and_resume_after_corruption(built, tiny, tmp_path):
    reference = sha256_file(built[1] / "levels.parquet")
    folder = BuildFolder(tmp_path, "v1")
    build("v1", datasets=tmp_path, spec=tiny, seed=SEED, workers=QUIET, stages=["generate"])
    with pytest.raises(PipelineError, match="stage grade of v1 needs stage select first"):
        build("v1", datasets=tmp_path, workers=QUIET, stages=["grade"])
    build("v1", datasets=tmp_path, workers=QUIET, stages=["select"])
    build("v1", datasets=tmp_path, workers=QUIET, stages=["solve"])
    # A finished stage file that was damaged counts as not done and is made again.
    solved = folder.output("solve")
    solved.write_bytes(solved.read_bytes()[:100])
    with pytest.raises(PipelineError, match="needs stage solve first"):
        build("v1", datasets=tmp_path, workers=QUIET, stages=["grade"])
    build("v1", datasets=tmp_path, workers=QUIET, stages=["solve"])
    build("v1", datasets=tmp_path, workers=QUIET, stages=["grade"])
    # A stage killed while writing leaves only its temporary file and no marker.
    folder.output("write").with_name("levels.parquet.tmp").write_bytes(b"half")
    assert not (tmp_path / "v1").exists()
    result = build("v1", datasets=tmp_path, workers=QUIET)
    assert result.published and set(result.timings) == {"write"}
    assert sha256_file(tmp_path / "v1" / "levels.parquet") == reference


def test_resume_with_another_seed_or_spec_is_refused(tiny, tmp_path):
    build("v1", datasets=tmp_path, spec=tiny, seed=SEED, workers=QUIET, stages=["generate"])
    with pytest.raises(PipelineError, match="with another seed is in progress"):
        build("v1", datasets=tmp_path, seed=SEED + 1, workers=QUIET)
    with pytest.raises(PipelineError, match="with spec 'tiny' is in progress"):
        build("v1", datasets=tmp_path, spec=load_spec("standard"), workers=QUIET)


@pytest.mark.slow
@pytest.mark.parametrize("after", ["generate", "solve"])
def test_build_killed_mid_way_finishes_with_the_same_bytes(built, tmp_path, after):
    reference = sha256_file(built[1] / "levels.parquet")
    cmd = ["build", "v1", "--seed", str(SEED), "--spec", "tiny", "--datasets", str(tmp_path),
           "--quiet"]
    with open(os.devnull, "w") as nowhere:
        proc = warm_cli.start(cmd, stdout=nowhere, stderr=nowhere)
    marker = BuildFolder(tmp_path, "v1").marker(after)
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert marker.exists() and not (tmp_path / "v1").exists()
    done = warm_cli.run(cmd, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sha256_file(tmp_path / "v1" / "levels.parquet") == reference


def test_bad_spec_field_is_refused_with_its_name_and_nothing_written(tmp_path):
    spec = tmp_path / "bad.toml"
    text = (Path(__file__).resolve().parent.parent / "pipeline/specs/tiny.toml").read_text()
    spec.write_text(text.replace("wall_density = 0.10", "wall_density = 1.5"))
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    result = CliRunner().invoke(main, ["build", "vx", "--seed", "3", "--spec", str(spec),
                                       "--datasets", str(datasets), "--quiet"])
    assert result.exit_code == 2  # unreadable input
    assert result.output == ("Error: bad.toml tier 0: field 'wall_density' is 1.5; "
                             "expected 0 <= d < 1\n")
    assert not (datasets / "vx").exists() and not (datasets / ".build" / "vx").exists()


def test_impossible_band_names_tier_and_slot_and_leaves_nothing(tiny, tmp_path):
    data = tiny.to_dict()
    data["max_attempts"] = 3
    data["tiers"][1]["band_start"] = [200, 210]
    with pytest.raises(PipelineError, match=r"tier 1 slot 0: no layout in 3 attempts .*"
                                            r"\[200, 210\]"):
        build("vx", datasets=tmp_path, spec=spec_from_dict(data), seed=1, workers=QUIET)
    assert not (tmp_path / "vx").exists() and not (tmp_path / ".build" / "vx").exists()


def test_secret_seed_is_stored_0600_never_printed_and_committed(tiny, tmp_path):
    result = CliRunner().invoke(main, ["build", "s1", "--spec", "tiny",
                                       "--datasets", str(tmp_path)])
    assert result.exit_code == 0, result.output
    path = secret_path(tmp_path, "s1")
    assert path.stat().st_mode & 0o777 == 0o600
    seed = int(path.read_text())
    assert str(seed) not in result.output
    manifest_text = (tmp_path / "s1" / "manifest.json").read_text()
    assert str(seed) not in manifest_text
    assert str(seed) not in (tmp_path / "s1" / "stages" / "build.json").read_text()
    manifest = json.loads(manifest_text)
    assert manifest["seed_source"] == "secret"
    assert manifest["seed_commitment"]["sha256"] == commitment(
        seed, manifest["seed_commitment"]["salt"])
    # Anyone given the seed later can check the version.
    assert verify("s1", seed, datasets=tmp_path).ok
    # A damaged secret file is refused without quoting any of it.
    path.write_text(f"{seed}x\n")
    damaged = CliRunner().invoke(main, ["reveal", "s1", "--datasets", str(tmp_path)])
    assert damaged.exit_code == 2 and "is damaged" in damaged.output  # unreadable input
    assert str(seed)[:6] not in damaged.output


def test_verify_accepts_the_seed_and_rejects_another(built):
    datasets, _ = built
    good = verify("v1", SEED, datasets=datasets)
    assert good.ok and good.rebuilt_sha256 == good.expected_sha256
    bad = verify("v1", SEED + 1, datasets=datasets)
    assert not bad.commitment_matches and not bad.rebuild_matches and bad.file_matches
    runner = CliRunner()
    ok = runner.invoke(main, ["verify", "v1", "--seed", str(SEED), "--datasets", str(datasets)])
    assert ok.exit_code == 0 and ok.output.endswith("v1: verified\n")
    no = runner.invoke(main, ["verify", "v1", "--seed", "12", "--datasets", str(datasets)])
    assert no.exit_code == 1 and "seed commitment: MISMATCH" in no.output
    assert no.output.endswith("Error: v1 does not verify\n")


def test_dask_cluster_gives_the_same_bytes_as_local_workers(built, tiny, tmp_path):
    import distributed
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        workers = Workers(backend="dask", scheduler=cluster.scheduler_address,
                          show_progress=False)
        path = build("v1", datasets=tmp_path, spec=tiny, seed=SEED, workers=workers).path
    assert sha256_file(path / "levels.parquet") == sha256_file(built[1] / "levels.parquet")


def test_stage_commands_run_in_order_and_report_progress_as_plain_lines(tmp_path):
    runner = CliRunner()
    base = ["--datasets", str(tmp_path)]
    early = runner.invoke(main, ["stage", "solve", "st", *base])
    assert early.exit_code == 1
    assert "no build of st in progress: run `sokoforge stage generate st` first" in early.output
    first = runner.invoke(main, ["stage", "generate", "st", "--seed", "5", "--spec", "tiny",
                                 *base])
    assert first.exit_code == 0, first.output
    assert first.stdout == f"st: generate done in {tmp_path / '.build' / 'st'}\n"
    assert "generate: 8/8" in first.stderr and "generate: " in first.stderr
    for stage in ("select", "solve", "grade"):
        assert runner.invoke(main, ["stage", stage, "st", *base]).exit_code == 0
    again = runner.invoke(main, ["stage", "grade", "st", *base])
    assert again.stderr.startswith("resuming: grade kept\n")
    assert again.stderr.count("resuming:") == 1  # once, however many commands ran before
    last = runner.invoke(main, ["stage", "write", "st", *base])
    assert last.exit_code == 0 and last.stdout.startswith(
        f"st: published at {tmp_path / 'st'} (hidden, though built from the public seed 5")
    assert (tmp_path / "st" / "manifest.json").is_file()


def test_scatter_method_builds_levels_inside_their_bands(tmp_path):
    data = load_spec("tiny").to_dict()
    data.update(method="scatter", max_attempts=2000, tiers=data["tiers"][:2])
    spec = spec_from_dict(data)
    df = _levels(build("sc", datasets=tmp_path, spec=spec, seed=3, workers=QUIET).path)
    assert df.height == spec.n_levels
    for row in df.iter_rows(named=True):
        level = parse_xsb(row["xsb"])
        assert row["band_lo"] <= row["optimal_moves"] <= row["band_hi"]
        assert level.n_crates == spec.tiers[row["tier"]].crates
        assert level.is_solved(replay(level, row["solution"])[-1])
    # Scattered levels are redrawn from their origins too.
    assert verify("sc", 3, datasets=tmp_path).ok


def test_dask_backend_without_a_scheduler_is_refused(tmp_path):
    result = CliRunner().invoke(main, ["build", "vd", "--backend", "dask",
                                       "--datasets", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output == "Error: --backend dask needs --scheduler ADDRESS\n"


def test_solve_stage_stops_naming_a_level_whose_claimed_optimum_is_wrong(built, tmp_path):
    from pipeline.stages.solve import solve

    candidates = pl.read_parquet(built[1] / "stages" / "generate.parquet")
    lied = candidates.with_columns(
        pl.when(pl.int_range(pl.len()) == 4).then(pl.col("distance") + 1)
        .otherwise(pl.col("distance")).alias("distance"))
    lied.write_parquet(tmp_path / "generate.parquet")
    row = candidates.row(4, named=True)
    with pytest.raises(PipelineError) as info:
        solve(tmp_path / "generate.parquet", tmp_path / "solve.parquet", QUIET)
    assert str(info.value).startswith(
        f"tier {row['tier']} slot {row['slot']} layout {row['layout']}: the forward solver's "
        f"optimum is {row['distance']} moves but the generator claimed {row['distance'] + 1}")
    assert "|".join(row["xsb"].splitlines()) in str(info.value)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "solve.parquet").exists()


def test_select_keeps_excluded_ids_and_layouts_out(built, tiny, tmp_path):
    from pipeline.stages.select import select

    candidates = built[1] / "stages" / "generate.parquet"
    first = pl.read_parquet(built[1] / "levels.parquet")
    banned = first.filter(pl.col("tier") == 0)
    select(candidates, tmp_path / "a.parquet", tiny, SEED, frozenset(banned["canonical_id"]))
    a = pl.read_parquet(tmp_path / "a.parquet")
    assert a.height == tiny.n_levels
    assert not set(a["canonical_id"]) & set(banned["canonical_id"])
    layouts = frozenset(first.filter(pl.col("tier") == 1)["wall_layout_id"])
    select(candidates, tmp_path / "b.parquet", tiny, SEED, frozenset(), exclude_layouts=layouts)
    b = pl.read_parquet(tmp_path / "b.parquet")
    assert b.height == tiny.n_levels and not set(b["wall_layout_id"]) & layouts


def test_select_draws_more_candidates_for_exactly_the_slots_it_cannot_fill(built, tiny,
                                                                         tmp_path, caplog):
    from pipeline.stages.select import select

    candidates = built[1] / "stages" / "generate.parquet"
    pool = pl.read_parquet(candidates)
    # Tier 1 of the tiny game has three slots and three layouts: banning one leaves two.
    layout = pool.filter(pl.col("tier") == 1)["wall_layout_id"][0]
    with caplog.at_level(logging.INFO, logger="pipeline"):
        select(candidates, tmp_path / "a.parquet", tiny, SEED, frozenset(),
               exclude_layouts=frozenset([layout]), workers=Workers())
    lines = [x for x in caplog.messages if x.startswith("select:")]
    chosen = pl.read_parquet(tmp_path / "a.parquet")
    assert chosen.height == tiny.n_levels and layout not in chosen["wall_layout_id"].to_list()
    assert chosen["canonical_id"].n_unique() == chosen["wall_layout_id"].n_unique() == 8
    redrawn = chosen.filter(pl.col("draw") == REDRAW)
    assert redrawn.height >= 1 and set(redrawn["tier"].to_list()) == {1}
    unfilled = [f"tier 1 slot {s}" for s in redrawn["slot"].to_list()]
    assert len(lines) == 1 and lines[0].startswith(f"select: {unfilled[0]} unfilled; drawing")
    for row in redrawn.iter_rows(named=True):
        assert (row["span_lo"], row["span_hi"]) == tiny.tiers[1].band(row["slot"])
        assert row["band_lo"] <= row["distance"] <= row["band_hi"] and row["round"] == 1
    # Deterministic in seed, tier, slot and round.
    select(candidates, tmp_path / "b.parquet", tiny, SEED, frozenset(),
           exclude_layouts=frozenset([layout]))
    assert pl.read_parquet(tmp_path / "b.parquet").equals(chosen)


def test_select_fails_naming_the_slot_and_the_spec_field_when_redraws_run_out(
        built, tiny, tmp_path, monkeypatch):
    from pipeline.stages import select as select_module

    monkeypatch.setattr(select_module, "MAX_REDRAWS", 0)
    candidates = built[1] / "stages" / "generate.parquet"
    layout = pl.read_parquet(candidates).filter(pl.col("tier") == 1)["wall_layout_id"][0]
    with pytest.raises(PipelineError, match=r"^selection infeasible: tier 1 slot \d cannot get"
                                            r".* raise candidates_per_slot or max_attempts"):
        select_module.select(candidates, tmp_path / "b.parquet", tiny, SEED, frozenset(),
                             exclude_layouts=frozenset([layout]))
    assert not (tmp_path / "b.parquet").exists()


def test_a_failed_build_leaves_no_folder_lock_or_secret_and_a_retry_draws_afresh(
        tiny, tmp_path, monkeypatch):
    from pipeline.stages import select as select_module

    real = select_module.select

    def fails(*args, **kwargs):
        raise PipelineError("selection infeasible: tier 1 slot 0 cannot get a level")

    monkeypatch.setattr(select_module, "select", fails)
    base = ["--spec", "tiny", "--datasets", str(tmp_path), "--quiet"]
    out = CliRunner().invoke(main, ["build", "s1", *base])
    assert out.exit_code == 1 and "tier 1 slot 0" in out.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no s1, .build or .secrets
    monkeypatch.setattr(select_module, "select", real)
    again = CliRunner().invoke(main, ["build", "s1", *base])
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [".secrets", "s1"]
    assert secret_path(tmp_path, "s1").is_file()


def test_a_finished_build_removes_its_lock_and_a_resumed_one_says_what_it_kept(
        tiny, tmp_path, caplog):
    build("v1", datasets=tmp_path, spec=tiny, seed=SEED, workers=QUIET,
          stages=["generate", "select"])
    assert (tmp_path / ".build" / "v1" / "stages").is_dir()
    assert not (tmp_path / ".build" / "v1.lock").exists()
    with caplog.at_level(logging.INFO, logger="pipeline"):
        build("v1", datasets=tmp_path, workers=Workers())
    assert caplog.messages[0] == "resuming: generate, select kept"
    assert not (tmp_path / ".build").exists() and (tmp_path / "v1").is_dir()


def test_a_state_space_too_large_for_the_engine_is_a_readable_refusal(tmp_path):
    data = load_spec("tiny").to_dict()
    data.update(height=16, width=16, max_attempts=1, tiers=[
        {"levels": 1, "crates": 6, "wall_density": 0.0, "band_start": [10, 20],
         "band_end": [10, 20]}])
    with pytest.raises(PipelineError, match=r"^generate: a level's state space is too large"):
        build("big", datasets=tmp_path, spec=spec_from_dict(data), seed=1, workers=QUIET)
    assert not (tmp_path / "big").exists() and not (tmp_path / ".build" / "big").exists()


def test_a_second_build_of_the_same_version_at_once_is_refused(tiny, tmp_path):
    import fcntl

    (tmp_path / ".build").mkdir()
    with open(tmp_path / ".build" / "vl.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(PipelineError, match="another build of vl is running"):
            build("vl", datasets=tmp_path, spec=tiny, seed=1, workers=QUIET)
        assert (tmp_path / ".build" / "vl.lock").exists()  # the running build's lock stays
    assert not (tmp_path / ".build" / "vl").exists()


@pytest.mark.parametrize("taken", [True, False])
def test_a_stop_while_the_build_lock_is_taken_leaves_no_lock_file(tmp_path, monkeypatch, taken):
    """Ctrl-C arriving as the lock is taken (just after, or just before, the flock) or while
    it is held: the lock file goes all the same, and the next build takes it."""
    import fcntl

    from pipeline.stages.build import build_lock

    real = fcntl.flock
    calls = []

    def stopped(fd, operation):
        calls.append(operation)
        if len(calls) == 1:
            if taken:
                real(fd, operation)
            raise KeyboardInterrupt
        return real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", stopped)
    with pytest.raises(KeyboardInterrupt), build_lock(BuildFolder(tmp_path, "v")):
        raise AssertionError("the lock was not being taken")
    assert not (tmp_path / ".build").exists()
    monkeypatch.setattr(fcntl, "flock", real)
    with pytest.raises(KeyboardInterrupt), build_lock(BuildFolder(tmp_path, "v")):
        raise KeyboardInterrupt
    assert not (tmp_path / ".build").exists()


@pytest.mark.parametrize("name", ["../escape", ".hidden", "a/b", "", "x" * 65])
def test_unsafe_version_names_are_refused(tmp_path, name):
    with pytest.raises(PipelineError, match="is not allowed"):
        build(name, datasets=tmp_path, seed=1, workers=QUIET)
    assert list(tmp_path.iterdir()) == []
    # Every command that names a version reads or writes nothing outside DATASETS.
    for args in (["verify", name, "--seed", "1"], ["reveal", name], ["audit", name],
                 ["rotate", "new", "--from", name]):
        out = CliRunner().invoke(main, [*args, "--datasets", str(tmp_path)])
        assert out.exit_code != 0 and "is not allowed" in out.output, (args, out.output)
    assert list(tmp_path.iterdir()) == []


def test_verify_of_a_missing_version_says_so(tmp_path):
    result = CliRunner().invoke(main, ["verify", "nope", "--seed", "1",
                                       "--datasets", str(tmp_path)])
    assert result.exit_code == 2  # unreadable input
    assert result.output == (f"Error: no version 'nope' under {tmp_path}; `sokoforge versions` "
                             "lists those there, `make dataset VERSION=nope` builds it\n")


def test_a_wrong_seed_stops_at_the_commitment_before_any_redraw(built, monkeypatch):
    import pipeline.stages.verify as verify_module

    datasets, _ = built

    def never(*args, **kwargs):
        raise AssertionError("a wrong seed must not redraw anything")

    monkeypatch.setattr(verify_module, "redraw", never)
    monkeypatch.setattr(verify_module, "generate", never)
    bad = verify("v1", SEED + 1, datasets=datasets)
    assert not bad.ok and not bad.commitment_matches and bad.file_matches
    assert bad.levels_redrawn == 0 and bad.rebuilt_sha256 == ""
    assert bad.problems == ("the seed does not open the manifest's commitment: nothing was "
                            "redrawn",)
    no = CliRunner().invoke(main, ["verify", "v1", "--seed", "12", "--datasets", str(datasets)])
    assert no.exit_code == 1 and isinstance(no.exception, SystemExit)
    assert no.output == ("seed commitment: MISMATCH\nnothing redrawn: the seed does not open "
                         "the manifest's commitment\nstored levels.parquet: match\n"
                         "Error: v1 does not verify\n")


def test_a_candidate_has_the_candidate_schemas_columns_in_its_order():
    from pipeline.stages.generate import CANDIDATE_SCHEMA, Candidate

    assert Candidate._fields == tuple(CANDIDATE_SCHEMA)


def test_the_manifest_records_each_levels_origin_and_verify_redraws_it_alone(built, tmp_path):
    from pipeline.stages.generate import goal_first_attempt

    tiny = load_spec("tiny")
    datasets, path = built
    manifest = json.loads((path / "manifest.json").read_text())
    levels = _levels(path)
    assert len(manifest["origins"]) == levels.height
    for origin, row in zip(manifest["origins"], levels.iter_rows(named=True), strict=True):
        assert origin["draw"] == "generate" and origin["tier"] == row["tier"]
        drawn = goal_first_attempt(tiny, SEED, origin["tier"], origin["layout"],
                                   origin["attempt"])
        assert drawn[origin["pick"]].xsb == row["xsb"]
    # The version alone (no stages, nothing else in the folder) verifies.
    alone = tmp_path / "alone"
    alone.mkdir()
    for name in ("levels.parquet", "manifest.json"):
        (alone / "v1").mkdir(exist_ok=True)
        shutil.copy(path / name, alone / "v1" / name)
    ok = CliRunner().invoke(main, ["verify", "v1", "--seed", str(SEED), "--datasets",
                                   str(alone)])
    assert ok.exit_code == 0, ok.output
    assert f"levels redrawn from the seed: {levels.height} of {levels.height}\n" in ok.output
    # An origin that draws another level is named, and the version does not verify.
    manifest["origins"][3]["attempt"] += 1
    (alone / "v1" / "manifest.json").write_text(json.dumps(manifest))
    bad = verify("v1", SEED, datasets=alone)
    assert not bad.ok and bad.levels_redrawn == levels.height - 1
    row = levels.row(3, named=True)
    assert any(p.startswith(f"level 3 (tier {row['tier']} slot {row['slot']}) is not what "
                            "its origin") for p in bad.problems)


def test_verify_rechecks_the_selection_rules_within_the_version(built):
    from pipeline.stages.verify import selection_problems

    tiny = load_spec("tiny")
    levels = _levels(built[1])
    assert selection_problems(levels, tiny) == []
    first = pl.lit(levels["wall_layout_id"][0])
    twin = levels.with_columns(pl.when(pl.col("index") == 1).then(first)
                               .otherwise(pl.col("wall_layout_id")).alias("wall_layout_id"))
    assert selection_problems(twin, tiny) == ["two levels share a wall layout id"]
    late = levels.with_columns((pl.col("optimal_moves") + 40).alias("optimal_moves"))
    assert any("outside the band" in p for p in selection_problems(late, tiny))


def test_verify_of_an_incomplete_manifest_is_one_readable_line(built, tmp_path):
    shutil.copytree(built[1], tmp_path / "v")
    (tmp_path / "v" / "manifest.json").write_text('{"format": 1, "version": "v"}')
    result = CliRunner().invoke(main, ["verify", "v", "--seed", "1", "--datasets", str(tmp_path)])
    assert result.exit_code == 2  # unreadable input
    assert result.output == (f"Error: manifest {tmp_path / 'v' / 'manifest.json'}: missing "
                             "field 'spec'\n")


def test_cli_stage_commands_are_the_pipeline_stages():
    from sokoforge.cli import build as cli_build

    assert cli_build.STAGES == STAGES
    assert sorted(main.commands["stage"].commands) == sorted(STAGES)
