"""``sokoforge round open|status|close|publish``: a version's round, from its closing time
to its final standings and its publication."""

from __future__ import annotations

__all__ = [
    "close_command", "open_command", "publish_command", "round_group", "status_command",
    "undo_close_command",
]

from pathlib import Path

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import refusals
from sokoforge.cli.store_option import checked_store

DB_ENV = "SOKOFORGE_DB"


@click.group("round")
def round_group() -> None:
    """Open a version's round with a closing time; close it, writing its final standings;
    publish it."""


@round_group.command("open")
@click.argument("version")
@click.option("--closes", required=True, metavar="TIME",
              help="When the round closes: ISO 8601, e.g. 2026-12-31T23:59Z (UTC when no zone "
                   "is given; to the millisecond at most). Run again to move it.")
@click.option("--reopen", is_flag=True,
              help="Reopen a round whose closing time has passed (not closed yet): play on "
                   "it resumes until TIME.")
@datasets_option
def open_command(version: str, closes: str, reopen: bool, datasets: Path) -> None:
    """Open VERSION's round until TIME (recorded in VERSION/round.json).

    A server serving VERSION refuses new scorecards and play on it (409, with the reason)
    from TIME on, without a restart; a scorecard not closed by then is not ranked. A time
    moved earlier must be at least a few seconds ahead (`round close` closes now). A round
    whose closing time has passed is refused unless --reopen is given.
    """
    import time

    from pipeline.versions.rounds import iso, open_round, parse_time, read_round, version_folder

    now = time.time()
    with refusals():
        before = read_round(version_folder(datasets, version))
        rnd = open_round(datasets, version, parse_time(closes, now), now, reopen)
    if before is not None and before.is_over(now):
        click.echo(f"{version}: round reopened until {iso(rnd.closes)} (it was over since "
                   f"{iso(before.closes)})")
    else:
        click.echo(f"{version}: round open until {iso(rnd.closes)}")


@round_group.command("status")
@click.argument("version")
@datasets_option
def status_command(version: str, datasets: Path) -> None:
    """Say where VERSION's round stands: none, open (until when), over (its time passed, not
    closed yet), closed (its standings' sha256) or published."""
    import time

    from pipeline.versions.rounds import iso, read_round, round_state, version_folder

    with refusals():
        rnd = read_round(version_folder(datasets, version))
    now = time.time()
    state = round_state(rnd, now)
    if rnd is None:
        click.echo(f"{version}: no round (sokoforge round open {version} --closes TIME)")
        return
    sums = f"standings sha256 {rnd.standings_sha256}"
    lines = {"open": f"open until {iso(rnd.closes)} ({_left(rnd.closes - now)} left)",
             "over": f"over since {iso(rnd.closes)}, not closed: sokoforge round close "
                     f"{version} --db STORE",
             "closed": f"closed at {iso(rnd.closes)}; {sums}",
             "published": f"published at {iso(rnd.published or 0)}, closed at "
                          f"{iso(rnd.closes)}; {sums}"}
    click.echo(f"{version}: round {lines[state]}")


def _left(seconds: float) -> str:
    for unit, size, most in (("s", 1, 120), ("min", 60, 120), ("h", 3600, 48)):
        if seconds < size * most:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds / 86400:.0f} days"


@round_group.command("close")
@click.argument("version")
@click.option("--db", callback=checked_store, default="sokoforge.sqlite", envvar=DB_ENV,
              show_default=True,
              help="The server's store: a SQLite file or a postgresql:// URL "
                   f"(env {DB_ENV}).")
@datasets_option
def close_command(version: str, db: str, datasets: Path) -> None:
    """Close VERSION's round and write its final standings: VERSION/standings.json and .csv
    (each named player's best scorecard closed before the closing time, ranked, with its
    scorecard id; anonymous keys are not ranked) and standings.sha256, whose digest
    round.json records.

    The store is opened first: if it cannot be, or it is not a store that served the round
    (a server records its store's id in VERSION/round.log), nothing changes. A wrong close
    is undone, before publication, by `round undo-close`. A round still open closes a
    few seconds from now, once every server has seen the time. Closing again writes the same
    bytes. Then `sokoforge reveal VERSION` publishes the seed.
    """
    from pipeline.versions.rounds import iso
    from serve.records.standings import close_round

    with refusals():
        done = close_round(datasets, version, db)
    rnd = done.round
    click.echo(f"{version}: round closed at {iso(rnd.closes)}; {len(done.rows)} ranked "
               f"name(s)")
    for path in done.files:
        click.echo(f"  {path}")
    click.echo(f"standings.sha256 sha256 {rnd.standings_sha256}")


@round_group.command("undo-close")
@click.argument("version")
@click.option("--reason", required=True, metavar="TEXT",
              help="Why the close is undone (e.g. closed from the wrong --db); logged.")
@datasets_option
def undo_close_command(version: str, reason: str, datasets: Path) -> None:
    """Undo VERSION's close, before it is published: the standings files are removed, the
    round is over but not closed, and the undo (when, why, the standings' sha256) is
    appended to VERSION/round.log. Then close it again with the store that served it:
    sokoforge round close VERSION --db STORE. A published round's standings stand.
    """
    from pipeline.versions.rounds import iso
    from serve.records.standings import undo_close

    with refusals():
        was, _ = undo_close(datasets, version, reason)
    click.echo(f"{version}: the close of {iso(was.closed or 0)} is undone (standings sha256 "
               f"{was.standings_sha256}, logged in round.log); close it again: sokoforge "
               f"round close {version} --db STORE")


@round_group.command("publish")
@click.argument("version")
@datasets_option
def publish_command(version: str, datasets: Path) -> None:
    """Make VERSION's closed and revealed round public: its manifest says public (with the
    revealed seed), its .gitignore goes, and its levels, manifest, round.json, reveal.json and
    standings can be committed. A server may then serve VERSION as a practice set (play not
    ranked; its board stays the final standings). Refused while a server here serves it."""
    from pipeline.versions.publish import publish_round

    with refusals():
        done = publish_round(datasets, version)
    note = "published" if done.first_time else "already published"
    click.echo(f"{version}: {note}; verify it with: sokoforge verify {version} --seed "
               f"{done.seed}")
    for path in done.files:
        click.echo(f"  {path}")
