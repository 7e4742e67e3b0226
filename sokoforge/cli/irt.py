"""``sokoforge irt``: refit level difficulty from the closed scorecards of a version."""

from __future__ import annotations

__all__ = ["irt_command"]

from pathlib import Path

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import CliError, refusals
from sokoforge.cli.store_option import checked_store


@click.command("irt")
@click.argument("version")
@click.option("--db", callback=checked_store, required=True, envvar="SOKOFORGE_DB",
              help="The server's store: its SQLite file or PostgreSQL URL (env SOKOFORGE_DB).")
@click.option("--browser/--no-browser", default=True, show_default=True,
              help="Include runs played in a browser (scorecards of source browser).")
@click.option("--line", "line", is_flag=True,
              help="Link every version of VERSION's line (versions rotated from one another) "
                   "by the names that played several; write report/line.json.")
@datasets_option
def irt_command(version: str, db: str, browser: bool, line: bool, datasets: Path) -> None:
    """Fit a two-parameter item-response model over agents and levels of VERSION's closed
    scorecards; write datasets/VERSION/report/irt.json (the version's files are untouched).

    Prints the agents' abilities and the rank correlation of the empirical difficulty with
    compute_to_solve (difficulty for a version graded before it). With --line, one scale
    over the whole line instead: each name's ability with its 95% interval beside its raw
    success per version, and which versions too few names link. On an adaptive game's pool,
    refit its item parameters on its panel and the closed scorecards' levels as shown and
    write report/items.parquet: sessions started after a restart use them, closed Scores
    keep their ability and equated success.
    """
    from pipeline.scores.irt import pooled_text, refit
    from pipeline.scores.items import is_pool, refit_items
    from pipeline.versions.version import open_version
    from serve.records.results import closed_episodes
    from serve.stores import StoreError

    with refusals(2, f"cannot refit {version}: "):
        opened = open_version(datasets, version, require_intact=False)  # before the store
        try:
            if line:
                from pipeline.scores.linking import fit_line, link_report_lines, version_line

                episodes = closed_episodes(db, version_line(datasets, version), browser)
                out, report = fit_line(datasets, version, episodes, browser)
                for text in link_report_lines(report):
                    click.echo(text)
                click.echo(f"written to {out}")
                return
            if is_pool(opened.manifest):
                out, report = refit_items(datasets, version,
                                          closed_episodes(db, [version], browser)[version])
                _pool_lines(report, browser)
                click.echo(f"written to {out} (sessions started after a restart of the "
                           "server use it; closed Scores keep theirs)")
                return
            out, report = refit(datasets, version,
                                closed_episodes(db, [version], browser)[version], browser)
        except StoreError as e:
            raise CliError(f"cannot refit {version}: {e}", 2) from None
    click.echo(f"{version}: {report['episodes']} episodes of {report['scorecards']} closed "
               f"scorecards (browser runs {report['browser_runs']}), "
               f"{len(report['agents'])} agents, {len(report['levels'])} levels")
    click.echo(f"  pooled: {pooled_text(report['pooled'])}")
    for agent in report["agents"]:
        click.echo(f"  {agent['name']}: ability {agent['ability']:+.2f} "
                   f"({agent['solved']}/{agent['episodes']} solved)")
    rho = report["spearman"]
    click.echo(f"Spearman of empirical difficulty with {report['spearman_empirical_vs']}: "
               + (f"{rho}" if rho is not None else
                  "undefined (one of them is the same for every level, e.g. when the runs "
                  "solved all levels alike)"))
    click.echo(f"written to {out}")


def _pool_lines(report: dict, browser: bool) -> None:
    """What a pool's refit pooled and how far it moved the difficulties, in words."""
    from pipeline.scores.irt import pooled_text

    moved = report["median_difficulty_move"]
    click.echo(f"{report['version']}: item parameters refit on its panel and "
               f"{report['episodes']} episodes of {report['scorecards']} closed scorecards "
               f"(browser runs {'included' if browser else 'excluded'}) by "
               f"{len(report['names'])} names, {report['levels_played']} of "
               f"{report['levels']} levels played")
    click.echo(f"  pooled: {pooled_text(report['pooled'])}")
    if moved is not None:
        click.echo(f"  median move of a level's difficulty: {moved:.3f} logits")
