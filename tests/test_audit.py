"""The audit: every check passes on a fresh build, and each tamper fails exactly its check."""

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from pipeline.audit.audit import audit
from pipeline.spec import load_spec
from pipeline.stages.build import build
from pipeline.versions.tables import read_parquet, sha256_file, write_parquet
from pipeline.workers import Workers
from sokoforge.cli import main

OPTIMA = "re-solved optimum equals stored optimum"
SOLUTIONS = "stored solution replays to solved in optimal moves"
BUDGETS = "budgets follow the spec rule"
BANDS = "optima inside their slot bands"
CRATES = "crates per tier as the spec says"
ORDER = "difficulty non-decreasing within each tier"
UNIQUE = "no canonical id repeated within the version or shared with another"
MANIFEST = "manifest sha256 matches levels.parquet"
COMPUTE = "compute_to_solve reproduces; difficulty and grade follow from it"


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    workers = Workers(jobs=1, show_progress=False)
    for name, seed in (("v1", 11), ("v2", 12)):
        build(name, datasets=root, spec=load_spec("tiny"), seed=seed, workers=workers)
    return root


def _tampered(versions: Path, tmp_path: Path, edit, fix_manifest: bool = True) -> Path:
    """A copy of v1 alone in a fresh root, with ``edit`` applied to its table."""
    root = tmp_path / "datasets"
    shutil.copytree(versions / "v1", root / "t", ignore=shutil.ignore_patterns("report"))
    path = root / "t" / "levels.parquet"
    df = edit(pl.read_parquet(path))
    write_parquet(df, path)
    if fix_manifest:
        manifest_path = root / "t" / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        manifest["files"]["levels.parquet"]["sha256"] = sha256_file(path)
        manifest_path.write_text(json.dumps(manifest, indent=2))
    return root


def _failed(root: Path, version: str = "t") -> set[str]:
    return {c.name for c in audit(root, version).failed}


def _set(df: pl.DataFrame, row: int, column: str, value) -> pl.DataFrame:
    values = df[column].to_list()
    values[row] = value
    return df.with_columns(pl.Series(column, values, dtype=df[column].dtype))


def test_a_fresh_build_passes_every_check(versions):
    result = audit(versions, "v1")
    assert [c.status for c in result.checks] == ["PASS"] * 9
    assert COMPUTE in {c.name for c in result.checks}
    assert result.facts.table["planner_solved"].dtype == pl.Boolean


def test_an_edited_optimum_fails_the_optimum_check_and_the_compute_predicted_from_it(
        versions, tmp_path):
    root = _tampered(versions, tmp_path,
                     lambda df: _set(df, 2, "optimal_moves", df["optimal_moves"][2] + 1))
    result = audit(root, "t")
    assert {c.name for c in result.failed} == {OPTIMA, COMPUTE}
    assert all(c.offenders[0].startswith("level 2:") for c in result.failed)


def test_an_edited_solution_fails_only_the_replay_check(versions, tmp_path):
    root = _tampered(versions, tmp_path, lambda df: _set(df, 4, "solution", df["solution"][4][:-1]))
    result = audit(root, "t")
    assert {c.name for c in result.failed} == {SOLUTIONS}
    assert result.failed[0].offenders == ("level 4: does not end solved",)


def test_an_edited_budget_fails_only_the_budget_check(versions, tmp_path):
    root = _tampered(versions, tmp_path,
                     lambda df: _set(df, 0, "max_steps", df["max_steps"][0] + 7))
    assert _failed(root) == {BUDGETS}


def test_a_duplicated_level_fails_only_the_uniqueness_check(versions, tmp_path):
    rows = pl.read_parquet(versions / "v1" / "levels.parquet").to_dicts()
    # The next level of the same tier, slot and all, copied over a level: difficulty ties keep
    # the order non-decreasing, so the only broken promise is the repeat.
    pair = next((i, i + 1) for i in range(len(rows) - 1)
                if rows[i]["tier"] == rows[i + 1]["tier"])
    keep = {"index"}

    def duplicate(table: pl.DataFrame) -> pl.DataFrame:
        for column in table.columns:
            if column not in keep:
                table = _set(table, pair[0], column, table[column][pair[1]])
        return table

    root = _tampered(versions, tmp_path, duplicate)
    result = audit(root, "t")
    assert {c.name for c in result.failed} == {UNIQUE}
    assert result.failed[0].offenders[0].startswith(f"level {pair[1]}: same level as {pair[0]}")


def test_swapped_difficulties_fail_the_order_check_and_the_compute_check(versions, tmp_path):
    def swap(df: pl.DataFrame) -> pl.DataFrame:
        d = df["difficulty"].to_list()
        d[0], d[1] = d[1] + 0.01, d[0]
        return df.with_columns(pl.Series("difficulty", d, dtype=pl.Float32))

    assert _failed(_tampered(versions, tmp_path, swap)) == {ORDER, COMPUTE}


def test_a_grade_off_its_compute_fails_only_the_compute_check(versions, tmp_path):
    root = _tampered(versions, tmp_path,
                     lambda df: _set(df, 3, "grade", 1 + df["grade"][3] % 5))
    result = audit(root, "t")
    assert {c.name for c in result.failed} == {COMPUTE}
    assert len(result.failed[0].offenders) == 1
    assert result.failed[0].offenders[0].startswith("level 3: difficulty")


def test_a_version_graded_by_an_earlier_model_skips_the_compute_check_with_the_reason(
        versions, tmp_path):
    # A refit of the difficulty model must not fail every version graded before it.
    root = _tampered(versions, tmp_path,
                     lambda df: _set(df, 3, "grade", 1 + df["grade"][3] % 5))
    manifest_path = root / "t" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["generator"]["difficulty_model"]  # a fresh build records its model
    manifest["generator"]["difficulty_model"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest, indent=2))
    result = audit(root, "t")
    compute = next(c for c in result.checks if c.name == COMPUTE)
    assert compute.passed and "earlier difficulty model" in compute.skipped
    assert not result.failed


def test_an_edited_file_without_a_new_manifest_fails_the_sha256_check(versions, tmp_path):
    root = _tampered(versions, tmp_path, lambda df: _set(df, 1, "xsb", df["xsb"][1] + "\n"),
                     fix_manifest=False)
    assert _failed(root) == {MANIFEST}


def test_a_copy_beside_its_original_fails_the_cross_version_check(versions, tmp_path):
    root = tmp_path / "datasets"
    for name in ("v1", "copy"):
        shutil.copytree(versions / "v1", root / name, ignore=shutil.ignore_patterns("report"))
    result = audit(root, "copy")
    assert {c.name for c in result.failed} == {UNIQUE}
    assert all("shared with v1" in o for o in result.failed[0].offenders)


def test_a_level_moved_to_another_tier_fails_the_crates_check(versions, tmp_path):
    root = _tampered(versions, tmp_path, lambda df: _set(df, 0, "n_crates", 2))
    assert _failed(root) == {CRATES}


@pytest.mark.slow
def test_audit_command_writes_a_self_contained_report_and_exits_zero(versions):
    result = CliRunner().invoke(main, ["audit", "v2", "--against", "v1",
                                       "--datasets", str(versions)])
    assert result.exit_code == 0, result.output
    assert "PASS  " + UNIQUE in result.output
    assert "against v1" in result.output
    html = (versions / "v2" / "report" / "report.html").read_text()
    assert html.count("src='data:image/png;base64,") == 8
    assert "src='http" not in html and "<link" not in html
    md = (versions / "v2" / "report" / "report.md").read_text()
    assert "## v2 against v1" in md and "planner_solved v1" in md
    # no agent panel on either round: the expected move comes from the binomial model
    assert "From the binomial model" in result.output
    assert "### How far one agent's score moves between the rounds" in md
    for name in ("optima.png", "difficulty.png", "histograms.png", "contact_sheet.png",
                 "calibration.png", "pushes_slack.png", "legend.png",
                 "against_contact_sheet.png"):
        assert (versions / "v2" / "report" / name).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_audit_against_rounds_with_panels_states_each_agents_move_and_keeps_them(
        versions, tmp_path):
    root = tmp_path / "datasets"
    shutil.copytree(versions, root)
    for name, seed in (("v1", 1), ("v2", 2)):
        n = read_parquet(root / name / "levels.parquet").height
        solved = np.random.default_rng(seed).random(2 * n) < 0.6
        (root / name / "report").mkdir(exist_ok=True)
        write_parquet(pl.DataFrame({"index": np.tile(np.arange(n), 2),
                                    "agent": ["a"] * n + ["b"] * n, "solved": solved}),
                      root / name / "report" / "panel.parquet")
    (root / "v2" / "report" / "line.json").write_text("{}")
    result = CliRunner().invoke(main, ["audit", "v2", "--against", "v1",
                                       "--datasets", str(root)])
    assert result.exit_code == 0, result.output
    assert "From the panel (2 agents played both)" in result.output
    html = (root / "v2" / "report" / "report.html").read_text()
    assert "How far one agent&#x27;s score moves" in html
    # what other commands wrote into report/ outlives the new report
    assert (root / "v2" / "report" / "panel.parquet").is_file()
    assert (root / "v2" / "report" / "line.json").read_text() == "{}"


@pytest.mark.slow
def test_audit_command_lists_failures_and_exits_one(versions, tmp_path):
    root = _tampered(versions, tmp_path, lambda df: _set(df, 3, "max_steps", 999))
    result = CliRunner().invoke(main, ["audit", "t", "--datasets", str(root)])
    assert result.exit_code == 1
    assert "FAIL  budgets follow the spec rule: level 3: max_steps 999" in result.output
    assert "1 check(s) failed: budgets follow the spec rule" in result.output
    verdict = json.loads((root / "t" / "report" / "checks.json").read_text())
    assert verdict["passed"] is False
    assert [c["name"] for c in verdict["checks"] if not c["passed"]] == [
        "budgets follow the spec rule"]


def test_audit_of_a_missing_version_is_one_readable_line(versions):
    result = CliRunner().invoke(main, ["audit", "nope", "--datasets", str(versions)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"Error: cannot audit nope: no version 'nope' under {versions}; `sokoforge versions` "
        "lists those there, `make dataset VERSION=nope` builds it"]


def _audit_one_line(root: Path, version: str = "t") -> str:
    """The audit command's output, checked to be a single refusal with exit status 2."""
    result = CliRunner().invoke(main, ["audit", version, "--datasets", str(root)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


def test_audit_of_a_corrupt_table_or_manifest_is_one_readable_line(versions, tmp_path):
    root = _tampered(versions, tmp_path, lambda df: df)
    shutil.copytree(root / "t", root / "other")
    (root / "other" / "levels.parquet").write_bytes(b"not parquet at all")
    assert "other/levels.parquet is not a readable Parquet table" in _audit_one_line(root)
    assert "is not a readable Parquet table" in _audit_one_line(root, "other")
    manifest = root / "t" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"format": 1', '"format": 99'))
    assert "unknown format (expected format 1)" in _audit_one_line(root)
    manifest.write_text('{"format": 1}')
    assert "missing field 'version'" in _audit_one_line(root)


@pytest.mark.slow
def test_report_renders_whole_in_headless_chromium_with_plots_and_levels(versions, tmp_path):
    import subprocess
    import sys

    import matplotlib.image as mpimg
    import numpy as np

    # `make test` installs Debian's chromium: this test runs in CI, it does not skip.
    assert shutil.which("chromium"), "chromium missing: run `make test`"
    CliRunner().invoke(main, ["audit", "v1", "--datasets", str(versions)])
    html = versions / "v1" / "report" / "report.html"
    shot = tmp_path / "shot.png"
    script = Path(__file__).resolve().parent.parent / "scripts" / "screenshot_report.py"
    subprocess.run([sys.executable, str(script), str(html), str(shot)],
                   check=True, capture_output=True, timeout=180)
    img = mpimg.imread(shot)[..., :3]
    # The whole page, however tall: far more than a window, and its last rows are the
    # contact sheet (ink), not a cut-off blank.
    assert img.shape[1] == 1400 and img.shape[0] > 3000
    ink = (img < 0.9).any(axis=2)
    rows_with_ink = ink.any(axis=1)
    assert rows_with_ink.mean() > 0.4
    assert rows_with_ink[-img.shape[0] // 10:].mean() > 0.3
    # ...and the contact sheet's levels bring the shared look's crate brown onto the page.
    from engine.pictures.look import SHARED_THEME

    crate = np.array(SHARED_THEME.box) / 255.0
    assert (np.abs(img - crate) < 0.05).all(axis=2).sum() > 200


def test_a_longer_legal_solution_fails_only_the_replay_check_as_not_optimal(versions, tmp_path):
    from engine.levels import parse_xsb
    from engine.rules import step

    row = pl.read_parquet(versions / "v1" / "levels.parquet").row(1, named=True)
    level = parse_xsb(row["xsb"])
    back = {"u": "d", "d": "u", "l": "r", "r": "l"}
    # a step aside and back again: still legal and still solving, two moves too long
    detour = next(a + back[a] for i, a in enumerate("udlr")
                  if step(level, level.start, i)[1] and not step(level, level.start, i)[2])
    root = _tampered(versions, tmp_path, lambda df: _set(df, 1, "solution",
                                                         detour + df["solution"][1]))
    result = audit(root, "t")
    assert {c.name for c in result.failed} == {SOLUTIONS}
    assert result.failed[0].offenders == (
        f"level 1: {row['optimal_moves'] + 2} moves, optimum is {row['optimal_moves']}",)


@pytest.mark.slow
def test_audit_against_itself_is_refused_in_one_line_and_touches_no_report(versions):
    CliRunner().invoke(main, ["audit", "v1", "--datasets", str(versions)])
    before = {p.name: p.read_bytes() for p in (versions / "v1" / "report").iterdir()}
    result = CliRunner().invoke(main, ["audit", "v1", "--against", "v1",
                                       "--datasets", str(versions)])
    assert result.exit_code == 2
    assert result.output == ("Error: cannot audit v1 against itself: --against names another "
                             "version to compare with\n")
    assert {p.name: p.read_bytes() for p in (versions / "v1" / "report").iterdir()} == before


@pytest.fixture(scope="module")
def other_spec(versions, tmp_path_factory):
    """``o1``: a game whose tiers are tiny's 2-crate and 1-crate tiers, swapped and resized,
    beside the tiny versions: tier 2 of tiny (3 crates) has no counterpart."""
    text = (Path(__file__).resolve().parent.parent / "pipeline/specs/tiny.toml").read_text()
    head, *tiers = text.split("[[tiers]]")
    one, two = tiers[0].replace("levels = 3", "levels = 2"), tiers[1].replace(
        "levels = 3", "levels = 4")
    spec = tmp_path_factory.mktemp("spec") / "other.toml"
    spec.write_text(head.replace('name = "tiny"', 'name = "other"')
                    + "[[tiers]]" + two + "[[tiers]]" + one)
    build("o1", datasets=versions, spec=load_spec(spec), seed=5,
          workers=Workers(jobs=1, show_progress=False))
    return versions


def test_audit_against_another_spec_compares_tiers_by_crate_count_and_says_what_not(other_spec):
    versions = other_spec
    result = CliRunner().invoke(main, ["audit", "v1", "--against", "o1",
                                       "--datasets", str(versions)])
    assert result.exit_code == 0, result.output
    assert "NaN" not in result.output and "nan" not in result.output.split("Brier")[0]
    out = result.output
    assert "tier 2 of v1 (3 crates): o1 has no tier with 3 crates; not compared" in out
    assert "tier 0 of v1 has 3 slots, tier 1 of o1 2: slots 2-2 of v1 have no counterpart" in out
    assert "tier 1 of v1 has 3 slots, tier 0 of o1 4: slots 3-3 of o1 have no counterpart" in out
    md = (versions / "v1" / "report" / "report.md").read_text()
    assert "different specs" in md


def test_comparison_overlays_by_tier_and_slot_not_play_order(other_spec):
    from pipeline.audit.audit import compare_versions, load_version

    a, b = load_version(other_spec, "v1"), load_version(other_spec, "o1")
    comparison = compare_versions(a, b)
    assert [(p.tier, p.other_tier, p.crates) for p in comparison.pairs] == [(0, 1, 1), (1, 0, 2)]
    theirs = {(r["tier"], r["slot"]): r for r in b.table.iter_rows(named=True)}
    to_theirs = {0: 1, 1: 0}
    for row in comparison.slots.iter_rows(named=True):
        mine = (to_theirs.get(row["tier"]), row["slot"])
        if mine in theirs:
            assert row["index o1"] == theirs[mine]["index"]
            assert row["optimal_moves o1"] == theirs[mine]["optimal_moves"]
            assert row["tier o1"] == mine[0]
        else:  # tier 2 (no 3-crate tier in o1) and slot 2 of tier 0 (o1's tier 1 has 2)
            assert row["index o1"] is None and (row["tier"] == 2 or row["slot"] == 2)
    assert comparison.slots.height == a.table.height


@pytest.mark.slow
def test_a_failed_report_leaves_the_previous_one_whole(versions, monkeypatch):
    from pipeline.audit import audit_report

    assert CliRunner().invoke(main, ["audit", "v2", "--datasets", str(versions)]).exit_code == 0
    folder = versions / "v2" / "report"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    real = audit_report.Report.files

    class FillsUp(dict):
        """The first files are written, then the disk fills up."""

        def items(self):
            yield from list(super().items())[:3]
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(audit_report.Report, "files", lambda self: FillsUp(real(self)))
    result = CliRunner().invoke(main, ["audit", "v2", "--against", "v1",
                                       "--datasets", str(versions)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "Error: cannot write the report: No space left on device")
    # the previous report, whole, and no half-written folder beside it
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert not [p for p in (versions / "v2").iterdir()
                if p.name.startswith(".") and p.name != ".gitignore"]  # a hidden version's


@pytest.mark.slow
def test_report_holds_deadlocks_calibration_metadata_legend_and_grade_labels(versions):
    CliRunner().invoke(main, ["audit", "v1", "--datasets", str(versions)])
    html = (versions / "v1" / "report" / "report.html").read_text()
    md = (versions / "v1" / "report" / "report.md").read_text()
    for section in ("Version", "Checks", "Tiers", "Deadlocks", "Calibration",
                    "Distributions per tier", "Contact sheet"):
        assert f"<h2>{section}</h2>" in html
    manifest = json.loads((versions / "v1" / "manifest.json").read_text())
    for fact in (manifest["created"], "public: 11", manifest["files"]["levels.parquet"]["sha256"],
                 "audit time", "numba ", "polars "):
        assert fact in html and fact in md
    assert "Brier score" in html and "calibration pool (held out" in html
    assert "dead fraction mean" in md and "levels with a trap" in md
    # the compute currency is stated: dynamics calls per step, with the ladder's range
    assert "compute_to_solve in dynamics calls per step: 1: <= 4" in md
    assert "budgets 4 to 262,144 calls per step" in md and "failing at 256 calls" in md
    assert "legend.png" in md and "Legend of the contact sheet" in html


def test_deadlock_figures_are_recomputed_from_the_boards(versions):
    from pipeline.audit.audit import load_version

    facts = load_version(versions, "v1")
    t = facts.table
    # the build's grade stage computed the same figures its own way, stored beside the levels
    assert t["audit_first_push_traps"].to_list() == t["first_push_traps"].to_list()
    assert (t["audit_dead_fraction"] - t["dead_fraction"].cast(pl.Float64)).abs().max() < 1e-6


@pytest.fixture(scope="module")
def secret(tmp_path_factory):
    """A hidden version with a secret seed, audited: a round's set."""
    root = tmp_path_factory.mktemp("secret")
    build("s", datasets=root, spec=load_spec("tiny"), workers=Workers(show_progress=False))
    result = CliRunner().invoke(main, ["audit", "s", "--datasets", str(root)])
    assert result.exit_code == 0, result.output
    return root, result.output


@pytest.mark.slow
def test_every_report_says_in_one_line_whether_the_version_is_fit_for_a_round(versions,
                                                                                secret,
                                                                                tmp_path):
    from pipeline.audit.audit_report import Report

    seeded = Report(audit(versions, "v1")).fitness_line()
    assert seeded == ("fit for a round: no (it was built from the public seed 11: anyone can "
                      "redraw its levels)")
    tampered = _tampered(versions, tmp_path, lambda df: _set(df, 0, "max_steps", 999))
    assert Report(audit(tampered, "t")).fitness_line().startswith(
        "fit for a round: no (1 check(s) fail; it was built from the public seed 11")
    root, output = secret
    fit = "fit for a round: yes; no agent panel yet (sokoforge panel s adds it)"
    assert output.splitlines()[3] == fit  # a fresh build's, as a rotation's has one
    report = root / "s" / "report"
    assert f"**{fit}**" in (report / "report.md").read_text()
    assert f"fitness pass'>{fit}</p>" in (report / "report.html").read_text()
    assert json.loads((report / "checks.json").read_text())["fit_for_round"] is True


def test_the_audit_opens_as_the_readme_says_title_warning_counts_then_the_verdict(secret):
    _, output = secret
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    said = " ".join(readme.split("It exits 1 naming the failed checks.", 1)[1].split()[:40])
    assert said.startswith("Every report and the terminal summary open with their title "
                           "(`Audit of VERSION`), the warning below for a hidden version, a "
                           "line of counts (levels, the planner's solved, the checks), then one "
                           "verdict line"), said
    lines = output.splitlines()
    assert lines[0] == "Audit of s" and lines[1].startswith("HIDDEN: ")
    assert "reference planner solves" in lines[2] and lines[3].startswith("fit for a round: ")


def test_a_hidden_versions_report_warns_first_that_it_must_not_leave_the_maintainer(secret,
                                                                                    versions):
    root, output = secret
    warning = ("HIDDEN: this report shows every level of the hidden version s. It must not "
               "leave the maintainer: do not publish, commit or send it before the round is "
               "over.")
    assert output.splitlines()[1] == warning
    report = root / "s" / "report"
    assert (report / "report.md").read_text().splitlines()[2] == f"> **{warning}**"
    html = (report / "report.html").read_text()
    assert html.index(f"<p class='warning'>{warning}</p>") < html.index("<nav>")
    # levels anyone can redraw from a public seed (the demo's) hold no secret to keep
    seeded = CliRunner().invoke(main, ["audit", "v1", "--datasets", str(versions)]).output
    assert "HIDDEN" not in seeded and "class='warning'" not in (
        versions / "v1" / "report" / "report.html").read_text()


def test_grade_cut_and_band_labels_do_not_overlap_on_any_plot():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pipeline.audit.audit_plots import _grade_lines

    for vertical, size in ((False, (11, 4.2)), (True, (3.2, 2.7)), (True, (7.2, 6))):
        fig = Figure(figsize=size)
        ax = fig.subplots()
        ax.set_xlim(0, 1) if vertical else ax.set_ylim(-0.02, 1.02)
        _grade_lines(ax, vertical)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        boxes = [t.get_window_extent(renderer) for t in ax.texts]
        assert len(boxes) >= 6
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), (vertical, size, a, b)
