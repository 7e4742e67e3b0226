"""Progress bars: an ETA only once the pace is known, measured after the first unit."""

from __future__ import annotations

import io
import sys

import pytest

from pipeline import progress as progress_module
from pipeline.progress import eta_text, progress


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
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: next(clock))
    screen = _Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    with progress("grade", 11) as bar:
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
def test_plain_progress_prints_each_count_once(total, lines, monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    with progress("solve", total) as bar:
        for _ in range(total):
            bar.update(1)
    assert capsys.readouterr().err.splitlines() == [f"solve: {x}" for x in lines]
