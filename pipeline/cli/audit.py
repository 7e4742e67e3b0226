"""``sokoforge audit``: check a finished version and write its report."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli.build import datasets_option
from pipeline.cli.errors import CliError


@click.command("audit")
@click.argument("version")
@click.option("--against", default=None, metavar="OTHER",
              help="Another version to show side by side, tier by tier and slot by slot.")
@datasets_option
def audit_command(version: str, against: str | None, datasets: Path) -> None:
    """Re-check every promise of dataset VERSION and write report/report.md and report.html.

    Exits 0 when every check passes, 1 listing the failed checks.
    """
    from pipeline.audit import audit
    from pipeline.audit_report import Report
    from pipeline.errors import PipelineError

    for name in (version, against):
        if name is not None and (not name or name.startswith(".") or "/" in name):
            raise CliError(f"{name!r} is not a version name", 2)
    try:
        result = audit(datasets, version, against)
    except FileNotFoundError as e:
        raise CliError(str(e), 2) from None
    except (PipelineError, KeyError, ValueError) as e:
        raise CliError(f"cannot audit {version}: {e}", 2) from None
    report = Report(result)
    folder = datasets / version / "report"
    report.write(folder)
    click.echo(report.summary())
    click.echo(f"\nreport: {folder / 'report.md'} and {folder / 'report.html'}")
    if not result.passed:
        names = "; ".join(c.name for c in result.failed)
        raise CliError(f"{version}: {len(result.failed)} check(s) failed: {names}", 1)
