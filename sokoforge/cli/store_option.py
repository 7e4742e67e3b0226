"""The ``--db`` of every command that opens a store, checked as it is parsed: a location
that names no store is a usage error (exit 2, one line), before anything is opened."""

from __future__ import annotations

__all__ = ["checked_store", "store_location"]

import click

from sokoforge.cli.errors import USAGE, CliError


def store_location(value: str) -> str:
    """``value`` if it names a store (``serve.stores.location.checked``), else ``CliError``
    (exit 2) saying why not."""
    from serve.stores.location import BadLocation, checked

    try:
        return checked(value)
    except BadLocation as e:
        raise CliError(f"--db: {e}", USAGE) from None


def checked_store(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The click callback of ``--db`` (given, or from its environment variable)."""
    return None if value is None else store_location(value)
