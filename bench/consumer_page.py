"""Consumer page: data.consumer_detail (the page's own function: one consumer's live state and pin
history read with queries filtered on that consumer), p50/p95, on the same store in the same run:
first with every sample as the collector appends them (by time), against the page's former reads
(the same calls, but every consumer's latest row and every pin event, filtered in pandas);
then after the samples are sealed span by span as the collector seals them (store/sealing.py),
against the same function on the unsealed store. All give the same rows (checked)."""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

from bench.fleet import CURRENT, GENERATE
from bench.machine import print_header
from bench.timing import p95, timed
from jetwatch.dashboard import data
from jetwatch.dashboard.data import EVERY_CONSUMER
from jetwatch.store.database import Store
from jetwatch.store.sealing import seal_pass

# Pin stories for every fifth consumer: pinned, unpinned and pinned again over the last hours.
ADVISORIES = """
INSERT INTO advisories BY NAME
SELECT 'a' || n || '-' || k AS id, now() - to_minutes(130 - 40 * k) AS ts, now() AS received_at,
       CASE WHEN k % 2 = 0 THEN 'consumer_group_pinned' ELSE 'consumer_group_unpinned' END AS kind,
       'bench' AS subject, '$G' AS account, 'S' || (n // 100) AS stream, 'c' || n AS consumer, 'jobs' AS group_name,
       CASE WHEN k % 2 = 0 THEN 'P' || n || '-' || k END AS pinned_id,
       CASE WHEN k % 2 = 1 THEN 'timeout' END AS reason, '{}'::JSON AS raw
FROM range(0, $consumers, 5) t(n), range(4) r(k)
"""


def before(store: Store, account: str, stream: str, consumer: str, since: dt.datetime, until: dt.datetime):
    """data.consumer_detail as it was before its queries filtered on the consumer, for a range of
    raw samples: the same calls, but the pin events and latest rows of the whole fleet, then
    filtered in pandas."""
    ident = {"account": account, "stream": stream, "consumer": consumer}
    rng = {**ident, "since": since, "until": until}
    _configs, _advisories, pins, latest, samples = store.queries([
        ("consumer_configs", ident), ("consumer_advisories", rng),
        ("pin_events_range", {"since": since, "until": until, **EVERY_CONSUMER}), ("fleet_latest", {}),
        ("consumer_samples", rng)])
    def mine(f: pd.DataFrame) -> pd.DataFrame:
        return f[(f["account"] == account) & (f["stream"] == stream) & (f["consumer"] == consumer)]

    return mine(pins).reset_index(drop=True), mine(latest).reset_index(drop=True), samples


def after(store: Store, account: str, stream: str, consumer: str, since: dt.datetime, until: dt.datetime):
    detail = data.consumer_detail(store, account, stream, consumer, since, until)
    return detail.pins, detail.latest, detail.samples


def main(rows: int, consumers: int, runs: int, seal_every: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "consumer.duckdb", query_timeout=600, lock_timeout=60)
        store.migrate()
        t = time.perf_counter()
        store.write(lambda con: (con.execute(GENERATE, {"rows": rows, "consumers": consumers}), con.execute(CURRENT),
                                 con.execute(ADVISORIES, {"consumers": consumers})))
        print(f"store: {rows:,} raw samples of {consumers:,} consumers, pin stories for {consumers // 5:,} "
              f"({time.perf_counter() - t:.1f}s to build)")
        until = dt.datetime.now(dt.UTC)
        since = until - dt.timedelta(hours=1)
        target = ("$G", f"S{(consumers // 2) // 100}", f"c{(consumers // 2) // 5 * 5}")
        base, (pins_b, latest_b, samples_b) = timed(before, runs, store, *target, since, until)
        unsealed, (pins_a, latest_a, samples_a) = timed(after, runs, store, *target, since, until)
        assert len(samples_a) == len(samples_b) > 0 and samples_a.equals(samples_b)
        assert len(latest_a) == len(latest_b) == 1 and len(pins_a) == len(pins_b) > 0
        assert list(pins_a["ts"]) == list(pins_b["ts"]) and list(latest_a["consumer"]) == list(latest_b["consumer"])
        print(f"Consumer page data (data.consumer_detail, 1 h of raw samples: {len(samples_a):,} rows) for {target[2]}, "
              f"every sample unsealed (appended by time): p50 {statistics.median(unsealed) * 1000:.0f} ms, "
              f"p95 {p95(unsealed) * 1000:.0f} ms ({runs} runs)")
        print(f"baseline, the same page data read as before (whole fleet's pins and latest rows, then pandas): "
              f"p50 {statistics.median(base) * 1000:.0f} ms, p95 {p95(base) * 1000:.0f} ms; "
              f"ratio {statistics.median(base) / statistics.median(unsealed):.1f}x")

        span = dt.timedelta(seconds=seal_every)
        size_before = store.path.stat().st_size
        passes = []
        while True:
            t = time.perf_counter()
            sealed = seal_pass(store, span)
            if not sealed.rows:
                break
            passes.append((sealed.rows, time.perf_counter() - t))
        if not passes:
            raise SystemExit(f"nothing to seal: the store spans less than --seal-every ({seal_every:g} s)")
        moved = sum(n for n, _ in passes)
        left = store.query("seal_oldest").iloc[0]
        store.checkpoint()
        size_after = store.path.stat().st_size
        print(f"sealed in {len(passes)} passes of {seal_every:g} s: {moved:,} samples, a pass median "
              f"{statistics.median(d for _, d in passes):.2f} s (max {max(d for _, d in passes):.2f} s, "
              f"{moved / sum(d for _, d in passes):,.0f} rows/s); left unsealed: "
              f"{(left.iloc[1] - left.iloc[0]).total_seconds():.0f} s of samples; the store file "
              f"{size_before / 2**20:,.0f} MiB before, {size_after / 2**20:,.0f} MiB after")
        new, (pins_s, latest_s, samples_s) = timed(after, runs, store, *target, since, until)
        assert samples_s.equals(samples_a) and list(pins_s["ts"]) == list(pins_a["ts"]) and len(latest_s) == 1
        print(f"Consumer page data, the same consumer after sealing: p50 {statistics.median(new) * 1000:.0f} ms, "
              f"p95 {p95(new) * 1000:.0f} ms ({runs} runs); the same rows as unsealed")
        print(f"ratio: {statistics.median(unsealed) / statistics.median(new):.1f}x (p50), "
              f"{p95(unsealed) / p95(new):.1f}x (p95) against the unsealed store; "
              f"{statistics.median(base) / statistics.median(new):.1f}x against the reads filtered in pandas")

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--consumers", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--seal-every", type=float, default=120.0, help="the span of each sealing pass, seconds")
    a = p.parse_args()
    print_header()
    main(a.rows, a.consumers, a.runs, a.seal_every)
