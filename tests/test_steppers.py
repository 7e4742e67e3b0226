"""One stepper: every specialised successor in the engine is held to the rules' ``step_kernel``.

The searches (the solver, the optimal-path count, the push-level reachable count) read moves
off their own cell flags and the planner steps packed keys, for speed; here they run on random
levels of several sizes (drawn by the generator's ``pipeline.stages.layouts``) from random states,
and every successor they produce must be the rules' step of one action: the same player cell,
crates and push, a blocked action a no-op. What they drop must be a push into a state the
solvable set calls dead, whose backward search must agree with the rules' steps on every state.
The one dead-square test and the one frozen-crate test are held to the rules the same way, and
grade's pure-Python step helpers to stepping with the rules.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

import engine.search.optimal_paths as optimal_paths
import engine.search.reachable as reachable
import engine.search.solver as solver
from engine.agents.planner import _frozen_square, _successor, state_key
from engine.levels import Level, State, check_state
from engine.rules import ACTIONS, CRATE, board_array, step_kernel
from engine.search.deadlock import FAR, dead_squares, frozen_square, push_distance, search_grid
from engine.search.index import DenseIndex
from engine.search.reverse import solvable_set
from pipeline.stages.grade import box_changes, first_push_traps, player_reach
from pipeline.stages.layouts import goal_layout, scatter_level


def random_levels(count: int, seed: int, sides: tuple[int, int], crates: tuple[int, int]
                  ) -> list[Level]:
    """``count`` generator boards (goal-first and scatter alike) of random sizes and crates."""
    rng = np.random.default_rng(seed)
    levels: list[Level] = []
    while len(levels) < count:
        height, width = (int(x) for x in rng.integers(sides[0], sides[1] + 1, 2))
        # at most a quarter of the inner cells: the draw needs twice as many free cells
        n = min(int(rng.integers(crates[0], crates[1] + 1)), (height - 2) * (width - 2) // 4)
        if n < 1:
            continue
        draw = scatter_level if rng.random() < 0.5 else goal_layout
        level = draw(rng, height, width, float(rng.uniform(0.0, 0.3)), n)
        if level is not None:
            levels.append(level)
    return levels


def rules_steps(level: Level, player: int, crates: tuple[int, ...]
                ) -> list[tuple[int, tuple[int, ...], bool] | None]:
    """For each action, (player, crates, pushed) after the rules' step; None when blocked."""
    board = board_array(level)
    out: list[tuple[int, tuple[int, ...], bool] | None] = []
    for action in range(4):
        work = np.array(crates, np.int64)
        moved, slot = step_kernel(board, level.width, player, work, action)
        out.append((int(moved), tuple(int(c) for c in work), slot >= 0)
                   if moved != player else None)
    return out


def rules_successors(level: Level, player: int, crates: tuple[int, ...]
                     ) -> list[tuple[int, tuple[int, ...], bool]]:
    """(player, crates, pushed) of every action the rules do not block."""
    return [s for s in rules_steps(level, player, crates) if s is not None]


def random_walk(level: Level, rng: np.random.Generator, steps: int) -> list[State]:
    """The states of ``steps`` random actions from the start, played with the rules."""
    board = board_array(level)
    player, crates = level.start.player, np.array(level.start.crates, np.int64)
    states = [level.start]
    for action in rng.integers(0, 4, steps):
        player, _ = step_kernel(board, level.width, player, crates, int(action))
        states.append(State(int(player), tuple(int(c) for c in crates)))
    return states


def random_state(level: Level, rng: np.random.Generator) -> State:
    """The player and the crates dropped anywhere on the floor (reachable or not)."""
    floor = np.flatnonzero(level.floor.ravel())
    cells = rng.choice(floor, level.n_crates + 1, replace=False)
    return State(int(cells[0]), tuple(sorted(int(c) for c in cells[1:])))


def _key_state(key: int, n_crates: int) -> tuple[int, tuple[int, ...]]:
    return key & 255, tuple(sorted((key >> (8 * (i + 1))) & 255 for i in range(n_crates)))


def test_the_planners_packed_successor_is_the_rules_step_on_random_states():
    rng = np.random.default_rng(5)
    checked = pushes = blocked = 0
    for level in random_levels(120, seed=19, sides=(4, 16), crates=(1, 6)):
        board, width = board_array(level), level.width
        passable = np.ascontiguousarray(level.floor.ravel())
        offs = np.array([-width, width, -1, 1], np.int64)
        states = random_walk(level, rng, 40) + [random_state(level, rng) for _ in range(10)]
        for state in states:
            key = state_key(state)
            for action in range(4):
                crates = np.array(state.crates, np.int64)
                player, slot = step_kernel(board, width, state.player, crates, action)
                after, pushed = _successor(key, action, passable, offs, level.n_crates)
                assert _key_state(after, level.n_crates) == (player, tuple(crates)), (
                    level, state, action)
                assert (pushed >= 0) == (slot >= 0)
                if slot >= 0:
                    # the crate went from the player's new cell one cell further along
                    assert pushed == 2 * player - state.player
                    pushes += 1
                if player == state.player:
                    assert after == key  # a blocked action is a no-op
                    blocked += 1
                checked += 1
    assert pushes > 300 and blocked > 3000 and checked > 20_000


class _Enough(Exception):
    """Raised by the recorder to stop a search after enough expansions."""


class _Recorder:
    """Records every successor a search kernel's Python body generates, per expanded state.

    ``expand`` wraps ``unpack`` (a search unpacks each state it expands), ``child`` wraps the
    call each kernel makes on every successor it generates, before any duplicate check.
    """

    def __init__(self, real_unpack, limit: int) -> None:
        self.real_unpack = real_unpack
        self.limit = limit
        self.expanded: list[tuple[tuple[int, tuple[int, ...]], list]] = []

    def unpack(self, code, crates):
        if len(self.expanded) >= self.limit:
            raise _Enough
        player = self.real_unpack(code, crates)
        self.expanded.append(((int(player), tuple(int(c) for c in crates)), []))
        return player

    def record(self, player: int, crates) -> None:
        if self.expanded:  # the root is packed or ranked before any expansion
            self.expanded[-1][1].append((int(player), tuple(int(c) for c in crates)))

    def run(self, kernel, *args) -> list[tuple[tuple[int, tuple[int, ...]], list]]:
        """Run ``kernel``'s Python body; the expansions that ran to the end (the last one may
        have been cut short)."""
        try:
            kernel.py_func(*args)
        except _Enough:
            pass
        return self.expanded[:-1]


def _search_args(level: Level, start: State, index: DenseIndex) -> tuple:
    """The arguments the searches' kernels begin with: the grid, the index, the start."""
    return (search_grid(level), level.width, index.cell_id, index.floor_id,
            index.floor_cells.size, index.binom, index.size, start.player,
            np.array(start.crates, np.int64))


def _run_solver(monkeypatch, level: Level, start: State, limit: int) -> list:
    recorder = _Recorder(solver.unpack, limit)
    real_pack, real_with_player = solver.pack, solver.with_player

    def pack(player, crates):
        recorder.record(player, crates)
        return real_pack(player, crates)

    def with_player(code, player):
        recorder.record(player, recorder.expanded[-1][0][1])
        return real_with_player(code, player)

    monkeypatch.setattr(solver, "unpack", recorder.unpack)
    monkeypatch.setattr(solver, "pack", pack)
    monkeypatch.setattr(solver, "with_player", with_player)
    args = _search_args(level, start, DenseIndex.for_level(level))
    return recorder.run(solver.bfs_kernel, *args, limit + 8)


def _run_counter(monkeypatch, level: Level, start: State, limit: int) -> list:
    recorder = _Recorder(optimal_paths.unpack, limit)
    real_rank = optimal_paths.rank

    def rank(cell_id, floor_id, binom, n_floor, player, crates):
        recorder.record(player, crates)
        return real_rank(cell_id, floor_id, binom, n_floor, player, crates)

    monkeypatch.setattr(optimal_paths, "unpack", recorder.unpack)
    monkeypatch.setattr(optimal_paths, "rank", rank)
    args = _search_args(level, start, DenseIndex.for_level(level))
    expanded = recorder.run(optimal_paths.layered_count_kernel, *args, 1 << 30)
    # the counter unpacks a whole layer to look for solved states before expanding it
    return [(state, children) for state, children in expanded if children]


@pytest.mark.parametrize("search", ["solver", "optimal paths"])
def test_the_searches_successors_are_the_rules_steps_on_random_states(monkeypatch, search):
    run = _run_solver if search == "solver" else _run_counter
    rng = np.random.default_rng(11)
    expansions = moves = pushes = pruned = 0
    for level in random_levels(80, seed=7, sides=(5, 9), crates=(1, 3)):
        sset = solvable_set(level)
        # a start the searches expand (crates off dead squares, not solved), solvable or not
        index = DenseIndex.for_level(level)
        start = sset.sample_start(rng, 4, 80) if rng.random() < 0.5 else None
        for _ in range(50):
            if start is not None and index.index_of(start) >= 0 and not level.is_solved(start):
                break
            start = random_state(level, rng)
        else:
            continue
        with monkeypatch.context() as patch:
            expanded = run(patch, level, start, 60)
        for (player, crates), children in expanded:
            assert len(children) == len(set(children)), (level, player, crates)
            rules = {(p, c): pushed for p, c, pushed in rules_successors(level, player, crates)}
            # every successor a search generates is the rules' step of one action ...
            assert set(children) <= set(rules), (level, player, crates)
            for (p, c), pushed in rules.items():
                if (p, c) in children:
                    moves += not pushed
                    pushes += pushed
                else:
                    # ... and it drops only pushes into states that cannot be solved
                    check_state(level, State(p, c))
                    assert pushed and not sset.is_solvable(State(p, c)), (level, player, p, c)
                    pruned += 1
            expansions += 1
    assert expansions > 1000 and moves > 2000 and pushes > 100 and pruned > 40


def test_the_push_level_counts_successors_are_the_rules_pushes_from_the_walkable_region(
        monkeypatch):
    rng = np.random.default_rng(17)
    expansions = pushes = 0
    for level in random_levels(60, seed=37, sides=(5, 9), crates=(1, 3)):
        start = random_walk(level, rng, 30)[-1]
        index = DenseIndex.for_level(level, crates_on="floor")
        recorder = _Recorder(reachable.unpack, 40)
        real_rank = reachable.rank

        def rank(cell_id, floor_id, binom, n_floor, player, crates, recorder=recorder,
                 real_rank=real_rank):
            recorder.record(player, crates)
            return real_rank(cell_id, floor_id, binom, n_floor, player, crates)

        sset = solvable_set(level)
        reachable.push_reachable_stats(level, sset, start)  # its kernels compiled unpatched
        with monkeypatch.context() as patch:
            patch.setattr(reachable, "unpack", recorder.unpack)
            patch.setattr(reachable, "rank", rank)
            expanded = recorder.run(
                reachable.push_reach_kernel, board_array(level), level.width, index.cell_id,
                index.floor_id, index.floor_cells.size, index.binom, index.size, start.player,
                np.array(start.crates, np.int64), sset.index.cell_id, sset.index.binom,
                sset.words, 1 << 30)
        for (player, crates), ranked in expanded:
            # the first state ranked is the one expanded, unless a flood already counted it
            children = set(ranked[1:])
            if not children:
                continue
            expected = {(p, c) for cell in player_reach(level, State(player, crates))
                        for p, c, pushed in rules_successors(level, cell, crates) if pushed}
            assert children == expected, (level, player, crates)
            expansions += 1
            pushes += len(children)
    assert expansions > 150 and pushes > 400


def test_the_solvable_sets_distances_follow_the_rules_steps():
    checked = dead = 0
    for level in random_levels(30, seed=43, sides=(5, 7), crates=(1, 2)):
        sset = solvable_set(level)
        # every state of the level: the crates anywhere on the floor, the player beside them
        index = DenseIndex.for_level(level, crates_on="floor")
        for state in index.states_of(np.arange(index.size)):
            if state.player in state.crates:
                continue
            d = sset.distance(state)
            after = [sset.distance(State(p, c))
                     for p, c, _ in rules_successors(level, state.player, state.crates)]
            if level.is_solved(state):
                assert d == 0
            elif d < 0:
                # no step of the rules leads from an unsolvable state to a solvable one
                assert all(a < 0 for a in after), (level, state)
                dead += 1
            else:
                # one move more than the best step of the rules (the backward search's pulls
                # are the rules' steps reversed)
                assert d == 1 + min(a for a in after if a >= 0), (level, state)
            checked += 1
    assert checked > 10_000 and dead > 1000


def test_the_one_freeze_test_is_the_planners_on_random_states():
    rng = np.random.default_rng(3)
    frozen = free = 0
    for level in random_levels(150, seed=23, sides=(4, 10), crates=(2, 6)):
        board, width = board_array(level), level.width
        passable = np.ascontiguousarray(level.floor.ravel())
        goal = np.ascontiguousarray(level.goals.ravel() & level.floor.ravel())
        for _ in range(20):
            state = random_state(level, rng)
            grid = board.copy()
            grid[list(state.crates)] |= CRATE
            key = state_key(state)
            for cell in state.crates:
                expected = bool(frozen_square(grid, width, cell))
                assert _frozen_square(key, cell, passable, goal, width, level.n_crates) == (
                    expected), (level, state, cell)
                frozen += expected
                free += not expected
    assert frozen > 1000 and free > 2000


def test_no_lone_crate_ever_leaves_a_dead_square_for_a_goal_under_the_rules():
    dead_cells = live_cells = 0
    for level in random_levels(60, seed=29, sides=(4, 10), crates=(1, 4)):
        floor = np.flatnonzero(level.floor.ravel())
        dead = dead_squares(level).ravel()
        goals = level.goals.ravel()
        dist = push_distance(level.floor.ravel(), goals, level.width)
        # the solver's dead squares are the planner's cells with no push distance
        assert np.array_equal(dead, level.floor.ravel() & (dist >= FAR))
        # every lone crate on a dead square, with the player anywhere else: the rules never
        # bring it onto a goal
        seen = {(int(p), int(c)) for c in floor[dead[floor]] for p in floor if p != c}
        queue = deque(seen)
        while queue:
            player, crate = queue.popleft()
            assert not goals[crate], (level, crate)
            for p, (c,), _ in rules_successors(level, player, (crate,)):
                if (p, c) not in seen:
                    seen.add((p, c))
                    queue.append((p, c))
        # and on a goal the push distance is 0, one pull away 1
        assert (dist[goals & level.floor.ravel()] == 0).all()
        dead_cells += int(dead.sum())
        live_cells += int((~dead[floor]).sum())
    assert dead_cells > 200 and live_cells > 300


def _rules_reach(level: Level, state: State) -> set[int]:
    """The cells the player walks to by the rules' steps that push nothing."""
    seen = {state.player}
    stack = [state.player]
    while stack:
        cell = stack.pop()
        for p, _, pushed in rules_successors(level, cell, state.crates):
            if not pushed and p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def test_grades_step_helpers_agree_with_the_rules_steps_on_random_levels():
    rng = np.random.default_rng(13)
    traps = switches = 0
    for level in random_levels(60, seed=31, sides=(5, 8), crates=(2, 3)):
        state = random_walk(level, rng, 25)[-1]
        level = level.with_start(state)
        reach = _rules_reach(level, state)
        assert player_reach(level, state) == reach
        # the first pushes: every push the rules allow from a cell the player can walk to
        sset = solvable_set(level)
        expected = sum(not sset.is_solvable(State(p, c)) for cell in reach
                       for p, c, pushed in rules_successors(level, cell, state.crates)
                       if pushed)
        assert first_push_traps(level, sset) == expected
        traps += expected
        # a random walk of the rules' steps written in LURD, counting which crate each push
        # moves (it goes from the player's new cell one cell further along)
        player, crates = state.player, state.crates
        which = {c: i for i, c in enumerate(crates)}
        lurd, last, changes = "", None, 0
        for _ in range(80):
            steps = [(a, *s) for a, s in enumerate(
                rules_steps(level, player, crates)) if s is not None]
            pushes = [s for s in steps if s[3]]
            if pushes and rng.random() < 0.6:
                steps = pushes  # walks that push often switch crates often
            if not steps:
                break
            action, after, crates, pushed = steps[rng.integers(len(steps))]
            if pushed:
                crate = which.pop(after)
                which[2 * after - player] = crate
                changes += last is not None and crate != last
                last = crate
            lurd += ACTIONS[action].upper() if pushed else ACTIONS[action]
            player = after
        assert box_changes(level, lurd) == changes, (level, lurd)
        switches += changes
    assert traps > 40 and switches > 10
