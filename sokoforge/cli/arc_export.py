"""``sokoforge arc-export``: a public version as a local game of the ARC-AGI-3 toolkit."""

from __future__ import annotations

from pathlib import Path

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import refusals

__all__ = ["arc_export_command"]


@click.command("arc-export")
@click.argument("version")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--game-id", "game_id", default=None,
              help="The toolkit's game id (default: the ARC face's, sokoban_VERSION); also "
                   "the folder name.")
@datasets_option
def arc_export_command(version: str, out_dir: Path, game_id: str | None,
                       datasets: Path) -> None:
    """Write VERSION (public or imported; a hidden one is refused) as the ARC-AGI-3 local game
    OUT_DIR/GAME_ID/VERSION/ (metadata.json and sokoban.py), for arc_agi.Arcade in OFFLINE mode
    and its listen_and_serve: the ARC face's rules, budgets and frames."""
    from serve.arc.arc_export import export_arc_game

    with refusals():
        done = export_arc_game(datasets, version, out_dir, game_id)
    click.echo(f"{done.folder}: game {done.game_id}, {done.levels} levels "
               f"(Arcade(operation_mode=OperationMode.OFFLINE, environments_dir={str(out_dir)!r}))")
