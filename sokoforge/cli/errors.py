"""The one way commands fail: a readable line on stderr and a chosen exit status.

Exit statuses, the same for every command: 0 done, 1 a check failed or a request was
refused, 2 usage or unreadable input, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).
"""

from __future__ import annotations

__all__ = [
    "CliError", "ConventionGroup", "INTERRUPTED", "INTERRUPT_GRACE", "Interrupted", "REFUSED",
    "Stopped", "TERMINATED", "USAGE", "refusals", "run_interruptibly",
]

import asyncio
import signal
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import click

from pipeline.errors import InputError, PipelineError

REFUSED = 1  # a check failed or a request was refused
USAGE = 2  # usage or unreadable input
INTERRUPTED = 130  # 128 + SIGINT, as shells report a process stopped by Ctrl-C
TERMINATED = 143  # 128 + SIGTERM
INTERRUPT_GRACE = 1.0  # seconds an interrupted coroutine may take to clean up


class CliError(click.ClickException):
    """Print ``Error: message`` (no traceback) and exit with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = REFUSED) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click types it per class


class Interrupted(CliError):
    """Ctrl-C (or a closed prompt): one line and exit status 130, not click's ``Aborted!``."""

    def __init__(self) -> None:
        super().__init__("interrupted", INTERRUPTED)


class Stopped(CliError):
    """SIGTERM: one line and exit status 143, once the command has unwound (its workers
    ended, a build left to resume)."""

    def __init__(self) -> None:
        super().__init__("terminated", TERMINATED)


class ConventionGroup(click.Group):
    """A command group whose commands end an interruption with ``Interrupted`` and SIGTERM
    with ``Stopped`` (a command that serves installs its own handlers); Ctrl-C while the
    arguments are parsed too (during the imports, ``sokoforge.command`` catches it)."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            raise Interrupted() from None

    def invoke(self, ctx: click.Context) -> Any:
        from pipeline.workers import Terminated, end_local_workers, sigterm_raises

        try:
            with sigterm_raises():
                return super().invoke(ctx)
        except (KeyboardInterrupt, click.Abort):  # click.Abort: Ctrl-C or EOF at a prompt
            raise Interrupted() from None
        except Terminated:
            end_local_workers()  # idle ones too: stopped between two parallel steps
            raise Stopped() from None


@contextmanager
def refusals(exit_code: int = 1, prefix: str = "") -> Iterator[None]:
    """Turn a pipeline refusal or a file the system would not read or write into a CliError.

    Every command on versions shares it, so none of them can end in a traceback for either.
    Input that is not there or unreadable (``InputError``) exits 2, anything else
    ``exit_code``.
    """
    try:
        yield
    except InputError as e:
        raise CliError(f"{prefix}{e}", USAGE) from None
    except PipelineError as e:
        raise CliError(f"{prefix}{e}", exit_code) from None
    except OSError as e:
        where = f": {e.filename}" if e.filename else ""
        raise CliError(f"{prefix}{e.strerror or e}{where}", exit_code) from None


def run_interruptibly[T](main: Coroutine[Any, Any, T], grace: float = INTERRUPT_GRACE) -> T:
    """Run ``main`` on a new event loop, as ``asyncio.run`` does; Ctrl-C cancels it and raises
    ``Interrupted`` once it has cleaned up, or after ``grace`` seconds if it has not.

    The loop's own signal handler wakes it through its wakeup descriptor, so the interruption
    is seen at once whichever thread the signal reached (``asyncio.run``'s handler waits for
    the main thread to wake, which a pending request may not do for a minute).
    """
    loop = asyncio.new_event_loop()
    task = loop.create_task(main)
    interrupts = 0

    def interrupt() -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            task.cancel()
            loop.call_later(grace, loop.stop)
        else:  # again: stop waiting for the cleanup
            loop.stop()

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
    except (ValueError, RuntimeError):  # not the main thread: Ctrl-C is the caller's
        pass
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if interrupts:  # whatever the cleanup raised, or the loop stopped before it ended
            loop.set_exception_handler(lambda _loop, _context: None)  # no leftover warnings
            raise Interrupted() from None
        raise
    finally:
        if not interrupts:
            pending = asyncio.all_tasks(loop)
            for left in pending:
                left.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()  # Ctrl-C back to the default handler
