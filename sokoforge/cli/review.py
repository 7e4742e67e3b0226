"""``sokoforge review``: which closed scorecards of a version need a look, with the evidence."""

from __future__ import annotations

__all__ = ["review_command"]

import json
from pathlib import Path

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import refusals
from sokoforge.cli.store_option import checked_store


@click.command("review")
@click.argument("version")
@click.option("--db", callback=checked_store, required=True, envvar="SOKOFORGE_DB",
              help="The server's store: its SQLite file or PostgreSQL URL (env SOKOFORGE_DB).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per scorecard per line: scorecard_id, name, verdict, "
                   "evidence (short sentences) and signals.")
@datasets_option
def review_command(version: str, db: str, as_json: bool, datasets: Path) -> None:
    """Review every closed scorecard that played VERSION: consistent, or needs review, with
    the evidence (each signal's value, what it was compared with, and its p-value).

    Voting signals: levels solved in optimal pushes where no panel agent within 256 dynamics
    calls a step is; successes on levels that panel never solves, against an agent of the
    same overall success; levels a key or name only failed before, replayed in their optimal
    moves. Person fit, no-ops and detours, and timing are shown and never vote. A voting
    signal below p = 0.01/3 flags the scorecard: an honest agent within the rule is flagged
    at most 1% of the time. It triages for source review and proves nothing.

    Writes datasets/VERSION/report/review.json and review.md (a hidden version's stay its
    owner's and out of git). Exit 0 whatever it finds, 2 for an unknown version or store.
    """
    from serve.records.review import review_store

    with refusals(2, f"cannot review {version}: "):
        done = review_store(datasets, version, db)
    if as_json:
        for review in done.reviews:
            click.echo(json.dumps(review.to_dict()))
        return
    flagged = sum(r.verdict != "consistent" for r in done.reviews)
    click.echo(f"{version}: {len(done.reviews)} closed scorecard(s), {flagged} need review")
    for review in done.reviews:
        click.echo(f"  {review.name} {review.scorecard_id}: {review.verdict}")
        for sentence in review.evidence[:3 if review.verdict == "consistent" else None]:
            click.echo(f"    - {sentence}")
    for path in done.files:
        click.echo(f"written to {path}")
