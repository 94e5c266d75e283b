"""Sealing: the oldest span of raw samples stored again ordered by consumer, readable throughout."""

from __future__ import annotations

import datetime as dt
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from jetwatch import sql
from jetwatch.collectors.consumer_state import SAMPLE_COLUMNS
from jetwatch.core.clock import rfc3339
from jetwatch.dashboard import data
from jetwatch.store import sealing, writes
from jetwatch.store.database import ROW_GROUP_ROWS, Store, StoreError
from jetwatch.store.retention import Cutoffs, prune
from jetwatch.store.sealing import seal_pass
from tests.helpers import (
    collecting,
    collector_settings,
    eventually,
    make_consumer,
    make_stream,
    one_consumer_stream,
    rows,
)

T0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
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
    sealed = seal_pass(store, SPAN)
    assert (sealed.rows, sealed.until, sealed.next_in) == (0, None, dt.timedelta(seconds=10))
    assert rows(store, "SELECT count(*) FROM samples_sealed") == [(0,)]
    cycles(store, 6, 1)  # 60 s: the oldest minute is due
    assert seal_pass(store, SPAN).rows == 6 * 5


@pytest.mark.parametrize("sort_rows, parts", [(750_000, 1), (7, 5)], ids=["whole span", "in parts"])
def test_sealing_moves_the_oldest_span_sorted_by_consumer_and_the_view_keeps_every_row(store, sort_rows, parts,
                                                                                       monkeypatch):
    monkeypatch.setattr(sealing, "SORT_ROWS", sort_rows)
    cuts: list[list[int]] = []
    bounds = sealing._bounds
    monkeypatch.setattr(sealing, "_bounds", lambda *a: cuts.append(bounds(*a)) or cuts[-1])
    cycles(store, 0, 20)  # 0 .. 190 s
    before = every_sample(store)
    sealed = seal_pass(store, SPAN)
    assert sealed.rows == 6 * 5 and sealed.until == T0 + SPAN and sealed.behind
    assert every_sample(store) == before, "no row lost, none twice"
    assert rows(store, "SELECT count(*), min(ts) FROM samples_recent") == [(14 * 5, T0 + SPAN)]
    stored = rows(store, "SELECT s.cid, s.ts, i.account, i.stream, i.consumer FROM samples_sealed s "
                         "JOIN consumer_ids i USING (cid) ORDER BY s.rowid")
    assert [r[:2] for r in stored] == sorted(r[:2] for r in stored), "stored by consumer number, then time"
    assert len(cuts[0]) - 1 == parts, cuts  # 30 rows of 5 consumers in parts of at most 7: one consumer a part
    assert rows(store, "SELECT count(*) FROM samples_sealed s JOIN consumer_ids i USING (cid) "
                       "WHERE (s.account, s.stream, s.consumer) = (i.account, i.stream, i.consumer)") == [(len(stored),)]
    while seal_pass(store, SPAN).behind:  # catching up, a span a pass
        pass
    assert every_sample(store) == before
    assert rows(store, "SELECT count(*) FROM samples_recent WHERE ts < ?", [T0 + 3 * SPAN]) == [(0,)]


def test_a_consumer_keeps_its_number_and_a_new_one_gets_the_next(store):
    cycles(store, 0, 7, consumers=3)
    seal_pass(store, SPAN)
    first = dict(((a, s, c), i) for a, s, c, i in rows(store, "SELECT * FROM consumer_ids"))
    assert sorted(first.values()) == [0, 1, 2]
    cycles(store, 7, 7, consumers=4)  # a fourth consumer appears
    seal_pass(store, SPAN)
    now = dict(((a, s, c), i) for a, s, c, i in rows(store, "SELECT * FROM consumer_ids"))
    assert {k: now[k] for k in first} == first
    assert sorted(now.values()) == [0, 1, 2, 3]


def test_the_consumer_page_reads_the_same_samples_sealed_or_not(store):
    cycles(store, 0, 40)
    args = ("$G", "S3", "c3", T0, T0 + HOUR)
    assert rows(store, "SELECT count(*) FROM samples WHERE stream = 'S3' AND consumer = 'c3'") == [(40,)]
    unsealed = data.consumer_detail(store, *args).samples
    seal_pass(store, SPAN)
    seal_pass(store, SPAN)
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
    seal_pass(store, dt.timedelta(seconds=299))
    scans = _scans(store, tmp_path / "after.json", "consumer_samples", params)
    read, total = scans["samples_sealed"]
    assert total >= 4 and read == 1, f"read {read} of {total} sealed row groups"
    assert len(store.query("consumer_samples", params)) == 300


def test_retention_deletes_covered_hours_from_the_sealed_and_the_unsealed_rows(store):
    cycles(store, 0, 12, consumers=2)  # 0 .. 110 s of hour 12
    seal_pass(store, SPAN)
    assert rows(store, "SELECT count(*) FROM samples_sealed") == [(12,)]
    covered = [("S0", "c0"), ("S1", "c1")][:1]  # one consumer's hour rolled up whole, the other's not
    store.write(lambda con: con.executemany(
        "INSERT INTO rollups (granularity, bucket, account, stream, consumer, samples) VALUES ('1h', ?, '$G', ?, ?, 12)",
        [[T0, s, c] for s, c in covered]))
    deleted = store.write(lambda con: prune(con, Cutoffs.at(T0 + dt.timedelta(days=30), 86400, 86400 * 90)))
    assert deleted["retention_samples"] == 12
    assert rows(store, "SELECT DISTINCT consumer FROM samples") == [("c1",)]
    assert rows(store, "SELECT count(*) FROM samples") == [(12,)]


def test_retention_forgets_the_number_of_a_consumer_whose_last_sealed_sample_it_deleted(store):
    """Ephemeral consumers come and go by the thousand: their numbers would pile up for ever, and
    every sealing pass joins its span against all of them. A consumer seen again is numbered anew."""
    cycles(store, 0, 12, consumers=2)
    seal_pass(store, SPAN)
    store.write(lambda con: con.execute(
        "INSERT INTO rollups (granularity, bucket, account, stream, consumer, samples) VALUES ('1h', ?, '$G', 'S0', 'c0', 12)",
        [T0]))
    deleted = store.write(lambda con: prune(con, Cutoffs.at(T0 + dt.timedelta(days=30), 86400, 86400 * 90)))
    assert deleted["retention_consumer_ids"] == 1
    assert rows(store, "SELECT stream, consumer FROM consumer_ids") == [("S1", "c1")]
    cycles(store, 360, 12, consumers=2)  # an hour later both are back; their first minute is sealed
    while seal_pass(store, SPAN).behind:
        pass
    assert len(rows(store, "SELECT DISTINCT cid FROM consumer_ids")) == 2
    later = {"account": "$G", "stream": "S0", "consumer": "c0", "since": T0 + HOUR, "until": T0 + 2 * HOUR}
    assert len(store.query("consumer_samples", later)) == 12


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
        await one_consumer_stream(nats_server.url, stream, f"{uid.lower()}.noseal.>", "a")
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.2, seal_every=1.0)
        async with collecting(settings) as collector:
            await eventually(lambda: collector.last_error and "sealing samples failed" in collector.last_error[0],
                             timeout=30, message="the failed seal reported")
            failed_at = collector.cycles
            await eventually(lambda: collector.cycles >= failed_at + 3, message="sampling goes on")
        return failed_at

    run(scenario())
    assert rows(store, "SELECT count(*) FROM samples_sealed") == [(0,)]
    kept = rows(store, "SELECT count(*), min(ts), max(ts) FROM samples_recent WHERE stream = ?", [stream])[0]
    assert kept[0] >= 8 and kept[2] - kept[1] > dt.timedelta(seconds=1), "more than a span, all still unsealed"
    page = data.consumer_detail(store, "$G", stream, "a", kept[1], kept[2]).samples
    assert len(page) == kept[0]


def test_a_sample_at_the_cut_and_a_late_sample_before_it_are_sealed_by_a_later_pass(store):
    cycles(store, 0, 7)  # 0 .. 60 s
    assert seal_pass(store, SPAN).until == T0 + SPAN
    assert rows(store, "SELECT count(*), min(ts) FROM samples_recent") == [(5, T0 + SPAN)], "the cut is exclusive"
    late = {"ts": T0 + dt.timedelta(seconds=5), "n": 999}
    store.write(lambda con: con.execute("INSERT INTO samples_recent (ts, account, stream, consumer, num_pending) "
                                        "VALUES ($ts, '$G', 'S1', 'c1', $n)", late))
    cycles(store, 7, 1)  # 70 s: the unsealed rows now span more than a minute
    assert seal_pass(store, SPAN).rows == 1 + 5, "the late sample, then the row at the old cut"
    assert rows(store, "SELECT count(*) FROM samples_sealed WHERE num_pending = 999") == [(1,)]
    assert rows(store, "SELECT count(*) FROM samples") == [(8 * 5 + 1,)]


def test_a_pass_that_would_lose_a_consumer_from_the_view_moves_nothing(store, monkeypatch):
    cycles(store, 0, 8)
    before = every_sample(store)
    query = sql.query
    # Fault injected: the consumers of the span are given no numbers, so none of their rows can be copied.
    monkeypatch.setattr(sql, "query", lambda name: "SELECT $until IS NULL" if name == "seal_consumer_ids" else query(name))
    with pytest.raises(StoreError, match=r"copied 0 rows but would remove 30: nothing was moved"):
        seal_pass(store, SPAN)
    monkeypatch.undo()
    assert every_sample(store) == before
    assert rows(store, "SELECT (SELECT count(*) FROM samples_sealed), (SELECT count(*) FROM consumer_ids)") == [(0, 0)]


def test_sealed_samples_are_held_to_the_same_constraints_as_unsealed_ones(store):
    store.migrate()
    def columns(table: str) -> dict[str, tuple]:
        return {name: (kind, null, default) for name, kind, null, _, default, _ in rows(store, f"DESCRIBE {table}")}
    recent, sealed = columns("samples_recent"), columns("samples_sealed")
    assert sealed.pop("cid") == ("UINTEGER", "NO", None)
    recent.pop("sampled_at"), recent.pop("cycle")  # how the store keeps them, not samples' facts
    assert sealed == recent
    with pytest.raises(duckdb.ConstraintException):
        store.write(lambda con: con.execute("INSERT INTO samples_sealed (cid, account, stream, consumer) "
                                            "VALUES (0, '$G', 'S', 'c')"))


def test_the_held_live_rows_have_every_column_of_a_sample_so_a_migration_cannot_forget_them(store):
    """current_held was made from consumer_current by CREATE TABLE AS: a later migration that adds a
    sample column must add it there too, or hold_current fails the first cycle that keeps a stream."""
    store.migrate()
    def types(table: str) -> dict[str, str]:
        return {name: kind for name, kind, *_ in rows(store, f"DESCRIBE {table}")}
    recent = types("samples_recent")
    recent.pop("sampled_at"), recent.pop("cycle")
    assert types("current_held") == recent


def _collector_cycle(at: dt.datetime, consumers: int, ahead: dt.timedelta) -> dict[str, list[Any]]:
    """One cycle as the collector writes it; the last consumer's server clock runs `ahead`."""
    cols: dict[str, list[Any]] = {c: [None] * consumers for c in SAMPLE_COLUMNS}
    cols.update(ts=[rfc3339(at + (ahead if i == consumers - 1 else dt.timedelta(0))) for i in range(consumers)],
                account=["$G"] * consumers, stream=["S"] * consumers, consumer=[f"c{i}" for i in range(consumers)],
                paused=[False] * consumers)
    return cols


@pytest.mark.parametrize("skew", [0, 180, -180], ids=["clocks agree", "a server 3 min ahead", "a server 3 min behind"])
def test_a_server_clock_minutes_off_changes_neither_when_nor_how_much_is_sealed(store, skew):
    """The runner's cadence over 5 minutes of 10 s cycles of 5 consumers, with 1-minute spans: a pass
    each minute of the collector's clock, a minute of cycles each, whatever one server's clock says."""
    passes, seal_at = [], T0
    for k in range(30):
        at = T0 + k * dt.timedelta(seconds=10)
        cycle = _collector_cycle(at, 5, dt.timedelta(seconds=skew))
        store.write(lambda con: writes.write_samples(con, ["$G"], cycle, (), at))
        if at >= seal_at:
            sealed = seal_pass(store, SPAN)
            seal_at = at + sealed.next_in
            passes.append(sealed.rows)
    assert [n for n in passes if n] == [6 * 5] * 4, passes
    assert rows(store, "SELECT count(*), count(*) FILTER (consumer = 'c4') FROM samples") == [(150, 30)]


HOLD = ("import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=True); print('held', flush=True); "
        "sys.stdin.read(); c.close()")


def test_a_store_that_refused_a_cycle_is_not_asked_to_seal_as_well(nats_server, db_path, uid, run, caplog):
    """While another process holds the file, each cycle waits out --lock-timeout once, for its own
    write, and the error shown is that one, not a sealing pass that waited as long again."""
    stream = f"{uid}_HELDSEAL"

    async def scenario() -> None:
        await one_consumer_stream(nats_server.url, stream, f"{uid.lower()}.heldseal.>", "a")
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.2, seal_every=1.0,
                                      lock_timeout=0.5)
        async with collecting(settings):
            holder = subprocess.Popen([sys.executable, "-c", HOLD, db_path], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE)
            try:
                assert holder.stdout.readline() == b"held\n"
                await eventually(lambda: sum("sampling failed" in r.getMessage() for r in caplog.records) >= 4,
                                 timeout=30, message="cycles refused by the held store")
            finally:
                holder.stdin.close()
                holder.wait(10)

    with caplog.at_level(logging.ERROR):
        run(scenario())
    assert any("locked" in r.getMessage() for r in caplog.records)
    assert not [r.getMessage() for r in caplog.records if "sealing samples failed" in r.getMessage()]


def test_an_upgraded_store_catches_up_on_its_unsealed_spans_between_cycles_not_one_a_cycle(nats_server, db_path,
                                                                                        uid, run):
    stream = f"{uid}_CATCHUP"
    store = Store(db_path)
    cycles(store, 0, 400, every=0.1)  # 40 s of rows written before sealing existed: 40 one-second spans

    # One a cycle would take 40 cycles. The catch-up fills the idle time before the next cycle, so
    # with an interval far longer than 40 passes take, even on a loaded machine (a pass is tens of
    # milliseconds), every span is sealed before the second cycle: a count that does not depend on
    # how fast the machine is, as a count of cycles at a 2 s interval did.
    interval = 60.0

    async def scenario() -> int:
        await one_consumer_stream(nats_server.url, stream, f"{uid.lower()}.catchup.>", "a")
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=interval, seal_every=1.0)
        async with collecting(settings) as collector:
            await eventually(lambda: rows(store, "SELECT count(*) FROM samples_recent WHERE ts < ?",
                                          [T0 + HOUR])[0][0] == 0, timeout=interval - 10,
                             message="the old spans sealed in the idle time after the first cycle")
            cycles_taken = collector.cycles
        return cycles_taken

    assert run(scenario()) == 1, "40 spans sealed in the idle time after one cycle, not one a cycle"
    assert rows(store, "SELECT count(*) FROM samples WHERE ts < ?", [T0 + HOUR]) == [(400 * 5,)]


def _live(store: Store) -> list[tuple]:
    return rows(store, "SELECT account, consumer, ts FROM consumer_current ORDER BY account, consumer")


def test_an_account_not_sampled_for_longer_than_a_span_keeps_its_last_state_while_its_rows_are_sealed(store):
    """Its last cycle's rows are held when a cycle leaves the account out; sealing then moves the
    originals like any other rows, and the live state never loses the account."""
    both = {**_collector_cycle(T0, 2, dt.timedelta(0)), "account": ["A", "B"]}
    store.write(lambda con: writes.write_samples(con, ["A", "B"], both, (), T0))
    last_b = rows(store, "SELECT account, consumer, ts FROM consumer_current WHERE account = 'B'")
    for k in range(1, 19):  # three minutes of cycles that reach only account A
        at = T0 + k * dt.timedelta(seconds=10)
        only_a = {**_collector_cycle(at, 2, dt.timedelta(0)), "account": ["A", "A"]}
        store.write(lambda con: writes.write_samples(con, ["A"], only_a, (), at))
        seal_pass(store, SPAN)
        assert [r for r in _live(store) if r[0] == "B"] == last_b
        assert [r[2] for r in _live(store) if r[0] == "A"] == [at, at], "A's state is its latest cycle"
    assert rows(store, "SELECT count(*) FROM samples_sealed WHERE account = 'B'") == [(1,)], "B's sample sealed"
    assert rows(store, "SELECT count(*) FROM samples") == [(2 + 18 * 2,)]


def test_sealing_and_retention_leave_the_current_cycles_rows_however_old_their_times(store):
    """A collector clock that jumped back makes the current cycle the oldest by sampled_at; a server
    clock 30 days behind makes its samples look old enough for retention. Both leave it live."""
    for k in range(8):
        at = T0 + k * dt.timedelta(seconds=10)
        store.write(lambda con: writes.write_samples(con, ["$G"], _collector_cycle(at, 3, dt.timedelta(0)), (), at))
    behind = T0 - dt.timedelta(days=30)
    jumped = _collector_cycle(behind, 3, dt.timedelta(0))
    store.write(lambda con: writes.write_samples(con, ["$G"], jumped, (), T0 + dt.timedelta(seconds=5)))
    live = _live(store)
    assert [r[2] for r in live] == [behind] * 3
    assert seal_pass(store, SPAN).rows == 6 * 3, "the six cycles before the cut, not the current"
    assert _live(store) == live
    store.write(lambda con: con.executemany(
        "INSERT INTO rollups (granularity, bucket, account, stream, consumer, samples) VALUES ('1h', ?, '$G', 'S', ?, 1)",
        [[behind.replace(minute=0), f"c{i}"] for i in range(3)]))
    deleted = store.write(lambda con: prune(con, Cutoffs.at(T0, 86400, 86400 * 90)))
    assert deleted["retention_samples"] == 0 and _live(store) == live
    assert rows(store, "SELECT count(*) FROM samples") == [(9 * 3,)]


def test_a_collector_clock_stepped_back_costs_no_pass_that_moves_nothing(store):
    """The current cycle, which sealing never moves, is then the oldest by sampled_at: a pass judged
    by it found a span due, moved nothing and said it was behind, and the runner's catch-up filled
    the idle time between cycles with such passes, each holding the file against readers."""
    for k in range(12):
        at = T0 + k * dt.timedelta(seconds=10)
        store.write(lambda con: writes.write_samples(con, ["$G"], _collector_cycle(at, 3, dt.timedelta(0)), (), at))
    while seal_pass(store, SPAN).behind:
        pass
    stepped = T0 - dt.timedelta(minutes=3)
    store.write(lambda con: writes.write_samples(con, ["$G"], _collector_cycle(stepped, 3, dt.timedelta(0)), (),
                                                 stepped))
    passes = [seal_pass(store, SPAN) for _ in range(3)]
    assert [(p.rows, p.behind) for p in passes if p.rows == 0 and p.behind] == []


def test_sealed_samples_are_stored_in_row_groups_of_duckdbs_size_not_the_collectors(store):
    """The collector appends in small row groups (fast to write); a sealing pass stores what it
    moves in DuckDB's own, so a read of one consumer checks 7.5 times fewer zone maps."""
    cycles(store, 0, 7, consumers=5_000)  # 35,000 samples, 30,000 of them due
    assert seal_pass(store, SPAN).rows == 6 * 5_000
    sizes = {table: [n for (n,) in rows(store, f"""
        SELECT sum(count) FROM pragma_storage_info('{table}')
        WHERE column_name = 'num_pending' AND segment_type = 'BIGINT' GROUP BY row_group_id""")]
        for table in ("samples_recent", "samples_sealed")}
    assert sizes["samples_sealed"] == [30_000]
    assert max(sizes["samples_recent"]) <= ROW_GROUP_ROWS
