"""Fixtures shared by test modules: a throw-away PostgreSQL server, started once per run; the
test levels served as version t1 (``data``) and a server of them (``srv``), once per module.
And the order of a run: the modules with the most slow tests first."""

from __future__ import annotations

from collections import Counter

import pytest
from postgres_support import Cluster

SLOW_WEIGHT = 20  # for the order of modules, a test marked slow counts as this many others


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules with the most slow tests first (a stable sort: each module's tests stay
    together, in pytest-randomly's order). ``make test`` hands whole modules to its workers in
    this order, so the long ones start at once and the short ones even out the end."""
    weight: Counter = Counter()
    for item in items:
        weight[item.path] += SLOW_WEIGHT if item.get_closest_marker("slow") else 1
    items.sort(key=lambda item: -weight[item.path])


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
