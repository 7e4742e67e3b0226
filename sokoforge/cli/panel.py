"""``sokoforge panel``: play the agent panel on every level of a version."""

from __future__ import annotations

__all__ = [
    "panel_command",
]

from pathlib import Path

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import refusals
from sokoforge.cli.progress_bar import terminal_progress


@click.command("panel")
@click.argument("version")
@click.option("--jobs", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Local worker processes.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@datasets_option
def panel_command(version: str, jobs: int, quiet: bool, datasets: Path) -> None:
    """Play the agent panel on every level of VERSION; write report/panel.parquet.

    Four families of agents (the reference planner, greedy best-first, a breadth-first
    lookahead, random rollouts), each at 64, 256 and 1,024 dynamics calls per step; one row
    per level and agent. Prints each agent's solved count. The next audit shows them. On an
    adaptive game's pool it also calibrates the pool: report/items.parquet (each level's
    discrimination and difficulty) and report/items.json (the model's error on an agent
    outside the panel, measured by leaving each panel agent out; it widens every equated
    interval).

    Then the reference (the review's compute frontier, engine.agents.reference) on four
    turns of every board: report/reference.parquet, and its best solved count.

    One call is one predicted transition of one candidate state: an expansion of four
    actions is four calls; a batch of B candidates rolled H steps is B×H calls.
    """
    import polars as pl

    from pipeline.difficulty.panel import solved_counts, write_panel
    from pipeline.difficulty.reference_play import write_reference
    from pipeline.scores.items import is_pool, write_items
    from pipeline.versions.tables import read_parquet
    from pipeline.versions.version import open_version
    from pipeline.workers import Workers

    with refusals():
        workers = Workers(jobs=jobs, show_progress=not quiet, display=terminal_progress)
        out = write_panel(datasets, version, workers)
        frame = read_parquet(out)
        played = read_parquet(write_reference(datasets, version, workers))
        items = (write_items(datasets, version)
                 if is_pool(open_version(datasets, version).manifest) else None)
    levels = frame["index"].n_unique()
    for row in solved_counts(frame).iter_rows(named=True):
        click.echo(f"{row['agent']:>14}  {row['solved']:>4}/{levels}")
    best = int(played.group_by("agent", "turn").agg(pl.col("solved").sum())["solved"]
               .to_numpy().max())
    click.echo(f"{version}: panel written to {out}; the reference's best {best}/{levels}")
    if items is not None:
        click.echo(f"{version}: item parameters written to {items}")
