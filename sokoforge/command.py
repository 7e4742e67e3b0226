"""The ``sokoforge`` console script: Ctrl-C exits 130 with one line from its first instant.

The command's modules take about a third of a second to import (click, numpy, polars, the
pipeline); an interrupt then is caught here, where nothing heavy is loaded yet, and ends the
command as the command group ends one later (``sokoforge.cli.errors``), not in a traceback.
"""

from __future__ import annotations

__all__ = ["INTERRUPTED", "INTERRUPTED_LINE", "main"]

import sys

# What sokoforge.cli.errors' ``Interrupted`` ends a command with, said here without importing
# it (the package below is what is being imported); tests/test_cli_convention.py holds both.
INTERRUPTED = 130  # 128 + SIGINT, as shells report a process stopped by Ctrl-C
INTERRUPTED_LINE = "Error: interrupted"


def main() -> None:
    """Import the command group and run it; Ctrl-C during the import is one line, exit 130."""
    try:
        from sokoforge.cli import main as command
    except KeyboardInterrupt:
        print(INTERRUPTED_LINE, file=sys.stderr)
        sys.exit(INTERRUPTED)
    command()
