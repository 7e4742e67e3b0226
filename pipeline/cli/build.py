"""``sokoforge build``, ``sokoforge stage ...`` and ``sokoforge verify``: making versions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pipeline.cli.errors import CliError, refusals

# The names of pipeline.build.STAGES, here so that loading the CLI stays light (a test keeps
# the two equal).
STAGES = ("generate", "select", "solve", "grade", "write")


def datasets_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--datasets`` option every command on versions shares."""
    return click.option(
        "--datasets", type=click.Path(file_okay=False, path_type=Path), default="datasets",
        envvar="SOKOFORGE_DATASETS", show_default=True,
        help="Folder holding the versions (env SOKOFORGE_DATASETS).")(fn)


def _build_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
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
    ]):
        fn = option(fn)
    return fn


def _run(version: str, stages: tuple[str, ...], seed: str | None, spec_name: str | None,
         jobs: int, backend: str, scheduler: str | None, quiet: bool, datasets: Path) -> None:
    from pipeline.build import build
    from pipeline.seeds import parse_seed
    from pipeline.spec import load_spec
    from pipeline.workers import Workers

    if backend == "dask" and not scheduler:
        raise CliError("--backend dask needs --scheduler ADDRESS", 2)
    with refusals():
        workers = Workers(jobs=jobs, backend=backend, scheduler=scheduler,
                          show_progress=not quiet)
        result = build(version, datasets=datasets,
                       spec=load_spec(spec_name) if spec_name else None,
                       seed=parse_seed(seed) if seed is not None else None,
                       workers=workers, stages=stages)
    if result.published:
        click.echo(f"{version}: published at {result.path}")
    else:
        click.echo(f"{version}: {', '.join(stages)} done in {result.path}")


@click.command("build")
@click.argument("version")
@_build_options
def build_command(version: str, **options: Any) -> None:
    """Build dataset VERSION: generate, select, solve, grade and write, then publish.

    A build that is interrupted resumes where it stopped when run again, and ends with the
    same bytes. Building a version that exists is refused.
    """
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
@click.option("--seed", required=True, help="The version's published seed.")
@click.option("--jobs", type=click.IntRange(1, 256), default=1, show_default=True)
@datasets_option
def verify_command(version: str, seed: str, jobs: int, datasets: Path) -> None:
    """Check VERSION against its published SEED, with no other version needed.

    The seed must open the manifest's commitment (a wrong one stops there); every level is
    then redrawn from the origin the manifest records and must be the stored one, the
    levels.parquet made from them must have the manifest's sha256, and the selection rules
    must hold within VERSION. Exits 0 when all of it holds, 1 otherwise.
    """
    from pipeline.seeds import parse_seed
    from pipeline.verify import verify
    from pipeline.workers import Workers

    with refusals():
        outcome = verify(version, parse_seed(seed), datasets=datasets,
                         workers=Workers(jobs=jobs, show_progress=False))
    word = {True: "match", False: "MISMATCH"}
    click.echo(f"seed commitment: {word[outcome.commitment_matches]}")
    if outcome.commitment_matches:
        click.echo(f"levels redrawn from the seed: {outcome.levels_redrawn} of "
                   f"{outcome.levels}")
        if outcome.rebuilt_sha256:
            click.echo(f"rebuilt levels.parquet sha256 {outcome.rebuilt_sha256[:16]}: "
                       f"{word[outcome.rebuild_matches]}")
        click.echo(f"selection rules: {'hold' if outcome.rules_hold else 'BROKEN'}")
    click.echo(f"stored levels.parquet: {word[outcome.file_matches]}")
    for problem in outcome.problems[:20]:
        click.echo(f"  {problem}")
    if not outcome.ok:
        raise CliError(f"{version} does not verify")
    click.echo(f"{version}: verified")
