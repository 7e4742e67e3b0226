"""``sokoforge solve`` and ``sokoforge render``: the engine on level files."""

from __future__ import annotations

__all__ = ["read_drawn_levels", "read_levels", "render_command", "solve_command"]

import json
import os
import sys

import click
import numpy as np

from engine.level_files import FileLevel, read_collection
from engine.levels import Level, LevelError, parse_xsb
from engine.look import SHARED, Look, LookError, Theme, painter, stored_look
from sokoforge.cli.errors import CliError, refusals


def read_levels(path: str) -> list[FileLevel]:
    """The boards of a collection file (``-`` for standard input), read as ``import`` reads
    them (titles, headings, comments); unreadable input exits with status 2."""
    name = "standard input" if path == "-" else path
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read {name}: {getattr(e, 'strerror', None) or e}", 2) from None
    try:
        return read_collection(text, source=name)
    except LevelError as e:
        raise CliError(str(e), 2) from None


@click.command("solve")
@click.argument("file", type=str)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per level per line.")
@click.option("--max-states", type=click.IntRange(1), default=50_000_000, show_default=True,
              help="Give up (status too_large) past this many states.")
def solve_command(file: str, as_json: bool, max_states: int) -> None:
    """Solve every level of FILE (XSB; - for stdin) to optimal (fewest moves).

    Prints per level the optimal moves, the pushes of the solution and the
    solution in LURD. Exits 1 when a level is unsolvable or too large to search,
    2 on unreadable input.
    """
    from engine.solver import SolveResult, solve

    unsolvable, too_large = [], []
    for i, board in enumerate(read_levels(file)):
        level = board.level
        if level is None:  # beyond the engine's board or crate bound: too large, never searched
            result = SolveResult("too_large", None, None, None, 0)
        else:
            result = solve(level, max_states=max_states)
        ok = result.status == "solved"
        if as_json:
            click.echo(json.dumps({
                "index": i,
                "solvable": {"solved": True, "unsolvable": False}.get(result.status),
                "status": result.status,
                "optimal_moves": result.moves,
                "optimal_pushes": result.pushes,
                "solution": result.solution,
                "states_expanded": result.states_expanded if ok else None,
            }))
        else:
            name = f"level {i}" + (f" ({board.title})" if board.title else "")
            if ok:
                click.echo(
                    f"{name}: {result.moves} moves, {result.pushes} pushes: {result.solution}")
            else:
                why = (f": {board.too_large}" if board.too_large
                       else f" after {result.states_expanded} states")
                click.echo(f"{name}: {result.status.replace('_', ' ')}{why}")
        if result.status == "unsolvable":
            unsolvable.append(str(i))
        elif result.status == "too_large":
            too_large.append(str(i))
    problems = []
    if unsolvable:
        problems.append("no solution for level " + ", ".join(unsolvable))
    if too_large:
        # past --max-states, or a state index over the engine's memory bound: unknown, not none
        problems.append("too large to search: level " + ", ".join(too_large))
    if problems:
        raise CliError("; ".join(problems), 1)


@click.command("render")
@click.argument("file", type=str)
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="PNG file to write.")
@click.option("--index", "index", type=click.IntRange(0), default=0, show_default=True,
              help="Which level of the file (of the version, in play order).")
@click.option("--look", "look_name", type=click.Choice(["shared", "arc"]), default=None,
              help="Draw in this look [default: shared, or the version's own look].")
@click.option("--theme", "theme_file", type=str, default=None,
              help="A theme JSON file (the eleven fields of DESIGN.md) to draw in; a theme "
                   "with noise_std > 0 draws its noise with key 0.")
@click.option("--actions", "actions", type=str, default="",
              help="Moves to play first, in LURD letters (e.g. rrUl).")
@click.option("--scale", type=click.IntRange(1, 16), default=4, show_default=True,
              help="Pixels per observation pixel, for people to look at.")
def render_command(file: str, out: str, index: int, look_name: str | None,
                   theme_file: str | None, actions: str, scale: int) -> None:
    """Write the 64x64 observation (after --actions) and the goal image side by side as PNG.

    FILE is an XSB file, or a version folder (datasets/VERSION), drawn in its own look.
    """
    import matplotlib.image

    from engine.rules import replay

    if not out.lower().endswith(".png"):
        raise CliError(f"--out {out}: the picture is written as PNG; name a .png file", 2)
    folder = os.path.dirname(out) or "."
    if not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
        # a usage error, as calibrate's --out and serve's --db: refused before drawing
        raise CliError(f"cannot write {out}: no writable folder there", 2)
    if look_name is not None and theme_file is not None:
        raise CliError("--look and --theme exclude each other: a theme is its own look", 2)
    levels, looks = read_drawn_levels(file)
    if index >= len(levels):
        raise CliError(f"{file} holds {len(levels)} level(s); --index must be below that", 2)
    level, look = levels[index], looks[index]
    if look_name is not None:
        look = Look(look_name)
    if theme_file is not None:
        try:
            with open(theme_file, encoding="utf-8") as f:
                theme = Theme.from_json(f.read())
        except (OSError, UnicodeDecodeError) as e:
            raise CliError(f"cannot read --theme {theme_file}: "
                           f"{getattr(e, 'strerror', None) or e}", 2) from None
        except LookError as e:
            raise CliError(f"--theme {theme_file}: {e}", 2) from None
        look = Look("themed", theme, 0)
    try:
        states = replay(level, actions)
    except ValueError as e:
        raise CliError(f"--actions {actions[:40]!r}: {e} (use u, d, l, r)", 2) from None
    drawn = painter(level, look)
    gap = np.full((64, 4, 3), 255, dtype=np.uint8)
    picture = np.concatenate([drawn.frame(states[-1], len(states) - 1), gap, drawn.goal()],
                             axis=1)
    picture = picture.repeat(scale, axis=0).repeat(scale, axis=1)
    try:
        matplotlib.image.imsave(out, picture, format="png")
    except OSError as e:
        raise CliError(f"cannot write {out}: {e.strerror or e}", 1) from None
    click.echo(f"wrote {out} ({picture.shape[1]}x{picture.shape[0]} px)")



def read_drawn_levels(path: str) -> tuple[list[Level], list[Look]]:
    """The levels of an XSB file (drawn shared) or of a version folder (in its stored looks)."""
    from pathlib import Path

    from pipeline.version import open_version

    folder = Path(path)
    if not folder.is_dir():
        levels = []
        for board in read_levels(path):
            if board.level is None:
                raise CliError(f"{board.name(path)}: {board.too_large}", 2)
            levels.append(board.level)
        return levels, [SHARED] * len(levels)
    with refusals(2, f"{path}: "):
        opened = open_version(folder.parent, folder.name, require_intact=False)
        table = opened.levels().sort("index")
    try:
        levels = [parse_xsb(x) for x in table["xsb"]]
        looks = [stored_look(opened.look, r)
                 for r in table.iter_rows(named=True)]
    except (LevelError, LookError) as e:
        raise CliError(f"{path}: {e}", 2) from None
    return levels, looks
