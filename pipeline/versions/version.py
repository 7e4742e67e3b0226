"""One published version: its folder's layout, its checked levels file, its manifest.

The only module that knows where a version keeps what (``datasets/NAME/levels.parquet``,
``manifest.json``, ``report/``, ``stages/``). Opening a version checks its levels against the
manifest's sha256, so nobody reads levels nobody committed to.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import polars as pl

from pipeline.errors import InputError, PipelineError
from pipeline.spec import Spec, spec_from_dict, version_look
from pipeline.versions.manifest import FORMAT, IMPORTED, Manifest, read_manifest, visibility
from pipeline.versions.tables import read_parquet, sha256_file

__all__ = ["LEVELS_FILE", "MANIFEST_FILE", "REPORT_DIR", "STAGES_DIR", "Version",
           "VersionAltered", "VersionMissing", "check_version_name", "closest_name",
           "existing_versions",
           "levels_sha256", "open_version", "version_ids"]

LEVELS_FILE = "levels.parquet"
MANIFEST_FILE = "manifest.json"
REPORT_DIR = "report"
STAGES_DIR = "stages"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def closest_name(name: str, names: Sequence[str]) -> str | None:
    """The one of ``names`` nearest to ``name``, case aside: one equal but for case first, else
    difflib's closest (None when none is close); ``public-s`` means ``public-S``."""
    by_folded: dict[str, str] = {}
    for known in names:
        by_folded.setdefault(known.casefold(), known)
    near = difflib.get_close_matches(name.casefold(), list(by_folded), n=1, cutoff=0.6)
    return by_folded.get(name.casefold()) or (by_folded[near[0]] if near else None)


class VersionMissing(InputError):
    """No finished version of that name (no manifest) under the datasets folder; the message,
    the same for every command, names the closest existing version."""

    def __init__(self, datasets: Path, name: str) -> None:
        near = closest_name(name, existing_versions(Path(datasets)))
        hint = (f"did you mean {near!r}?" if near is not None
                else f"`sokoforge versions` lists those there, `make dataset VERSION={name}` "
                     "builds it")
        super().__init__(f"no version {name!r} under {datasets}; {hint}")
        self.name = name


class VersionAltered(InputError):
    """A version whose levels file is missing or does not have its manifest's sha256."""


def check_version_name(version: str) -> None:
    """Refuse names that could escape ``datasets/`` or hide (a leading dot) as a folder."""
    if not _NAME.match(version):
        raise InputError(f"version name {version[:70]!r} is not allowed: use letters, digits,"
                         " '.', '_' or '-', starting with a letter or digit")


@dataclass(frozen=True, eq=False)
class Version:
    """A finished version as opened: its name, folder, manifest and its levels' sha256.

    ``sha256`` is the levels file's as read (``intact`` when it is the manifest's).
    """

    name: str
    folder: Path
    manifest: Manifest
    sha256: str

    @property
    def levels_path(self) -> Path:
        return self.folder / LEVELS_FILE

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST_FILE

    @property
    def report_dir(self) -> Path:
        return self.folder / REPORT_DIR

    @property
    def stages_dir(self) -> Path:
        return self.folder / STAGES_DIR

    @property
    def expected_sha256(self) -> str:
        """The levels file's sha256 the manifest commits to."""
        files: Mapping[str, Mapping[str, Any]] = self.manifest.get("files") or {}
        return str((files.get(LEVELS_FILE) or {}).get("sha256"))

    @property
    def intact(self) -> bool:
        return self.sha256 == self.expected_sha256

    @property
    def visibility(self) -> str:
        return visibility(self.manifest)

    @property
    def hidden(self) -> bool:
        """Whether its levels must never leave the server (every version but a public one)."""
        return self.visibility != "public"

    @property
    def imported(self) -> bool:
        """Whether it came from level files (``sokoforge import``) rather than a seed."""
        return self.manifest.get("seed_source") == IMPORTED

    @property
    def look(self) -> str:
        return version_look(self.manifest)

    @cached_property
    def spec(self) -> Spec:
        return spec_from_dict(self.manifest["spec"], source=f"manifest of {self.name}")

    def levels(self, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """The levels table (or its ``columns``) as stored."""
        return read_parquet(self.levels_path, columns=list(columns) if columns else None)


def open_version(datasets: Path, name: str, *, require_intact: bool = True,
                 strict: bool = True) -> Version:
    """Open ``datasets/name``: its manifest read, its levels file's sha256 computed.

    ``require_intact`` refuses a levels file that is missing or altered (``VersionAltered``);
    readers that report it themselves (audit, verify) pass False. ``strict`` reads the
    manifest with every field the pipeline relies on; the server needs fewer (False).

    Args:
        datasets: where versions live.
        name: the version's name.
        require_intact: refuse a missing or altered levels file.
        strict: read every manifest field the pipeline relies on.

    Raises:
        VersionMissing: no version ``name`` under ``datasets``.
        VersionAltered: its manifest is missing, or (``require_intact``) its levels file is
            missing or does not match the manifest.
        InputError: a bad name, or a manifest that is unreadable or incomplete.
    """
    check_version_name(name)
    folder = Path(datasets) / name
    manifest_path, levels_path = folder / MANIFEST_FILE, folder / LEVELS_FILE
    if not manifest_path.is_file():
        if strict or not folder.is_dir():
            raise VersionMissing(datasets, name)
        raise VersionAltered(f"{manifest_path} is missing: the version is unfinished or "
                             "damaged")
    manifest = read_manifest(manifest_path) if strict else _read_served_manifest(manifest_path)
    if not levels_path.is_file():
        if require_intact:
            raise VersionAltered(f"{levels_path} is missing: the version is unfinished or "
                                 "damaged")
        return Version(name, folder, manifest, "")
    version = Version(name, folder, manifest, sha256_file(levels_path))
    if require_intact and not version.intact:
        raise VersionAltered(
            f"{levels_path} does not match its manifest (sha256 {version.sha256[:12]}..., "
            f"manifest says {version.expected_sha256[:12]}...): refusing altered levels")
    return version


def _read_served_manifest(path: Path) -> Manifest:
    """A manifest with what serving needs: a known format and the levels' sha256."""
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{path} is not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else None
        raise InputError(f"{path}: unknown format {got!r}; sokoforge reads format {FORMAT}")
    if not ((manifest.get("files") or {}).get(LEVELS_FILE) or {}).get("sha256"):
        raise InputError(f"{path} has no files.levels.parquet.sha256 to check against")
    return cast(Manifest, manifest)  # an older one may lack fields: servers ask with .get


def existing_versions(datasets: Path) -> list[str]:
    """Finished versions under ``datasets`` (folders holding a manifest), sorted by name."""
    if not datasets.is_dir():
        return []
    return sorted(p.name for p in datasets.iterdir()
                  if not p.name.startswith(".") and (p / MANIFEST_FILE).is_file())


def levels_sha256(datasets: Path, versions: Sequence[str]) -> list[str]:
    """The sha256 of each named version's levels.parquet (the manifest lists exclusions so)."""
    return [sha256_file(_levels_file(datasets, name)) for name in versions]


def _levels_file(datasets: Path, name: str) -> Path:
    path = datasets / name / LEVELS_FILE
    if not path.is_file():
        raise PipelineError(f"version {name} is listed for exclusion but {path} is missing")
    return path


def version_ids(datasets: Path, versions: Sequence[str], column: str = "canonical_id"
                ) -> frozenset[str]:
    """Canonical ids (or another id ``column``, e.g. wall_layout_id) of the named versions."""
    ids: set[str] = set()
    for name in versions:
        ids.update(read_parquet(_levels_file(datasets, name), columns=[column])[column].to_list())
    return frozenset(ids)
