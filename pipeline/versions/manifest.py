"""manifest.json: what a version is, how it was made, and how anyone can check it.

The manifest names the spec, the seed's salted commitment (never the seed), the sha256 of
``levels.parquet`` and the versions whose levels were excluded, so a rebuild can be compared.
"""

from __future__ import annotations

__all__ = [
    "ExcludedVersion", "FORMAT", "FileRecord", "Generator", "HIDDEN", "IMPORTED", "ImportRecord",
    "Manifest", "ManifestRotation", "SeedCommitment", "SourceRecord", "difficulty_model_sha256",
    "make_manifest", "read_manifest", "visibility", "write_manifest",
]

import importlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any, Required, TypedDict, cast

from pipeline.errors import InputError
from pipeline.spec import SPECS_DIR
from pipeline.versions.tables import sha256_file, write_text

FORMAT = 1
HIDDEN = "hidden"
_LIBRARIES = ("numpy", "numba", "ortools", "polars", "pyarrow")
# The fields readers rely on, as paths into the JSON: checked once when a manifest is read.
_REQUIRED = (("version",), ("spec",), ("seed_source",), ("seed_commitment", "salt"),
             ("seed_commitment", "sha256"), ("files", "levels.parquet", "sha256"),
             ("files", "levels.parquet", "rows"))
# A version imported from level files has no seed: its sources stand where the commitment is.
IMPORTED = "imported"
_REQUIRED_IMPORTED = (("version",), ("spec",), ("seed_source",), ("sources",),
                      ("files", "levels.parquet", "sha256"), ("files", "levels.parquet", "rows"))


class SeedCommitment(TypedDict):
    """The seed's salted sha256 (``pipeline.seeds.commitment``): the seed itself never."""

    salt: str
    sha256: str


class FileRecord(TypedDict):
    """A file of the version: its sha256 and row count."""

    sha256: str
    rows: int


class Generator(TypedDict):
    """What made the version: the package, its method, libraries and difficulty model."""

    package_version: str
    method: str
    libraries: dict[str, str]
    difficulty_model: str


class ExcludedVersion(TypedDict):
    """A version whose levels (and wall layouts) this one may not reuse, by its sha256."""

    version: str
    sha256: str


class SourceRecord(TypedDict):
    """A level file an imported version was read from (kept under ``sources/``)."""

    name: str
    sha256: str
    levels: int
    imported: int


class ImportRecord(TypedDict):
    """How an import placed and checked its levels."""

    tier: str
    skip_unsolvable: bool
    skipped: list[str]
    imputed_features: list[str]


# "from" and "import" are keywords, so these two are spelled as calls. A rotation's record:
# the version it replaces and its ``--exclude`` files (name, sha256, levels); the excluded
# levels' ids stay in the build's plan.
ManifestRotation = TypedDict("ManifestRotation", {"from": str,
                                                  "excluded_files": list[dict[str, Any]]})
# Required: the fields ``read_manifest`` checks (readers rely on them). The others are written
# by every build (``game`` to ``created``), or only by some: ``origins`` (a build),
# ``public_seed`` (a public seed), ``visibility`` (a public version), ``rotation`` (a
# rotation), ``sources`` and ``import`` (an import); a server also reads older manifests,
# which may lack more of them, and asks with ``.get``.
Manifest = TypedDict("Manifest", {
    "format": Required[int],
    "version": Required[str],
    "game": str,
    "spec": Required[dict[str, Any]],
    "seed_commitment": SeedCommitment | None,
    "seed_source": Required[str],
    "files": Required[dict[str, FileRecord]],
    "generator": Generator,
    "excluded_versions": list[ExcludedVersion],
    "rotated_from": str | None,
    "created": str,
    "origins": list[dict[str, Any]],
    "public_seed": str,
    "visibility": str,
    "rotation": ManifestRotation,
    "sources": list[SourceRecord],
    "import": ImportRecord,
}, total=False)


def make_manifest(*, version: str, spec: dict[str, Any], seed_source: str, salt: str | None,
                  seed_sha256: str | None, levels: Path, rows: int,
                  excluded_versions: list[ExcludedVersion], public_seed: int | None = None,
                  rotated_from: str | None = None, origins: list[dict[str, Any]] | None = None
                  ) -> Manifest:
    """The manifest of a finished version whose levels file is ``levels``.

    ``public_seed`` is written only for versions built from a seed that was public from the
    start (demos, tests); a secret seed appears only as its commitment. A version without a
    seed (``seed_source`` ``imported``) has a null commitment. ``excluded_versions`` are
    ``{"version", "sha256"}`` records; ``origins`` (``pipeline.stages.origins``) say where each
    level, in play order, was drawn, so that the version verifies on its own.
    """
    manifest: Manifest = {
        "format": FORMAT,
        "version": version,
        "game": spec["name"],
        "spec": spec,
        "seed_commitment": None if salt is None or seed_sha256 is None else {
            "salt": salt, "sha256": seed_sha256},
        "seed_source": seed_source,
        "files": {"levels.parquet": {"sha256": sha256_file(levels), "rows": rows}},
        "generator": {
            "package_version": package_version("sokoforge"),
            "method": spec["method"],
            "libraries": {name: _library_version(name) for name in _LIBRARIES},
            "difficulty_model": difficulty_model_sha256(),
        },
        "excluded_versions": excluded_versions,
        "rotated_from": rotated_from,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if origins is not None:
        manifest["origins"] = origins
    if public_seed is not None:
        manifest["public_seed"] = str(public_seed)
    if spec.get("visibility", HIDDEN) != HIDDEN:
        manifest["visibility"] = spec["visibility"]
    return manifest


def visibility(manifest: Mapping[str, Any]) -> str:
    """``public`` (its levels may be shipped) or ``hidden``; a manifest that does not say is
    hidden: every version made before the field existed was a hidden set."""
    return str(manifest.get("visibility", HIDDEN))


def difficulty_model_sha256() -> str:
    """The sha256 of the difficulty model file that graded a version: ``verify`` compares a
    version's difficulty and grade only when the model that graded it is the one shipped."""
    return sha256_file(SPECS_DIR / "difficulty.json")


def _library_version(name: str) -> str:
    """A library's version from the module itself: the build has imported it (``ortools``'s
    package is light) and asking the installed metadata costs a scan of site-packages."""
    return importlib.import_module(name).__version__


def write_manifest(manifest: Manifest, path: Path) -> None:
    """Write the manifest atomically, as indented JSON."""
    write_text(json.dumps(manifest, indent=2) + "\n", path)


def read_manifest(path: Path) -> Manifest:
    """A version's manifest; a missing, unreadable or incomplete one is an ``InputError``."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"no manifest at {path}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"manifest {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"manifest {path}: unknown format (expected format {FORMAT})")
    required = _REQUIRED_IMPORTED if data.get("seed_source") == IMPORTED else _REQUIRED
    for where in required:
        node: Any = data
        for key in where:
            if not isinstance(node, dict) or key not in node:
                raise InputError(f"manifest {path}: missing field {'.'.join(where)!r}")
            node = node[key]
    return cast(Manifest, data)
