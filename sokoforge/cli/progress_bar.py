"""The command line's progress display: a bar on a terminal, the pipeline's log lines otherwise.

The bar's ETA is measured from the first finished unit on (the first one carries start-up
costs such as loading the compiled kernels), and shown only once enough units and time have
passed to mean something.
"""

from __future__ import annotations

__all__ = ["MIN_SECONDS", "MIN_UNITS", "eta_text", "terminal_progress"]

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from pipeline.progress import Progress, log_lines

MIN_UNITS = 3  # units finished after the first before an ETA is shown
MIN_SECONDS = 1.0  # seconds since the first finished unit before an ETA is shown


class _Bar:
    """A click bar whose ETA text comes from ``eta_text`` rather than click's own guess."""

    def __init__(self, bar: Any, total: int) -> None:
        self.bar, self.total, self.done = bar, total, 0
        self.first: tuple[float, int] | None = None  # (time, units) when the first unit ended

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.first is None:
            self.first = (now, self.done)
        text = eta_text(now - self.first[0], self.done - self.first[1], self.total - self.done)
        self.bar.update(n, text or "")


def eta_text(elapsed: float, units: int, remaining: int) -> str | None:
    """``eta 1 min 05 s`` for ``remaining`` units at the pace of ``units`` in ``elapsed``
    seconds; None while that pace is not yet known or nothing remains."""
    if remaining <= 0 or units < MIN_UNITS or elapsed < MIN_SECONDS:
        return None
    seconds = round(elapsed / units * remaining)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"eta {hours} h {minutes:02d} min"
    return f"eta {minutes} min {seconds:02d} s" if minutes else f"eta {seconds} s"


@contextmanager
def terminal_progress(label: str, total: int) -> Iterator[Progress]:
    """A bar on stderr when it is a terminal; otherwise the pipeline's plain log lines."""
    if sys.stderr.isatty():
        with click.progressbar(length=total, label=label, file=sys.stderr, show_eta=False,
                               item_show_func=lambda text: text) as bar:
            yield _Bar(bar, total)
    else:
        with log_lines(label, total) as lines:
            yield lines
