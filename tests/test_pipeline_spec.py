"""Game specs: the standard game is DESIGN.md's table, and bad fields are named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.spec import SPECS_DIR, SpecError, load_spec, spec_from_dict, version_look


def test_standard_spec_is_the_design_table():
    spec = load_spec("standard")
    rows = [(t.levels, t.crates, t.wall_density, t.band_start, t.band_end) for t in spec.tiers]
    assert rows == [
        (25, 1, 0.10, (4, 8), (14, 20)),
        (25, 2, 0.12, (9, 14), (22, 30)),
        (30, 3, 0.14, (13, 18), (28, 38)),
        (20, 4, 0.18, (17, 23), (34, 46)),
    ]
    assert (spec.height, spec.width, spec.n_levels) == (8, 8, 100)
    assert (spec.budget_multiple, spec.budget_floor) == (3, 0)
    assert spec.max_steps(17) == 51


def test_bands_slide_linearly_with_python_round_and_a_minimum_width():
    tier = load_spec("standard").tiers[0]
    assert tier.band(0) == (4, 8)
    assert tier.band(24) == (14, 20)
    # t = 1/24: lo = round(4 + 10/24) = 4, hi = round(8 + 12/24) = round(8.5) = 8 (banker's).
    assert tier.band(1) == (4, 8)
    assert tier.band(12) == (9, 14)
    narrow = spec_from_dict({**load_spec("tiny").to_dict(), "tiers": [
        {"levels": 2, "crates": 1, "wall_density": 0.1, "band_start": [5, 5],
         "band_end": [9, 9]}]})
    assert narrow.tiers[0].band(0) == (5, 7)


def test_spec_round_trips_through_plain_data():
    spec = load_spec("standard")
    assert spec_from_dict(spec.to_dict()) == spec
    assert load_spec(SPECS_DIR / "standard.toml") == spec
    assert "restarts" not in spec.to_dict()  # unset: the manifests of today, byte for byte
    practice = spec_from_dict({**spec.to_dict(), "restarts": "game"})
    assert practice.restarts == "game" and spec_from_dict(practice.to_dict()) == practice
    themed = spec_from_dict({**spec.to_dict(), "look": "themed", "noise": True})
    assert (themed.look, themed.noise) == ("themed", True)
    assert spec_from_dict(themed.to_dict()) == themed


def test_panel_tolerance_defaults_to_one_level_and_stays_out_of_todays_manifests():
    spec = load_spec("standard")
    assert spec.panel_tolerance == 1 and "panel_tolerance" not in spec.to_dict()
    loose = spec_from_dict({**spec.to_dict(), "panel_tolerance": 3})
    assert loose.panel_tolerance == 3 and spec_from_dict(loose.to_dict()) == loose


def test_a_spec_written_before_looks_means_the_shared_look_without_noise():
    old = load_spec("standard").to_dict()
    del old["look"], old["noise"]
    spec = spec_from_dict(old)
    assert (spec.look, spec.noise) == ("shared", False)
    assert version_look({"spec": old}) == "shared" and version_look({}) == "shared"
    assert version_look({"spec": {**old, "look": "arc"}}) == "arc"


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(colour="red"), "unknown field 'colour'"),
    (lambda d: d.pop("height"), "missing field 'height'"),
    (lambda d: d.update(height=40), "field 'height' is 40; expected 3..16"),
    (lambda d: d.update(method="magic"), "field 'method' is 'magic'"),
    (lambda d: d.update(candidates_per_slot="four"), "field 'candidates_per_slot'"),
    (lambda d: d["tiers"][1].update(crates=9), "tier 1: field 'crates' is 9"),
    (lambda d: d["tiers"][0].update(band_start=[8, 4]), "tier 0: field 'band_start'"),
    (lambda d: d["tiers"][2].update(wall_density=0.95), "tier 2: field 'wall_density'"),
    (lambda d: d["budget"].update(multiple=0), "[budget]: field 'multiple' is 0"),
    (lambda d: d.update(tiers=[]), "field 'tiers' is empty"),
    (lambda d: d.update(restarts="always"), "field 'restarts' is 'always'"),
    (lambda d: d.update(look="sepia"), "field 'look' is 'sepia'"),
    (lambda d: d.update(look="themed", noise="yes"), "field 'noise' is 'yes'"),
    (lambda d: d.update(noise=True), "field 'noise' is true but look is 'shared'"),
    (lambda d: d.update(panel_tolerance=-1), "field 'panel_tolerance' is -1"),
])
def test_bad_spec_field_is_named(change, message):
    data = load_spec("standard").to_dict()
    change(data)
    with pytest.raises(SpecError, match=None) as info:
        spec_from_dict(data, source="my.toml")
    assert message in str(info.value)
    assert str(info.value).startswith("my.toml")


def test_unknown_spec_name_and_broken_toml(tmp_path):
    with pytest.raises(SpecError, match="spec 'nosuchgame' not found"):
        load_spec("nosuchgame")
    broken = tmp_path / "broken.toml"
    broken.write_text("name = \n")
    with pytest.raises(SpecError, match="broken.toml: not valid TOML"):
        load_spec(broken)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"name = \"\xda\x00\xff\"\n")
    with pytest.raises(SpecError, match="binary.toml: not valid TOML"):
        load_spec(binary)


@given(levels=st.integers(1, 60), lo0=st.integers(1, 40), w0=st.integers(0, 10),
       lo1=st.integers(1, 40), w1=st.integers(0, 10))
def test_every_band_lies_between_its_ends_and_is_at_least_three_wide(levels, lo0, w0, lo1, w1):
    tier = spec_from_dict({**load_spec("tiny").to_dict(), "tiers": [
        {"levels": levels, "crates": 1, "wall_density": 0.1, "band_start": [lo0, lo0 + w0],
         "band_end": [lo1, lo1 + w1]}]}).tiers[0]
    bands = [tier.band(s) for s in range(levels)]
    assert bands[0][0] == lo0
    for lo, hi in bands:
        assert hi >= lo + 2
        assert min(lo0, lo1) <= lo <= max(lo0, lo1)
    los = [lo for lo, _ in bands]
    assert los == sorted(los) or los == sorted(los, reverse=True)
