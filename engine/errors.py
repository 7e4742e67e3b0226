"""The root of every error sokoforge raises on purpose, so a caller can catch them all at once.

Each layer's errors derive from it (often beside a builtin such as ``ValueError`` that older
callers catch); the CLI maps them to exit statuses and the web layer to HTTP statuses.
"""

from __future__ import annotations

__all__ = ["SokoforgeError"]


class SokoforgeError(Exception):
    """A refusal or failure the project raises itself, with the reason in words."""
