"""The Sokoban engine: levels, rules, optimal and backward search, renderers.

numba kernels compile with ``cache=True`` into the repository's ignored
``.numba_cache`` folder, so a second process starts without recompiling. The
cache sits in a subfolder named by a hash of the engine's sources: numba only
checks a kernel's own file, so a kernel that inlines a helper changed in another
file would otherwise run stale machine code.
"""

import hashlib
import os
import sys
from pathlib import Path


def _source_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _cache_dir() -> str:
    base = Path(os.environ.get("NUMBA_CACHE_DIR")
                or Path(__file__).resolve().parent.parent / ".numba_cache")
    tag = _source_digest()
    return str(base if base.name == tag else base / tag)


os.environ["NUMBA_CACHE_DIR"] = _cache_dir()
if "numba" in sys.modules:
    sys.modules["numba"].config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"]
