"""Progress of a long stage: a bar on a terminal, a few plain lines otherwise.

Both go to stderr so that a command's real output stays clean.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

import click


class Progress(Protocol):
    """Anything that counts finished units of work."""

    def update(self, n: int) -> None: ...


class _Lines:
    """Log lines at every quarter of the work, for logs and pipes."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done, self.next_mark = label, total, 0, 1

    def update(self, n: int) -> None:
        self.done += n
        while self.next_mark <= 4 and self.done * 4 >= self.next_mark * self.total:
            click.echo(f"{self.label}: {self.done}/{self.total}", err=True)
            self.next_mark += 1


class _Silent:
    def update(self, n: int) -> None:
        pass


@contextmanager
def progress(label: str, total: int, show: bool = True) -> Iterator[Progress]:
    """Report ``total`` units of work under ``label`` as they complete."""
    if not show or total <= 0:
        yield _Silent()
    elif sys.stderr.isatty():
        with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
            yield bar
    else:
        yield _Lines(label, total)
