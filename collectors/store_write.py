"""How the collector's parts reach the store: an awaitable write of one transaction on the
collector's writer thread (collectors/runner.py `Collector.write`), so that none of them opens
DuckDB itself or waits on it inside the event loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import duckdb

T = TypeVar("T")


class StoreWrite(Protocol):
    def __call__(self, fn: Callable[[duckdb.DuckDBPyConnection], T], /) -> Awaitable[T]: ...
