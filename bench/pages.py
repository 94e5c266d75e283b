"""The pages' data at 10,000 consumers and 30 days of pins: what the Pins page and the Consumer page
read on a load with their caches cold, p50/p95, beside the Fleet page's read (data.fleet) on the
same store in the same run. The store is real DuckDB, filled as the collector and the pipeline
fill it: an hour of raw samples of every consumer (judged once and sealed span by span, as the
collector does), 30 days of
pin advisories for every fifth consumer (a pin every 3 h, ended by a timeout), bursts of pins that
flapped 37 minutes ago and that flap now, and the pipeline's pin sessions loaded up to the last
whole hour. Each page is timed over its default range (1 hour) and over 30 days. The baseline, in
the same run, is the same page's reads as they were before sessions had one definition and the pages
read only what they show (bench/pages_before.py). Beside each wall time, the CPU time of the same
calls (every thread of the process): on a shared machine the wall time grows with the others' load,
the CPU time says what the page itself costs."""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from bench import pages_before
from bench.fleet import CURRENT, GENERATE
from bench.machine import print_header
from bench.timing import p95, timed_cpu
from jetwatch.collectors.judging import judge_stored_cycle
from jetwatch.core.clock import utcnow
from jetwatch.dashboard import data
from jetwatch.health.rules import Thresholds
from jetwatch.store.database import Store
from jetwatch.store.sealing import seal_pass

SEAL_EVERY = 120.0  # the collector's default seal_every: all but the newest two minutes of samples are sealed
PINNED = 5  # every fifth consumer is a pinned_client consumer with 30 days of pins
# The pinned consumers' samples carry their group and pin (one sample in seven with nobody pinned).
PIN_GROUPS = """
UPDATE samples_recent SET pin_group = 'jobs', pinned_id = CASE WHEN num_pending % 7 = 0 THEN NULL ELSE 'P' END
WHERE CAST(substr(consumer, 2) AS INTEGER) % $every = 0
"""
# A pin every 3 hours for 30 days, each ended by a timeout a minute before the next; staggered by
# consumer. Written in time order, as the collector appends them.
PINS = """
INSERT INTO advisories BY NAME
SELECT * FROM (
    SELECT 'a' || n || '-' || k || '-' || e AS id,
           $now::TIMESTAMPTZ - INTERVAL 30 DAY + to_minutes(180 * k + n % 180 + 179 * e) AS ts, $now::TIMESTAMPTZ AS received_at,
           CASE e WHEN 0 THEN 'consumer_group_pinned' ELSE 'consumer_group_unpinned' END AS kind, 'bench' AS subject,
           '$G' AS account, 'S' || (n // 100) AS stream, 'c' || n AS consumer, 'jobs' AS group_name,
           CASE e WHEN 0 THEN 'P' || n || '-' || k END AS pinned_id, CASE e WHEN 1 THEN 'timeout' END AS reason,
           '{}'::JSON AS raw
    FROM range(0, $consumers, $every) t(n), range(240) r(k), range(2) x(e)
) WHERE ts <= $now
ORDER BY ts
"""
# Six pins within four minutes: 37 minutes ago on some consumers, in the last four minutes on others.
BURSTS = """
INSERT INTO advisories BY NAME
SELECT 'b' || n || '-' || k AS id, $now::TIMESTAMPTZ - to_seconds(CASE WHEN n % 1000 = 0 THEN 37 * 60 ELSE 240 END - 40 * k) AS ts,
       $now::TIMESTAMPTZ AS received_at, 'consumer_group_pinned' AS kind, 'bench' AS subject, '$G' AS account,
       'S' || (n // 100) AS stream, 'c' || n AS consumer, 'jobs' AS group_name, 'F' || n || '-' || k AS pinned_id,
       NULL AS reason, '{}'::JSON AS raw
FROM range(0, $consumers, 500) t(n), range(6) r(k)
ORDER BY ts
"""
PIPELINE_RUN = """
INSERT INTO pipeline_runs VALUES ('bench', $until, $until, $until::TIMESTAMPTZ - INTERVAL 30 DAY, $until, 'ok', 0, NULL)
"""


def load_pipeline_sessions(store: Store, until: dt.datetime) -> int:
    """The pipeline's pin sessions as its load leaves them after a run ending at `until` (the same
    sessions as the Spark job: tests/test_pipeline.py holds the two definitions together)."""
    events = store.query("export_pin_events")
    events = events[pd.to_datetime(events["ts"], utc=True) < pd.Timestamp(until)]
    sessions = data.sessions_from_events(events, until).assign(spans_gap=False)

    def tx(con: Any) -> None:
        con.register("session_batch", sessions)
        con.execute("DELETE FROM pin_sessions")
        con.execute("INSERT INTO pin_sessions BY NAME SELECT * FROM session_batch")
        con.execute(PIPELINE_RUN, {"until": until})

    store.write(tx)
    return len(sessions)


def pins_page(store: Store, since: dt.datetime, until: dt.datetime, th: Thresholds) -> Any:
    """What the Pins page reads on a load with its cache cold (dashboard/views/pins.py): the pin
    history, with the range's capture gaps and operator actions."""
    return data.pin_history(store, since, until, th)


def consumer_page(store: Store, account: str, stream: str, consumer: str, since: dt.datetime, until: dt.datetime,
                  th: Thresholds) -> pd.DataFrame:
    """What the Consumer page reads on a load with its caches cold (dashboard/views/consumer.py)."""
    store.query("consumer_keys")
    detail = data.consumer_detail(store, account, stream, consumer, since, until)
    data.fleet(store, th, only=(account, stream, consumer))
    detail.band(data.data_start(detail.samples, since), until)
    return detail.sessions


def figures(times: list[float], cpu: list[float]) -> str:
    return (f"p50 {statistics.median(times) * 1000:,.0f} ms, p95 {p95(times) * 1000:,.0f} ms "
            f"(CPU p50 {statistics.median(cpu) * 1000:,.0f} ms, p95 {p95(cpu) * 1000:,.0f} ms)")


def compare(name: str, runs: int, page: Callable[[], Any], baseline: Callable[[], Any]) -> tuple[Any, Any]:
    times, cpu, out = timed_cpu(page, runs)
    base, base_cpu, base_out = timed_cpu(baseline, max(3, runs // 3))
    print(f"{name}: {figures(times, cpu)}; baseline (the page's former reads) {figures(base, base_cpu)}; "
          f"ratio {statistics.median(base) / statistics.median(times):.1f}x (p50), {p95(base) / p95(times):.1f}x (p95), "
          f"CPU {statistics.median(base_cpu) / statistics.median(cpu):.1f}x (p50)", flush=True)
    return out, base_out


def main(consumers: int, cycles: int, runs: int) -> None:
    print_header()
    th = Thresholds()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "pages.duckdb", query_timeout=600, lock_timeout=60)
        store.migrate()
        t = time.perf_counter()
        now = utcnow()
        rows = consumers * cycles
        store.write(lambda con: (con.execute(GENERATE, {"rows": rows, "consumers": consumers}),
                                 con.execute(PIN_GROUPS, {"every": PINNED}), con.execute(CURRENT),
                                 con.execute(PINS, {"now": now, "consumers": consumers, "every": PINNED})))
        run_until = now.replace(minute=0, second=0, microsecond=0)
        sessions = load_pipeline_sessions(store, run_until)
        judged_at = utcnow()  # the bursts just before the collector judges: some flap now
        store.write(lambda con: con.execute(BURSTS, {"now": judged_at, "consumers": consumers}))
        judge_stored_cycle(store, judged_at, th)
        while seal_pass(store, dt.timedelta(seconds=SEAL_EVERY)).rows:  # sealed span by span, as the collector does
            pass
        store.checkpoint()
        pins = int(store.read(lambda con: con.execute("SELECT count(*) FROM advisories").fetchone()[0]))
        flapping = int(store.read(lambda con: con.execute(
            "SELECT count(*) FROM verdicts_current WHERE verdict = 'FLAPPING'").fetchone()[0]))
        print(f"store: {rows:,} raw samples of {consumers:,} consumers ({cycles} cycles), {pins:,} pin advisories "
              f"over 30 days for {consumers // PINNED:,} of them, {sessions:,} pipeline pin sessions up to "
              f"{run_until:%H:%M} UTC, {flapping} consumers FLAPPING now ({time.perf_counter() - t:.1f}s to build, "
              f"{store.path.stat().st_size / 2**20:,.0f} MiB)")

        fleet_wall, fleet_cpu, _ = timed_cpu(lambda: data.fleet(store, th), runs)
        print(f"Fleet page data (data.fleet) over {consumers:,} consumers: {figures(fleet_wall, fleet_cpu)} ({runs} runs)",
              flush=True)
        target = ("$G", f"S{(consumers // 2) // 100}", f"c{(consumers // 2) // PINNED * PINNED}")
        for label, span in (("1 hour", dt.timedelta(hours=1)), ("30 days", dt.timedelta(days=30))):
            until = utcnow()
            since = until - span
            compare(f"Pins page data, {label}", runs, lambda: pins_page(store, since, until, th),
                    lambda: pages_before.pins_page(store, since, until, th))
            compare(f"Consumer page data ({target[2]}), {label}", runs,
                    lambda: consumer_page(store, *target, since, until, th),
                    lambda: pages_before.consumer_page(store, *target, since, until, th))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--consumers", type=int, default=10_000)
    p.add_argument("--cycles", type=int, default=720, help="raw samples per consumer, 5 s apart (720: an hour)")
    p.add_argument("--runs", type=int, default=15)
    a = p.parse_args()
    main(a.consumers, a.cycles, a.runs)
