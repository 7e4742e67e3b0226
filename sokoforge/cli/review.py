"""``sokoforge review``: which closed scorecards of a version need a look, with the evidence."""

from __future__ import annotations

__all__ = ["review_command", "review_lines"]

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import CliError, refusals
from sokoforge.cli.store_option import checked_store

if TYPE_CHECKING:
    from serve.records.review import VersionReview


@click.command("review")
@click.argument("version")
@click.option("--db", callback=checked_store, required=True, envvar="SOKOFORGE_DB",
              help="The server's store: its SQLite file or PostgreSQL URL (env SOKOFORGE_DB).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per scorecard per line: scorecard_id, name, verdict, "
                   "evidence (short sentences) and signals.")
@click.option("--clear", "clear", metavar="SCORECARD",
              help="Record that a person read SCORECARD's source and cleared it (with "
                   "--note); later reviews of VERSION, and of versions the IRT line links to "
                   "it, raise their frontier to its solved count. Runs no review.")
@click.option("--unclear", "unclear", metavar="SCORECARD",
              help="Undo SCORECARD's clearing (logged, like the clearing, with its date).")
@click.option("--note", default="", help="What the source review found (needed by --clear).")
@datasets_option
def review_command(version: str, db: str, as_json: bool, clear: str | None,
                   unclear: str | None, note: str, datasets: Path) -> None:
    """Review every closed scorecard that played VERSION: consistent, or needs review, with
    the evidence (each signal's value, what it was compared with, and its p-value).

    Voting signals: levels solved in optimal pushes where no panel agent within 256 dynamics
    calls a step is; successes on levels that panel never solves, against an agent of the
    same overall success; levels a key or name only failed before, replayed in their optimal
    moves. Person fit, no-ops and detours, and timing are shown and never vote. A voting
    signal below p = 0.01/3 flags the scorecard: an honest agent within the rule is flagged
    at most 1% of the time. It triages for source review and proves nothing.

    The rule is 256 dynamics calls per step. One call is one predicted transition of one
    candidate state: an expansion of four actions is four calls; a batch of B candidates
    rolled H steps is B×H calls.

    A person who read a flagged agent's source and found it within the rule clears it with
    --clear SCORECARD --note TEXT (logged in VERSION/clearances.json with its date; --unclear
    undoes it); the boards mark it "cleared", and later reviews raise K to it.

    Writes datasets/VERSION/report/review.json and review.md (a hidden version's stay its
    owner's and out of git). Exit 0 whatever it finds, 2 for an unknown version or store.
    """
    from serve.records.review import review_store

    if clear or unclear:
        _clearing(version, db, clear, unclear, note, datasets)
        return
    with refusals(2, f"cannot review {version}: "):
        done = review_store(datasets, version, db)
    if as_json:
        for review in done.reviews:
            click.echo(json.dumps(review.to_dict()))
        return
    for line in review_lines(version, done.review):
        click.echo(line)
    for path in done.files:
        click.echo(f"written to {path}")


def review_lines(version: str, done: VersionReview) -> list[str]:
    """The text output: a one-line summary (counts, the bound, the time taken), then each
    scorecard's verdict, solved count and reason; every signal of a flagged one, the first
    three of the others; then what the clearings did."""
    from pipeline.scores.review import bound
    from pipeline.versions.rounds import bound_text

    flagged = sum(r.verdict != "consistent" for r in done.reviews)
    ref = done.reference
    said = bound_text(bound(ref), ref.levels.height, done.equated_bound)
    stated = (f"; {said} (the reference"
              f"{' ' + ref.name if ref.name else ''} solves {ref.frontier_solved})")
    out = [f"{version}: {len(done.reviews)} closed scorecard(s), {flagged} need review{stated}; "
           f"reviewed in {done.seconds:.1f} s"]
    for review in done.reviews:
        out.append(f"  {review.name} {review.scorecard_id}: {review.verdict}, "
                   f"{review.solved} solved: {review.reason}")
        if review.verdict == "consistent":
            out += [f"    - {sentence}" for sentence in review.evidence[:3]]
        else:
            out += [f"    - {s.name}: {s.evidence}" for s in review.signals]
    out += [f"  clearances: {note}" for note in done.clearances]
    return out


def _clearing(version: str, db: str, clear: str | None, unclear: str | None, note: str,
              datasets: Path) -> None:
    """``--clear`` or ``--unclear``: one entry appended to VERSION/clearances.json."""
    from serve.records.clearing import clear_scorecard, unclear_scorecard

    if clear and unclear:
        raise CliError("give --clear or --unclear, not both", 2)
    with refusals(2, f"cannot {'clear' if clear else 'unclear'} on {version}: "):
        done = (clear_scorecard(datasets, version, db, clear, note) if clear
                else unclear_scorecard(datasets, version, str(unclear), note))
    said = "cleared" if clear else "no longer cleared"
    click.echo(f"{version}: {done.scorecard_id} ({done.name}, {done.solved} solved) {said} "
               f"at {done.at}; logged in {datasets / version / 'clearances.json'}")
