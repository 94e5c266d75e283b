"""Which streams are watched, and what retention removes."""

from __future__ import annotations

import datetime as dt

import pytest

from jetwatch.collectors.filters import NameFilter
from jetwatch.pipeline.load import load
from jetwatch.store.database import Store
from tests.helpers import rows

CASES = [
    ("ORDERS", "c", NameFilter(), True),
    ("JETWATCH_ADVISORIES", "c", NameFilter(), False),
    ("KV_config", "c", NameFilter(), False),
    ("OBJ_files", "c", NameFilter(), False),
    ("KV_config", "c", NameFilter(show_internal=True), True),
    ("ORDERS", "c", NameFilter(include_streams=("ORD*",)), True),
    ("EVENTS", "c", NameFilter(include_streams=("ORD*",)), False),
    ("ORDERS", "c", NameFilter(exclude_streams=("ORDERS",)), False),
    ("ORDERS", "billing", NameFilter(include_consumers=("bill*",)), True),
    ("ORDERS", "audit", NameFilter(include_consumers=("bill*",)), False),
    ("ORDERS", "tmp-1", NameFilter(exclude_consumers=("tmp-*",)), False),
    ("weird-name_1", "c-1", NameFilter(include_streams=("weird-name_1",)), True),
]


@pytest.mark.parametrize("stream,consumer,f,watched", [c for c in CASES], ids=[f"{c[0]}/{c[1]}" for c in CASES])
def test_name_filter(stream, consumer, f, watched):
    assert (f.stream_ok(stream) and f.consumer_ok(consumer)) is watched


def test_retention_removes_raw_samples_only_once_an_hourly_rollup_covers_them(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    old = [now - dt.timedelta(days=d) for d in (10, 9, 8)]

    def seed(con):
        for ts in old:
            con.execute("INSERT INTO samples_recent (ts, account, stream, consumer) VALUES (?, '$G', 'S', 'C')", [ts])
        con.execute("INSERT INTO advisories VALUES ('a1', ?, ?, 'nak', 's', '$G', 'S', 'C', NULL, NULL, NULL, '{}')",
                    [now - dt.timedelta(days=100), now])
        con.execute("INSERT INTO audit (ts, actor, origin, action, account, stream, consumer, group_name, parameters, outcome, reply) VALUES (?, 'ana', 'cli', 'unpin', '$G', 'S', 'C', 'jobs', '{}', 'ok', '{}')",
                    [now - dt.timedelta(days=400)])
        for aid, days in (("a1", 100), ("a2", 1)):  # a pin's confirmation ages out with its advisory
            con.execute("INSERT INTO pin_confirmations VALUES (?, 'confirmed', ?)", [aid, now - dt.timedelta(days=days)])
        for days in (100, 1):  # verdict transitions age out with the events
            con.execute("INSERT INTO verdict_changes VALUES (?, '$G', 'S', 'C', 'OK', 'STALLED', 'r')",
                        [now - dt.timedelta(days=days)])

    store.write(seed)
    empty = tmp_path / "no-output"
    retention = {"samples": now - dt.timedelta(days=7), "events": now - dt.timedelta(days=90)}
    load(store, empty, now - dt.timedelta(hours=1), now, retention)
    assert rows(store, "SELECT count(*) FROM samples") == [(3,)], "no rollup yet: nothing may go"
    assert rows(store, "SELECT count(*) FROM advisories") == [(0,)]
    assert rows(store, "SELECT advisory_id FROM pin_confirmations") == [("a2",)]
    assert rows(store, "SELECT count(*) FROM verdict_changes") == [(1,)]

    # Coverage, not the newest bucket: the hours of old[0] and old[1] are rolled up (one sample
    # each, as many as the store holds); old[2]'s hour is not, so its sample stays.
    store.write(lambda con: con.executemany(
        "INSERT INTO rollups (granularity, bucket, account, stream, consumer, samples) VALUES ('1h', ?, '$G', 'S', 'C', 1)",
        [[old[0]], [old[1]]]))
    load(store, empty, now - dt.timedelta(hours=1), now, retention)
    assert [r[0] for r in rows(store, "SELECT ts FROM samples ORDER BY ts")] == [old[2]]
    assert rows(store, "SELECT count(*) FROM audit") == [(1,)], "audit rows are kept longest"
