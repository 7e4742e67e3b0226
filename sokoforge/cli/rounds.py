"""``sokoforge round open|close``: a version's round, from its closing time to its final
standings."""

from __future__ import annotations

__all__ = ["round_group"]

from pathlib import Path

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import refusals

DB_ENV = "SOKOFORGE_DB"


@click.group("round")
def round_group() -> None:
    """Open a version's round with a closing time; close it, writing its final standings."""


@round_group.command("open")
@click.argument("version")
@click.option("--closes", required=True, metavar="TIME",
              help="When the round closes: ISO 8601, e.g. 2026-12-31T23:59Z (UTC when no zone "
                   "is given). Run again to move it.")
@datasets_option
def open_command(version: str, closes: str, datasets: Path) -> None:
    """Open VERSION's round until TIME (recorded in VERSION/round.json).

    A server serving VERSION refuses new scorecards and play on it (409, with the reason)
    from TIME on, without a restart; a scorecard not closed by then is not ranked.
    """
    from pipeline.rounds import iso, open_round, parse_time

    with refusals():
        rnd = open_round(datasets, version, parse_time(closes))
    click.echo(f"{version}: round open until {iso(rnd.closes)}")


@round_group.command("close")
@click.argument("version")
@click.option("--db", default="sokoforge.sqlite", envvar=DB_ENV, show_default=True,
              help="The server's store: a SQLite file or a postgresql:// URL "
                   f"(env {DB_ENV}).")
@datasets_option
def close_command(version: str, db: str, datasets: Path) -> None:
    """Close VERSION's round (now, if its closing time is still ahead) and write its final
    standings: VERSION/standings.json and .csv (each name's best scorecard closed in time,
    ranked, with its scorecard id) and standings.sha256, whose digest round.json records.

    Then `sokoforge reveal VERSION` publishes the seed.
    """
    from pipeline.rounds import iso
    from serve.standings import close_round

    with refusals():
        done = close_round(datasets, version, db)
    rnd = done.round
    click.echo(f"{version}: round closed at {iso(rnd.closes)}; {len(done.rows)} ranked "
               f"name(s)")
    for path in done.files:
        click.echo(f"  {path}")
    click.echo(f"standings.sha256 sha256 {rnd.standings_sha256}")
