"""Checking a published version against its seed: rebuild it elsewhere, compare the bytes.

Anyone holding the published seed can confirm that the version's commitment was made with it
and that the same spec, seed and code produce exactly the same ``levels.parquet``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipeline import seeds
from pipeline.build import build, check_version_name
from pipeline.errors import PipelineError
from pipeline.manifest import read_manifest
from pipeline.spec import spec_from_dict
from pipeline.tables import sha256_file
from pipeline.workers import Workers


@dataclass(frozen=True)
class Verification:
    """The three comparisons: seed vs commitment, rebuild vs manifest, file vs manifest.

    ``rebuild_error`` says why the rebuild stopped (a wrong seed can make a stage fail, e.g.
    a rotation's matching); ``rebuilt_sha256`` is then empty.
    """

    commitment_matches: bool
    rebuild_matches: bool
    file_matches: bool
    expected_sha256: str
    rebuilt_sha256: str
    rebuild_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.commitment_matches and self.rebuild_matches and self.file_matches


def verify(version: str, seed: int, *, datasets: Path, workers: Workers | None = None
           ) -> Verification:
    """Rebuild ``version`` from ``seed`` in a temporary folder and compare it with its manifest."""
    check_version_name(version)
    folder = datasets / version
    manifest = read_manifest(folder / "manifest.json")
    commit = manifest["seed_commitment"]
    expected = manifest["files"]["levels.parquet"]["sha256"]
    levels = folder / "levels.parquet"
    if not levels.is_file():
        raise PipelineError(f"version {version} has no levels.parquet ({levels})")
    spec = spec_from_dict(manifest["spec"], source=f"manifest of {version}")
    commitment_matches = seeds.commitment(seed, commit["salt"]) == commit["sha256"]
    rebuilt, error = "", None
    with tempfile.TemporaryDirectory(prefix="sokoforge-verify-") as tmp:
        try:
            result = build(version, datasets=Path(tmp), spec=spec, seed=seed,
                           workers=workers or Workers(show_progress=False),
                           exclusion_root=datasets,
                           excluded_versions=manifest.get("excluded_versions", []),
                           rotation=manifest.get("rotation"))
            rebuilt = sha256_file(result.path / "levels.parquet")
        except PipelineError as e:
            if commitment_matches:
                raise  # the right seed: the failure is the environment's, say it as it is
            error = str(e)
    return Verification(
        commitment_matches=commitment_matches,
        rebuild_matches=rebuilt == expected,
        file_matches=sha256_file(levels) == expected,
        expected_sha256=expected, rebuilt_sha256=rebuilt, rebuild_error=error)
