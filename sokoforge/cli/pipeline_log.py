"""The pipeline's log on the terminal: each record's message alone, a line on stderr.

Below the command line, modules log (``logging``); a command shows what the pipeline logs,
INFO and up (progress, stage timings, warnings), on stderr beside the progress lines, so that
stdout carries only the command's output.
"""

from __future__ import annotations

__all__ = ["PIPELINE_LOGGER", "StderrLines", "show_pipeline_log"]

import logging

import click

PIPELINE_LOGGER = "pipeline"


class StderrLines(logging.Handler):
    """A record's message as one line on stderr, the stream looked up when written (as
    ``click.echo`` does), so that a redirected or captured stderr gets it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(self.format(record), err=True)
        except Exception:
            self.handleError(record)


def show_pipeline_log() -> None:
    """Show the pipeline's records from INFO up on stderr (once, however often called)."""
    logger = logging.getLogger(PIPELINE_LOGGER)
    if not any(isinstance(h, StderrLines) for h in logger.handlers):
        logger.addHandler(StderrLines())
    logger.setLevel(logging.INFO)
