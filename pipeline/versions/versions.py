"""The versions a datasets folder holds, and revealing a version's secret seed.

A version's ``levels.parquet`` and ``manifest.json`` never change, so a reveal is recorded in
its own file, ``reveal.json``, beside the manifest: the published seed, when, and the
commitment it opens. Anyone can check it against the manifest; nothing checksummed is touched.
"""

from __future__ import annotations

__all__ = [
    "COLUMNS", "REVEAL_FILE", "Reveal", "audit_status", "read_reveal", "reveal", "revealable_seed",
    "round_status", "seed_status", "version_table",
]

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline import seeds
from pipeline.errors import InputError, PipelineError
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.manifest import IMPORTED, Manifest
from pipeline.versions.rounds import iso, read_round, round_state
from pipeline.versions.serving import is_served
from pipeline.versions.tables import write_text
from pipeline.versions.version import LEVELS_FILE, REPORT_DIR, existing_versions, open_version

REVEAL_FILE = "reveal.json"
COLUMNS = ("version", "game", "levels", "created", "rotated from", "seed", "visibility", "round",
           "audit", "sha256")


def read_reveal(folder: Path) -> dict[str, Any] | None:
    """The reveal record of a version folder, or None when its seed was never revealed."""
    path = folder / REVEAL_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InputError(f"{path} is not valid JSON: {e}") from None


def seed_status(folder: Path, manifest: Manifest) -> str:
    """``public`` (built from a public seed), ``revealed``, ``committed`` (still secret) or
    ``imported`` (from level files: no seed)."""
    if manifest.get("seed_source") in ("public", IMPORTED):
        return str(manifest["seed_source"])
    try:
        reveal = read_reveal(folder)
        if reveal is None:
            return "committed"
        commit: Mapping[str, Any] = manifest["seed_commitment"] or {}  # none: KeyError below
        opens = seeds.commitment(int(reveal["seed"]), commit["salt"]) == commit["sha256"]
    except (PipelineError, KeyError, TypeError, ValueError):
        return "revealed (unreadable)"
    return "revealed" if opens else "revealed (MISMATCH)"


def audit_status(folder: Path) -> str:
    """The last audit's verdict from its checks.json: ``pass``, ``FAIL`` or ``not audited``."""
    try:
        verdict = json.loads((folder / REPORT_DIR / "checks.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "not audited"
    except (OSError, ValueError):
        return "unreadable"
    return "pass" if verdict.get("passed") is True else "FAIL"


def round_status(folder: Path, now: float | None = None) -> str:
    """``-`` (no round), ``open until T``, ``ended T, not closed`` (its time passed, ``round
    close`` not run yet), ``closed T`` or ``published
    T`` (``pipeline.versions.rounds.round_state``)."""
    try:
        rnd = read_round(folder)
    except PipelineError:
        return "unreadable"
    state = round_state(rnd, time.time() if now is None else now)
    if rnd is None:
        return "-"
    if rnd.published is not None:
        return f"published {iso(rnd.published)}"
    if rnd.closed is not None:
        return f"closed {iso(rnd.closed)}"
    if state == "over":
        return f"ended {iso(rnd.closes)}, not closed"
    return f"open until {iso(rnd.closes)}"


def version_table(datasets: Path) -> list[dict[str, str]]:
    """One row per finished version, sorted by name, with the columns of ``COLUMNS``."""
    rows = []
    for name in existing_versions(datasets):
        try:
            opened = open_version(datasets, name, require_intact=False)
            manifest, folder = opened.manifest, opened.folder
            entry = manifest["files"][LEVELS_FILE]
        except (PipelineError, KeyError, TypeError) as e:
            # One broken version must not hide the others: it is listed as such.
            rows.append(dict.fromkeys(COLUMNS, "?") | {
                "version": name, "sha256": f"manifest unreadable ({type(e).__name__})"})
            continue
        digest = opened.expected_sha256[:12]
        if not opened.intact:
            digest += " (file differs)"
        rows.append({
            "version": name, "game": str(manifest.get("game", "?")),
            "levels": str(entry.get("rows", "?")), "created": str(manifest.get("created", "?")),
            "rotated from": manifest.get("rotated_from") or "-",
            "seed": seed_status(folder, manifest), "visibility": opened.visibility,
            "round": round_status(folder), "audit": audit_status(folder),
            "sha256": digest})
    return rows


@dataclass(frozen=True)
class Reveal:
    """A revealed seed, where it was recorded, and whether this call recorded it."""

    seed: int
    path: Path
    first_time: bool


def revealable_seed(datasets: Path, version: str, force: bool = False
                    ) -> tuple[int, Manifest]:
    """``version``'s secret seed and manifest, once checked that the seed opens the manifest's
    commitment; refused (nothing recorded) for a public seed or a seed not on this machine,
    and, unless ``force``, for a version a server here is serving or a hidden one without a
    closed round."""
    opened = open_version(datasets, version, require_intact=False)
    manifest = opened.manifest
    if opened.imported:
        raise PipelineError(f"{version} was imported from level files: it has no seed")
    if manifest.get("seed_source") == "public":
        public = manifest.get("public_seed", "given in its build")
        raise PipelineError(f"{version} was built from the public seed {public}: nothing to "
                            "reveal")
    seed = seeds.read_secret(datasets, version)
    if seed is None:
        raise PipelineError(f"the secret seed of {version} is not on this machine "
                            f"({seeds.secret_path(datasets, version)})")
    commit = manifest["seed_commitment"]
    assert commit is not None  # a secret seed's manifest holds its commitment
    if seeds.commitment(seed, commit["salt"]) != commit["sha256"]:
        raise PipelineError(f"the stored seed of {version} does not open its manifest's "
                            "commitment; refusing to reveal it")
    rnd = read_round(opened.folder)
    anyway = "; or pass --force to reveal it anyway"
    if not force and is_served(opened.folder):
        raise PipelineError(f"a server on this machine is serving {version}: stop it first"
                            + anyway)
    if not force and rnd is not None and rnd.closed is None:
        raise PipelineError(f"the round of {version} is not closed (it closes at "
                            f"{iso(rnd.closes)}); close it first: sokoforge round close "
                            f"{version}" + anyway)
    if not force and rnd is None and opened.visibility != "public":
        raise PipelineError(f"{version} is hidden and has had no round: its seed keeps its "
                            f"levels secret until one is closed (sokoforge round open "
                            f"{version} --closes TIME, then round close)" + anyway)
    return seed, manifest


def reveal(datasets: Path, version: str, force: bool = False) -> Reveal:
    """Publish ``version``'s secret seed: check it opens the commitment, record it, return it
    (``revealable_seed`` says what is refused, and what ``force`` lets through)."""
    seed, manifest = revealable_seed(datasets, version, force)
    folder = datasets / version
    commit = manifest["seed_commitment"]
    path = folder / REVEAL_FILE
    recorded = read_reveal(folder)
    if recorded is not None and int(recorded["seed"]) == seed:
        return Reveal(seed, path, first_time=False)
    with private_writes(is_hidden(manifest)):  # the seed stays private until publish
        write_text(json.dumps({
            "format": 1, "version": version, "seed": str(seed),
            "seed_commitment": commit,
            "revealed": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }, indent=2) + "\n", path)
    return Reveal(seed, path, first_time=True)
