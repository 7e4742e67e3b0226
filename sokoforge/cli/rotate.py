"""``sokoforge rotate``, ``sokoforge versions`` and ``sokoforge reveal``: a version's life after
its build: replaced by an equally hard one, listed, and its seed published when a round closes.
"""

from __future__ import annotations

__all__ = ["interactive", "reveal_command", "rotate_command", "versions_command"]

import sys
from pathlib import Path

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import REFUSED, USAGE, CliError, refusals
from sokoforge.cli.progress_bar import terminal_progress


@click.command("rotate")
@click.argument("version")
@click.option("--from", "prev", required=True, metavar="PREV",
              help="The version to replace; NEW is matched to it slot by slot.")
@click.option("--exclude", "exclude", multiple=True, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A level file whose levels (and their rotations and reflections) NEW must "
                   "not contain, e.g. public training levels. Repeatable.")
@click.option("--seed", default=None,
              help="Public seed (tests, demos). Without it a secret seed is drawn and kept in "
                   "DATASETS/.secrets/VERSION.seed.")
@click.option("--jobs", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Local worker processes.")
@click.option("--quiet", is_flag=True, help="No progress or timing lines.")
@datasets_option
def rotate_command(version: str, prev: str, exclude: tuple[Path, ...], seed: str | None,
                   jobs: int, quiet: bool, datasets: Path) -> None:
    """Build VERSION to replace PREV: same stages, fresh seed, matched slot by slot.

    Each level of VERSION has PREV's crate count and grade, an optimum within one move and
    the closest difficulty. VERSION is created only if the reference planner's solved counts
    differ by at most 3 per 100 levels; the audit against PREV is written to its report/.
    """
    from pipeline.rotate import rotate
    from pipeline.seeds import parse_seed
    from pipeline.workers import Workers

    with refusals():
        outcome = rotate(version, prev, datasets=datasets, exclude=exclude,
                         seed=parse_seed(seed) if seed is not None else None,
                         workers=Workers(jobs=jobs, show_progress=not quiet,
                                         display=terminal_progress))
    click.echo("\n".join(outcome.equivalence.lines()))
    click.echo(f"{version}: published at {outcome.path}; report in {outcome.path / 'report'}")
    if not outcome.audit_passed:
        raise CliError(f"{version}: audit against {prev} failed: "
                       + "; ".join(outcome.failed_checks))


@click.command("versions")
@datasets_option
def versions_command(datasets: Path) -> None:
    """List every version: game, levels, created, rotated from, seed, visibility (public or
    hidden), its round's state, audit, sha256."""
    from pipeline.versions.versions import COLUMNS, version_table

    with refusals():
        rows = version_table(datasets)
    if not rows:
        click.echo(f"no versions under {datasets}")
        return
    cells = [list(COLUMNS)] + [[r[c] for c in COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def interactive() -> bool:
    """Whether a person can answer a question: standard input is a terminal."""
    return sys.stdin.isatty()


@click.command("reveal")
@click.argument("version")
@click.option("--yes", is_flag=True,
              help="Print without asking (needed when standard input is not a terminal).")
@click.option("--force", is_flag=True,
              help="Reveal even while a server here serves VERSION, or before a round of "
                   "it was closed.")
@datasets_option
def reveal_command(version: str, yes: bool, force: bool, datasets: Path) -> None:
    """Print VERSION's secret seed and record the reveal in VERSION/reveal.json.

    For when a round closes: anyone can then run `sokoforge verify VERSION --seed SEED`.
    Refused, unless --force, while a server on this machine serves VERSION, or while a
    hidden VERSION has no closed round.
    Asks first, unless --yes; without a terminal to ask on, refuses unless --yes (exit 2).
    Answering no exits 1 with nothing printed or recorded.
    """
    from pipeline.versions.versions import reveal, revealable_seed

    with refusals():
        revealable_seed(datasets, version, force)  # refuse what cannot be revealed, first
    if not yes:
        if not interactive():
            raise CliError(f"not revealing the secret seed of {version}: no terminal to ask "
                           "on; pass --yes to print it", USAGE)
        if not click.confirm(f"Print the secret seed of {version} and record it as revealed "
                             "(do this only once its round has closed)?", err=True):
            raise CliError(f"{version}: seed not revealed", REFUSED)
    with refusals():
        outcome = reveal(datasets, version, force)
    click.echo(str(outcome.seed))
    note = "recorded in" if outcome.first_time else "already recorded in"
    click.echo(f"{version}: seed revealed, {note} {outcome.path}", err=True)
