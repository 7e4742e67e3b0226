"""Game specs: the TOML file that says how many levels of which kind a version holds.

A spec is read once, checked field by field (a bad field is named in the error), and
then handed to every stage as an immutable value; its slots carry their optimal-length bands.
"""

from __future__ import annotations

__all__ = [
    "Adaptive", "COMPUTE_SOURCES", "DEFAULT_EPISODES", "DEFAULT_PARALLEL", "DEFAULT_POOL",
    "METHODS", "RESTARTS", "SPECS_DIR", "Spec", "SpecError", "Tier", "VISIBILITIES",
    "load_spec", "spec_from_dict", "version_look",
]

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.levels import MAX_CRATES, MAX_SIDE
from engine.pictures.look import LOOKS
from pipeline.errors import InputError

SPECS_DIR = Path(__file__).resolve().parent / "specs"
METHODS = ("goal_first", "scatter")
VISIBILITIES = ("hidden", "public")
# Where a version's compute_to_solve comes from: the grade features' regression, or the
# compute ladder played on every selected level (pipeline.difficulty.compute).
COMPUTE_SOURCES = ("predicted", "measured")
_TOP_FIELDS = {"name", "height", "width", "method", "candidates_per_slot", "max_attempts",
               "budget", "tiers", "look", "noise", "compute", "restarts", "visibility",
               "min_first_push_traps", "panel_tolerance", "adaptive"}
# How far (in levels) a rotation may move any panel agent's solved count (pipeline.rotate).
DEFAULT_PANEL_TOLERANCE = 1
RESTARTS = ("none", "level", "game")
_TIER_FIELDS = {"levels", "crates", "wall_density", "band_start", "band_end", "band"}
_BUDGET_FIELDS = {"multiple", "floor", "fixed"}
_ADAPTIVE_FIELDS = {"pool", "episodes", "parallel"}
DEFAULT_POOL, DEFAULT_EPISODES, DEFAULT_PARALLEL = 1000, 50, 1


class SpecError(InputError):
    """A spec that cannot be built, with the offending field named."""


@dataclass(frozen=True)
class Tier:
    """One difficulty tier: its size, crate count, wall density and band ramp.

    A ``flat`` tier has one band for every slot (``band = [lo, hi]`` in TOML): its levels are
    spread over the band rather than held to a sliding centre.
    """

    levels: int
    crates: int
    wall_density: float
    band_start: tuple[int, int]
    band_end: tuple[int, int]
    flat: bool = False

    def band(self, slot: int) -> tuple[int, int]:
        """The optimal-moves band of ``slot``: linear from start to end, hi >= lo + 2."""
        if self.flat:
            return self.band_start
        t = slot / (self.levels - 1) if self.levels > 1 else 0.0
        lo = round(self.band_start[0] + t * (self.band_end[0] - self.band_start[0]))
        hi = round(self.band_start[1] + t * (self.band_end[1] - self.band_start[1]))
        return lo, max(hi, lo + 2)


@dataclass(frozen=True)
class Adaptive:
    """An adaptive game's pool: ``pool`` levels over the spec's tiers (their ``levels`` are
    the shares, scaled to the pool), ``episodes`` per session, chosen ``parallel`` at a time
    (``pipeline.scores.adaptive``)."""

    pool: int = DEFAULT_POOL
    episodes: int = DEFAULT_EPISODES
    parallel: int = DEFAULT_PARALLEL


@dataclass(frozen=True)
class Spec:
    """A whole game: board size, generation method, tiers and the step-budget rule.

    ``budget_fixed`` > 0 gives every level that budget instead of the multiple of its
    optimum; ``min_first_push_traps`` is how many first pushes of each level must lead into
    a dead state; ``visibility`` says whether its versions may
    be shipped (``public``: seed in the manifest) or are a hidden set; ``panel_tolerance`` is
    how many levels a rotation may move any panel agent's solved count. The defaults are the
    game as it was before them.
    """

    name: str
    height: int
    width: int
    method: str
    candidates_per_slot: int
    max_attempts: int
    budget_multiple: int
    budget_floor: int
    tiers: tuple[Tier, ...]
    # How levels are drawn (engine.pictures.look.LOOKS); specs written before looks existed omit
    # both fields and mean the shared look without noise.
    look: str = "shared"
    noise: bool = False
    compute: str = "predicted"
    # what RESET may do when the game is served: unset, a hidden set allows nothing ("none")
    # and a practice set (public seed, imported) the whole game ("game")
    restarts: str | None = None
    budget_fixed: int = 0
    min_first_push_traps: int = 0
    visibility: str = "hidden"
    panel_tolerance: int = DEFAULT_PANEL_TOLERANCE
    # an adaptive game's pool ([adaptive] in TOML), None for a fixed game
    adaptive: Adaptive | None = None

    @property
    def n_levels(self) -> int:
        return sum(t.levels for t in self.tiers)

    def slots(self) -> list[tuple[int, int]]:
        """Every (tier, slot) of the game in play order."""
        return [(ti, s) for ti, t in enumerate(self.tiers) for s in range(t.levels)]

    def max_steps(self, optimal_moves: int) -> int:
        """The episode's step budget for a level with this optimum."""
        if self.budget_fixed:
            return self.budget_fixed
        return max(self.budget_floor, self.budget_multiple * optimal_moves)

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data, in the shape of its TOML file (for manifests).

        Fields added later (an unset ``restarts`` among them) appear only when they differ
        from their default, so a spec written before them keeps the same plain form (and its
        versions the same manifest).
        """
        budget = ({"fixed": self.budget_fixed} if self.budget_fixed else
                  {"multiple": self.budget_multiple, "floor": self.budget_floor})
        data: dict[str, Any] = {
            "name": self.name, "height": self.height, "width": self.width,
            "method": self.method, "candidates_per_slot": self.candidates_per_slot,
            "max_attempts": self.max_attempts, "budget": budget,
            "tiers": [_tier_dict(t) for t in self.tiers],
            "look": self.look, "noise": self.noise,
        }
        if self.compute != "predicted":  # the default stays implicit: older manifests agree
            data["compute"] = self.compute
        if self.restarts is not None:
            data["restarts"] = self.restarts
        if self.min_first_push_traps:
            data["min_first_push_traps"] = self.min_first_push_traps
        if self.visibility != "hidden":
            data["visibility"] = self.visibility
        if self.panel_tolerance != DEFAULT_PANEL_TOLERANCE:
            data["panel_tolerance"] = self.panel_tolerance
        if self.adaptive is not None:
            data["adaptive"] = {"pool": self.adaptive.pool, "episodes": self.adaptive.episodes,
                                "parallel": self.adaptive.parallel}
        return data

    def tier_shares(self) -> dict[int, float]:
        """Each tier's share of the game's levels (what a pool's sessions balance to)."""
        return {i: t.levels / self.n_levels for i, t in enumerate(self.tiers)}


def _tier_dict(tier: Tier) -> dict[str, Any]:
    data: dict[str, Any] = {"levels": tier.levels, "crates": tier.crates,
                            "wall_density": tier.wall_density}
    if tier.flat:
        data["band"] = list(tier.band_start)
    else:
        data["band_start"], data["band_end"] = list(tier.band_start), list(tier.band_end)
    return data


def load_spec(name_or_path: str | Path) -> Spec:
    """Read a spec by name (``standard`` = ``pipeline/specs/standard.toml``) or by path."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = SPECS_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        raise SpecError(f"spec {str(name_or_path)!r} not found (a name under {SPECS_DIR} "
                        "or a path to a .toml file)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SpecError(f"spec {path.name}: not valid TOML: {e}") from None
    return spec_from_dict(data, source=path.name)


def spec_from_dict(data: dict[str, Any], source: str = "spec") -> Spec:
    """Check plain data field by field and turn it into a ``Spec``."""
    _no_unknown(data, _TOP_FIELDS, source)
    name = _get(data, "name", str, source)
    height = _int(data, "height", source, 3, MAX_SIDE)
    width = _int(data, "width", source, 3, MAX_SIDE)
    method = _get(data, "method", str, source)
    if method not in METHODS:
        raise SpecError(f"{source}: field 'method' is {method!r}; expected one of {METHODS}")
    per_slot = _int(data, "candidates_per_slot", source, 1, 64)
    attempts = _int(data, "max_attempts", source, 1, 100_000)
    budget = _get(data, "budget", dict, source)
    _no_unknown(budget, _BUDGET_FIELDS, f"{source} [budget]")
    if "fixed" in budget:
        if set(budget) != {"fixed"}:
            raise SpecError(f"{source} [budget]: field 'fixed' excludes 'multiple' and "
                            "'floor' (a fixed budget is the same for every level)")
        fixed, multiple, floor = _int(budget, "fixed", f"{source} [budget]", 1, 30_000), 3, 0
    else:
        fixed = 0
        multiple = _int(budget, "multiple", f"{source} [budget]", 1, 100)
        floor = _int(budget, "floor", f"{source} [budget]", 0, 30_000)
    visibility = _get(data, "visibility", str, source) if "visibility" in data else "hidden"
    if visibility not in VISIBILITIES:
        raise SpecError(f"{source}: field 'visibility' is {visibility!r}; expected one of "
                        f"{VISIBILITIES}")
    traps = _int(data, "min_first_push_traps", source, 0, 64) \
        if "min_first_push_traps" in data else 0
    tolerance = _int(data, "panel_tolerance", source, 0, 10_000) \
        if "panel_tolerance" in data else DEFAULT_PANEL_TOLERANCE
    compute = data.get("compute", "predicted")
    if compute not in COMPUTE_SOURCES:
        raise SpecError(f"{source}: field 'compute' is {compute!r}; expected one of "
                        f"{COMPUTE_SOURCES}")
    raw_tiers = _get(data, "tiers", list, source)
    if not raw_tiers:
        raise SpecError(f"{source}: field 'tiers' is empty; a game needs at least one tier")
    interior = (height - 2) * (width - 2)
    tiers = []
    for i, raw in enumerate(raw_tiers):
        where = f"{source} tier {i}"
        if not isinstance(raw, dict):
            raise SpecError(f"{where}: expected a table")
        _no_unknown(raw, _TIER_FIELDS, where)
        crates = _int(raw, "crates", where, 1, MAX_CRATES)
        density = _get(raw, "wall_density", (float, int), where)
        if not 0.0 <= density < 1.0:
            raise SpecError(f"{where}: field 'wall_density' is {density}; expected 0 <= d < 1")
        free = interior - round(density * interior)
        if free < 2 * crates + 1:
            raise SpecError(f"{where}: field 'wall_density' {density} leaves {free} floor cells"
                            f" on {height}x{width}, too few for {crates} crates")
        if "band" in raw:
            if "band_start" in raw or "band_end" in raw:
                raise SpecError(f"{where}: field 'band' (flat) excludes 'band_start' and "
                                "'band_end' (a ramp)")
            start = end = _band(raw, "band", where)
        else:
            start, end = _band(raw, "band_start", where), _band(raw, "band_end", where)
        tiers.append(Tier(
            levels=_int(raw, "levels", where, 1, 10_000), crates=crates,
            wall_density=float(density), band_start=start, band_end=end, flat="band" in raw))
    look = data.get("look", "shared")
    if look not in LOOKS:
        raise SpecError(f"{source}: field 'look' is {look!r}; expected one of {LOOKS}")
    noise = data.get("noise", False)
    if not isinstance(noise, bool):
        raise SpecError(f"{source}: field 'noise' is {noise!r}; expected true or false")
    if noise and look != "themed":
        raise SpecError(f"{source}: field 'noise' is true but look is {look!r}; pixel noise is "
                        "part of a themed look (look = \"themed\")")
    restarts = data.get("restarts")
    if restarts is not None and restarts not in RESTARTS:
        raise SpecError(f"{source}: field 'restarts' is {restarts!r}; expected one of {RESTARTS}")
    adaptive = _adaptive(data["adaptive"], source) if "adaptive" in data else None
    if adaptive is not None:
        tiers = _scaled(tiers, adaptive.pool)
    return Spec(name, height, width, method, per_slot, attempts, multiple, floor, tuple(tiers),
                look, noise, compute, restarts, budget_fixed=fixed,
                min_first_push_traps=traps, visibility=visibility, panel_tolerance=tolerance,
                adaptive=adaptive)


def _adaptive(raw: Any, source: str) -> Adaptive:
    """The ``[adaptive]`` table checked field by field."""
    where = f"{source} [adaptive]"
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a table")
    _no_unknown(raw, _ADAPTIVE_FIELDS, where)
    pool = _int(raw, "pool", where, 1, 10_000) if "pool" in raw else DEFAULT_POOL
    episodes = _int(raw, "episodes", where, 1, 10_000) if "episodes" in raw \
        else DEFAULT_EPISODES
    if episodes > pool:
        raise SpecError(f"{where}: field 'episodes' is {episodes}, more than the pool's {pool} "
                        "levels; a session never shows a level twice")
    parallel = _int(raw, "parallel", where, 1, episodes) if "parallel" in raw \
        else DEFAULT_PARALLEL
    return Adaptive(pool, episodes, parallel)


def _scaled(tiers: list[Tier], pool: int) -> list[Tier]:
    """The tiers' sizes scaled to ``pool`` levels in all, each in proportion to its
    ``levels`` (largest remainders, ties to the earlier tier); idempotent, so a pool's
    recorded spec reads back the same. The bands keep their range: stretched over more
    slots, each tier's slots spread over the same optima as the ramp's."""
    total = sum(t.levels for t in tiers)
    exact = [t.levels * pool / total for t in tiers]
    sizes = [int(x) for x in exact]
    by_remainder = sorted(range(len(tiers)), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in by_remainder[:pool - sum(sizes)]:
        sizes[i] += 1
    if min(sizes) < 1:
        raise SpecError(f"[adaptive]: field 'pool' {pool} leaves a tier without levels; "
                        f"it needs at least {len(tiers)}")
    return [Tier(n, t.crates, t.wall_density, t.band_start, t.band_end, t.flat)
            for n, t in zip(sizes, tiers, strict=True)]


def version_look(manifest: Mapping[str, Any]) -> str:
    """The look a version's manifest names; versions made before looks existed are drawn in
    the shared look."""
    return str((manifest.get("spec") or {}).get("look", "shared"))


def _no_unknown(data: dict[str, Any], known: set[str], where: str) -> None:
    extra = sorted(set(data) - known)
    if extra:
        raise SpecError(f"{where}: unknown field {extra[0]!r}; known fields: {sorted(known)}")


def _get(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise SpecError(f"{where}: missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise SpecError(f"{where}: field {key!r} is {value!r}; wrong type")
    return value


def _int(data: dict[str, Any], key: str, where: str, lo: int, hi: int) -> int:
    value = _get(data, key, int, where)
    if not lo <= value <= hi:
        raise SpecError(f"{where}: field {key!r} is {value}; expected {lo}..{hi}")
    return value


def _band(data: dict[str, Any], key: str, where: str) -> tuple[int, int]:
    value = _get(data, key, list, where)
    if (len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            or not 1 <= value[0] <= value[1]):
        raise SpecError(f"{where}: field {key!r} is {value!r}; expected [lo, hi] with"
                        " 1 <= lo <= hi")
    return int(value[0]), int(value[1])
