"""manifest.json: what a version is, how it was made, and how anyone can check it.

The manifest names the spec, the seed's salted commitment (never the seed), the sha256 of
``levels.parquet`` and the versions whose levels were excluded, so a rebuild can be compared.
"""

from __future__ import annotations

__all__ = [
    "FORMAT", "HIDDEN", "IMPORTED", "difficulty_model_sha256", "make_manifest", "read_manifest",
    "visibility", "write_manifest",
]

import importlib
import json
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

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


def make_manifest(*, version: str, spec: dict[str, Any], seed_source: str, salt: str | None,
                  seed_sha256: str | None, levels: Path, rows: int,
                  excluded_versions: list[dict[str, str]], public_seed: int | None = None,
                  rotated_from: str | None = None, origins: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
    """The manifest of a finished version whose levels file is ``levels``.

    ``public_seed`` is written only for versions built from a seed that was public from the
    start (demos, tests); a secret seed appears only as its commitment. A version without a
    seed (``seed_source`` ``imported``) has a null commitment. ``excluded_versions`` are
    ``{"version", "sha256"}`` records; ``origins`` (``pipeline.stages.origins``) say where each
    level, in play order, was drawn, so that the version verifies on its own.
    """
    manifest = {
        "format": FORMAT,
        "version": version,
        "game": spec["name"],
        "spec": spec,
        "seed_commitment": None if salt is None else {"salt": salt, "sha256": seed_sha256},
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


def visibility(manifest: dict[str, Any]) -> str:
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


def write_manifest(manifest: dict[str, Any], path: Path) -> None:
    """Write the manifest atomically, as indented JSON."""
    write_text(json.dumps(manifest, indent=2) + "\n", path)


def read_manifest(path: Path) -> dict[str, Any]:
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
    return data
