"""The Sokoban engine: levels, rules, optimal and backward search, renderers.

numba kernels compile with ``cache=True`` into the repository's ignored
``.numba_cache`` folder, so a second process starts without recompiling.
"""

import os
from pathlib import Path

os.environ.setdefault(
    "NUMBA_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".numba_cache")
)
