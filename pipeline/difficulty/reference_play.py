"""The reference play on a table of levels: ``report/reference.parquet``, the compute frontier.

``sokoforge panel VERSION`` writes it beside ``panel.parquet`` (``write_reference``): every
reference agent (``engine.agents.reference``) on every level, each board played under the
symmetries of ``REFERENCE_TURNS`` (a turn changes a search's tie-breaks and nothing else), so
that each level's success share describes honest agents of the reference's strength, not one
deterministic agent. The review (``pipeline.scores.review``) reads it; the panel, which
rotation matches on and the difficulty model is fitted to, is not changed by it.
"""

from __future__ import annotations

__all__ = [
    "REFERENCE_FILE", "reference_of_version", "reference_rows", "write_reference",
]

from functools import partial
from pathlib import Path

import polars as pl

from engine.agents.reference import (
    REFERENCE_AGENTS,
    REFERENCE_TURNS,
    ReferenceAgent,
    reference_episode,
)
from engine.levels import parse_xsb, symmetries
from pipeline.difficulty.panel import pushes_of, write_played
from pipeline.versions.version import Version
from pipeline.workers import Workers

REFERENCE_FILE = "reference.parquet"  # in a version's report/
_SCHEMA = {"index": pl.Int16, "agent": pl.String, "family": pl.String, "budget": pl.Int32,
           "turn": pl.Int8, "solved": pl.Boolean, "steps": pl.Int32, "pushes": pl.Int32}


def reference_rows(agents: tuple[ReferenceAgent, ...], turns: tuple[int, ...],
                   item: tuple[int, str, int]) -> list[dict]:
    """One level's rows (``item``: index, xsb, max_steps): every agent on every turn of it."""
    index, xsb, max_steps = item
    forms = symmetries(parse_xsb(xsb))
    rows = []
    for turn in turns:
        level = parse_xsb(forms[turn])
        for agent in agents:
            played = reference_episode(level, int(max_steps), agent)
            rows.append({"index": index, "agent": agent.name, "family": agent.family,
                         "budget": agent.budget, "turn": turn, "solved": played.solved,
                         "steps": played.steps, "pushes": pushes_of(level, played.actions)})
    return rows


def reference_of_version(version: Version, workers: Workers,
                         agents: tuple[ReferenceAgent, ...] = REFERENCE_AGENTS,
                         turns: tuple[int, ...] = REFERENCE_TURNS) -> pl.DataFrame:
    """The reference played on every level of ``version``: one row per level, turn and agent
    (the panel's columns and ``turn``), by level, then turn, then agent."""
    levels = version.levels(["index", "xsb", "max_steps"]).sort("index")
    items = list(levels.select("index", "xsb", "max_steps").iter_rows())
    played = workers.map(partial(reference_rows, agents, turns), items, label="reference")
    return pl.DataFrame([row for rows in played for row in rows], schema=_SCHEMA)


def write_reference(datasets: Path, name: str, workers: Workers) -> Path:
    """Write ``report/reference.parquet`` of version ``name`` (the report folder is made if
    needed; a hidden version's its owner's alone)."""
    return write_played(datasets, name, REFERENCE_FILE,
                        lambda v: reference_of_version(v, workers))
