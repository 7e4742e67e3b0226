"""Checking a published version against its seed, with no other version present.

First the seed must open the manifest's commitment (a wrong seed stops there, before any
work). Then every level is redrawn from the origin its manifest records and compared with the
stored one; the redrawn levels go through the build's own stages after select (solve, grade
and its measuring, write), and the file they make must have the manifest's sha256. Last, the
selection rules are checked within the version. Manifests written before origins were
recorded are checked by finding each level among the candidates the seed generates; a level
drawn otherwise (a rotation's) is named as lacking one.
"""

from __future__ import annotations

__all__ = ["MODEL_FREE_COLUMNS", "Verification", "selection_problems", "verify"]

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import seeds
from pipeline.errors import InputError, PipelineError
from pipeline.spec import Spec
from pipeline.stages.build import STAGES, BuildFolder, Plan, StageRun, run_stages
from pipeline.stages.generate import CANDIDATE_SCHEMA, Candidate, generate, placed
from pipeline.stages.origins import redraw
from pipeline.versions.manifest import Manifest, difficulty_model_sha256
from pipeline.versions.tables import read_parquet, sha256_file, write_parquet
from pipeline.versions.version import open_version
from pipeline.workers import Workers

# The columns of levels.parquet that the seed, spec and engine fix whatever difficulty model
# graded the version.
MODEL_FREE_COLUMNS = ("n_crates", "height", "width", "xsb", "optimal_moves", "optimal_pushes",
                      "solution", "max_steps", "canonical_id")


@dataclass(frozen=True)
class Verification:
    """What was compared, and the problems found (one readable line each).

    ``levels_redrawn`` counts the stored levels the seed gave back; ``rebuilt_sha256`` is the
    sha256 of the levels.parquet made from them (empty when not every level came back).
    """

    commitment_matches: bool
    file_matches: bool
    expected_sha256: str
    levels: int = 0
    levels_redrawn: int = 0
    rebuilt_sha256: str = ""
    rules_hold: bool = False
    problems: tuple[str, ...] = field(default_factory=tuple)
    earlier_model: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def rebuild_matches(self) -> bool:
        """The rebuilt file has the manifest's sha256; for a version graded by an earlier
        difficulty model, its levels, optima, solutions and budgets are what the seed gives."""
        return self.earlier_model or self.rebuilt_sha256 == self.expected_sha256

    @property
    def ok(self) -> bool:
        return (self.commitment_matches and self.file_matches and self.rebuild_matches
                and self.levels_redrawn == self.levels and self.rules_hold)


def verify(version: str, seed: int, *, datasets: Path, workers: Workers | None = None
           ) -> Verification:
    """Check ``version`` under ``datasets`` against ``seed`` (see the module text)."""
    opened = open_version(datasets, version, require_intact=False)
    manifest = opened.manifest
    if opened.imported:
        raise InputError(f"{version} was imported from level files: it has no seed; "
                            "verify it without --seed")
    commit = manifest["seed_commitment"]
    assert commit is not None  # a seed's manifest holds its commitment (an import's has none)
    expected = opened.expected_sha256
    if not opened.sha256:
        raise InputError(f"version {version} has no levels.parquet ({opened.levels_path})")
    file_matches = opened.intact
    if seeds.commitment(seed, commit["salt"]) != commit["sha256"]:
        return Verification(False, file_matches, expected, problems=(
            "the seed does not open the manifest's commitment: nothing was redrawn",))
    workers = workers or Workers(show_progress=False)
    spec = opened.spec
    stored = opened.levels().sort("index")
    if "origins" in manifest:
        rows, problems = _redraw_from_origins(manifest["origins"], stored, spec, seed)
    else:
        rows, problems = _find_in_generated(manifest, stored, spec, seed, workers)
    redrawn = sum(row is not None for row in rows)
    rebuilt = ""
    earlier_model = False
    notes: list[str] = []
    if redrawn == stored.height:
        try:
            rebuilt, table = _rebuild(rows, spec, seed, workers, stored.columns)
        except PipelineError as e:
            problems.append(f"rebuilding levels.parquet from the redrawn levels stopped: {e}")
        else:
            graded_by = manifest.get("generator", {}).get("difficulty_model")
            if rebuilt != expected and graded_by != difficulty_model_sha256():
                # Difficulty, grade and the play order within a tier come from the model
                # that graded the version; an earlier model's values cannot be recomputed.
                differences = _model_free_differences(stored, table)
                earlier_model = not differences
                problems += differences
                notes.append("graded by an earlier difficulty model: difficulty, grade and "
                             "play order were not recomputed; levels, optima, solutions and "
                             "budgets were compared slot by slot")
            elif rebuilt != expected:
                problems.append(f"levels.parquet rebuilt from the redrawn levels has sha256 "
                                f"{rebuilt[:16]}, the manifest {expected[:16]}")
    if not file_matches:
        problems.append("the stored levels.parquet does not have the manifest's sha256")
    rules = selection_problems(stored, spec)
    return Verification(True, file_matches, expected, stored.height, redrawn, rebuilt,
                        not rules, tuple(problems + rules), earlier_model, tuple(notes))


def _redraw_from_origins(origins: Any, stored: pl.DataFrame, spec: Spec, seed: int
                         ) -> tuple[list[Candidate | None], list[str]]:
    """Each stored level redrawn from its recorded origin, or None where it does not match."""
    if not isinstance(origins, list) or len(origins) != stored.height:
        raise InputError(f"the manifest's origins are not a list of {stored.height}, one "
                            "per level")
    rows: list[Candidate | None] = []
    problems: list[str] = []
    for level, origin in zip(stored.iter_rows(named=True), origins, strict=True):
        row = redraw(spec, seed, origin, int(level["slot"]))
        if row is None or row.xsb != level["xsb"]:
            problems.append(f"level {level['index']} (tier {level['tier']} slot "
                            f"{level['slot']}) is not what its origin {origin} draws")
            row = None
        rows.append(row)
    return rows, problems


def _find_in_generated(manifest: Manifest, stored: pl.DataFrame, spec: Spec, seed: int,
                       workers: Workers) -> tuple[list[Candidate | None], list[str]]:
    """For a manifest without origins: each stored level found among the generated ones."""
    with tempfile.TemporaryDirectory(prefix="sokoforge-verify-") as tmp:
        pool = read_parquet(generate(spec, seed, Path(tmp) / "generate.parquet", workers))
    found = {(r.tier, r.xsb): r for r in map(Candidate._make, pool.iter_rows())}
    rows: list[Candidate | None] = []
    problems: list[str] = []
    for level in stored.iter_rows(named=True):
        row = found.get((level["tier"], level["xsb"]))
        if row is None:
            problems.append(
                f"level {level['index']} (tier {level['tier']} slot {level['slot']}) is not "
                "among the levels the seed generates, and the manifest (written by sokoforge "
                f"{manifest.get('generator', {}).get('package_version', '?')}, before level "
                "origins were recorded) does not say where it was drawn")
        else:
            row = placed(row, level["slot"], spec.tiers[level["tier"]].band(level["slot"]))
        rows.append(row)
    return rows, problems


def _model_free_differences(stored: pl.DataFrame, rebuilt: pl.DataFrame) -> list[str]:
    """What differs, slot by slot, in the columns no difficulty model decides."""
    keys = ["tier", "slot"]
    ours = stored.select(keys + list(MODEL_FREE_COLUMNS)).sort(keys)
    theirs = rebuilt.select(keys + list(MODEL_FREE_COLUMNS)).sort(keys)
    problems = []
    for column in MODEL_FREE_COLUMNS:
        differs = ours[column].cast(pl.String) != theirs[column].cast(pl.String)
        for row in ours.filter(differs).select(keys).iter_rows():
            problems.append(f"tier {row[0]} slot {row[1]}: the rebuilt {column} differs")
    return problems


def _rebuild(rows: list[Candidate | None], spec: Spec, seed: int, workers: Workers,
             columns: list[str]) -> tuple[str, pl.DataFrame]:
    """The sha256 of levels.parquet made from the chosen candidates by solve, grade, write,
    and the table it holds.

    A version written before later columns of the format existed is compared on its own
    ``columns``: the rebuilt table is written again with those alone, in that order.
    """
    chosen = pl.DataFrame(rows, schema=CANDIDATE_SCHEMA, orient="row").sort(["tier", "slot"])
    with tempfile.TemporaryDirectory(prefix="sokoforge-verify-") as tmp:
        folder = BuildFolder(Path(tmp), "rebuilt")
        folder.stages.mkdir(parents=True)
        write_parquet(chosen, folder.output("select"))
        # The build's own chain after select, so every step a build takes is taken here too.
        plan = Plan("rebuilt", spec, seed, "public", "", ())
        levels = run_stages(StageRun(folder, plan, workers, Path(tmp)), STAGES[2:])
        table = read_parquet(levels)
        if table.columns != columns and set(columns) <= set(table.columns):
            write_parquet(table.select(columns), levels)
        return sha256_file(levels), table


def selection_problems(levels: pl.DataFrame, spec: Spec) -> list[str]:
    """The selection rules a version must keep, checked within it: what breaks them."""
    problems = []
    if levels["index"].to_list() != list(range(levels.height)):
        problems.append("indices are not 0..n-1")
    for t, tier in enumerate(spec.tiers):
        part = levels.filter(pl.col("tier") == t)
        if sorted(part["slot"].to_list()) != list(range(tier.levels)):
            problems.append(f"tier {t} does not hold each of its {tier.levels} slots once")
        if part.height and set(part["n_crates"].to_list()) != {tier.crates}:
            problems.append(f"tier {t} has levels without {tier.crates} crates")
        if part["difficulty"].to_list() != sorted(part["difficulty"].to_list()):
            problems.append(f"tier {t} is not in play order (easiest first)")
        for r in part.iter_rows(named=True):
            lo, hi = tier.band(r["slot"])
            if not lo <= r["optimal_moves"] <= hi:
                problems.append(f"level {r['index']}: optimum {r['optimal_moves']} outside "
                                f"the band {lo}-{hi} of tier {t} slot {r['slot']}")
            if r["max_steps"] != spec.max_steps(r["optimal_moves"]):
                problems.append(f"level {r['index']}: step budget {r['max_steps']} is not the"
                                f" spec's {spec.max_steps(r['optimal_moves'])}")
    if levels["tier"].to_list() != sorted(levels["tier"].to_list()):
        problems.append("tiers are not in order")
    for column in ("canonical_id", "wall_layout_id"):
        if levels[column].n_unique() != levels.height:
            problems.append(f"two levels share a {column.replace('_', ' ')}")
    return problems
