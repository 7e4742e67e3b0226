"""``sokoforge build``, ``sokoforge stage ...`` and ``sokoforge verify``: making versions."""

from __future__ import annotations

__all__ = [
    "STAGES", "build_command", "built_visibility", "datasets_option", "stage_group",
    "verify_command",
]

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from sokoforge.cli.errors import CliError, refusals
from sokoforge.cli.progress_bar import terminal_progress

# The names of pipeline.stages.build.STAGES, here so that loading the CLI stays light (a test keeps
# the two equal).
STAGES = ("generate", "select", "solve", "grade", "write")


def _datasets_folder(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path:
    from pipeline.errors import InputError
    from pipeline.versions.datasets_folder import datasets_folder

    try:
        return datasets_folder(value)
    except InputError as e:
        raise CliError(str(e), 2) from None


def datasets_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--datasets`` option every command on versions shares: found the one way of
    ``pipeline.versions.datasets_folder``, and refused (exit 2) when it is not a folder."""
    return click.option(
        "--datasets", type=click.Path(file_okay=False, path_type=Path), default=None,
        callback=_datasets_folder, expose_value=True,
        help="Folder holding the versions [default: $SOKOFORGE_DATASETS, else the "
             "repository's datasets/].")(fn)


def _build_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options: list[Callable[[Any], Any]] = [
        click.option("--seed", type=str, default=None,
                     help="Public seed (an integer). Without it a secret seed is drawn and "
                          "kept in DATASETS/.secrets/VERSION.seed."),
        click.option("--spec", "spec_name", default=None,
                     help="Game spec: a name under pipeline/specs (default standard) or a path."),
        click.option("--jobs", type=click.IntRange(1, 256), default=1, show_default=True,
                     help="Local worker processes."),
        click.option("--backend", type=click.Choice(["loky", "dask"]), default="loky",
                     show_default=True, help="Run on local processes or on a Dask cluster."),
        click.option("--scheduler", default=None, help="Dask scheduler address (--backend dask)."),
        click.option("--quiet", is_flag=True, help="No progress or timing lines."),
        datasets_option,
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _run(version: str, stages: tuple[str, ...], *, seed: str | None, spec_name: str | None,
         jobs: int, backend: str, scheduler: str | None, quiet: bool, datasets: Path) -> None:
    from pipeline.rotate import select_stage
    from pipeline.seeds import parse_seed
    from pipeline.spec import load_spec
    from pipeline.stages.build import build, recorded_rotation
    from pipeline.workers import Workers

    if backend == "dask" and not scheduler:
        raise CliError("--backend dask needs --scheduler ADDRESS", 2)
    with refusals():
        workers = Workers(jobs=jobs, backend=backend, scheduler=scheduler,
                          show_progress=not quiet, display=terminal_progress)
        result = build(version, datasets=datasets,
                       spec=load_spec(spec_name) if spec_name else None,
                       seed=parse_seed(seed) if seed is not None else None,
                       workers=workers, stages=stages,
                       select=select_stage if recorded_rotation(datasets, version) else None)
    if result.published:
        click.echo(f"{version}: published at {result.path} ({built_visibility(datasets, version)})")
    else:
        click.echo(f"{version}: {', '.join(stages)} done in {result.path}")


def built_visibility(datasets: Path, version: str) -> str:
    """What a finished build is, said as the build ends: public (to be committed) or hidden
    (kept out of git), since a seed given on the command line does not make it public."""
    from pipeline.versions.version import open_version

    with refusals():
        opened = open_version(datasets, version, require_intact=False)
    if not opened.hidden:
        return "public: git status shows it, to be committed"
    seed = opened.manifest.get("public_seed")
    given = f", though built from the public seed {seed}" if seed is not None else ""
    return (f"hidden{given}: its .gitignore keeps it out of git; a public version comes from a "
            "public spec (--spec public/A) or import --public")


@click.command("build")
@click.argument("version")
@click.option("--abandon", is_flag=True,
              help="Instead of building: drop VERSION's interrupted build (DATASETS/.build/"
                   "VERSION, and the secret seed drawn for it), to start afresh.")
@_build_options
def build_command(version: str, abandon: bool, **options: Any) -> None:
    """Build dataset VERSION: generate, select, solve, grade and write, then publish.

    A build that is interrupted resumes where it stopped when run again, and ends with the
    same bytes; --abandon drops it instead. Building a version that exists is refused.
    """
    if abandon:
        from pipeline.stages.build import abandon as drop

        with refusals():
            dropped = drop(version, datasets=options["datasets"])
        click.echo(f"{version}: dropped {', '.join(str(p) for p in dropped)}")
        return
    _run(version, STAGES, **options)


@click.group("stage")
def stage_group() -> None:
    """Run one stage of a version's build (the earlier stages must be done)."""


def _stage_command(name: str) -> click.Command:
    @click.command(name)
    @click.argument("version")
    @_build_options
    def command(version: str, **options: Any) -> None:
        _run(version, (name,), **options)

    command.help = f"Run the {name} stage of VERSION's build; a finished stage is kept."
    return command


for _name in STAGES:
    stage_group.add_command(_stage_command(_name))


@click.command("verify")
@click.argument("version")
@click.option("--seed", default=None,
              help="The version's published seed (not for an imported version).")
@click.option("--jobs", type=click.IntRange(1, 256), default=1, show_default=True)
@datasets_option
def verify_command(version: str, seed: str | None, jobs: int, datasets: Path) -> None:
    """Check VERSION against its published SEED, with no other version needed.

    The seed must open the manifest's commitment (a wrong one stops there); every level is
    then redrawn from the origin the manifest records and must be the stored one, the
    levels.parquet made from them must have the manifest's sha256, and the selection rules
    must hold within VERSION. An imported version has no seed: its kept source files are
    checked against their sha256 and imported again instead. Exits 0 when all of it holds,
    1 otherwise.
    """
    from pipeline.seeds import parse_seed
    from pipeline.stages.verify import verify
    from pipeline.versions.version import open_version
    from pipeline.workers import Workers

    workers = Workers(jobs=jobs, show_progress=False)
    with refusals():
        if open_version(datasets, version, require_intact=False).imported:
            if seed is not None:
                raise CliError(f"{version} was imported: it has no seed; run without --seed", 2)
            _verify_import(version, datasets, workers)
            return
        if seed is None:
            raise CliError(f"{version} was built from a seed: --seed is required", 2)
        outcome = verify(version, parse_seed(seed), datasets=datasets, workers=workers)
    click.echo(f"seed commitment: {_WORD[outcome.commitment_matches]}")
    if outcome.commitment_matches:
        click.echo(f"levels redrawn from the seed: {outcome.levels_redrawn} of "
                   f"{outcome.levels}")
        click.echo(f"selection rules: {'hold' if outcome.rules_hold else 'BROKEN'}")
        for problem in outcome.problems[:20]:
            click.echo(f"  {problem}")
        for note in outcome.notes:
            click.echo(f"note: {note}")
        stopped = None if outcome.rebuilt_sha256 else \
            "levels.parquet not rebuilt: not every level was redrawn"
    else:
        stopped = "nothing redrawn: the seed does not open the manifest's commitment"
    _verdict(version, ("rebuilt", outcome.rebuilt_sha256, outcome.rebuild_matches), stopped,
             outcome.file_matches, outcome.ok, "verified")


_WORD = {True: "match", False: "MISMATCH"}


def _verify_import(version: str, datasets: Path, workers: Any) -> None:
    from pipeline.stages.importing import verify_import

    outcome = verify_import(version, datasets=datasets, workers=workers)
    click.echo(f"{version} was imported from {len(outcome.sources)} file(s): it has no seed; "
               "its sources are checked and imported again instead")
    for name, ok in outcome.sources:
        click.echo(f"source {name} sha256: {_WORD[ok]}")
    _verdict(version, ("re-imported", outcome.reimported_sha256, outcome.reimport_matches),
             f"re-import stopped: {outcome.reimport_error}" if outcome.reimport_error else None,
             outcome.file_matches, outcome.ok, "verified (imported)")


def _verdict(version: str, remade: tuple[str, str, bool], stopped: str | None,
             file_matches: bool, ok: bool, done: str) -> None:
    """The lines every verification ends with: the remade file, the stored one, the verdict."""
    how, sha256, matches = remade
    click.echo(stopped or f"{how} levels.parquet sha256 {sha256[:16]}: {_WORD[matches]}")
    click.echo(f"stored levels.parquet: {_WORD[file_matches]}")
    if not ok:
        raise CliError(f"{version} does not verify")
    click.echo(f"{version}: {done}")
