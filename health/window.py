"""The health window's samples, kept in the collector's memory between cycles.

Judging after every cycle does not read the store: re-reading and re-sorting every live
consumer's whole window (about 60 samples each at the default interval) to add one new sample per
consumer would repeat nearly all the work of the cycle before. Here the window lives in dense arrays, one column
per consumer and one row per sample in time order (time-major: a cycle's samples are one
contiguous row, and a pass over a consumer's samples reduces over the first axis, which numpy does
a whole row of consumers at a time), so a cycle appends one row and the features are a few
vectorised passes over the arrays, no sort and no file scan. In the code, a consumer's place
along the second axis is still called its row, a sample's place along the first its column.

The features are window_features.sql's, column for column and with the same null rules (numbers
coalesced to zero, a reset when the delivered sequence falls or `created` changes, deltas only
after the latest reset, the trailing run with work and no pin after the last break). The collector
and the pipeline both compute them here; the SQL is kept as an independent second definition, and
tests/test_window_state.py holds this path to it over generated histories that cross window
boundaries and reset.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from jetwatch.core.clock import parse_rfc3339, parse_rfc3339_column
from jetwatch.health.onsets import ONSET_FEATURES, Lag, Samples, onset_features

KEY = ("account", "stream", "consumer")
NUMBERS = ("num_pending", "num_ack_pending", "num_waiting", "num_redelivered",
           "delivered_consumer_seq", "delivered_stream_seq", "ack_floor_stream_seq", "oldest_unacked_age_seconds")
# The server's own activity times (epoch seconds, NaN where it sent none): the last delivery (or
# progress report, `+WPI`, or delayed nak) and the last acknowledgement. Read from these, activity
# does not depend on the ack floor, which max_deliver and limits move without any client acking.
TIMES = ("delivered_last_active", "ack_floor_last_active")
NO_PIN = np.iinfo(np.int64).min
_NEVER = -1e18  # window_features.sql's "no reset" time
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


def _numbers(values: Sequence[Any]) -> np.ndarray:
    """Numbers, missing ones as zero (numpy reads ints and None directly; anything else, such as
    a string that is not a number, goes through pandas' coercion to NaN, then zero)."""
    try:
        out = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        out = None
    if out is None or out.ndim != 1:
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").fillna(0).to_numpy(np.float64)
    out[np.isnan(out)] = 0.0
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
        self.t = np.full((columns, rows), np.nan)
        self.created = np.full((columns, rows), np.nan)
        self.values = {name: np.zeros((columns, rows)) for name in NUMBERS}
        self.times = {name: np.full((columns, rows), np.nan) for name in TIMES}
        self.paused = np.zeros((columns, rows), dtype=bool)
        self.pins = np.full((columns, rows), NO_PIN, dtype=np.int64)

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
            self.values[name][cols, rows] = _numbers(samples[name] if name in samples else [None] * len(keys))[order]
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


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per consumer, the sum over its samples of a * b (einsum: without the product's temporary)."""
    return np.einsum("ij,ij->j", a, b)


def _at(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Each row's cell at its own column `idx`."""
    return a[idx, np.arange(len(idx))]


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


def _rows_of(a: np.ndarray, rows: np.ndarray | slice, lo: int, n: int) -> np.ndarray:
    """The cells of `rows` from column `lo` to `n`: a view when `rows` is a slice (each of its
    columns contiguous), else a copy."""
    return a[lo:n, rows]


def _activity_times(state: WindowState, pick: np.ndarray | slice, lo: int, hi: int, t: np.ndarray,
                    stepped: np.ndarray, lag: Lag, dcs: np.ndarray, afs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The server's last delivery and last acknowledgement times at each sample. A consumer whose
    samples carry neither (stored before they were read) gets them from its sequences instead:
    the latest sample at which the delivered sequence, or the ack floor, had moved."""
    delivered = _rows_of(state.times["delivered_last_active"], pick, lo, hi)
    acked = _rows_of(state.times["ack_floor_last_active"], pick, lo, hi)
    bare = np.flatnonzero(np.isnan(delivered).all(axis=0) & np.isnan(acked).all(axis=0))
    if len(bare):
        # Only where a sequence moved in the window is there a time to find (the others stay NaN).
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a column of NaN (no sample) has no max
            moved = [np.nanmax(seq[:, bare], axis=0) > np.nanmin(seq[:, bare], axis=0) for seq in (dcs, afs)]
        bare = bare[moved[0] | moved[1]]
    if len(bare) == 0:
        return delivered, acked
    delivered, acked = delivered.copy(), acked.copy()
    bare_lag = lag.sub(bare)
    for out, seq in ((delivered, dcs[:, bare]), (acked, afs[:, bare])):
        at = np.where(stepped[:, bare] & (seq > bare_lag(seq)), t[:, bare], -np.inf)
        latest = np.maximum.accumulate(at, axis=0)
        out[:, bare] = np.where(np.isneginf(latest), np.nan, latest)
    return delivered, acked


def feature_frame(columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """feature_columns as a frame, `last_ts` a UTC timestamp (the onset features stay epoch seconds)."""
    if not columns:
        return pd.DataFrame(columns=list(KEY) + FEATURES + ONSET_FEATURES)
    micros = np.round(columns["last_ts"] * 1e6).astype("int64").astype("datetime64[us]").astype("datetime64[ns]")
    return pd.DataFrame({**columns, "last_ts": pd.DatetimeIndex(micros).tz_localize("UTC")})


@dataclass
class _Resets:
    """Each consumer's latest reset in the window (its delivered sequence fell, or `created`
    changed): its numbers count from there; config findings read when and which way."""

    rows: np.ndarray  # the consumers with one (resets are rare: the passes below are made for them alone)
    t: np.ndarray  # the latest reset's time (_NEVER: none, window_features.sql's "no reset")
    recreated_t: np.ndarray  # the latest sample showing a new `created` (NaN: none)
    only_t: np.ndarray  # the latest reset with `created` unchanged, and the ack floor before and after it
    floor_before: np.ndarray
    floor_after: np.ndarray


def _resets(t: np.ndarray, has_prev: np.ndarray, lag: Lag, created: np.ndarray, dcs: np.ndarray,
            afs: np.ndarray) -> _Resets:
    with np.errstate(invalid="ignore"):
        # A comparison with NaN (a `created` unknown at either sample) is false: no change seen.
        recreated = has_prev & (np.abs(lag.diff(created)) > 0)
        reset = recreated | (has_prev & (lag.diff(dcs) < 0))
    rows = np.flatnonzero(reset.any(axis=0))
    m = t.shape[1]
    out = _Resets(rows, np.full(m, _NEVER), *(np.full(m, np.nan) for _ in range(4)))
    if len(rows):
        found = np.where(reset[:, rows], t[:, rows], -np.inf).max(axis=0)
        out.t[rows] = np.where(np.isinf(found), _NEVER, found)
        found = np.where(recreated[:, rows], t[:, rows], -np.inf).max(axis=0)
        out.recreated_t[rows] = np.where(np.isinf(found), np.nan, found)
        col = last_true(reset[:, rows] & ~recreated[:, rows])
        hit = col >= 0
        out.only_t[rows[hit]] = _at(t[:, rows], col)[hit]
        out.floor_after[rows[hit]] = _at(afs[:, rows], col)[hit]
        out.floor_before[rows[hit]] = lag.sub(rows).at(afs[:, rows], np.maximum(col, 0))[hit]
    return out


@dataclass
class _Counted:
    """The samples that count (`s`: in the window and after the latest reset), the ones that also
    step from a counted sample before them (`stepped`), and where each consumer's are."""

    s: np.ndarray
    stepped: np.ndarray
    count: np.ndarray
    # Mostly every consumer was read every cycle of the window: then no sample is masked out,
    # and the masking passes are skipped (the same sums, in the same order).
    full: bool
    first: np.ndarray
    last: np.ndarray

    @classmethod
    def of(cls, t: np.ndarray, v: np.ndarray, has_prev: np.ndarray, resets: _Resets) -> _Counted:
        if len(resets.rows):
            with np.errstate(invalid="ignore"):
                s = v & (t >= resets.t[None, :])
                stepped = s & has_prev & (t > resets.t[None, :])
        else:  # no reset in any row: every sample in the window counts, every one after the first steps
            s, stepped = v, has_prev
        count = s.sum(axis=0)
        full = bool(s.all())
        if full:
            first, last = np.zeros(len(count), dtype=np.int64), np.full(len(count), t.shape[0] - 1)
        else:
            first, last = first_true(s), last_true(s)
        return cls(s, stepped, count, full, first, last)

    def __call__(self, a: np.ndarray, fill: float) -> np.ndarray:
        """`a` where a sample counts, `fill` elsewhere."""
        return a if self.full else np.where(self.s, a, fill)

    def recent(self) -> np.ndarray:
        """The last three counted samples: in a row without gaps the three columns up to the
        last, else counted."""
        recent = self.s & (np.arange(self.s.shape[0])[:, None] >= (self.last - 2)[None, :])
        gaps = np.flatnonzero(self.count != self.last - self.first + 1)
        if len(gaps):
            recent[:, gaps] = self.s[:, gaps] & (np.cumsum(self.s[::-1, gaps], axis=0)[::-1] <= 3)
        return recent

    def first_last(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _at(a, self.first), _at(a, self.last)


def _trends(c: _Counted, t: np.ndarray, pending: np.ndarray, backlog: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The least-squares slopes of pending and of the backlog over time, and the backlog slope's
    standard error (DuckDB's regr_slope, on times centred first: NaN for a single reading)."""
    def centred(a: np.ndarray) -> np.ndarray:
        return c(a - (c(a, 0).sum(axis=0) / c.count)[None, :], 0.0)

    tt, pp, bb = centred(t), centred(pending), centred(backlog)
    var = _dot(tt, tt)
    sxy, syy = _dot(tt, bb), _dot(bb, bb)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = _dot(tt, pp) / var
        backlog_slope = np.where(var > 0, sxy / var, np.nan)
        backlog_se = np.where((c.count > 2) & (var > 0),
                              np.sqrt(np.maximum(syy - sxy * sxy / var, 0) / np.maximum(c.count - 2, 1) / var), np.nan)
    return slope, backlog_slope, backlog_se


def _nopin_seconds(c: _Counted, t: np.ndarray, v: np.ndarray, nopin: np.ndarray, t_last: np.ndarray) -> np.ndarray:
    """The trailing run of samples with work and no pin, after the last sample that breaks it:
    only rows with such a sample can have one."""
    out = np.zeros(t.shape[1])
    with_run = (c.s & nopin).any(axis=0)
    if with_run.any():
        # Gathered when few rows have one; when most do, every row is read in place (a row
        # without such a sample has no trailing run: zero, the same).
        unpinned = np.flatnonzero(with_run) if with_run.mean() < 0.5 else slice(None)
        tu, nu = t[:, unpinned], nopin[:, unpinned]
        last_break = np.where(v[:, unpinned] & ~nu, tu, -np.inf).max(axis=0)  # -inf: no break (SQL: NULL)
        trailing = c.s[:, unpinned] & nu & (tu > last_break[None, :])
        out[unpinned] = np.where(trailing.any(axis=0), t_last[unpinned] - np.where(trailing, tu, np.inf).min(axis=0), 0.0)
    return out


def _steps(c: _Counted, lag: Lag, pending: np.ndarray, redelivered: np.ndarray, pins: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From each counted sample to the next: the share where pending rose, the pin switches
    (pinned both times, to another client), and whether redelivered never fell."""
    steps = c.stepped.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rising = np.where(steps > 0, (c.stepped & (lag.diff(pending) > 0)).sum(axis=0) / np.maximum(steps, 1), 0.0)
    p_pins = lag(pins)
    switches = (c.stepped & (pins != NO_PIN) & (p_pins != NO_PIN) & (pins != p_pins)).sum(axis=0)
    never_falls = (c.stepped & (lag.diff(redelivered) < 0)).sum(axis=0) == 0
    return rising, switches, never_falls


def feature_columns(state: WindowState, rows: np.ndarray, since: float, lo: int | None = None,
                    rhythm_after: float | np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The window features of `rows` that have samples at or after `since` (none: empty), as
    arrays: account, stream, consumer, FEATURES (`last_ts` in seconds) and `row`, the rows.
    `lo`: first_column(state, since), when the caller has it. `rhythm_after`: see onset_features
    (a judge's shortcut, one for all or one per row of `rows`; every feature is computed without it)."""
    n, lo = state.used, first_column(state, since) if lo is None else lo
    # Every row in order (the collector's case): slices are views, not copies.
    pick = picked(rows)
    t = _rows_of(state.t, pick, lo, n)
    with np.errstate(invalid="ignore"):
        v = t >= since  # NaN (no sample) is not
    any_v = v.any(axis=0)
    if not any_v.all():
        rows, pick = rows[any_v], rows[any_v]
        t, v = t[:, any_v], v[:, any_v]
        if isinstance(rhythm_after, np.ndarray):
            rhythm_after = rhythm_after[any_v]
    if len(rows) == 0:
        return {}
    val = {name: _rows_of(state.values[name], pick, lo, n) for name in NUMBERS}
    pending, ack, waiting, redelivered = (val["num_pending"], val["num_ack_pending"], val["num_waiting"],
                                          val["num_redelivered"])
    dcs, dss, afs = val["delivered_consumer_seq"], val["delivered_stream_seq"], val["ack_floor_stream_seq"]
    created, paused, pins = (_rows_of(a, pick, lo, n) for a in (state.created, state.paused, state.pins))

    # The previous sample in the window of every sample (window_features.sql's lag()). Mostly it is
    # in the column before (every consumer read every cycle): one shift by a column for all rows,
    # the general per-row gather only for the rows where it is not.
    has_prev, irregular, p = previous_samples(v)
    lag = Lag(irregular, p)
    resets = _resets(t, has_prev, lag, created, dcs, afs)
    c = _Counted.of(t, v, has_prev, resets)
    t_first, t_last = c.first_last(t)
    slope, backlog_slope, backlog_se = _trends(c, t, pending, pending + ack)
    rising, switches, never_falls = _steps(c, lag, pending, redelivered, pins)
    recent = c.recent()
    pending_first, pending_last = c.first_last(pending)
    dcs_first, dcs_last = c.first_last(dcs)
    dss_first, dss_last = c.first_last(dss)
    afs_first, afs_last = c.first_last(afs)
    red_first, red_last = c.first_last(redelivered)
    account, stream, consumer = state.key_columns(rows)
    return {
        "account": account, "stream": stream, "consumer": consumer,
        "samples": c.count.astype(np.int64),
        "span_seconds": t_last - t_first,
        "last_ts": t_last,
        "pending_first": pending_first, "pending_last": pending_last,
        "pending_min": c(pending, np.inf).min(axis=0),
        "pending_slope": slope,
        "pending_rising_share": rising,
        "ack_pending_min": c(ack, np.inf).min(axis=0),
        "ack_pending_last": _at(ack, c.last),
        "ack_pending_recent_min": np.where(recent, ack, np.inf).min(axis=0),
        "waiting_max": c(waiting, -np.inf).max(axis=0),
        "waiting_last": _at(waiting, c.last),
        "waiting_recent_min": np.where(recent, waiting, np.inf).min(axis=0),
        "delivered_moved": dcs_last > dcs_first,
        "ack_floor_moved": afs_last > afs_first,
        "deliveries": np.maximum(dcs_last - dcs_first, 0.0),
        "stream_delivered": np.maximum(dss_last - dss_first, 0.0),
        "acked": np.maximum(afs_last - afs_first, 0.0),
        "redelivered_first": red_first, "redelivered_last": red_last,
        "redelivered_never_falls": never_falls,
        "paused_last": _at(paused, c.last),
        "unacked_age_last": _at(val["oldest_unacked_age_seconds"], c.last),
        "backlog_slope": backlog_slope,
        "backlog_slope_se": backlog_se,
        "nopin_seconds": _nopin_seconds(c, t, v, (pins == NO_PIN) & (pending > 0), t_last),
        "sample_pin_switches": switches.astype(np.int64),
        **_onsets(state, pick, lo, n, t, v, has_prev, lag, c, resets, val, pins, t_first, t_last, rhythm_after),
        "recreated_ts": resets.recreated_t,
        "reset_ts": resets.only_t, "reset_floor_before": resets.floor_before, "reset_floor_after": resets.floor_after,
        "row": np.asarray(rows, dtype=np.int64),
    }


def _onsets(state: WindowState, pick: np.ndarray | slice, lo: int, n: int, t: np.ndarray, v: np.ndarray,
            has_prev: np.ndarray, lag: Lag, c: _Counted, resets: _Resets, val: dict[str, np.ndarray],
            pins: np.ndarray, t_first: np.ndarray, t_last: np.ndarray,
            rhythm_after: float | np.ndarray | None) -> dict[str, np.ndarray]:
    """health/onsets.py's features over these samples, with the server's activity times."""
    delivered_at, acked_at = _activity_times(state, pick, lo, n, t, c.stepped, lag, val["delivered_consumer_seq"],
                                             val["ack_floor_stream_seq"])
    # The clients are read across a reset (a consumer deleted and recreated under its name keeps
    # its clients, who pull it again at their own rhythm); only the consumer's numbers start over.
    seen, seen_prev, t_first_seen = c.s, c.stepped, t_first
    if len(resets.rows):
        seen, seen_prev, t_first_seen = v, has_prev, t_first.copy()
        t_first_seen[resets.rows] = np.where(v[:, resets.rows], t[:, resets.rows], np.inf).min(axis=0)
    return onset_features(Samples(
        t=t, s=c.s, has_prev=c.stepped, lag=lag, pending=val["num_pending"], in_flight=val["num_ack_pending"],
        waiting=val["num_waiting"], redelivered=val["num_redelivered"], age=val["oldest_unacked_age_seconds"],
        delivered_at=delivered_at, acked_at=acked_at,
        pinned=pins != NO_PIN, same_pin=pins == _at(pins, c.last)[None, :],
        t_first=t_first, t_last=t_last, last=c.last, seen=seen, seen_prev=seen_prev,
        t_first_seen=t_first_seen), rhythm_after)


FEATURES = [
    "samples", "span_seconds", "last_ts", "pending_first", "pending_last", "pending_min", "pending_slope",
    "pending_rising_share", "ack_pending_min", "ack_pending_last", "ack_pending_recent_min", "waiting_max",
    "waiting_last", "waiting_recent_min", "delivered_moved", "ack_floor_moved", "deliveries", "stream_delivered",
    "acked", "redelivered_first", "redelivered_last", "redelivered_never_falls", "paused_last", "nopin_seconds",
    "sample_pin_switches", "unacked_age_last", "backlog_slope", "backlog_slope_se",
]
