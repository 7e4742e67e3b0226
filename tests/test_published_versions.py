"""Versions published before compute_to_solve existed keep loading, serving and auditing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.audit import audit
from pipeline.audit_report import Report
from pipeline.rotate import graded_alike
from pipeline.tables import read_parquet
from pipeline.workers import Workers

PUBLISHED = Path(__file__).resolve().parent / "fixtures" / "published" / "demo-2026-11"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """The demo as committed in November 2026, under its own name in a datasets folder."""
    root = tmp_path_factory.mktemp("published")
    shutil.copytree(PUBLISHED, root / "demo")
    return root


def test_the_november_demo_still_serves(datasets):
    from serve.dataset import load_version

    served = load_version(datasets, "demo")
    assert len(served.levels) == 100


def test_the_november_demo_still_audits_clean_with_its_old_columns(datasets):
    result = audit(datasets, "demo")
    assert result.passed, [c.name for c in result.failed]
    assert "compute_to_solve" not in result.facts.table.columns
    assert not any("compute_to_solve" in c.name for c in result.checks)
    assert "graded before compute_to_solve existed" in Report(result).markdown()


def test_the_november_demo_is_regraded_for_matching_without_touching_its_files(datasets):
    before = (datasets / "demo" / "levels.parquet").read_bytes()
    old = read_parquet(datasets / "demo" / "levels.parquet")
    regraded = graded_alike("demo", old, Workers(show_progress=False))
    assert {"compute_to_solve", "compute_measured"} <= set(regraded.columns)
    assert not regraded["compute_measured"].any()
    assert set(regraded["grade"].to_list()) <= {1, 2, 3, 4, 5}
    assert (datasets / "demo" / "levels.parquet").read_bytes() == before
