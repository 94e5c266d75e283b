"""Fleet page at 100,000 consumers: what one render costs with the page's own functions.

First load: the Fleet data read (dashboard.data.fleet, what the page caches per collector cycle),
the viewer's filter, one page of rows and its table cells. A filter or a search: the same on the
cached fleet. The baseline is the same render before the grid was paged: the same read and
filter, but the cells of every matching row built and sent. Both show the same first rows
(checked), and the bytes each would ship to the browser (the table as Arrow) are printed too.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa

from bench.fleet import CURRENT, GENERATE
from bench.machine import print_header
from bench.timing import p95, timed
from jetwatch.collectors.judging import judge_stored_cycle
from jetwatch.core.clock import utcnow
from jetwatch.dashboard import data, tables
from jetwatch.dashboard.fleet_filters import PAGE_SIZES, FleetFilter, page_of
from jetwatch.dashboard.text import visible_frame
from jetwatch.health.rules import Thresholds
from jetwatch.store.database import Store

SIZE = PAGE_SIZES[0]


def render(fleet: pd.DataFrame, wanted: FleetFilter, paged: bool, now: dt.datetime) -> pd.DataFrame:
    """The grid's table for `wanted` at `now`: one page of rows, or (the baseline) every
    matching row."""
    shown = wanted.apply(fleet)
    shown["verdict"].value_counts()  # the badges above the grid count every matching row either way
    rows = page_of(shown, 1, SIZE) if paged else shown
    return visible_frame(tables.fleet_table(rows, now))


def figures(name: str, times: list[float]) -> str:
    return f"{name}: p50 {statistics.median(times) * 1000:.0f} ms, p95 {p95(times) * 1000:.0f} ms"


def main(rows: int, consumers: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "fleet.duckdb", query_timeout=600, lock_timeout=60)
        store.migrate()
        t = time.perf_counter()
        store.write(lambda con: (con.execute(GENERATE, {"rows": rows, "consumers": consumers}), con.execute(CURRENT)))
        judge_stored_cycle(store, utcnow(), Thresholds())
        print(f"store: {rows:,} raw samples of {consumers:,} consumers, judged once ({time.perf_counter() - t:.1f}s "
              f"to build)")
        th = Thresholds()
        now = utcnow()  # one time for every render: relative cells ("for 3 min") compare equal
        cached = data.fleet(store, th).consumers
        needle = str(cached["consumer"].iloc[len(cached) // 2])[:-1]  # a search that matches a handful
        searches = {"no filter": FleetFilter(), "verdict filter": FleetFilter(verdicts=(str(cached["verdict"].iloc[0]),)),
                    "stream filter": FleetFilter(streams=(str(cached["stream"].iloc[0]),)),
                    f"search {needle!r}": FleetFilter(search=needle)}

        first, page = timed(lambda: render(data.fleet(store, th).consumers, FleetFilter(), True, now), runs)
        first_base, whole = timed(lambda: render(data.fleet(store, th).consumers, FleetFilter(), False, now),
                                  max(3, runs // 3))
        if not page.equals(whole.iloc[:len(page)]):
            raise SystemExit(f"the page is not the first rows of the whole table:\n{page.compare(whole.iloc[:len(page)])}")
        sent, sent_base = pa.Table.from_pandas(page).nbytes, pa.Table.from_pandas(whole).nbytes
        print(figures(f"first load (read, filter, one page of {SIZE} rows)", first)
              + f", {sent / 2**10:,.0f} KiB of table")
        print(figures(f"baseline, the same render with every one of the {len(whole):,} rows built", first_base)
              + f", {sent_base / 2**20:,.1f} MiB of table")
        print(f"ratio (first load): {statistics.median(first_base) / statistics.median(first):.1f}x")
        for name, wanted in list(searches.items())[1:]:
            times, page = timed(lambda: render(cached, wanted, True, now), runs)
            base, whole = timed(lambda: render(cached, wanted, False, now), max(3, runs // 3))
            assert page.equals(whole.iloc[:len(page)])
            print(figures(f"{name} on the cached fleet ({len(wanted.apply(cached)):,} match)", times)
                  + f"; baseline {statistics.median(base) * 1000:.0f} ms, ratio "
                  f"{statistics.median(base) / statistics.median(times):.1f}x")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--consumers", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=15)
    a = p.parse_args()
    print_header()
    main(a.rows, a.consumers, a.runs)
