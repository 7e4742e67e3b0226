"""The ARC-AGI-3 wire shapes of sokoforge's games: game objects, FrameData, scorecards, errors.

Pure functions from the served levels and episode outcomes to the JSON the ``arc-agi`` toolkit
validates (``arcengine.FrameData``, ``arc_agi.EnvironmentScorecard``), kept apart from HTTP.
"""

from __future__ import annotations

__all__ = [
    "AUTHENTICATION_ERROR", "AVAILABLE_ACTIONS", "ArcError", "BASE_ID", "GAME_NOT_AVAILABLE_ERROR",
    "GAME_NOT_STARTED_ERROR", "MAX_LEVELS", "MAX_REASONING_BYTES", "MOVES", "NOT_FOUND_ERROR",
    "RATE_LIMIT_ERROR", "RESTART_NOTES", "SERVER_ERROR", "STEP_AHEAD_ERROR", "VALIDATION_ERROR",
    "arc_state", "frame_data", "game_id", "game_info", "games_named", "grid", "grid_json",
    "level_score", "run", "scorecard",
]

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from engine.errors import SokoforgeError
from engine.levels import State
from engine.pictures.look import Painter

BASE_ID = "sokoban"
MAX_LEVELS = 254  # FrameData bounds levels_completed and win_levels to 0-254
MAX_REASONING_BYTES = 16 * 1024
# ACTION1-4 are the four moves (engine actions 0 up, 1 down, 2 left, 3 right);
# ACTION5-7 are answered as no-op steps.
MOVES = {1: 0, 2: 1, 3: 2, 4: 3}
AVAILABLE_ACTIONS = (1, 2, 3, 4)
NOT_PLAYED, NOT_FINISHED, WIN, GAME_OVER = "NOT_PLAYED", "NOT_FINISHED", "WIN", "GAME_OVER"

VALIDATION_ERROR = "VALIDATION_ERROR"
AUTHENTICATION_ERROR = "AUTHENTICATION_ERROR"
NOT_FOUND_ERROR = "NOT_FOUND_ERROR"
GAME_NOT_AVAILABLE_ERROR = "GAME_NOT_AVAILABLE_ERROR"
GAME_NOT_STARTED_ERROR = "GAME_NOT_STARTED_ERROR"
RATE_LIMIT_ERROR = "RATE_LIMIT_ERROR"
SERVER_ERROR = "SERVER_ERROR"
ROUND_CLOSED_ERROR = "ROUND_CLOSED"  # 409: the round of the version is over (PROTOCOL.md)
STEP_AHEAD_ERROR = "STEP_AHEAD"  # 409: a numbered step past the game's next one

# The toolkit treats any non-2xx as fatal and the API answers only 400, 401, 404 (and 429 for
# limits), so the native 409 and 422 both become 400; a body too slow (408), too large (413)
# or in a coding not taken (415) keeps its HTTP status, as any HTTP client expects.
_STATUS = {400: 400, 401: 401, 404: 404, 408: 408, 409: 400, 413: 413, 415: 415, 422: 400,
           429: 429}
_CODE = {400: VALIDATION_ERROR, 401: AUTHENTICATION_ERROR, 404: NOT_FOUND_ERROR,
         408: VALIDATION_ERROR, 413: VALIDATION_ERROR, 415: VALIDATION_ERROR,
         429: RATE_LIMIT_ERROR}


class ArcError(SokoforgeError):
    """A refusal in the API's shape: HTTP status, error code and a message saying what to do."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    @classmethod
    def from_status(cls, status: int, message: str, not_found: str = NOT_FOUND_ERROR) -> ArcError:
        """The ARC refusal for a native status (``not_found`` names what a 404 is about)."""
        arc_status = _STATUS.get(status, status if status >= 500 else 400)
        code = not_found if arc_status == 404 else _CODE.get(arc_status, SERVER_ERROR)
        return cls(arc_status, code, message)

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message}


def game_id(version: str) -> str:
    """The ARC game id of a served version, one word: the toolkit splits an id at its first
    ``-`` and asks for the part before it, so that part alone must name the version."""
    return f"{BASE_ID}_{version.replace('-', '_')}"


def games_named(requested: str, versions: Iterable[str]) -> list[str]:
    """The served versions ``requested`` names: by game id; else by the older
    ``sokoban-<version>`` form, exactly; else the base id names every one. More than one is
    ambiguous, none unknown: neither may be played as some other game."""
    versions = list(versions)
    named = [v for v in versions if requested == game_id(v)]
    if not named:
        named = [v for v in versions if requested == f"{BASE_ID}-{v}"]
    if not named and requested == BASE_ID:
        named = versions
    return named


RESTART_NOTES = {"none": "RESET never restarts (no free retries)",
                 "level": "RESET restarts the current level, keeping the actions used",
                 "game": "RESET restarts the current level, or after no action the whole game"}


def game_info(version: str, game: str, optimal_moves: Sequence[int],
              restarts: str = "none") -> dict[str, Any]:
    """The game object of ``GET /api/games`` and ``GET /api/games/{id}``; its title and a
    ``restarts-MODE`` tag say what RESET may do in it."""
    return {"game_id": game_id(version),
            "title": f"Sokoban {game} ({version}); {RESTART_NOTES[restarts]}",
            "tags": [BASE_ID, game, f"restarts-{restarts}"],
            "baseline_actions": [int(m) for m in optimal_moves],
            "class_name": "Sokoban", "default_fps": 5}


def arc_state(in_progress: bool, solved: int, episodes: int) -> str:
    """NOT_FINISHED while episodes remain; then WIN if every one was solved, else GAME_OVER."""
    if in_progress:
        return NOT_FINISHED
    return WIN if solved == episodes else GAME_OVER


def _grid_tokens() -> np.ndarray:
    # each cell as ',' and its one or two digits, padded with 0 bytes to three
    tokens = np.zeros((16, 3), dtype=np.uint8)
    for v in range(16):
        text = f",{v}".encode()
        tokens[v, :len(text)] = list(text)
    tokens.flags.writeable = False
    return tokens


_TOKENS = _grid_tokens()


def grid_json(indices: np.ndarray) -> bytes:
    """A grid of values 0-15 as compact JSON (rows first), the bytes ``json.dumps`` would give.

    Built with array operations: a frame is 4096 numbers and this runs per action.
    """
    h, wd = indices.shape
    rows = np.zeros((h, 3 * wd + 3), dtype=np.uint8)
    rows[:, 0] = ord("[")
    rows[:, 1:-2] = _TOKENS.take(indices, axis=0).reshape(h, 3 * wd)
    rows[:, 1] = 0  # no comma before a row's first number
    rows[:, -2] = ord("]")
    rows[:-1, -1] = ord(",")
    flat = rows.reshape(-1)
    return b"[" + flat[flat != 0].tobytes() + b"]"


def grid(painter: Painter, state: State | None) -> bytes:
    """One 64x64 frame of palette indices 0-15 as JSON, rows first: the ARC face of the board
    the level's look draws (``engine.pictures.look``)."""
    return grid_json(painter.arc(state))


def frame_data(*, game: str, guid: str, grids: list[bytes], state: str,
               levels_completed: int, win_levels: int, action: int, data: dict[str, Any],
               reasoning: Any, full_reset: bool) -> bytes:
    """The JSON body of the FrameData answer to a RESET or ACTIONn command (``grids`` from
    ``grid``)."""
    head = json.dumps({
        "game_id": game, "guid": guid, "state": state,
        "levels_completed": min(levels_completed, MAX_LEVELS),
        "win_levels": min(win_levels, MAX_LEVELS),
        "action_input": {"id": action, "data": data, "reasoning": reasoning},
        "available_actions": list(AVAILABLE_ACTIONS), "full_reset": full_reset},
        separators=(",", ":")).encode()
    return head[:-1] + b',"frame":[' + b",".join(grids) + b"]}"


def level_score(optimal: int, steps: int) -> float:
    """The API's per-level score: (baseline / actions)^2 * 100, capped at 115."""
    return min(115.0, (optimal / steps) ** 2 * 100.0) if steps > 0 else 0.0


def run(game: str, guid: str | None, state: str, episodes: Sequence[dict[str, Any]]
        ) -> dict[str, Any]:
    """One run of the game: ``episodes`` are ``{solved, steps, optimal}`` in play order.

    The score weights level i (1-based) by i, as the API does, so later (harder) levels count
    more; an unsolved level scores 0.
    """
    # a version no longer served has no optimum at hand: its levels count a baseline of 0
    scores = [level_score(e["optimal"] or 0, e["steps"]) if e["solved"] else 0.0
              for e in episodes]
    weights = range(1, len(scores) + 1)
    total = sum(weights)
    score = sum(w * s for w, s in zip(weights, scores, strict=True)) / total if total else 0.0
    return {"id": game, "guid": guid, "score": round(score, 4),
            "levels_completed": sum(bool(e["solved"]) for e in episodes),
            "actions": sum(int(e["steps"]) for e in episodes), "resets": 0, "state": state,
            "completed": state == WIN, "level_scores": [round(s, 4) for s in scores],
            "level_actions": [int(e["steps"]) for e in episodes],
            "level_baseline_actions": [int(e["optimal"] or 0) for e in episodes]}


def scorecard(card_id: str, runs: list[dict[str, Any]], *, name: str, version: str, closed: bool,
              result: dict[str, Any] | None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scorecard object: one environment per played game, each with its run.

    ``result`` is the leaderboard Score of the native protocol once closed (its success
    interval also at the top, null while open); the ARC fields
    beside it are what the toolkit reads; ``meta`` the tags, source_url and opaque it was
    opened with.
    """
    environments = [{"id": r["id"], "runs": [r]} for r in runs]
    score = sum(r["score"] for r in runs) / len(runs) if runs else 0.0
    meta = meta or {}
    return {"card_id": card_id, "score": round(score, 4), "environments": environments,
            "tags_scores": [], "name": name, "version": version, "closed": closed,
            "result": result, "success_interval": (result or {}).get("success_interval"),
            "tags": meta.get("tags") or [],
            "source_url": meta.get("source_url"), "opaque": meta.get("opaque")}
