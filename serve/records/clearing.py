"""Clearing a scorecard after source review, and what a clearing does to later reviews.

``clear_scorecard`` reads the scorecard from the server's store (it must be closed on the
version) and appends its clearing, with its solved count, to the version's log
(``pipeline.versions.clearances``). A cleared result is play the project now knows to be
within the rule, so every later review of the version raises its frontier to it
(``raise_frontier`` with the cleared solved count: K rises); and every version linked to it
on its IRT line (``sokoforge irt V --line``) raises its own where the line puts the cleared
name: the name's ability on the line, through the reviewed version's own players on the same
scale, gives its expected solved count there. Where the line cannot link them (no fit, the
name or the version not on one scale, no player of the version on it), nothing rises and the
review says why.
"""

from __future__ import annotations

__all__ = ["Raised", "clear_scorecard", "cleared_reference", "linked_solved", "unclear_scorecard"]

import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from pipeline.difficulty.logistic import sigmoid
from pipeline.errors import InputError, PipelineError
from pipeline.scores.linking import read_line, version_line
from pipeline.scores.review import Reference, ability, raise_frontier
from pipeline.versions.clearances import (
    CLEAR,
    UNCLEAR,
    Clearance,
    cleared,
    entry,
    record_clearance,
)
from pipeline.versions.rounds import version_folder
from serve.stores import Store, StoreError, read_store, shown


class Raised(NamedTuple):
    """A reference after the clearings: the ``reference``, the ``solved`` count its frontier
    was raised to (None: not raised) and one ``notes`` line per clearing considered."""

    reference: Reference
    solved: float | None
    notes: list[str]


def _solved_on(db: str, scorecard_id: str, version: str) -> tuple[str, int]:
    """The name and solved count of a scorecard closed on ``version`` (``InputError`` when
    the store has no such scorecard)."""
    async def read(store: Store):
        return await store.scorecard(scorecard_id)

    try:
        card = read_store(db, read)
    except StoreError as e:
        raise InputError(str(e)) from None
    if card is None or card.closed is None or card.result is None:
        raise InputError(f"no closed scorecard {scorecard_id[:40]!r} in the store {shown(db)}")
    games = [g for g, v in (card.result.get("versions") or {}).items() if v == version]
    if not games:
        raise InputError(f"the scorecard {scorecard_id} did not play {version}")
    return card.name, int(card.result["games"][games[0]]["solved"])


def clear_scorecard(datasets: Path, version: str, db: str, scorecard_id: str, note: str,
                    now: float | None = None) -> Clearance:
    """Record that a person read ``scorecard_id``'s source and cleared it, with ``note``."""
    folder = version_folder(datasets, version)
    if not note.strip():
        raise InputError("--clear needs --note TEXT: what the source review found")
    name, solved = _solved_on(db, scorecard_id, version)
    return record_clearance(folder, version, entry(CLEAR, scorecard_id, name, solved, note,
                                                   time.time() if now is None else now))


def unclear_scorecard(datasets: Path, version: str, scorecard_id: str, note: str = "",
                      now: float | None = None) -> Clearance:
    """Undo a clearing (logged, with ``note``)."""
    folder = version_folder(datasets, version)
    was = cleared(folder).get(scorecard_id)
    if was is None:
        raise InputError(f"{scorecard_id[:40]} is not cleared on {version}")
    return record_clearance(folder, version, entry(UNCLEAR, scorecard_id, was.name, was.solved,
                                                   note, time.time() if now is None else now))


def linked_solved(datasets: Path, version: str, ref: Reference, name: str, source: str
                  ) -> tuple[float | None, str]:
    """The expected solved count on ``version`` of ``name``, cleared on ``source``, from the
    line fit beside ``version``; None and why when the line does not link them.

    Each player of ``version`` on the cleared name's scale has an ability on the line and a
    shift of the version's level chances (``ability`` of its solved count): a least-squares
    line through those pairs (slope 1 with one player) maps the name's ability to a shift,
    whose chances summed are its expected count."""
    fit = read_line(datasets / version)
    if fit is None:
        return None, (f"no IRT line fit beside {version} (sokoforge irt {version} --line): "
                      f"{name}'s clearing on {source} does not raise its frontier yet")
    agents = {a["name"]: a for a in fit["agents"]}
    me = agents.get(name)
    if me is None or source not in me.get("versions", {}):
        return None, (f"the line fit beside {version} does not hold {name} on {source}: "
                      "its clearing does not raise the frontier here yet")
    peers = [a for a in fit["agents"] if a["scale"] == me["scale"] and version in a["versions"]]
    if not peers:
        return None, (f"the line does not link {source} and {version} (no player of "
                      f"{version} on {name}'s scale): its clearing does not raise the "
                      "frontier here yet")
    base = ref.levels["base"].to_numpy()
    x = np.array([a["ability"] for a in peers], dtype=np.float64)
    shift = np.array([ability(base, round(a["versions"][version]["success_rate"] * base.size))
                      for a in peers])
    slope = 1.0 if len(peers) < 2 or np.ptp(x) == 0 else float(np.polyfit(x, shift, 1)[0])
    at = float(np.mean(shift) + slope * (me["ability"] - float(np.mean(x))))
    clipped = np.clip(base, 0.02, 0.98)  # as the review clips a level's chance
    logits = np.log(clipped / (1 - clipped))
    expected = float(sigmoid(logits + at).sum())
    return expected, (f"{name}, cleared on {source} at {me['versions'][source]['solved']} "
                      f"solved, is expected to solve {expected:.1f} here (its ability "
                      f"{me['ability']:+.2f} on the line, through {len(peers)} player(s) "
                      f"of {version})")


def _standing(folder: Path, before: float | None) -> list[Clearance]:
    """The clearings of a version that stand (at ``before``, when given)."""
    return [c for c in cleared(folder, before).values()]


def cleared_reference(datasets: Path, version: str, ref: Reference,
                      before: float | None = None) -> Raised:
    """``ref`` with its frontier raised to the best cleared result of ``version`` and of the
    versions linked to it on its line (see the module text); with ``before``, the clearings
    as they stood then (a round closed again judges as it judged at its close)."""
    best: float | None = None
    notes: list[str] = []
    for c in _standing(datasets / version, before):
        notes.append(f"{c.name} ({c.scorecard_id}) cleared on {c.date} with {c.solved} "
                     "solved: the frontier rises to it")
        best = max(best or 0.0, float(c.solved))
    try:
        line = version_line(datasets, version)
    except PipelineError:  # a sibling that cannot be read: this version's clearings still count
        line = [version]
    for other in line:
        if other == version:
            continue
        for c in _standing(datasets / other, before):
            solved, note = linked_solved(datasets, version, ref, c.name, other)
            notes.append(note)
            if solved is not None:
                best = max(best or 0.0, solved)
    if best is None:
        return Raised(ref, None, notes)
    return Raised(raise_frontier(ref, best), best, notes)
