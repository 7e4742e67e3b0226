"""The one exception a pipeline step raises when it cannot go on, with the reason in words."""

from __future__ import annotations

from engine.errors import SokoforgeError

__all__ = ["InputError", "PipelineError"]


class PipelineError(SokoforgeError, RuntimeError):
    """A build, stage or verification that stopped; the message says what to change."""


class InputError(PipelineError):
    """A request that is malformed (a bad name or value) or names something that is not there
    or cannot be read (a version, a spec, a seed, a file): the CLI exits 2 for it, and 1 for
    any other refusal."""
