"""The fair-play review: which scorecards of a version need a look by a person, and why.

Pure statistics over tables (``serve.records.review`` reads the store and replays the episodes): the
version's levels with its agent panel (``reference``), and one scorecard's levels as played
(``PLAY_SCHEMA``). Each signal compares what the scorecard did with what an honest agent,
within the rule of 256 dynamics calls per step, would be expected to do, and says how far
out it is as a p-value: the chance that such an agent shows at least as much. Three signals
vote (``VOTING``); a scorecard needs review when any of them is below ``THRESHOLD``, so that
an honest agent is flagged at most ``FALSE_FLAG_RATE`` of the time (Bonferroni over three
tests). The others are shown beside them and never decide. A verdict triages for source
review: it proves nothing.
"""

from __future__ import annotations

__all__ = [
    "FALSE_FLAG_RATE", "LEVEL_SCHEMA", "PLAY_SCHEMA", "RULE_BUDGET", "Reference",
    "ScorecardPlay", "ScorecardReview", "Signal", "THRESHOLD", "VOTING", "ability",
    "at_least", "detours", "frontier", "hard_optimal", "person_fit", "reference",
    "replay", "review_scorecard", "review_scorecards", "solve_chances", "timing",
]

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import polars as pl

from pipeline.difficulty.logistic import sigmoid
from pipeline.difficulty.rank_metrics import spearman

FALSE_FLAG_RATE = 0.01  # an honest agent within the rule is flagged at most this often
VOTING = ("hard_optimal", "frontier", "replay")
THRESHOLD = FALSE_FLAG_RATE / len(VOTING)  # each voting signal's p-value must be below it
RULE_BUDGET = 256  # the benchmark's rule: at most this many dynamics calls per step
NEEDS_REVIEW, CONSISTENT = "needs review", "consistent"
_CLIP = 0.02  # no level's chance of being solved is taken as below 2% or above 98%

# the version's levels, as ``reference`` needs them
LEVEL_SCHEMA = {"index": pl.Int64, "optimal_moves": pl.Int64, "optimal_pushes": pl.Int64,
                "difficulty": pl.Float64, "reachable_states": pl.Int64}
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
    flagging signals' sentences first) and every signal."""

    scorecard_id: str
    name: str
    verdict: str
    evidence: list[str]
    signals: list[Signal]

    def to_dict(self) -> dict:
        return {"scorecard_id": self.scorecard_id, "name": self.name, "verdict": self.verdict,
                "evidence": self.evidence, "signals": [s.to_dict() for s in self.signals]}


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
    """What honest play looks like on a version, from its levels and its agent panel.

    ``levels``: per level index, optimal_moves, optimal_pushes, reachable_states, ``base``
    (the chance an agent of the panel's mean ability solves it), ``frontier`` (no panel agent
    within the rule solves it), ``hard`` (none within the rule solves it push-optimally),
    ``straight`` (the panel's chance of playing it in exactly its optimal moves).
    ``hard_rate``: how often one panel agent within the rule is push-optimal where the others
    are not (left out in turn), the honest rate on a hard level. ``best_within``: the share
    of the levels the best panel agent within the rule solves, the most an honest agent is
    taken to solve when its chances on the frontier are judged.
    """

    levels: pl.DataFrame
    hard_rate: float
    agents: int
    best_within: float = 1.0


def _num(x: float) -> float | int:
    if isinstance(x, (int, np.integer)) or float(x).is_integer():
        return int(x)
    return float(f"{x:.4g}")


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), _CLIP, 1 - _CLIP)
    return np.log(p / (1 - p))


def _push_optimal(solved: pl.Expr, steps: pl.Expr, pushes: pl.Expr) -> pl.Expr:
    """Solved with no more pushes than the level's optimal solution, or in its optimal moves."""
    return solved & ((pushes <= pl.col("optimal_pushes")) | (steps <= pl.col("optimal_moves")))


def reference(levels: pl.DataFrame, panel: pl.DataFrame) -> Reference:
    """The ``Reference`` of a version from its levels (``LEVEL_SCHEMA``'s columns) and its
    panel (``report/panel.parquet``: index, agent, budget, solved, steps, pushes)."""
    lv = levels.with_columns(pl.lit(None).alias(c) for c in LEVEL_SCHEMA
                             if c not in levels.columns)  # older versions lack some columns
    lv = lv.select(list(LEVEL_SCHEMA)).cast(LEVEL_SCHEMA)  # type: ignore[arg-type]
    lv = lv.with_columns(pl.col("difficulty").clip(0.0, 1.0))
    p = panel.select("index", "agent", "budget", "solved", "steps", "pushes").cast(
        {"index": pl.Int64}).join(lv, on="index")
    p = p.with_columns(po=_push_optimal(pl.col("solved"), pl.col("steps"), pl.col("pushes")),
                       straight=pl.col("solved") & (pl.col("steps") == pl.col("optimal_moves")))
    agents = p["agent"].n_unique()
    within = p.filter(pl.col("budget") <= RULE_BUDGET)
    per = (within.group_by("index").agg(frontier=~pl.col("solved").any(),
                                        hard=~pl.col("po").any(),
                                        share=pl.col("solved").mean())
           .join(p.group_by("index").agg(straight=((pl.col("straight").sum() + 0.5)
                                                   / (pl.len() + 1))), on="index"))
    lv = lv.join(per, on="index", how="left").sort("index").with_columns(
        pl.col("frontier").fill_null(False), pl.col("hard").fill_null(False),
        pl.col("straight").fill_null(0.5))
    # a level's chance for the panel's mean agent within the rule: its share of them solving,
    # beside the difficulty model's chance for the reference planner (1 - difficulty)
    share = lv["share"].fill_null(0.5).to_numpy()
    model = 1.0 - lv["difficulty"].fill_null(0.5).to_numpy()
    base = sigmoid((_logit(share) + _logit(model)) / 2)
    lv = lv.drop("share").with_columns(pl.Series("base", base))
    best = (within.group_by("agent").agg(pl.col("solved").mean())["solved"].max()
            if within.height else None)
    return Reference(lv, _hard_rate(within), agents,
                     1.0 if best is None else float(best))  # type: ignore[arg-type]


def _hard_rate(within: pl.DataFrame) -> float:
    """The left-out rate: each panel agent within the rule, on the levels where none of the
    others is push-optimal, how often it is; smoothed by one in two."""
    hits = trials = 0
    for agent in within["agent"].unique().sort().to_list():
        others = (within.filter(pl.col("agent") != agent).group_by("index")
                  .agg(pl.col("po").any().alias("others")))
        mine = within.filter(pl.col("agent") == agent).join(others, on="index")
        mine = mine.filter(~pl.col("others"))
        hits += int(mine["po"].sum())
        trials += mine.height
    return (hits + 1) / (trials + 2)


def at_least(k: int, chances: Sequence[float] | np.ndarray) -> float:
    """P(X >= k) for X a sum of independent Bernoulli trials of ``chances`` (Poisson-binomial;
    a binomial when they are equal), exactly."""
    chances = np.asarray(chances, dtype=np.float64)
    if k <= 0:
        return 1.0
    if k > chances.size:
        return 0.0
    pmf = np.zeros(chances.size + 1)
    pmf[0] = 1.0
    for i, q in enumerate(chances):
        pmf[1:i + 2] = pmf[1:i + 2] * (1 - q) + pmf[:i + 1] * q
        pmf[0] *= 1 - q
    return float(min(1.0, max(0.0, pmf[k:].sum())))


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
    ``within_rule``, of no more than the best panel agent's within the rule)."""
    played = rows.filter(pl.col("played")).join(ref.levels, on="index")
    base = played["base"].to_numpy()
    solved = int(played["solved"].sum())
    if within_rule:
        solved = min(solved, round(ref.best_within * played.height))
    theta = ability(base, solved)
    return played.with_columns(pl.Series("chance", sigmoid(_logit(base) + theta)))


def hard_optimal(rows: pl.DataFrame, ref: Reference) -> Signal:
    """Solved push-optimally where no panel agent within the rule is, against the panel's
    left-out rate of that."""
    played = rows.filter(pl.col("played")).join(ref.levels, on="index").filter(pl.col("hard"))
    hits = played.filter(_push_optimal(pl.col("solved"), pl.col("steps"), pl.col("pushes")))
    k, n, q = hits.height, played.height, ref.hard_rate
    p = at_least(k, np.full(n, q))
    return Signal("hard_optimal", k, n * q, p, True,
                  "levels solved in optimal pushes where no panel agent within 256 calls a "
                  "step is, against the panel's own rate of that",
                  f"{k} of the {n} levels on which no panel agent within the rule pushes "
                  f"optimally were solved in optimal pushes (an honest agent: {n * q:.1f} "
                  f"expected; p = {p:.2g}){_levels(hits)}")


def frontier(rows: pl.DataFrame, ref: Reference) -> Signal:
    """Successes on the levels no panel agent within the rule solves, against what an agent of
    the scorecard's overall success (at most the best panel agent's within the rule: more is
    already beyond what the rule is known to reach) is expected to get there."""
    played = solve_chances(rows, ref, within_rule=True).filter(pl.col("frontier"))
    k = int(played["solved"].sum())
    expected = float(played["chance"].sum())
    p = at_least(k, played["chance"].to_numpy())
    return Signal("frontier", k, expected, p, True,
                  "successes on levels no panel agent within 256 calls a step solves, against "
                  "an agent of the same overall success, at most the best panel agent's",
                  f"{k} of the {played.height} levels no panel agent within the rule solves "
                  f"were solved; an agent of this overall success (at most the best panel "
                  f"agent's within the rule, {ref.best_within:.0%}) would solve {expected:.1f} "
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
    return Signal("replay", k, expected, p, True,
                  "levels the same key or name had only failed before, now played in exactly "
                  "their optimal moves", sentence)


def person_fit(rows: pl.DataFrame, ref: Reference) -> Signal:
    """The standardised log-likelihood lz of the solved levels under the difficulty model at
    the scorecard's ability: far below 0 when easy levels fail while hard ones are solved."""
    played = solve_chances(rows, ref)
    q = np.clip(played["chance"].to_numpy(), 1e-6, 1 - 1e-6)
    y = played["solved"].to_numpy().astype(np.float64)
    logit = np.log(q / (1 - q))
    l0 = float((y * np.log(q) + (1 - y) * np.log(1 - q)).sum())
    mean = float((q * np.log(q) + (1 - q) * np.log(1 - q)).sum())
    var = float((q * (1 - q) * logit ** 2).sum())
    lz = (l0 - mean) / math.sqrt(var) if var > 0 else 0.0
    p = 0.5 * math.erfc(-lz / math.sqrt(2)) if var > 0 else None
    return Signal("person_fit", lz, 0.0, p, False,
                  "how well the solved levels follow difficulty (lz; far below 0: easy ones "
                  "failed, hard ones solved)",
                  f"person fit lz = {lz:+.2f} over {played.height} levels (0 expected; "
                  f"{'p = ' + format(p, '.2g') if p is not None else 'undefined'})")


def detours(rows: pl.DataFrame, ref: Reference) -> Signal:
    """Actions that move no crate beyond the optimum on levels solved in optimal pushes: the
    no-ops and detours a solver's replay can add to hide itself."""
    played = rows.filter(pl.col("played")).join(ref.levels, on="index")
    noops = int((played["steps"] - played["moves"]).sum())
    optimal = played.filter(pl.col("solved") & (pl.col("pushes") <= pl.col("optimal_pushes")))
    padded = optimal.filter(pl.col("steps") > pl.col("optimal_moves"))
    extra = int((padded["steps"] - padded["optimal_moves"]).sum())
    share = padded.height / optimal.height if optimal.height else 0.0
    return Signal("detours", padded.height, 0.0, None, False,
                  "no-ops, and levels solved in optimal pushes with extra moves that push "
                  "nothing",
                  f"{noops} no-op action(s); {padded.height} of {optimal.height} levels solved "
                  f"in optimal pushes took {extra} extra non-pushing step(s) ({share:.0%})")


def timing(rows: pl.DataFrame, ref: Reference) -> Signal:
    """Whether the time before an episode's first action grows with its level's state space
    (Spearman), as a search before play does; timing is easy to fake, so it never votes."""
    timed = (rows.filter(pl.col("played") & pl.col("think_ms").is_not_null())
             .join(ref.levels, on="index").filter(pl.col("reachable_states").is_not_null()))
    if timed.height < 5:
        return Signal("timing", 0.0, 0.0, None, False,
                      "time to an episode's first action against its level's state space",
                      f"not enough timed episodes ({timed.height}): the store kept no arrival "
                      "times for most actions")
    think = timed["think_ms"].to_numpy()
    rho = spearman(think, np.log1p(timed["reachable_states"].to_numpy().astype(np.float64)))
    rho = 0.0 if not np.isfinite(rho) else float(rho)
    z = rho * math.sqrt(timed.height - 1)  # the rank correlation's null spread, 1/sqrt(n-1)
    p = 0.5 * math.erfc(z / math.sqrt(2))
    pace = timed["pace_ms"].drop_nulls()
    burst = (f"; then {float(np.median(pace.to_numpy())):.0f} ms between actions"
             if pace.len() else "")
    return Signal("timing", rho, 0.0, p, False,
                  "time to an episode's first action against its level's state space "
                  "(Spearman); never the only evidence",
                  f"first actions came after a median {float(np.median(think)):.0f} ms{burst}; "
                  f"their rank correlation with the levels' state spaces is {rho:+.2f} "
                  f"(p = {p:.2g}, shown, never voting)")


def _levels(hits: pl.DataFrame, most: int = 8) -> str:
    """`` (levels 3, 17, ...)``: the levels behind a count, numbered from 1 as messages are."""
    if hits.height == 0:
        return ""
    shown = [str(i + 1) for i in hits["index"].sort().to_list()]
    more = f" and {len(shown) - most} more" if len(shown) > most else ""
    return f" (level{'s' if len(shown) > 1 else ''} {', '.join(shown[:most])}{more})"


SIGNALS: tuple[Callable[[pl.DataFrame, Reference], Signal], ...] = (
    hard_optimal, frontier, person_fit, detours, timing)


def review_scorecard(play: ScorecardPlay, ref: Reference,
                     earlier: Sequence[ScorecardPlay] = ()) -> ScorecardReview:
    """The verdict on one scorecard: ``needs review`` when a voting signal is below
    ``THRESHOLD``; ``earlier`` are the same key's or name's scorecards closed before it."""
    rows = play.rows.select(list(PLAY_SCHEMA)).cast(PLAY_SCHEMA)  # type: ignore[arg-type]
    signals = [s(rows, ref) for s in SIGNALS]
    signals.insert(2, replay(rows, ref, [e.rows for e in earlier]))
    flagged = [s for s in signals if s.flags]
    verdict = NEEDS_REVIEW if flagged else CONSISTENT
    evidence = [s.evidence for s in flagged] + [s.evidence for s in signals if not s.flags]
    return ScorecardReview(play.scorecard_id, play.name, verdict, evidence, signals)


def review_scorecards(plays: Sequence[ScorecardPlay], ref: Reference) -> list[ScorecardReview]:
    """Every scorecard's review, in the order they opened; each compared with the scorecards
    of its key or name opened before it."""
    ordered = sorted(plays, key=lambda p: (p.opened, p.scorecard_id))
    out = []
    for i, play in enumerate(ordered):
        earlier = [e for e in ordered[:i]
                   if e.key_hash == play.key_hash or e.name == play.name]
        out.append(review_scorecard(play, ref, earlier))
    return out
