"""The one way commands fail: a readable line on stderr and a chosen exit status."""

from __future__ import annotations

import click


class CliError(click.ClickException):
    """Print ``Error: message`` (no traceback) and exit with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
