"""Store: sample rows per second through the collector's write path (Arrow batch, one
transaction, open and close the file, the samples appended and consumer_current replaced), versus
row-by-row parameterised INSERTs; and, same run, the ceiling: the same batches' Arrow tables
appended to `samples` alone (no consumer_current, no casts, the file opened and closed per batch
all the same), which is what the write path would cost if it did nothing but append."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from jetwatch.collectors.consumer_state import SAMPLE_COLUMNS
from jetwatch.core.clock import parse_rfc3339
from jetwatch.store import writes
from jetwatch.store.database import Store
from bench.machine import print_header


def batch(n: int, cycle: int) -> dict[str, list]:
    ts = f"2026-11-22T00:{cycle // 60:02d}:{cycle % 60:02d}Z"
    cols: dict[str, list] = {c: [None] * n for c in SAMPLE_COLUMNS}
    cols.update(ts=[ts] * n, account=["$G"] * n, stream=[f"S{i % 100}" for i in range(n)],
                consumer=[f"c{i}" for i in range(n)], num_pending=list(range(n)), num_ack_pending=[1] * n,
                num_waiting=[2] * n, num_redelivered=[0] * n, delivered_consumer_seq=[cycle] * n,
                delivered_stream_seq=[cycle] * n, ack_floor_consumer_seq=[cycle] * n,
                ack_floor_stream_seq=[cycle] * n, paused=[False] * n, pinned_id=["p"] * n)
    return cols


def main(rows: int, batch_rows: int, baseline_rows: int) -> None:
    print_header()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "w.duckdb")
        store.migrate()
        batches = [batch(batch_rows, i) for i in range(rows // batch_rows)]
        t = time.perf_counter()
        for b in batches:
            store.write(lambda con, b=b: writes.write_samples(con, ["$G"], b))
        fast = time.perf_counter() - t
        rate = rows / fast
        print(f"collector write path: {rows:,} rows in {fast:.2f}s = {rate:,.0f} rows/s "
              f"(batches of {batch_rows:,}, file opened and closed per batch)")

        ceiling_store = Store(Path(tmp) / "c.duckdb")
        ceiling_store.migrate()
        tables = [pa.table({c: pa.array([parse_rfc3339(b["ts"][0])] * len(b["ts"])) if c == "ts" else b[c]
                            for c in SAMPLE_COLUMNS}) for b in batches]
        t = time.perf_counter()
        for table in tables:
            ceiling_store.write(lambda con, table=table: con.register("ready", table).execute(
                "INSERT INTO samples BY NAME SELECT * FROM ready"))  # baseline only
        ceiling = rows / (time.perf_counter() - t)
        print(f"ceiling, the same rows as ready Arrow tables appended to samples alone: {ceiling:,.0f} rows/s; "
              f"the write path runs at {rate / ceiling:.0%} of it")

        base = Store(Path(tmp) / "b.duckdb")
        base.migrate()
        one = batch(baseline_rows, 0)
        cols = list(one)
        values = list(zip(*(one[c] for c in cols)))
        marks = ", ".join("?" for _ in cols)
        t = time.perf_counter()
        base.write(lambda con: con.executemany(
            f"INSERT INTO samples ({', '.join(cols)}) VALUES ({marks})", values))  # baseline only
        slow = baseline_rows / (time.perf_counter() - t)
        print(f"baseline, row-by-row INSERT: {slow:,.0f} rows/s")
        print(f"ratio: {rate / slow:.0f}x")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--batch-rows", type=int, default=100_000)
    p.add_argument("--baseline-rows", type=int, default=5_000)
    a = p.parse_args()
    main(a.rows, a.batch_rows, a.baseline_rows)
