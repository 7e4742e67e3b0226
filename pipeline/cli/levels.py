"""``sokoforge solve`` and ``sokoforge render``: the engine on level files."""

from __future__ import annotations

import json
import sys

import click
import numpy as np

from engine.levels import Level, LevelError, parse_levels
from pipeline.cli.errors import CliError


def read_levels(path: str) -> list[Level]:
    """Levels from a file (``-`` for standard input); unreadable input exits with status 2."""
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
        return parse_levels(text)
    except LevelError as e:
        raise CliError(f"{name}: {e}", 2) from None


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
    from engine.solver import solve

    unsolvable, too_large = [], []
    for i, level in enumerate(read_levels(file)):
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
            name = f"level {i}" + (f" ({level.title})" if level.title else "")
            if ok:
                click.echo(
                    f"{name}: {result.moves} moves, {result.pushes} pushes: {result.solution}")
            else:
                click.echo(f"{name}: {result.status.replace('_', ' ')}"
                           f" after {result.states_expanded} states")
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
              help="Which level of the file.")
@click.option("--scale", type=click.IntRange(1, 16), default=4, show_default=True,
              help="Pixels per observation pixel, for people to look at.")
def render_command(file: str, out: str, index: int, scale: int) -> None:
    """Write the 64x64 observation and the goal image of a level side by side as PNG."""
    import matplotlib.image

    from engine.render import PALETTE, render, render_goal

    if not out.lower().endswith(".png"):
        raise CliError(f"--out {out}: the picture is written as PNG; name a .png file", 2)
    levels = read_levels(file)
    if index >= len(levels):
        raise CliError(f"{file} holds {len(levels)} level(s); --index must be below that", 2)
    level = levels[index]
    gap = np.broadcast_to(PALETTE[0], (64, 4, 3))
    picture = np.concatenate([render(level), gap, render_goal(level)], axis=1)
    picture = picture.repeat(scale, axis=0).repeat(scale, axis=1)
    try:
        matplotlib.image.imsave(out, picture, format="png")
    except OSError as e:
        raise CliError(f"cannot write {out}: {e.strerror or e}", 1) from None
    click.echo(f"wrote {out} ({picture.shape[1]}x{picture.shape[0]} px)")
