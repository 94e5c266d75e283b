"""Which cluster a store belongs to: one store file per cluster, each named by its collector's
`--cluster` label.

The label is a fact about the whole file (`store_meta` key `cluster`), not a column of every
table: every row of a file belongs to its cluster, so readers and exports add it to each row that
leaves the file (dashboard/stores.py, pipeline/export.py). A file that no collector has claimed yet
(written by a jetwatch from before clusters) is the default cluster's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import duckdb

from jetwatch import sql
from jetwatch.core.settings import DEFAULT_CLUSTER
from jetwatch.store.database import Store, StoreError, StoreIsDirectory, one_row

T = TypeVar("T")


class WrongCluster(StoreError):
    """A collector of one cluster was pointed at another cluster's store."""


class DuplicateCluster(StoreError):
    """Two of the stores given belong to one cluster."""


@dataclass(frozen=True)
class Identity:
    cluster: str
    claimed: bool  # False: no collector has recorded its cluster yet (the default cluster's)
    server_url: str | None  # the server its collector last reported, without credentials


def claim(con: duckdb.DuckDBPyConnection, cluster: str, path: Path | str) -> None:
    """In the collector's first write: record `cluster` as the store's, or refuse (WrongCluster)
    when the store already belongs to another one. Nothing is written then."""
    con.execute(sql.query("claim_cluster"), {"cluster": cluster})
    owner = one_row(con.execute(sql.query("store_cluster")))[0]
    if owner != cluster:
        raise WrongCluster(
            f"The store {path} belongs to cluster '{owner}', and this collector watches cluster '{cluster}'. "
            f"Each cluster keeps its own store: point --db at cluster '{cluster}''s own file (such as "
            f"{Path(path).with_name(cluster + '.duckdb')}), or run this collector with --cluster {owner} if it "
            "really watches that cluster. Nothing was written.")


def identity(store: Store) -> Identity:
    """The cluster of a store as readers see it (the default cluster's when unclaimed)."""
    found = store.rows("store_cluster")
    cluster, server = (found[0]["cluster"], found[0]["server_url"]) if found else (None, None)
    known = isinstance(cluster, str)
    return Identity(cluster if isinstance(cluster, str) else DEFAULT_CLUSTER, known,
                    server if isinstance(server, str) else None)


def store_paths(dbs: Sequence[str], db: str) -> list[Path]:
    """The store files of a fleet: --dbs (files as given, directories as their *.duckdb files),
    else --db (a directory there is a fleet too)."""
    given = [Path(p) for p in dbs] or [Path(db)]
    out: list[Path] = []
    for p in given:
        found = sorted(p.glob("*.duckdb")) if p.is_dir() else [p]
        if not found:
            raise StoreIsDirectory(
                f"{p} is a directory, not a store file, and holds no *.duckdb stores: point --db at a store file "
                f"(such as {p / 'jetwatch.duckdb'}), or --dbs at the directory the collectors write their stores to.")
        out += [f for f in found if f not in out]
    return out


def duplicates(named: Sequence[tuple[str, str]]) -> str | None:
    """Words for two stores of one cluster among (cluster, path) pairs, else None."""
    seen: dict[str, str] = {}
    for cluster, path in named:
        if cluster in seen:
            return (f"The stores {seen[cluster]} and {path} both belong to cluster '{cluster}': each cluster keeps "
                    "one store. Leave one of them out of --dbs (or, for two clusters, give each collector its own "
                    "--cluster and store).")
        seen[cluster] = path
    return None


@dataclass(frozen=True)
class FleetRead(Generic[T]):
    """One store of a fleet as a command read it: its cluster and what was read, or why not."""

    path: str
    cluster: str | None  # None: the store could not be read, so its cluster is not known either
    value: T | None
    error: StoreError | None = None


def read_fleet(dbs: Sequence[str], db: str, lock_timeout: float, read: Callable[[Store, str], T],
               wanted: Callable[[str], bool]) -> list[FleetRead[T]]:
    """Every store of the fleet (`store_paths`) read with `read(store, its cluster)`: those whose
    cluster is `wanted`, and every store that cannot be read (with its error, whatever `wanted`
    says, since its cluster is not known). Two stores of one cluster are refused (DuplicateCluster)."""
    found: list[FleetRead[T]] = []
    for path in store_paths(dbs, db):
        store = Store(path, lock_timeout=lock_timeout)
        try:
            cluster = identity(store).cluster
            found.append(FleetRead(str(path), cluster, read(store, cluster)))
        except StoreError as exc:
            found.append(FleetRead(str(path), None, None, exc))
    twice = duplicates([(r.cluster, r.path) for r in found if r.cluster is not None])
    if twice:
        raise DuplicateCluster(twice)
    return [r for r in found if r.cluster is None or wanted(r.cluster)]
