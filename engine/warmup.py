"""Compile every numba kernel once into the on-disk cache (``make test`` runs this first).

Solving and enumerating one small level reaches every kernel of the engine.
"""

from __future__ import annotations

from engine.levels import parse_xsb

_LEVEL = """
#######
#.@ # #
#$* $ #
#   $ #
# ..  #
#######
"""


def main() -> None:
    from engine.rules import Game, replay
    from engine.solver import solve

    level = parse_xsb(_LEVEL)
    result = solve(level)
    replay(level, result.solution or "")
    Game(level, 10).act(0)


if __name__ == "__main__":
    main()
