"""``sokoforge import``: a level collection (XSB files) published as a version."""

from __future__ import annotations

__all__ = ["import_command"]

from pathlib import Path

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import refusals
from sokoforge.cli.progress_bar import terminal_progress


@click.command("import")
@click.argument("version")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--game", default=None,
              help="Game name the version is served as [default: the first file's name].")
@click.option("--spec", "spec_name", default=None,
              help="Spec whose budget rule sets the step budgets: a name under "
                   "pipeline/specs (default standard) or a path.")
@click.option("--skip-unsolvable", is_flag=True,
              help="Drop levels that are unsolvable or too large to search, with a warning, "
                   "instead of refusing the import.")
@click.option("--public/--hidden", "public", default=True, show_default=True,
              help="Whether the collection may be shipped (public) or is a hidden set.")
@click.option("--jobs", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Local worker processes.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@datasets_option
def import_command(version: str, files: tuple[Path, ...], game: str | None,
                   spec_name: str | None, skip_unsolvable: bool, public: bool, jobs: int,
                   quiet: bool, datasets: Path) -> None:
    """Publish the levels of FILES (XSB, in file order) as dataset VERSION.

    Every level is solved to optimal, graded and given the spec's step budget; a level that
    is unsolvable or too large to search is named and the import refused (or dropped with
    --skip-unsolvable). The manifest records each file's sha256; the version has no seed.
    """
    from pipeline.spec import load_spec
    from pipeline.stages.importing import import_collection
    from pipeline.workers import Workers

    with refusals():
        result = import_collection(
            version, files, datasets=datasets,
            spec=load_spec(spec_name) if spec_name else None, game=game,
            skip_unsolvable=skip_unsolvable, visibility="public" if public else "hidden",
            workers=Workers(jobs=jobs, show_progress=not quiet,
                            display=terminal_progress))
    dropped = f", {len(result.skipped)} skipped" if result.skipped else ""
    click.echo(f"{version}: {result.levels} levels imported{dropped}; published at "
               f"{result.path}")
