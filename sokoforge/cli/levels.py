"""``sokoforge solve`` and ``sokoforge render``: the engine on level files."""

from __future__ import annotations

__all__ = [
    "labelled", "read_drawn_levels", "read_levels", "render_command", "solve_command",
    "write_animation",
]

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import click
import numpy as np

from engine.level_files import FileLevel, read_collection
from engine.levels import Level, LevelError, parse_xsb
from engine.pictures.look import SHARED, Look, LookError, Theme, painter, stored_look
from sokoforge.cli.build import datasets_option
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
    from engine.search.solver import SolveResult, solve

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
                "level": i + 1,
                "solvable": {"solved": True, "unsolvable": False}.get(result.status),
                "status": result.status,
                "optimal_moves": result.moves,
                "optimal_pushes": result.pushes,
                "solution": result.solution,
                "states_expanded": result.states_expanded if ok else None,
            }))
        else:
            name = f"level {i + 1}" + (f" ({board.title})" if board.title else "")
            if ok:
                click.echo(
                    f"{name}: {result.moves} moves, {result.pushes} pushes: {result.solution}")
            else:
                why = (f": {board.too_large}" if board.too_large
                       else f" after {result.states_expanded} states")
                click.echo(f"{name}: {result.status.replace('_', ' ')}{why}")
        if result.status == "unsolvable":
            unsolvable.append(str(i + 1))
        elif result.status == "too_large":
            too_large.append(str(i + 1))
    problems = []
    if unsolvable:
        problems.append("no solution for level " + ", ".join(unsolvable))
    if too_large:
        # past --max-states, or a state index over the engine's memory bound: unknown, not none
        problems.append("too large to search: level " + ", ".join(too_large))
    if problems:
        raise CliError("; ".join(problems), 1)


@click.command("render")
@click.argument("source", metavar="VERSION|FILE", type=str)
@click.option("--out", "out", default=None, type=click.Path(dir_okay=False),
              help="PNG file to write: the observation after --actions beside the goal.")
@click.option("--gif", "--animation", "animation", default=None,
              type=click.Path(dir_okay=False),
              help="An animation to write instead, one frame per step of --actions or "
                   "--solution: OUT.gif, or OUT.png for an animated PNG (lossless, for noisy "
                   "looks).")
@click.option("--solution", is_flag=True,
              help="Play the level's optimal solution (the version's stored one; solved for "
                   "a level file) instead of --actions.")
@click.option("--index", "index", type=click.IntRange(0), default=0, show_default=True,
              help="Which level: its 0-based index in the file (in the version, in play "
                   "order; level N of a message is index N-1).")
@click.option("--look", "look_name", type=click.Choice(["shared", "arc"]), default=None,
              help="Draw in this look [default: shared, or the version's own look].")
@click.option("--theme", "theme_file", type=str, default=None,
              help="A theme JSON file (its fields: docs/reference/spec.md, Themes) to draw "
                   "in; a theme with noise_std > 0 draws its noise with key 0.")
@click.option("--actions", "actions", type=str, default="",
              help="Moves to play first, in LURD letters (e.g. rrUl).")
@click.option("--scale", type=click.IntRange(1, 16), default=4, show_default=True,
              help="Pixels per observation pixel, for people to look at.")
@click.option("--frame-ms", type=click.IntRange(20, 5000), default=150, show_default=True,
              help="Milliseconds per step of an animation (its last frame stays 1 s).")
@datasets_option
def render_command(source: str, out: str | None, animation: str | None, solution: bool,
                   index: int, look_name: str | None, theme_file: str | None, actions: str,
                   scale: int, frame_ms: int, datasets: Path) -> None:
    """Write the 64x64 observation (after --actions) and the goal image side by side as PNG,
    or (--gif) an animation of every step, each frame labelled, e.g. of the level's solution.

    VERSION is a version's name (under --datasets) or folder, drawn in its own look; FILE an
    XSB file (- for standard input), drawn in the shared look.
    """
    from engine.rules import replay

    if (out is None) == (animation is None):
        raise CliError("give exactly one of --out PNG and --gif OUT.gif|OUT.png", 2)
    if solution and actions:
        raise CliError("--solution and --actions exclude each other", 2)
    target = str(out or animation)
    if out is not None and not out.lower().endswith(".png"):
        raise CliError(f"--out {out}: the picture is written as PNG; name a .png file", 2)
    if animation is not None and not animation.lower().endswith((".gif", ".png")):
        raise CliError(f"--gif {animation}: name a .gif file, or a .png for an animated PNG",
                       2)
    folder = os.path.dirname(target) or "."
    if not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
        # a usage error, as calibrate's --out and serve's --db: refused before drawing
        raise CliError(f"cannot write {target}: no writable folder there", 2)
    if look_name is not None and theme_file is not None:
        raise CliError("--look and --theme exclude each other: a theme is its own look", 2)
    levels, looks, solutions = read_drawn_levels(source, datasets)
    if index >= len(levels):
        raise CliError(f"{source} holds {len(levels)} level(s); --index must be below that", 2)
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
    if solution:
        actions = solutions[index] or _solve(level, source, index)
    try:
        states = replay(level, actions)
    except ValueError as e:
        raise CliError(f"--actions {actions[:40]!r}: {e} (use u, d, l, r)", 2) from None
    drawn = painter(level, look)
    gap = np.full((64, 4, 3), 255, dtype=np.uint8)
    goal = drawn.goal()

    def picture(step: int) -> np.ndarray:
        beside = np.concatenate([drawn.frame(states[step], step), gap, goal], axis=1)
        return beside.repeat(scale, axis=0).repeat(scale, axis=1)

    try:
        if out is not None:
            import matplotlib.image

            shown = picture(len(states) - 1)
            matplotlib.image.imsave(out, shown, format="png")
            click.echo(f"wrote {out} ({shown.shape[1]}x{shown.shape[0]} px)")
            return
        steps = len(states) - 1
        solved = level.is_solved(states[-1])

        def label(first: int, last: int) -> str:
            """What a frame shows: the level, the step(s) and the move(s) that led to it."""
            if last == 0:
                return f"level {index + 1}  start  0/{steps}"
            which = f"step {first}" if first == last else f"steps {first}-{last}"
            done = "  solved" if last == steps and solved else ""
            return f"level {index + 1}  {which}/{steps}  {actions[first - 1:last]}{done}"

        frames = write_animation(target, [picture(i) for i in range(len(states))], frame_ms,
                                 label)
    except OSError as e:
        raise CliError(f"cannot write {target}: {e.strerror or e}", 1) from None
    click.echo(f"wrote {animation} ({len(frames)} frames of {frames[0].shape[1]}x"
               f"{frames[0].shape[0]} px, {len(states) - 1} steps)")


def write_animation(path: str, frames: list[np.ndarray], frame_ms: int,
                    label: Callable[[int, int], str] | None = None) -> list[np.ndarray]:
    """``frames`` (RGB, one per step) as an animated GIF or, for a ``.png`` path, an animated
    PNG; each shown ``frame_ms``, the last one 1 s, looping. A frame equal to the one before
    (a step into a wall) lengthens that one instead. ``label(first, last)`` names the steps a
    shown frame stands for, written on a strip beneath it. Returns the frames written."""
    from PIL import Image

    runs: list[list[int]] = []  # [first, last] step of each shown frame
    for i, frame in enumerate(frames):
        if runs and np.array_equal(frame, frames[runs[-1][0]]):
            runs[-1][1] = i
        else:
            runs.append([i, i])
    shown = [frames[first] if label is None else labelled(frames[first], label(first, last))
             for first, last in runs]
    durations = [frame_ms * (last - first + 1) for first, last in runs]
    durations[-1] = 1000
    images = [Image.fromarray(f) for f in shown]
    kind = "PNG" if path.lower().endswith(".png") else "GIF"
    images[0].save(path, format=kind, save_all=True, append_images=images[1:],
                   duration=durations, loop=0, **({"optimize": False} if kind == "GIF" else {}))
    return shown


def labelled(picture: np.ndarray, text: str) -> np.ndarray:
    """``picture`` above a white strip holding ``text`` in black, sized to the picture."""
    from PIL import Image, ImageDraw, ImageFont

    size = max(10, picture.shape[0] // 12)
    strip = Image.new("RGB", (picture.shape[1], size + size // 2), (255, 255, 255))
    ImageDraw.Draw(strip).text((size // 4, size // 4), text, fill=(0, 0, 0),
                               font=ImageFont.load_default(size=size))
    return np.concatenate([picture, np.asarray(strip)], axis=0)


def _solve(level: Level, file: str, index: int) -> str:
    """An optimal solution of a level from a file, in LURD."""
    from engine.search.solver import solve

    result = solve(level)
    if result.status != "solved":
        raise CliError(f"{file}: level {index + 1} has no solution to show "
                       f"({result.status.replace('_', ' ')})", 1)
    return str(result.solution)



_LEVEL_FILE_SUFFIXES = (".xsb", ".sok", ".txt")


def read_drawn_levels(path: str, datasets: Path) -> tuple[list[Level], list[Look],
                                                          list[str | None]]:
    """The levels of an XSB file (drawn shared) or of a version, named (under ``datasets``)
    or as a folder (in its stored looks), with each level's stored solution (None for a
    file's). A name that is neither a file nor a folder is a version's."""
    from pipeline.versions.version import open_version

    folder = Path(path)
    named = (not folder.exists() and path != "-" and os.sep not in path
             and not path.lower().endswith(_LEVEL_FILE_SUFFIXES))
    if named:
        folder = datasets / path
    elif not folder.is_dir():
        levels = []
        for board in read_levels(path):
            if board.level is None:
                raise CliError(f"{board.name(path)}: {board.too_large}", 2)
            levels.append(board.level)
        return levels, [SHARED] * len(levels), [None] * len(levels)
    with refusals(2, "" if named else f"{path}: "):  # a name's refusal says the name
        opened = open_version(folder.parent, folder.name, require_intact=False)
        table = opened.levels().sort("index")
    try:
        levels = [parse_xsb(x) for x in table["xsb"]]
        looks = [stored_look(opened.look, r)
                 for r in table.iter_rows(named=True)]
    except (LevelError, LookError) as e:
        raise CliError(f"{path}: {e}", 2) from None
    stored = list(table["solution"]) if "solution" in table.columns else [None] * len(levels)
    return levels, looks, stored
