"""An adaptive game's pool: its spec, a small pool built, verified and calibrated."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from pipeline.spec import SpecError, load_spec, spec_from_dict
from pipeline.stages.build import build
from pipeline.stages.verify import verify
from pipeline.workers import Workers
from sokoforge.cli import main
from tests.spec_support import two_tier_tiny

SEED = 5
POOL = 10


def small_pool():
    """The tiny game's first two tiers as a pool of ten levels, five per session."""
    return spec_from_dict({**two_tier_tiny().to_dict(), "name": "adaptive",
                           "adaptive": {"pool": POOL, "episodes": 5}})


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """The small pool built, with its panel and item parameters (``sokoforge panel``)."""
    datasets = tmp_path_factory.mktemp("datasets")
    build("pool", datasets=datasets, spec=small_pool(), seed=SEED,
          workers=Workers(show_progress=False))
    out = CliRunner().invoke(main, ["panel", "pool", "--datasets", str(datasets), "--quiet"])
    assert out.exit_code == 0, out.output
    return datasets, out.output


def test_the_adaptive_spec_is_a_thousand_levels_of_the_standard_tiers_fifty_a_session():
    spec, standard = load_spec("adaptive"), load_spec("standard")
    assert spec.n_levels == 1000 and [t.levels for t in spec.tiers] == [250, 250, 300, 200]
    assert (spec.adaptive.episodes, spec.adaptive.parallel) == (50, 1)
    assert spec.tier_shares() == standard.tier_shares()
    assert spec.max_steps(20) == standard.max_steps(20) == 60  # budgeted at 3x
    for mine, theirs in zip(spec.tiers, standard.tiers, strict=True):  # the same range
        assert mine.band(0) == theirs.band(0)
        assert mine.band(mine.levels - 1) == theirs.band(theirs.levels - 1)
    assert spec_from_dict(spec.to_dict()) == spec  # a recorded pool reads back the same


def test_a_pool_spec_refuses_more_episodes_than_levels_and_unknown_fields():
    data = load_spec("adaptive").to_dict()
    with pytest.raises(SpecError, match="episodes"):
        spec_from_dict({**data, "adaptive": {"pool": 40, "episodes": 50}})
    with pytest.raises(SpecError, match="unknown field 'size'"):
        spec_from_dict({**data, "adaptive": {"size": 40}})


@pytest.mark.slow
def test_a_small_pool_builds_with_its_tiers_scaled_and_verifies(pool):
    datasets, _ = pool
    levels = pl.read_parquet(datasets / "pool" / "levels.parquet")
    assert levels.height == POOL and levels["tier"].value_counts()["count"].to_list() == [5, 5]
    manifest = json.loads((datasets / "pool" / "manifest.json").read_text())
    assert manifest["spec"]["adaptive"] == {"pool": POOL, "episodes": 5, "parallel": 1}
    assert verify("pool", SEED, datasets=datasets).ok


@pytest.mark.slow
def test_the_panel_calibrates_a_pool_into_items_parquet(pool):
    datasets, output = pool
    items = pl.read_parquet(datasets / "pool" / "report" / "items.parquet")
    assert "item parameters written" in output
    assert items["index"].to_list() == list(range(POOL))
    assert items.columns == ["index", "tier", "discrimination", "difficulty",
                             "prior_difficulty"]
    assert (items["discrimination"] > 0).all() and np.isfinite(items["difficulty"].to_numpy()).all()


FLOOR = ("a session informs at least as much as the standard ramp's 100 levels over the "
         "abilities the ramp spans")


def _failed(folder) -> list[str]:
    checks = json.loads((folder / "report" / "checks.json").read_text())["checks"]
    return [c["name"] for c in checks if not c["passed"]]


@pytest.mark.slow
def test_the_audit_of_a_pool_shows_its_information_and_keeps_its_items(pool):
    datasets, _ = pool
    out = CliRunner().invoke(main, ["audit", "pool", "--datasets", str(datasets)])
    report = datasets / "pool" / "report"
    # ten levels cannot give a session of five a ramp's information: said, and loudly
    assert out.exit_code == 1 and _failed(datasets / "pool") == [FLOOR], out.output
    text = (report / "report.md").read_text()
    assert "## Information curve" in text and "runs out" in text and "(the floor)" in text
    assert (report / "information.png").read_bytes().startswith(b"\x89PNG")
    for kept in ("items.parquet", "items.json", "panel.parquet", "reference.parquet"):
        assert (report / kept).is_file(), kept  # what the panel wrote outlives the report


@pytest.mark.slow
def test_a_rotated_pool_is_a_calibrated_pool_that_shares_no_level(pool):
    datasets, _ = pool
    out = CliRunner().invoke(main, ["rotate", "next", "--from", "pool", "--seed", "6",
                                    "--datasets", str(datasets), "--quiet"])
    assert out.exit_code == 1 and "audit against pool failed" in out.output
    assert _failed(datasets / "next") == [FLOOR]  # every other check holds, uniqueness too
    manifest = json.loads((datasets / "next" / "manifest.json").read_text())
    assert manifest["spec"] == small_pool().to_dict() and manifest["rotation"]["from"] == "pool"
    levels = pl.read_parquet(datasets / "next" / "levels.parquet")
    items = pl.read_parquet(datasets / "next" / "report" / "items.parquet")
    assert items["index"].to_list() == sorted(levels["index"].to_list())
    assert (datasets / "next" / "report" / "items.json").is_file()
    before = set(pl.read_parquet(datasets / "pool" / "levels.parquet")["canonical_id"])
    assert not before & set(levels["canonical_id"])


@pytest.mark.slow
def test_a_pools_round_closes_is_revealed_published_and_verifies(tmp_path):
    import asyncio

    from pipeline.versions.publish import publish_round
    from pipeline.versions.round_log import record_served
    from pipeline.versions.rounds import open_round
    from pipeline.versions.versions import reveal
    from serve.records.standings import close_round
    from serve.stores.sqlite import SQLiteStore

    build("secret", datasets=tmp_path, spec=small_pool(), workers=Workers(show_progress=False))
    out = CliRunner().invoke(main, ["panel", "secret", "--datasets", str(tmp_path), "--quiet"])
    assert out.exit_code == 0, out.output
    db = tmp_path / "s.sqlite"

    async def served() -> str:
        store = SQLiteStore(db)
        await store.start()
        try:
            return await store.identity()
        finally:
            await store.close()

    open_round(tmp_path, "secret", closes=200.0, now=100.0)
    record_served(tmp_path / "secret", asyncio.run(served()), "now")
    close_round(tmp_path, "secret", str(db), now=300.0)
    seed = reveal(tmp_path, "secret").seed
    publish_round(tmp_path, "secret", now=400.0)
    manifest = json.loads((tmp_path / "secret" / "manifest.json").read_text())
    assert manifest["visibility"] == "public" and manifest["spec"]["adaptive"]["pool"] == POOL
    assert verify("secret", seed, datasets=tmp_path).ok
    assert (tmp_path / "secret" / "report" / "items.parquet").is_file()
