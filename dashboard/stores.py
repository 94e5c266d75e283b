"""The fleet's stores: one per cluster, each read on its own and the results put together.

`--dbs` (files, or directories of `*.duckdb` files) names the stores; without it, `--db` is the one
store (a directory there is read as a fleet too). Each store belongs to one cluster
(store/clusters.py), and every frame that comes out of here carries a `cluster` column: a consumer
named alike in two clusters stays two rows. Reads stay per store and parameterised: a read is a
function of one `Store`, called once per store, never SQL assembled from names.

No Streamlit here: caching sits in dashboard/ui.py, so this is tested with plain pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from jetwatch.core.settings import DEFAULT_CLUSTER, Settings
from jetwatch.dashboard import data
from jetwatch.health.verdicts import SEVERITY
from jetwatch.store.clusters import DuplicateCluster, duplicates, identity, store_paths
from jetwatch.store.database import Store, StoreError, StoreMissing

T = TypeVar("T")
MAX_READERS = 4  # stores read at once: the host has few cores, and each read holds its file


class UnknownCluster(StoreError):
    """A link or an action names a cluster none of the stores belongs to."""


class NoServer(UnknownCluster):
    """An action on one of several clusters whose server nobody named: it could go anywhere."""


@dataclass(frozen=True)
class ClusterStore:
    cluster: str
    path: str
    server_url: str | None  # the server its collector last reported (no credentials)
    lock_timeout: float = 15.0

    @property
    def store(self) -> Store:
        return Store(self.path, lock_timeout=self.lock_timeout)


def paths(settings: Settings) -> list[Path]:
    """The store files named by --dbs (else --db): files as given, directories as their *.duckdb."""
    return store_paths(settings.dbs, settings.db)


def audit_path(settings: Settings) -> Path:
    """Where the dashboard writes the audit events that belong to no cluster (a sign-in throttle):
    the fleet's first store, as --dbs names them (else --db). It is read by the Audit page and
    checked by `jetwatch audit verify` with the rest of the fleet, and the order of --dbs says
    which it is; --db alone, with --dbs given, is none of the fleet's and would keep them where
    nobody looks. docs/security.md says the same."""
    return paths(settings)[0]


def identify(settings: Settings) -> list[ClusterStore]:
    """Every store with its cluster. A file not there yet is the default cluster's (the pages say
    "no store yet"); two files of one cluster are refused in words."""
    found: list[ClusterStore] = []
    for path in paths(settings):
        store = Store(path, lock_timeout=settings.lock_timeout)
        ident = identity(store) if store.exists() else None
        found.append(ClusterStore(ident.cluster if ident else DEFAULT_CLUSTER, str(path),
                                  ident.server_url if ident else None, settings.lock_timeout))
    twice = duplicates([(cs.cluster, cs.path) for cs in found])
    if twice:
        raise DuplicateCluster(twice)
    return found


def find(stores: Sequence[ClusterStore], cluster: str | None) -> ClusterStore:
    """The store of `cluster`; with none named, the only store (or the first)."""
    if cluster is None:
        return stores[0]
    for cs in stores:
        if cs.cluster == cluster:
            return cs
    raise UnknownCluster(f"No store of cluster '{cluster}' among {', '.join(c.cluster for c in stores)}: "
                         "add its store to --dbs.")


def server_for(settings: Settings, cs: ClusterStore) -> str | None:
    """Where actions on this cluster's consumers go: --server-for CLUSTER=URL, else the server the
    cluster's collector reported, else --server (one store: exactly as before clusters)."""
    mapped = dict(pair.split("=", 1) for pair in settings.server_for)
    return mapped.get(cs.cluster) or cs.server_url or settings.server


def acting(settings: Settings, cs: ClusterStore, several: bool) -> Settings:
    """The settings an action on a consumer of `cs` runs with: that cluster's server and store
    (audit rows go into the cluster's own store). One store: the settings as they are."""
    if not several and not settings.server_for:
        return settings
    server = server_for(settings, cs)
    if not server:
        raise NoServer(f"No server known for cluster '{cs.cluster}': its collector has not reported one and "
                       f"--server-for names none, so nothing was sent. Add --server-for {cs.cluster}=URL.")
    return settings.replace(server=server, db=cs.path, cluster=cs.cluster)


def labelled(cluster: str, frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its cluster as the first column."""
    out = frame.copy()
    out.insert(0, "cluster", pd.Series([cluster] * len(out), index=out.index, dtype=object))
    return out


def union(parts: Sequence[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """Frames of several stores as one, each row with its cluster."""
    frames = [labelled(c, f) for c, f in parts]
    kept = [f for f in frames if not f.empty] or frames[:1]
    if not kept:
        return pd.DataFrame(columns=["cluster"])
    return pd.concat(kept, ignore_index=True) if len(kept) > 1 else kept[0].reset_index(drop=True)


def each(stores: Sequence[ClusterStore], read: Callable[[ClusterStore], T]) -> list[tuple[str, T]]:
    return [(cs.cluster, read(cs)) for cs in stores]


Wrap = Callable[[Callable[[], T]], Callable[[], T]]


def at_once(stores: Sequence[ClusterStore], read: Callable[[ClusterStore], T],
            wrap: Wrap = lambda fn: fn) -> list[tuple[str, T]]:
    """`each`, the stores read on threads of their own: a read is mostly DuckDB's, which lets go of
    the interpreter, so two clusters cost about what the slower one does, not the sum. `wrap`
    prepares a read to run off the caller's thread (the dashboard hands its script's context on).
    A read that fails raises as in `each`, the first store's failure first."""
    if len(stores) < 2:
        return each(stores, read)
    with ThreadPoolExecutor(max_workers=min(len(stores), MAX_READERS), thread_name_prefix="jetwatch-store") as pool:
        futures = [pool.submit(wrap(partial(read, cs))) for cs in stores]
        return [(cs.cluster, f.result()) for cs, f in zip(stores, futures)]


def worst_first(parts: Sequence[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """Several clusters' consumers as one frame, each row with its cluster first, in the fleet's
    order: fleet_verdicts.sql's ORDER BY (verdict severity, then the oldest waiting work, then the
    biggest backlog, stream, consumer), then the cluster; rows of one store equal in every key keep
    their store's order. Held equal to the query and to an order written out by hand by
    tests/test_fleet_pages.py.

    Each store's frame comes worst first already; they are put together column by column (a
    DataFrame concat checks every value of an all-empty column in Python), ordered by one stable
    sort of integer and float key arrays (numpy's lexsort: no Python per row), and each column is
    taken once into place. tests/test_fleet_pages.py holds it equal to the re-sort it replaces."""
    kept = [(c, f) for c, f in parts if not f.empty]
    if len(kept) < 2:
        return union(parts)  # one store's frame is in the fleet's order as it comes
    joined = {n: pd.concat([f[n] for _, f in kept], ignore_index=True) for n in kept[0][1].columns}  # data.fleet's
    names = [c for c, _ in kept]
    sizes = [len(f) for _, f in kept]
    place = {c: i for i, c in enumerate(sorted(names))}  # one store per cluster: the names differ
    order = _order(np.repeat([place[c] for c in names], sizes), joined)
    clusters = np.repeat(np.array(names, dtype=object), sizes)[order]
    # every column is a new array from its take, its dtype given: nothing is copied or inferred again
    return pd.DataFrame({"cluster": pd.Series(clusters, dtype=object, copy=False),
                         **{n: pd.Series(_taken(col, order), dtype=col.dtype, copy=False)
                            for n, col in joined.items()}}, copy=False)


def _taken(column: pd.Series, order: np.ndarray) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """The column's values in `order` (numpy's own take for numpy columns: pandas' checks every
    value of an object column for missing ones first)."""
    return column.to_numpy()[order] if isinstance(column.dtype, np.dtype) else column.array.take(order)


def _order(cluster_rank: np.ndarray, columns: Mapping[str, pd.Series]) -> np.ndarray:
    """The positions of the rows in the fleet's order (worst_first), stable; `cluster_rank` is each
    row's cluster's place among the clusters' names."""
    rank = columns["verdict"].map(SEVERITY).to_numpy(dtype=float, na_value=np.inf)  # unknown names last
    age = pd.to_numeric(columns["oldest_unacked_age_seconds"], errors="coerce").to_numpy(dtype=float, na_value=-1.0)
    pending = pd.to_numeric(columns["num_pending"], errors="coerce").to_numpy(dtype=float, na_value=-np.inf)
    # names by their place among the distinct names, sorted (a sort of the few distinct streams, not
    # of every row's); np.lexsort sorts by the last key first; descending keys are negated
    # (no backlog: last)
    stream, consumer = (pd.factorize(columns[k], sort=True)[0] for k in ("stream", "consumer"))
    return np.lexsort((cluster_rank, consumer, stream, -pending, -age, rank))


def fleet(stores: Sequence[ClusterStore], read: Callable[[ClusterStore], data.Fleet],
          wrap: Wrap = lambda fn: fn) -> data.Fleet:
    """Every cluster's consumers in one fleet (worst first), and every cluster's collector; the
    stores are read at once (`at_once`)."""
    views = at_once(stores, read, wrap)
    consumers = worst_first([(c, v.consumers) for c, v in views])
    collector = union([(c, v.collector) for c, v in views])
    times = [v.as_of for _, v in views if v.as_of is not None]
    return data.Fleet(consumers, collector, max(times) if times else None,
                      store_exists=any(v.store_exists for _, v in views))


def pin_history(stores: Sequence[ClusterStore], read: Callable[[ClusterStore], data.PinHistory]) -> data.PinHistory:
    views = each(stores, read)
    sources = sorted({v.source for _, v in views})
    counts = {k: sum(v.counts.get(k, 0) for _, v in views) for k in ("sessions",)}
    return data.PinHistory(union([(c, v.events) for c, v in views]), union([(c, v.sessions) for c, v in views]),
                           union([(c, v.summary) for c, v in views]), "; ".join(sources), counts,
                           union([(c, v.gaps) for c, v in views]), union([(c, v.actions) for c, v in views]),
                           union([(c, v.idle) for c, v in views]))


def audit_actions(stores: Sequence[ClusterStore], limit: int = 500) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one line per action, the raw chained rows) of every store, newest first, an unpin's or a
    drain's with who held the pin (its store's announced holder). Each store keeps its own chain:
    the rows are put together only for reading."""
    def read(cs: ClusterStore) -> tuple[pd.DataFrame, dict[str, tuple[str, str]]]:
        log = data.audit(cs.store, limit)
        return log, data.pin_holders_of(cs.store, data.held_pins(log))  # who held each pin acted on

    found = each(stores, read)
    logs = [(c, log) for c, (log, _) in found]
    actions = union([(c, data.audit_actions(log, holders)) for c, (log, holders) in found])
    if not actions.empty and "ts" in actions:
        actions = actions.sort_values("ts", ascending=False).reset_index(drop=True)
    return actions, union(logs)


def recent_changes(stores: Sequence[ClusterStore], limit: int = 20) -> pd.DataFrame:
    changes = union(each(stores, lambda cs: data.recent_changes(cs.store, limit)))
    if len(stores) > 1 and not changes.empty:
        changes = changes.sort_values("ts", ascending=False).head(limit).reset_index(drop=True)
    return changes


def consumer_keys(stores: Sequence[ClusterStore]) -> pd.DataFrame:
    """(cluster, account, stream, consumer) of every live consumer in every cluster. One store that
    is not there yet raises StoreMissing (the page says how to start its collector); of several,
    those not there yet have no consumers."""
    def keys(cs: ClusterStore) -> pd.DataFrame:
        try:
            return cs.store.query("consumer_keys")
        except StoreMissing:
            if len(stores) == 1:
                raise
            return pd.DataFrame(columns=["account", "stream", "consumer"])

    return union(each(stores, keys))
