"""Importing a level collection: XSB files in, a version served, audited and listed out.

Play order is file order; every level is solved to optimal by the forward solver, graded by
the difficulty model and budgeted by the spec's rule, through the build's own functions. The
version has no seed: its manifest records each source file's sha256 and the files are kept in
``sources/``, so ``verify`` re-imports them and compares the bytes. Written in a temporary
folder and published by one rename, like a build.
"""

from __future__ import annotations

__all__ = [
    "IMPORT_COLUMNS", "ImportResult", "ImportVerification", "MAX_LEVELS", "SOURCES_DIR", "Source",
    "TIER_RULE", "VISIBILITIES", "import_collection", "read_source", "tier_of", "verify_import",
]

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from engine.episode import UnplayableLevel, check_playable
from engine.level_files import FileLevel, read_collection
from engine.levels import LevelError, canonical_id, to_xsb, wall_layout_id
from pipeline.errors import InputError, PipelineError
from pipeline.spec import Spec, load_spec
from pipeline.stages.build import BuildFolder, build_lock
from pipeline.versions.hidden_files import fresh_folder, keep_hidden_out_of_git, private_writes
from pipeline.versions.manifest import IMPORTED, make_manifest, write_manifest
from pipeline.versions.tables import fsync_path, sha256_file, write_parquet
from pipeline.versions.version import (
    LEVELS_FILE,
    MANIFEST_FILE,
    check_version_name,
    existing_versions,
    open_version,
)
from pipeline.workers import Workers

log = logging.getLogger(__name__)

SOURCES_DIR = "sources"
MAX_LEVELS = 32767
VISIBILITIES = ("public", "hidden")
_GAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Play order is file order; a level's tier is its crate count less one (the standard game's
# numbering), so the runs the server plays as tiers each hold one crate count.
TIER_RULE = "crates - 1"
IMPORT_COLUMNS = {"source_file": pl.String, "source_level": pl.Int16, "title": pl.String,
                  "author": pl.String, "imputed_features": pl.String}


@dataclass(frozen=True)
class Source:
    """One collection file: its name in the version, its bytes' sha256 and its boards."""

    path: Path
    name: str
    sha256: str
    levels: tuple[FileLevel, ...]


@dataclass
class ImportResult:
    """The published version, its level count, the levels dropped and those graded with
    imputed features (their solvable-state search did not fit)."""

    path: Path
    levels: int
    skipped: list[str] = field(default_factory=list)
    imputed: list[str] = field(default_factory=list)


def read_source(path: Path) -> Source:
    """Read one collection file; an unreadable file or board is an ``InputError`` naming it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path.name}: not UTF-8 text (byte {e.start})") from None
    try:
        levels = read_collection(text, source=path.name)
    except LevelError as e:
        raise InputError(str(e)) from None
    return Source(path, path.name, sha256_file(path), tuple(levels))


def import_collection(version: str, files: Sequence[Path], *, datasets: Path,
                      spec: Spec | None = None, game: str | None = None,
                      skip_unsolvable: bool = False, visibility: str = "public",
                      workers: Workers | None = None) -> ImportResult:
    """Publish ``files`` as ``datasets/version``; refuse an existing name or a level that
    cannot be solved to optimal (dropped with a warning when ``skip_unsolvable``)."""
    check_version_name(version)
    if visibility not in VISIBILITIES:
        raise InputError(f"visibility {visibility!r}: expected one of {VISIBILITIES}")
    if not files:
        raise InputError("no level file to import")
    workers = workers or Workers(show_progress=False)
    spec = spec or load_spec("standard")
    sources = [read_source(Path(p)) for p in files]
    if game is None:  # the first file's name, when it can stand in a URL
        stem = sources[0].path.stem
        game = stem if _GAME.match(stem) else version
    elif not _GAME.match(game):
        raise InputError(f"game name {game[:70]!r} is not allowed: use letters, digits, '.',"
                            " '_' or '-', starting with a letter or digit (it is part of URLs)")
    names = [s.name for s in sources]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"two source files are named {twice[0]}: rename one")
    folder = BuildFolder(datasets, version)
    with build_lock(folder):
        if folder.final.exists():
            raise PipelineError(f"version {version} already exists ({folder.final}); a finished"
                                " version is immutable: import under a new name")
        table, result = _levels(sources, datasets, spec, skip_unsolvable, workers)
        # made as a build's folder is: 0700 with 0600 files when hidden, else the umask's
        with private_writes(visibility != "public"):
            tmp = fresh_folder(folder.root.parent, f"{version}.import-")
            try:
                _write_version(tmp, version, sources, table, spec=spec, game=game,
                               visibility=visibility, skip_unsolvable=skip_unsolvable,
                               result=result)
                os.rename(tmp, folder.final)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        fsync_path(datasets)
    result.path = folder.final
    return result


def _levels(sources: list[Source], datasets: Path, spec: Spec, skip_unsolvable: bool,
            workers: Workers) -> tuple[pl.DataFrame, ImportResult]:
    """The rows of ``levels.parquet`` in file order, solved, graded and budgeted."""
    from pipeline.stages.grade import (
        IMPUTED_SCHEMA,
        grade_group_within_limits,
        with_features,
        with_predicted_compute,
    )
    from pipeline.stages.solve import solve_all, with_solutions
    from pipeline.stages.write import levels_table

    entries = [(s, fl) for s in sources for fl in s.levels]
    searchable = [(fl, fl.level) for _, fl in entries if fl.level is not None]
    results = dict(zip([id(fl) for fl, _ in searchable],
                       solve_all([to_xsb(level) for _, level in searchable], workers),
                       strict=True))
    problems, kept, unplayable = [], [], []
    for source, fl in entries:
        answer = results.get(id(fl))
        if fl.too_large is not None or answer is None or fl.level is None:
            problems.append(f"{fl.name(source.name)}: too large to search ({fl.too_large})")
        elif answer.status == "unsolvable":
            problems.append(f"{fl.name(source.name)}: unsolvable")
        elif answer.status == "too_large":
            problems.append(f"{fl.name(source.name)}: too large to search (its states exceed "
                            "the solver's bound)")
        else:
            try:  # solved, so its optimum is known
                check_playable(fl.level, spec.max_steps(answer.moves or 0))
            except UnplayableLevel as e:
                unplayable.append(f"{fl.name(source.name)}: {e}")
            kept.append((source, fl, answer))
    if unplayable:  # a board to fix in the file, whatever --skip-unsolvable says
        raise InputError(f"{len(unplayable)} level(s) have nothing to play: "
                         + "; ".join(unplayable))
    if problems and not skip_unsolvable:
        raise PipelineError(f"{len(problems)} level(s) cannot be imported: "
                            + "; ".join(problems) + "; --skip-unsolvable drops them")
    for problem in problems:
        log.warning("skipped %s", problem)
    if not kept:
        raise PipelineError("no level left to import")
    if len(kept) > MAX_LEVELS:
        raise PipelineError(f"{len(kept)} levels: a version holds at most {MAX_LEVELS} (its "
                            "index is int16); import the collection in parts")
    levels = [lv for _, fl, _ in kept if (lv := fl.level) is not None]  # every kept one's
    ids = [canonical_id(lv) for lv in levels]
    _refuse_repeats(kept, ids, datasets)
    df = with_solutions(pl.DataFrame({
        "index": list(range(len(kept))), "tier": [tier_of(lv.n_crates) for lv in levels],
        "n_crates": [lv.n_crates for lv in levels], "height": [lv.height for lv in levels],
        "width": [lv.width for lv in levels], "xsb": [to_xsb(lv) for lv in levels],
        "canonical_id": ids, "wall_layout_id": [wall_layout_id(lv) for lv in levels],
        "slot": list(range(len(kept))),
        "band_lo": pl.Series([None] * len(kept), dtype=pl.Int16),
        "band_hi": pl.Series([None] * len(kept), dtype=pl.Int16),
        "source_file": [s.name for s, _, _ in kept],
        "source_level": [fl.number for _, fl, _ in kept],
        "title": [fl.title for _, fl, _ in kept],
        "author": [fl.author for _, fl, _ in kept],
    }), [answer for _, _, answer in kept])
    df = with_features(df, workers, grader=grade_group_within_limits, schema=IMPUTED_SCHEMA)
    df = with_predicted_compute(df)
    imputed = [f"{fl.name(s.name)}: {names}" for (s, fl, _), names
               in zip(kept, df["imputed_features"].to_list(), strict=True) if names]
    for line in imputed:
        log.warning("graded with neutral values for %s", line)
    return (levels_table(df, spec, IMPORT_COLUMNS),
            ImportResult(Path(), len(kept), problems, imputed))


def tier_of(n_crates: int) -> int:
    """An imported level's tier: its crate count less one, whatever its place in the file."""
    return n_crates - 1


def _refuse_repeats(kept: list[Any], ids: list[str], datasets: Path) -> None:
    """A level twice in the collection, or already in a version, would fail the audit."""
    seen: dict[str, str] = {}
    clashes = []
    for (source, fl, _), cid in zip(kept, ids, strict=True):
        name = fl.name(source.name)
        if cid in seen:
            clashes.append(f"{name} repeats {seen[cid]} (up to rotation and reflection)")
        else:
            seen[cid] = name
    for other in existing_versions(datasets):
        opened = open_version(datasets, other, require_intact=False)
        if not opened.sha256:
            continue
        theirs = opened.levels(["index", "canonical_id"])
        for idx, cid in zip(theirs["index"], theirs["canonical_id"], strict=True):
            if cid in seen:
                clashes.append(f"{seen[cid]} is level {idx + 1} of version {other} (index "
                               f"{idx})")
    if clashes:
        raise PipelineError(f"{len(clashes)} level(s) repeat: " + "; ".join(clashes))


def _write_version(folder: Path, version: str, sources: list[Source], table: pl.DataFrame, *,
                   spec: Spec, game: str, visibility: str, skip_unsolvable: bool,
                   result: ImportResult) -> None:
    """levels.parquet, a copy of every source file, then the manifest, into ``folder``."""
    levels = folder / LEVELS_FILE
    write_parquet(table, levels)
    (folder / SOURCES_DIR).mkdir()
    for source in sources:
        copy = folder / SOURCES_DIR / source.name
        shutil.copyfile(source.path, copy)
        if sha256_file(copy) != source.sha256:
            raise PipelineError(f"{source.path} changed while it was imported")
        fsync_path(copy)
    per_file = table.group_by("source_file").len()
    counts = dict(zip(per_file["source_file"], per_file["len"], strict=True))
    manifest = make_manifest(
        version=version, spec=spec.to_dict(), seed_source=IMPORTED, salt=None,
        seed_sha256=None, levels=levels, rows=table.height, excluded_versions=[])
    manifest["game"] = game
    manifest["generator"]["method"] = IMPORTED
    manifest["visibility"] = visibility
    manifest["sources"] = [{"name": s.name, "sha256": s.sha256, "levels": len(s.levels),
                            "imported": int(counts.get(s.name, 0))} for s in sources]
    manifest["import"] = {"tier": TIER_RULE, "skip_unsolvable": skip_unsolvable,
                          "skipped": result.skipped, "imputed_features": result.imputed}
    write_manifest(manifest, folder / MANIFEST_FILE)
    keep_hidden_out_of_git(folder, manifest)
    fsync_path(folder)


@dataclass(frozen=True)
class ImportVerification:
    """An imported version checked: each kept source against its recorded sha256, the
    re-import of those sources against the manifest, and the stored levels file."""

    sources: tuple[tuple[str, bool], ...]
    reimport_matches: bool
    file_matches: bool
    expected_sha256: str
    reimported_sha256: str
    reimport_error: str | None = None

    @property
    def ok(self) -> bool:
        return (all(ok for _, ok in self.sources) and self.reimport_matches
                and self.file_matches)


def verify_import(version: str, *, datasets: Path, workers: Workers | None = None
                  ) -> ImportVerification:
    """Check an imported version from its own ``sources/``: there is no seed to rebuild from,
    so the same files are imported again, with the recorded options, and the bytes compared."""
    opened = open_version(datasets, version, require_intact=False)
    folder, manifest = opened.folder, opened.manifest
    if not opened.imported:
        raise PipelineError(f"{version} was built from a seed, not imported: verify it with "
                            "--seed")
    expected, file_matches = opened.expected_sha256, opened.intact
    paths, checked = [], []
    for entry in manifest["sources"]:
        path = folder / SOURCES_DIR / Path(str(entry["name"])).name
        checked.append((str(entry["name"]), path.is_file() and sha256_file(path)
                        == entry["sha256"]))
        paths.append(path)
    options: Mapping[str, Any] = manifest.get("import") or {}
    again, error = "", None
    if all(ok for _, ok in checked):
        with tempfile.TemporaryDirectory(prefix="sokoforge-verify-") as tmp:
            try:
                result = import_collection(
                    version, paths, datasets=Path(tmp),
                    spec=opened.spec,
                    game=manifest.get("game"),
                    skip_unsolvable=bool(options.get("skip_unsolvable")),
                    visibility=str(manifest.get("visibility", "public")), workers=workers)
                again = sha256_file(result.path / LEVELS_FILE)
            except PipelineError as e:
                error = str(e)
    else:
        error = "a source file differs from its recorded sha256"
    return ImportVerification(tuple(checked), again == expected, file_matches, expected,
                              again, error)
