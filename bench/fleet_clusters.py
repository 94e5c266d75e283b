"""Fleet page over two clusters: the Fleet's data read through dashboard/stores.py from two stores
(two clusters, each `consumers` consumers), p50/p95, against the sum of the two single-store reads
of the same files in the same run (what one dashboard per cluster would cost). The two-cluster
view is checked to hold every consumer of both, the same name in each cluster as two rows."""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.fleet import CURRENT, GENERATE
from bench.machine import print_header
from bench.timing import p95
from jetwatch.collectors.judging import judge_stored_cycle
from jetwatch.core.clock import utcnow
from jetwatch.dashboard import stores
from jetwatch.dashboard.data import fleet
from jetwatch.health.rules import Thresholds
from jetwatch.store import clusters
from jetwatch.store.database import Store


def _timed(fns, runs: int) -> list[list[float]]:
    """Each function's times, the functions taking turns run by run (the same machine state for both)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t)
    return [sorted(ts) for ts in times]


def main(rows: int, consumers: int, runs: int) -> None:
    print_header()
    th = Thresholds()
    with tempfile.TemporaryDirectory() as tmp:
        paths = {c: Path(tmp) / f"{c}.duckdb" for c in "ab"}
        first = Store(paths["a"], query_timeout=600, lock_timeout=60)
        first.migrate()
        first.write(lambda con: (con.execute(GENERATE, {"rows": rows, "consumers": consumers}), con.execute(CURRENT)))
        judge_stored_cycle(first, utcnow(), th)
        shutil.copy(paths["a"], paths["b"])  # the same consumer names in both clusters
        for c, p in paths.items():
            Store(p).write(lambda con, c=c: clusters.claim(con, c, p))
        fleet_stores = [stores.ClusterStore(c, str(p), None, 60.0) for c, p in paths.items()]
        print(f"stores: 2 clusters x {rows:,} raw samples of {consumers:,} consumers")
        view = stores.fleet(fleet_stores, lambda cs: fleet(cs.store, th))
        assert len(view.consumers) == 2 * consumers and set(view.consumers["cluster"]) == {"a", "b"}
        both, singles = _timed([lambda: stores.fleet(fleet_stores, lambda cs: fleet(cs.store, th)),
                                lambda: [fleet(cs.store, th) for cs in fleet_stores]], runs)
        print(f"Fleet data over two clusters (dashboard/stores.py): p50 {statistics.median(both) * 1000:.0f} ms, "
              f"p95 {p95(both) * 1000:.0f} ms ({runs} runs)")
        print(f"baseline, the two single-store Fleet reads one after the other: p50 "
              f"{statistics.median(singles) * 1000:.0f} ms, p95 {p95(singles) * 1000:.0f} ms")
        print(f"ratio: two clusters cost {statistics.median(both) / statistics.median(singles):.2f}x the sum of singles")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--consumers", type=int, default=5_000)
    p.add_argument("--runs", type=int, default=9)
    a = p.parse_args()
    main(a.rows, a.consumers, a.runs)
