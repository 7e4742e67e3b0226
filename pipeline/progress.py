"""Progress of a long stage: a log line at every quarter of the work, or the display passed in.

The pipeline only logs; a display that draws (the command line's bar on a terminal) is a part
the caller passes to ``Workers``, so nothing below the command line writes to the terminal.
"""

from __future__ import annotations

__all__ = ["Display", "Progress", "log_lines", "progress"]

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

log = logging.getLogger(__name__)


class Progress(Protocol):
    """Anything that counts finished units of work."""

    def update(self, n: int) -> None: ...


Display = Callable[[str, int], AbstractContextManager[Progress]]
"""Shows ``total`` units of work under ``label`` as they complete: ``display(label, total)``."""


class _Lines:
    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done, self.next_mark = label, total, 0, 1

    def update(self, n: int) -> None:
        self.done += n
        passed = self.next_mark
        while self.next_mark <= 4 and self.done * 4 >= self.next_mark * self.total:
            self.next_mark += 1
        if self.next_mark > passed:  # one line however many quarters this update passed
            log.info("%s: %d/%d", self.label, self.done, self.total)


class _Silent:
    def update(self, n: int) -> None:
        pass


@contextmanager
def log_lines(label: str, total: int) -> Iterator[Progress]:
    """Log ``label: done/total`` at every quarter of the work (INFO), for logs and pipes."""
    yield _Lines(label, total)


@contextmanager
def progress(label: str, total: int, show: bool = True, display: Display | None = None
             ) -> Iterator[Progress]:
    """Report ``total`` units of work under ``label`` through ``display`` (by default
    ``log_lines``); nothing when ``show`` is off or there is no work."""
    if not show or total <= 0:
        yield _Silent()
    else:
        with (display or log_lines)(label, total) as shown:
            yield shown
