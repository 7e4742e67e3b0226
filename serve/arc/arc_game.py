"""Sokoban as an ARC-AGI-3 local game, played by the same rules and frames as sokoforge's ARC face.

``sokoforge arc-export`` writes this file, its ``GAME`` filled with one version's levels, beside
a metadata.json, for ``arc_agi.Arcade`` (OFFLINE) and its ``listen_and_serve`` to run in
process; it imports only ``arcengine`` and ``numpy`` (sokoforge never imports it).

Rules: levels in play order, each with its step budget. ACTION1-4 move up, down, left, right
(pushing a crate into a free cell; a blocked move still uses a step); ACTION5-7 only use a
step (ACTION6's x, y are ignored). A level ends when solved or its budget is used, and play
goes on to the next, solved or not: ``levels_completed`` counts the levels solved,
``win_levels`` is the number of levels, and after the last level the state is WIN if every
one was solved, else GAME_OVER. An action's frames are the board after it, then the next
level's start when it ended a level. RESET, by ``GAME["restarts"]``: ``none``, the current
frame, nothing replayed; ``level``, the current level back to its start (its steps stay
used); ``game``, that after an action in the level, else (or once the game is over) every
level again with whole budgets. The first RESET starts the game.

Frames: 64x64 palette indices, a board picture with a crate and a player sprite per cell,
cut from sokoforge's own drawing of each level (``GAME["palette"]`` names the index of each
element of that drawing; None for the 16-colour ``arc`` look).
"""

from __future__ import annotations

import numpy as np
from arcengine import ARCBaseGame, BlockingMode, GameAction, Level, Sprite

__all__ = ["GAME", "Board", "Sokoban", "picture"]

# --- GAME: written by sokoforge arc-export ---
GAME: dict = {"game_id": "sokoban", "restarts": "none", "palette": None, "tiles": [],
              "levels": []}
# --- end of GAME ---

MOVES = {GameAction.ACTION1: 0, GameAction.ACTION2: 1, GameAction.ACTION3: 2,
         GameAction.ACTION4: 3}
BOARD_LAYER, CRATE_LAYER, PLAYER_LAYER = 0, 1, 2


def picture(rows: list[str]) -> np.ndarray:
    """Rows of hexadecimal digits (one palette index each) as an int8 array."""
    return np.array([[int(ch, 16) for ch in row] for row in rows], dtype=np.int8)


TILES = [picture(tile) for tile in GAME["tiles"]]


class Board:
    """One level as data: its cells (``rows``: ``#`` wall, ``_`` outside the walls, space
    floor, ``.`` goal, ``$``/``*`` crate off/on a goal, ``@``/``+`` player off/on a goal),
    start, budget, and the tile drawn for a crate or the player on each cell."""

    def __init__(self, spec: dict) -> None:
        cells = "".join(spec["rows"])
        self.width = len(spec["rows"][0])
        self.floor = [ch not in "#_" for ch in cells]
        self.goals = [ch in ".*+" for ch in cells]
        self.player = next(i for i, ch in enumerate(cells) if ch in "@+")
        self.crates = [i for i, ch in enumerate(cells) if ch in "$*"]
        self.budget = int(spec["budget"])
        self.cell, self.top, self.left = spec["cell"], spec["top"], spec["left"]
        self.board = picture(spec["board"])
        self.crate_tile = spec["crate_tiles"]
        self.player_tile = spec["player_tiles"]

    def open(self, cell: int) -> bool:
        """Whether ``cell`` (a flat index, as the engine counts them) is floor."""
        return 0 <= cell < len(self.floor) and self.floor[cell]

    def place(self, sprite: Sprite, cell: int, tile: int) -> None:
        row, col = divmod(cell, self.width)
        sprite.set_position(self.left + col * self.cell, self.top + row * self.cell)
        sprite.pixels = TILES[tile]

    def level(self, index: int) -> Level:
        """The level's start as sprites: the board, a crate per crate, the player."""
        def sprite(name: str, cell: int, tile: int, layer: int) -> Sprite:
            s = Sprite(TILES[tile], name=name, layer=layer, blocking=BlockingMode.NOT_BLOCKED,
                       collidable=False)
            self.place(s, cell, tile)
            return s

        sprites = [Sprite(self.board, name="board", layer=BOARD_LAYER,
                          blocking=BlockingMode.NOT_BLOCKED, collidable=False)]
        sprites += [sprite("crate", c, self.crate_tile[c], CRATE_LAYER) for c in self.crates]
        sprites.append(sprite("player", self.player, self.player_tile[self.player],
                              PLAYER_LAYER))
        return Level(sprites=sprites, name=f"level {index}", data={"index": index})


class Sokoban(ARCBaseGame):
    """Every level of the version in play order, scored and restarted as the ARC face does."""

    def __init__(self, seed: int = 0) -> None:
        self._boards = [Board(spec) for spec in GAME["levels"]]
        self._restarts = GAME["restarts"]
        self._steps_used = [0] * len(self._boards)
        self._solved = [False] * len(self._boards)
        self._started = False
        self._over = False
        super().__init__(GAME["game_id"], [b.level(i) for i, b in enumerate(self._boards)],
                         available_actions=[1, 2, 3, 4], seed=seed)

    def on_set_level(self, level: Level) -> None:
        self._board = self._boards[level.get_data("index")]
        self._player = self._board.player
        self._crates = list(self._board.crates)
        self._player_sprite = level.get_sprites_by_name("player")[0]
        self._crate_sprites = level.get_sprites_by_name("crate")
        self._acted = False  # an action taken in the level since it began or restarted

    def handle_reset(self) -> None:
        if not self._started or (self._over and self._restarts == "game"):
            self._started = True
            self._restart_game()
        elif self._over or self._restarts == "none":
            return  # the current frame, nothing replayed
        elif self._restarts == "level" or self._acted:
            self.level_reset()  # the steps used in the level stay used
        else:
            self._restart_game()

    def _restart_game(self) -> None:
        self._steps_used = [0] * len(self._boards)
        self._solved = [False] * len(self._boards)
        self._over = False
        self.full_reset()

    def step(self) -> None:
        action = self.action.id
        if action == GameAction.RESET:
            if self._over:  # a RESET that replays nothing keeps the end's state
                self._end()
            self.complete_action()
            return
        index = self.level_index
        if action in MOVES:
            self._move(MOVES[action])
        self._steps_used[index] += 1
        self._acted = True
        solved = all(self._board.goals[c] for c in self._crates)
        if solved or self._steps_used[index] >= self._board.budget:
            self._solved[index] = solved
            self._score = sum(self._solved)  # levels_completed: the levels solved
            if self.is_last_level():
                self._over = True
                self._end()
            else:
                self._next_level = True  # the engine draws this frame, then the next level
        self.complete_action()

    def _end(self) -> None:
        if all(self._solved):
            self.win()
        else:
            self.lose()

    def _move(self, direction: int) -> None:
        board = self._board
        delta = (-board.width, board.width, -1, 1)[direction]
        target = self._player + delta
        if not board.open(target):
            return
        if target in self._crates:
            beyond = target + delta
            if not board.open(beyond) or beyond in self._crates:
                return
            k = self._crates.index(target)
            self._crates[k] = beyond
            board.place(self._crate_sprites[k], beyond, board.crate_tile[beyond])
        self._player = target
        board.place(self._player_sprite, target, board.player_tile[target])
