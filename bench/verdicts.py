"""Verdicts as a live signal: what judging after each cycle costs, what the Fleet page's read of
the kept verdicts costs, and what a /metrics render costs, on one synthetic store.

- judging: the collector's path after a cycle, as the runner calls it (the cycle into the
  collector's in-memory state, then collectors/judging.judge_in inside the cycle's own write
  transaction: the rules over the state in memory, the changed verdicts written), under the
  collector's garbage-collection thresholds (collectors/gc_policy.py: young collections rarer,
  full ones only between cycles; here a full one after every cycle, outside its time, where the
  collector runs one at most every 60 s); the page evaluation under Python's defaults, as the
  dashboard's process runs it. Timed: judge_in,
  the transaction's COMMIT and the connection's close; not timed: opening the connection, which
  the cycle's samples pay for anyway (and the samples' own writes, not made here). Against the per-page window
  evaluation the Fleet page did before verdicts were kept (features over the stored samples and
  the rules on every render), measured in the same run on the same store;
- judging in the collector's own cycle: the runner's one transaction (samples, the cycle into
  the state, judged, kept, COMMIT and close) against the same cycle without judging, in turn;
- Fleet page data from verdicts_current (data.fleet), with and without the since-when columns;
- /metrics render of the judged cycle for non-OK consumers only and in full (the default, `auto`,
  is either, by the fleet's size).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

from bench import timing
from bench.fleet import CURRENT, GENERATE, page_evaluation
from bench.machine import print_header
from bench.timing import summary
from jetwatch.collectors.consumer_state import SAMPLE_COLUMNS
from jetwatch.collectors.gc_policy import GcPolicy
from jetwatch.collectors.judging import judge_in, judge_stored_cycle, load_window
from jetwatch.dashboard.data import fleet
from jetwatch.exporters.cycle_snapshot import PinCounts, Snapshot
from jetwatch.exporters.metrics_server import MetricsExporter
from jetwatch.health.features import SAMPLE_FIELDS
from jetwatch.health.rules import Thresholds
from jetwatch.store import writes
from jetwatch.store.database import Store

# Every tenth consumer has work pending and nobody pulling (NO_PULLERS), so the default
# cardinality exports a realistic share of per-consumer series.
IDLE = """
UPDATE samples_recent SET num_pending = 5, num_waiting = 0, delivered_consumer_seq = 0, delivered_stream_seq = 0,
       delivered_last_active = NULL, ack_floor_last_active = NULL
WHERE CAST(substr(consumer, 2) AS INTEGER) % 10 = 0
"""


def _summary(runs: list[tuple[float, float, object]]) -> tuple[float, float, object]:
    """Median and p95 of single timed runs, with the last one's output."""
    times = sorted(t for t, _, _ in runs)
    return statistics.median(times), timing.p95(times), runs[-1][2]


def as_collected(latest: pd.DataFrame, now: dt.datetime, moved: dict[str, np.ndarray]) -> dict[str, list]:
    """The store's latest rows as a cycle's batch the way the collector hands it to the store:
    every sample column, times as RFC 3339 text, the sequences moved on."""
    out: dict[str, list] = {}
    for c in SAMPLE_COLUMNS:
        if c in moved:
            out[c] = moved[c].tolist()
        elif c == "ts":
            out[c] = [now.isoformat()] * len(latest)
        elif c not in latest:
            out[c] = [None] * len(latest)
        elif pd.api.types.is_datetime64_any_dtype(latest[c]):
            out[c] = [None if pd.isna(v) else v.isoformat() for v in latest[c]]
        else:
            out[c] = latest[c].astype(object).where(latest[c].notna(), None).tolist()
    return out


def in_cycle(store: Store, copy: Path, state: object, th: Thresholds, latest: pd.DataFrame, accounts: list[str],
             pulling: np.ndarray, base: dt.datetime, cycles: list[int], runs: int) -> None:
    """Judging as the collector pays for it: inside the runner's one transaction per cycle (the
    cycle's samples written, the cycle into the state, judged, the changed verdicts kept, one
    COMMIT and close), against the same cycle without judging (the samples alone, on a copy of
    the store taken now), the two in turn, each step's batch the same for both. What judging
    adds to a cycle is the difference, its share of the COMMIT and close included. Both under the
    collector's garbage-collection thresholds."""
    shutil.copyfile(store.path, copy)
    plain = Store(copy, query_timeout=600, lock_timeout=60)
    consumers = len(latest)
    judged_s, plain_s = [], []
    policy = GcPolicy(full_every=0.0)  # the collector's thresholds; a full collection after every cycle
    for i in range(runs):
        cycles[0] += 1
        now = base + dt.timedelta(seconds=5 * cycles[0])
        step = consumers * cycles[0]
        moved = {c: latest[c].to_numpy() + step * (pulling if c.startswith("delivered") else 1)
                 for c in ("delivered_consumer_seq", "delivered_stream_seq", "ack_floor_stream_seq")}
        active = (now - dt.timedelta(seconds=1)).isoformat()  # the server's clocks move with the work
        moved.update({c: np.array([active if p else None for p in pulling], dtype=object)
                      for c in ("delivered_last_active", "ack_floor_last_active")})
        samples = as_collected(latest, now, moved)

        def judged_cycle(con: object) -> object:
            writes.write_samples(con, accounts, samples)
            state.add(samples, accounts)
            return judge_in(con, now, th, state)

        def plain_cycle() -> None:
            t = time.perf_counter()
            plain.write(lambda con: writes.write_samples(con, accounts, samples))
            plain_s.append(time.perf_counter() - t)

        policy.apply()
        try:
            if i % 2:
                plain_cycle()
                policy.between_cycles()
            t = time.perf_counter()
            judged = store.write(judged_cycle)
            judged_s.append(time.perf_counter() - t)
            judged.commit()
            policy.between_cycles()
            if not i % 2:
                plain_cycle()
                policy.between_cycles()
        finally:
            policy.restore()
    j50, c50 = statistics.median(judged_s), statistics.median(plain_s)
    added = statistics.median(a - b for a, b in zip(judged_s, plain_s))
    print(f"in the collector's cycle ({consumers:,} samples written, one transaction, open to close): with judging "
          f"median {j50 * 1000:.0f} ms, without (the same samples on a copy of the store, in turn) median "
          f"{c50 * 1000:.0f} ms; judging adds {(j50 - c50) * 1000:.0f} ms (median of the {runs} paired "
          f"differences: {added * 1000:.0f} ms)")


def main(rows: int, consumers: int, runs: int) -> None:
    print_header()
    th = Thresholds()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "verdicts.duckdb", query_timeout=600, lock_timeout=60)
        store.migrate()
        t = time.perf_counter()
        store.write(lambda con: (con.execute(GENERATE, {"rows": rows, "consumers": consumers}), con.execute(IDLE),
                                 con.execute(CURRENT)))
        print(f"store: {rows:,} raw samples of {consumers:,} consumers, one every 5 s "
              f"({time.perf_counter() - t:.1f}s to build)")

        latest = store.read(lambda con: con.execute("SELECT * FROM consumer_current").df())
        base = latest["ts"].max().to_pydatetime()  # the newest sample: the collector's cycles go on from it
        t = time.perf_counter()
        state = load_window(store, base, th)  # what the collector does once, at start
        first = judge_stored_cycle(store, base, th, state)
        print(f"collector start: state seeded from the store and the first cycle judged in "
              f"{time.perf_counter() - t:.1f}s ({first.written.num_rows:,} verdicts written)")
        cycle = {c: (latest[c].tolist() if c in latest else [None] * len(latest)) for c in SAMPLE_FIELDS}
        accounts = sorted(set(latest["account"]))
        pulling = latest["delivered_consumer_seq"].to_numpy() > 0  # the idle tenth's sequences stand still
        added: list[float] = []
        written: list[int] = []
        cycles = [0]
        began = [0.0]
        spent: list[float] = []
        opened: list[float] = []

        def collector_judging() -> object:
            """The runner's path after a cycle's samples are committed: the cycle into the
            collector's state (timed apart), then judge_in in the cycle's transaction, timed from
            its start to the connection closed (its open is the cycle's). Cycles 5 s apart on the
            samples' own clock, every sequence moving on as in the history: a steady fleet,
            where one sample enters and one leaves each consumer's window."""
            cycles[0] += 1
            now = base + dt.timedelta(seconds=5 * cycles[0])
            step = consumers * cycles[0]
            moved = {c: (latest[c].to_numpy() + step * (pulling if c.startswith("delivered") else 1)).tolist()
                     for c in ("delivered_consumer_seq", "delivered_stream_seq", "ack_floor_stream_seq")}
            active = (now - dt.timedelta(seconds=1)).isoformat()  # the server's clocks move with the work
            moved.update({c: [active if p else None for p in pulling]
                          for c in ("delivered_last_active", "ack_floor_last_active")})
            t = time.perf_counter()
            state.add({**cycle, **moved, "ts": [now.isoformat()] * len(latest)}, accounts)
            added.append(time.perf_counter() - t)

            def tx(con: object) -> object:
                began[0] = time.perf_counter()
                return judge_in(con, now, th, state)

            t = time.perf_counter()
            judged = store.write(tx)
            spent.append(time.perf_counter() - began[0])
            opened.append(began[0] - t)
            judged.commit()
            written.append(judged.written.num_rows)
            return judged

        # Interleaved, one of each in turn: on a shared machine both see the same load.
        judging, paging = [], []
        policy = GcPolicy(full_every=0.0)  # the collector's thresholds; a full collection after every cycle
        for _ in range(runs):
            policy.apply()
            try:
                judging.append(summary(collector_judging, 1))
                policy.between_cycles()
            finally:
                policy.restore()
            paging.append(summary(lambda: page_evaluation(store, th), 1))
        _, _, judged = _summary(judging)
        spent.sort()
        j50, j95 = statistics.median(spent), timing.p95(sorted(spent))
        o50 = statistics.median(opened)
        p50, p95, _ = _summary(paging)
        counts = judged.consumers["verdict"].value_counts().to_dict()
        print(f"verdicts: {counts}")
        print(f"judging {consumers:,} consumers after a cycle (judge_in in the cycle's transaction, as the collector calls it, with the COMMIT and close): "
              f"median {j50 * 1000:.0f} ms, p95 {j95 * 1000:.0f} ms; rows of verdicts_current written per cycle: "
              f"median {statistics.median(written):,.0f} (only those whose verdict, findings or numbers changed); "
              f"the cycle into the in-memory state beforehand: median {statistics.median(added) * 1000:.0f} ms; "
              f"opening the connection (the cycle's, not timed): median {o50 * 1000:.0f} ms")
        print(f"per-page window evaluation (the Fleet page before verdicts were kept), same run: "
              f"median {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms")
        print(f"ratio per-page evaluation / judging once per cycle: {p50 / j50:.2f}x "
              f"({p50 / (j50 + statistics.median(added)):.2f}x with the cycle into the state)")

        in_cycle(store, Path(tmp) / "cycle_only.duckdb", state, th, latest, accounts, pulling, base, cycles, runs)

        f50, f95, view = summary(lambda: fleet(store), runs)
        assert len(view.consumers) == consumers
        print(f"Fleet page data from verdicts_current: median {f50 * 1000:.0f} ms, p95 {f95 * 1000:.0f} ms; "
              f"{p50 / f50:.1f}x cheaper than the per-page evaluation")
        quiet = int(view.consumers["verdict"].isin(["NO_PULLERS", "STALLED"]).sum())
        b50, _, _ = summary(lambda: fleet(store, since_when=False), runs)
        print(f"the same Fleet read without the since-when columns (the last pull and ack the collector kept "
              f"for the {quiet:,} NO_PULLERS/STALLED consumers, the unpin reasons): median {b50 * 1000:.0f} ms; "
              f"ratio with / without {f50 / b50:.2f}x")

        for cardinality in ("non_ok", "all"):
            exporter = MetricsExporter(cardinality)
            snapshot = Snapshot(at=judged.at, consumers=judged.consumers, pins=PinCounts(), cycle_buckets=[0] * 10,
                                cycle_sum=0.0, cycles=1, capture_backlog=0, rejects=0)
            r50, r95, text = summary(lambda: exporter.render(snapshot), max(3, runs // 3))
            host, port = exporter.serve("127.0.0.1:0")
            s50, s95, _ = summary(lambda: urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30).read(), runs)
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
