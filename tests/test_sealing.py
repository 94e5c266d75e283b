"""Sealing: the oldest span of raw samples stored again ordered by consumer, readable throughout."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import pytest

from jetwatch import sql
from jetwatch.dashboard import data
from jetwatch.store.database import Store
from jetwatch.store.retention import Cutoffs, prune
from jetwatch.store import sealing
from jetwatch.store.sealing import seal
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, rows

T0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.timezone.utc)
SPAN = dt.timedelta(seconds=60)
HOUR = dt.timedelta(hours=1)

# What a collector writes each cycle: one row per consumer, in time order (consumers in any order).
CYCLES = """
INSERT INTO samples_recent BY NAME
SELECT $t0 + to_seconds($every * (n // $consumers)) AS ts, '$G' AS account, 'S' || (((n * 7919) % $consumers) % 7) AS stream,
       'c' || ((n * 7919) % $consumers) AS consumer, n AS num_pending, 0 AS num_ack_pending, 1 AS num_waiting,
       0 AS num_redelivered, n AS delivered_consumer_seq, n AS delivered_stream_seq, n AS ack_floor_consumer_seq,
       n AS ack_floor_stream_seq, false AS paused
FROM range($first * $consumers, ($first + $cycles) * $consumers) t(n)
"""


def cycles(store: Store, first: int, count: int, consumers: int = 5, every: float = 10.0) -> None:
    store.write(lambda con: con.execute(CYCLES, {"t0": T0, "every": every, "consumers": consumers,
                                                 "first": first, "cycles": count}))


def every_sample(store: Store) -> list[tuple]:
    return rows(store, "SELECT * FROM samples ORDER BY account, stream, consumer, ts")


def test_nothing_is_sealed_until_the_unsealed_samples_span_a_whole_span(store):
    cycles(store, 0, 6)  # 0 .. 50 s: less than the 60 s span
    sealed = store.write(lambda con: seal(con, SPAN))
    assert (sealed.rows, sealed.until, sealed.next_in) == (0, None, dt.timedelta(seconds=10))
    assert rows(store, "SELECT count(*) FROM samples_sealed") == [(0,)]
    cycles(store, 6, 1)  # 60 s: the oldest minute is due
    assert store.write(lambda con: seal(con, SPAN)).rows == 6 * 5


@pytest.mark.parametrize("sort_rows", [750_000, 7], ids=["whole span", "in parts"])
def test_sealing_moves_the_oldest_span_sorted_by_consumer_and_the_view_keeps_every_row(store, sort_rows, monkeypatch):
    monkeypatch.setattr(sealing, "SORT_ROWS", sort_rows)
    cycles(store, 0, 20)  # 0 .. 190 s
    before = every_sample(store)
    sealed = store.write(lambda con: seal(con, SPAN))
    assert sealed.rows == 6 * 5 and sealed.until == T0 + SPAN and sealed.behind
    assert every_sample(store) == before, "no row lost, none twice"
    assert rows(store, "SELECT count(*), min(ts) FROM samples_recent") == [(14 * 5, T0 + SPAN)]
    stored = rows(store, "SELECT s.cid, s.ts, i.account, i.stream, i.consumer FROM samples_sealed s "
                         "JOIN consumer_ids i USING (cid) ORDER BY s.rowid")
    assert [r[:2] for r in stored] == sorted(r[:2] for r in stored), "stored by consumer number, then time"
    assert all(r[2:] == k for r in stored for k in rows(store, "SELECT account, stream, consumer FROM samples_sealed "
                                                               "WHERE cid = ? LIMIT 1", [r[0]]))
    while store.write(lambda con: seal(con, SPAN)).behind:  # catching up, a span a pass
        pass
    assert every_sample(store) == before
    assert rows(store, "SELECT count(*) FROM samples_recent WHERE ts < ?", [T0 + 3 * SPAN]) == [(0,)]


def test_a_consumer_keeps_its_number_and_a_new_one_gets_the_next(store):
    cycles(store, 0, 7, consumers=3)
    store.write(lambda con: seal(con, SPAN))
    first = dict(((a, s, c), i) for a, s, c, i in rows(store, "SELECT * FROM consumer_ids"))
    assert sorted(first.values()) == [0, 1, 2]
    cycles(store, 7, 7, consumers=4)  # a fourth consumer appears
    store.write(lambda con: seal(con, SPAN))
    now = dict(((a, s, c), i) for a, s, c, i in rows(store, "SELECT * FROM consumer_ids"))
    assert {k: now[k] for k in first} == first
    assert sorted(now.values()) == [0, 1, 2, 3]


def test_the_consumer_page_reads_the_same_samples_sealed_or_not(store):
    cycles(store, 0, 40)
    args = ("$G", "S3", "c3", T0, T0 + HOUR)
    assert rows(store, "SELECT count(*) FROM samples WHERE stream = 'S3' AND consumer = 'c3'") == [(40,)]
    unsealed = data.consumer_detail(store, *args).samples
    store.write(lambda con: seal(con, SPAN))
    store.write(lambda con: seal(con, SPAN))
    assert rows(store, "SELECT count(*) FROM samples_sealed") == [(2 * 6 * 5,)]
    sealed = data.consumer_detail(store, *args).samples
    assert len(sealed) == 40 and sealed.equals(unsealed)


def _scans(store: Store, profile: Path, name: str, params: dict) -> dict[str, tuple[int, int]]:
    """Row groups each table scan of a named query read, out of those it had: from DuckDB's profile."""
    def run(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("PRAGMA enable_profiling = 'json'")
        con.execute(f"SET profiling_output = '{profile}'")
        con.execute(sql.query(name), params).fetchall()
        con.execute("PRAGMA disable_profiling")
    store.read(run)
    found: dict[str, tuple[int, int]] = {}
    def walk(node: dict) -> None:
        if node.get("type") == "TABLE_SCAN":
            table = node["extra_info"]["Table"].rsplit(".", 1)[-1]
            found[table] = (node["row_groups_scanned"], node["total_row_groups_to_scan"])
        for child in node.get("children", []) + node.get("operator", []):
            walk(child)
    walk(json.loads(profile.read_text()))
    return found


def test_one_consumers_read_skips_the_other_consumers_sealed_row_groups(store, tmp_path):
    # 2,000 consumers for 5 minutes at 1 s: 600,000 rows, several row groups however stored.
    cycles(store, 0, 300, consumers=2000, every=1.0)
    params = {"account": "$G", "stream": "S2", "consumer": "c1234", "since": T0, "until": T0 + HOUR}
    unsealed = _scans(store, tmp_path / "before.json", "consumer_samples", params)
    assert unsealed["samples_recent"][0] == unsealed["samples_recent"][1] >= 4, "appended by time: every group read"
    store.write(lambda con: seal(con, dt.timedelta(seconds=299)))
    scans = _scans(store, tmp_path / "after.json", "consumer_samples", params)
    read, total = scans["samples_sealed"]
    assert total >= 4 and read == 1, f"read {read} of {total} sealed row groups"
    assert len(store.query("consumer_samples", params)) == 300


def test_retention_deletes_covered_hours_from_the_sealed_and_the_unsealed_rows(store):
    cycles(store, 0, 12, consumers=2)  # 0 .. 110 s of hour 12
    store.write(lambda con: seal(con, SPAN))
    assert rows(store, "SELECT count(*) FROM samples_sealed") == [(12,)]
    covered = [("S0", "c0"), ("S1", "c1")][:1]  # one consumer's hour rolled up whole, the other's not
    store.write(lambda con: con.executemany(
        "INSERT INTO rollups (granularity, bucket, account, stream, consumer, samples) VALUES ('1h', ?, '$G', ?, ?, 12)",
        [[T0, s, c] for s, c in covered]))
    deleted = store.write(lambda con: prune(con, Cutoffs.at(T0 + dt.timedelta(days=30), 86400, 86400 * 90)))
    assert deleted["retention_samples"] == 12
    assert rows(store, "SELECT DISTINCT consumer FROM samples") == [("c1",)]
    assert rows(store, "SELECT count(*) FROM samples") == [(12,)]


def test_the_collector_seals_between_cycles_and_the_page_reads_every_cycle(nats_server, db_path, uid, run):
    stream = f"{uid}_SEAL"
    store = Store(db_path)

    async def scenario() -> None:
        import nats
        from jetwatch.core.jsapi import JetStreamAPI
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.seal.>"])
        for name in ("a", "b"):
            await make_consumer(api, stream, name)
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.2, seal_every=1.0)
        async with collecting(settings) as collector:
            await eventually(lambda: collector.sealed is not None and collector.sealed.rows > 0, timeout=30,
                             message="a sealing pass between cycles")
            await eventually(lambda: rows(store, "SELECT count(*) FROM samples_recent WHERE stream = ?", [stream])[0][0]
                             > 0, message="a cycle after the seal")
        await nc.close()

    run(scenario())
    sealed, recent = rows(store, "SELECT (SELECT count(*) FROM samples_sealed WHERE stream = $s), "
                                 "(SELECT count(*) FROM samples_recent WHERE stream = $s)", {"s": stream})[0]
    assert sealed > 0 and recent > 0
    stamps = [r[0] for r in rows(store, "SELECT ts FROM samples WHERE stream = ? AND consumer = 'a' ORDER BY ts",
                                 [stream])]
    assert len(stamps) == len(set(stamps)) == (sealed + recent) // 2
    page = data.consumer_detail(store, "$G", stream, "a", stamps[0] - SPAN, stamps[-1] + SPAN).samples
    assert list(page["ts"]) == stamps


def test_a_failing_seal_is_reported_and_the_samples_stay_readable_unsealed(nats_server, db_path, uid, run):
    stream = f"{uid}_NOSEAL"
    store = Store(db_path)
    store.migrate()
    # A store the collector cannot seal into: every sealed row would break a constraint.
    store.write(lambda con: con.execute("ALTER TABLE samples_sealed ADD COLUMN guard INTEGER; "
                                        "ALTER TABLE samples_sealed ALTER COLUMN guard SET NOT NULL"))

    async def scenario() -> int:
        import nats
        from jetwatch.core.jsapi import JetStreamAPI
        nc = await nats.connect(nats_server.url)
        await make_stream(JetStreamAPI(nc), stream, [f"{uid.lower()}.noseal.>"])
        await make_consumer(JetStreamAPI(nc), stream, "a")
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.2, seal_every=1.0)
        async with collecting(settings) as collector:
            await eventually(lambda: collector.last_error and "sealing samples failed" in collector.last_error[0],
                             timeout=30, message="the failed seal reported")
            failed_at = collector.cycles
            await eventually(lambda: collector.cycles >= failed_at + 3, message="sampling goes on")
        await nc.close()
        return failed_at

    run(scenario())
    assert rows(store, "SELECT count(*) FROM samples_sealed") == [(0,)]
    kept = rows(store, "SELECT count(*), min(ts), max(ts) FROM samples_recent WHERE stream = ?", [stream])[0]
    assert kept[0] >= 8 and kept[2] - kept[1] > dt.timedelta(seconds=1), "more than a span, all still unsealed"
    page = data.consumer_detail(store, "$G", stream, "a", kept[1], kept[2]).samples
    assert len(page) == kept[0]
