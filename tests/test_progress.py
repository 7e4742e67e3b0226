"""Progress: the command line's bar (an ETA only once the pace is known, measured after the
first unit) and the pipeline's log lines."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from pipeline.progress import progress
from pipeline.workers import Workers
from sokoforge.cli import progress_bar
from sokoforge.cli.progress_bar import eta_text, terminal_progress


def test_eta_is_none_until_enough_units_and_time_have_passed():
    assert eta_text(0.2, 10, 50) is None  # too soon
    assert eta_text(5.0, 2, 50) is None  # too few units
    assert eta_text(5.0, 10, 0) is None  # nothing left
    assert eta_text(2.0, 4, 6) == "eta 3 s"
    assert eta_text(10.0, 4, 50) == "eta 2 min 05 s"
    assert eta_text(100.0, 4, 1000) == "eta 6 h 56 min"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_slow_first_unit_does_not_inflate_the_bar_eta(monkeypatch):
    # The first unit ends 30 s in (start-up costs), the others every 0.5 s.
    clock = iter([30.0 + 0.5 * i for i in range(11)])
    monkeypatch.setattr(progress_bar.time, "monotonic", lambda: next(clock))
    screen = _Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    with terminal_progress("grade", 11) as bar:
        for _ in range(3):
            bar.update(1)
        assert "eta" not in screen.getvalue()  # 2 units after the first: pace not known yet
        bar.update(1)
        assert screen.getvalue().endswith("eta 4 s")  # 7 left at 0.5 s each
        for _ in range(5):
            bar.update(1)
    shown = screen.getvalue()
    assert "eta 1 s" in shown and "min" not in shown and "00:00" not in shown


@pytest.mark.parametrize(("total", "lines"), [
    (1, ["1/1"]), (3, ["1/3", "2/3", "3/3"]), (8, ["2/8", "4/8", "6/8", "8/8"])])
def test_plain_progress_logs_each_count_once(total, lines, caplog):
    with caplog.at_level(logging.INFO, logger="pipeline"), progress("solve", total) as bar:
        for _ in range(total):
            bar.update(1)
    assert caplog.messages == [f"solve: {x}" for x in lines]


def test_the_bar_falls_back_to_the_log_lines_off_a_terminal(monkeypatch, caplog):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    with caplog.at_level(logging.INFO, logger="pipeline"), terminal_progress("grade", 2) as bar:
        bar.update(2)
    assert caplog.messages == ["grade: 2/2"]


def _double(x: int) -> int:
    return 2 * x


def test_workers_report_through_the_display_passed_in_and_never_write_themselves(
        capsys, monkeypatch):
    shown = []

    class Recorder:
        def __init__(self, label: str, total: int) -> None:
            shown.append((label, total))

        def __enter__(self) -> Recorder:
            return self

        def __exit__(self, *exc: object) -> None:
            shown.append("closed")

        def update(self, n: int) -> None:
            shown.append(n)

    assert Workers(display=Recorder).map(_double, [1, 2, 3], "solve") == [2, 4, 6]
    assert shown == [("solve", 3), 1, 1, 1, "closed"]
    assert Workers(show_progress=False, display=Recorder).map(_double, [1], "solve") == [2]
    assert shown[-1] == "closed" and len(shown) == 5  # progress off: the display is not used
    # the default only logs: with no handler for the log (as outside the command line),
    # nothing reaches the terminal
    monkeypatch.setattr(logging.getLogger("pipeline"), "handlers", [])
    monkeypatch.setattr(logging.getLogger("pipeline"), "propagate", False)
    Workers().map(_double, [1, 2], "solve")
    assert capsys.readouterr().err == ""
