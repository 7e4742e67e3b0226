"""Where the versions live, found one way by every command, so that what a command excludes
never depends on the folder it is run from.

``--datasets`` (or a ``datasets=`` argument), else ``$SOKOFORGE_DATASETS``, else the
repository's own ``datasets/``; a folder that is not there is refused, never read as empty.
"""

from __future__ import annotations

__all__ = ["ENV", "REPOSITORY_DATASETS", "datasets_folder"]

import os
from pathlib import Path

from pipeline.errors import InputError

ENV = "SOKOFORGE_DATASETS"
REPOSITORY_DATASETS = Path(__file__).resolve().parent.parent.parent / "datasets"


def datasets_folder(given: str | Path | None = None) -> Path:
    """The datasets folder: ``given``, else ``$SOKOFORGE_DATASETS``, else the repository's
    ``datasets/``; ``InputError`` when it is not a folder, since a command that excludes the
    levels of every version would otherwise exclude none."""
    if given not in (None, ""):
        path, how = Path(given), "--datasets"
    elif os.environ.get(ENV):
        path, how = Path(os.environ[ENV]), f"${ENV}"
    else:
        path, how = REPOSITORY_DATASETS, "the repository's datasets/"
    if not path.is_dir():
        raise InputError(f"no datasets folder at {path} (from {how}): the versions whose "
                         f"levels must be excluded cannot be seen; create it, or give "
                         f"--datasets DIR or ${ENV}")
    return path
