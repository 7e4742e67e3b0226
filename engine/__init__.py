"""The Sokoban engine: levels, rules and the episode core at the top; searches
(``engine.search``), the search agents (``engine.agents``) and pictures (``engine.pictures``).

numba kernels compile with ``cache=True`` into the repository's ignored ``.numba_cache``
folder, in a subfolder per hash of the engine's sources, subpackages included
(``engine.kernel_cache``), so a second process starts without recompiling and never runs stale
machine code.
"""
