"""Boards as pictures: the looks, the renderers, a noisy look's pixel noise in numba, and
episodes played and drawn at speed (frames; vector: many boards in one call).

May import ``engine.search`` and the engine's top.
"""
