"""Publishing a closed round: its hidden version becomes a public one, with the round's record,
final standings and revealed seed beside its levels, all of it ready to commit.

After ``round close`` and ``reveal``, ``publish_round`` checks that the revealed seed opens the
manifest's commitment, that the standings are the ones the round recorded and that the
clearances log (``clearances.json``, when a person cleared a scorecard) matches its digest
(``clearances.sha256``), both published beside the standings, then marks the
manifest public (with the seed, so anyone can ``verify`` it) and its game the version's own
name (a practice game beside the next round's, which plays the spec's game), drops the
folder's own ``.gitignore``, makes its files readable by all, and records the publication in
``round.json``. A server then serves the version as a practice set: play is allowed again
and not ranked (its board stays its final standings).
"""

from __future__ import annotations

__all__ = ["PUBLISHED_FILES", "Published", "publish_round"]

import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pipeline import seeds
from pipeline.errors import PipelineError
from pipeline.versions.clearances import check_clearances
from pipeline.versions.hidden_files import GITIGNORE
from pipeline.versions.manifest import read_manifest, write_manifest
from pipeline.versions.round_log import ROUND_LOG
from pipeline.versions.rounds import (
    ROUND_FILE,
    STANDINGS_FILES,
    STANDINGS_SHA256,
    Round,
    exact,
    read_round,
    record_round,
    version_folder,
)
from pipeline.versions.serving import is_served
from pipeline.versions.version import LEVELS_FILE, MANIFEST_FILE
from pipeline.versions.versions import REVEAL_FILE, read_reveal

# What a published round's folder holds for git (its report/ and stages/ are not committed);
# the round's log names the stores that served it by their ids alone
PUBLISHED_FILES = (LEVELS_FILE, MANIFEST_FILE, ROUND_FILE, ROUND_LOG, REVEAL_FILE,
                   *STANDINGS_FILES)


@dataclass(frozen=True)
class Published:
    """A published round: its record, its seed, and the files to commit."""

    round: Round
    seed: int
    files: tuple[Path, ...]
    first_time: bool


def publish_round(datasets: Path, version: str, now: float | None = None) -> Published:
    """Make ``version``'s closed and revealed round public (see the module text); publishing
    again changes nothing."""
    folder = version_folder(datasets, version)
    rnd = read_round(folder)
    if rnd is None or rnd.closed is None:
        raise PipelineError(f"{version} has no closed round to publish: "
                            f"sokoforge round close {version} --db STORE first")
    revealed = read_reveal(folder)
    if revealed is None:
        raise PipelineError(f"the seed of {version} is not revealed: "
                            f"sokoforge reveal {version} --yes first")
    manifest = read_manifest(folder / MANIFEST_FILE)
    commit: Mapping[str, Any] = manifest.get("seed_commitment") or {}
    seed = int(revealed["seed"])
    if seeds.commitment(seed, commit.get("salt", "")) != commit.get("sha256"):
        raise PipelineError(f"{folder / REVEAL_FILE}: its seed does not open the manifest's "
                            "commitment; not publishing")
    sums = folder / STANDINGS_SHA256
    if not sums.is_file() or hashlib.sha256(sums.read_bytes()).hexdigest() != rnd.standings_sha256:
        raise PipelineError(f"the standings of {version} are not the ones its round recorded "
                            f"(sha256 {rnd.standings_sha256}): sokoforge round close {version} "
                            "--db STORE writes them again")
    check_clearances(folder)
    if rnd.published is not None:
        return Published(rnd, seed, _files(folder), first_time=False)
    if is_served(folder):
        raise PipelineError(f"a server on this machine is serving {version}: stop it first "
                            "(the next one may serve it as a practice set)")
    write_manifest({**manifest, "game": version, "visibility": "public",
                    "public_seed": str(seed)}, folder / MANIFEST_FILE)
    (folder / GITIGNORE).unlink(missing_ok=True)
    _readable_by_all(folder)
    rnd = replace(rnd, published=exact(time.time() if now is None else now))
    record_round(folder, rnd)
    return Published(rnd, seed, _files(folder), first_time=True)


def _files(folder: Path) -> tuple[Path, ...]:
    """The files to commit: ``PUBLISHED_FILES``, and the clearances when there are any."""
    return tuple(folder / name for name in PUBLISHED_FILES) + check_clearances(folder)


def _readable_by_all(folder: Path) -> None:
    """Folders 0755 and files 0644 under ``folder``: a public version is anyone's to read."""
    for root, _dirs, files in os.walk(folder):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
