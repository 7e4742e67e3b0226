"""Public splits: the spec fields they need, their builds, and no level shared with a hidden set."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from engine.levels import parse_xsb
from engine.search.reverse import solvable_set
from pipeline.audit.audit import audit
from pipeline.spec import SPECS_DIR, SpecError, load_spec, spec_from_dict
from pipeline.stages.build import build, existing_versions
from pipeline.stages.grade import first_push_traps
from pipeline.versions.manifest import read_manifest, visibility
from pipeline.workers import Workers

DATASETS = Path(__file__).resolve().parent.parent / "datasets"
SPLITS = ("W", "S", "A", "B", "C", "D", "E")
QUIET = Workers(show_progress=False)


def _small(name: str, levels: int, **changes) -> dict:
    data = load_spec(f"public/{name}").to_dict()
    data["tiers"][0]["levels"] = levels
    return {**data, **changes}


@pytest.mark.parametrize("split", SPLITS)
def test_every_public_split_is_a_public_spec_that_round_trips(split):
    spec = load_spec(f"public/{split}")
    assert spec.visibility == "public"
    assert spec_from_dict(spec.to_dict()) == spec
    assert (SPECS_DIR / "public" / f"{split}.toml").is_file()


def test_the_issue_table_is_what_the_public_specs_say():
    rows = {}
    for split in SPLITS:
        s = load_spec(f"public/{split}")
        t = s.tiers[0]
        rows[split] = (s.height, t.crates, t.wall_density, t.band(0), t.band(t.levels - 1),
                       s.budget_fixed or f"{s.budget_multiple}x", s.min_first_push_traps)
    assert rows == {
        "W": (6, 1, 0.12, (4, 25), (4, 25), 40, 0),
        "S": (8, 1, 0.10, (4, 8), (14, 20), "3x", 0),
        "A": (8, 3, 0.10, (10, 50), (10, 50), 80, 0),
        "B": (8, 3, 0.10, (10, 50), (10, 50), 80, 0),
        "C": (10, 3, 0.10, (15, 70), (15, 70), 120, 0),
        "D": (8, 3, 0.14, (8, 50), (8, 50), 80, 1),
        "E": (10, 5, 0.08, (15, 90), (15, 90), 160, 0),
    }


def test_split_b_is_split_a_in_a_theme_per_level():
    a, b = load_spec("public/A").to_dict(), load_spec("public/B").to_dict()
    assert (b.pop("look"), b.pop("noise"), a.pop("look"), a.pop("noise")) == (
        "themed", False, "shared", False)
    assert {**b, "name": "public-A"} == a


def test_new_spec_fields_default_to_the_game_as_it_was():
    standard = load_spec("standard")
    assert (standard.budget_fixed, standard.min_first_push_traps, standard.visibility) == (
        0, 0, "hidden")
    assert not any(t.flat for t in standard.tiers)
    # the plain form of a spec written before the fields is unchanged (manifests stay equal)
    assert set(standard.to_dict()) == {"name", "height", "width", "method",
                                       "candidates_per_slot", "max_attempts", "budget", "tiers",
                                       "look", "noise"}
    assert standard.to_dict()["budget"] == {"multiple": 3, "floor": 0}


def test_a_fixed_budget_replaces_the_multiple_of_the_optimum():
    spec = load_spec("public/A")
    assert [spec.max_steps(m) for m in (10, 30, 50)] == [80, 80, 80]
    assert load_spec("public/S").max_steps(12) == 36


def test_a_flat_band_is_the_same_for_every_slot():
    tier = load_spec("public/C").tiers[0]
    assert {tier.band(s) for s in range(tier.levels)} == {(15, 70)}


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["budget"].update(multiple=3), "field 'fixed' excludes"),
    (lambda d: d["tiers"][0].update(band_start=[4, 8]), "field 'band' (flat) excludes"),
    (lambda d: d.update(visibility="secret"), "field 'visibility' is 'secret'"),
    (lambda d: d.update(min_first_push_traps=-1), "field 'min_first_push_traps' is -1"),
])
def test_bad_new_spec_fields_are_named(change, message):
    data = json.loads(json.dumps(load_spec("public/W").to_dict()))
    change(data)
    with pytest.raises(SpecError) as info:
        spec_from_dict(data)
    assert message in str(info.value)


def test_a_public_build_carries_its_visibility_and_seed_and_audits_clean(tmp_path):
    spec = spec_from_dict(_small("W", 8))
    path = build("w", datasets=tmp_path, spec=spec, seed=7, workers=QUIET).path
    manifest = read_manifest(path / "manifest.json")
    assert visibility(manifest) == "public" and manifest["public_seed"] == "7"
    levels = pl.read_parquet(path / "levels.parquet")
    assert levels["max_steps"].to_list() == [40] * 8
    assert levels["optimal_moves"].is_between(4, 25).all()
    result = audit(tmp_path, "w")
    assert result.passed, [c.name for c in result.failed]


def test_a_hidden_build_says_so_and_old_manifests_read_as_hidden(tmp_path):
    tiny = load_spec("tiny")
    path = build("h", datasets=tmp_path, spec=tiny, seed=7, workers=QUIET).path
    manifest = read_manifest(path / "manifest.json")
    assert "visibility" not in manifest["spec"] and visibility(manifest) == "hidden"
    assert visibility(read_manifest(DATASETS / "demo" / "manifest.json")) == "hidden"


def test_a_trap_spec_selects_only_levels_with_a_first_push_into_a_dead_state(tmp_path):
    spec = spec_from_dict(_small("D", 6))
    path = build("d", datasets=tmp_path, spec=spec, seed=3, workers=QUIET).path
    for xsb in pl.read_parquet(path / "levels.parquet")["xsb"]:
        level = parse_xsb(xsb)
        assert first_push_traps(level, solvable_set(level)) >= 1
    result = audit(tmp_path, "d")
    assert result.passed and any("trap" in c.name for c in result.checks)


def test_the_trap_audit_check_fails_on_a_level_without_traps(tmp_path):
    spec = spec_from_dict(_small("A", 6))
    build("a", datasets=tmp_path, spec=spec, seed=3, workers=QUIET)
    manifest_path = tmp_path / "a" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["spec"]["min_first_push_traps"] = 64
    manifest_path.write_text(json.dumps(manifest))
    check = next(c for c in audit(tmp_path, "a").checks if "trap" in c.name)
    assert not check.passed and "spec needs 64" in check.offenders[0]


def test_public_and_hidden_builds_exclude_each_other_both_ways(tmp_path):
    """The same spec and seed draw the same candidates: whichever is built second must
    avoid every level of the first, whether the first is public or hidden."""
    public = spec_from_dict(_small("S", 6))
    hidden = spec_from_dict({k: v for k, v in public.to_dict().items() if k != "visibility"})
    for first, second in ((public, hidden), (hidden, public)):
        root = tmp_path / first.visibility
        build("one", datasets=root, spec=first, seed=11, workers=QUIET)
        build("two", datasets=root, spec=second, seed=11, workers=QUIET)
        one, two = (set(pl.read_parquet(root / v / "levels.parquet")["canonical_id"])
                    for v in ("one", "two"))
        assert not one & two
        excluded = read_manifest(root / "two" / "manifest.json")["excluded_versions"]
        assert [e["version"] for e in excluded] == ["one"]


def test_committed_public_versions_share_no_level_with_any_hidden_version():
    """Under the 8 symmetries (canonical ids), over every version under datasets/."""
    split = {"public": {}, "hidden": {}}
    for name in existing_versions(DATASETS):
        manifest = read_manifest(DATASETS / name / "manifest.json")
        ids = pl.read_parquet(DATASETS / name / "levels.parquet")["canonical_id"]
        split[visibility(manifest)][name] = set(ids)
    assert split["public"], "no public version is committed under datasets/"
    for pub, pub_ids in split["public"].items():
        for hid, hid_ids in split["hidden"].items():
            assert not pub_ids & hid_ids, f"{pub} shares levels with {hid}"


@pytest.mark.slow
def test_a_ten_by_ten_five_crate_level_is_re_solved_past_the_default_bound():
    """Its solvable set fits the generator's bound, and the solve stage must then re-solve it
    (it needs just under 20 million stored states, past the old fixed bound)."""
    from pipeline.stages.solve import SOLVE_MAX_STATES, _solve_one, search_bound

    xsb = "\n".join(["##########", "#   #.   #", "#      $ #", "# .# $   #", "#        #",
                     "#   $  $##", "# . #@   #", "#  $.    #", "#     #. #", "##########"])
    assert search_bound(parse_xsb(xsb)) > SOLVE_MAX_STATES
    result = _solve_one(xsb)
    assert result.status == "solved" and result.moves == 39
    assert result.states_expanded > 19_000_000


def test_a_public_spec_built_without_a_seed_publishes_the_one_it_drew(tmp_path):
    spec = spec_from_dict(_small("W", 3))
    path = build("w", datasets=tmp_path, spec=spec, workers=QUIET).path
    manifest = read_manifest(path / "manifest.json")
    assert manifest["seed_source"] == "public" and manifest["public_seed"].isdigit()
    assert not (tmp_path / ".secrets" / "w.seed").exists()


def test_a_build_from_a_public_seed_says_it_is_hidden_unless_its_spec_is_public(tmp_path):
    """A seed makes a build reproducible, a spec makes it public: build's last line and
    ``versions`` say which, with the round's state where there is one."""
    from click.testing import CliRunner

    from pipeline.versions.rounds import iso, open_round, parse_time
    from sokoforge.cli import main

    built = CliRunner().invoke(main, ["build", "h", "--spec", "tiny", "--seed", "11", "--quiet",
                                      "--datasets", str(tmp_path)])
    assert built.exit_code == 0, built.output
    assert built.output.strip().splitlines()[-1].endswith(
        "(hidden, though built from the public seed 11: its .gitignore keeps it out of git; a "
        "public version comes from a public spec (--spec public/A) or import --public)")
    assert (tmp_path / "h" / ".gitignore").is_file()
    build("w", datasets=tmp_path, spec=spec_from_dict(_small("W", 8)), seed=7, workers=QUIET)
    closes = parse_time("2100-01-01T00:00Z")
    open_round(tmp_path, "h", closes)
    listed = CliRunner().invoke(main, ["versions", "--datasets", str(tmp_path)]).output
    header, *rows = listed.splitlines()
    at = header.index("visibility")
    assert header[at:].split()[:2] == ["visibility", "round"]
    assert {r.split()[0]: r[at:].split()[:4] for r in rows} == {
        "h": ["hidden", "open", "until", iso(closes)], "w": ["public", "-", "not", "audited"]}
