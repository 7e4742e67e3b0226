"""The one way commands fail: a readable line on stderr and a chosen exit status."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from pipeline.errors import PipelineError


class CliError(click.ClickException):
    """Print ``Error: message`` (no traceback) and exit with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextmanager
def refusals(exit_code: int = 1, prefix: str = "") -> Iterator[None]:
    """Turn a pipeline refusal or a file the system would not read or write into a CliError.

    Every command on versions shares it, so none of them can end in a traceback for either.
    """
    try:
        yield
    except PipelineError as e:
        raise CliError(f"{prefix}{e}", exit_code) from None
    except OSError as e:
        where = f": {e.filename}" if e.filename else ""
        raise CliError(f"{prefix}{e.strerror or e}{where}", exit_code) from None
