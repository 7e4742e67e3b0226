"""A datasets folder holding one small public version and one hidden one, for tests."""

from __future__ import annotations

from pathlib import Path

from pipeline.spec import load_spec, spec_from_dict
from pipeline.stages.build import build
from pipeline.workers import Workers

QUIET = Workers(show_progress=False)


def public_and_hidden(root: Path, public_levels: int) -> Path:
    """``pub``: a W warm-up split of ``public_levels`` levels; ``hid``: the tiny hidden game."""
    data = load_spec("public/W").to_dict()
    data["tiers"][0]["levels"] = public_levels
    build("pub", datasets=root, spec=spec_from_dict(data), seed=5, workers=QUIET)
    build("hid", datasets=root, spec=load_spec("tiny"), seed=5, workers=QUIET)
    return root
