"""One served dataset version: its checked levels and what play needs of each, computed once.

Loading (through ``pipeline.versions.version``) refuses a version whose ``levels.parquet`` is
missing, altered (sha256 against the manifest) or of an unknown format, so the server never plays
levels nobody committed to.
"""

from __future__ import annotations

__all__ = [
    "COLUMNS", "DEAD_CHECK_STATES", "DatasetError", "FORMATS", "ForwardSolvability", "LOOK_COLUMNS",
    "SERVED_SET_INDEX", "ServedLevel", "ServedVersion", "encode_image", "load_version",
]

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.episode import UnplayableLevel, check_playable
from engine.errors import SokoforgeError
from engine.levels import Level, LevelError, State, parse_xsb
from engine.pictures.look import LOOKS, Look, LookError, Painter, painter, stored_look
from pipeline.errors import InputError, PipelineError
from pipeline.scores.items import is_pool
from pipeline.spec import version_look
from pipeline.versions.manifest import Manifest
from pipeline.versions.version import open_version
from serve.games.framezip import Picture
from serve.games.pool import Pool, load_pool

FORMATS = (1,)
COLUMNS = ("index", "tier", "n_crates", "xsb", "optimal_moves", "max_steps")
LOOK_COLUMNS = ("theme", "noise_seed")  # absent from versions written before looks existed
SOLUTION = "solution"  # an optimal solution in LURD, shown for a public game's levels
# A level's solvable set is precomputed when its search holds at most this many dense states
# (10 bytes each while searching); larger boards of imported collections are judged on demand.
SERVED_SET_INDEX = 2**24
# States a forward search may store to judge one end state of such a level (13 bytes each).
DEAD_CHECK_STATES = 2_000_000


class DatasetError(SokoforgeError, ValueError):
    """A version that cannot be served, with the reason and the fix in one line."""


@dataclass(frozen=True, eq=False)
class ServedLevel:
    """One level as play sees it: the board, its budget, and precomputed images and states."""

    index: int
    tier: int
    n_crates: int
    level: Level
    optimal_moves: int
    max_steps: int
    goal: Picture
    start: Picture
    solvable: Any
    look: Look
    painter: Painter
    solution: str | None = None

    @property
    def noisy(self) -> bool:
        """Whether every step has its own noise (so a frame depends on the step, not only the
        state)."""
        return self.look.noisy

    def frame(self, state: State | None, step: int) -> np.ndarray:
        """The RGB observation of ``state`` after ``step`` actions, in the level's look."""
        return self.painter.frame(state, step)

    def is_dead(self, state: Any) -> bool:
        """Whether the level can no longer be solved from ``state`` (exact: backward search)."""
        return not self.solvable.is_solvable(state)


@dataclass(frozen=True, eq=False)
class ServedVersion:
    """The levels of one version in play order, grouped into tiers of consecutive levels;
    a pool's (an adaptive game's) with its item parameters, ``pool``."""

    version: str
    game: str
    manifest: Manifest
    levels: tuple[ServedLevel, ...]
    tiers: tuple[tuple[int, int], ...]
    sha256: str
    folder: Path | None = None  # where it was loaded from (its report/ holds the line's fit)
    pool: Pool | None = None

    @property
    def episodes(self) -> int:
        """How many episodes a session plays: every level, or a pool's ``episodes``."""
        return len(self.levels) if self.pool is None else self.pool.episodes

    @property
    def order(self) -> str:
        """``ramp`` (a build: easiest first within each tier), ``file`` (an imported
        collection, played in its files' order) or ``adaptive`` (a pool: each session's
        levels chosen as it plays)."""
        if self.pool is not None:
            return "adaptive"
        manifest = self.manifest
        generator: Mapping[str, Any] = manifest.get("generator") or {}
        imported = (manifest.get("seed_source") == "imported" or bool(manifest.get("sources"))
                    or generator.get("method") == "imported")
        return "file" if imported else "ramp"

    def spec(self) -> dict[str, Any]:
        """The public numbers of the served set: counts and budgets, never layouts (nor a
        pool's item parameters)."""
        spec = self.manifest.get("spec") or {}
        tiers = []
        for t, (lo, hi) in enumerate(self.tiers):
            block = self.levels[lo:hi + 1]
            moves = [lv.optimal_moves for lv in block]
            steps = [lv.max_steps for lv in block]
            tiers.append({
                "index": t, "levels": len(block), "range": [lo, hi],
                "crates": block[0].n_crates,
                "optimal_moves": {"min": min(moves), "max": max(moves),
                                  "mean": round(float(np.mean(moves)), 2)},
                "max_steps": {"min": min(steps), "max": max(steps)}})
        sizes = sorted({(lv.level.height, lv.level.width) for lv in self.levels})
        commitment: Mapping[str, Any] = self.manifest.get("seed_commitment") or {}
        return {
            "version": self.version, "game": self.game, "games": [self.game],
            "episodes": self.episodes, "tiers": tiers,
            "boards": [list(s) for s in sizes],
            "look": {"name": version_look(self.manifest),
                     "noise": bool((self.manifest.get("spec") or {}).get("noise", False)),
                     "themed_levels": sum(lv.look.name == "themed" for lv in self.levels)},
            "observation": {"shape": [64, 64, 3], "dtype": "uint8", "encoding": "base64-raw"},
            "actions": {"0": "up", "1": "down", "2": "left", "3": "right"},
            "step_budget": spec.get("budget") or {},
            "levels_sha256": self.sha256,
            "seed_commitment": commitment.get("sha256"),
            "rotated_from": self.manifest.get("rotated_from"),
            "order": self.order,
            "public_seed": self.manifest.get("public_seed"),
            **({} if self.pool is None else {"adaptive": {
                "pool": len(self.levels), "episodes": self.pool.episodes,
                "parallel": self.pool.block}}),
        }


def load_version(root: Path, version: str) -> ServedVersion:
    """Read and check ``root/version``, then precompute start states, images and solvable sets."""
    try:
        opened = open_version(Path(root), version, strict=False)
    except InputError as e:  # VersionMissing too: its one wording, with the closest name
        raise DatasetError(str(e)) from None
    manifest, manifest_path = opened.manifest, opened.manifest_path
    look = version_look(manifest)
    if look not in LOOKS:
        raise DatasetError(f"{manifest_path}: unknown look {look!r}; this server draws "
                           f"{', '.join(LOOKS)}")
    rows = _read_rows(opened.levels_path)
    pool = None
    if is_pool(manifest):  # before the levels' precompute: a pool never calibrated is refused
        try:
            pool = load_pool(opened.folder, manifest, [int(r["tier"]) for r in rows])
        except PipelineError as e:
            raise DatasetError(str(e)) from None
    levels = tuple(_served_level(row, look) for row in rows)
    return ServedVersion(version=str(manifest.get("version", version)),
                         game=str(manifest.get("game") or "standard"), manifest=manifest,
                         levels=levels, tiers=_tier_ranges([lv.tier for lv in levels]),
                         sha256=opened.sha256, folder=opened.folder, pool=pool)


def _read_rows(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        # ParquetFile, not read_table: the latter imports pyarrow.dataset (and pandas), ~1 s
        table = pq.ParquetFile(path).read()
    except Exception as e:  # pyarrow raises several types for a damaged file
        raise DatasetError(f"{path} cannot be read as Parquet ({e})") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise DatasetError(f"{path} lacks the column(s) {', '.join(missing)}")
    rows = table.select(list(COLUMNS) + [c for c in (*LOOK_COLUMNS, SOLUTION)
                                         if c in table.column_names]).to_pylist()
    if not rows:
        raise DatasetError(f"{path} holds no levels")
    if [r["index"] for r in rows] != list(range(len(rows))):
        raise DatasetError(f"{path}: the index column is not 0..{len(rows) - 1} in order")
    return rows


def _served_level(row: dict[str, Any], version_look: str) -> ServedLevel:
    from engine.search.index import StateSpaceTooLarge
    from engine.search.reverse import solvable_set

    try:
        level = parse_xsb(row["xsb"])
    except LevelError as e:
        raise DatasetError(f"level {row['index']}: {e}") from None
    try:
        look = stored_look(version_look, row)
    except LookError as e:
        raise DatasetError(f"level {row['index']}: {e}") from None
    try:
        solvable: Any = solvable_set(level, max_size=SERVED_SET_INDEX)
    except StateSpaceTooLarge:
        solvable = ForwardSolvability(level)  # solved to optimal when it was published
    else:
        if not solvable.is_solvable(level.start):
            raise DatasetError(f"level {row['index']} cannot be solved from its start")
    try:
        check_playable(level, int(row["max_steps"]))
    except UnplayableLevel as e:
        raise DatasetError(f"level {row['index']}: {e}") from None
    drawn = painter(level, look)
    return ServedLevel(
        index=int(row["index"]), tier=int(row["tier"]), n_crates=int(row["n_crates"]),
        level=level, optimal_moves=int(row["optimal_moves"]), max_steps=int(row["max_steps"]),
        goal=Picture(encode_image(drawn.goal())),
        start=Picture(encode_image(drawn.frame(level.start, 0))),
        solvable=solvable, look=look, painter=drawn, solution=row.get(SOLUTION))


@dataclass(frozen=True, eq=False)
class ForwardSolvability:
    """Whether a state can still be solved, for levels whose solvable set is too large to
    keep: a crate on a dead square or frozen off its goal is proof; otherwise a bounded forward
    search decides, and one that does not finish counts as solvable (no unproven deadlock)."""

    level: Level
    max_states: int = DEAD_CHECK_STATES

    def is_solvable(self, state: Any) -> bool:
        from engine.search.deadlock import dead_squares, is_frozen_dead
        from engine.search.solver import solve

        dead = dead_squares(self.level).ravel()
        goals = self.level.goals.ravel()
        if any(dead[c] or (not goals[c] and is_frozen_dead(self.level, state, c))
               for c in state.crates):
            return False
        return solve(self.level, state, max_states=self.max_states).status != "unsolvable"


def encode_image(image: np.ndarray) -> str:
    """Base64 of the raw C-order bytes of a (64, 64, 3) uint8 image."""
    return base64.b64encode(np.ascontiguousarray(image, dtype=np.uint8).tobytes()).decode("ascii")


def _tier_ranges(tiers: list[int]) -> tuple[tuple[int, int], ...]:
    """Inclusive index ranges of the runs of equal tier numbers, in play order."""
    out: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(tiers) + 1):
        if i == len(tiers) or tiers[i] != tiers[start]:
            out.append((start, i - 1))
            start = i
    return tuple(out)
