"""The game registry: which version plays each game name, with its look, budgets and restarts.

A server serves one version per game; the registry is built once from the loaded versions and
refuses two versions of one game, so a game name always means one set of levels.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GameEntry", "RESTARTS", "Registry", "is_public", "manifest_is_public", "restarts_of"]

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from pipeline.spec import version_look
from serve.games.adaptive import Choices, ExposureCap
from serve.games.dataset import DatasetError, ServedVersion
from serve.games.episode import Run, new_run

RESTARTS = ("none", "level", "game")


@dataclass(frozen=True)
class GameEntry:
    """One served game: its version (levels, budgets, tiers), its look and what RESET may do.

    ``restarts``: ``none`` (a hidden benchmark game: no free retries), ``level`` (put the
    current level back to its start, keeping the steps used) or ``game`` (that, and a second
    RESET in a row starts every episode again).
    """

    name: str
    version: ServedVersion
    restarts: str
    look: str
    public: bool = False

    @property
    def episodes(self) -> int:
        return self.version.episodes

    @property
    def budgets(self) -> tuple[int, ...]:
        """Each level's step budget, in play order."""
        return tuple(lv.max_steps for lv in self.version.levels)

    @property
    def tiers(self) -> tuple[tuple[int, int], ...]:
        """A run's tiers as episode ranges: the version's, or a pool's blocks."""
        pool = self.version.pool
        return self.version.tiers if pool is None else pool.blocks

    def chooser(self, recorded: Sequence[int] = (),
                cap: ExposureCap | None = None) -> Choices | None:
        """A new session's chooser of its levels (a pool's game; None for a fixed one), which
        gives the ``recorded`` levels of its first episodes again and keeps to the exposure
        ``cap`` (``serve.arena.exposure``)."""
        pool = self.version.pool
        return None if pool is None else Choices(pool, self.version.levels, tuple(recorded),
                                                 cap=cap)

    def new_run(self, parallel: int = 1, recorded: Sequence[int] = (),
                cap: ExposureCap | None = None) -> Run:
        """A run of this game from its start, ``parallel`` episodes in flight (an adaptive
        one on the ``recorded`` levels first, keeping to the exposure ``cap``)."""
        chooser = self.chooser(recorded, cap)
        return new_run(self.version.levels if chooser is None else (), self.tiers, parallel,
                       chooser)

    def spec(self) -> dict[str, Any]:
        return {**self.version.spec(), "restarts": self.restarts, "public": self.public}


def is_public(version: ServedVersion) -> bool:
    """Whether people may see this version's boards (play it in the browser, watch replays):
    its manifest says ``visibility: public``, or it was imported and says no visibility.
    Anything else is a hidden benchmark set, shown to no one but the key that played it."""
    return manifest_is_public(version.manifest)


def manifest_is_public(manifest: Mapping[str, Any]) -> bool:
    """``is_public`` from the manifest alone, before any level is read."""
    visibility = manifest.get("visibility")
    if visibility is not None:
        return visibility == "public"
    generator = manifest.get("generator") or {}
    return generator.get("method") == "imported" or bool(manifest.get("sources"))


def restarts_of(version: ServedVersion) -> str:
    """The spec's ``restarts``; without one, ``game`` for a practice set (built from a public
    seed, imported, or public) and ``none`` for a hidden one or a pool."""
    spec = version.manifest.get("spec") or {}
    value = spec.get("restarts")
    if value is None and version.pool is not None:
        return "none"  # a pool is a hidden benchmark set whatever its seed
    if value is None:
        practice = version.manifest.get("public_seed") is not None or bool(
            version.manifest.get("imported") or version.manifest.get("source")) or is_public(
            version)
        return "game" if practice else "none"
    if value not in RESTARTS:
        raise DatasetError(f"version {version.version}: restarts must be one of "
                           f"{', '.join(RESTARTS)}, got {value!r}")
    return value


class Registry:
    """Game name -> ``GameEntry``, in the order the versions were given (the first is the
    default game of clients that play one)."""

    def __init__(self, versions: Iterable[ServedVersion]) -> None:
        self._games: dict[str, GameEntry] = {}
        for v in versions:
            if v.game in self._games:
                raise DatasetError(f"versions {self._games[v.game].version.version} and "
                                   f"{v.version} are both of game {v.game!r}; serve one "
                                   "version per game")
            self._games[v.game] = GameEntry(v.game, v, restarts_of(v), version_look(v.manifest),
                                            is_public(v))
        if not self._games:
            raise DatasetError("no version to serve")

    def __iter__(self) -> Iterator[GameEntry]:
        return iter(self._games.values())

    def __len__(self) -> int:
        return len(self._games)

    def get(self, name: str) -> GameEntry | None:
        return self._games.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._games)

    @property
    def first(self) -> GameEntry:
        return next(iter(self._games.values()))

    def by_version(self, version: str) -> GameEntry | None:
        return next((g for g in self if g.version.version == version), None)

    def versions(self) -> dict[str, str]:
        """Game name -> served version name."""
        return {g.name: g.version.version for g in self}
