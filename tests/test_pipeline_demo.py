"""The committed demo version: consistent with its manifest, and rebuilt byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.build import build
from pipeline.spec import load_spec, spec_from_dict
from pipeline.tables import sha256_file
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
                    exclusion_root=DATASETS, excluded_versions=manifest["excluded_versions"])
    assert (rebuilt.path / "levels.parquet").read_bytes() == (DEMO / "levels.parquet").read_bytes()
    again = json.loads((rebuilt.path / "manifest.json").read_text())
    assert {k: v for k, v in again.items() if k != "created"} == {
        k: v for k, v in manifest.items() if k != "created"}

