"""Building a version: the stages in order, in a build folder, published by one rename.

Stages write into ``datasets/.build/<VERSION>/``; each finished stage leaves a marker holding
its output's sha256, so a build killed at any point resumes where it stopped and ends with the
same bytes. Only the final ``rename`` makes ``datasets/<VERSION>/`` appear.
"""

from __future__ import annotations

__all__ = [
    "BuildFolder", "BuildResult", "Plan", "Rotation", "STAGES", "STAGE_FUNCTIONS", "Stage",
    "StageRun", "abandon", "build", "build_lock", "recorded_rotation", "run_stages", "stage_chain",
]

import contextlib
import fcntl
import itertools
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any, TypedDict

from engine.search.index import StateSpaceTooLarge
from pipeline import seeds
from pipeline.errors import PipelineError
from pipeline.spec import Spec, load_spec, spec_from_dict
from pipeline.versions.hidden_files import (
    is_hidden,
    keep_hidden_out_of_git,
    make_private,
    private_writes,
)
from pipeline.versions.manifest import make_manifest, write_manifest
from pipeline.versions.tables import fsync_path, read_parquet, sha256_file, write_text
from pipeline.versions.version import (
    LEVELS_FILE,
    MANIFEST_FILE,
    STAGES_DIR,
    check_version_name,
    existing_versions,
    levels_sha256,
    version_ids,
)
from pipeline.workers import Workers

# Select comes before solve and grade: it needs only the generator's distances and ids, so the
# costlier stages work on the chosen levels alone.
STAGES = ("generate", "select", "solve", "grade", "write")
_LOCK_TRIES = 20


# A build that is a rotation (``pipeline.rotate``): the version it rotates (``from``), the
# ``--exclude`` files' records (name, sha256, levels) and their canonical ids. "from" is a
# keyword, hence the functional form.
Rotation = TypedDict("Rotation", {"from": str, "excluded_files": list[dict[str, Any]],
                                  "excluded_ids": list[str]})


@dataclass(frozen=True)
class Plan:
    """What a build makes: fixed when it starts, recorded so that a resumed build agrees."""

    version: str
    spec: Spec
    seed: int
    seed_source: str
    salt: str
    excluded_versions: tuple[str, ...]
    rotation: Rotation | None = None  # a rotation's record, else None
    # The sha256 of each excluded version's levels.parquet when the build started.
    excluded_sha256: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """The plan as stored in ``stages/build.json``: a secret seed only as its commitment."""
        rec = {"version": self.version, "spec": self.spec.to_dict(),
               "seed_source": self.seed_source, "salt": self.salt,
               "seed_sha256": seeds.commitment(self.seed, self.salt),
               "excluded_versions": list(self.excluded_versions),
               "excluded_sha256": list(self.excluded_sha256)}
        if self.rotation is not None:
            rec["rotation"] = self.rotation
        if self.seed_source == "public":
            rec["public_seed"] = str(self.seed)
        return rec


@dataclass
class BuildResult:
    """Where the version is (once published) and how long each stage run here took.

    ``timings`` are wall seconds; ``cpu`` the CPU seconds of this process alone (workers'
    time is not in it), which a loaded machine does not inflate.
    """

    path: Path
    published: bool
    timings: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)


class BuildFolder:
    """The paths of one version's build, in progress and finished."""

    def __init__(self, datasets: Path, version: str) -> None:
        self.datasets = datasets
        self.version = version
        self.root = datasets / ".build" / version
        self.stages = self.root / STAGES_DIR
        self.plan_file = self.stages / "build.json"
        self.final = datasets / version

    def output(self, stage: str) -> Path:
        return self.root / LEVELS_FILE if stage == "write" else \
            self.stages / f"{stage}.parquet"

    def marker(self, stage: str) -> Path:
        return self.stages / f"{stage}.sha256"

    def is_done(self, stage: str) -> bool:
        """Whether ``stage``'s output exists and still has the sha256 its marker recorded."""
        out, marker = self.output(stage), self.marker(stage)
        if not (out.is_file() and marker.is_file()):
            return False
        return marker.read_text().strip() == sha256_file(out)

    def mark_done(self, stage: str) -> None:
        """Record the finished output's sha256; written after the output, so it comes last."""
        write_text(sha256_file(self.output(stage)) + "\n", self.marker(stage))

    def forget(self, stage: str) -> None:
        """Drop a stage's marker, then its output (a stage that is redone)."""
        for path in (self.marker(stage), self.output(stage)):
            path.unlink(missing_ok=True)


def recorded_rotation(datasets: Path, version: str) -> Rotation | None:
    """The rotation a build of ``version`` in progress records (None for a plain build)."""
    plan_file = BuildFolder(datasets, version).plan_file
    if not plan_file.is_file():
        return None
    rotation: Rotation | None = json.loads(plan_file.read_text()).get("rotation")
    return rotation


def build(version: str, *, datasets: Path, spec: Spec | None = None, seed: int | None = None,
          workers: Workers | None = None, stages: Sequence[str] = STAGES,
          exclusion_root: Path | None = None, excluded_versions: Sequence[str] | None = None,
          rotation: Rotation | None = None, select: Stage | None = None) -> BuildResult:
    """Run ``stages`` of ``version`` (all by default), resuming a build in progress.

    ``seed`` None draws a secret seed (or reuses the build's own); ``exclusion_root`` is where
    the versions whose levels must not repeat live (``datasets`` by default) and
    ``excluded_versions`` which of them (all finished ones by default). ``rotation`` records
    the build as a rotation (see ``pipeline.rotate``), which passes its own ``select`` stage
    in place of the spec's. A stage that fails removes the build folder and a secret seed
    drawn for it: the next attempt starts afresh.

    Args:
        version: the new version's name (a folder under ``datasets``).
        datasets: where versions live.
        spec, seed: what to build (the spec is required for a new build).
        workers: the processes the stages run on.
        stages: which stages to run, in the registry's order and without gaps.
        exclusion_root, excluded_versions: the versions whose levels must not repeat.
        rotation, select: a rotation's record and its select stage.

    Raises:
        PipelineError: an unknown stage, stages out of order, a build in progress that
            disagrees with the arguments, or a stage that cannot make its output.
        InputError: a bad version name or spec.
    """
    check_version_name(version)
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise PipelineError(f"unknown stage {unknown[0]!r}; stages are {', '.join(STAGES)}")
    workers = workers or Workers()
    chain = stage_chain(select=select) if select is not None else stage_chain()
    folder = BuildFolder(datasets, version)
    exclusion_root = exclusion_root or datasets
    with build_lock(folder), contextlib.ExitStack() as private:
        if folder.final.exists():
            raise PipelineError(f"version {version} already exists ({folder.final}); a finished"
                                " version is immutable: build under a new name")
        first = STAGES.index(stages[0])
        if tuple(stages) != STAGES[first:first + len(stages)]:
            raise PipelineError(f"stages run in the order {', '.join(STAGES)}, without gaps; "
                                f"got {', '.join(stages)}")
        plan = _open_plan(folder, spec, seed, rotation, may_start=first == 0,
                          excluded=lambda: list(excluded_versions) if excluded_versions
                          is not None else existing_versions(exclusion_root),
                          exclusion_root=exclusion_root)
        if is_hidden(plan.spec.to_dict()):  # all it writes from here on is private, and
            make_private(folder.root)        # what a run before this one wrote
            private.enter_context(private_writes(True))
        missing = [s for s in STAGES[:first] if not folder.is_done(s)]
        if missing:
            raise PipelineError(f"stage {stages[0]} of {version} needs stage {missing[0]} first:"
                                f" run `sokoforge stage {missing[0]} {version}`")
        result = BuildResult(path=folder.root, published=False)
        kept = list(itertools.takewhile(folder.is_done, stages))
        if plan.rotation is not None and select is None and "select" in stages[len(kept):]:
            raise PipelineError(f"the build of {version} in progress is a rotation of "
                                f"{plan.rotation['from']}: its select stage is the rotation's")
        if kept:
            workers.say(f"resuming: {', '.join(kept)} kept")
        run = StageRun(folder, plan, workers, exclusion_root)
        for stage in stages[len(kept):]:
            for later in STAGES[STAGES.index(stage):]:
                folder.forget(later)
            began, began_cpu = time.perf_counter(), time.process_time()
            try:
                chain[stage](run)
            except (PipelineError, StateSpaceTooLarge) as e:
                # The same inputs would fail the same way: keep nothing that blocks a new start,
                # and no secret seed that never made a version (the next build draws afresh).
                shutil.rmtree(folder.root, ignore_errors=True)
                if plan.seed_source == "secret":
                    seeds.forget_secret(datasets, version)
                if isinstance(e, PipelineError):
                    raise
                raise PipelineError(f"{stage}: a level's state space is too large for the "
                                    f"engine ({e}); use a smaller board or fewer crates") from e
            folder.mark_done(stage)
            result.timings[stage] = time.perf_counter() - began
            result.cpu[stage] = time.process_time() - began_cpu
            workers.say(f"{stage}: {result.timings[stage]:.2f} s")
        if folder.is_done("write"):
            _publish(folder, plan)
            result.path, result.published = folder.final, True
        if result.timings:
            total = sum(result.timings.values())
            parts = " · ".join(f"{k} {v:.2f} s" for k, v in result.timings.items())
            workers.say(f"{version}: {parts} · total {total:.2f} s")
        return result



def abandon(version: str, *, datasets: Path) -> list[Path]:
    """Drop the interrupted build of ``version``: its build folder, an import's leftover
    folders, and the secret seed drawn for it while no version was made; what was removed.

    Refused while the build runs (its lock is held), and when there is nothing to drop.
    """
    check_version_name(version)
    folder = BuildFolder(datasets, version)
    with build_lock(folder):
        dropped = [p for p in (folder.root, *folder.root.parent.glob(f"{version}.import-*"))
                   if p.is_dir()]
        if not dropped:
            raise PipelineError(f"no interrupted build of {version} under {folder.root.parent}")
        if not folder.final.exists() and folder.plan_file.is_file() and \
                json.loads(folder.plan_file.read_text()).get("seed_source") == "secret":
            seeds.forget_secret(datasets, version)
        for path in dropped:
            shutil.rmtree(path)
    return dropped


@dataclass(frozen=True)
class StageRun:
    """What a stage reads and where it writes: the build's folder and plan, its workers, and
    the folder holding the versions whose levels it must not repeat."""

    folder: BuildFolder
    plan: Plan
    workers: Workers
    exclusion_root: Path


Stage = Callable[[StageRun], object]


# Stage modules load the engine's compiled kernels: imported only when a stage runs.
def _generate(run: StageRun) -> None:
    from pipeline.stages.generate import generate

    generate(run.plan.spec, run.plan.seed, run.folder.output("generate"), run.workers)


def _select(run: StageRun) -> None:
    from pipeline.stages.select import select

    plan = run.plan
    select(run.folder.output("generate"), run.folder.output("select"), plan.spec, plan.seed,
           version_ids(run.exclusion_root, plan.excluded_versions), workers=run.workers)


def _solve(run: StageRun) -> None:
    from pipeline.stages.solve import solve

    solve(run.folder.output("select"), run.folder.output("solve"), run.workers)


def _grade(run: StageRun) -> None:
    """Grade by the predictor, then measure by the ladder when the spec says so."""
    from pipeline.difficulty.compute import measure_selected
    from pipeline.stages.grade import grade

    graded = grade(run.folder.output("solve"), run.folder.output("grade"), run.workers)
    measure_selected(graded, run.plan.spec, run.workers)


def _write(run: StageRun) -> None:
    from pipeline.stages.write import write

    write(run.folder.output("grade"), run.folder.output("write"), run.plan.spec, run.plan.seed)


# The registry of stages, one function per name of STAGES.
STAGE_FUNCTIONS: Mapping[str, Stage] = MappingProxyType({
    "generate": _generate, "select": _select, "solve": _solve, "grade": _grade,
    "write": _write})


def stage_chain(**replaced: Stage) -> dict[str, Stage]:
    """The registry's stages in order, with the ``replaced`` ones (a rotation's select)."""
    unknown = sorted(set(replaced) - set(STAGES))
    if unknown:
        raise PipelineError(f"unknown stage {unknown[0]!r}; stages are {', '.join(STAGES)}")
    return {name: replaced.get(name, STAGE_FUNCTIONS[name]) for name in STAGES}


def run_stages(run: StageRun, stages: Sequence[str], chain: Mapping[str, Stage] | None = None
               ) -> Path:
    """Run ``stages`` of ``chain`` (the registry's by default) in order, without markers or
    resuming (a rebuild in a throw-away folder); the last stage's output."""
    chain = chain or stage_chain()
    for stage in stages:
        chain[stage](run)
    return run.folder.output(stages[-1])


def _publish(folder: BuildFolder, plan: Plan) -> None:
    """Write the manifest last, then make the version appear by renaming its folder."""
    from pipeline.stages.origins import origins
    from pipeline.stages.write import play_order

    levels = folder.output("write")
    rows = read_parquet(levels, columns=["index"]).height
    rec = plan.record()
    manifest = make_manifest(
        version=plan.version, spec=rec["spec"], seed_source=plan.seed_source, salt=plan.salt,
        seed_sha256=rec["seed_sha256"], levels=levels, rows=rows,
        excluded_versions=[{"version": name, "sha256": sha} for name, sha in
                           zip(plan.excluded_versions, plan.excluded_sha256, strict=True)],
        public_seed=plan.seed if plan.seed_source == "public" else None,
        rotated_from=plan.rotation["from"] if plan.rotation else None,
        origins=origins(play_order(read_parquet(folder.output("grade")))))
    if plan.rotation is not None:
        # The excluded files by name and sha256; their levels' ids stay in the build's plan.
        manifest["rotation"] = {"from": plan.rotation["from"],
                                "excluded_files": plan.rotation["excluded_files"]}
    write_manifest(manifest, folder.root / MANIFEST_FILE)
    keep_hidden_out_of_git(folder.root, manifest)
    os.rename(folder.root, folder.final)
    fsync_path(folder.datasets)


def _open_plan(folder: BuildFolder, spec: Spec | None, seed: int | None,
               rotation: Rotation | None, *, may_start: bool,
               excluded: Callable[[], list[str]], exclusion_root: Path
               ) -> Plan:
    """The recorded plan of a build in progress, checked against the arguments, or a new one."""
    if folder.plan_file.is_file():
        rec = json.loads(folder.plan_file.read_text())
        recorded = spec_from_dict(rec["spec"], source="recorded spec")
        if spec is not None and spec != recorded:
            raise PipelineError(
                f"a build of {folder.version} with spec {recorded.name!r} is in progress "
                f"({folder.root}); resume it with the same spec or remove that folder")
        if rec["seed_source"] == "public":
            stored = int(rec["public_seed"])
            if seed is not None and seed != stored:
                raise PipelineError(
                    f"a build of {folder.version} with another seed is in progress "
                    f"({folder.root}); resume it with the same seed or remove that folder")
            seed = stored
        else:
            if seed is not None:
                raise PipelineError(
                    f"the build of {folder.version} in progress uses a secret seed; resume it "
                    f"without --seed or remove {folder.root}")
            seed = seeds.read_secret(folder.datasets, folder.version)
            if seed is None:
                missing = seeds.secret_path(folder.datasets, folder.version)
                raise PipelineError(f"the secret seed of the build of {folder.version} is "
                                    f"missing ({missing})")
        if rotation is not None and rotation != rec.get("rotation"):
            raise PipelineError(
                f"a build of {folder.version} that is not this rotation is in progress "
                f"({folder.root}); resume it as it was started or remove that folder")
        if seeds.commitment(seed, rec["salt"]) != rec["seed_sha256"]:
            raise PipelineError(f"the seed does not match the build of {folder.version} in "
                                f"progress ({folder.root}); remove that folder to start over")
        return Plan(folder.version, recorded, seed, rec["seed_source"], rec["salt"],
                    tuple(rec["excluded_versions"]), rec.get("rotation"),
                    tuple(rec.get("excluded_sha256", ())))
    if not may_start:
        raise PipelineError(f"no build of {folder.version} in progress: run "
                            f"`sokoforge stage generate {folder.version}` first")
    spec = spec or load_spec("standard")
    if seed is None and spec.visibility == "public":
        seed = seeds.fresh_seed()  # a public version's seed goes in its manifest: none secret
    names = tuple(excluded())
    shas = tuple(levels_sha256(exclusion_root, names))
    if seed is not None:
        source, salt = "public", seeds.public_salt(seed)
    else:
        source, salt = "secret", secrets.token_hex(16)
        seed = seeds.read_secret(folder.datasets, folder.version)
        if seed is None:
            seed = seeds.fresh_seed()
            seeds.write_secret(folder.datasets, folder.version, seed)
    plan = Plan(folder.version, spec, seed, source, salt, names, rotation, shas)
    with private_writes(is_hidden(spec.to_dict())):
        folder.stages.mkdir(parents=True, exist_ok=True)
        write_text(json.dumps(plan.record(), indent=2) + "\n", folder.plan_file)
    return plan


@contextmanager
def build_lock(folder: BuildFolder) -> Iterator[None]:
    """Hold the version's build lock; a second concurrent build of it is refused.

    The lock file is removed when the build ends, well or badly (and ``.build`` with it when
    empty), even when a stop (Ctrl-C, SIGTERM) comes while the lock is being taken; a lock
    taken on a file that a finishing build just removed is taken again.
    """
    lock_dir = folder.datasets / ".build"
    path = lock_dir / f"{folder.version}.lock"
    handle = None
    try:
        for _ in range(_LOCK_TRIES):
            lock_dir.mkdir(parents=True, exist_ok=True)
            try:
                handle = open(path, "a")
            except FileNotFoundError:
                continue  # another build removed the empty .build meanwhile
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise PipelineError(f"another build of {folder.version} is running") from None
            if _same_file(path, handle.fileno()):
                break
            handle.close()
        else:
            raise PipelineError(f"could not take the build lock {path}")
        yield
    finally:
        if handle is not None:
            _release_lock(path, handle)
            with contextlib.suppress(OSError):
                lock_dir.rmdir()  # only when empty: other builds' folders and locks stay


def _release_lock(path: Path, handle: IO[str]) -> None:
    """Remove the lock file ``path`` unless another build holds it, then close ``handle``.

    Taking the lock again (without waiting) succeeds when it is this build's, or when a stop
    came before this build took it and no build holds it: either way the file is no one's."""
    if handle.closed:
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _same_file(path, handle.fileno()):
            path.unlink(missing_ok=True)
    except BlockingIOError:
        pass  # another build's lock: it stays
    finally:
        handle.close()


def _same_file(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the open file ``fd`` (it was not removed and remade)."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


