"""Reference planner: a budgeted real-time search agent that plays one episode.

At every step it runs a best-first lookahead of at most ``budget`` dynamics calls from the
current state (learning real-time A*: f = moves so far + a learned heuristic that starts at
twice the summed push distance of the crates to their nearest goals), pruning dead squares
and 2x2 freezes, takes the first action toward the best state found and replans. Grading and
audit measure how hard a level is for such an agent; nothing here is used to play for real.

The budget is in the benchmark rule's currency, dynamics calls per step: every expansion asks
the dynamics (``_successor``) for the successor of each of the four actions, so it costs
``CALLS_PER_EXPANSION`` calls, and a step's lookahead stops before an expansion that would
exceed the budget. The move actually taken is the environment's step, not a counted call.
"""

from __future__ import annotations

__all__ = [
    "CALLS_PER_EXPANSION", "HEURISTIC_WEIGHT", "MAX_PLANNER_BUDGET", "PLANNER_BUDGET", "PlanResult",
    "action_offsets", "board_arrays", "lookahead_arrays", "node_of", "plan", "plan_kernel",
    "pop_open", "power_of_two", "push_distance", "push_lower_bound", "start_lookahead",
    "state_key", "state_table",
]

import itertools
from typing import NamedTuple

import numpy as np

from engine.kernel_cache import njit
from engine.levels import Level, State
from engine.search.deadlock import FAR, push_distance

CALLS_PER_EXPANSION = 4  # one dynamics call per action, four actions
# The reference planner of audit, equivalence and calibration plays at the benchmark rule's
# budget: 256 dynamics calls (64 expansions) per step, where ``difficulty`` is stated.
PLANNER_BUDGET = 256
# A lookahead's nodes (<= 4 per expansion) fit 20 bits.
MAX_PLANNER_BUDGET = CALLS_PER_EXPANSION * ((1 << 18) - 1)
HEURISTIC_WEIGHT = 2
_FAR = FAR  # a dead square's push distance (engine.search.deadlock)
_EMPTY = -1
# The 24 orders in which an expansion may try the four actions; row 0 is U D L R.
_ORDERS = np.array(sorted(itertools.permutations(range(4))), dtype=np.int64)


class PlanResult(NamedTuple):
    """Outcome of one planner episode: solved or not, the steps it took, and the dynamics
    calls each step's lookahead made (never above the budget)."""

    solved: bool
    steps: int
    actions: tuple[int, ...]
    calls: tuple[int, ...] = ()


@njit(cache=True, inline="always")
def _slot(key: int, mask: int) -> int:
    h = key * -7046029254386353131
    return (h ^ (h >> 29)) & mask


@njit(cache=True)
def _find(keys: np.ndarray, key: int) -> int:
    mask = keys.size - 1
    s = _slot(key, mask)
    while keys[s] != _EMPTY and keys[s] != key:
        s = (s + 1) & mask
    return s


@njit(cache=True)
def _crate_at(key: int, n_crates: int, cell: int) -> bool:
    for i in range(n_crates):
        if (key >> (8 * (i + 1))) & 255 == cell:
            return True
    return False


@njit(cache=True)
def _successor(key: int, action: int, passable: np.ndarray, offs: np.ndarray,
               n_crates: int) -> tuple[int, int]:
    """Key after ``action`` and the cell a crate was pushed to (-1: no push); key unchanged on
    a blocked move. The rules' ``step_kernel`` on packed keys (tests/test_steppers.py)."""
    player = key & 255
    t = player + offs[action]
    if not passable[t]:
        return key, -1
    if not _crate_at(key, n_crates, t):
        return (key & ~255) | t, -1
    b = t + offs[action]
    if not passable[b] or _crate_at(key, n_crates, b):
        return key, -1
    cells = np.empty(n_crates, np.int64)
    for i in range(n_crates):
        c = (key >> (8 * (i + 1))) & 255
        cells[i] = b if c == t else c
    cells.sort()
    out = t
    for i in range(n_crates):
        out |= cells[i] << (8 * (i + 1))
    return out, b


@njit(cache=True)
def _frozen_square(key: int, cell: int, passable: np.ndarray, goal: np.ndarray, width: int,
                   n_crates: int) -> bool:
    """True when ``cell`` sits in a 2x2 block of walls and crates holding a crate off goal:
    ``engine.search.deadlock.frozen_square`` on packed keys (tests/test_steppers.py)."""
    for dr in (-width, 0):
        for dc in (-1, 0):
            top = cell + dr + dc
            block = (top, top + 1, top + width, top + width + 1)
            full = True
            off_goal = False
            for c in block:
                if passable[c]:
                    if not _crate_at(key, n_crates, c):
                        full = False
                        break
                    if not goal[c]:
                        off_goal = True
            if full and off_goal:
                return True
    return False


@njit(cache=True)
def _estimate(key: int, gdist: np.ndarray, n_crates: int) -> int:
    total = 0
    for i in range(n_crates):
        total += gdist[(key >> (8 * (i + 1))) & 255]
    return total


@njit(cache=True)
def _learned(lh_keys: np.ndarray, lh_vals: np.ndarray, key: int, base: int) -> int:
    s = _find(lh_keys, key)
    if lh_keys[s] == key and lh_vals[s] > base:
        return lh_vals[s]
    return base


@njit(cache=True)
def _heap_push(heap: np.ndarray, size: int, item: int) -> int:
    i = size
    heap[i] = item
    while i > 0:
        p = (i - 1) >> 1
        if heap[p] <= heap[i]:
            break
        heap[p], heap[i] = heap[i], heap[p]
        i = p
    return size + 1


@njit(cache=True)
def _heap_pop(heap: np.ndarray, size: int) -> tuple[int, int]:
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        m = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            m = left + 1
        if heap[i] <= heap[m]:
            break
        heap[i], heap[m] = heap[m], heap[i]
        i = m
    return top, size


@njit(cache=True)
def power_of_two(n: int) -> int:
    """The smallest power of two at least ``n`` (hash tables are sized so)."""
    size = 1
    while size < n:
        size *= 2
    return size


@njit(cache=True)
def action_offsets(width: int) -> np.ndarray:
    """How far each action (U D L R, the rules' order) moves on a board ``width`` cells wide."""
    return np.array([-width, width, -1, 1], np.int64)


@njit(cache=True)
def state_table(max_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """An empty key -> value hash table (keys, values) with room for every state an episode
    of ``max_steps`` steps stands on: the learned heuristic's, or the visit counts'."""
    keys = np.full(power_of_two(4 * max_steps + 16), _EMPTY, np.int64)
    return keys, np.zeros(keys.size, np.int64)


@njit(cache=True)
def lookahead_arrays(budget: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                           np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Scratch space of one lookahead of ``budget`` expansions: the key -> node hash table
    (keys, nodes), each node's key, g, h, first action and closed flag, and the heap."""
    cap_nodes = 4 * budget + 8  # the root plus four children per expansion
    size = power_of_two(4 * cap_nodes)
    return (np.empty(size, np.int64), np.empty(size, np.int64), np.empty(cap_nodes, np.int64),
            np.empty(cap_nodes, np.int64), np.empty(cap_nodes, np.int64),
            np.empty(cap_nodes, np.int64), np.empty(cap_nodes, np.bool_),
            np.empty(cap_nodes * 4, np.int64))


@njit(cache=True)
def start_lookahead(t_keys: np.ndarray, t_node: np.ndarray, n_key: np.ndarray, n_g: np.ndarray,
                    n_h: np.ndarray, n_first: np.ndarray, n_closed: np.ndarray,
                    heap: np.ndarray, root: int, h_root: int) -> int:
    """Empty the lookahead's table and make ``root`` its node 0 on the heap; the heap's size."""
    t_keys[:] = _EMPTY
    n_key[0] = root
    n_g[0] = 0
    n_h[0] = h_root
    n_first[0] = -1
    n_closed[0] = False
    s = _find(t_keys, root)
    t_keys[s] = root
    t_node[s] = 0
    return _heap_push(heap, 0, (h_root << 40) | (h_root << 20))


@njit(cache=True, inline="always")
def node_of(t_keys: np.ndarray, t_node: np.ndarray, n_key: np.ndarray, n_closed: np.ndarray,
            n_nodes: int, key: int) -> int:
    """The lookahead node of ``key``; a key not seen yet becomes node ``n_nodes`` (open, its
    g and h for the caller to set)."""
    s = _find(t_keys, key)
    if t_keys[s] == key:
        return t_node[s]
    t_keys[s] = key
    t_node[s] = n_nodes
    n_key[n_nodes] = key
    n_closed[n_nodes] = False
    return n_nodes


@njit(cache=True, inline="always")
def pop_open(heap: np.ndarray, size: int, n_closed: np.ndarray) -> tuple[int, int]:
    """Pop the lookahead's best open node off the heap and close it; (node, the heap's size),
    node -1 when only closed nodes were left."""
    while size > 0:
        item, size = _heap_pop(heap, size)
        i = item & ((1 << 20) - 1)
        if not n_closed[i]:
            n_closed[i] = True
            return i, size
    return -1, size


@njit(cache=True, inline="always")
def _action_order(key: int, seed: int) -> int:
    """Which of the 24 orders of the four actions an expansion of ``key`` tries (0: U D L R).

    Seed 0 keeps the fixed order; another seed reorders by a hash of (seed, key), which
    changes how equally good states are tie-broken and nothing else.
    """
    if seed == 0:
        return 0
    h = (key ^ (seed * -4658895280553007687)) * -7046029254386353131
    return ((h ^ (h >> 31)) & 0x7FFFFFFF) % 24


@njit(cache=True)
def plan_kernel(passable: np.ndarray, goal: np.ndarray, width: int, start_key: int,
                n_crates: int, max_steps: int, budget: int, weight: int,
                seed: int = 0) -> tuple[bool, int, np.ndarray, np.ndarray]:
    """Play one episode within ``budget`` dynamics calls per step; return (solved, steps,
    actions taken, calls made per step). ``seed`` breaks ties."""
    offs = action_offsets(width)
    orders = _ORDERS
    gdist = push_distance(passable, goal, width)
    t_keys, t_node, n_key, n_g, n_h, n_first, n_closed, heap = lookahead_arrays(
        max(1, budget // CALLS_PER_EXPANSION))
    lh_keys, lh_vals = state_table(max_steps)
    actions = np.empty(max_steps, np.int8)
    step_calls = np.zeros(max_steps, np.int64)
    cur = start_key
    steps = 0
    while True:
        h_cur = _estimate(cur, gdist, n_crates)
        if h_cur == 0:
            return True, steps, actions[:steps], step_calls[:steps]
        if steps >= max_steps:
            return False, steps, actions[:steps], step_calls[:steps]
        n_nodes = 1
        size = start_lookahead(t_keys, t_node, n_key, n_g, n_h, n_first, n_closed, heap, cur,
                               _learned(lh_keys, lh_vals, cur, weight * h_cur))
        calls = 0
        goal_node = -1
        while size > 0 and calls + CALLS_PER_EXPANSION <= budget:
            i, size = pop_open(heap, size, n_closed)
            if i < 0:
                break
            if _estimate(n_key[i], gdist, n_crates) == 0:
                goal_node = i
                break
            order = _action_order(n_key[i], seed)
            for r in range(CALLS_PER_EXPANSION):
                a = orders[order, r]
                nk, pushed = _successor(n_key[i], a, passable, offs, n_crates)
                calls += 1
                if nk == n_key[i]:
                    continue
                if pushed >= 0:
                    if gdist[pushed] >= _FAR:
                        continue
                    if _frozen_square(nk, pushed, passable, goal, width, n_crates):
                        continue
                ng = n_g[i] + 1
                j = node_of(t_keys, t_node, n_key, n_closed, n_nodes, nk)
                if j < n_nodes:
                    if n_closed[j] or ng >= n_g[j]:
                        continue
                else:
                    n_nodes += 1
                    n_h[j] = _learned(lh_keys, lh_vals, nk,
                                      weight * _estimate(nk, gdist, n_crates))
                n_g[j] = ng
                n_first[j] = a if i == 0 else n_first[i]
                size = _heap_push(heap, size, ((ng + n_h[j]) << 40) | (n_h[j] << 20) | j)
        target = goal_node
        if target < 0:
            best = -1
            for j in range(1, n_nodes):
                if n_closed[j]:
                    continue
                score = ((n_g[j] + n_h[j]) << 40) | (n_h[j] << 20) | j
                if best < 0 or score < best:
                    best = score
                    target = j
            if target < 0:
                return False, steps, actions[:steps], step_calls[:steps]
            s = _find(lh_keys, cur)
            lh_keys[s] = cur
            lh_vals[s] = max(n_h[0], n_g[target] + n_h[target])
        a = n_first[target]
        cur, _ = _successor(cur, a, passable, offs, n_crates)  # the environment's step
        actions[steps] = a
        step_calls[steps] = calls
        steps += 1


def board_arrays(level: Level) -> tuple[np.ndarray, np.ndarray]:
    """The kernels' view of ``level``'s board: its floor and its goals on floor, flat."""
    floor = level.floor.ravel()
    return np.ascontiguousarray(floor), np.ascontiguousarray(level.goals.ravel() & floor)


def state_key(state: State) -> int:
    """Pack a state into the planner's 64-bit key (8 bits per cell, player lowest)."""
    key = state.player
    for i, c in enumerate(sorted(state.crates)):
        key |= c << (8 * (i + 1))
    return key


def plan(level: Level, max_steps: int, budget: int = PLANNER_BUDGET,
         state: State | None = None, seed: int = 0) -> PlanResult:
    """Play ``level`` from ``state`` (default: its start) with the reference planner.

    ``budget`` is in dynamics calls per step (at least one expansion's
    ``CALLS_PER_EXPANSION``). Deterministic: the same level, budget and tie-break ``seed``
    always give the same episode (seed 0 is the reference). Cells fit the 8-bit key fields
    because boards are at most 16x16 (``MAX_SIDE``).
    """
    if seed < 0:
        raise ValueError(f"tie-break seed must be >= 0, not {seed}")
    if not CALLS_PER_EXPANSION <= budget <= MAX_PLANNER_BUDGET:
        raise ValueError(f"budget must be {CALLS_PER_EXPANSION} to {MAX_PLANNER_BUDGET} "
                         f"dynamics calls per step, not {budget}")
    state = level.start if state is None else state
    passable, goal = board_arrays(level)
    solved, steps, actions, calls = plan_kernel(passable, goal, level.width, state_key(state),
                                                len(state.crates), int(max_steps),
                                                int(budget), HEURISTIC_WEIGHT, int(seed))
    return PlanResult(bool(solved), int(steps), tuple(int(a) for a in actions),
                      tuple(int(c) for c in calls))


def push_lower_bound(level: Level, state: State | None = None) -> int:
    """Summed pushes taking each crate alone to its nearest goal: a lower bound on the pushes
    of any solution (large when a crate sits on a dead square)."""
    state = level.start if state is None else state
    dist = push_distance(*board_arrays(level), level.width)
    return int(sum(int(dist[c]) for c in state.crates))
