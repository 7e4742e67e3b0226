"""The fair-play review: which scorecards of a version need a look by a person, and why.

Pure statistics over tables (``serve.records.review`` reads the store and replays the episodes): the
version's levels with its agent panel and its reference play (``reference``), and one
scorecard's levels as played (``PLAY_SCHEMA``). Each signal compares what the scorecard did
with what an honest agent, within the rule of 256 dynamics calls per step, would be expected
to do, and says how far out it is as a p-value: the chance that such an agent shows at least
as much. The signals of ``VOTING`` vote; a scorecard needs review when any of them is below
``THRESHOLD``, so that an honest agent is flagged at most ``FALSE_FLAG_RATE`` of the time
(Bonferroni over the voting set). The others are shown beside them and never decide. A
verdict triages for source review: it proves nothing.

The whole score (``whole_score``) is tested against the compute frontier: the best play
within the rule the project knows, the reference families (``engine.agents.reference``)
played on the version's boards under several of their 8 symmetries (``report/reference.parquet``,
one row per level, agent and turn). A level's ``frontier_chance`` is its success share over
those plays, smoothed by half a success in one more play (a level no play solves keeps a small
chance, one every play solves stays below 1), then moved by one logit shift so that the
chances sum to ``frontier_solved``, the best single play's solved count. So the chances keep
the spread honest play shows (levels every search solves, levels none does) at the strength of
the strongest: an honest agent no stronger than the reference solves X of its levels with X
Poisson-binomial (``at_least``) over them, and K (``bound``), the most solved that stays above
``THRESHOLD``, is what passes unflagged. A turn of the board changes a search's tie-breaks and
nothing else, so the turned plays are honest agents of the reference's strength, not the
reference agent alone.

On an adaptive game's pool every session showed its own levels: its rows are those levels (the
recorded ``level`` of each episode), so each signal judges it on them, the whole score with the
frontier's chance of each; the pool's K is stated on the equated scale (``equated_bound``).
"""

from __future__ import annotations

__all__ = [
    "FALSE_FLAG_RATE", "FRONTIER_SCHEMA", "LEVEL_SCHEMA", "NEAR_SLACK", "PLAY_SCHEMA",
    "RULE_BUDGET", "Reference", "SIGNAL_ORDER", "ScorecardPlay", "ScorecardReview", "Signal",
    "THRESHOLD", "VOTING", "ability", "at_least", "bound", "detours", "equated_bound", "frontier",
    "hard_optimal", "near_optimal", "person_fit", "raise_frontier", "reference", "replay",
    "review_scorecard", "review_scorecards", "shifted", "solve_chances", "tails", "timing",
    "whole_score",
]

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import polars as pl

from pipeline.difficulty.logistic import sigmoid
from pipeline.difficulty.rank_metrics import spearman

FALSE_FLAG_RATE = 0.01  # an honest agent within the rule is flagged at most this often
# the signals in the order the review shows them; the voting ones first
SIGNAL_ORDER = ("whole_score", "hard_optimal", "frontier", "replay", "near_optimal",
                "person_fit", "detours", "timing")
VOTING = ("whole_score", "hard_optimal", "frontier", "replay")
THRESHOLD = FALSE_FLAG_RATE / len(VOTING)  # each voting signal's p-value must be below it
NEAR_SLACK = 4  # near_optimal: solved within this many pushes of the optimum
RULE_BUDGET = 256  # the benchmark's rule: at most this many dynamics calls per step
NEEDS_REVIEW, CONSISTENT = "needs review", "consistent"
_CLIP = 0.02  # no level's chance of being solved is taken as below 2% or above 98%

# the version's levels, as ``reference`` needs them
LEVEL_SCHEMA = {"index": pl.Int64, "optimal_moves": pl.Int64, "optimal_pushes": pl.Int64,
                "difficulty": pl.Float64, "reachable_states": pl.Int64}
# the reference play (``report/reference.parquet``): the panel's columns and the board's turn
FRONTIER_SCHEMA = {"index": pl.Int64, "agent": pl.String, "family": pl.String,
                   "budget": pl.Int64, "turn": pl.Int64, "solved": pl.Boolean,
                   "steps": pl.Int64, "pushes": pl.Int64}
# one scorecard's levels as played: ``played`` whether an episode took a step; ``steps`` the
# actions it used, ``moves`` those that moved the player, ``pushes`` those that pushed a crate,
# ``restarts`` level restarts; ``think_ms`` the time before its first action (null: unknown),
# ``pace_ms`` the median time between its later actions (null: unknown)
PLAY_SCHEMA = {"index": pl.Int64, "played": pl.Boolean, "solved": pl.Boolean,
               "steps": pl.Int64, "moves": pl.Int64, "pushes": pl.Int64,
               "restarts": pl.Int64, "think_ms": pl.Float64, "pace_ms": pl.Float64}


class Signal(NamedTuple):
    """One measure of a scorecard: its ``value``, the ``reference`` an honest agent within the
    rule would show, ``p_value`` how far out it is (the chance of at least ``value`` for such
    an agent; None where it has none), whether it ``votes`` in the verdict, what it
    ``measures`` (one line) and the ``evidence`` (one sentence)."""

    name: str
    value: float
    reference: float
    p_value: float | None
    votes: bool
    measures: str
    evidence: str

    @property
    def flags(self) -> bool:
        """Whether this signal alone makes the scorecard need review."""
        return self.votes and self.p_value is not None and self.p_value < THRESHOLD

    def to_dict(self) -> dict:
        return {"name": self.name, "value": _num(self.value), "reference": _num(self.reference),
                "p_value": None if self.p_value is None else float(f"{self.p_value:.3g}"),
                "votes": self.votes, "flags": self.flags, "measures": self.measures,
                "evidence": self.evidence}


class ScorecardReview(NamedTuple):
    """A scorecard's verdict (``consistent`` or ``needs review``), the evidence for it (the
    flagging signals' sentences first), every signal, its ``solved`` count of the levels it
    played, the reference's best on the version (``frontier_solved``), the most solved of the
    levels it played that passes the whole-score test (``bound``, K) and the verdict's
    ``reason`` in one line (the signal that flagged, or the bound it kept within)."""

    scorecard_id: str
    name: str
    verdict: str
    evidence: list[str]
    signals: list[Signal]
    solved: int = 0
    frontier_solved: int = 0
    bound: int = 0
    reason: str = ""

    def to_dict(self) -> dict:
        return {"scorecard_id": self.scorecard_id, "name": self.name, "verdict": self.verdict,
                "solved": self.solved, "frontier_solved": self.frontier_solved,
                "bound": self.bound, "reason": self.reason, "evidence": self.evidence,
                "signals": [s.to_dict() for s in self.signals]}


class ScorecardPlay(NamedTuple):
    """One closed scorecard's play of the version: who (key hash, name), when it opened and
    closed, and its levels as played (``PLAY_SCHEMA``)."""

    scorecard_id: str
    key_hash: str
    name: str
    opened: float
    closed: float
    rows: pl.DataFrame


class Reference(NamedTuple):
    """What honest play looks like on a version, from its levels, its agent panel and its
    reference play.

    ``levels``: per level index, optimal_moves, optimal_pushes, reachable_states, ``base``
    (the chance an agent of the within-rule play's mean ability solves it), ``frontier`` (no
    play within the rule solves it), ``hard`` (none within the rule solves it push-optimally),
    ``near`` (none within the rule solves it within ``NEAR_SLACK`` pushes of the optimum),
    ``straight`` (the panel's chance of playing it in exactly its optimal moves) and
    ``frontier_chance`` (its chance for an honest agent as strong as the best reference play;
    the module's docstring says how). ``hard_rate`` (``near_rate``): how often one agent within
    the rule is push-optimal (near it) where the others are not (each family left out in turn),
    the honest rate on a hard level. ``best_within``: the share of the levels the best play
    within the rule solves, the most an honest agent is taken to solve when its chances on
    the frontier are judged. ``frontier_solved``: the best reference play's solved count;
    ``name`` the reference's; ``detour_rate``: the share of within-rule solves in optimal
    pushes that took extra non-pushing steps.
    """

    levels: pl.DataFrame
    hard_rate: float
    agents: int
    best_within: float = 1.0
    frontier_solved: int = 0
    name: str = "the panel within the rule"
    near_rate: float = 0.5
    detour_rate: float = 0.0


def _num(x: float) -> float | int:
    if isinstance(x, (int, np.integer)) or float(x).is_integer():
        return int(x)
    return float(f"{x:.4g}")


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), _CLIP, 1 - _CLIP)
    return np.log(p / (1 - p))


def _push_optimal(solved: pl.Expr, steps: pl.Expr, pushes: pl.Expr, slack: int = 0) -> pl.Expr:
    """Solved with no more pushes than the level's optimal solution (plus ``slack``), or in its
    optimal moves."""
    return solved & ((pushes <= pl.col("optimal_pushes") + slack)
                     | (steps <= pl.col("optimal_moves")))


def _within_plays(panel: pl.DataFrame, frontier: pl.DataFrame | None) -> pl.DataFrame:
    """Every episode played within the rule: the panel's agents within it (each its own
    ``group`` and ``player``) and the reference's (a group per agent, a player per agent and
    turn); columns index, group, player, solved, steps, pushes."""
    cols = ["index", "group", "player", "solved", "steps", "pushes"]
    within = panel.filter(pl.col("budget") <= RULE_BUDGET).select(
        pl.col("index").cast(pl.Int64), pl.col("agent").alias("group"),
        pl.col("agent").alias("player"), "solved", pl.col("steps").cast(pl.Int64),
        pl.col("pushes").cast(pl.Int64))
    if frontier is None or frontier.height == 0:
        return within.select(cols)
    ref = frontier.filter(pl.col("budget") <= RULE_BUDGET).select(
        pl.col("index").cast(pl.Int64), pl.col("agent").alias("group"),
        (pl.col("agent") + "/" + pl.col("turn").cast(pl.String)).alias("player"), "solved",
        pl.col("steps").cast(pl.Int64), pl.col("pushes").cast(pl.Int64))
    return pl.concat([within.select(cols), ref.select(cols)])


def reference(levels: pl.DataFrame, panel: pl.DataFrame,
              frontier: pl.DataFrame | None = None) -> Reference:
    """The ``Reference`` of a version from its levels (``LEVEL_SCHEMA``'s columns), its panel
    (``report/panel.parquet``: index, agent, budget, solved, steps, pushes) and its reference
    play (``report/reference.parquet``, ``FRONTIER_SCHEMA``; None: the panel's agents within
    the rule stand for it, as on a version played before it existed)."""
    lv = levels.with_columns(pl.lit(None).alias(c) for c in LEVEL_SCHEMA
                             if c not in levels.columns)  # older versions lack some columns
    lv = lv.select(list(LEVEL_SCHEMA)).cast(LEVEL_SCHEMA)  # type: ignore[arg-type]
    lv = lv.with_columns(pl.col("difficulty").clip(0.0, 1.0))
    p = panel.select("index", "agent", "budget", "solved", "steps", "pushes").cast(
        {"index": pl.Int64}).join(lv, on="index")
    p = p.with_columns(straight=pl.col("solved") & (pl.col("steps") == pl.col("optimal_moves")))
    agents = p["agent"].n_unique()
    within = _within_plays(panel, frontier).join(lv, on="index").with_columns(
        po=_push_optimal(pl.col("solved"), pl.col("steps"), pl.col("pushes")),
        near=_push_optimal(pl.col("solved"), pl.col("steps"), pl.col("pushes"), NEAR_SLACK))
    per = (within.group_by("index").agg(frontier=~pl.col("solved").any(),
                                        hard=~pl.col("po").any(), near=~pl.col("near").any(),
                                        share=pl.col("solved").mean())
           .join(p.group_by("index").agg(straight=((pl.col("straight").sum() + 0.5)
                                                   / (pl.len() + 1))), on="index"))
    lv = lv.join(per, on="index", how="left").sort("index").with_columns(
        pl.col("frontier").fill_null(False), pl.col("hard").fill_null(False),
        pl.col("near").fill_null(False), pl.col("straight").fill_null(0.5))
    # a level's chance for the within-rule play's mean agent: its share of them solving,
    # beside the difficulty model's chance for the reference planner (1 - difficulty)
    share = lv["share"].fill_null(0.5).to_numpy()
    model = 1.0 - lv["difficulty"].fill_null(0.5).to_numpy()
    base = sigmoid((_logit(share) + _logit(model)) / 2)
    chance, best, name = _frontier_chances(lv["index"], panel, frontier)
    lv = lv.drop("share").with_columns(pl.Series("base", base),
                                       pl.Series("frontier_chance", chance))
    per_play = within.group_by("player").agg(pl.col("solved").sum())["solved"].to_numpy()
    best_within = float(per_play.max()) / max(1, lv.height) if per_play.size else 1.0
    return Reference(levels=lv, hard_rate=_left_out_rate(within, "po"), agents=agents,
                     best_within=best_within, frontier_solved=best, name=name,
                     near_rate=_left_out_rate(within, "near"),
                     detour_rate=_detour_rate(within))


def _frontier_chances(index: pl.Series, panel: pl.DataFrame, frontier: pl.DataFrame | None
                      ) -> tuple[np.ndarray, int, str]:
    """Each level's chance for an honest agent as strong as the best reference play (the
    module's docstring says why so), that play's solved count and the reference's name."""
    if frontier is None or frontier.height == 0:
        plays = panel.filter(pl.col("budget") <= RULE_BUDGET).with_columns(turn=pl.lit(0))
        name = "the panel within the rule"
    else:
        plays = frontier.filter(pl.col("budget") <= RULE_BUDGET)
        agents = ", ".join(sorted(plays["agent"].unique().to_list()))
        name = f"{agents} on {plays['turn'].n_unique()} turns of each board"
    plays = plays.select(pl.col("index").cast(pl.Int64), "agent", "turn", "solved")
    if plays.height == 0:
        return np.full(index.len(), 0.5), 0, name
    n_plays = plays.select("agent", "turn").unique().height
    per = (pl.DataFrame({"index": index}).join(
        plays.group_by("index").agg(pl.col("solved").sum().alias("s")), on="index",
        how="left").sort("index"))
    share = (per["s"].fill_null(0).to_numpy() + 0.5) / (n_plays + 1)
    best = int(plays.group_by("agent", "turn").agg(pl.col("solved").sum())["solved"]
               .to_numpy().max())
    return shifted(share, best), best, name


def shifted(chances: np.ndarray, total: float) -> np.ndarray:
    """``chances`` moved by one logit shift so that they sum to ``total`` (clamped a quarter
    inside 0 and their count, so the shift stays finite)."""
    c = np.clip(np.asarray(chances, dtype=np.float64), 1e-9, 1 - 1e-9)
    target = min(max(total, 0.25), c.size - 0.25)
    logits, lo, hi = np.log(c / (1 - c)), -40.0, 40.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if sigmoid(logits + mid).sum() < target:
            lo = mid
        else:
            hi = mid
    return sigmoid(logits + hi)


def _left_out_rate(within: pl.DataFrame, column: str) -> float:
    """The left-out rate: each group of plays within the rule (a panel agent, or a reference
    family on all its turns), on the levels where none of the others shows ``column``, how
    often it does; smoothed by one in two."""
    hits = trials = 0
    for group in within["group"].unique().sort().to_list():
        others = (within.filter(pl.col("group") != group).group_by("index")
                  .agg(pl.col(column).any().alias("others")))
        mine = within.filter(pl.col("group") == group).join(others, on="index")
        mine = mine.filter(~pl.col("others"))
        hits += int(mine[column].sum())
        trials += mine.height
    return (hits + 1) / (trials + 2)


def _detour_rate(within: pl.DataFrame) -> float:
    """The share of within-rule solves in optimal pushes that took more than the optimal
    moves (an honest search's wandering, beside a scorecard's ``detours``)."""
    optimal = within.filter(pl.col("solved") & (pl.col("pushes") <= pl.col("optimal_pushes")))
    if optimal.height == 0:
        return 0.0
    return float(np.mean((optimal["steps"] > optimal["optimal_moves"]).to_numpy()))


def tails(chances: Sequence[float] | np.ndarray) -> np.ndarray:
    """``P(X >= k)`` for k = 0..n, X a sum of independent Bernoulli trials of ``chances``
    (Poisson-binomial), exactly."""
    chances = np.asarray(chances, dtype=np.float64)
    pmf = np.zeros(chances.size + 1)
    pmf[0] = 1.0
    for i, q in enumerate(chances):
        pmf[1:i + 2] = pmf[1:i + 2] * (1 - q) + pmf[:i + 1] * q
        pmf[0] *= 1 - q
    return np.clip(np.cumsum(pmf[::-1])[::-1], 0.0, 1.0)


def at_least(k: int, chances: Sequence[float] | np.ndarray) -> float:
    """P(X >= k) for X a sum of independent Bernoulli trials of ``chances`` (Poisson-binomial;
    a binomial when they are equal), exactly."""
    chances = np.asarray(chances, dtype=np.float64)
    if k <= 0:
        return 1.0
    if k > chances.size:
        return 0.0
    return float(tails(chances)[k])


def _most_unflagged(chances: np.ndarray) -> int:
    """The most successes whose tail stays at or above ``THRESHOLD``: K over these levels."""
    return int(np.flatnonzero(tails(chances) >= THRESHOLD).max())


def bound(ref: Reference) -> int:
    """K: the most of the version's levels an agent may solve and pass the whole-score test
    (more needs source review)."""
    return _most_unflagged(ref.levels["frontier_chance"].to_numpy())


def equated_bound(ref: Reference, discrimination: np.ndarray, difficulty: np.ndarray,
                  weights: np.ndarray) -> float:
    """K (``bound``) of an adaptive game's pool on the equated scale: the expected success
    on the standard ramp (``weights`` over the pool's levels, ``adaptive.ramp_weights``) at
    the ability whose expected solved count over the pool's levels, under their item
    parameters, is K."""
    k = min(max(bound(ref), 0.25), difficulty.size - 0.25)
    lo, hi = -30.0, 30.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if sigmoid(discrimination * (mid - difficulty)).sum() < k:
            lo = mid
        else:
            hi = mid
    theta = (lo + hi) / 2
    return round(float(sigmoid(discrimination * (theta - difficulty)) @ weights), 4)


def raise_frontier(ref: Reference, solved: float) -> Reference:
    """``ref`` with its frontier chances moved by one logit shift so that they sum to at least
    ``solved`` (a result a person cleared after reading its source: known play within the
    rule reaches it), ``frontier_solved`` and ``best_within`` raised with them; ``ref`` itself
    when they already do."""
    chances = ref.levels["frontier_chance"].to_numpy()
    if chances.sum() >= solved:
        return ref
    raised = shifted(chances, solved)
    n = max(1, ref.levels.height)
    return ref._replace(
        levels=ref.levels.with_columns(pl.Series("frontier_chance", raised)),
        frontier_solved=max(ref.frontier_solved, math.ceil(solved - 1e-9)),
        best_within=max(ref.best_within, min(1.0, solved / n)))


def ability(base: np.ndarray, solved: int) -> float:
    """The shift ``theta`` of the levels' logits at which an agent's expected solved count on
    them (chances ``base``) is ``solved``: what an agent of that overall success is."""
    n = len(base)
    if n == 0:
        return 0.0
    target = min(max(solved, 0.25), n - 0.25)  # an agent that solved all (or none) stays finite
    lo, hi, logits = -30.0, 30.0, _logit(base)
    for _ in range(80):
        mid = (lo + hi) / 2
        if sigmoid(logits + mid).sum() < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def solve_chances(rows: pl.DataFrame, ref: Reference, within_rule: bool = False
                  ) -> pl.DataFrame:
    """The played levels of ``rows`` joined with the reference, each with ``chance``: its
    chance of being solved by an honest agent of the scorecard's overall success (with
    ``within_rule``, of no more than the best play's within the rule)."""
    played = rows.filter(pl.col("played")).join(ref.levels, on="index")
    base = played["base"].to_numpy()
    solved = int(played["solved"].sum())
    if within_rule:
        solved = min(solved, round(ref.best_within * played.height))
    theta = ability(base, solved)
    return played.with_columns(pl.Series("chance", sigmoid(_logit(base) + theta)))


def whole_score(rows: pl.DataFrame, ref: Reference) -> Signal:
    """The solved count of the played levels against an honest agent as strong as the best
    play within the rule the project knows (each level's ``frontier_chance``; a
    Poisson-binomial tail): beyond K it is beyond the compute frontier."""
    played = rows.filter(pl.col("played")).join(ref.levels, on="index")
    chances = played["frontier_chance"].to_numpy()
    k = int(played["solved"].sum())
    most = _most_unflagged(chances)
    p = at_least(k, chances)
    expected = float(chances.sum())
    if p < THRESHOLD:
        sentence = (f"beyond the compute frontier: {k} solved where play within the rule "
                    f"reaches at most {most} (the reference's best: {ref.frontier_solved}; "
                    f"p = {p:.2g})")
    else:
        sentence = (f"{k} solved of {played.height}: within the compute frontier (play within "
                    f"the rule reaches at most {most}; the reference's best: "
                    f"{ref.frontier_solved}; p = {p:.2g})")
    return Signal(name="whole_score", value=k, reference=expected, p_value=p,
                  votes="whole_score" in VOTING,
                  measures="levels solved, against an honest agent as strong as the best play "
                  "within 256 calls a step the project knows (the reference on turned boards)",
                  evidence=sentence)


def _optimal_where_none_is(rows: pl.DataFrame, ref: Reference, slack: int) -> Signal:
    """Solved within ``slack`` pushes of the optimum where no play within the rule is, against
    the left-out rate of that (``hard_optimal`` at slack 0, ``near_optimal`` above)."""
    column, rate, name = (("hard", ref.hard_rate, "hard_optimal") if slack == 0
                          else ("near", ref.near_rate, "near_optimal"))
    played = rows.filter(pl.col("played")).join(ref.levels, on="index").filter(pl.col(column))
    hits = played.filter(_push_optimal(pl.col("solved"), pl.col("steps"), pl.col("pushes"),
                                       slack))
    k, n = hits.height, played.height
    p = at_least(k, np.full(n, rate))
    within = "in optimal pushes" if slack == 0 else f"within {slack} pushes of the optimum"
    return Signal(name=name, value=k, reference=n * rate, p_value=p, votes=name in VOTING,
                  measures=f"levels solved {within} where no play within 256 calls a step "
                  "is, against that play's own rate of it",
                  evidence=f"{k} of the {n} levels on which no play within the rule is "
                  f"{within.replace('in optimal', 'in its optimal')} were solved {within} "
                  f"(an honest agent: {n * rate:.1f} expected; p = {p:.2g})"
                  f"{'' if name in VOTING else ', shown, never voting'}{_levels(hits)}")


def hard_optimal(rows: pl.DataFrame, ref: Reference) -> Signal:
    """Solved push-optimally where no play within the rule is, against the left-out rate of
    that."""
    return _optimal_where_none_is(rows, ref, 0)


def near_optimal(rows: pl.DataFrame, ref: Reference) -> Signal:
    """``hard_optimal`` with ``NEAR_SLACK`` pushes to spare: what survives a wasted push."""
    return _optimal_where_none_is(rows, ref, NEAR_SLACK)


def frontier(rows: pl.DataFrame, ref: Reference) -> Signal:
    """Successes on the levels no play within the rule solves, against what an agent of the
    scorecard's overall success (at most the best play's within the rule: more is already
    beyond what the rule is known to reach) is expected to get there."""
    played = solve_chances(rows, ref, within_rule=True).filter(pl.col("frontier"))
    k = int(played["solved"].sum())
    expected = float(played["chance"].sum())
    p = at_least(k, played["chance"].to_numpy())
    return Signal(name="frontier", value=k, reference=expected, p_value=p,
                  votes="frontier" in VOTING,
                  measures="successes on levels no play within 256 calls a step solves, "
                  "against an agent of the same overall success, at most the best such play's",
                  evidence=f"{k} of the {played.height} levels no play within the rule solves "
                  f"were solved; an agent of this overall success (at most the best play's "
                  f"within the rule, {ref.best_within:.0%}) would solve {expected:.1f} "
                  f"(p = {p:.2g}){_levels(played.filter(pl.col('solved')))}")


def replay(rows: pl.DataFrame, ref: Reference, earlier: Sequence[pl.DataFrame]) -> Signal:
    """Levels the same key or name only probed on earlier scorecards (played, never solved),
    now played straight in their optimal moves, against the panel's chance of that."""
    probed: set[int] = set()
    solved_before: set[int] = set()
    for before in earlier:
        played = before.filter(pl.col("played"))
        probed |= set(played["index"].to_list())
        solved_before |= set(played.filter(pl.col("solved"))["index"].to_list())
    probed -= solved_before
    now = (rows.filter(pl.col("played") & pl.col("index").is_in(sorted(probed)))
           .join(ref.levels, on="index"))
    hits = now.filter(pl.col("solved") & (pl.col("steps") == pl.col("optimal_moves")))
    chances = now["straight"].to_numpy()
    k, expected = hits.height, float(chances.sum())
    p = at_least(k, chances) if earlier else None
    if not earlier:
        sentence = "no earlier scorecard of the same key or name on this version"
    else:
        sentence = (f"{k} of the {now.height} levels its key or name had only probed before "
                    f"({len(earlier)} earlier scorecard(s)) were played straight in their "
                    f"optimal moves (the panel: {expected:.1f}; p = {p:.2g}){_levels(hits)}")
    return Signal(name="replay", value=k, reference=expected, p_value=p,
                  votes="replay" in VOTING,
                  measures="levels the same key or name had only failed before, now played in "
                  "exactly their optimal moves", evidence=sentence)


def person_fit(rows: pl.DataFrame, ref: Reference) -> Signal:
    """The standardised log-likelihood lz of the solved levels under the difficulty model at
    the scorecard's ability: far below 0 when easy levels fail while hard ones are solved.
    None solved, or all, says nothing of fit: no value then, and no p-value."""
    played = solve_chances(rows, ref)
    measures = ("how well the solved levels follow difficulty (lz; far below 0: easy ones "
                "failed, hard ones solved)")
    solved = int(played["solved"].sum())
    if solved in (0, played.height):
        return Signal(name="person_fit", value=0.0, reference=0.0, p_value=None,
                      votes="person_fit" in VOTING, measures=measures,
                      evidence=f"person fit undefined: {solved} of {played.height} levels "
                      "solved, so the order of their difficulty says nothing (shown, never "
                      "voting)")
    q = np.clip(played["chance"].to_numpy(), 1e-6, 1 - 1e-6)
    y = played["solved"].to_numpy().astype(np.float64)
    logit = np.log(q / (1 - q))
    l0 = float((y * np.log(q) + (1 - y) * np.log(1 - q)).sum())
    mean = float((q * np.log(q) + (1 - q) * np.log(1 - q)).sum())
    var = float((q * (1 - q) * logit ** 2).sum())
    lz = (l0 - mean) / math.sqrt(var) if var > 0 else 0.0
    p = 0.5 * math.erfc(-lz / math.sqrt(2)) if var > 0 else None
    misfit = ("undefined" if p is None else
              f"a fit this poor or poorer has chance {p:.2g} for an honest agent: only a small "
              "chance means misfit")
    return Signal(name="person_fit", value=lz, reference=0.0, p_value=p,
                  votes="person_fit" in VOTING, measures=measures,
                  evidence=f"person fit lz = {lz:+.2f} over {played.height} levels (0 expected;"
                  f" {misfit}; shown, never voting)")


def detours(rows: pl.DataFrame, ref: Reference) -> Signal:
    """Actions that move no crate beyond the optimum on levels solved in optimal pushes: the
    no-ops and detours a solver's replay can add to hide itself; beside it the share honest
    play within the rule shows (``Reference.detour_rate``)."""
    played = rows.filter(pl.col("played")).join(ref.levels, on="index")
    noops = int((played["steps"] - played["moves"]).sum())
    optimal = played.filter(pl.col("solved") & (pl.col("pushes") <= pl.col("optimal_pushes")))
    padded = optimal.filter(pl.col("steps") > pl.col("optimal_moves"))
    extra = int((padded["steps"] - padded["optimal_moves"]).sum())
    share = padded.height / optimal.height if optimal.height else 0.0
    return Signal(name="detours", value=padded.height,
                  reference=ref.detour_rate * optimal.height, p_value=None,
                  votes="detours" in VOTING,
                  measures="no-ops, and levels solved in optimal pushes with extra moves that "
                  "push nothing",
                  evidence=f"{noops} no-op action(s); {padded.height} of {optimal.height} "
                  f"levels solved in optimal pushes took {extra} extra non-pushing step(s) "
                  f"({share:.0%}; honest play within the rule: {ref.detour_rate:.0%} of its "
                  "solves in optimal pushes)")


def timing(rows: pl.DataFrame, ref: Reference) -> Signal:
    """Whether the time before an episode's first action grows with its level's state space
    (Spearman), as a search before play does; timing is easy to fake, so it never votes."""
    timed = (rows.filter(pl.col("played") & pl.col("think_ms").is_not_null())
             .join(ref.levels, on="index").filter(pl.col("reachable_states").is_not_null()))
    measures = ("time to an episode's first action against its level's state space "
                "(Spearman); never the only evidence")
    if timed.height < 5:
        return Signal(name="timing", value=0.0, reference=0.0, p_value=None,
                      votes="timing" in VOTING, measures=measures,
                      evidence=f"not enough timed episodes ({timed.height}): the store kept no "
                      "arrival times for most actions")
    think = timed["think_ms"].to_numpy()
    rho = spearman(think, np.log1p(timed["reachable_states"].to_numpy().astype(np.float64)))
    rho = 0.0 if not np.isfinite(rho) else float(rho)
    z = rho * math.sqrt(timed.height - 1)  # the rank correlation's null spread, 1/sqrt(n-1)
    p = 0.5 * math.erfc(z / math.sqrt(2))
    pace = timed["pace_ms"].drop_nulls()
    burst = (f"; then {float(np.median(pace.to_numpy())):.0f} ms between actions"
             if pace.len() else "")
    return Signal(name="timing", value=rho, reference=0.0, p_value=p,
                  votes="timing" in VOTING, measures=measures,
                  evidence=f"first actions came after a median {float(np.median(think)):.0f} "
                  f"ms{burst}; their rank correlation with the levels' state spaces is "
                  f"{rho:+.2f} (a correlation this high has chance {p:.2g} with no search "
                  "before play; shown, never voting)")


def _levels(hits: pl.DataFrame, most: int = 8) -> str:
    """`` (levels 3, 17, ...)``: the levels behind a count, numbered from 1 as messages are."""
    if hits.height == 0:
        return ""
    shown = [str(i + 1) for i in hits["index"].sort().to_list()]
    more = f" and {len(shown) - most} more" if len(shown) > most else ""
    return f" (level{'s' if len(shown) > 1 else ''} {', '.join(shown[:most])}{more})"


SIGNALS: dict[str, Callable[[pl.DataFrame, Reference], Signal]] = {
    "whole_score": whole_score, "hard_optimal": hard_optimal, "frontier": frontier,
    "near_optimal": near_optimal, "person_fit": person_fit, "detours": detours,
    "timing": timing}


def _reason(flagged: list[Signal], solved: int, most: int, ref: Reference) -> str:
    """The verdict in one line: the signal that flagged first, or the bound kept within."""
    if not flagged:
        return (f"consistent: {solved} solved, within the bound of {most} (the reference's "
                f"best: {ref.frontier_solved}); no play signature below p = {THRESHOLD:.2g}")
    first = flagged[0]
    if first.name == "whole_score":
        return first.evidence
    others = f" (and {', '.join(s.name for s in flagged[1:])})" if len(flagged) > 1 else ""
    return f"{first.name}: p = {first.p_value:.2g} < {THRESHOLD:.2g}{others}"


def review_scorecard(play: ScorecardPlay, ref: Reference,
                     earlier: Sequence[ScorecardPlay] = ()) -> ScorecardReview:
    """The verdict on one scorecard: ``needs review`` when a voting signal is below
    ``THRESHOLD``; ``earlier`` are the same key's or name's scorecards closed before it."""
    rows = play.rows.select(list(PLAY_SCHEMA)).cast(PLAY_SCHEMA)  # type: ignore[arg-type]
    by_name = {name: signal(rows, ref) for name, signal in SIGNALS.items()}
    by_name["replay"] = replay(rows, ref, [e.rows for e in earlier])
    signals = [by_name[name] for name in SIGNAL_ORDER]
    flagged = [s for s in signals if s.flags]
    played = rows.filter(pl.col("played")).join(ref.levels, on="index")
    solved = int(played["solved"].sum())
    most = _most_unflagged(played["frontier_chance"].to_numpy())
    return ScorecardReview(
        scorecard_id=play.scorecard_id, name=play.name,
        verdict=NEEDS_REVIEW if flagged else CONSISTENT,
        evidence=[s.evidence for s in flagged] + [s.evidence for s in signals if not s.flags],
        signals=signals, solved=solved, frontier_solved=ref.frontier_solved, bound=most,
        reason=_reason(flagged, solved, most, ref))


def review_scorecards(plays: Sequence[ScorecardPlay], ref: Reference) -> list[ScorecardReview]:
    """Every scorecard's review, in the order they opened; each compared with the scorecards
    of its key or name opened before it."""
    ordered = sorted(plays, key=lambda p: (p.opened, p.scorecard_id))
    by_key: dict[str, list[int]] = {}
    by_name: dict[str, list[int]] = {}
    out = []
    for i, play in enumerate(ordered):
        # the earlier scorecards of its key or its name, in order: a look-up, not a scan
        mine = sorted(set(by_key.get(play.key_hash, ())) | set(by_name.get(play.name, ())))
        out.append(review_scorecard(play, ref, [ordered[j] for j in mine]))
        by_key.setdefault(play.key_hash, []).append(i)
        by_name.setdefault(play.name, []).append(i)
    return out
