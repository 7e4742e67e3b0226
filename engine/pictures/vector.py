"""Many boards stepped and drawn by one numba call: rules, budgets, solve detection, pictures.

A board's pictures are the look's own, cut into per-cell tiles by
``engine.pictures.frames.TileAtlas`` (which checks the look draws cell by cell) and kept as the few
distinct tiles they are. ``BoardSlots`` holds boards as typed arrays; ``step_boards`` plays one
action on each of N episodes with the episode core's ``act_kernel`` and repaints only the cells that
changed (a noisy look redraws the frame and adds that step's noise); ``play_board`` plays one
episode frame by frame through the same ``advance`` for the trajectory writer. Both end an episode
as the core does (``engine.episode.ending``).
"""

from __future__ import annotations

__all__ = [
    "CRATE", "EMPTY", "FRAME_BYTES", "PLAYER", "BoardSlots", "BoardTiles", "Boards", "Episodes",
    "Frames", "LookNotCellLocal", "Outcomes", "advance", "begin", "begin_boards", "board_tiles",
    "compose", "flat_banks", "frames_of", "new_episodes", "new_outcomes", "paint", "pick_level",
    "play_board", "restart_boards", "step_boards",
]

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from engine.episode import act_kernel, ending, episode_over
from engine.errors import SokoforgeError
from engine.kernel_cache import njit
from engine.levels import Level, State
from engine.pictures.look import Look
from engine.pictures.pixel_noise import MAX_BREAKS, add_noise_kernel, noise_steps
from engine.pictures.render import SIZE
from engine.rules import GOAL, board_array
from engine.search.solver import all_on_goals

EMPTY, CRATE, PLAYER = 0, 1, 2  # a cell's contents, the order of TileAtlas.tiles
FRAME_BYTES = SIZE * SIZE * 3
NO_PLAYER = -1  # compose: draw no player (the goal picture)
GOAL_STEP = np.uint64(2**64 - 1)  # the goal picture's noise step (-1, as Painter.goal)
_BREAK_PAD = 1 << 20  # past every 16-bit uniform: pads a short breakpoint row


# Columns of ``Boards.geo``, one row of integers per slot.
(TILE, WIDTH, CELLS, TOP, LEFT, GRAIN, START, CRATES, MAX_STEPS, INDEX, NOISY, NOISE_LOW,
 MARGIN, BANK_ROW, TILE_BYTES) = range(15)
GEO = 15
ORIGIN = 3  # ids[s, cell, ORIGIN]: the cell's byte offset in a frame


class Boards(NamedTuple):
    """Boards by slot: rules (cell flags, start, budget) and pictures (tiles, margin, noise).

    Kernels unpack it once and pass single arrays on: a tuple passed to a numba function
    costs a reference count per member on every call.
    """

    board: np.ndarray  # (S, C) uint8 cell flags (engine.rules.board_array)
    geo: np.ndarray  # (S, GEO) int64: tile side, width, cells, top, left, copy grain (8, 2
    # or 1 bytes), start player, crates, budget, index (-1: fresh), noisy, noise low, margin
    start_crates: np.ndarray  # (S, K) int64, sorted; the first ``geo[s, CRATES]`` are used
    ids: np.ndarray  # (S, C, 4) int32: tile of (cell, content) in the slot's bank; ORIGIN
    bank: np.ndarray  # (S, B) uint8: distinct tiles, t rows of t * 3 bytes each
    bank16: np.ndarray  # (S, B / 2) uint16: the same bytes
    bank64: np.ndarray  # (S, B / 8) uint64: the same bytes
    noise_key: np.ndarray  # (S,) uint64
    breaks: np.ndarray  # (S, MAX_BREAKS) int32: engine.pictures.pixel_noise.NoiseSteps
    coarse: np.ndarray  # (S, 256) uint8


class Episodes(NamedTuple):
    """N episodes in play: each one's board slot, player, crates, steps and whether it ended."""

    slot: np.ndarray  # (N,) int64
    player: np.ndarray  # (N,) int64
    crates: np.ndarray  # (N, K) int64, sorted
    steps: np.ndarray  # (N,) int64
    over: np.ndarray  # (N,) bool: ended, starts its next episode on the next step
    episode: np.ndarray  # (N,) int64: episodes begun
    seed: np.ndarray  # (N,) uint64: draws the level of each episode (a version's slots)
    next_slot: np.ndarray  # (N,) int64: the slot the next episode plays (-1: to be given)


class Outcomes(NamedTuple):
    """What one step did to each episode: the arrays a vector env returns."""

    reward: np.ndarray  # (N,) float64
    terminated: np.ndarray  # (N,) bool
    truncated: np.ndarray  # (N,) bool
    noop: np.ndarray  # (N,) bool
    pushed: np.ndarray  # (N,) bool
    level: np.ndarray  # (N,) int64
    steps: np.ndarray  # (N,) int64
    max_steps: np.ndarray  # (N,) int64


class Frames(NamedTuple):
    """Flat 64x64x3 pictures, one after another, seen as bytes, 16-bit and 64-bit words."""

    f8: np.ndarray  # (R * FRAME_BYTES,) uint8
    f16: np.ndarray
    f64: np.ndarray


def frames_of(rows: np.ndarray) -> Frames:
    """The flat views of ``rows`` ((R, FRAME_BYTES) uint8, C-contiguous)."""
    flat = rows.reshape(-1)
    return Frames(flat, flat.view(np.uint16), flat.view(np.uint64))


def flat_banks(b: Boards) -> Boards:
    """``b`` with its tile banks flat (slot s's row starts at s * row length): the form the
    kernels take."""
    return b._replace(bank=b.bank.reshape(-1), bank16=b.bank16.reshape(-1),
                      bank64=b.bank64.reshape(-1))


@dataclass(frozen=True, eq=False)
class BoardTiles:
    """A board's pictures as its few distinct tiles: ``ids[cell, content]`` indexes ``bank``
    (tiles of ``tile`` rows of ``tile * 3`` bytes, walls and outside cells included), and
    ``margin`` is the colour around the board; noise comes from ``look``."""

    level: Level
    look: Look
    tile: int
    ids: np.ndarray  # (cells, 3) uint8
    bank: np.ndarray  # (tiles * tile * tile * 3,) uint8
    margin: np.ndarray  # (3,) uint8


class LookNotCellLocal(SokoforgeError, ValueError):
    """The look drew a picture that tiles cut from its own drawings do not reproduce."""


def board_tiles(level: Level, look: Look, tiles: np.ndarray, board: np.ndarray) -> BoardTiles:
    """A ``TileAtlas``'s ``tiles`` (floor cells) and ``board`` (the frame with every floor
    cell empty) as ``BoardTiles``; ``LookNotCellLocal`` if the colour around the board is not
    uniform."""
    h, w = level.height, level.width
    t = tiles.shape[2]
    top, left = (SIZE - h * t) // 2, (SIZE - w * t) // 2
    picture = board.reshape(SIZE, SIZE, 3)
    tiles = tiles.copy()
    for cell in np.flatnonzero(~level.floor.ravel()).tolist():
        r, c = divmod(cell, w)
        y, x = top + r * t, left + c * t
        tiles[cell, :] = picture[y:y + t, x:x + t].reshape(t, t * 3)
    bank, inverse = np.unique(tiles.reshape(h * w * 3, -1), axis=0, return_inverse=True)
    if len(bank) > 255:
        raise LookNotCellLocal(f"{len(bank)} distinct tiles; a board may have 255")
    outside = np.ones((SIZE, SIZE), bool)
    outside[top:top + h * t, left:left + w * t] = False
    around = picture[outside]
    margin = around[0].copy() if len(around) else np.zeros(3, np.uint8)
    if len(around) and not (around == margin).all():
        raise LookNotCellLocal("the look's picture around the board is not one colour")
    return BoardTiles(level, look, t, inverse.reshape(h * w, 3).astype(np.uint8),
                      bank.reshape(-1), margin)


class BoardSlots:
    """Boards the kernels play, by slot, growing as larger boards arrive."""

    def __init__(self, slots: int, cells: int = 64, crates: int = 4, bank: int = 2048) -> None:
        tiles = np.zeros((slots, -(-bank // 8) * 8), np.uint8)
        geo = np.zeros((slots, GEO), np.int64)
        geo[:, INDEX] = -1
        geo[:, BANK_ROW] = tiles.shape[1]
        self.arrays = Boards(
            np.zeros((slots, cells), np.uint8), geo, np.zeros((slots, crates), np.int64),
            np.zeros((slots, cells, 4), np.int32), tiles, tiles.view(np.uint16),
            tiles.view(np.uint64), np.zeros(slots, np.uint64),
            np.full((slots, MAX_BREAKS), _BREAK_PAD, np.int32), np.zeros((slots, 256), np.uint8))

    @property
    def slots(self) -> int:
        return len(self.arrays.geo)

    @property
    def flat(self) -> Boards:
        """The arrays as the kernels take them (``flat_banks``)."""
        return flat_banks(self.arrays)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays if a.base is None)

    def put(self, slot: int, tiles: BoardTiles, max_steps: int, index: int | None = None,
            start: State | None = None) -> None:
        """Put the board of ``tiles`` in ``slot``, started from ``start`` (default its level's
        start), with its step budget and its index in its version."""
        level = tiles.level
        first = level.start if start is None else start
        ids, bank, t = tiles.ids, tiles.bank, tiles.tile
        cells = level.height * level.width
        self._fit(cells, len(first.crates), bank.size)
        a = self.arrays
        a.board[slot, :cells] = board_array(level)
        a.board[slot, cells:] = 0
        left = (SIZE - level.width * t) // 2
        geo = a.geo[slot]
        geo[:] = 0
        geo[BANK_ROW] = a.bank.shape[1]
        geo[TILE], geo[WIDTH], geo[CELLS] = t, level.width, cells
        geo[TOP], geo[LEFT] = (SIZE - level.height * t) // 2, left
        geo[GRAIN] = next(g for g in (8, 2, 1) if 3 * t % g == 0 and 3 * left % g == 0)
        geo[START], geo[CRATES], geo[MAX_STEPS] = first.player, len(first.crates), max_steps
        geo[INDEX] = -1 if index is None else index
        geo[TILE_BYTES] = t * t * 3
        r, g, b = (int(v) for v in tiles.margin)
        geo[MARGIN] = r | g << 8 | b << 16
        a.start_crates[slot, :len(first.crates)] = first.crates
        a.ids[slot, :cells, :3] = ids
        rows, cols = np.divmod(np.arange(cells), level.width)
        a.ids[slot, :cells, ORIGIN] = ((geo[TOP] + rows * t) * SIZE + left + cols * t) * 3
        a.bank[slot, :bank.size] = bank
        a.breaks[slot] = _BREAK_PAD
        look = tiles.look
        if look.noisy and look.noise_key is not None:
            steps = noise_steps(look.colours_theme.noise_std)
            geo[NOISY], geo[NOISE_LOW] = 1, steps.low
            a.noise_key[slot] = np.uint64(look.noise_key & (2**64 - 1))
            a.breaks[slot, :steps.breaks.size] = steps.breaks
            a.coarse[slot] = steps.coarse

    def _fit(self, cells: int, crates: int, bank: int) -> None:
        """Widen the per-slot rows so a board of this many cells, crates and tile bytes fits."""
        a = self.arrays
        grown = []
        for array, need in ((a.board, cells), (a.start_crates, crates), (a.ids, cells),
                            (a.bank, bank)):
            if array.shape[1] >= need:
                grown.append(array)
                continue
            need = -(-need // 8) * 8  # a bank row stays whole uint64 words
            wider = np.zeros((array.shape[0], need, *array.shape[2:]), array.dtype)
            wider[:, :array.shape[1]] = array
            grown.append(wider)
        self.arrays = a._replace(board=grown[0], start_crates=grown[1], ids=grown[2],
                                 bank=grown[3], bank16=grown[3].view(np.uint16),
                                 bank64=grown[3].view(np.uint64))
        self.arrays.geo[:, BANK_ROW] = grown[3].shape[1]


def new_episodes(n: int, crates: int) -> Episodes:
    """Room for ``n`` episodes of up to ``crates`` crates, every one waiting to start."""
    return Episodes(np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros((n, crates), np.int64),
                    np.zeros(n, np.int64), np.ones(n, np.bool_), np.zeros(n, np.int64),
                    np.zeros(n, np.uint64), np.full(n, -1, np.int64))


def new_outcomes(n: int) -> Outcomes:
    return Outcomes(np.zeros(n, np.float64), np.zeros(n, np.bool_), np.zeros(n, np.bool_),
                    np.zeros(n, np.bool_), np.zeros(n, np.bool_), np.zeros(n, np.int64),
                    np.zeros(n, np.int64), np.zeros(n, np.int64))


# No reference counting (numba's _nrt=False): paint takes nine arrays and copies a few dozen
# words; counting references to them would cost more than the copy.
@njit(cache=True, _nrt=False)  # type: ignore[call-overload]
def paint(f8: np.ndarray, f16: np.ndarray, f64: np.ndarray, k: int, geo: np.ndarray,
          ids: np.ndarray, bank: np.ndarray, bank16: np.ndarray, bank64: np.ndarray, s: int,
          cell: int, content: int) -> None:
    """Copy slot ``s``'s tile of ``cell`` holding ``content`` into frame ``k`` of the flat
    frames, in words as wide as the slot's grain allows (all arrays flat: no views made;
    shifts, not divisions: this is the hot loop)."""
    t = geo[s, TILE]
    o = k * FRAME_BYTES + ids[s, cell, ORIGIN]
    q = s * geo[s, BANK_ROW] + np.int64(ids[s, cell, content]) * geo[s, TILE_BYTES]
    g = geo[s, GRAIN]
    if g == 8:
        o >>= 3
        q >>= 3
        words = (t * 3) >> 3
        if words == 3:  # 8-pixel tiles (8x8 boards), unrolled
            for _ in range(t):
                f64[o] = bank64[q]
                f64[o + 1] = bank64[q + 1]
                f64[o + 2] = bank64[q + 2]
                o += 24
                q += 3
        else:
            for _ in range(t):
                for i in range(words):
                    f64[o + i] = bank64[q + i]
                o += 24
                q += words
    elif g == 2:
        o >>= 1
        q >>= 1
        words = (t * 3) >> 1
        for _ in range(t):
            for i in range(words):
                f16[o + i] = bank16[q + i]
            o += 96
            q += words
    else:
        row = t * 3
        for _ in range(t):
            for i in range(row):
                f8[o + i] = bank[q + i]
            o += 192
            q += row


@njit(cache=True)
def compose(f8: np.ndarray, f16: np.ndarray, f64: np.ndarray, k: int, geo: np.ndarray,
            ids: np.ndarray, bank: np.ndarray, bank16: np.ndarray, bank64: np.ndarray,
            key: np.ndarray, breaks: np.ndarray, coarse: np.ndarray, s: int, player: int,
            crates: np.ndarray, step: np.uint64) -> None:
    """Draw the whole picture of (player, crates) on slot ``s`` into frame row ``k`` (no
    player when ``NO_PLAYER``), with a noisy look's noise of ``step``."""
    frame = f8[k * FRAME_BYTES:(k + 1) * FRAME_BYTES]
    t, w = geo[s, TILE], geo[s, WIDTH]
    top, left = geo[s, TOP], geo[s, LEFT]
    bottom, right = top + geo[s, CELLS] // w * t, left + w * t
    margin = geo[s, MARGIN]
    m0, m1, m2 = margin & 255, (margin >> 8) & 255, margin >> 16
    for y in range(SIZE):
        inside = top <= y < bottom
        for x0, x1 in ((0, left if inside else SIZE), (right if inside else SIZE, SIZE)):
            for i in range((y * SIZE + x0) * 3, (y * SIZE + x1) * 3, 3):
                frame[i] = m0
                frame[i + 1] = m1
                frame[i + 2] = m2
    content = np.zeros(geo[s, CELLS], np.uint8)
    for i in range(crates.size):
        content[crates[i]] = CRATE
    if player != NO_PLAYER:
        content[player] = PLAYER
    for cell in range(content.size):
        paint(f8, f16, f64, k, geo, ids, bank, bank16, bank64, s, cell, content[cell])
    if geo[s, NOISY]:
        add_noise_kernel(frame, key[s], step, geo[s, NOISE_LOW], breaks[s], coarse[s])


@njit(cache=True)
def advance(f8: np.ndarray, f16: np.ndarray, f64: np.ndarray, k: int, board: np.ndarray,
            geo: np.ndarray, ids: np.ndarray, bank: np.ndarray, bank16: np.ndarray,
            bank64: np.ndarray, key: np.ndarray, breaks: np.ndarray, coarse: np.ndarray,
            s: int, player: int, crates: np.ndarray, action: int, step: int
            ) -> tuple[int, int, bool]:
    """Apply ``action`` (0-3, or ``WAIT``) on slot ``s`` (``crates`` updated in place) and
    bring frame row ``k``, the picture before it, to the picture at ``step``: the changed cells
    repainted, or, in a noisy look, the frame redrawn with that step's noise. Returns (player,
    the pushed crate's slot or -1, solved)."""
    cells = board[s, :geo[s, CELLS]]
    after, pushed = act_kernel(cells, geo[s, WIDTH], player, crates, action)
    if geo[s, NOISY]:
        compose(f8, f16, f64, k, geo, ids, bank, bank16, bank64, key, breaks, coarse, s,
                after, crates, np.uint64(step))
    elif after != player:
        paint(f8, f16, f64, k, geo, ids, bank, bank16, bank64, s, player, EMPTY)
        paint(f8, f16, f64, k, geo, ids, bank, bank16, bank64, s, after, PLAYER)
        if pushed >= 0:
            paint(f8, f16, f64, k, geo, ids, bank, bank16, bank64, s, 2 * after - player,
                  CRATE)
    return after, pushed, all_on_goals(cells, crates)


@njit(cache=True)
def pick_level(seed: np.uint64, episode: int, levels: int) -> int:
    """The level of an episode among ``levels``: a SplitMix64 hash of (seed, episode)."""
    z = seed + np.uint64(episode + 1) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.int64(z % np.uint64(levels))  # type: ignore[return-value]


@njit(cache=True)
def begin(k: int, b: Boards, e: Episodes, levels: int, obs: Frames, goal: Frames) -> None:
    """Start episode k's next episode: on slot ``pick_level(...)`` when ``levels`` > 0 (a
    version's levels, one per slot), else on ``e.next_slot[k]``, which is then taken (-1)."""
    board, geo, start_crates, ids, bank, bank16, bank64, key, breaks, coarse = b
    if levels > 0:
        s = pick_level(e.seed[k], e.episode[k], levels)
    else:
        s = e.next_slot[k]
        e.next_slot[k] = -1
    n = geo[s, CRATES]
    e.slot[k] = s
    e.player[k] = geo[s, START]
    for i in range(n):
        e.crates[k, i] = start_crates[s, i]
    e.steps[k] = 0
    e.over[k] = False
    e.episode[k] += 1
    compose(obs.f8, obs.f16, obs.f64, k, geo, ids, bank, bank16, bank64, key, breaks, coarse,
            s, e.player[k], e.crates[k, :n], np.uint64(0))
    cells = board[s, :geo[s, CELLS]]
    on_goals = np.empty(cells.size, np.int64)
    j = 0
    for cell in range(cells.size):
        if cells[cell] & GOAL:
            on_goals[j] = cell
            j += 1
    compose(goal.f8, goal.f16, goal.f64, k, geo, ids, bank, bank16, bank64, key, breaks,
            coarse, s, NO_PLAYER, on_goals[:j], GOAL_STEP)


@njit(cache=True)
def _report(k: int, geo: np.ndarray, e: Episodes, out: Outcomes, reward: float,
            terminated: bool, truncated: bool, noop: bool, pushed: bool) -> None:
    s = e.slot[k]
    out.reward[k] = reward
    out.terminated[k] = terminated
    out.truncated[k] = truncated
    out.noop[k] = noop
    out.pushed[k] = pushed
    out.level[k] = geo[s, INDEX]
    out.steps[k] = e.steps[k]
    out.max_steps[k] = geo[s, MAX_STEPS]


@njit(cache=True)
def begin_boards(starting: np.ndarray, b: Boards, e: Episodes, levels: int, obs: Frames,
                 goal: Frames, out: Outcomes) -> None:
    """Start the next episode of every k with ``starting[k]`` (a reset)."""
    for k in range(starting.size):
        if starting[k]:
            begin(k, b, e, levels, obs, goal)
        _report(k, b.geo, e, out, 0.0, False, False, False, False)


@njit(cache=True)
def step_boards(actions: np.ndarray, b: Boards, e: Episodes, levels: int, obs: Frames,
                goal: Frames, out: Outcomes) -> None:
    """One step of every episode k: ``actions[k]`` (0-3 or ``WAIT``) played, its frame
    ``obs[k]`` brought up to date, reward 1 on solving, terminated and truncated as the episode
    core ends an episode (``engine.episode.ending``). An episode that ended on the previous
    step starts its next one instead (Gymnasium's next-step autoreset): the action is ignored
    and the new start is reported."""
    board, geo, start_crates, ids, bank, bank16, bank64, key, breaks, coarse = b
    slot, player_at, crates, steps, over = e.slot, e.player, e.crates, e.steps, e.over
    f8, f16, f64 = obs
    reward, terminated, truncated, noop, pushed_out, level, steps_out, budget = out
    for k in range(actions.size):
        if over[k]:
            begin(k, b, e, levels, obs, goal)
            _report(k, geo, e, out, 0.0, False, False, False, False)
            continue
        s = slot[k]
        before = player_at[k]
        steps[k] += 1
        player, pushed, solved = advance(f8, f16, f64, k, board, geo, ids, bank, bank16,
                                         bank64, key, breaks, coarse, s, before,
                                         crates[k, :geo[s, CRATES]], actions[k], steps[k])
        player_at[k] = player
        ended, cut = ending(solved, steps[k], geo[s, MAX_STEPS])
        over[k] = ended or cut
        reward[k] = 1.0 if solved else 0.0
        terminated[k] = ended
        truncated[k] = cut
        noop[k] = player == before
        pushed_out[k] = pushed >= 0
        level[k] = geo[s, INDEX]
        steps_out[k] = steps[k]
        budget[k] = geo[s, MAX_STEPS]


@njit(cache=True)
def restart_boards(starting: np.ndarray, b: Boards, e: Episodes, levels: int, obs: Frames,
                   goal: Frames, out: Outcomes) -> None:
    """Start the next episode of every k with ``starting[k]`` in the step that ended its last
    one (Gymnasium's same-step autoreset): its pictures and info become the new start's, its
    reward, terminated and truncated stay those of the step."""
    for k in range(starting.size):
        if starting[k]:
            begin(k, b, e, levels, obs, goal)
            s = e.slot[k]
            out.noop[k] = False
            out.pushed[k] = False
            out.level[k] = b.geo[s, INDEX]
            out.steps[k] = 0
            out.max_steps[k] = b.geo[s, MAX_STEPS]


@njit(cache=True)
def play_board(b: Boards, s: int, player: int, crates: np.ndarray, actions: np.ndarray,
               max_steps: int, frames: Frames, taken: np.ndarray, pushed: np.ndarray,
               invalid: np.ndarray) -> tuple[int, bool, int]:
    """Play ``actions`` on slot ``s`` from (player, crates) until they run out or the episode
    of ``max_steps`` is over (``engine.episode.episode_over``); ``crates`` (sorted) ends as
    the last state. Fills ``frames`` rows 0..n (n actions taken) and, per
    frame, the action taken from it (-1 on the last), whether it pushed, whether it was a
    no-op. Returns (n, solved, the last player cell)."""
    board, geo, start_crates, ids, bank, bank16, bank64, key, breaks, coarse = b
    f8, f16, f64 = frames
    compose(f8, f16, f64, 0, geo, ids, bank, bank16, bank64, key, breaks, coarse, s, player,
            crates, np.uint64(0))
    n = 0
    solved = all_on_goals(board[s, :geo[s, CELLS]], crates)
    while n < actions.size and not episode_over(solved, n, max_steps):
        words = FRAME_BYTES // 8
        f64[(n + 1) * words:(n + 2) * words] = f64[n * words:(n + 1) * words]
        before = player
        player, slot, solved = advance(f8, f16, f64, n + 1, board, geo, ids, bank, bank16,
                                       bank64, key, breaks, coarse, s, player, crates,
                                       actions[n], n + 1)
        taken[n] = actions[n]
        pushed[n] = slot >= 0
        invalid[n] = player == before
        n += 1
    taken[n] = -1
    pushed[n] = False
    invalid[n] = False
    return n, solved, player
