"""The audit of a rotation says how far one agent's score is expected to move, and from what."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.precision import expected_move
from pipeline.scores.round_move import MODEL, PANEL, round_move

TIERS = np.repeat([0, 1, 2, 3], [25, 25, 30, 20])


def _panel(rates: dict[str, list[float]], seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for agent, per_tier in rates.items():
        for i, t in enumerate(TIERS):
            rows.append({"index": i, "agent": agent, "family": agent[:1], "budget": 64,
                         "solved": bool(rng.random() < per_tier[t]), "steps": 10})
    return pl.DataFrame(rows)


def test_without_a_panel_the_move_comes_from_the_binomial_model_and_says_so():
    move = round_move("p", "n", TIERS, TIERS, None, None)
    assert move.source == MODEL
    assert "binomial model" in move.statement and "no agent panel on p and n" in move.statement
    half = next(r for r in move.rows if r["success rate"] == "50%")
    assert half["expected |move|"] == expected_move([100], [0.5]).mean_abs


def test_with_panels_on_both_rounds_the_move_is_each_panel_agents_own():
    rates = {"greedy": [0.95, 0.7, 0.4, 0.1], "bfs": [0.9, 0.5, 0.2, 0.05]}
    prev, new = _panel(rates, 1), _panel(rates, 2)
    move = round_move("p", "n", TIERS, TIERS, prev, new)
    assert move.source == PANEL and move.statement.startswith("From the panel (2 agents")
    by_agent = {r["agent"]: r for r in move.rows}
    for agent in rates:
        before = int(prev.filter(pl.col("agent") == agent)["solved"].sum())
        after = int(new.filter(pl.col("agent") == agent)["solved"].sum())
        assert by_agent[agent]["move"] == after - before
        assert 2.0 < by_agent[agent]["expected |move|"] < 6.0


def test_a_panel_on_one_round_only_falls_back_to_the_model_naming_the_missing_one():
    move = round_move("p", "n", TIERS, TIERS, _panel({"a": [0.5] * 4}, 1), None)
    assert move.source == MODEL and "no agent panel on n" in move.statement
