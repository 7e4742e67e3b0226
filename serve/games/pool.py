"""A served pool: the item parameters an adaptive game chooses its levels by, read once.

A version whose spec has ``[adaptive]`` (``pipeline.scores.items.is_pool``) is a hidden pool
of levels; ``sokoforge panel`` wrote its ``report/items.parquet``. Each process that serves it
reads that table once, with the version (``serve.games.dataset.load_version``), into a
``Pool``: the arrays the choice, the ability and the equating need, in the levels' order.
"""

from __future__ import annotations

__all__ = ["STANDARD_SPEC", "Pool", "load_pool"]

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import PipelineError
from pipeline.scores.adaptive import ramp_weights
from pipeline.scores.items import model_sd, read_items
from pipeline.spec import SpecError, load_spec, spec_from_dict

STANDARD_SPEC = "standard"  # the game whose 100-level ramp a pool's ability is equated to


@dataclass(frozen=True, eq=False)
class Pool:
    """A pool's item parameters (one entry per level, in index order) and how its sessions
    run: ``episodes`` levels each, chosen ``block`` at a time, balanced to the tier
    ``targets``; ``ramp`` weighs the levels as the standard game's ramp weighs its tiers, and
    ``model_sd`` is the model's error on an agent outside the panel (``items.model_sd``),
    which every equated interval holds."""

    discrimination: np.ndarray
    difficulty: np.ndarray
    tiers: np.ndarray
    targets: dict[int, float]
    ramp: np.ndarray
    episodes: int
    block: int
    model_sd: float

    @property
    def blocks(self) -> tuple[tuple[int, int], ...]:
        """Each block's episodes as an inclusive range, in play order."""
        return tuple((lo, min(lo + self.block, self.episodes) - 1)
                     for lo in range(0, self.episodes, self.block))


def load_pool(folder: Path, manifest: Mapping[str, Any], tiers: list[int]) -> Pool:
    """The pool of the version in ``folder`` (its manifest and its levels' tiers, in index
    order); a pool never calibrated, or calibrated on other levels, is refused."""
    try:
        spec = spec_from_dict(manifest["spec"])
        standard = load_spec(STANDARD_SPEC)
    except SpecError as e:
        raise PipelineError(f"{folder.name}: {e}") from None
    assert spec.adaptive is not None  # a pool's spec has [adaptive]
    items = read_items(folder)
    if items["index"].to_list() != list(range(len(tiers))) or (
            items["tier"].to_list() != tiers):
        raise PipelineError(f"{folder.name}: report/items.parquet is not of its levels; run "
                            f"`sokoforge panel {folder.name}` again")
    level_tiers = np.asarray(tiers, dtype=np.int64)
    return Pool(discrimination=items["discrimination"].to_numpy().astype(np.float64),
                difficulty=items["difficulty"].to_numpy().astype(np.float64),
                tiers=level_tiers, targets=spec.tier_shares(),
                ramp=ramp_weights(level_tiers, standard.tier_shares()),
                episodes=min(spec.adaptive.episodes, len(tiers)),
                block=spec.adaptive.parallel, model_sd=model_sd(folder))
