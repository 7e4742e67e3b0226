"""Write tests/durations.json, each test module's seconds, from a run's JUnit report: the order
in which ``make test`` hands modules to its workers (tests/conftest.py), longest first.

    .venv/bin/python -m pytest -q -n auto --dist loadfile --junitxml=/tmp/junit.xml
    .venv/bin/python scripts/test_durations.py /tmp/junit.xml
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "durations.json"


def module_seconds(report: Path) -> dict[str, float]:
    """Each module's summed test times (setup, call and teardown) in a JUnit report."""
    seconds: Counter = Counter()
    for case in ET.parse(report).iter("testcase"):
        seconds[case.get("classname", "").split(".")[-1] + ".py"] += float(case.get("time", 0))
    return {name: round(s, 1) for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="the JUnit XML of a whole run")
    args = parser.parse_args()
    seconds = module_seconds(args.report)
    OUT.write_text(json.dumps(seconds, indent=0) + "\n", encoding="utf-8")
    print(f"{len(seconds)} modules, {sum(seconds.values()):.0f} s in all, written to {OUT}")


if __name__ == "__main__":
    main()
