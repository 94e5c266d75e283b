"""Store: sample rows per second through the collector's write path (the cycle's Python columns as
the collector hands them over, times as the server's RFC 3339 strings with nanoseconds; typed Arrow
columns built, one transaction, the file opened and closed per batch, the samples appended as the
new current cycle, in row groups of the writer's size), versus row-by-row parameterised INSERTs;
and, same run, the ceiling: the same batches as ready Arrow tables (built before the clock starts)
appended to `samples` alone (no cycle made current, nothing parsed), through the same Store, so the same open, commit and close per
batch: what the write path would cost if it did nothing but append. The stores are checked equal:
the write path's `samples` against the ceiling's, its live state (the view `consumer_current`)
against the last batch. Then a small write's time through the Store against a DuckDB made per write."""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from jetwatch.collectors.consumer_state import SAMPLE_COLUMNS
from jetwatch.store import writes
from jetwatch.store.database import Store
from bench.machine import print_header


def batch(n: int, cycle: int) -> dict[str, list]:
    """One cycle of n consumers as the collector hands it to the store."""
    second = f"2026-11-22T00:{cycle // 60:02d}:{cycle % 60:02d}"
    ts = [f"{second}.{i * 7919 % 1_000_000_000:09d}Z" for i in range(n)]
    cols: dict[str, list] = {c: [None] * n for c in SAMPLE_COLUMNS}
    cols.update(ts=ts, server=["n1"] * n, cluster=["c1"] * n, account=["$G"] * n,
                stream=[f"S{i % 100}" for i in range(n)], consumer=[f"c{i}" for i in range(n)],
                created=[f"2026-11-20T10:{i % 60:02d}:{i // 60 % 60:02d}.{i:09d}Z" for i in range(n)],
                num_pending=list(range(n)), num_ack_pending=[1] * n, num_waiting=[2] * n, num_redelivered=[0] * n,
                delivered_consumer_seq=[cycle] * n, delivered_stream_seq=[cycle] * n, delivered_last_active=ts,
                ack_floor_consumer_seq=[cycle] * n, ack_floor_stream_seq=[cycle] * n, ack_floor_last_active=ts,
                paused=[False] * n, pinned_id=["p"] * n, leader=["n1"] * n)
    return cols


def sampled_at(cycle: int) -> dt.datetime:
    """The collector's time of a cycle, which it writes with the cycle's samples."""
    return dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=cycle)


TIMES = ("ts", "created", "delivered_last_active", "ack_floor_last_active", "pause_until", "pinned_ts")


def ready(cols: dict[str, list], cycle: int) -> pa.Table:
    """The batch as a ready Arrow table: every column typed, the times parsed (by DuckDB's cast,
    in memory, before the clock starts), the cycle's time beside them as the collector writes it,
    in chunks of one row group as the write path makes them."""
    raw = pa.table({c: pa.array(v, type=pa.string()) if c in TIMES else pa.array(v) for c, v in cols.items()})
    casts = ", ".join(f"{c}::TIMESTAMPTZ AS {c}" for c in TIMES)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    table = con.sql(f"SELECT * REPLACE ({casts}), $at AS sampled_at FROM raw",
                    params={"at": sampled_at(cycle)}).to_arrow_table()
    return writes.in_row_groups(table)  # as the write path hands it over


def _fingerprint(store_path: Path, table: str) -> tuple[int, int]:
    """(rows, sum of row hashes) of a table's sample columns: equal for equal multisets of rows."""
    cols = ", ".join(SAMPLE_COLUMNS)
    checker = Store(store_path, query_timeout=600)  # a check, not a figure: no page's time limit
    return checker.read(lambda con: con.execute(
        f"SELECT count(*), coalesce(sum(hash({cols})::HUGEINT), 0) FROM {table}").fetchone())


SMALL = "INSERT INTO t SELECT i, 'row ' || i FROM range(100) r(i)"


def small_write(tmp: Path, writes_each: int) -> None:
    """A small write (the collector's status row, a few advisories) through the Store, which keeps
    one in-memory DuckDB and attaches the file to it for each write, against the same statements
    with a DuckDB made and closed for each write, the two taking turns write by write."""
    store = Store(tmp / "s.duckdb")
    store.write(lambda con: con.execute("CREATE TABLE t (i BIGINT, s VARCHAR)"))
    fresh_path = str(tmp / "f.duckdb")
    setup = duckdb.connect(fresh_path)
    setup.execute("CREATE TABLE t (i BIGINT, s VARCHAR)")
    setup.close()

    def fresh() -> None:  # baseline only: what a write cost before the Store kept its DuckDB
        con = duckdb.connect()
        con.execute("ATTACH $path AS store (ROW_GROUP_SIZE 16384)", {"path": fresh_path})
        con.execute("USE store")
        con.execute("BEGIN TRANSACTION")
        con.execute(SMALL)
        con.execute("COMMIT")
        con.close()

    kept_ms, fresh_ms = [], []
    for _ in range(writes_each):
        t = time.perf_counter()
        store.write(lambda con: con.execute(SMALL))
        kept_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        fresh()
        fresh_ms.append((time.perf_counter() - t) * 1000)
    same = _count(store.path) == _count(Path(fresh_path)) == 100 * writes_each
    kept, made = statistics.median(kept_ms), statistics.median(fresh_ms)
    print(f"small write (100 rows, one transaction, file opened and closed): median {kept:.1f} ms through the "
          f"Store (its DuckDB kept, the file attached per write); baseline, a DuckDB made per write: {made:.1f} ms; "
          f"ratio {made / kept:.2f}x; both files hold every row: {same}")


def _count(path: Path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM t").fetchone()[0]
    finally:
        con.close()


def main(rows: int, batch_rows: int, baseline_rows: int, small_writes: int) -> None:
    print_header()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "w.duckdb")
        store.migrate()
        batches = [batch(batch_rows, i) for i in range(rows // batch_rows)]
        t = time.perf_counter()
        for i, b in enumerate(batches):
            store.write(lambda con, b=b, i=i: writes.write_samples(con, ["$G"], b, (), sampled_at(i)))
        fast = time.perf_counter() - t
        rate = rows / fast
        print(f"collector write path: {rows:,} rows in {fast:.2f}s = {rate:,.0f} rows/s "
              f"(batches of {batch_rows:,}, file opened and closed per batch)")
        building = []
        for b in batches:
            t = time.perf_counter()
            writes.samples_table(b)
            building.append(time.perf_counter() - t)
        print(f"of which, measured again alone: the batch's Arrow table built from the Python lists, median "
              f"{statistics.median(building) * 1000:.0f} ms of the {fast / len(batches) * 1000:.0f} ms a batch took")

        ceiling_store = Store(Path(tmp) / "c.duckdb")
        ceiling_store.migrate()
        tables = [ready(b, i) for i, b in enumerate(batches)]  # built before the clock
        t = time.perf_counter()
        for table in tables:
            ceiling_store.write(lambda con, table=table: con.register("ready", table).execute(
                "INSERT INTO samples_recent BY NAME SELECT * FROM ready"))  # baseline only
        ceiling = rows / (time.perf_counter() - t)
        print(f"ceiling, the same rows as ready Arrow tables appended to samples alone, same Store: "
              f"{ceiling:,.0f} rows/s; the write path runs at {rate / ceiling:.0%} of it")

        samples_same = _fingerprint(store.path, "samples") == _fingerprint(ceiling_store.path, "samples")
        last = duckdb.connect()
        last.register("last_batch", tables[-1])
        cols = ", ".join(SAMPLE_COLUMNS)
        current_same = _fingerprint(store.path, "consumer_current") == last.execute(
            f"SELECT count(*), coalesce(sum(hash({cols})::HUGEINT), 0) FROM last_batch").fetchone()
        print(f"checked: the write path's samples equal the ceiling's: {samples_same}; its consumer_current "
              f"equals the last batch: {current_same}")

        small_write(Path(tmp), small_writes)

        base = Store(Path(tmp) / "b.duckdb")
        base.migrate()
        one = batch(baseline_rows, 0)
        cols = list(one)
        values = list(zip(*(one[c] for c in cols)))
        marks = ", ".join("?" for _ in cols)
        t = time.perf_counter()
        base.write(lambda con: con.executemany(
            f"INSERT INTO samples_recent ({', '.join(cols)}) VALUES ({marks})", values))  # baseline only
        slow = baseline_rows / (time.perf_counter() - t)
        print(f"baseline, row-by-row INSERT: {slow:,.0f} rows/s")
        print(f"ratio: {rate / slow:.0f}x row-by-row; {rate / ceiling:.2f}x the ceiling")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--batch-rows", type=int, default=100_000)
    p.add_argument("--baseline-rows", type=int, default=5_000)
    p.add_argument("--small-writes", type=int, default=300, help="small writes of each kind, taking turns")
    a = p.parse_args()
    main(a.rows, a.batch_rows, a.baseline_rows, a.small_writes)
