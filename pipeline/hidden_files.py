"""Keeping a hidden version out of git by construction: its folder carries its own
``.gitignore`` (every file, itself included), written before the folder appears.

A public version's folder gets none, so it may be committed; the rule travels with the folder,
so it holds for every version built, rotated or imported later, wherever the datasets live.
"""

from __future__ import annotations

__all__ = ["GITIGNORE", "RULE", "keep_hidden_out_of_git"]

from pathlib import Path
from typing import Any

from pipeline.manifest import visibility
from pipeline.tables import write_text

GITIGNORE = ".gitignore"
RULE = ("# A hidden version: its levels must never be committed (written by sokoforge when the\n"
        "# version was made). Delete this file only to publish the set once its round is over.\n"
        "*\n")


def keep_hidden_out_of_git(folder: Path, manifest: dict[str, Any]) -> bool:
    """Write ``folder/.gitignore`` ignoring everything when ``manifest`` is not public;
    returns whether it did."""
    if visibility(manifest) == "public":
        return False
    write_text(RULE, folder / GITIGNORE)
    return True
