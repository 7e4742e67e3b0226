"""``sokoforge audit``: check a finished version and write its report."""

from __future__ import annotations

__all__ = ["audit_command"]

from pathlib import Path

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import CliError, refusals
from sokoforge.cli.store_option import checked_store


@click.command("audit")
@click.argument("version")
@click.option("--against", default=None, metavar="OTHER",
              help="Another version to show side by side, tier by tier and slot by slot.")
@click.option("--db", callback=checked_store, default=None, metavar="STORE",
              help="A server's store (SQLite file or postgresql:// URL): also show how people "
              "fared on each level in the browser (report/people.md).")
@datasets_option
def audit_command(version: str, against: str | None, db: str | None, datasets: Path) -> None:
    """Re-check every promise of dataset VERSION and write report/report.md and report.html.

    With --against OTHER (not VERSION itself), tiers with the same crate count are compared
    slot by slot, and the report says what could not be compared. The report is written
    whole into a fresh folder and then swapped in. Exits 0 when every check passes, 1
    listing the failed checks, 2 when a version is missing or unreadable.
    """
    from pipeline.audit.audit import AuditRefused, audit
    from pipeline.audit.audit_report import Report
    from pipeline.stages.build import check_version_name
    from pipeline.versions.version import REPORT_DIR

    with refusals(2, f"cannot audit {version}: "):
        for name in (version, against):
            if name is not None:
                check_version_name(name)
        try:
            result = audit(datasets, version, against)
        except (FileNotFoundError, AuditRefused) as e:
            raise CliError(str(e), 2) from None
        except (KeyError, ValueError) as e:  # a table lacking a column, a bad value in one
            raise CliError(f"cannot audit {version}: {e}", 2) from None
    report = Report(result)
    folder = datasets / version / REPORT_DIR
    with refusals(1, "cannot write the report: "):
        report.write(folder)
    click.echo(report.summary())
    click.echo(f"\nreport: {folder / 'report.md'} and {folder / 'report.html'}")
    if db is not None:
        _people(version, db, folder)
    if not result.passed:
        names = "; ".join(c.name for c in result.failed)
        raise CliError(f"{version}: {len(result.failed)} check(s) failed: {names}", 1)


def _people(version: str, db: str, folder: Path) -> None:
    """Per-level solve rates of the runs people played in the browser, when there are any."""
    from pipeline.versions.hidden_files import private_writes_in
    from serve.records.human_play import browser_episodes, rates_markdown, solve_rates
    from serve.stores import StoreError

    try:
        rates = solve_rates(browser_episodes(db, version))
    except StoreError as e:
        raise CliError(f"--db: {e}", 2) from None
    if not rates:
        click.echo(f"\npeople: no run of {version} was played in the browser")
        return
    text = rates_markdown(version, rates)
    with refusals(1, "cannot write the report: "), private_writes_in(folder.parent):
        (folder / "people.md").write_text(text)
    click.echo("\n" + text + f"\npeople: {folder / 'people.md'}")
