"""Progress of a long stage: a bar on a terminal, a few plain lines otherwise.

Both go to stderr so that a command's real output stays clean. The bar's ETA is measured
from the first finished unit on (the first one carries start-up costs such as loading the
compiled kernels), and shown only once enough units and time have passed to mean something.
"""

from __future__ import annotations

__all__ = ["MIN_SECONDS", "MIN_UNITS", "Progress", "eta_text", "progress"]

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import click

MIN_UNITS = 3  # units finished after the first before an ETA is shown
MIN_SECONDS = 1.0  # seconds since the first finished unit before an ETA is shown


class Progress(Protocol):
    """Anything that counts finished units of work."""

    def update(self, n: int) -> None: ...


class _Lines:
    """Log lines at every quarter of the work, for logs and pipes."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done, self.next_mark = label, total, 0, 1

    def update(self, n: int) -> None:
        self.done += n
        passed = self.next_mark
        while self.next_mark <= 4 and self.done * 4 >= self.next_mark * self.total:
            self.next_mark += 1
        if self.next_mark > passed:  # one line however many quarters this update passed
            click.echo(f"{self.label}: {self.done}/{self.total}", err=True)


class _Silent:
    def update(self, n: int) -> None:
        pass


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
def progress(label: str, total: int, show: bool = True) -> Iterator[Progress]:
    """Report ``total`` units of work under ``label`` as they complete."""
    if not show or total <= 0:
        yield _Silent()
    elif sys.stderr.isatty():
        with click.progressbar(length=total, label=label, file=sys.stderr, show_eta=False,
                               item_show_func=lambda text: text) as bar:
            yield _Bar(bar, total)
    else:
        yield _Lines(label, total)
