"""What the collector writes, each function one part of a transaction on an open connection."""

from __future__ import annotations

import array
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from jetwatch import sql
from jetwatch.core.advisory_row import AdvisoryRow
from jetwatch.core.clock import parse_rfc3339_column
from jetwatch.core.text import storable
from jetwatch.store.database import ROW_GROUP_ROWS, one_row

_SAMPLE_TYPES = {
    "num_pending": pa.int64(), "num_ack_pending": pa.int64(), "num_waiting": pa.int64(),
    "num_redelivered": pa.int64(), "delivered_consumer_seq": pa.int64(),
    "delivered_stream_seq": pa.int64(), "ack_floor_consumer_seq": pa.int64(),
    "ack_floor_stream_seq": pa.int64(), "paused": pa.bool_(),
    "oldest_unacked_age_seconds": pa.float64(), "oldest_undelivered_age_seconds": pa.float64(),
    "time_to_loss_seconds": pa.float64(), "stream_room_messages": pa.float64(),
}
_ONE_VALUE_COLUMNS = ("cluster", "domain", "account")
_TIME_COLUMNS = ("ts", "created", "delivered_last_active", "ack_floor_last_active", "pause_until", "pinned_ts")
_MICROS = pa.timestamp("us", tz="UTC")
_LAG_COLUMNS = ("oldest_unacked_age_seconds", "oldest_unacked_age_kind", "oldest_undelivered_age_seconds",
                "oldest_undelivered_age_kind", "time_to_loss_seconds", "loss_limit", "stream_room_messages")
_CONFIG_TYPES = {
    "is_pull": pa.bool_(), "filtered": pa.bool_(), "max_waiting": pa.int64(),
    "max_ack_pending": pa.int64(), "ack_wait_ns": pa.int64(), "max_deliver": pa.int64(),
    "priority_groups": pa.list_(pa.string()), "priority_timeout_ns": pa.int64(),
}


def _table(columns: dict[str, list[Any]], types: dict[str, pa.DataType]) -> pa.Table:
    return pa.table({name: pa.array(values, type=types.get(name, pa.string()))
                     for name, values in columns.items()})


def _times(values: list[Any]) -> pa.Array:
    """The server's RFC 3339 times parsed in Arrow, in less than half the time the store's own cast
    takes; a column Arrow cannot take whole stays text, and the store's cast (`stage_samples`)
    parses it instead."""
    text = pa.array(values, pa.string())
    parsed = parse_rfc3339_column(text)
    return text if parsed is None else parsed


def in_row_groups(table: pa.Table) -> pa.Table:
    """The table in chunks of one row group each: DuckDB reads an Arrow table's chunks in parallel,
    each one into a row group of its own (one chunk of 100,000 rows is read by one thread)."""
    return pa.Table.from_batches(table.to_batches(max_chunksize=ROW_GROUP_ROWS), table.schema)


def _sample_column(name: str, values: list[Any]) -> pa.Array:
    """One column of a cycle as Arrow. Converting Python values is most of a write's own time, so
    what needs no value-by-value conversion skips it: a column without a value (time lag where it
    does not run, pins where no consumer has one), one value throughout (the cluster, domain and
    account of a page), and whole integers, which Python's array type packs faster than Arrow
    converts them (it refuses a None or a float, which then take Arrow's way; booleans, which it
    would take as 0 and 1, the collector has refused in its checks)."""
    n = len(values)
    first = values[0] if n else None
    kind = _MICROS if name in _TIME_COLUMNS else _SAMPLE_TYPES.get(name, pa.string())
    if first is None and values.count(None) == n:
        return pa.nulls(n, kind)
    if name in _TIME_COLUMNS:
        return _times(values)
    if name in _ONE_VALUE_COLUMNS and values.count(first) == n:
        return pa.repeat(pa.scalar(first, kind), n)
    if kind == pa.int64():
        try:
            packed = array.array("q", values)
        except (TypeError, OverflowError):
            pass
        else:
            return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(packed)])
    return pa.array(values, type=kind)


def _arrow_column(name: str, values: pa.Array) -> pa.Array:
    """A column the collector read straight into Arrow, typed as the store keeps it."""
    if name in _TIME_COLUMNS:
        if values.null_count == len(values):
            return pa.nulls(len(values), _MICROS)
        parsed = parse_rfc3339_column(values)
        return values if parsed is None else parsed
    kind = _SAMPLE_TYPES.get(name, pa.string())
    return values if values.type == kind else values.cast(kind)


def samples_table(columns: dict[str, list[Any]], arrow: Mapping[str, pa.Array] | None = None) -> pa.Table:
    """A cycle's columns as the Arrow table write_samples appends (with the time-lag columns):
    those in `arrow` (read straight into Arrow by the collector) as they are, the rest from the
    Python lists."""
    n = len(next(iter(columns.values()), []))
    columns = {**{c: [None] * n for c in _LAG_COLUMNS}, **columns}  # batches made without time lag
    arrow = arrow or {}
    return in_row_groups(pa.table({
        name: _arrow_column(name, arrow[name]) if name in arrow else _sample_column(name, values)
        for name, values in columns.items()}))


def _rows_table(rows: Sequence[Mapping[str, object]], types: dict[str, pa.DataType]) -> pa.Table:
    return _table({k: [r[k] for r in rows] for k in rows[0]}, types)


def write_samples(con: duckdb.DuckDBPyConnection, accounts: list[str], samples: dict[str, list[Any]],
                  kept: Iterable[tuple[str, ...]] = (), sampled_at: dt.datetime | None = None,
                  arrow: Mapping[str, pa.Array] | None = None) -> None:
    """Append a cycle's samples and make them the live state of the accounts sampled (the view
    consumer_current goes by the cycle's number: nothing is written twice); what `kept` names
    (account, stream) for a stream whose listing failed, or (account, stream, consumer) for a
    rejected entry, keeps its last known state in current_held. `sampled_at`, the collector's
    time of the cycle, is what sealing goes by (None: the samples' own times). `arrow`: the
    columns the collector read straight into Arrow (SampleBatch.arrow), appended as they are."""
    con.register("batch", samples_table(samples, arrow))
    con.execute(sql.query("stage_samples"))
    held = {"accounts": accounts, "kept": ["\x1f".join(key) for key in kept]}
    con.execute(sql.query("release_held"), held)
    con.execute(sql.query("hold_current"), held)
    if held["kept"]:
        con.execute(sql.query("release_read_held"))
    con.execute(sql.query("next_cycle"))
    con.execute(sql.query("insert_samples"), {"sampled_at": sampled_at})
    con.unregister("batch")


def write_configs(con: duckdb.DuckDBPyConnection, configs: list[dict[str, Any]]) -> None:
    if not configs:
        return
    # A consumer's own thresholds ride along (`threshold_<name>`, for the collector's memory): numbers.
    extra = {k: pa.float64() for k in configs[0] if k.startswith("threshold_")}
    con.register("configs", _rows_table(configs, {**_CONFIG_TYPES, **extra}))
    con.execute(sql.query("insert_configs"))
    con.unregister("configs")


def write_advisories(con: duckdb.DuckDBPyConnection, rows: Sequence[AdvisoryRow]) -> None:
    if not rows:
        return
    con.register("advisory_batch", _rows_table(rows, {}))
    con.execute(sql.query("insert_advisories"))
    con.unregister("advisory_batch")


def dropped_unread(con: duckdb.DuckDBPyConnection, account: str, limit: int,
                   retry_before: dt.datetime) -> list[tuple[str, int]]:
    """(stream, stream sequence) of dropped messages of `account` still to read, newest first."""
    found = con.execute(sql.query("dropped_unread"),
                        {"account": account, "limit": limit, "retry_before": retry_before}).fetchall()
    return [(stream, int(seq)) for stream, seq, _ in found]


def write_dropped_reads(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    """What reads of dropped messages found (collectors/dropped.py); texts made storable."""
    if not rows:
        return
    rows = [{k: storable(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]
    con.register("dropped_read_batch", _rows_table(rows, {"stream_seq": pa.int64()}))
    con.execute(sql.query("insert_dropped_reads"))
    con.unregister("dropped_read_batch")


def write_rejects(con: duckdb.DuckDBPyConnection, now: dt.datetime, origin: str,
                  rejects: Iterable[tuple[str, str, str]]) -> None:
    for subject, error, raw in rejects:
        con.execute(sql.query("insert_reject"),
                    {"ts": now, "origin": origin, "subject": None if subject is None else storable(subject),
                     "error": storable(error), "raw": storable(raw)})


def write_dropped_rejects(con: duckdb.DuckDBPyConnection, dropped: dict[str, Any] | None) -> None:
    """The minute's count of rejects dropped over the budget (one row, replaced as it grows)."""
    if dropped is not None:
        con.execute(sql.query("delete_dropped_rejects"), {"ts": dropped["ts"], "origin": dropped["origin"]})
        con.execute(sql.query("insert_reject"), {**dropped, "subject": None})


def reconcile_pins(con: duckdb.DuckDBPyConnection, now: dt.datetime, grace_s: float,
                   horizon_s: float = 3600.0) -> None:
    """Record as `inferred` the pin changes that only sampled state shows, and mark each pin
    advisory confirmed or unconfirmed by sampled state (advisories can be forged)."""
    horizon = now - dt.timedelta(seconds=horizon_s)
    if not one_row(con.execute(sql.query("pins_to_reconcile"), {"horizon": horizon}))[0]:
        return
    params = {"now": now, "cutoff": now - dt.timedelta(seconds=grace_s), "horizon": horizon}
    con.execute(sql.query("infer_unpinned"), params)
    con.execute(sql.query("infer_pinned"), params)
    con.execute(sql.query("confirm_pins"), params)


def write_status(con: duckdb.DuckDBPyConnection, status: dict[str, Any]) -> None:
    con.execute(sql.query("upsert_collector_status"), status)


def write_capture_progress(con: duckdb.DuckDBPyConnection, gaps: list[dict[str, Any]],
                           cursor: dict[str, Any] | None) -> None:
    """Gaps found in the capture stream's sequence, and where the store now is in it."""
    for row in gaps:
        con.execute(sql.query("insert_capture_gap"), row)
    if cursor is not None:
        con.execute(sql.query("upsert_capture_cursor"), cursor)


def capture_cursor(con: duckdb.DuckDBPyConnection, stream: str) -> tuple[Any, ...] | None:
    """(stream_created, last_seq, last_ts, awaiting) of the capture stream, or None if never read."""
    return con.execute(sql.query("capture_cursor"), {"stream": stream}).fetchone()


def last_capture_gap(con: duckdb.DuckDBPyConnection) -> dt.datetime | None:
    """When the newest gap in the advisory record was found, if ever."""
    row = con.execute(sql.query("last_capture_gap")).fetchone()
    return row[0] if row else None


def store_id(con: duckdb.DuckDBPyConnection) -> str:
    return str(one_row(con.execute("SELECT value FROM store_meta WHERE key = 'store_id'"))[0])


def latest_config_hashes(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str, str], str]:
    rows = con.execute(sql.query("latest_config_hashes")).fetchall()
    return {(a, s, c): h for a, s, c, h in rows}
