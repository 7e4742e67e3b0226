"""Where stage work runs: in this process, on local joblib workers, or on a Dask cluster.

Results always come back in the order of the inputs, so the output of a stage does not
depend on how many workers computed it. A stop (Ctrl-C, or SIGTERM under ``sigterm_raises``)
unwinds the command like an error and kills its local workers at once, mid-task.
"""

from __future__ import annotations

__all__ = ["BACKENDS", "R", "T", "Terminated", "Workers", "end_local_workers", "sigterm_raises"]

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

from pipeline.progress import Display, progress

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
BACKENDS = ("loky", "dask")
_KILLED_WAIT = 5.0  # seconds to wait for a killed worker to be gone


class Terminated(BaseException):
    """SIGTERM, raised in the main thread by ``sigterm_raises``: not an error (``except
    Exception`` lets it through), so the command unwinds as on Ctrl-C."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises ``Terminated`` in the main thread (once: a second SIGTERM
    kills the process at once). Elsewhere than in the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise Terminated()

    before = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def end_local_workers() -> None:
    """Kill this process's worker processes (joblib's loky pool) at once, busy or not, and
    wait for them to be gone: a stopped command must leave none computing."""
    children = multiprocessing.active_children()
    for child in children:
        if child.pid is not None:  # the signal itself: loky's processes have no kill()
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
    for child in children:
        child.join(_KILLED_WAIT)


@dataclass(frozen=True)
class Workers:
    """How to run a stage's tasks: ``jobs`` local processes, or a Dask ``scheduler``."""

    jobs: int = 1
    backend: str = "loky"
    scheduler: str | None = None
    show_progress: bool = True
    display: Display | None = None  # how progress is shown (None: log lines)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.backend == "dask" and not self.scheduler:
            raise ValueError("the dask backend needs a scheduler address (--scheduler)")
        if self.jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {self.jobs}")

    def say(self, line: str) -> None:
        """Log a progress or timing line (INFO; the command line shows it on stderr), unless
        progress is off (``--quiet``)."""
        if self.show_progress:
            log.info(line)

    def map(self, fn: Callable[[T], R], items: Sequence[T], label: str) -> list[R]:
        """``[fn(x) for x in items]``, in parallel as configured, with a progress report."""
        out: list[R] = []
        with progress(label, len(items), self.show_progress, self.display) as bar:
            if self.backend == "loky" and self.jobs == 1:
                for item in items:
                    out.append(fn(item))
                    bar.update(1)
                return out
            import joblib  # only for parallel work: a one-job build does without it

            try:
                with self._parallel() as parallel:
                    for result in parallel(joblib.delayed(fn)(item) for item in items):
                        out.append(result)
                        bar.update(1)
            except (KeyboardInterrupt, Terminated):
                end_local_workers()
                raise
        return out

    @contextmanager
    def _parallel(self) -> Iterator[Any]:
        import joblib

        if self.backend == "dask":
            from distributed import Client

            with Client(self.scheduler, set_as_default=False) as client, \
                    joblib.parallel_config(backend="dask", client=client):
                yield joblib.Parallel(return_as="generator")
        else:
            yield joblib.Parallel(n_jobs=self.jobs, return_as="generator")
