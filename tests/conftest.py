"""Fixtures shared by test modules: a throw-away PostgreSQL server, started once per run; the
test levels served as version t1 (``data``) and a server of them (``srv``), once per module.
And the order of a run: the longest modules first (tests/durations.json)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from postgres_support import Cluster

# Each module's measured seconds (all its tests, fixtures included), written from a run's
# JUnit report by scripts/test_durations.py; a module not in it is guessed from its tests.
DURATIONS = Path(__file__).resolve().parent / "durations.json"
GUESS_SLOW, GUESS_OTHER = 2.0, 0.1  # seconds a test marked slow, or another, is taken to take


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first (a stable sort: each module's tests stay together, in
    pytest-randomly's order). ``make test`` hands whole modules to its workers in this order,
    so the long ones start at once and the short ones even out the end (longest first is
    within a sixth of the best split of the work between two workers)."""
    measured = json.loads(DURATIONS.read_text(encoding="utf-8")) if DURATIONS.is_file() else {}
    guess: Counter = Counter()
    for item in items:
        guess[item.path] += GUESS_SLOW if item.get_closest_marker("slow") else GUESS_OTHER
    items.sort(key=lambda item: -float(measured.get(item.path.name, guess[item.path])))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """The seed of the run's random order (pytest-randomly), under ``-q`` too, just above the
    closing line: an order that failed runs again with ``--randomly-seed=N``."""
    seed = getattr(config.option, "randomly_seed", None)
    if seed is not None and config.pluginmanager.hasplugin("randomly"):
        terminalreporter.write_line(f"random order: --randomly-seed={seed}")


@pytest.fixture(scope="session")
def postgres():
    """A running PostgreSQL cluster; ``postgres.database()`` gives a fresh database URL."""
    cluster = Cluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The test levels as version ``t1`` (``root``, ``rows``, ``served``), written and loaded
    once per module; a module that needs other versions defines its own ``data``."""
    from serve_support import served_dataset

    return served_dataset(tmp_path_factory.mktemp("datasets"))


@pytest.fixture(scope="module")
def srv(data, tmp_path_factory):
    """A server of ``data``'s version on a fresh store, once per module (1000 keys a day from
    an address, as every test client is 127.0.0.1)."""
    from serve_support import server

    db = tmp_path_factory.mktemp("db") / "store.sqlite"
    with server(data["served"], db, keys_per_address_per_day=1000) as running:
        yield running
