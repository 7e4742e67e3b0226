"""The rule's currency is defined, in the same words, everywhere the rule is stated: README,
``review --help``, ``panel --help``, the audit's panel table and docs/reference/protocol.md."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from pipeline.scores.currency import CALL
from sokoforge.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _words(text: str) -> str:
    """Text with its line breaks and runs of spaces as single spaces (wrapped prose)."""
    return " ".join(text.split())


def test_every_place_that_states_the_rule_defines_one_call_as_one_predicted_transition():
    from pipeline.audit import audit_report

    places = {
        "README.md": (ROOT / "README.md").read_text(encoding="utf-8"),
        "docs/reference/protocol.md": (ROOT / "docs" / "reference" / "protocol.md").read_text(
            encoding="utf-8"),
        "review --help": CliRunner().invoke(main, ["review", "--help"]).output,
        "panel --help": CliRunner().invoke(main, ["panel", "--help"]).output,
        "the audit's panel table": audit_report._PANEL_NOTE,
    }
    for place, text in places.items():
        assert _words(CALL).lower() in _words(text).lower(), place
    assert "four calls" in CALL and "B×H" in CALL
