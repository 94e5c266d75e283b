"""Verdicts as a live signal: what judging after each cycle costs, what the Fleet page's read of
the kept verdicts costs, and what a /metrics render costs, on one synthetic store.

- judging: the collector's path after a cycle (collectors/judging.judge_stored_cycle: window
  features on a read-only connection, the rules off the file, verdicts kept in one write), against the per-page window
  evaluation the Fleet page did before verdicts were kept (features + rules on every render),
  measured in the same run on the same store;
- Fleet page data from verdicts_current (data.fleet);
- /metrics render of the judged cycle at the default cardinality (non-OK consumers) and in full.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata as md
import os
import platform
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Callable

from jetwatch.collectors.judging import decide, keep, read_window
from jetwatch.collectors.metrics import MetricsExporter, PinCounts, Snapshot
from jetwatch.core.clock import utcnow
from jetwatch.dashboard.data import fleet
from jetwatch.health.rules import Thresholds, evaluate_features
from jetwatch.store.database import Store

from bench.fleet import CURRENT, GENERATE

# Every tenth consumer has work pending and nobody pulling (NO_PULLERS), so the default
# cardinality exports a realistic share of per-consumer series.
IDLE = """
UPDATE samples SET num_pending = 5, num_waiting = 0, delivered_consumer_seq = 0, delivered_stream_seq = 0
WHERE CAST(substr(consumer, 2) AS INTEGER) % 10 = 0
"""


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    versions = ", ".join(f"{p} {md.version(p)}" for p in ("duckdb", "pandas", "pyarrow", "prometheus-client"))
    return f"{platform.platform()}, {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, {versions}"


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float, object]:
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))], out


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


def main(rows: int, consumers: int, runs: int) -> None:
    print(f"machine: {machine()}")
    th = Thresholds()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "verdicts.duckdb", query_timeout=600, lock_timeout=60)
        store.migrate()
        t = time.perf_counter()
        store.write(lambda con: (con.execute(GENERATE, {"rows": rows, "consumers": consumers}), con.execute(IDLE),
                                 con.execute(CURRENT)))
        print(f"store: {rows:,} raw samples of {consumers:,} consumers, one every 5 s "
              f"({time.perf_counter() - t:.1f}s to build)")

        held: list[float] = []

        def collector_judging() -> object:
            """judge_stored_cycle, its steps timed: read-only features, rules, the keeping write."""
            now = utcnow()
            inputs = store.read(lambda con: read_window(con, now, th))
            judged = decide(inputs, th)
            t = time.perf_counter()
            store.write(lambda con: keep(con, judged))
            held.append(time.perf_counter() - t)
            return judged

        j50, j95, judged = timed(collector_judging, runs)
        p50, p95, _ = timed(lambda: page_evaluation(store, th), runs)
        counts = judged.consumers["verdict"].value_counts().to_dict()
        print(f"verdicts: {counts}")
        print(f"judging {consumers:,} consumers after a cycle (collector path): median {j50 * 1000:.0f} ms, "
              f"p95 {j95 * 1000:.0f} ms; of it the write that keeps the verdicts (file held exclusively) "
              f"median {statistics.median(held) * 1000:.0f} ms, the rest on a read-only connection or off the file")
        print(f"per-page window evaluation (the Fleet page before): median {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms")
        print(f"ratio per-page evaluation / judging once per cycle: {p50 / j50:.2f}x per render "
              "(the page evaluated on every render of every viewer; judging runs once per cycle)")

        f50, f95, view = timed(lambda: fleet(store), runs)
        assert len(view.consumers) == consumers
        print(f"Fleet page data from verdicts_current: median {f50 * 1000:.0f} ms, p95 {f95 * 1000:.0f} ms; "
              f"{p50 / f50:.1f}x cheaper than the per-page evaluation")

        for cardinality in ("non_ok", "all"):
            exporter = MetricsExporter(cardinality)
            snapshot = Snapshot(at=judged.at, consumers=judged.consumers, pins=PinCounts(), cycle_buckets=[0] * 10,
                                cycle_sum=0.0, cycles=1, capture_backlog=0, rejects=0)
            r50, r95, text = timed(lambda: exporter.render(snapshot), max(3, runs // 3))
            host, port = exporter.serve("127.0.0.1:0")
            s50, s95, _ = timed(lambda: urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30).read(), runs)
            exporter.close()
            series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
            print(f"/metrics at {consumers:,} consumers, cardinality {cardinality}: {series:,} series, "
                  f"{len(text) / 1024:.0f} KiB; render once per cycle median {r50 * 1000:.0f} ms "
                  f"(p95 {r95 * 1000:.0f} ms); scrape of the cached text median {s50 * 1000:.1f} ms (p95 {s95 * 1000:.1f} ms)")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--consumers", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=9)
    a = p.parse_args()
    main(a.rows, a.consumers, a.runs)
