"""The collector's write path (store/writes.py write_samples) on real DuckDB files: the samples
stored are the collector's columns as DuckDB casts them, and consumer_current after each write is
what the rule says (a sampled account's rows replaced by its cycle; a stream whose listing failed,
a rejected entry and an account not sampled keep their last state), in this process and as
another process reads it."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from typing import Any

import duckdb
import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jetwatch.collectors.consumer_state import SAMPLE_COLUMNS
from jetwatch.core.clock import parse_rfc3339
from jetwatch.store import writes
from jetwatch.store.database import ROW_GROUP_ROWS, Store
from tests.helpers import EDGES, rows, server_time

TIMES = ("ts", "created", "delivered_last_active", "ack_floor_last_active", "pause_until", "pinned_ts")


def _cycle(keys: list[tuple[str, str, str]], at: dt.datetime, pending: int) -> dict[str, list[Any]]:
    """One cycle's samples as the collector hands them over: times as the server's strings."""
    n = len(keys)
    cols: dict[str, list[Any]] = {c: [None] * n for c in SAMPLE_COLUMNS}
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"  # nanoseconds, as Go writes them
    cols.update(ts=[stamp] * n, account=[k[0] for k in keys], stream=[k[1] for k in keys],
                consumer=[k[2] for k in keys], server=["n1"] * n, num_pending=[pending + i for i in range(n)],
                num_ack_pending=[1] * n, num_waiting=[0] * n, num_redelivered=[0] * n,
                delivered_consumer_seq=[pending] * n, delivered_stream_seq=[pending] * n,
                ack_floor_consumer_seq=[pending] * n, ack_floor_stream_seq=[pending] * n, paused=[False] * n,
                created=["2026-11-20T10:00:00.987654321+01:00"] * n, delivered_last_active=[stamp] * n,
                ack_floor_last_active=[None if i % 2 else stamp for i in range(n)], pinned_id=["p"] * n,
                pinned_ts=["2026-11-21T09:00:00Z"] * n, oldest_unacked_age_seconds=[1.5] * n,
                oldest_unacked_age_kind=["exact"] * n)
    return cols


def test_the_samples_stored_are_the_collectors_columns_with_the_times_parse_rfc3339_reads(db_path):
    """The write path against an independent one: each value as the collector read it, the times
    by parse_rfc3339 (nanoseconds cut to the microsecond the store keeps)."""
    store = Store(db_path)
    cycle = _cycle([("A", "S", f"c{i}") for i in range(5)], dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC), 7)
    store.write(lambda con: writes.write_samples(con, ["A"], cycle))
    expected = sorted(tuple(parse_rfc3339(v) if c in TIMES and v is not None else v for c, v in zip(SAMPLE_COLUMNS, row))
                      for row in zip(*(cycle[c] for c in SAMPLE_COLUMNS)))
    for table in ("samples", "consumer_current"):
        assert rows(store, f"SELECT {', '.join(SAMPLE_COLUMNS)} FROM {table} ORDER BY consumer") == expected


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(server_time(), st.sampled_from(EDGES), st.none()), min_size=1, max_size=8), st.booleans())
@example(["1969-12-31T23:59:59.999999999Z", "1960-06-01T00:00:00.0000005Z", "2026-11-22T12:00:00Z"], False)
@example(["0001-01-01T00:00:00Z", "2026-11-22T12:00:00.123456789Z"], False)
@example(["2300-01-01T00:00:00.5Z", None], False)
def test_every_time_column_stores_what_parse_rfc3339_reads(tmp_path_factory, times, in_range):
    """Times are parsed in Arrow where it can (nanoseconds, 1970 to 2262) and by the store's cast
    otherwise, a column at a time; either way each stored time is parse_rfc3339's reading (the
    fraction cut to microseconds), compared with Python's parser, not with either of those."""
    if in_range:  # a column Arrow takes whole
        times = [t for t in times if t is None or dt.datetime(1970, 1, 2, tzinfo=dt.UTC)
                 < parse_rfc3339(t) < dt.datetime(2262, 1, 1, tzinfo=dt.UTC)] or [None]
    db_path = str(tmp_path_factory.mktemp("times") / "w.duckdb")
    store = Store(db_path)
    keys = [("A", "S", f"c{i}") for i in range(len(times))]
    cycle = _cycle(keys, dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC), 1)
    cycle["created"] = times
    cycle["ts"] = [t or "2026-11-22T12:00:00Z" for t in times]  # never null in a sample
    store.write(lambda con: writes.write_samples(con, ["A"], cycle))
    stored = rows(store, "SELECT ts, created FROM samples ORDER BY consumer")
    assert stored == [(parse_rfc3339(t or "2026-11-22T12:00:00Z"), t and parse_rfc3339(t))
                      for _, t in sorted(zip([k[2] for k in keys], times))]


def _column(values: Any, n: int) -> Any:
    """A column as a cycle may hold it: no value at all, one value throughout, or any mix."""
    return st.one_of(st.just([None] * n), values.map(lambda v: [v] * n),
                     st.lists(st.one_of(st.none(), values), min_size=n, max_size=n))


_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
SHAPED = {"cluster": _TEXT, "domain": _TEXT, "server": _TEXT, "pin_group": _TEXT, "num_pending": _INT64,
          "num_waiting": _INT64, "delivered_stream_seq": _INT64, "oldest_unacked_age_seconds": st.floats(-1e9, 1e9)}


@st.composite
def shaped_cycle(draw: Any) -> tuple[dict[str, list[Any]], list[str]]:
    n = draw(st.integers(2, 6))
    accounts = draw(st.one_of(_TEXT.map(lambda a: [a] * n), st.lists(_TEXT, min_size=n, max_size=n)))
    return {c: draw(_column(v, n)) for c, v in SHAPED.items()}, accounts


@settings(max_examples=60, deadline=None)
@given(shaped_cycle())
def test_every_column_stores_the_values_handed_over_whatever_their_shape(tmp_path_factory, drawn):
    """Columns without a value, with one value throughout or with any mix take different ways into
    Arrow (store/writes.py); each stored value is the one handed over, compared with the Python values."""
    shaped, accounts = drawn
    keys = [(account, "S", f"c{i}") for i, account in enumerate(accounts)]
    cycle = _cycle(keys, dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC), 1)
    cycle.update(shaped)
    store = Store(str(tmp_path_factory.mktemp("shapes") / "w.duckdb"))
    store.write(lambda con: writes.write_samples(con, sorted(set(accounts)), cycle))
    names = ["consumer", "account", *SHAPED]
    assert rows(store, f"SELECT {', '.join(names)} FROM samples ORDER BY consumer") == sorted(
        zip(*(cycle[c] for c in names)))


READER = """
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print(json.dumps(con.execute("SELECT account, stream, consumer, num_pending FROM consumer_current").fetchall()))
"""


def read_current_elsewhere(db_path: str) -> dict[tuple[str, str, str], int]:
    """consumer_current as another process reads it, read-only, after the writer closed the file."""
    out = subprocess.run([sys.executable, "-c", READER, db_path], capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(out.stdout)
    assert len(found) == len({tuple(r[:3]) for r in found}), "one row per consumer"
    return {tuple(r[:3]): r[3] for r in found}


KEYS = [(a, s, c) for a in ("A", "B") for s in ("S1", "S2") for c in ("c1", "c2")]


@st.composite
def history(draw: Any) -> list[tuple[list[str], list[tuple[str, str, str]], list[tuple[str, ...]]]]:
    """Cycles of (accounts sampled, consumers read, kept): a stream's listing fails now and then
    (kept, none or some of its consumers read: a listing that failed part way), an entry is
    rejected (kept, not read, or read from another server's report), an account is not sampled at
    all, consumers come and go."""
    cycles = []
    for _ in range(draw(st.integers(1, 6))):
        accounts = draw(st.lists(st.sampled_from(["A", "B"]), min_size=1, max_size=2, unique=True))
        failed = draw(st.lists(st.sampled_from([(a, s) for a in accounts for s in ("S1", "S2")]), max_size=2, unique=True))
        live = [k for k in KEYS if k[0] in accounts and k[:2] not in failed and draw(st.booleans())]
        rejected = draw(st.lists(st.sampled_from(live), max_size=1, unique=True)) if live else []
        read = [k for k in live if k not in rejected or draw(st.booleans())]
        read += [k for k in KEYS if k[:2] in failed and draw(st.booleans())]
        cycles.append((accounts, read, [*failed, *rejected]))
    return cycles


@settings(max_examples=25, deadline=None)
@given(history())
def test_consumer_current_is_the_latest_cycle_of_each_account_but_what_was_kept(tmp_path_factory, cycles):
    """Against a model in plain Python: a sampled account's rows are replaced by its cycle, except
    the streams and entries kept, which keep their last state; an account not sampled keeps all."""
    db_path = str(tmp_path_factory.mktemp("current") / "w.duckdb")
    store = Store(db_path)
    model: dict[tuple[str, str, str], int] = {}
    for i, (accounts, read, kept) in enumerate(cycles):
        cycle = _cycle(read, dt.datetime(2026, 11, 22, 12, i, tzinfo=dt.UTC), 100 * i)
        store.write(lambda con, c=cycle, a=accounts, k=kept: writes.write_samples(con, a, c, k))
        model = {key: n for key, n in model.items()
                 if key[0] not in accounts or key[:2] in kept or key in kept}
        model.update({key: 100 * i + j for j, key in enumerate(read)})
        found = rows(store, "SELECT account, stream, consumer, num_pending FROM consumer_current")
        assert len(found) == len({tuple(r[:3]) for r in found}), "one row per consumer"
        assert dict(((a, s, c), n) for a, s, c, n in found) == model
    assert read_current_elsewhere(db_path) == model


def test_a_cycle_larger_than_a_row_group_is_stored_in_row_groups_of_the_writers_size_in_order(db_path):
    """The writer attaches the file with its own row group size, so a large cycle fills whole row
    groups (which DuckDB writes while inserting) rather than part of one of its default 122,880
    rows; the rows keep the collector's order, and between writes another process can open the
    file for writing (the writer let it go)."""
    store = Store(db_path)
    n = 2 * ROW_GROUP_ROWS + ROW_GROUP_ROWS // 2
    keys = [("A", f"S{i % 7}", f"c{i:06d}") for i in range(n)]
    at = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    store.write(lambda con: writes.write_samples(con, ["A"], _cycle(keys, at, 0)))
    opened = subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).close()",
                             str(db_path)], capture_output=True, text=True, timeout=60)
    assert opened.returncode == 0, opened.stderr
    store.write(lambda con: writes.write_samples(con, ["A"], _cycle(keys, at + dt.timedelta(seconds=10), 1)))

    groups = [count for (count,) in rows(store, """
        SELECT sum(count) FROM pragma_storage_info('samples_recent')
        WHERE column_name = 'consumer' AND segment_type = 'VARCHAR' GROUP BY row_group_id ORDER BY row_group_id""")]
    assert sum(groups) == 2 * n
    assert max(groups) == ROW_GROUP_ROWS and groups.count(ROW_GROUP_ROWS) >= 4
    stored = rows(store, "SELECT consumer, num_pending FROM samples_recent ORDER BY rowid")
    assert stored == [(k[2], pending + i) for pending in (0, 1) for i, k in enumerate(keys)]


def test_nothing_a_write_registers_declares_or_sets_for_its_session_is_seen_by_the_next_write(db_path):
    """Writes share one in-memory DuckDB (making one per write cost more than a small write), each
    on a connection of its own: a table registered, a temp view, a variable or a session setting
    left by one write would otherwise change what the next one reads or how it casts."""
    store = Store(db_path)
    fresh = duckdb.connect()
    default_zone = fresh.execute("SELECT current_setting('TimeZone')").fetchone()[0]
    fresh.close()

    def leave_things_behind(con: Any) -> None:
        con.register("batch", pa.table({"x": [1]}))
        con.execute("CREATE TEMP VIEW cycle_samples AS SELECT 1 AS x")
        con.execute("SET VARIABLE window_since = 1")
        con.execute("SET TimeZone = 'Pacific/Chatham'")

    store.write(leave_things_behind)
    seen = store.write(lambda con: (
        con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'cycle_samples'").fetchone()[0],
        con.execute("SELECT getvariable('window_since')").fetchone()[0],
        con.execute("SELECT current_setting('TimeZone')").fetchone()[0],
        con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'batch'").fetchone()[0],
        [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                    "WHERE table_name IN ('batch', 'cycle_samples')").fetchall()],
    ))
    assert seen == (0, None, default_zone, 0, [])


def test_a_write_stopped_while_the_file_was_attached_is_cleared_by_the_stores_next_write(db_path):
    """A signal landing between a write's attach and its detach (Ctrl-C in `jetwatch pipeline`) leaves
    the file attached to the Store's DuckDB: its next write detaches it first, and the file is then free."""
    store = Store(db_path)
    store.migrate()
    store._host.attach(db_path, ROW_GROUP_ROWS)  # the state such a signal leaves: attached, never detached
    store.write(lambda con: con.execute("CREATE TABLE after_the_signal AS SELECT 1 AS x"))
    opened = subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).close()",
                             str(db_path)], capture_output=True, text=True, timeout=60)
    assert opened.returncode == 0, opened.stderr
    assert rows(store, "SELECT x FROM after_the_signal") == [(1,)]


def test_where_the_file_stands_moves_with_every_committed_write_and_only_then(tmp_path):
    """Store.written, the pages' cache key: the same while nothing is written (reads leave it), another
    after each commit; nothing for a store not there yet."""
    store = Store(tmp_path / "stamp.duckdb")
    assert store.written() == (None, None)
    store.migrate()
    seen = [store.written()]
    store.read(lambda con: con.execute("SELECT count(*) FROM advisories").fetchall())
    assert store.written() == seen[-1], "a read writes nothing"
    for n in range(3):
        store.write(lambda con: con.execute(
            "INSERT INTO inferred_pin_events VALUES (?, now(), now(), 'A', 'S', 'c', 'jobs', 'pinned', 'P', NULL, 't')",
            [f"i{n}"]))
        assert store.written() != seen[-1], "a commit moves it"
        seen.append(store.written())
