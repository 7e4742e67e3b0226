"""Served episodes: a served level's episode, the tiered run of a version's episodes, the score.

Each episode is played by the engine's episode core (``engine.episode``: the state, the budget,
restarts and when it is over); this module adds what serving needs: the letters played, the
level's look, the run's tiers and episodes in flight, and the Score. Nothing here knows HTTP,
a store or a process; a stored snapshot (the state and the steps used) puts an episode back
exactly where it was without replaying it.
"""

from __future__ import annotations

__all__ = [
    "Ability", "Chooser", "EpisodeRun", "Equated", "Outcome", "PLAYED", "RESTART_GAME",
    "RESTART_LEVEL", "Run", "Score", "decode_state", "encode_state", "new_run", "replay_states",
    "score",
]

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, Protocol, TypedDict

from engine import episode as core
from engine.episode import Episode, StepResult
from engine.levels import State
from pipeline.precision import success_interval
from serve.games.dataset import ServedLevel

RESTART_LEVEL = 5  # not a move: put the level back to its start, keeping the steps used
RESTART_GAME = 6  # not a move: start every episode again
PLAYED = "UDLR.|"  # a stored action string's letter for each action; '|' a level restart
IN_PROGRESS, GAME_OVER, EXPIRED = "IN_PROGRESS", "GAME_OVER", "EXPIRED"


def encode_state(state: State) -> str:
    """A state as text: ``player:crate,crate,...`` (flat cell indices)."""
    return f"{state.player}:{','.join(map(str, state.crates))}"


def decode_state(text: str) -> State:
    player, _, crates = text.partition(":")
    return State(int(player), tuple(int(c) for c in crates.split(",") if c))


@dataclass
class EpisodeRun:
    """One episode of a served level: the core's ``Episode`` once started (``game``), the
    letters played, and the outcome its run recorded (a run that closes ends every episode).
    ``place`` is its index in the run when that is not its level's (an adaptive game's)."""

    served: ServedLevel
    game: Any = None  # the core's ``Episode`` once started
    done: bool = False
    solved: bool = False
    deadlocked: bool = False
    actions: list[str] = field(default_factory=list)
    steps: int = 0
    obs: Any = None  # the play layer's picture of the current state
    place: int | None = None

    @property
    def index(self) -> int:
        """The episode's index in its run."""
        return self.served.index if self.place is None else self.place

    @property
    def state(self) -> State:
        return self.game.state if self.game is not None else self.served.level.start

    def begin(self, state: State | None = None) -> Episode:
        """The core's episode, started (from ``state``, default the start) if it was not, with
        the steps already used."""
        if self.game is None:
            self.game = core.begin(self.served.level, self.served.max_steps, state, self.steps)
        return self.game

    def play(self, action: int) -> StepResult:
        """One action of the episode: a move 0-3, or ``WAIT``, which only uses up a step."""
        self.game, step = core.step(self.begin(), action)
        self.actions.append(PLAYED[action])
        self.steps = self.game.steps
        return step

    def restart(self) -> None:
        """Put the level back to its start; the steps already used stay used."""
        self.game = core.restart(self.begin())
        self.actions.append(PLAYED[RESTART_LEVEL])

    def finish(self, solved: bool) -> None:
        """End the episode; unsolved, it is deadlocked if its state can no longer be solved."""
        self.done = True
        self.solved = solved
        self.deadlocked = not solved and self.served.is_dead(self.state)

    def frame(self) -> Any:
        """The RGB observation of the current state, in the level's look (noise, if its look
        has any, drawn for the steps used)."""
        return self.served.frame(self.state, self.steps)

    def snapshot(self) -> str | None:
        return None if self.game is None else encode_state(self.game.state)

    @classmethod
    def restored(cls, served: ServedLevel, *, done: bool, solved: bool, deadlocked: bool,
                 steps: int, actions: str, snapshot: str | None,
                 place: int | None = None) -> EpisodeRun:
        """The episode as a stored row left it: from its snapshot, or (rows written before
        snapshots existed) by replaying its action string once."""
        run = cls(served, done=done, solved=solved, deadlocked=deadlocked,
                  actions=list(actions), steps=steps, place=place)
        if snapshot is not None:
            run.begin(decode_state(snapshot))
        elif actions:
            replay = cls(served)
            replay.begin()
            for letter in actions:
                if letter == PLAYED[RESTART_LEVEL]:
                    replay.restart()
                else:
                    replay.play(PLAYED.index(letter))
            run.game = replay.game
        return run


def replay_states(served: ServedLevel, actions: str) -> list[tuple[State, int]]:
    """The state and the steps used at the start and after each letter of a stored action
    string (a level restart ``|`` included, which uses no step), replayed from the start."""
    run = EpisodeRun(served)
    run.begin()
    states = [(run.state, 0)]
    for letter in actions:
        if letter == PLAYED[RESTART_LEVEL]:
            run.restart()
        else:
            run.play(PLAYED.index(letter))
        states.append((run.state, run.steps))
    return states


@dataclass(frozen=True)
class Outcome:
    """What one action did, for the answer to it."""

    episode: int
    action: int
    moved: bool
    pushed: bool
    solved: bool
    episode_done: bool


class Chooser(Protocol):
    """What chooses an adaptive run's levels as it plays (``serve.games.adaptive``)."""

    @property
    def episodes(self) -> int:
        """How many episodes the run plays."""

    def block(self, episodes: list[EpisodeRun], size: int) -> list[EpisodeRun]:
        """The next ``size`` episodes after ``episodes`` (all ended), on levels chosen now."""

    def padding(self, episodes: list[EpisodeRun]) -> list[EpisodeRun]:
        """The episodes after ``episodes`` that a run closed early did not play, ended."""

    def measure(self, episodes: list[EpisodeRun]) -> tuple[Ability, Equated]:
        """What the Score of ``episodes`` adds: its ``ability`` and ``equated_success``."""


@dataclass
class Run:
    """Every episode of a version in play order, tier by tier, with ``parallel`` in flight.

    An adaptive run (with a ``chooser``) has its ``tiers`` be its blocks, ranges of episode
    indices; a block's episodes are chosen, and appended, once every episode before has
    ended."""

    episodes: list[EpisodeRun]
    tiers: Sequence[tuple[int, int]]
    parallel: int = 1
    state: str = IN_PROGRESS
    tier: int = 0
    in_flight: list[int] = field(default_factory=list)
    chooser: Chooser | None = None

    @property
    def finished(self) -> int:
        return sum(e.done for e in self.episodes)

    @property
    def length(self) -> int:
        """How many episodes the run plays (an adaptive one holds only those chosen yet)."""
        return len(self.episodes) if self.chooser is None else self.chooser.episodes

    def refill(self) -> None:
        """Keep the first ``parallel`` unfinished episodes of the lowest unfinished tier in flight.

        Episodes start in index order, so this set is exactly the one that play reached;
        it depends only on which episodes are done, which makes a reload exact. An adaptive
        run reaching a block not chosen yet (every episode before it has ended) chooses it.
        """
        while self.tier < len(self.tiers):
            lo, hi = self.tiers[self.tier]
            if hi >= len(self.episodes) and self.chooser is not None:
                if self.state != IN_PROGRESS:
                    break  # a run over chooses nothing more
                self.episodes += self.chooser.block(self.episodes, hi + 1 - len(self.episodes))
            waiting = [i for i in range(lo, hi + 1) if not self.episodes[i].done]
            if waiting:
                self.in_flight = waiting[:self.parallel]
                for i in self.in_flight:
                    self.episodes[i].begin()
                return
            self.tier += 1
        self.in_flight = []
        if self.state == IN_PROGRESS:
            self.state = GAME_OVER

    def act(self, episode: int, action: int) -> Outcome:
        """Play ``action`` in episode ``episode`` (in flight); ends and refills as play does."""
        run = self.episodes[episode]
        step = run.play(action)
        if step.done:
            run.finish(step.solved)
            self.refill()
        return Outcome(episode, action, bool(step.moved), bool(step.pushed), bool(step.solved),
                       bool(step.done))

    def replay(self, steps: Iterable[tuple[int, int]]) -> Outcome | None:
        """Play stored steps ``(episode, action)`` in order, each an action, a level restart or
        a game restart as the store records them; the last one's outcome (None: a restart)."""
        outcome = None
        for episode, action in steps:
            outcome = None
            if action == RESTART_GAME:
                self.restart_game()
            elif action == RESTART_LEVEL:
                self.restart_level(episode)
            else:
                outcome = self.act(episode, action)
        return outcome

    def restart_level(self, episode: int) -> None:
        self.episodes[episode].restart()

    def restart_game(self) -> None:
        """Every episode from its start, the budget whole again."""
        self.episodes = [EpisodeRun(e.served, place=e.place) for e in self.episodes]
        self.state, self.tier, self.in_flight = IN_PROGRESS, 0, []
        self.refill()

    def close(self) -> None:
        """End every episode not finished as unsolved (an adaptive run's unplayed ones too:
        its ``chooser``'s padding)."""
        for run in self.episodes:
            if not run.done:
                run.finish(False)
        if self.chooser is not None and len(self.episodes) < self.chooser.episodes:
            self.episodes += self.chooser.padding(self.episodes)
        self.state, self.in_flight = GAME_OVER, []

    def score(self) -> Score:
        """The run's Score so far (an adaptive run's with its ability)."""
        result = score(self.episodes)
        if self.chooser is not None:
            result["ability"], result["equated_success"] = self.chooser.measure(self.episodes)
        return result


def new_run(levels: Sequence[ServedLevel], tiers: Sequence[tuple[int, int]],
            parallel: int = 1, chooser: Chooser | None = None) -> Run:
    """A run from its start: every one of ``levels`` in order, or (with a ``chooser``, and
    ``tiers`` its blocks) the levels it chooses."""
    run = Run([EpisodeRun(lv) for lv in levels], tiers, parallel, chooser=chooser)
    run.refill()
    return run


class Ability(TypedDict):
    """An adaptive Score's ability estimate (the pool's scale), with its 95% interval."""

    theta: float
    low: float
    high: float


class Equated(TypedDict):
    """An adaptive Score's expected success on the standard game's ramp, with its 95%
    interval: what a standard Score's ``success_rate`` compares to."""

    value: float
    low: float
    high: float


class Score(TypedDict):
    """A run's Score, as the API's ``SCORE`` declares it (``serve.native``); an adaptive
    run's adds ``ability`` and ``equated_success``, frozen in the result at its close."""

    episodes: int
    solved: int
    success_rate: float
    success_interval: list[float]  # [lo, hi], 95%
    move_efficiency: float
    avg_steps_solved: float
    deadlock_rate: float
    total_actions: int
    ability: NotRequired[Ability]
    equated_success: NotRequired[Equated]


def score(episodes: list[EpisodeRun]) -> Score:
    """The Score: unfinished episodes count as unsolved; efficiency is optimal/steps over solved;
    the success interval is over draws of levels, tier by tier (``pipeline.precision``)."""
    n = len(episodes)
    solved = [e for e in episodes if e.solved]
    efficiency = (sum(e.served.optimal_moves / e.steps for e in solved) / len(solved)
                  if solved else 0.0)
    return {
        "episodes": n,
        "solved": len(solved),
        "success_rate": round(len(solved) / n, 4) if n else 0.0,
        "success_interval": success_interval([e.solved for e in episodes],
                                             [e.served.tier for e in episodes]),
        "move_efficiency": round(efficiency, 4),
        "avg_steps_solved": round(sum(e.steps for e in solved) / len(solved), 2) if solved else 0.0,
        "deadlock_rate": round(sum(e.deadlocked for e in episodes) / n, 4) if n else 0.0,
        "total_actions": sum(e.steps for e in episodes),
    }
