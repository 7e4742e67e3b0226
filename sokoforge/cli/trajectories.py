"""``sokoforge trajectories``: training episodes on public levels, as a Parquet dataset."""

from __future__ import annotations

__all__ = ["trajectories_command"]

from pathlib import Path

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import CliError, refusals
from sokoforge.cli.progress_bar import terminal_progress


@click.command("trajectories")
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--spec", "spec_name", default=None,
              help="Draw a fresh level per episode from this spec (a name such as public/A, "
                   "or a path).")
@click.option("--from", "version", default=None,
              help="Draw levels from this public version (a hidden one is refused).")
@click.option("--episodes", type=click.IntRange(1, 100_000_000), required=True)
@click.option("--seed", required=True, help="Seed of every draw (an integer; written in the "
                                            "dataset card).")
@click.option("--mix", default="0.5,0.3,0.2", show_default=True,
              help="Shares of random, solver and perturbed episodes.")
@click.option("--shard-episodes", type=click.IntRange(1, 100_000), default=256,
              show_default=True, help="Episodes per shard file.")
@click.option("--jobs", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Local worker processes.")
@click.option("--backend", type=click.Choice(["loky", "dask"]), default="loky",
              show_default=True, help="Run on local processes or on a Dask cluster.")
@click.option("--scheduler", default=None, help="Dask scheduler address (--backend dask).")
@click.option("--license", "license_id", default="cc-by-4.0", show_default=True,
              help="The dataset card's license, a Hugging Face Hub id (mit, other, ...).")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@datasets_option
def trajectories_command(out: Path, spec_name: str | None, version: str | None, episodes: int,
                         seed: str, mix: str, shard_episodes: int, jobs: int, backend: str,
                         scheduler: str | None, license_id: str, quiet: bool,
                         datasets: Path) -> None:
    """Play EPISODES episodes and write them to OUT: episodes/ and frames/ Parquet shards, a
    README.md dataset card and a manifest.json. The same seed writes the same bytes on any
    number of workers."""
    from pipeline.seeds import parse_seed
    from pipeline.spec import load_spec
    from pipeline.trajectories import (
        Plan,
        parse_license,
        parse_mix,
        spec_source,
        version_source,
        write_trajectories,
    )
    from pipeline.workers import Workers

    if (spec_name is None) == (version is None):
        raise CliError("give exactly one of --spec NAME and --from VERSION", 2)
    if backend == "dask" and not scheduler:
        raise CliError("--backend dask needs --scheduler ADDRESS", 2)
    with refusals():
        source = (spec_source(load_spec(spec_name), datasets) if spec_name is not None
                  else version_source(datasets, str(version)))
        plan = Plan(source, parse_seed(seed), episodes, parse_mix(mix), shard_episodes,
                    parse_license(license_id))
        manifest = write_trajectories(plan, out, Workers(
            jobs=jobs, backend=backend, scheduler=scheduler, show_progress=not quiet,
            display=terminal_progress))
    frames = sum(c["frames"] for c in manifest["counts"].values())
    click.echo(f"{out}: {episodes} episodes, {frames} frames in {plan.shards} shard(s)")
