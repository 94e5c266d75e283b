"""The Consumer page reads only the one consumer: its live state and pin history come from
queries filtered on (account, stream, consumer), and give what the page got before (every
consumer's latest row and every pin event, filtered in pandas) on a real store of many consumers."""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pytest

from jetwatch import sql
from jetwatch.dashboard import data
from jetwatch.store import writes
from jetwatch.store.database import Store

CONSUMERS = 600
NOW = dt.datetime(2026, 11, 23, 8, 0, tzinfo=dt.UTC)


def _samples(at: dt.datetime, n: int) -> dict[str, list]:
    none = [None] * n
    return {"ts": [at.isoformat()] * n, "server": ["s"] * n, "cluster": none, "domain": none,
            "account": ["$G"] * n, "stream": [f"S{i // 100}" for i in range(n)],
            "consumer": [f"c{i}" for i in range(n)], "created": none,
            "num_pending": [i % 7 for i in range(n)], "num_ack_pending": [i % 3 for i in range(n)],
            "num_waiting": [1] * n, "num_redelivered": [0] * n, "delivered_consumer_seq": [i for i in range(n)],
            "delivered_stream_seq": [i for i in range(n)], "delivered_last_active": none,
            "ack_floor_consumer_seq": [i for i in range(n)], "ack_floor_stream_seq": [i for i in range(n)],
            "ack_floor_last_active": none, "paused": [False] * n, "pause_until": none,
            "pin_group": ["jobs" if i % 5 == 0 else None for i in range(n)],
            "pinned_id": [f"P{i}" if i % 5 == 0 else None for i in range(n)], "pinned_ts": none, "leader": none}


def _config(i: int, at: dt.datetime, max_ack: int) -> dict:
    return {"ts": at.isoformat(), "account": "$G", "stream": f"S{i // 100}", "consumer": f"c{i}", "created": None,
            "config_hash": f"h{i}-{max_ack}", "is_pull": True, "filtered": False, "ack_policy": "explicit",
            "max_waiting": 512, "max_ack_pending": max_ack, "ack_wait_ns": 30 * 10**9, "max_deliver": -1,
            "priority_policy": "pinned_client" if i % 5 == 0 else None,
            "priority_groups": ["jobs"] if i % 5 == 0 else None, "priority_timeout_ns": None, "config_json": "{}"}


def _advisory(n: int, i: int, at: dt.datetime, kind: str, pinned_id: str | None = None) -> dict:
    return {"id": f"a{n}", "ts": at.isoformat(), "received_at": at.isoformat(), "kind": kind,
            "subject": f"$JS.EVENT.ADVISORY.CONSUMER.{kind}", "account": "$G", "stream": f"S{i // 100}",
            "consumer": f"c{i}", "group_name": "jobs", "pinned_id": pinned_id,
            "reason": "timeout" if kind == "consumer_group_unpinned" else None, "raw": json.dumps({"i": i})}


@pytest.fixture
def many(tmp_path) -> Store:
    """Many consumers, two config versions each, and pin stories for every fifth one that start
    before the page's range, cross it, and end inside it."""
    store = Store(str(tmp_path / "many.duckdb"))
    store.migrate()
    advisories, n = [], 0
    for i in range(0, CONSUMERS, 5):
        for k, minutes in enumerate((-130, -90, -70, -30, -10)):
            n += 1
            kind = "consumer_group_pinned" if k % 2 == 0 else "consumer_group_unpinned"
            advisories.append(_advisory(n, i, NOW + dt.timedelta(minutes=minutes + i % 7), kind,
                                        f"P{i}-{k}" if kind.endswith("_pinned") else None))

    def tx(con) -> None:
        writes.write_configs(con, [_config(i, NOW - dt.timedelta(hours=2), 100) for i in range(CONSUMERS)])
        writes.write_configs(con, [_config(i, NOW - dt.timedelta(hours=1), 200 + i) for i in range(0, CONSUMERS, 3)])
        for cycle in range(3):
            writes.write_samples(con, ["$G"], _samples(NOW - dt.timedelta(seconds=10 * (3 - cycle)), CONSUMERS))
        writes.write_advisories(con, advisories)

    store.write(tx)
    return store


def _before(store: Store, account: str, stream: str, consumer: str, since, until) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What the page read before: every consumer's latest row and every pin event, then pandas."""
    pins = store.query("pin_events_range", {"since": since, "until": until, **data.EVERY_CONSUMER})
    latest = store.query("fleet_latest")
    def mine(f: pd.DataFrame) -> pd.DataFrame:
        return f[(f["account"] == account) & (f["stream"] == stream) & (f["consumer"] == consumer)]

    return mine(pins).reset_index(drop=True), mine(latest).reset_index(drop=True)


@pytest.mark.parametrize("i", [0, 5, 3, 250, 595, 599])
def test_consumer_detail_reads_the_same_pins_and_live_state_as_filtering_the_whole_fleet(many, i):
    since, until = NOW - dt.timedelta(hours=1), NOW
    pins, latest = _before(many, "$G", f"S{i // 100}", f"c{i}", since, until)
    detail = data.consumer_detail(many, "$G", f"S{i // 100}", f"c{i}", since, until)
    assert len(latest) == 1
    pd.testing.assert_frame_equal(detail.latest[latest.columns].reset_index(drop=True), latest, check_dtype=False)
    pd.testing.assert_frame_equal(detail.pins.reset_index(drop=True), pins, check_dtype=False)
    if i % 5 == 0:  # a pin from before the range (a session, not an event of it), an unpin and a pin inside it
        assert list(pins["event"]) == ["unpinned", "pinned"]
        sessions = detail.sessions
        assert list(sessions["end_reason"]) == ["timeout", "still pinned"]
        assert sessions["start_ts"].iloc[0] < pd.Timestamp(since) < sessions["end_ts"].iloc[0]
    else:
        assert pins.empty and detail.sessions.empty


def _rows_scanned(store: Store, name: str, params: dict) -> dict[str, int]:
    """Rows each table scan of the named query let through (its filters pushed into the scan),
    from DuckDB's own analysed plan."""
    def profile(con) -> dict[str, int]:
        plan = con.execute("EXPLAIN (ANALYZE, FORMAT json) " + sql.query(name), params).fetchall()
        tree = json.loads(plan[0][1])
        scans: dict[str, int] = {}

        def walk(node) -> None:
            extra = node.get("extra_info") or {}
            table = extra.get("Table") if isinstance(extra, dict) else None
            if table and node.get("type") == "TABLE_SCAN":
                table = table.rsplit(".", 1)[-1]
                scans[table] = scans.get(table, 0) + int(node.get("intermediate_rows", 0))
            for child in node.get("children", []):
                walk(child)

        for root in tree["operator"]:
            walk(root)
        return scans
    return store.read(profile)


def test_the_consumer_pages_queries_scan_only_the_one_consumers_rows(many):
    ident = {"account": "$G", "stream": "S2", "consumer": "c250"}
    latest = _rows_scanned(many, "consumer_latest_one", ident)
    assert latest.get("samples_recent") == 1, latest  # the live state: the current cycle's row of this consumer
    assert latest.get("consumer_configs") == 2, latest  # its two config versions, no other consumer's
    pins = _rows_scanned(many, "pin_events_range",
                         {**ident, "since": NOW - dt.timedelta(hours=1), "until": NOW})
    assert pins.get("advisories", 0) <= 5, pins  # its own five advisories at most
    whole = _rows_scanned(many, "fleet_latest", {})
    assert whole.get("samples_recent") == CONSUMERS, whole  # the independent check: the Fleet's read scans all


def test_every_dropped_message_is_counted_by_cause_though_only_the_newest_are_listed(many):
    """260 messages dropped at max_deliver and 10 removed by the stream's limits: the page lists the
    newest DROPPED_SHOWN and counts all 270 by cause (not "Dropped: 200" beside "260 reached
    max_deliver")."""
    from jetwatch.dashboard import dropped
    from jetwatch.health import drops

    rows = []
    for n in range(270):
        removed = n >= 260
        at = NOW - dt.timedelta(minutes=30) + dt.timedelta(seconds=n)
        rows.append({**_advisory(10_000 + n, 7, at, "terminated" if removed else "max_deliver"),
                     "reason": drops.REMOVED_REASON if removed else None,
                     "raw": json.dumps({"stream_seq": 1000 + n, "consumer_seq": 2000 + n, "deliveries": 5})})
    many.write(lambda con: writes.write_advisories(con, rows))
    detail = data.consumer_detail(many, "$G", "S0", "c7", NOW - dt.timedelta(hours=1), NOW)
    assert len(detail.dropped) == data.DROPPED_SHOWN < 270
    assert dropped.causes(detail.dropped_counts) == {drops.MAX_DELIVER: 260, drops.REMOVED: 10}
    assert pd.Timestamp(detail.dropped_counts["oldest"].min()) == pd.Timestamp(NOW - dt.timedelta(minutes=30))
