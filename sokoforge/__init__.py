"""The top layer: the ``sokoforge`` command and the Gymnasium environment.

Layers point down: ``engine`` <- ``pipeline`` <- ``serve`` <- ``sokoforge``; nothing below
imports this package.
"""
