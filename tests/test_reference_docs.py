"""docs/reference/ is the code's own description: each page equals what the code writes, and
every spec field, levels.parquet column and manifest field has a meaning there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sokoforge import reference

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_each_reference_page_is_what_the_code_writes(name):
    committed = (reference.DOCS / name).read_text(encoding="utf-8")
    assert committed == reference.PAGES[name](), (
        f"docs/reference/{name} is stale: run python -m sokoforge.reference")


def test_a_field_without_a_meaning_or_a_meaning_without_a_field_stops_the_pages(monkeypatch):
    # a copy without the field (deleting it from the module's own dict and putting it back
    # would move it to the end, and the spec page after it)
    monkeypatch.setattr(reference, "SPEC_FIELDS",
                        {k: v for k, v in reference.SPEC_FIELDS.items() if k != "noise"})
    with pytest.raises(ValueError, match=r"undocumented \['noise'\]"):
        reference.spec_page()
    monkeypatch.setitem(reference.COLUMNS, "no_such_column", "x")
    with pytest.raises(ValueError, match=r"documented but absent \['no_such_column'\]"):
        reference.levels_page()


def test_every_manifest_field_and_version_file_in_the_repository_is_documented():
    manifests = [*ROOT.glob("datasets/*/manifest.json"),
                 *ROOT.glob("tests/fixtures/**/manifest.json")]
    assert manifests
    for path in manifests:
        assert set(json.loads(path.read_text())) <= set(reference.MANIFEST), path
        present = {p.name + ("/" if p.is_dir() else "") for p in path.parent.iterdir()}
        assert present <= set(reference.FOLDER), path


def test_the_readme_points_into_the_repository_not_outside_it():
    readme = (ROOT / "README.md").read_text()
    assert "../shared" not in readme
    for name in reference.PAGES:
        assert f"docs/reference/{name}" in readme
