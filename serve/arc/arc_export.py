"""A public version as an ARC-AGI-3 local game: the metadata.json and single source file that
the ``arc-agi`` toolkit's OFFLINE mode finds under ``OUT/<game id>/<version>/`` and runs.

The game object is the ARC face's (``serve.arc.arc_wire.game_info``), the levels are the server's
(``serve.games.dataset.load_version``), and the pictures are cut from the ARC face's own drawing of
each level, so the exported game answers every action with the frames the server sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from pprint import pformat

import numpy as np

from engine.levels import Level, State
from engine.pictures.frames import CRATE, PLAYER, TileAtlas
from engine.pictures.look import ARC_INDEX
from engine.pictures.render import SIZE
from pipeline.errors import InputError, PipelineError
from pipeline.scores.items import is_pool
from pipeline.versions.tables import write_text
from pipeline.versions.version import open_version
from serve.arc import arc_wire as w
from serve.games.dataset import DatasetError, ServedLevel, load_version
from serve.games.games import GameEntry, Registry, manifest_is_public

__all__ = ["ArcExport", "arc_metadata", "export_arc_game", "game_source"]

TEMPLATE = Path(__file__).with_name("arc_game.py")
BEGIN = "# --- GAME: written by sokoforge arc-export ---"
END = "# --- end of GAME ---"
# One safe path segment (it names the folder under OUT): no separator, and not '.' or '..'
# or any name starting with a dot; no '-', at which the toolkit splits a game id.
GAME_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]{0,79}")
HEX = "0123456789abcdef"


@dataclass(frozen=True)
class ArcExport:
    """What an export wrote: the folder, the toolkit's game id, the level count."""

    folder: Path
    game_id: str
    levels: int


def export_arc_game(datasets: Path, version: str, out: Path,
                    game_id: str | None = None) -> ArcExport:
    """Write ``version`` (public or imported; a hidden one is refused) as the toolkit's local
    game ``game_id`` (default the ARC face's, ``sokoban_VERSION``) in ``out/GAME_ID/VERSION``;
    the same version writes the same bytes."""
    if game_id is not None and not GAME_ID.fullmatch(game_id):
        raise InputError(f"game id {game_id[:40]!r} is not allowed: it names one folder under "
                         "OUT; use letters, digits, '_' or '.', not starting with '.' (the "
                         "toolkit splits a game id at its first '-')")
    # refused from the manifest, before a level is read
    manifest = open_version(Path(datasets), version, strict=False).manifest
    if not manifest_is_public(manifest):
        raise PipelineError(f"{version} is a hidden version: its levels would be in the "
                            "exported source; export a public or imported version")
    if is_pool(manifest):
        raise PipelineError(f"{version} is an adaptive game's pool: the server chooses each "
                            "session's levels as it plays, which no exported game can; play "
                            "its ARC face served (sokoforge serve)")
    try:
        entry = Registry([load_version(Path(datasets), version)]).first
    except DatasetError as e:
        raise PipelineError(str(e)) from None
    if entry.episodes > w.MAX_LEVELS:
        raise PipelineError(f"{version} has {entry.episodes} levels, more than the "
                            f"{w.MAX_LEVELS} an ARC game can count")
    info = arc_metadata(entry, game_id)
    folder = Path(out) / info["game_id"] / entry.version.version
    folder.mkdir(parents=True, exist_ok=True)
    write_text(game_source(entry, info["game_id"]), folder / f"{info['class_name'].lower()}.py")
    # metadata.json last: the toolkit finds a game by it, so a folder without it is unfinished
    write_text(json.dumps(info, indent=2) + "\n", folder / "metadata.json")
    return ArcExport(folder, info["game_id"], entry.episodes)


def arc_metadata(entry: GameEntry, game_id: str | None = None) -> dict:
    """The ARC face's game object (``GET /api/games``), under ``game_id`` if given, dated by
    the version's creation so the toolkit's 'latest version' is the newest version."""
    v = entry.version
    info = w.game_info(v.version, v.game, [lv.optimal_moves for lv in v.levels], entry.restarts)
    if game_id is not None:
        info["game_id"] = game_id
    if v.manifest.get("created"):
        info["date_downloaded"] = v.manifest["created"]
    return info


def game_source(entry: GameEntry, game_id: str) -> str:
    """``serve/arc/arc_game.py`` with its ``GAME`` filled: the levels as data, their budgets
    and the tiles of their pictures (each distinct tile once)."""
    tiles: dict[bytes, tuple[int, list[str]]] = {}
    levels = [_level_data(served, tiles) for served in entry.version.levels]
    game = {"game_id": game_id, "restarts": entry.restarts,
            "palette": None if entry.look == "arc" else dict(ARC_INDEX),
            "tiles": [rows for _, rows in tiles.values()], "levels": levels}
    template = TEMPLATE.read_text(encoding="utf-8")
    head, rest = template.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    data = "GAME: dict = " + pformat(game, width=100, compact=True, sort_dicts=False)
    return (f"# {game_id}: version {entry.version.version} of sokoforge game "
            f"{entry.version.game!r}, levels sha256 {entry.version.sha256}\n"
            f"{head}{BEGIN}\n{data}\n{END}{tail}")


def _level_data(served: ServedLevel, tiles: dict[bytes, tuple[int, list[str]]]) -> dict:
    """One level of ``GAME``; its new tiles are added to ``tiles`` (picture bytes -> number
    and hex rows)."""
    level = served.level
    atlas = TileAtlas.for_level(level, drawer=_three_channels(served.painter.arc))
    board = atlas.board.reshape(SIZE, SIZE, 3)[:, :, 0]
    y, x = divmod(int(atlas.origin[0]) // 3, SIZE)
    cells = level.height * level.width

    def tile_ids(content: int) -> list[int]:
        out = []
        for cell in range(cells):
            if not level.floor.flat[cell]:
                out.append(-1)
                continue
            tile = np.ascontiguousarray(atlas.tiles[cell, content][:, 0::3])
            number, _ = tiles.setdefault(tile.tobytes(), (len(tiles), _hex_rows(tile)))
            out.append(number)
        return out

    return {"index": served.index, "budget": served.max_steps, "optimal": served.optimal_moves,
            "rows": _rows(level), "cell": int(atlas.tiles.shape[2]), "top": y, "left": x,
            "board": _hex_rows(board), "crate_tiles": tile_ids(CRATE),
            "player_tiles": tile_ids(PLAYER)}


def _three_channels(arc: Callable[[State | None], np.ndarray]
                    ) -> Callable[[Level, State | None], np.ndarray]:
    """A drawer for ``TileAtlas`` (which cuts RGB pictures): the ARC indices in each channel."""
    return lambda _level, state: np.repeat(arc(state)[:, :, None], 3, axis=2)


def _rows(level: Level) -> list[str]:
    """The board as the exported game reads it (``arc_game.Board``): walls, cells outside
    them, floor, goals, crates and the player."""
    crates, player = set(level.start.crates), level.start.player
    out = []
    for r in range(level.height):
        row = ""
        for c in range(level.width):
            cell = r * level.width + c
            if level.walls[r, c]:
                row += "#"
            elif not level.floor[r, c]:
                row += "_"
            elif cell == player:
                row += "+" if level.goals[r, c] else "@"
            elif cell in crates:
                row += "*" if level.goals[r, c] else "$"
            else:
                row += "." if level.goals[r, c] else " "
        out.append(row)
    return out


def _hex_rows(picture: np.ndarray) -> list[str]:
    return ["".join(HEX[v] for v in row) for row in picture.tolist()]
