"""The Sokoban engine: levels, rules, optimal and backward search, renderers.

numba kernels compile with ``cache=True`` into the repository's ignored ``.numba_cache``
folder, in a subfolder per hash of the engine's sources (``engine.kernel_cache``), so a
second process starts without recompiling and never runs stale machine code.
"""
