"""Keeping a hidden version hidden: out of git, and on the machine its owner's alone.

Its folder carries its own ``.gitignore`` (every file, itself included), written before the
folder appears; a public version's folder gets none, so it may be committed. Everything
written for a hidden version (its build folder, levels, stages, report) is made with the
umask 077, so its files are 0600 in 0700 folders from the start, never readable in between.
"""

from __future__ import annotations

__all__ = [
    "GITIGNORE", "PRIVATE_UMASK", "RULE", "fresh_folder", "is_hidden", "keep_hidden_out_of_git",
    "make_private", "private_writes", "private_writes_in",
]

import json
import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from pipeline.versions.manifest import Manifest, visibility
from pipeline.versions.tables import write_text
from pipeline.versions.version import MANIFEST_FILE

GITIGNORE = ".gitignore"
RULE = ("# A hidden version: its levels must never be committed (written by sokoforge when the\n"
        "# version was made). Delete this file only to publish the set once its round is over.\n"
        "*\n")
PRIVATE_UMASK = 0o077  # files 0600, folders 0700


def is_hidden(manifest: Mapping[str, Any]) -> bool:
    """Whether a version (by its manifest, or a spec's dict) is hidden: all but public."""
    return visibility(manifest) != "public"


def keep_hidden_out_of_git(folder: Path, manifest: Manifest) -> bool:
    """Write ``folder/.gitignore`` ignoring everything when ``manifest`` is not public;
    returns whether it did."""
    if not is_hidden(manifest):
        return False
    write_text(RULE, folder / GITIGNORE)
    return True


@contextmanager
def private_writes(hidden: bool) -> Iterator[None]:
    """While inside, when ``hidden``: every file and folder this process makes is its owner's
    alone (umask 077). The umask is the process's: commands write one version at a time."""
    if not hidden:
        yield
        return
    before = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(before)


def private_writes_in(folder: Path) -> AbstractContextManager[None]:
    """``private_writes`` for the version in ``folder``, hidden by its manifest: what is
    written after the build (its round, standings, revealed seed, reports) stays 0600 until
    ``round publish`` makes the version public. Only the manifest's visibility is read: one
    that cannot be read counts as hidden."""
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    return private_writes(not isinstance(manifest, dict) or is_hidden(manifest))


def make_private(folder: Path) -> None:
    """``folder`` and every folder under it 0700, every file 0600: what an earlier run (or an
    older sokoforge) wrote for a hidden version before its writes were private."""
    folder.chmod(0o700)
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700)
        for name in files:
            os.chmod(os.path.join(root, name), 0o600)


def fresh_folder(parent: Path, prefix: str) -> Path:
    """A new empty folder in ``parent`` with a unique name, made as ``mkdir`` makes one (the
    umask's mode: a version's folder made aside has the mode of one made in place, where
    ``tempfile.mkdtemp`` would give 0700 whatever the version)."""
    while True:
        path = parent / f"{prefix}{secrets.token_hex(4)}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
