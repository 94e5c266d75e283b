"""Fixtures start real services: a nats-server per test session, a DuckDB file per test."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from demo.server import NatsServer, ServerStartError, free_port, nats_server_binary
from store.database import Store

_counter = itertools.count()


def pytest_sessionstart(session: pytest.Session) -> None:
    try:
        nats_server_binary()
    except ServerStartError as exc:
        pytest.exit(str(exc), returncode=3)


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory):
    server = NatsServer(store_dir=tmp_path_factory.mktemp("nats") / "js", monitor_port=free_port()).start()
    yield server
    server.stop()


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "jetwatch.duckdb")


@pytest.fixture
def store(db_path: str) -> Store:
    return Store(db_path, lock_timeout=30)


@pytest.fixture
def uid() -> str:
    """A prefix unique to this test, so tests sharing the session's server never collide."""
    return f"T{next(_counter)}"


@pytest.fixture
def run():
    """Run a coroutine to completion in a fresh event loop."""
    return lambda coro: asyncio.run(coro)
