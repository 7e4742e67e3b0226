"""The committed demo version: consistent with its manifest, rebuilt byte for byte; and the demo
as first published, which must keep loading, auditing and verifying."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.spec import load_spec, spec_from_dict
from pipeline.stages.build import build
from pipeline.stages.verify import verify
from pipeline.versions.tables import sha256_file
from pipeline.workers import Workers

DATASETS = Path(__file__).resolve().parent.parent / "datasets"
DEMO = DATASETS / "demo"


def test_demo_is_the_standard_game_from_a_public_seed():
    manifest = json.loads((DEMO / "manifest.json").read_text())
    assert manifest["version"] == "demo" and manifest["game"] == "standard"
    assert spec_from_dict(manifest["spec"]) == load_spec("standard")
    assert manifest["seed_source"] == "public" and manifest["public_seed"].isdigit()
    assert manifest["files"]["levels.parquet"] == {
        "sha256": sha256_file(DEMO / "levels.parquet"), "rows": 100}
    df = pl.read_parquet(DEMO / "levels.parquet")
    assert df["tier"].value_counts().sort("tier")["count"].to_list() == [25, 25, 30, 20]


def test_rebuilding_the_demo_reproduces_it_byte_for_byte(tmp_path):
    manifest = json.loads((DEMO / "manifest.json").read_text())
    rebuilt = build("demo", datasets=tmp_path, spec=spec_from_dict(manifest["spec"]),
                    seed=int(manifest["public_seed"]), workers=Workers(show_progress=False),
                    exclusion_root=DATASETS,
                    excluded_versions=[e["version"] for e in manifest["excluded_versions"]])
    assert (rebuilt.path / "levels.parquet").read_bytes() == (DEMO / "levels.parquet").read_bytes()
    again = json.loads((rebuilt.path / "manifest.json").read_text())
    assert {k: v for k, v in again.items() if k != "created"} == {
        k: v for k, v in manifest.items() if k != "created"}



def test_the_demo_records_where_each_level_came_from_and_verifies_from_it():
    manifest = json.loads((DEMO / "manifest.json").read_text())
    assert len(manifest["origins"]) == 100
    assert verify("demo", int(manifest["public_seed"]), datasets=DATASETS).ok


FIRST_DEMO = Path(__file__).resolve().parent / "fixtures" / "published" / "demo-2026-11"


@pytest.fixture(scope="module")
def first_demo(tmp_path_factory):
    """The demo as first published (its manifest records no level origins), alone."""
    datasets = tmp_path_factory.mktemp("datasets")
    shutil.copytree(FIRST_DEMO, datasets / "demo")
    return datasets


def test_the_first_published_demo_still_loads_and_audits(first_demo):
    from pipeline.audit.audit import audit
    from serve.games.dataset import load_version

    served = load_version(first_demo, "demo")
    assert len(served.levels) == 100
    assert audit(first_demo, "demo").passed


def test_the_first_published_demo_verifies_without_recorded_origins(first_demo):
    manifest = json.loads((first_demo / "demo" / "manifest.json").read_text())
    assert "origins" not in manifest
    outcome = verify("demo", int(manifest["public_seed"]), datasets=first_demo)
    # Each level is found among the candidates its seed generates; it was graded by the first
    # difficulty model, so levels, optima, solutions and budgets are compared slot by slot.
    assert outcome.ok and outcome.levels_redrawn == 100, outcome.problems
    assert outcome.earlier_model and "earlier difficulty model" in outcome.notes[0]


def test_a_version_graded_by_an_earlier_model_still_fails_on_a_changed_solution(first_demo,
                                                                                tmp_path):
    datasets = tmp_path / "datasets"  # a copy: the other tests read the demo unchanged
    shutil.copytree(first_demo / "demo", datasets / "demo")
    manifest = json.loads((datasets / "demo" / "manifest.json").read_text())
    path = datasets / "demo" / "levels.parquet"
    levels = pl.read_parquet(path)
    row = levels.row(0, named=True)
    altered = row["solution"].swapcase()
    levels = levels.with_columns(pl.when(pl.col("index") == 0).then(pl.lit(altered))
                                 .otherwise(pl.col("solution")).alias("solution"))
    levels.write_parquet(path)
    outcome = verify("demo", int(manifest["public_seed"]), datasets=datasets)
    assert not outcome.ok and not outcome.earlier_model
    assert any(f"tier {row['tier']} slot {row['slot']}: the rebuilt solution differs" in p
               for p in outcome.problems)


def test_a_manifest_without_origins_names_the_level_it_cannot_place(first_demo, tmp_path):
    datasets = tmp_path / "datasets"
    shutil.copytree(first_demo / "demo", datasets / "demo")
    levels = pl.read_parquet(datasets / "demo" / "levels.parquet")
    stranger = build("x", datasets=tmp_path / "other", spec=load_spec("tiny"), seed=5,
                     workers=Workers(show_progress=False))
    other = pl.read_parquet(stranger.path / "levels.parquet").row(0, named=True)
    assert other["tier"] == 0
    levels.with_columns(pl.when(pl.col("index") == 0).then(pl.lit(other["xsb"]))
                        .otherwise(pl.col("xsb")).alias("xsb")).write_parquet(
        datasets / "demo" / "levels.parquet")
    outcome = verify("demo", 2026, datasets=datasets)
    assert not outcome.ok and outcome.levels_redrawn == 99
    assert any(p.startswith("level 0 (tier 0 slot ") and "before level origins were recorded"
               in p for p in outcome.problems), outcome.problems
