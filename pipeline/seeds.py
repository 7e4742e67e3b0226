"""Version seeds: derivation of every random draw, the secret seed file and its commitment.

Every draw comes from a generator keyed by (version seed, tier, slot, attempt, purpose), so
results never depend on the order of work or on the number of workers.
"""

from __future__ import annotations

__all__ = [
    "ENLARGE", "GENERATED", "LAYOUT", "REDRAW", "START", "SeedError", "THEME", "commitment",
    "derived_rng", "forget_secret", "fresh_seed", "noise_key", "parse_seed", "public_salt",
    "read_secret", "secret_path", "write_secret",
]

import contextlib
import hashlib
import os
import secrets
from pathlib import Path

import numpy as np

from pipeline.errors import InputError

# Purposes of a draw, part of the key so two uses of one (tier, slot, attempt) never share a stream.
LAYOUT = 0
START = 1
THEME = 2

# Kinds of draw, recorded in each candidate's origin. The generate stage keys its draws by
# (tier, slot, attempt); a targeted draw (``pipeline.stages.slot_draws``) by (kind, round, tier,
# layout, attempt), a longer key, so no two draws ever share a stream.
GENERATED = 0
ENLARGE = 2  # rotation: more candidates for a slot of PREV left unmatched
REDRAW = 3  # select: more candidates for a slot left unfilled


class SeedError(InputError):
    """A seed that is malformed or disagrees with what a build recorded."""


def parse_seed(text: str | int) -> int:
    """A public seed from the command line: a non-negative integer."""
    try:
        seed = int(str(text).strip())
    except ValueError:
        raise SeedError(f"seed must be a non-negative integer, got {str(text)[:20]!r}") from None
    if seed < 0:
        raise SeedError("seed must be a non-negative integer")
    return seed


def derived_rng(seed: int, *key: int) -> np.random.Generator:
    """A generator for one draw, fixed by the version seed and the draw's key."""
    return np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=key))


def noise_key(seed: int, index: int) -> int:
    """The pixel-noise key of level ``index``: a one-way hash of the seed, so a server that
    stores it to replay noisy frames learns nothing of the seed."""
    digest = hashlib.sha256(f"sokoforge-noise:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # fits a signed 64-bit column


def fresh_seed() -> int:
    """A 128-bit seed from the operating system."""
    return secrets.randbits(128)


def secret_path(datasets: Path, version: str) -> Path:
    """Where the secret seed of ``version`` is kept (``datasets/.secrets`` is never committed)."""
    return datasets / ".secrets" / f"{version}.seed"


def write_secret(datasets: Path, version: str, seed: int) -> Path:
    """Store a secret seed readable by its owner only (mode 0600); never overwrite one."""
    path = secret_path(datasets, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{seed}\n")
        f.flush()
        os.fsync(f.fileno())
    return path


def forget_secret(datasets: Path, version: str) -> None:
    """Delete the secret seed of a version that was never made (and ``.secrets`` if empty)."""
    path = secret_path(datasets, version)
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # other secrets stay, or the folder was never made
        path.parent.rmdir()


def read_secret(datasets: Path, version: str) -> int | None:
    """The stored secret seed of ``version``, or None when there is none."""
    path = secret_path(datasets, version)
    if not path.is_file():
        return None
    try:
        return parse_seed(path.read_text())
    except (SeedError, UnicodeDecodeError):
        # parse_seed quotes what it got: never echo a secret file's content.
        raise SeedError(f"the secret seed file {path} is damaged (not one integer)") from None


def public_salt(seed: int) -> str:
    """The commitment salt of a public seed: derived, so a rebuild writes the same manifest."""
    return hashlib.sha256(f"sokoforge-salt:{seed}".encode()).hexdigest()[:32]


def commitment(seed: int, salt: str) -> str:
    """sha256 over salt and seed: publishing the seed later proves it was fixed in advance."""
    return hashlib.sha256(f"{salt}:{seed}".encode()).hexdigest()
