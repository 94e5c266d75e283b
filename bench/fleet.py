"""Fleet page: the page's reads (live state and the verdicts the collector kept) over a store of
many raw samples, p50/p95, versus the same Fleet data recomputed on every render as the page did
before verdicts were kept (window features over the samples and the rules). The store is judged
once first, as the collector does each cycle."""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

from jetwatch.collectors.judging import judge_stored_cycle
from jetwatch.core.clock import utcnow
from jetwatch.dashboard.data import fleet
from jetwatch.health.rules import Thresholds, evaluate_features
from jetwatch.store.database import Store
from bench.machine import print_header

# Synthetic history, generated inside DuckDB: `consumers` consumers sampled every 5 s up to now.
GENERATE = """
INSERT INTO samples BY NAME
SELECT now() - to_seconds(5 * (n // $consumers)) AS ts, '$G' AS account, 'S' || ((n % $consumers) // 100) AS stream,
       'c' || (n % $consumers) AS consumer, (n % 97) AS num_pending, (n % 5) AS num_ack_pending, 1 AS num_waiting,
       0 AS num_redelivered, ($rows - n) AS delivered_consumer_seq, ($rows - n) AS delivered_stream_seq,
       ($rows - n) AS ack_floor_consumer_seq, ($rows - n) AS ack_floor_stream_seq, false AS paused
FROM range($rows) t(n)
ORDER BY ts
"""
CURRENT = """
INSERT INTO consumer_current BY NAME
SELECT * FROM samples QUALIFY row_number() OVER (PARTITION BY account, stream, consumer ORDER BY ts DESC) = 1
"""


def page_evaluation(store: Store, th: Thresholds) -> object:
    """What the Fleet page did on every render before the collector kept verdicts."""
    since = utcnow() - dt.timedelta(seconds=th.health_window)
    latest, features, counts, _ = store.queries(
        [("fleet_latest", {}), ("window_features", {}), ("window_event_counts", {"since": since}),
         ("collector_health", {})],
        stage=[("set_window_since", {"since": since}), ("stage_window_samples", {})])
    limits = latest[["account", "stream", "consumer", "is_pull", "filtered", "max_ack_pending", "max_waiting",
                     "priority_policy"]]
    return evaluate_features(features, limits, th, counts)


def main(rows: int, consumers: int, runs: int, db: str | None) -> None:
    print_header()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(db or Path(tmp) / "fleet.duckdb", query_timeout=600, lock_timeout=60)
        t = time.perf_counter()
        if not (db and Path(db).exists()):
            store.migrate()
            store.write(lambda con: (con.execute(GENERATE, {"rows": rows, "consumers": consumers}),
                                     con.execute(CURRENT)))
        print(f"store: {rows:,} raw samples of {consumers:,} consumers ({time.perf_counter() - t:.1f}s to build), "
              f"{store.path.stat().st_size / 2**30:.2f} GiB")
        th = Thresholds()
        t = time.perf_counter()
        judged = judge_stored_cycle(store, utcnow(), th)
        print(f"judged once, as the collector after a cycle: {time.perf_counter() - t:.2f}s "
              f"({judged.consumers['verdict'].value_counts().to_dict()})")
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            view = fleet(store, th)
            times.append(time.perf_counter() - t)
        assert len(view.consumers) == consumers
        times.sort()
        p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
        print(f"Fleet page reads (kept verdicts) over {consumers:,} consumers: p50 {statistics.median(times) * 1000:.0f} ms, "
              f"p95 {p95 * 1000:.0f} ms ({runs} runs, file opened per run)")
        base_times = []
        for _ in range(max(3, runs // 3)):
            t = time.perf_counter()
            recomputed = page_evaluation(store, th)
            base_times.append(time.perf_counter() - t)
        base = statistics.median(base_times)
        agree = view.consumers.merge(recomputed[["account", "stream", "consumer", "verdict"]],
                                     on=["account", "stream", "consumer"], suffixes=("", "_page"))
        same = int((agree["verdict"] == agree["verdict_page"]).sum())
        print(f"baseline, the same Fleet data recomputed on every render (live state, window features over the "
              f"samples, rules), as the page did before verdicts were kept: median {base * 1000:.0f} ms; "
              f"the same verdict for {same:,} of {len(view.consumers):,} consumers")
        print(f"ratio: {base / statistics.median(times):.1f}x")

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--consumers", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--db", help="reuse (or keep) a store file at this path")
    a = p.parse_args()
    main(a.rows, a.consumers, a.runs, a.db)
