"""The one exception a pipeline step raises when it cannot go on, with the reason in words."""

from __future__ import annotations


class PipelineError(RuntimeError):
    """A build, stage or verification that stopped; the message says what to change."""
