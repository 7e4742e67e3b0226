"""Training trajectories: episodes played on public levels, written as a sharded Parquet set.

Each episode takes a level (drawn fresh from a spec, or from a public version) and actions of
one kind: ``random`` (uniform, for the level's whole budget), ``solver`` (an optimal
solution) or ``perturbed`` (an optimal solution with a few random actions inserted), played
until the engine's episode core ends it (``engine.episode``: solved, or the budget used). Every
draw is keyed by (seed, episode), and a shard is a fixed range of episodes, so the bytes do
not depend on how many workers made them or where.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_MIX", "EPISODES_SCHEMA", "EpisodeLevel", "FORMAT", "FRAMES_SCHEMA", "KINDS",
    "DEFAULT_LICENSE", "LEVELS_PER_LAYOUT", "LevelSource", "MAX_INSERTED", "Plan",
    "SHARD_EPISODES", "dataset_card", "parse_license",
    "episode_actions", "fresh_levels", "make_shard", "parse_mix", "spec_source", "version_source",
    "write_trajectories",
]

import hashlib
import io
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.levels import Level, canonical_id, parse_xsb, to_xsb
from engine.pictures.frames import FRAME_BYTES, TileAtlas, draw_goal, play
from engine.pictures.look import SHARED, Look, draw_theme, stored_look
from engine.pictures.render import SIZE
from engine.rules import lurd_to_actions
from engine.search.index import StateSpaceTooLarge
from engine.search.reverse import optimal_actions, solvable_set
from engine.search.solver import solve as forward_solve
from pipeline.errors import InputError, PipelineError
from pipeline.seeds import derived_rng, noise_key
from pipeline.spec import Spec, Tier
from pipeline.stages.generate import SCATTER_MAX_STATES, draw_start
from pipeline.stages.layouts import goal_layout, scatter_level
from pipeline.versions.tables import fsync_path, write_text
from pipeline.versions.version import existing_versions, open_version, version_ids
from pipeline.workers import Workers

KINDS = ("random", "solver", "perturbed")
DEFAULT_MIX = (0.5, 0.3, 0.2)
# the card's license unless one is given: the levels and their play are this tool's own output
DEFAULT_LICENSE = "cc-by-4.0"
SHARD_EPISODES = 256  # 256 episodes of at most 161 frames stay under 500 MB before compression
LEVELS_PER_LAYOUT = 8  # fresh levels drawn from one layout's solvable set
MAX_INSERTED = 3  # random actions a perturbed episode inserts, 1 to this many
FORMAT = 1
# Purposes of a draw (the first key after the seed), so no two uses share a stream.
_KIND, _ACTIONS, _PICK, _FRESH, _THEME = 10, 11, 12, 13, 14

EPISODES_SCHEMA = pa.schema([
    ("episode", pa.int64()), ("level", pa.string()), ("kind", pa.string()),
    ("solved", pa.bool_()), ("length", pa.int32()), ("goal", pa.binary()),
    ("theme", pa.string()), ("optimal_moves", pa.int16()), ("max_steps", pa.int16()),
    ("level_index", pa.int32()), ("inserted", pa.int8()),
])
FRAMES_SCHEMA = pa.schema([
    ("episode", pa.int64()), ("step", pa.int16()), ("frame", pa.binary()),
    ("action", pa.int8()), ("pushed", pa.bool_()), ("invalid", pa.bool_()),
])


@dataclass(frozen=True)
class EpisodeLevel:
    """A level an episode is played on, with an optimal solution and the step budget."""

    level: Level
    solution: tuple[int, ...]
    max_steps: int
    index: int | None = None  # its index in the source version; None for a fresh level
    look: Look = SHARED

    @property
    def theme(self) -> str | None:
        """The level's own theme as JSON (the ``theme`` column), None for a fixed look."""
        return self.look.theme.to_json() if self.look.theme is not None else None


@dataclass(frozen=True)
class LevelSource:
    """Where episodes get their levels: a spec (fresh draws) or a public version's levels."""

    name: str
    look: str
    spec: Spec | None = None
    levels: tuple[EpisodeLevel, ...] = ()
    exclude_ids: frozenset[str] = frozenset()
    record: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """What a trajectory set holds: fixed before any episode is played."""

    source: LevelSource
    seed: int
    episodes: int
    mix: tuple[float, float, float] = DEFAULT_MIX
    shard_episodes: int = SHARD_EPISODES
    license: str = DEFAULT_LICENSE  # the dataset card's, a Hugging Face Hub license id

    @property
    def shards(self) -> int:
        return -(-self.episodes // self.shard_episodes)


def version_source(datasets: Path, version: str, allow_hidden: bool = False,
                   instead: str = "draw trajectories from a public version or a spec"
                   ) -> LevelSource:
    """The levels of a public version; a hidden version is refused (its levels stay secret)
    unless ``allow_hidden`` (a maintainer's tool, never a default); ``instead`` ends the
    refusal with what the caller may do."""
    opened = open_version(datasets, version)
    if opened.hidden and not allow_hidden:
        raise PipelineError(f"{version} is a hidden version: its levels never leave the "
                            f"server; {instead}")
    table = opened.levels().sort("index")
    look = opened.look
    levels = tuple(
        EpisodeLevel(parse_xsb(row["xsb"]), tuple(lurd_to_actions(row["solution"])),
                     int(row["max_steps"]), int(row["index"]), stored_look(look, row))
        for row in table.iter_rows(named=True))
    return LevelSource(version, look, levels=levels, record={
        "version": version, "levels_sha256": opened.sha256})


def spec_source(spec: Spec, datasets: Path) -> LevelSource:
    """Fresh levels of ``spec``, never one of a hidden version under ``datasets``."""
    hidden = [v for v in existing_versions(datasets)
              if open_version(datasets, v, require_intact=False).hidden]
    ids = version_ids(datasets, hidden)
    return LevelSource(spec.name, spec.look, spec=spec, exclude_ids=frozenset(ids),
                       record={"spec": spec.to_dict(), "excluded_versions": hidden})


def fresh_levels(spec: Spec, seed: int, group: int,
                 exclude_ids: frozenset[str] = frozenset()) -> list[EpisodeLevel]:
    """``LEVELS_PER_LAYOUT`` fresh levels of ``spec`` for one group of episodes.

    Goal-first specs draw starts from one layout's solvable set, as the build does; scatter
    specs keep random boards whose forward optimum is in the band. A tier is drawn in
    proportion to its levels, then a slot (and so a band) of it. A themed spec gives each
    level its own theme (and noise key), drawn from (seed, group, level).
    """
    weights = np.array([t.levels for t in spec.tiers], dtype=np.float64)
    out: list[EpisodeLevel] = []
    seen: set[str] = set()
    for attempt in range(spec.max_attempts * LEVELS_PER_LAYOUT):
        rng = derived_rng(seed, _FRESH, group, attempt)
        tier = spec.tiers[int(rng.choice(len(weights), p=weights / weights.sum()))]
        band = tier.band(int(rng.integers(tier.levels)))
        for level, solution in _draws(spec, tier, band, rng):
            cid = canonical_id(level)
            if cid in exclude_ids or cid in seen:
                continue
            seen.add(cid)
            out.append(EpisodeLevel(level, tuple(solution), spec.max_steps(len(solution)),
                                    look=_fresh_look(spec, seed, group, len(out))))
            if len(out) == LEVELS_PER_LAYOUT:
                return out
    raise PipelineError(f"spec {spec.name}: no {LEVELS_PER_LAYOUT} fresh levels in "
                        f"{spec.max_attempts * LEVELS_PER_LAYOUT} layouts for episode group "
                        f"{group}; widen its bands or raise max_attempts")


def _fresh_look(spec: Spec, seed: int, group: int, number: int) -> Look:
    if spec.look != "themed":
        return Look(spec.look)
    theme = draw_theme(derived_rng(seed, _THEME, group, number), spec.noise)
    key = noise_key(seed, group * LEVELS_PER_LAYOUT + number) if spec.noise else None
    return Look("themed", theme, key)


def _draws(spec: Spec, tier: Tier, band: tuple[int, int],
           rng: np.random.Generator) -> list[tuple[Level, list[int]]]:
    if spec.method == "scatter":
        level = scatter_level(rng, spec.height, spec.width, tier.wall_density, tier.crates)
        if level is None:
            return []
        result = forward_solve(level, max_states=SCATTER_MAX_STATES)
        if result.status != "solved" or not band[0] <= result.optimal[0] <= band[1]:
            return []
        return [(level, lurd_to_actions(result.optimal[2]))]
    board = goal_layout(rng, spec.height, spec.width, tier.wall_density, tier.crates)
    if board is None:
        return []
    try:
        sset = solvable_set(board)
    except StateSpaceTooLarge:
        return []
    out = []
    for _ in range(LEVELS_PER_LAYOUT):
        start = draw_start(sset, rng, tier, band, spec.min_first_push_traps)
        if start is not None:
            out.append((board.with_start(start), optimal_actions(sset, start)))
    return out


def episode_actions(kind: str, solution: Sequence[int], budget: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The actions an episode of ``kind`` plays and how many were inserted at random."""
    if kind == "random":
        return rng.integers(0, 4, budget).astype(np.int64), 0
    actions = list(solution)
    inserted = 0
    if kind == "perturbed":
        inserted = int(rng.integers(1, MAX_INSERTED + 1))
        for _ in range(inserted):
            actions.insert(int(rng.integers(len(actions) + 1)), int(rng.integers(4)))
    return np.array(actions[:budget], dtype=np.int64), inserted


def make_shard(plan: Plan, shard: int) -> tuple[bytes, bytes, dict[str, Any]]:
    """Play the episodes of one shard; its two tables as Parquet bytes and its counts."""
    first = shard * plan.shard_episodes
    groups: dict[int, list[EpisodeLevel]] = {}
    planned = [_plan_episode(plan, i, groups)
               for i in range(first, min(first + plan.shard_episodes, plan.episodes))]
    # One buffer for every frame of the shard: episodes are played straight into it.
    frames = np.empty((sum(len(p[2]) + 1 for p in planned), FRAME_BYTES), np.uint8)
    boards: dict[tuple[bytes, Look], tuple[TileAtlas, bytes]] = {}
    episodes: dict[str, list[Any]] = {name: [] for name in EPISODES_SCHEMA.names}
    meta: dict[str, list[np.ndarray]] = {n: [] for n in ("episode", "action", "pushed",
                                                         "invalid")}
    counts = {k: {"episodes": 0, "solved": 0, "frames": 0} for k in KINDS}
    used = 0
    for i, chosen, actions, kind, inserted in planned:
        key = (chosen.level.walls.tobytes() + chosen.level.goals.tobytes(), chosen.look)
        if key not in boards:  # tiles and the goal picture depend on the board and look alone
            boards[key] = (TileAtlas.for_level(chosen.level, chosen.look),
                           draw_goal(chosen.level, chosen.look).tobytes())
        atlas, goal = boards[key]
        run = play(atlas, actions, chosen.level.start, out=frames[used:],
                   max_steps=chosen.max_steps)
        n = len(run.actions)
        used += n
        meta["episode"].append(np.full(n, i, np.int64))
        for name, values in (("action", run.actions), ("pushed", run.pushed),
                             ("invalid", run.invalid)):
            meta[name].append(values)
        for name, value in (("episode", i), ("level", to_xsb(chosen.level)), ("kind", kind),
                            ("solved", run.solved), ("length", n - 1), ("goal", goal),
                            ("theme", chosen.theme),
                            ("optimal_moves", len(chosen.solution)),
                            ("max_steps", chosen.max_steps), ("level_index", chosen.index),
                            ("inserted", inserted)):
            episodes[name].append(value)
        counts[kind]["episodes"] += 1
        counts[kind]["solved"] += int(run.solved)
        counts[kind]["frames"] += n
    lengths = [len(part) for part in meta["episode"]]
    frame_table = pa.table({
        "episode": pa.array(np.concatenate(meta["episode"]), pa.int64()),
        "step": pa.array(np.concatenate([np.arange(n, dtype=np.int16) for n in lengths]),
                         pa.int16()),
        "frame": _binary_column(frames[:used]),
        "action": pa.array(np.concatenate(meta["action"]), pa.int8()),
        "pushed": pa.array(np.concatenate(meta["pushed"]), pa.bool_()),
        "invalid": pa.array(np.concatenate(meta["invalid"]), pa.bool_()),
    }, schema=FRAMES_SCHEMA)
    episode_table = pa.table(episodes, schema=EPISODES_SCHEMA)
    return _parquet_bytes(episode_table), _parquet_bytes(frame_table), counts


def _plan_episode(plan: Plan, i: int, groups: dict[int, list[EpisodeLevel]]
                  ) -> tuple[int, EpisodeLevel, np.ndarray, str, int]:
    """Episode ``i``'s level, actions, kind and inserted count, from (seed, i) alone;
    ``groups`` keeps the fresh levels of the groups drawn so far in this shard."""
    source = plan.source
    if source.spec is not None:
        group = i // LEVELS_PER_LAYOUT
        if group not in groups:
            groups[group] = fresh_levels(source.spec, plan.seed, group, source.exclude_ids)
        chosen = groups[group][i % LEVELS_PER_LAYOUT]
    else:
        chosen = source.levels[int(derived_rng(plan.seed, _PICK, i).integers(len(source.levels)))]
    kind = KINDS[int(derived_rng(plan.seed, _KIND, i).choice(3, p=plan.mix))]
    actions, inserted = episode_actions(kind, chosen.solution, chosen.max_steps,
                                        derived_rng(plan.seed, _ACTIONS, i))
    return i, chosen, actions, kind, inserted


def _binary_column(rows: np.ndarray) -> pa.Array:
    """Fixed-length byte rows as a binary column, without copying them one by one."""
    n, width = rows.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(np.ascontiguousarray(rows))])


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    # Frames barely change from step to step: zstd at its fastest level finds the repeats;
    # dictionaries would only cost time on unique pictures.
    pq.write_table(table, sink, compression="zstd", compression_level=1, use_dictionary=False,
                   write_statistics=False, store_schema=False, row_group_size=4096)
    return sink.getvalue()


def write_trajectories(plan: Plan, out: Path, workers: Workers) -> dict[str, Any]:
    """Play every episode of ``plan`` and publish the set at ``out``; return its manifest.

    Shards are written to ``OUT.partial/`` and the folder is renamed into place only when the
    manifest is written, so a half-written set never looks finished.
    """
    if out.exists():
        raise PipelineError(f"{out} already exists; trajectories are written once, to a new "
                            "folder")
    if plan.episodes < 1:
        raise PipelineError("--episodes must be at least 1")
    partial_dir = out.with_name(out.name + ".partial")
    shutil.rmtree(partial_dir, ignore_errors=True)
    try:
        manifest = _write(plan, partial_dir, workers)
    except BaseException:
        shutil.rmtree(partial_dir, ignore_errors=True)
        raise
    partial_dir.rename(out)
    fsync_path(out.parent)
    return manifest


def _write(plan: Plan, partial_dir: Path, workers: Workers) -> dict[str, Any]:
    for table in ("episodes", "frames"):
        (partial_dir / table).mkdir(parents=True)
    results = workers.map(partial(make_shard, plan), list(range(plan.shards)),
                          label="trajectories")
    shards = []
    totals = {k: {"episodes": 0, "solved": 0, "frames": 0} for k in KINDS}
    for number, (episode_bytes, frame_bytes, counts) in enumerate(results):
        entry: dict[str, Any] = {}
        for table, data in (("episodes", episode_bytes), ("frames", frame_bytes)):
            name = f"{table}/shard-{number:05d}.parquet"
            (partial_dir / name).write_bytes(data)
            fsync_path(partial_dir / name)
            entry[table] = {"file": name, "sha256": hashlib.sha256(data).hexdigest(),
                            "bytes": len(data)}
        shards.append(entry)
        for kind in KINDS:
            for key, value in counts[kind].items():
                totals[kind][key] += value
    manifest = {
        "format": FORMAT, "kind": "trajectories", "source": plan.source.record,
        "seed": str(plan.seed), "episodes": plan.episodes,
        "mix": dict(zip(KINDS, plan.mix, strict=True)), "shard_episodes": plan.shard_episodes,
        "look": plan.source.look, "license": plan.license,
        "frame": {"height": SIZE, "width": SIZE, "channels": 3, "dtype": "uint8",
                  "layout": "row-major (height, width, RGB)"},
        "counts": totals, "shards": shards,
        "generator": {"package_version": package_version("sokoforge"),
                      "libraries": {n: package_version(n) for n in ("numpy", "numba",
                                                                    "pyarrow")}},
    }
    write_text(dataset_card(manifest), partial_dir / "README.md")
    write_text(json.dumps(manifest, indent=2) + "\n", partial_dir / "manifest.json")
    return manifest


def dataset_card(manifest: dict[str, Any]) -> str:
    """README.md of a trajectory set: what it is, how it was made, counts, seed, shards."""
    source = manifest["source"]
    if "version" in source:
        origin = (f"levels of the public version `{source['version']}` (levels.parquet "
                  f"sha256 `{source['levels_sha256']}`)")
        flag = f"--from {source['version']}"
    else:
        excluded = ", ".join(source["excluded_versions"]) or "none"
        origin = (f"fresh levels of the spec `{source['spec']['name']}`, none of them a level "
                  f"(under the 8 symmetries) of a hidden version (excluded: {excluded})")
        flag = f"--spec {source['spec']['name']}"
    mix = ",".join(str(v) for v in manifest["mix"].values())
    command = (f"sokoforge trajectories OUT {flag} --episodes {manifest['episodes']} --seed "
               f"{manifest['seed']} --mix {mix} --shard-episodes {manifest['shard_episodes']}"
               f" --license {manifest.get('license', DEFAULT_LICENSE)}")
    rows = "\n".join(f"| {k} | {c['episodes']} | {c['solved']} | {c['frames']} |"
                     for k, c in manifest["counts"].items())
    shards = "\n".join(f"| `{s[t]['file']}` | {s[t]['bytes']} | `{s[t]['sha256']}` |"
                       for s in manifest["shards"] for t in ("episodes", "frames"))
    return f"""{_front_matter(manifest)}# Sokoban training trajectories

{manifest['episodes']} episodes played on {origin}, each drawn in the `{manifest['look']}` look
as 64x64 RGB frames (uint8, row-major height x width x RGB, 12,288 bytes a frame).

## How it was made

```
{command}
```

sokoforge {manifest['generator']['package_version']}, seed {manifest['seed']} (public). Every
episode's level, kind and actions are drawn from the seed and the episode number alone, so the
same command writes the same bytes on any number of workers. Kinds: `random` plays uniform
random actions for the level's whole step budget; `solver` plays an optimal solution;
`perturbed` plays an optimal solution with 1-{MAX_INSERTED} random actions inserted at random
places (`inserted`), and `solved` says whether it still solves. An episode stops when solved.

## Tables

- `episodes/`: episode, level (XSB), kind, solved, length (actions taken), goal (the goal
  frame: crates on every goal, no player), theme (JSON, null for a fixed look),
  optimal_moves, max_steps, level_index (in the source version, null for fresh levels),
  inserted.
- `frames/`: episode, step, frame, action taken from that frame (0 up, 1 down, 2 left,
  3 right; -1 on the last frame), pushed (the action pushed a crate), invalid (the action
  was a no-op).

| kind | episodes | solved | frames |
| --- | --- | --- | --- |
{rows}

## Loading

Run from this folder:

```python
import numpy as np
import polars as pl

frames = pl.read_parquet("frames/*.parquet")
picture = np.frombuffer(frames["frame"][0], np.uint8).reshape(64, 64, 3)

import datasets  # Hugging Face
ds = datasets.load_dataset("parquet", data_files={{"train": "frames/*.parquet"}},
                           split="train")
first = ds[0]
```

`load_dataset` first converts every shard into its cache, many times the shards' size
(`~/.cache/huggingface/datasets`; `cache_dir=...` or `$HF_DATASETS_CACHE` moves it), and reads
from there. `streaming=True` reads the shards in place instead; read such a stream to its end:
a stream left part-read can abort the Python process at exit (Arrow's reading threads outlive
the interpreter).

## Shards

| file | bytes | sha256 |
| --- | --- | --- |
{shards}
"""


def _front_matter(manifest: dict[str, Any]) -> str:
    """The card's YAML header, which the Hugging Face Hub reads: the license, the size and
    one configuration per table (frames, the default, and episodes)."""
    frames = sum(c["frames"] for c in manifest["counts"].values())
    size = next(name for bound, name in _SIZES if frames < bound)
    configs = "".join(
        f"- config_name: {table}\n  data_files:\n  - split: train\n    path: {table}/*.parquet\n"
        + ("  default: true\n" if table == "frames" else "")
        for table in ("frames", "episodes"))
    return (f"---\nlicense: {manifest.get('license', DEFAULT_LICENSE)}\n"
            "pretty_name: Sokoban training trajectories\n"
            "task_categories:\n- reinforcement-learning\n"
            "tags:\n- sokoban\n- trajectories\n- pixels\n"
            f"size_categories:\n- {size}\n"
            f"configs:\n{configs}---\n\n")


# the Hub's size categories, by number of rows (frames)
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
          (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"),
          (1_000_000_000, "100M<n<1B"), (float("inf"), "n>1T"))
_LICENSE = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,63}$")


def parse_license(text: str) -> str:
    """``--license``: a Hugging Face Hub license id (``cc-by-4.0``, ``mit``, ``other``...)."""
    if not _LICENSE.match(text):
        raise InputError(f"--license {text[:40]!r}: expected a license id such as cc-by-4.0, "
                         "mit or other (lower-case letters, digits, '.', '+', '-')")
    return text


def parse_mix(text: str) -> tuple[float, float, float]:
    """``--mix R,S,P``: the shares of random, solver and perturbed episodes (sum 1)."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"--mix {text[:40]!r}: expected three numbers such as "
                         "0.5,0.3,0.2") from None
    if len(values) != 3 or min(values) < 0 or abs(sum(values) - 1.0) > 1e-9:
        raise InputError(f"--mix {text[:40]!r}: expected three non-negative shares of "
                         "random, solver and perturbed episodes that sum to 1")
    return values  # type: ignore[return-value]
