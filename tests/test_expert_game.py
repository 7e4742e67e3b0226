"""The expert game: its spec, and a build from a public seed that audits clean."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.audit.audit import audit
from pipeline.spec import SpecError, load_spec, spec_from_dict
from pipeline.stages.build import build
from pipeline.workers import Workers


def test_expert_spec_is_its_own_game_past_the_standard_ramp():
    spec = load_spec("expert")
    assert spec.name == "expert" and (spec.height, spec.width) == (8, 8)
    assert [t.crates for t in spec.tiers] == [3, 4, 5]
    assert spec.max_steps(60) == 120
    bands = [t.band(s) for t in spec.tiers for s in range(t.levels)]
    assert min(lo for lo, _ in bands) >= 45 and max(hi for _, hi in bands) <= 125
    assert bands[0][0] < 55 and bands[-1][1] >= 115


def test_compute_source_is_checked_and_stays_implicit_by_default():
    data = load_spec("standard").to_dict()
    assert "compute" not in data  # manifests written before the field read the same
    assert spec_from_dict({**data, "compute": "measured"}).compute == "measured"
    assert spec_from_dict({**data, "compute": "measured"}).to_dict()["compute"] == "measured"
    with pytest.raises(SpecError, match="field 'compute'"):
        spec_from_dict({**data, "compute": "guessed"})


@pytest.mark.slow
def test_expert_build_ramps_by_compute_and_audits_clean(tmp_path):
    result = build("expert", datasets=tmp_path, spec=load_spec("expert"), seed=2026,
                   workers=Workers(jobs=2, show_progress=False))
    levels = pl.read_parquet(result.path / "levels.parquet").sort("index")
    assert levels.height == 30
    assert 48 <= levels["optimal_moves"].min() and levels["optimal_moves"].max() <= 122
    for _, part in levels.group_by("tier"):
        c = part.sort("index")["compute_to_solve"].to_list()
        assert c == sorted(c)
    checked = audit(tmp_path, "expert")
    assert checked.passed, [c.name for c in checked.failed]
