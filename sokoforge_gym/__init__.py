"""``import sokoforge_gym`` registers the ``sokoforge/Sokoban-v0`` Gymnasium environment.

Registering is this module's whole purpose, so it happens on import, as Gymnasium expects;
``gymnasium.make("sokoforge_gym:sokoforge/Sokoban-v0", ...)`` imports it by itself.
"""

from sokoforge.sokoban_env import ENV_ID, SokobanEnv, register

register()

__all__ = ["ENV_ID", "SokobanEnv", "register"]
