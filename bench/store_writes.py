"""Store: sample rows per second through the collector's write path, from what the collector hands
over: the cycle read from server-shaped CONSUMER.LIST pages by the collector's own parse (before the
clock), the samples appended as the new current cycle in one transaction, the file attached and
detached per batch, in row groups of the writer's size. Timed taking turns batch by batch, into three
stores checked equal: the write from the columns the parse read straight into Arrow (the collector's
path for CONSUMER.LIST); the same write from the parse's Python lists, each value converted to Arrow
first (the path before, and still the one for /jsz and for a cycle that falls back to decoding its
pages); and the ceiling, the same rows as ready Arrow tables (built before the clock) appended to
`samples` alone through the same Store: what a write would cost if it did nothing but append. Then
reading the same pages both ways, a small write's time through the Store against a DuckDB made per
write, and row-by-row INSERTs."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from bench.machine import print_header
from jetwatch.collectors.consumer_list import ConsumerListCollector
from jetwatch.collectors.consumer_state import SAMPLE_COLUMNS, SampleBatch, Scope
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.gc_policy import GcPolicy
from jetwatch.collectors.jsz import JszCollector, ServerReport
from jetwatch.store import writes
from jetwatch.store.database import Store

PAGE = 256  # consumers a CONSUMER.LIST page holds


def pages(n: int, cycle: int) -> list[tuple[str, list[bytes]]]:
    """One cycle of n consumers in 100 streams as the server sends them: consumer info with its
    config, counts, sequences, nanosecond times and a pinned group; 256 to a page."""
    second = f"2026-11-22T00:{cycle // 60:02d}:{cycle % 60:02d}"
    streams: dict[str, list[dict]] = {}
    for i in range(n):
        ts = f"{second}.{i * 7919 % 1_000_000_000:09d}Z"
        stream = f"S{i % 100}"
        streams.setdefault(stream, []).append({
            "stream_name": stream, "name": f"c{i}", "created": f"2026-11-20T10:{i % 60:02d}:{i // 60 % 60:02d}.{i:09d}Z",
            "config": {"durable_name": f"c{i}", "name": f"c{i}", "deliver_policy": "all", "ack_policy": "explicit",
                       "ack_wait": 30_000_000_000, "max_deliver": -1, "replay_policy": "instant", "max_waiting": 512,
                       "max_ack_pending": 1000, "num_replicas": 0, "metadata": {"_nats.req.level": "1"},
                       "priority_groups": ["jobs"], "priority_policy": "pinned_client", "priority_timeout": 60_000_000_000},
            "delivered": {"consumer_seq": cycle, "stream_seq": cycle, "last_active": ts},
            "ack_floor": {"consumer_seq": cycle, "stream_seq": cycle, "last_active": ts},
            "num_ack_pending": 1, "num_redelivered": 0, "num_waiting": 2, "num_pending": i, "ts": ts,
            "cluster": {"leader": "n1"},
            "priority_groups": [{"group": "jobs", "pinned_client_id": f"pin{i}", "pinned_ts": f"{second}Z"}],
        })
    return [(stream, [json.dumps({"type": "io.nats.jetstream.api.v1.consumer_list_response", "total": len(entries),
                                  "offset": at, "limit": PAGE, "consumers": entries[at:at + PAGE]},
                                 separators=(",", ":")).encode() for at in range(0, len(entries), PAGE)])
            for stream, entries in streams.items()]


def jsz_report(cycle: list[tuple[str, list[bytes]]]) -> bytes:
    """The same consumers as one server's /jsz report (compact, as PING.JSZ sends it)."""
    return json.dumps({"server_id": "n1", "now": "2026-11-22T00:00:00Z", "account_details": [
        {"name": "$G", "stream_detail": [{"name": stream, "consumer_detail": entries}
                                         for stream, entries in decoded(cycle)]}]}, separators=(",", ":")).encode()


def decoded(cycle: list[tuple[str, list[bytes]]]) -> list[tuple[str, list[dict]]]:
    return [(stream, [info for raw in got for info in json.loads(raw)["consumers"]]) for stream, got in cycle]


def sampled_at(cycle: int) -> dt.datetime:
    """The collector's time of a cycle, which it writes with the cycle's samples."""
    return dt.datetime(2026, 11, 22, tzinfo=dt.UTC) + dt.timedelta(seconds=cycle)


TIMES = ("ts", "created", "delivered_last_active", "ack_floor_last_active", "pause_until", "pinned_ts")


def ready(cols: dict[str, list], cycle: int) -> pa.Table:
    """The batch as a ready Arrow table: every column typed, the times parsed (by DuckDB's cast,
    in memory, before the clock starts), the cycle's time beside them as the collector writes it,
    in chunks of one row group as the write path makes them."""
    raw = pa.table({c: pa.array(v, type=pa.string()) if c in TIMES else pa.array(v) for c, v in cols.items()})  # noqa: F841 (DuckDB reads it by name)
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


def _collector() -> ConsumerListCollector:
    return ConsumerListCollector(None, Scope("$G"), NameFilter(), lambda: "2026-11-22T00:00:00Z")  # type: ignore[arg-type]


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(rows: int, batch_rows: int, baseline_rows: int, small_writes: int) -> None:
    print_header()
    policy = GcPolicy()
    policy.apply()  # the collector's (collectors/gc_policy.py): full collections between cycles, not in them
    try:
        run(rows, batch_rows, baseline_rows, small_writes, policy)
    finally:
        policy.restore()


def run(rows: int, batch_rows: int, baseline_rows: int, small_writes: int, policy: GcPolicy) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for kind in ("arrow", "jsz", "lists", "ceiling"):
            stores[kind] = Store(Path(tmp) / f"{kind}.duckdb")
            stores[kind].migrate()
        collector, jsz_reader = _collector(), JszCollector(None, NameFilter(), lambda: "2026-11-22T00:00:00Z")  # type: ignore[arg-type]
        spent = {kind: 0.0 for kind in stores}
        batches = rows // batch_rows
        last: SampleBatch | None = None
        for i in range(batches):
            cycle = pages(batch_rows, i)
            batch = collector.batch_from_pages(cycle)  # the collector's parse, before the clock
            by_jsz = jsz_reader.batch_from_reports([ServerReport("n1", raw=jsz_report(cycle))])  # the same, from /jsz
            assert batch.arrow is not None and by_jsz.arrow is not None and batch.consumers == by_jsz.consumers == batch_rows
            table = ready(batch.samples, i)  # baseline only: the ceiling's ready table, before the clock
            turns = {
                "arrow": lambda con, b=batch, i=i: writes.write_samples(con, ["$G"], b.samples, (), sampled_at(i), b.arrow),
                "jsz": lambda con, b=by_jsz, i=i: writes.write_samples(con, ["$G"], b.samples, (), sampled_at(i), b.arrow),
                "lists": lambda con, b=batch, i=i: writes.write_samples(con, ["$G"], b.samples, (), sampled_at(i)),
                "ceiling": lambda con, t=table: con.register("ready", t).execute(  # baseline only
                    "INSERT INTO samples_recent BY NAME SELECT * FROM ready"),
            }
            for kind in list(turns)[i % 4:] + list(turns)[:i % 4]:  # each path first in turn
                spent[kind] += _timed(lambda kind=kind: stores[kind].write(turns[kind]))
            last = batch
            del cycle, by_jsz
            policy.between_cycles()
        rate = {kind: rows / seconds for kind, seconds in spent.items()}
        print(f"collector write path, CONSUMER.LIST (the columns its parse read into Arrow): {rows:,} rows in "
              f"{spent['arrow']:.2f}s = {rate['arrow']:,.0f} rows/s (batches of {batch_rows:,}, file attached and detached per batch)")
        print(f"the same rows read from a /jsz report into Arrow, written the same way: {rate['jsz']:,.0f} rows/s")
        print(f"the same write from the parse's Python lists, each value converted to Arrow (the path before; a cycle "
              f"that falls back to decoding its pages): {rate['lists']:,.0f} rows/s")
        print(f"ceiling, the same rows as ready Arrow tables appended to samples alone, same Store: "
              f"{rate['ceiling']:,.0f} rows/s; the write path runs at {rate['arrow'] / rate['ceiling']:.0%} of it")

        fingerprints = {kind: _fingerprint(store.path, "samples") for kind, store in stores.items()}
        samples_same = len(set(fingerprints.values())) == 1
        check = duckdb.connect()
        check.register("last_batch", ready(last.samples, batches - 1))
        cols = ", ".join(SAMPLE_COLUMNS)
        current_same = all(_fingerprint(stores[kind].path, "consumer_current") == check.execute(
            f"SELECT count(*), coalesce(sum(hash({cols})::HUGEINT), 0) FROM last_batch").fetchone()
            for kind in ("arrow", "jsz", "lists"))
        print(f"checked: the write path's samples equal the ceiling's: {samples_same}; its consumer_current "
              f"equals the last batch: {current_same}")

        read_pages(batch_rows)
        small_write(Path(tmp), small_writes)

        base = Store(Path(tmp) / "b.duckdb")
        base.migrate()
        one = collector.batch_from_pages(pages(baseline_rows, 0)).samples
        cols = list(one)
        values = list(zip(*(one[c] for c in cols)))
        marks = ", ".join("?" for _ in cols)
        t = time.perf_counter()
        base.write(lambda con: con.executemany(
            f"INSERT INTO samples_recent ({', '.join(cols)}) VALUES ({marks})", values))  # baseline only
        slow = baseline_rows / (time.perf_counter() - t)
        print(f"baseline, row-by-row INSERT: {slow:,.0f} rows/s")
        print(f"ratio: {rate['arrow'] / rate['lists']:.2f}x the write from the Python lists (from /jsz: "
              f"{rate['jsz'] / rate['lists']:.2f}x); {rate['arrow'] / slow:.0f}x "
              f"row-by-row; {rate['arrow'] / rate['ceiling']:.2f}x the ceiling")


def read_pages(n: int) -> None:
    """Where the conversion went: the same pages read into Arrow by the collector's parse, against
    decoding them with json.loads, taking them page at a time and converting the lists to Arrow as
    the write from lists does (both with their config fingerprints warm, as in a running collector)."""
    cycle = pages(n, 0)
    arrow, before = _collector(), _collector()
    arrow.batch_from_pages(cycle)
    before.batch_from_entries(decoded(cycle))
    spent: dict[str, list[float]] = {"arrow": [], "decode": [], "pages": [], "convert": []}
    for _ in range(3):
        spent["arrow"].append(_timed(lambda: arrow.batch_from_pages(cycle)))
        t = time.perf_counter()
        entries = decoded(cycle)
        spent["decode"].append(time.perf_counter() - t)
        batch = before.batch_from_entries(entries)
        spent["pages"].append(time.perf_counter() - t - spent["decode"][-1])
        spent["convert"].append(_timed(lambda: writes.samples_table(batch.samples)))
    ms = {k: statistics.median(v) * 1000 for k, v in spent.items()}
    old = ms["decode"] + ms["pages"] + ms["convert"]
    print(f"reading {n:,} consumers' pages, median of 3: into Arrow (columns for the store, lists for the window) "
          f"{ms['arrow']:.0f} ms; before: json.loads {ms['decode']:.0f} ms + page at a time {ms['pages']:.0f} ms + the "
          f"lists converted to Arrow {ms['convert']:.0f} ms = {old:.0f} ms; ratio {old / ms['arrow']:.2f}x")
    report = jsz_report(cycle)
    readers = [JszCollector(None, NameFilter(), lambda: "2026-11-22T00:00:00Z") for _ in range(2)]  # type: ignore[arg-type]

    def as_sent() -> None:
        readers[0].batch_from_reports([ServerReport("n1", raw=report)])

    def as_before() -> None:  # decoded, entry by entry, then converted for the store
        writes.samples_table(readers[1].batch_from_reports([ServerReport("n1", jsz=json.loads(report))]).samples)
    as_sent(), as_before()  # the known config hashes warm, as in a running collector
    sent = statistics.median(_timed(as_sent) for _ in range(3)) * 1000
    before = statistics.median(_timed(as_before) for _ in range(3)) * 1000
    print(f"reading the same consumers from one /jsz report: into Arrow {sent:.0f} ms; before: json.loads + entry by "
          f"entry + the lists converted to Arrow {before:.0f} ms; ratio {before / sent:.2f}x")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--batch-rows", type=int, default=100_000)
    p.add_argument("--baseline-rows", type=int, default=5_000)
    p.add_argument("--small-writes", type=int, default=300, help="small writes of each kind, taking turns")
    a = p.parse_args()
    main(a.rows, a.batch_rows, a.baseline_rows, a.small_writes)
