"""Fleet page: the page's reads (data.fleet: live state and the verdicts the collector kept, with
each consumer's last pull, last ack and first seen kept beside them) over a store of many raw
samples, p50/p95; then the same after the store grew by as many samples again (older history),
to show the read does not grow with samples stored. Baselines in the same run: the same Fleet data
recomputed on every render as the page did before verdicts were kept (window features over the
samples and the rules), and the page's since-when lookup scanning the quiet consumers' samples as
it did before the collector kept their activity. The store is judged first as the collector does
(its state seeded from the store at start, then judge_stored_cycle)."""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

from bench.machine import print_header
from bench.timing import summary
from jetwatch import sql
from jetwatch.collectors.judging import judge_stored_cycle, load_window
from jetwatch.core.clock import utcnow
from jetwatch.dashboard.data import fleet
from jetwatch.health.rules import LIMIT_COLUMNS, Thresholds, evaluate
from jetwatch.store.database import Store

# Synthetic history, generated inside DuckDB: `consumers` consumers sampled every 5 s up to now.
GENERATE = """
INSERT INTO samples_recent BY NAME
SELECT now() - to_seconds(5 * (n // $consumers)) AS ts, '$G' AS account, 'S' || ((n % $consumers) // 100) AS stream,
       'c' || (n % $consumers) AS consumer, (n % 97) AS num_pending, (n % 5) AS num_ack_pending, 1 AS num_waiting,
       0 AS num_redelivered, ($rows - n) AS delivered_consumer_seq, ($rows - n) AS delivered_stream_seq,
       ($rows - n) AS ack_floor_consumer_seq, ($rows - n) AS ack_floor_stream_seq, false AS paused,
       -- the server's own activity times, as every sample of a 2.11+ server carries them
       now() - to_seconds(5 * (n // $consumers) + 1) AS delivered_last_active,
       now() - to_seconds(5 * (n // $consumers) + 1) AS ack_floor_last_active
FROM range($rows) t(n)
ORDER BY ts
"""
# Every tenth consumer has work pending and nobody pulling (NO_PULLERS): the Fleet says since when.
IDLE = """
UPDATE samples_recent SET num_pending = 5, num_waiting = 0, delivered_consumer_seq = 0, delivered_stream_seq = 0,
       delivered_last_active = NULL, ack_floor_last_active = NULL
WHERE CAST(substr(consumer, 2) AS INTEGER) % 10 = 0
"""
# More history, older than what GENERATE wrote: the store grows, the live state does not.
OLDER = GENERATE.replace("now() - to_seconds(5 * (n // $consumers))",
                         "now() - to_seconds(5 * (n // $consumers) + 5 * ($rows // $consumers))")
# The newest rows, each consumer's latest sample, made the live state as the collector's last cycle.
CURRENT = """
UPDATE current_cycle SET cycle = cycle + 1;
UPDATE samples_recent SET cycle = (SELECT cycle FROM current_cycle) WHERE ts = (SELECT max(ts) FROM samples_recent);
"""


def page_evaluation(store: Store, th: Thresholds) -> object:
    """What the Fleet page did on every render before the collector kept verdicts: the window's
    samples read from the store and judged (health.rules.evaluate, the pipeline's path)."""
    since = utcnow() - dt.timedelta(seconds=th.health_window)

    def read(con):  # type: ignore[no-untyped-def]
        con.execute(sql.query("set_window_since"), {"since": since})
        con.execute(sql.query("stage_window_samples"))
        return (con.execute("SELECT * FROM window_samples").df(), con.execute(sql.query("fleet_latest")).df(),
                con.execute(sql.query("window_event_counts"), {"since": since}).df())

    samples, latest, counts = store.read(read)
    limits = latest[["account", "stream", "consumer", *LIMIT_COLUMNS]]
    return evaluate(samples, limits, th, counts)


FORGET_ACTIVITY = "UPDATE verdicts_current SET last_pull = NULL, last_ack = NULL, first_seen = NULL"


def main(rows: int, consumers: int, runs: int, db: str | None) -> None:
    print_header()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(db or Path(tmp) / "fleet.duckdb", query_timeout=600, lock_timeout=60)
        t = time.perf_counter()
        if not (db and Path(db).exists()):
            store.migrate()
            store.write(lambda con: (con.execute(GENERATE, {"rows": rows, "consumers": consumers}),
                                     con.execute(IDLE), con.execute(CURRENT)))
            store.checkpoint()  # as the collector's retention pass does: reads do not replay a WAL
        print(f"store: {rows:,} raw samples of {consumers:,} consumers ({time.perf_counter() - t:.1f}s to build), "
              f"{store.path.stat().st_size / 2**30:.2f} GiB")
        th = Thresholds()
        t = time.perf_counter()
        now = utcnow()
        judged = judge_stored_cycle(store, now, th, load_window(store, now, th))
        print(f"judged as the collector does (state seeded from the store at start, then a cycle judged): "
              f"{time.perf_counter() - t:.2f}s ({judged.consumers['verdict'].value_counts().to_dict()})")
        f50, f95, view = summary(lambda: fleet(store, th), runs)
        assert len(view.consumers) == consumers
        quiet = view.consumers[view.consumers["verdict"].isin(["NO_PULLERS", "STALLED"])]
        kept = int(quiet["last_ack"].notna().sum() + quiet["first_seen"].notna().sum())
        print(f"Fleet page reads (data.fleet, kept verdicts and activity) over {consumers:,} consumers, {rows:,} "
              f"samples: p50 {f50 * 1000:.0f} ms, p95 {f95 * 1000:.0f} ms ({runs} runs, file opened per run); "
              f"{len(quiet):,} quiet consumers say since when from the kept columns ({kept:,} values)")
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
        print(f"ratio: {base / f50:.1f}x (p50)")

        t = time.perf_counter()
        store.write(lambda con: con.execute(OLDER, {"rows": rows, "consumers": consumers}))
        store.checkpoint()
        print(f"store grown by {rows:,} older samples to {2 * rows:,} ({time.perf_counter() - t:.1f}s), "
              f"{store.path.stat().st_size / 2**30:.2f} GiB")
        g50, g95, _ = summary(lambda: fleet(store, th), runs)
        print(f"Fleet page reads at {2 * rows:,} samples: p50 {g50 * 1000:.0f} ms, p95 {g95 * 1000:.0f} ms; "
              f"ratio to {rows:,} samples: {g50 / f50:.2f}x (p50), {g95 / f95:.2f}x (p95)")
        store.write(lambda con: con.execute(FORGET_ACTIVITY))  # rows as written before the collector kept it
        s50, s95, old = summary(lambda: fleet(store, th), runs)
        looked_up = old.consumers[old.consumers["verdict"].isin(["NO_PULLERS", "STALLED"])]
        same_words = int((looked_up.set_index(["account", "stream", "consumer"])["last_ack"]
                          .reindex(quiet.set_index(["account", "stream", "consumer"]).index)
                          .eq(quiet.set_index(["account", "stream", "consumer"])["last_ack"])).sum())
        print(f"baseline at {2 * rows:,} samples, the since-when lookups scanning the quiet consumers' samples on "
              f"every render (the page before, now its fallback for rows without kept activity): p50 "
              f"{s50 * 1000:.0f} ms, p95 {s95 * 1000:.0f} ms; the same last ack for {same_words:,} of "
              f"{len(quiet):,} quiet consumers; ratio {s95 / g95:.2f}x (p95)")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--consumers", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--db", help="reuse (or keep) a store file at this path")
    a = p.parse_args()
    main(a.rows, a.consumers, a.runs, a.db)
