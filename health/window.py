"""The health window's samples, kept in the collector's memory between cycles.

Judging after every cycle does not read the store: re-reading and re-sorting every live
consumer's whole window (about 60 samples each at the default interval) to add one new sample per
consumer would repeat nearly all the work of the cycle before. Here the window lives in dense arrays, one column
per consumer and one row per sample in time order (time-major: a cycle's samples are one
contiguous row), so a cycle appends one row and the features are one compiled pass over each
consumer's samples (health/window_pass.py), no sort and no file scan. In the code, a consumer's
place along the second axis is still called its row, a sample's place along the first its column.

The features are window_features.sql's, column for column and with the same null rules (numbers
coalesced to zero, a reset when the delivered sequence falls or `created` changes, deltas only
after the latest reset, the trailing run with work and no pin after the last break), and the
onsets of health/onsets.py. The collector and the pipeline both compute them here; the SQL is kept as an independent second definition, and
tests/test_window_state.py holds this path to it over generated histories that cross window
boundaries and reset.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from jetwatch.core.clock import parse_rfc3339, parse_rfc3339_column
from jetwatch.health.onsets import ONSET_FEATURES

KEY = ("account", "stream", "consumer")
NUMBERS = ("num_pending", "num_ack_pending", "num_waiting", "num_redelivered",
           "delivered_consumer_seq", "delivered_stream_seq", "ack_floor_stream_seq", "oldest_unacked_age_seconds",
           "time_to_loss_seconds")
# Numbers whose absence means something other than zero: no loss in sight is not a loss now.
UNKNOWN_AS_NAN = ("time_to_loss_seconds",)
# The server's own activity times (epoch seconds, NaN where it sent none): the last delivery (or
# progress report, `+WPI`, or delayed nak) and the last acknowledgement. Read from these, activity
# does not depend on the ack floor, which max_deliver and limits move without any client acking.
TIMES = ("delivered_last_active", "ack_floor_last_active")
NO_PIN = np.iinfo(np.int64).min
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


def _seconds(values: Sequence[Any]) -> np.ndarray:
    """Epoch seconds (microsecond precision, as DuckDB's epoch()) of ISO strings, datetimes or
    pandas timestamps; NaN where missing."""
    if isinstance(values, list):
        if values.count(None) == len(values):  # `created` mostly
            return np.full(len(values), np.nan)
        try:
            text = pa.array(values, pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # not all text: datetimes, pandas' timestamps
            text = None
        if text is not None:
            parsed = parse_rfc3339_column(text)  # the server's times: ten times pandas' ISO 8601 parse
            if parsed is not None:
                return parsed.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.float64) / 1e6
            # A time Arrow cannot take (before 1970, after 2262: the zero time Go writes for one never set)
            # is past pandas' range as well, which would fail the whole cycle's judging.
            return np.array([np.nan if v is None else (parse_rfc3339(v) - _EPOCH) // _MICROSECOND / 1e6
                             for v in values], dtype=np.float64)
    stamps = pd.to_datetime(pd.Series(values, dtype=object), utc=True, format="ISO8601")
    micros = stamps.to_numpy(dtype="datetime64[us]").astype("int64")
    out = micros.astype(np.float64) / 1e6
    out[stamps.isna().to_numpy()] = np.nan
    return out


def _activity(values: Sequence[Any]) -> np.ndarray:
    """The server's activity times as epoch seconds; NaN where missing or before 1970 (Go's zero
    time, for an activity that never happened)."""
    out = _seconds(list(values))
    out[out < 0] = np.nan
    return out


def _pin_codes(values: Sequence[Any]) -> np.ndarray:
    """Pin ids as integers: only equality within one consumer's row matters."""
    return np.fromiter((hash(v) if v else NO_PIN for v in values), dtype=np.int64, count=len(values))


def _numbers(values: Sequence[Any], missing: float = 0.0) -> np.ndarray:
    """Numbers, missing ones as `missing` (numpy reads ints and None directly; anything else, such
    as a string that is not a number, goes through pandas' coercion to NaN, then `missing`)."""
    try:
        out = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        out = None
    if out is None or out.ndim != 1:
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").fillna(missing).to_numpy(np.float64)
    out[np.isnan(out)] = missing
    return out


class WindowState:
    """Every watched consumer's samples of the last `window` seconds (and a little more, until
    the next compaction), in arrays of shape (samples, consumers)."""

    def __init__(self, window: float, columns: int = 16) -> None:
        self.window = window
        self.rows: dict[tuple[str, str, str], int] = {}
        self.keys: list[tuple[str, str, str]] = []
        self.used = 0  # columns in use
        self.horizon = -np.inf  # samples older than this are no longer needed
        self._key_columns: tuple[np.ndarray, ...] | None = None  # `keys` column by column, while they hold
        self.reordered: set[int] = set()  # rows a reading was sorted into, since the owner last looked
        self._alloc(64, max(columns, 4))

    def _alloc(self, rows: int, columns: int) -> None:
        def full(value: object, dtype: type = np.float64) -> np.ndarray:
            return np.full((columns, rows), value, dtype=dtype)

        self.t, self.created = full(np.nan), full(np.nan)
        self.values = {name: full(0.0) for name in NUMBERS}
        self.times = {name: full(np.nan) for name in TIMES}
        self.paused = full(False, np.bool_)
        self.pins = full(NO_PIN, np.int64)

    def _empty_cells(self) -> list[tuple[np.ndarray, Any]]:
        """Each array with what its cells hold where there is no sample (as `_alloc` fills them)."""
        return [(self.t, np.nan), (self.created, np.nan), (self.paused, False), (self.pins, NO_PIN),
                *((a, 0.0) for a in self.values.values()), *((a, np.nan) for a in self.times.values())]

    def _arrays(self) -> list[np.ndarray]:
        return [self.t, self.created, self.paused, self.pins, *self.values.values(), *self.times.values()]

    def _resize(self, rows: int, columns: int, keep: slice) -> None:
        """New arrays of the given shape holding the columns `keep` of the old ones, first.
        One array at a time, each old one let go before the next new one is made: all of them at
        once would hold old and new together, doubling the window's memory at the peak."""
        width = len(range(*keep.indices(self.t.shape[0])))
        n = min(self.t.shape[1], rows)

        def moved(old: np.ndarray, empty: object) -> np.ndarray:
            new = np.full((columns, rows), empty, dtype=old.dtype)
            new[:width, :n] = old[keep, :n]
            return new

        self.t = moved(self.t, np.nan)
        self.created = moved(self.created, np.nan)
        self.paused = moved(self.paused, False)
        self.pins = moved(self.pins, NO_PIN)
        for name in NUMBERS:
            self.values[name] = moved(self.values[name], 0.0)
        for name in TIMES:
            self.times[name] = moved(self.times[name], np.nan)

    def _row_of(self, keys: list[tuple[str, str, str]]) -> np.ndarray:
        found = [self.rows.get(key) for key in keys]
        if None in found:  # consumers not seen before get the next rows
            for i, key in enumerate(keys):
                if found[i] is None:
                    row = self.rows.get(key)
                    if row is None:
                        row = self.rows[key] = len(self.keys)
                        self.keys.append(key)
                    found[i] = row
        rows = np.array(found, dtype=np.int64)
        if len(self.keys) > self.t.shape[1]:
            self._resize(max(len(self.keys), 2 * self.t.shape[1]), self.t.shape[0], slice(0, self.used))
        return rows

    def _make_room(self, columns: int) -> None:
        """Drop the leading columns that hold nothing at or after the horizon, moving the rest
        left in place; grow or shrink to what is kept and a quarter more only when that leaves
        too little or more than twice the spare room. The arrays stay near the window's width:
        at 100,000 consumers each column costs 9 MB."""
        if self.used + columns <= self.t.shape[0]:
            return
        with np.errstate(invalid="ignore"):
            live = (self.t[:self.used] >= self.horizon).any(axis=1)
        first = int(np.argmax(live)) if live.any() else self.used
        keep = self.used - first
        spare = max(4, keep // 4)
        room = keep + columns + spare
        width = self.t.shape[0]
        if room <= width <= room + spare:
            for array, empty in self._empty_cells():
                array[:keep] = array[first:self.used]
                array[keep:self.used] = empty
        else:
            self._resize(self.t.shape[1], room, slice(first, self.used))
        self.used = keep

    def add(self, samples: Mapping[str, Sequence[Any]]) -> np.ndarray:
        """Append one cycle's samples (the collector's column-wise batch: SAMPLE_COLUMNS); the
        rows they went to, in the batch's order."""
        keys = list(zip(samples["account"], samples["stream"], samples["consumer"]))
        if not keys:
            return np.zeros(0, dtype=np.int64)
        rows = given = self._row_of(keys)
        ts = _seconds(samples["ts"])
        # A consumer read twice in one cycle, or a reading older than the row's newest, gets
        # columns of its own so that each row stays in time order.
        order = np.lexsort((ts, rows))
        rows, ts = rows[order], ts[order]
        rank = np.zeros(len(rows), dtype=np.int64)
        if len(rows) > 1:
            same = np.r_[False, rows[1:] == rows[:-1]]
            starts = np.flatnonzero(~same)
            rank = np.arange(len(rows)) - np.repeat(starts, np.diff(np.r_[starts, len(rows)]))
        width = int(rank.max()) + 1
        self._make_room(width)
        cols = self.used + rank
        # Each reading against the one in the column before (the row's newest, mostly): only rows
        # where that is missing or newer can be out of time order.
        before = self.t[cols - 1, rows] if self.used else np.full(len(rows), np.nan)
        self.t[cols, rows] = ts
        self.created[cols, rows] = _seconds(samples["created"])[order]
        for name in NUMBERS:  # a batch made without time lag has no age: none
            missing = np.nan if name in UNKNOWN_AS_NAN else 0.0
            self.values[name][cols, rows] = _numbers(samples[name] if name in samples else [None] * len(keys),
                                                     missing)[order]
        for name in TIMES:  # a batch from before these were read has none
            self.times[name][cols, rows] = _activity(samples[name] if name in samples else [None] * len(keys))[order]
        self.paused[cols, rows] = np.asarray([bool(v) for v in samples["paused"]], dtype=bool)[order]
        self.pins[cols, rows] = _pin_codes(samples["pinned_id"])[order]
        self.used += width
        with np.errstate(invalid="ignore"):
            self._reorder(np.unique(rows[np.isnan(before) | (ts < before)]))
        return given

    def _reorder(self, rows: np.ndarray) -> None:
        """Put back in time order the rows where a reading is older than one before it (a
        server clock that stepped back, a leader change between servers that disagree)."""
        if self.used < 2:
            return
        t = self.t[:self.used, rows]
        filled = np.where(np.isnan(t), -np.inf, t)
        before = np.maximum.accumulate(filled, axis=0)[:-1]
        for row in rows[(~np.isnan(t[1:]) & (filled[1:] < before)).any(axis=0)]:
            times = self.t[:self.used, row]
            order = np.argsort(np.where(np.isnan(times), np.inf, times), kind="stable")
            for array in self._arrays():
                array[:self.used, row] = array[:self.used, row][order]
            self.reordered.add(int(row))

    def seed(self, samples: pd.DataFrame) -> None:
        """Load the window's samples already in the store (a restart keeps judging over the
        whole window, not from an empty one)."""
        if samples.empty:
            return
        ordered = samples.sort_values("ts", kind="stable")
        columns = {c: ordered[c].tolist() for c in ordered.columns}
        for name in NUMBERS + TIMES + ("created", "paused", "pinned_id"):
            columns.setdefault(name, [None] * len(ordered))
        rank = ordered.groupby(list(KEY), sort=False).cumcount().to_numpy()
        for r in range(int(rank.max()) + 1):
            pick = np.flatnonzero(rank == r)
            self.add({c: [v[i] for i in pick] for c, v in columns.items()})

    def forget(self, keep: set[tuple[str, str, str]]) -> None:
        """Drop the rows of consumers no longer watched (deleted, filtered out)."""
        gone = [k for k in self.keys if k not in keep]
        if not gone:
            return
        kept = [self.rows[k] for k in self.keys if k in keep]
        for array, empty in self._empty_cells():
            array[:, :len(kept)] = array[:, kept]
            array[:, len(kept):] = empty
        renumbered = {old: new for new, old in enumerate(kept)}
        self.reordered = {renumbered[r] for r in self.reordered if r in renumbered}
        self.keys = [k for k in self.keys if k in keep]
        self.rows = {k: i for i, k in enumerate(self.keys)}
        self._key_columns = None

    def key_columns(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Account, stream and consumer of `rows`, as object arrays (split once, not every cycle:
        keys are only appended between two `forget`s)."""
        if self._key_columns is None or len(self._key_columns[0]) != len(self.keys):
            self._key_columns = tuple(np.array([k[i] for k in self.keys], dtype=object) for i in range(3))
        account, stream, consumer = self._key_columns
        return account[rows], stream[rows], consumer[rows]

    def features(self, since: dt.datetime, keys: Sequence[tuple[str, str, str]] | None = None) -> pd.DataFrame:
        """window_features.sql over the samples at or after `since`, one row per consumer with
        any (of `keys` when given)."""
        self.horizon = pd.Timestamp(since).timestamp()
        if keys is None:
            rows = np.arange(len(self.keys))
        else:
            rows = np.fromiter((self.rows.get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
            rows = rows[rows >= 0]
        columns = feature_columns(self, rows, self.horizon)
        columns.pop("row", None)
        return feature_frame(columns)


def first_column(state: WindowState, since: float) -> int:
    """The first column holding a sample at or after `since`: the columns before it are outside
    the window for every consumer (each row is in time order), so the passes skip them."""
    with np.errstate(invalid="ignore"):
        late = (state.t[:state.used] >= since).any(axis=1)
    return int(np.argmax(late)) if late.any() else state.used


def first_true(mask: np.ndarray) -> np.ndarray:
    """Each row's first column where `mask` holds (its width where none does). numpy's argmax
    over the first axis copies the array to make that axis last; a min over it does not."""
    index = np.arange(mask.shape[0])[:, None]
    return np.where(mask, index, mask.shape[0]).min(axis=0)


def last_true(mask: np.ndarray) -> np.ndarray:
    """Each row's last column where `mask` holds (-1 where none does)."""
    index = np.arange(mask.shape[0])[:, None]
    return np.where(mask, index, -1).max(axis=0)


class Lag:
    """An array's value at each sample's previous valid one: the sample in the row before, or, for
    the `irregular` consumers (a gap among their samples), the row `prev` names (one column of
    `prev` per irregular consumer, in the order of `irregular`, which is sorted)."""

    def __init__(self, irregular: np.ndarray, prev: np.ndarray) -> None:
        self.irregular, self.prev = irregular, prev

    def __call__(self, a: np.ndarray) -> np.ndarray:
        out = np.empty(a.shape, a.dtype)
        out[1:] = a[:-1]
        out[:1] = a[:1]
        if len(self.irregular):
            out[:, self.irregular] = np.take_along_axis(a[:, self.irregular], self.prev, axis=0)
        return out

    def diff(self, a: np.ndarray) -> np.ndarray:
        """a minus self(a), without self(a)'s copy of the array."""
        out = np.empty(a.shape, a.dtype)
        np.subtract(a[1:], a[:-1], out=out[1:])
        np.subtract(a[:1], a[:1], out=out[:1])
        if len(self.irregular):
            cols = a[:, self.irregular]
            out[:, self.irregular] = cols - np.take_along_axis(cols, self.prev, axis=0)
        return out

    def at(self, a: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Each consumer's value at the sample before its row `rows` (self(a) read at those rows)."""
        before = np.maximum(rows - 1, 0)
        if len(self.irregular):
            before[self.irregular] = self.prev[rows[self.irregular], np.arange(len(self.irregular))]
        return a[before, np.arange(a.shape[1])]

    def sub(self, cols: np.ndarray) -> Lag:
        """The same for the consumers `cols` (sorted positions) alone, numbered by their place in `cols`."""
        place = np.searchsorted(cols, self.irregular)
        hit = place < len(cols)
        hit[hit] = cols[place[hit]] == self.irregular[hit]
        return Lag(place[hit], self.prev[:, hit])


def previous_samples(valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of each valid cell, whether a valid cell precedes it in its row; the rows where the one
    before is not in the column before (a gap); and for those rows only, its column (0 where none)."""
    cols = np.arange(valid.shape[0])[:, None]
    has_prev = valid & (cols > first_true(valid)[None, :])  # a valid cell before it
    gap = has_prev[1:] & ~valid[:-1]
    irregular = np.flatnonzero(gap.any(axis=0))
    run = np.maximum.accumulate(np.where(valid[:, irregular], cols, -1), axis=0)
    prev = np.zeros_like(run)
    prev[1:] = run[:-1].clip(0)
    return has_prev, irregular, prev


def lagged(a: np.ndarray, irregular: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Each cell's value at the previous valid cell of its row (previous_samples): the column
    before, or the gathered one in the irregular rows."""
    return Lag(irregular, prev)(a)


def picked(rows: np.ndarray) -> np.ndarray | slice:
    """`rows` as a slice when they are consecutive (the collector's case: every row, in order),
    so that reading them takes views of the arrays, not copies."""
    if len(rows) and rows[-1] - rows[0] == len(rows) - 1 and np.array_equal(rows, np.arange(rows[0], rows[-1] + 1)):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def feature_frame(columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """feature_columns as a frame, `last_ts` a UTC timestamp (the onset features stay epoch seconds)."""
    if not columns:
        return pd.DataFrame(columns=list(KEY) + FEATURES + ONSET_FEATURES)
    micros = np.round(columns["last_ts"] * 1e6).astype("int64").astype("datetime64[us]").astype("datetime64[ns]")
    return pd.DataFrame({**columns, "last_ts": pd.DatetimeIndex(micros).tz_localize("UTC")})


def feature_columns(state: WindowState, rows: np.ndarray, since: float, lo: int | None = None,
                    rhythm_after: float | np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The window features of `rows` that have samples at or after `since` (none: empty), as
    arrays: account, stream, consumer, FEATURES (`last_ts` in seconds), ONSET_FEATURES, the latest
    reset's (RESETS) and `row`, the rows. `lo`: first_column(state, since), when the caller has it.
    `rhythm_after`: a judge's shortcut (one for all, or one per row of `rows`): the rhythms only
    where a condition has held that long or messages were redelivered (health/onsets.py); without
    it, every feature everywhere."""
    # Imported here: numba, which compiles the pass, costs a second to import, and only the
    # processes that judge (the collector, the pipeline) need it, not every command and page.
    from jetwatch.health import window_pass

    n, lo = state.used, first_column(state, since) if lo is None else lo
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0 or lo >= n:
        return {}
    after = np.full(len(rows), -np.inf) if rhythm_after is None else \
        np.array(np.broadcast_to(np.asarray(rhythm_after, dtype=np.float64), (len(rows),)))
    floats = np.full((len(window_pass.FLOATS), len(rows)), np.nan)
    ints = np.zeros((len(window_pass.INTEGERS), len(rows)), dtype=np.int64)
    v, times = state.values, state.times
    window_pass.window_pass_in_parts((
        state.t, state.created, v["num_pending"], v["num_ack_pending"], v["num_waiting"], v["num_redelivered"],
        v["delivered_consumer_seq"], v["delivered_stream_seq"], v["ack_floor_stream_seq"],
        v["oldest_unacked_age_seconds"], times["delivered_last_active"], times["ack_floor_last_active"],
        state.paused, state.pins, NO_PIN, rows, lo, n, float(since), after, floats, ints), len(rows))
    inside = ints[window_pass.IN_WINDOW] == 1
    if not inside.all():
        rows, floats, ints = rows[inside], floats[:, inside], ints[:, inside]
    if len(rows) == 0:
        return {}
    account, stream, consumer = state.key_columns(rows)
    out: dict[str, np.ndarray] = {"account": account, "stream": stream, "consumer": consumer}
    found = {**dict(zip(window_pass.FLOATS, floats)), **dict(zip(window_pass.INTEGERS, ints))}
    for name in (*FEATURES, *ONSET_FEATURES, *RESETS):
        out[name] = found[name].astype(bool) if name in FLAGS else found[name]
    out["row"] = rows
    return out


FEATURES = [
    "samples", "span_seconds", "last_ts", "pending_first", "pending_last", "pending_min", "pending_slope",
    "pending_rising_share", "ack_pending_min", "ack_pending_last", "ack_pending_recent_min", "waiting_max",
    "waiting_last", "waiting_recent_min", "delivered_moved", "ack_floor_moved", "deliveries", "stream_delivered",
    "acked", "redelivered_first", "redelivered_last", "redelivered_min", "redelivered_never_falls", "paused_last",
    "nopin_seconds", "sample_pin_switches", "unacked_age_last", "backlog_slope", "backlog_slope_se",
]
# The latest reset's time and which way, for the config findings.
RESETS = ["recreated_ts", "reset_ts", "reset_floor_before", "reset_floor_after"]
FLAGS = {"delivered_moved", "ack_floor_moved", "redelivered_never_falls", "paused_last", "stall_grew",
         "stall_redelivered", "pullers_seen"}
