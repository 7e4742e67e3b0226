"""The one way commands fail: a readable line on stderr and a chosen exit status.

Exit statuses, the same for every command: 0 done, 1 a check failed or a request was
refused, 2 usage or unreadable input, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).
"""

from __future__ import annotations

__all__ = [
    "CliError", "ConventionGroup", "INTERRUPTED", "Interrupted", "REFUSED", "Stopped",
    "TERMINATED", "USAGE", "refusals",
]

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from pipeline.errors import InputError, PipelineError

REFUSED = 1  # a check failed or a request was refused
USAGE = 2  # usage or unreadable input
INTERRUPTED = 130  # 128 + SIGINT, as shells report a process stopped by Ctrl-C
TERMINATED = 143  # 128 + SIGTERM


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
    with ``Stopped`` (a command that serves installs its own handlers)."""

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
