"""Fixtures shared by test modules: a throw-away PostgreSQL server, started once per run."""

from __future__ import annotations

import pytest
from postgres_support import Cluster


@pytest.fixture(scope="session")
def postgres():
    """A running PostgreSQL cluster; ``postgres.database()`` gives a fresh database URL."""
    cluster = Cluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()
