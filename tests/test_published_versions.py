"""Versions published before looks and compute_to_solve existed (no look in the manifest, no
theme or compute columns) keep loading, serving (in the shared look) and auditing."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import matplotlib.image
import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from serve_support import Api, server

from engine.levels import parse_xsb
from engine.pictures.look import SHARED, painter
from engine.rules import step
from serve.games.dataset import DatasetError, load_version
from sokoforge.cli import main

PUBLISHED = Path(__file__).resolve().parent / "fixtures" / "published"
DEMO_2026_11 = "demo-2026-11"  # datasets/demo as committed until looks came in


def test_the_fixture_is_a_version_from_before_looks():
    assert "theme" not in pq.read_schema(PUBLISHED / DEMO_2026_11 / "levels.parquet").names
    assert "look" not in (PUBLISHED / DEMO_2026_11 / "manifest.json").read_text()


def test_a_version_from_before_looks_is_served_in_the_shared_look(tmp_path):
    served = load_version(PUBLISHED, DEMO_2026_11)
    assert served.spec()["look"] == {"name": "shared", "noise": False, "themed_levels": 0}
    level = served.levels[0].level
    with server(served, tmp_path / "store.sqlite") as running:
        client = Api(running.base)
        client.key = client.ok("POST", "/api/keys", {"name": "old"}, status=201)["api_key"]
        sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
        frame = client.ok("POST", f"/api/scorecards/{sid}/games/standard/start")
        frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 3})
    drawn = painter(level, SHARED)
    state = step(level, level.start, 3)[0]
    assert base64.b64decode(frame["observation"]["obs"]) == drawn.frame(state, 1).tobytes()
    assert base64.b64decode(frame["observation"]["goal"]) == drawn.goal().tobytes()


@pytest.mark.slow
def test_a_version_from_before_looks_audits(tmp_path):
    shutil.copytree(PUBLISHED / DEMO_2026_11, tmp_path / DEMO_2026_11)
    result = CliRunner().invoke(main, ["audit", DEMO_2026_11, "--datasets", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / DEMO_2026_11 / "report" / "report.html").is_file()


def test_a_version_from_before_looks_renders_in_the_shared_look(tmp_path):
    out = tmp_path / "x.png"
    result = CliRunner().invoke(main, ["render", str(PUBLISHED / DEMO_2026_11), "--index", "4",
                                       "--scale", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    picture = (matplotlib.image.imread(out)[..., :3] * 255).round().astype(np.uint8)
    row = pl.read_parquet(PUBLISHED / DEMO_2026_11 / "levels.parquet").sort("index").row(
        4, named=True)
    assert np.array_equal(picture[:, :64], painter(parse_xsb(row["xsb"]), SHARED).frame())


def test_a_version_naming_an_unknown_look_or_a_themed_one_without_themes_is_refused(tmp_path):
    for look, says in [("sepia", "unknown look 'sepia'"),
                       ("themed", "level 0: the version's look is themed but the level has no")]:
        shutil.copytree(PUBLISHED / DEMO_2026_11, tmp_path / look)
        manifest = json.loads((tmp_path / look / "manifest.json").read_text())
        manifest["spec"]["look"] = look
        (tmp_path / look / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(DatasetError, match=says):
            load_version(tmp_path, look)


@pytest.fixture(scope="module")
def november(tmp_path_factory):
    """The demo as committed in November 2026, under its own name in a datasets folder."""
    root = tmp_path_factory.mktemp("published")
    shutil.copytree(PUBLISHED / DEMO_2026_11, root / "demo")
    return root


@pytest.mark.slow
def test_a_version_from_before_compute_to_solve_audits_clean_with_its_old_columns(november):
    from pipeline.audit.audit import audit
    from pipeline.audit.audit_report import Report

    result = audit(november, "demo")
    assert result.passed, [c.name for c in result.failed]
    assert "compute_to_solve" not in result.facts.table.columns
    assert not any("compute_to_solve" in c.name for c in result.checks)
    assert "graded before compute_to_solve existed" in Report(result).markdown()


def test_a_version_from_before_compute_to_solve_is_regraded_for_matching_untouched(november):
    from pipeline.rotate import graded_alike
    from pipeline.versions.tables import read_parquet
    from pipeline.workers import Workers

    before = (november / "demo" / "levels.parquet").read_bytes()
    old = read_parquet(november / "demo" / "levels.parquet")
    regraded = graded_alike("demo", old, Workers(show_progress=False))
    assert {"compute_to_solve", "compute_measured"} <= set(regraded.columns)
    assert not regraded["compute_measured"].any()
    assert set(regraded["grade"].to_list()) <= {1, 2, 3, 4, 5}
    assert (november / "demo" / "levels.parquet").read_bytes() == before
