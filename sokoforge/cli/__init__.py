"""The ``sokoforge`` command: a thin layer over the engine, the pipeline and the server.

Each area keeps its commands in its own module here and registers them below.
"""

from __future__ import annotations

__all__ = ["main", "skip_last_collection"]

import atexit
import functools
import gc

import click

from sokoforge.cli.arc_export import arc_export_command
from sokoforge.cli.audit import audit_command
from sokoforge.cli.build import build_command, stage_group, verify_command
from sokoforge.cli.calibrate import calibrate_command
from sokoforge.cli.errors import ConventionGroup
from sokoforge.cli.importing import import_command
from sokoforge.cli.irt import irt_command
from sokoforge.cli.levels import render_command, solve_command
from sokoforge.cli.panel import panel_command
from sokoforge.cli.pipeline_log import show_pipeline_log
from sokoforge.cli.review import review_command
from sokoforge.cli.rotate import reveal_command, rotate_command, versions_command
from sokoforge.cli.rounds import round_group
from sokoforge.cli.serve import play_command, serve_command
from sokoforge.cli.trajectories import trajectories_command


@click.group(cls=ConventionGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sokoforge")
def main() -> None:
    """Build, audit, rotate and serve graded hidden sets of Sokoban levels.

    \b
    Exit status, the same for every command:
      0    done
      1    a check failed or a request was refused
      2    usage or unreadable input
      130  interrupted (Ctrl-C)
      143  terminated (SIGTERM)
    A failure prints one line on stderr, never a traceback.
    """
    skip_last_collection()
    show_pipeline_log()


@functools.cache
def skip_last_collection() -> None:
    """Let the process end without a last garbage collection over every object.

    After a build about a million objects (numba's and the libraries') are alive; the
    interpreter's collection at exit walks them all, a quarter of a second, to free what the
    operating system frees anyway. Objects frozen at exit are skipped by it.
    """
    atexit.register(gc.freeze)


main.add_command(solve_command)
main.add_command(render_command)
main.add_command(build_command)
main.add_command(import_command)
main.add_command(stage_group)
main.add_command(verify_command)
main.add_command(serve_command)
main.add_command(play_command)
main.add_command(audit_command)
main.add_command(panel_command)
main.add_command(calibrate_command)
main.add_command(irt_command)
main.add_command(review_command)
main.add_command(rotate_command)
main.add_command(versions_command)
main.add_command(reveal_command)
main.add_command(round_group)
main.add_command(trajectories_command)
main.add_command(arc_export_command)
