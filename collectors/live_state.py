"""What the collector knows of every consumer between cycles, so that judging a cycle reads nothing
back from the store: the health window's samples (health/window.py), the live state
with the limits of each consumer's latest config (what the view consumer_latest holds), the
verdict it last kept for each, and when each last pulled, last acknowledged and was first seen.

It is seeded from the store once, when the collector starts (or, for callers that judge one cycle
on a connection they hold, every time: `judging.judge_cycle`), and kept in step with the store
afterwards: a cycle's samples, accounts and configs change it as write_samples and write_configs
change consumer_current and consumer_configs; a judged cycle changes it only after its write
committed (`commit`), so a failed write leaves it as the store is.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from jetwatch import sql
from jetwatch.health import pull_rhythm, thresholds
from jetwatch.health.columns import floats
from jetwatch.health.window import (
    WindowState,
    feature_columns,
    feature_frame,
    first_column,
    lagged,
    last_true,
    picked,
    previous_samples,
)

KEY = ("account", "stream", "consumer")
# consumer_latest's columns, as fleet_latest.sql reads them: from the latest sample ...
SAMPLE_STATE = ("ts", "server", "cluster", "num_pending", "num_ack_pending", "num_waiting", "num_redelivered",
                "paused", "pause_until", "pin_group", "pinned_id", "pinned_ts", "leader",
                "oldest_unacked_age_seconds", "oldest_unacked_age_kind", "oldest_undelivered_age_seconds",
                "oldest_undelivered_age_kind", "time_to_loss_seconds", "loss_limit", "stream_room_messages")
# ... and from the latest config.
CONFIG_STATE = ("is_pull", "filtered", "max_ack_pending", "max_waiting", "priority_policy", "priority_groups",
                "ack_wait_ns", "max_deliver", "priority_timeout_ns",
                # the thresholds its metadata sets (None: the setting), health/thresholds.py
                *(thresholds.INPUT + name for name in thresholds.OVERRIDABLE))
STATE = SAMPLE_STATE + CONFIG_STATE
# The columns judging reads as numbers (LiveState.numbers).
NUMERIC_STATE = ("num_pending", "num_ack_pending", "time_to_loss_seconds", "stream_room_messages", "max_ack_pending", "max_waiting",
                 "ack_wait_ns", "priority_timeout_ns", *(thresholds.INPUT + name for name in thresholds.OVERRIDABLE))
TIMES = ("ts", "pause_until", "pinned_ts")
# What the collector kept of each consumer's verdict (verdicts_previous.sql).
KEPT_TEXT = ("verdict", "reason", "findings", "eta_state", "config_findings")
KEPT_NUMBERS = ("samples", "delivered_per_second", "acked_per_second", "redelivered_per_second",
                "eta_seconds", "eta_low_seconds", "eta_high_seconds")
ACTIVITY = ("last_pull", "last_ack", "first_seen")
CHUNK_CELLS = 524_288  # cells of one of the window's arrays (4 MiB of floats) in one pass at most
LAST_KNOWN = "last known, judged "  # how the reason of a verdict held for lack of fresh samples begins


def epoch(values: object) -> np.ndarray:
    """Epoch seconds of timestamps (NaN where missing)."""
    stamps = pd.to_datetime(pd.Series(values, dtype=object), utc=True, format="ISO8601")
    out = stamps.to_numpy(dtype="datetime64[us]").astype("int64").astype(np.float64) / 1e6
    out[stamps.isna().to_numpy()] = np.nan
    return out


def stamps(seconds: np.ndarray) -> pd.Series:
    """Timestamps (UTC, to the microsecond) of epoch seconds, NaT where NaN."""
    return pd.Series(micros(seconds)).dt.tz_localize("UTC")


def micros(seconds: np.ndarray) -> np.ndarray:
    """datetime64[us] of epoch seconds, NaT where NaN (what an Arrow timestamp column takes)."""
    seconds = np.asarray(seconds, dtype=np.float64)
    out = np.round(np.nan_to_num(seconds) * 1e6).astype(np.int64).astype("datetime64[us]")
    out[np.isnan(seconds)] = np.datetime64("NaT")
    return out


def _own_thresholds(configs: pd.DataFrame) -> None:
    """latest_configs' rows with the thresholds their metadata sets (`threshold_<name>`), parsed
    here once as the collector starts; afterwards each config that changes brings its own."""
    for name, values in thresholds.input_columns(configs["monitor_metadata"]).items():
        configs[name] = values


class LiveState:
    """The window, the live state, the kept verdicts and the activity of every watched consumer,
    in arrays that share the window's row numbers."""

    def __init__(self, window_seconds: float) -> None:
        self.window = WindowState(window_seconds)
        self.live = np.zeros(0, dtype=bool)
        self.state = {c: np.empty(0, dtype=object) for c in STATE}
        self.kept_text = {c: np.empty(0, dtype=object) for c in KEPT_TEXT}
        self.kept_numbers = {c: np.empty(0) for c in KEPT_NUMBERS}
        self.kept_since = np.empty(0)  # epoch seconds, NaN: never judged
        self.kept_judged_at = np.empty(0)
        self.calmer_since = np.empty(0)  # since when a calmer verdict than the kept one was judged (NaN: none)
        self.kept_unhealthy_since = np.empty(0)  # epoch seconds, NaN: healthy (health/easing.py)
        self.activity = {c: np.empty(0) for c in ACTIVITY}
        self.waits = pull_rhythm.empty(0)  # each consumer's waits for a pull (health/pull_rhythm.py)
        self.written = np.zeros(0, dtype=bool)  # has a row in verdicts_current
        self.activity_seeded = np.zeros(0, dtype=bool)
        self.folded = np.empty(0)  # per row: the newest sample whose activity `activity` holds (NaN: none)
        self.stamped = np.nan  # when this state last judged (every verdict judged afresh carries it)
        # Every consumer's latest config, live or not: its rows may be forgotten while it is not
        # live, its config is not (the store keeps it in consumer_configs).
        self.configs: dict[tuple[str, str, str], tuple[Any, ...]] = {}
        # Since when the cluster has shown, without a break, that it cannot serve a consumer (judging.py).
        self.cluster_seen: dict[tuple[str, str, str], float] = {}
        # Consumers the server no longer lists though nothing said they were removed, and since when
        # (epoch seconds): kept live with their last known state until they are listed again, a
        # DELETED advisory says so (`removed`), or an operator forgets them (also `removed`). Only
        # those `holds` accepts (the collector's filters); without it, none are held.
        self.unlisted: dict[tuple[str, str, str], float] = {}
        self.removed: set[tuple[str, str, str]] = set()
        self.holds: Callable[[tuple[str, str, str]], bool] | None = None
        self._numbers: dict[str, np.ndarray] = {}  # NUMERIC_STATE columns as floats, until they change

    def numbers(self, column: str) -> np.ndarray:
        """A numeric column of the live state (NUMERIC_STATE) as floats, NaN where it is None:
        converted once after it changed, not by every reader of every judge (a config's limits and
        thresholds change seldom, and are read by several rules each cycle)."""
        found = self._numbers.get(column)
        if found is None:
            found = self._numbers[column] = floats(self.state[column])
        return found

    def _changed(self, columns: Iterable[str] = STATE) -> None:
        for c in columns:
            self._numbers.pop(c, None)

    # -- rows ---------------------------------------------------------------------------------

    @property
    def keys(self) -> list[tuple[str, str, str]]:
        return self.window.keys

    def _all(self) -> list[np.ndarray]:
        return [self.live, self.written, self.activity_seeded, self.kept_since, self.kept_judged_at, self.calmer_since,
                self.kept_unhealthy_since, self.folded,
                *self.state.values(), *self.kept_text.values(), *self.kept_numbers.values(), *self.activity.values(),
                *self.waits.values()]

    def _grow(self) -> None:
        n = len(self.window.keys)
        have = len(self.live)
        if n <= have:
            return
        size = max(n, 2 * have, 64)

        def grown(a: np.ndarray) -> np.ndarray:
            fill: Any = None if a.dtype == object else (False if a.dtype == bool else np.nan)
            out = np.full(size, fill, dtype=a.dtype)
            out[:have] = a
            return out

        self.live, self.written, self.activity_seeded = (grown(self.live), grown(self.written),
                                                         grown(self.activity_seeded))
        self.kept_since, self.kept_judged_at = grown(self.kept_since), grown(self.kept_judged_at)
        self.calmer_since = grown(self.calmer_since)
        self.kept_unhealthy_since = grown(self.kept_unhealthy_since)
        self.folded = grown(self.folded)
        for group in (self.state, self.kept_text, self.kept_numbers, self.activity, self.waits):
            for c in group:
                group[c] = grown(group[c])
        self._changed()

    def rows_of(self, keys: Sequence[tuple[str, str, str]]) -> np.ndarray:
        rows = self.window._row_of(list(keys))
        self._grow()
        return rows

    def forget_gone(self) -> None:
        """Drop the rows of consumers no longer live (and never to be judged again)."""
        n = len(self.window.keys)
        keep = np.flatnonzero(self.live[:n])
        if len(keep) == n:
            return
        self.window.forget({self.window.keys[r] for r in keep})
        for a in self._all():
            a[:len(keep)] = a[keep]
            a[len(keep):] = None if a.dtype == object else (False if a.dtype == bool else np.nan)
        self._changed()

    # -- a cycle ------------------------------------------------------------------------------

    def add(self, samples: Mapping[str, Sequence[Any]], accounts: Iterable[str] | None = None,
            kept: Iterable[tuple[str, ...]] = (), configs: Sequence[Mapping[str, Any]] = (),
            at: float | None = None) -> list[tuple[str, str, str]]:
        """One cycle, as write_samples and write_configs store it: the configs that changed, the
        samples into the window, and the live state of the sampled `accounts` replaced by the
        samples, except what `kept` names (a stream, or one consumer) keeping its last state, and
        the consumers held unlisted (see `unlisted`), which it returns: the store keeps them too.
        Without `accounts` (a caller that only appends samples) nothing leaves the live state."""
        if configs:
            rows = self.rows_of([(c["account"], c["stream"], c["consumer"]) for c in configs])
            for row, config in zip(rows, configs):  # in order: the latest config wins
                values = tuple(config.get(c) for c in CONFIG_STATE)
                self.configs[(config["account"], config["stream"], config["consumer"])] = values
                for c, v in zip(CONFIG_STATE, values):
                    self.state[c][row] = v
            self._changed(CONFIG_STATE)
        before = len(self.window.keys)
        rows = self.window.add(samples)
        self._grow()
        self._configure(range(before, len(self.window.keys)))
        n = len(self.window.keys)
        if accounts is not None:
            live = np.flatnonzero(self.live[:n])
            leave = pd.Series(self.window.key_columns(live)[0]).isin(set(accounts)).to_numpy()
            kept = list(kept)
            if kept:  # a stream (or a consumer) whose listing failed keeps its last state
                streams = {k[:2] for k in kept if len(k) == 2}
                singles = {tuple(k) for k in kept if len(k) == 3}
                for i in np.flatnonzero(leave):
                    key = self.window.keys[live[i]]
                    leave[i] = key[:2] not in streams and key not in singles
            held = self._hold_unlisted(live, leave, rows, at)
            self.live[live[leave]] = False
        else:
            held = []
        if len(rows) == 0:
            return held
        self.live[rows] = True
        count = len(rows)
        for c in SAMPLE_STATE:
            given = samples.get(c)
            column = np.empty(count, dtype=object)
            if given is not None:
                column[:] = given
            self.state[c][rows] = column
        self._changed(SAMPLE_STATE)
        return held

    def _hold_unlisted(self, live: np.ndarray, leave: np.ndarray, rows: np.ndarray, at: float | None
                       ) -> list[tuple[str, str, str]]:
        """Of the live rows about to leave (`leave`, over `live`), those not sampled again that
        nothing said were removed stay (their `leave` cleared): the consumers held unlisted, each
        since its last sample (`at` where that is not known)."""
        if self.holds is None:
            return []
        keys, index = self.window.keys, self.window.rows
        listed = np.zeros(len(keys), dtype=bool)
        listed[rows] = True
        for key in [k for k in self.unlisted if (r := index.get(k)) is None or listed[r] or not self.live[r]]:
            del self.unlisted[key]  # listed again, or no longer held (its row gone with a state seeded again)
        held = []
        leaving = np.flatnonzero(leave)
        unlisted_now = leaving[~listed[live[leaving]]]  # not listed this cycle: few, mostly none
        # What was said of a consumer that left before is spent (in place: the set is shared).
        self.removed.difference_update([k for k in self.removed if (r := index.get(k)) is None or not self.live[r]])
        for i in unlisted_now:
            key = keys[live[i]]
            if key in self.removed or not self.holds(key):
                self.unlisted.pop(key, None)
                self.removed.discard(key)
                continue
            if key not in self.unlisted:
                last = epoch([self.state["ts"][live[i]]])[0]
                self.unlisted[key] = last if last == last else (time.time() if at is None else at)
            leave[i] = False
            held.append(key)
        return held

    def _configure(self, rows: range) -> None:
        """New rows (a consumer sampled again after its row was forgotten) take its kept config."""
        if len(rows):
            self._changed(CONFIG_STATE)
        for row in rows:
            values = self.configs.get(self.window.keys[row])
            if values is not None:
                for c, v in zip(CONFIG_STATE, values):
                    self.state[c][row] = v

    # -- seeding ------------------------------------------------------------------------------

    @classmethod
    def seeded(cls, con: duckdb.DuckDBPyConnection, now: dt.datetime, window_seconds: float) -> LiveState:
        """The state as the store holds it: the health window's samples, the live state with its
        limits, the kept verdicts and activity; activity the store does not hold yet (rows written
        before migration 0006) is looked up once in the samples."""
        state = cls(window_seconds)
        since = now - dt.timedelta(seconds=window_seconds)
        con.execute(sql.query("set_window_since"), {"since": since})
        con.execute(sql.query("stage_window_samples"))
        state.window.seed(con.execute("SELECT * FROM window_samples").df())
        latest = con.execute(sql.query("fleet_latest")).df()
        previous = con.execute(sql.query("verdicts_previous")).df()
        configs = con.execute(sql.query("latest_configs")).df()
        if not configs.empty:
            _own_thresholds(configs)
            columns = [configs[c].astype(object).where(configs[c].notna(), None).tolist() for c in CONFIG_STATE]
            state.configs = {k: v for k, v in zip(zip(configs["account"], configs["stream"], configs["consumer"]),
                                                  zip(*columns))}
        if not latest.empty:
            rows = state.rows_of(list(zip(latest["account"], latest["stream"], latest["consumer"])))
            state.live[rows] = True
            for c in STATE:
                column = np.empty(len(latest), dtype=object)
                column[:] = latest[c].astype(object).where(latest[c].notna(), None).tolist() if c in latest else None
                state.state[c][rows] = column
            own = [thresholds.INPUT + name for name in thresholds.OVERRIDABLE]
            for row, key in zip(rows, zip(latest["account"], latest["stream"], latest["consumer"])):
                values = state.configs.get(key)
                if values is not None:
                    for c in own:
                        state.state[c][row] = values[CONFIG_STATE.index(c)]
        if not previous.empty:
            rows = state.rows_of(list(zip(previous["account"], previous["stream"], previous["consumer"])))
            state.written[rows] = True
            for c in KEPT_TEXT:
                state.kept_text[c][rows] = previous[c].astype(object).where(previous[c].notna(), None).to_numpy()
            for c in KEPT_NUMBERS:
                state.kept_numbers[c][rows] = pd.to_numeric(previous[c], errors="coerce").to_numpy(np.float64)
            state.kept_since[rows] = epoch(previous["since"])
            state.kept_judged_at[rows] = epoch(previous["judged_at"])
            state.calmer_since[rows] = epoch(previous["calmer_since"])
            state.kept_unhealthy_since[rows] = epoch(previous["unhealthy_since"])
            for c in ACTIVITY:
                state.activity[c][rows] = epoch(previous[c])
            for c in pull_rhythm.KEPT:
                state.waits[c][rows] = (epoch(previous[c]) if c == "pull_wait_ended"
                                        else pd.to_numeric(previous[c], errors="coerce").to_numpy(np.float64))
            state.activity_seeded[rows] = previous[list(ACTIVITY)].notna().any(axis=1).to_numpy()
            fresh = ~previous["reason"].astype(str).str.startswith(LAST_KNOWN).to_numpy()
            if fresh.any():
                state.stamped = float(np.nanmax(state.kept_judged_at[rows][fresh]))
        state.seed_activity(con, now)
        return state

    def seed_activity(self, con: duckdb.DuckDBPyConnection, now: dt.datetime) -> None:
        """Activity of the live consumers the store holds none for, from their stored samples since
        two health windows before their verdict began (consumer_activity.sql, as the Fleet page
        looked it up on every render before the collector kept it). Once per consumer."""
        n = len(self.window.keys)
        rows = np.flatnonzero(self.live[:n] & ~self.activity_seeded[:n])
        if len(rows) == 0:
            return
        began = np.where(np.isnan(self.kept_since[rows]), now.timestamp(), self.kept_since[rows])
        froms = stamps(began - 2 * self.window.window)
        keys = [self.window.keys[r] for r in rows]
        found = con.execute(sql.query("consumer_activity"), {
            "accounts": [k[0] for k in keys], "streams": [k[1] for k in keys], "consumers": [k[2] for k in keys],
            "froms": [t.to_pydatetime() for t in froms]}).df()
        if not found.empty:
            at = self.rows_of(list(zip(found["account"], found["stream"], found["consumer"])))
            for c in ACTIVITY:
                self.activity[c][at] = np.fmax(self.activity[c][at], epoch(found[c])) if c != "first_seen" else \
                    np.fmin(self.activity[c][at], epoch(found[c]))
        self.activity_seeded[rows] = True

    # -- what judging reads -------------------------------------------------------------------

    def features(self, now: dt.datetime, rows: np.ndarray) -> pd.DataFrame:
        """feature_columns as a frame (window_features.sql's columns, with `row`)."""
        return feature_frame(self.feature_columns(now, rows))

    def feature_columns(self, now: dt.datetime, rows: np.ndarray,
                        rhythm_after: float | np.ndarray | None = None) -> dict[str, np.ndarray]:
        """window_features.sql of the given rows that have samples in the window, as arrays with a
        `row` one (the window's own features, held equal to the SQL by tests/test_window_state.py).

        A large state goes in chunks of at most CHUNK_CELLS cells a pass, so that the passes'
        temporaries stay small however large the fleet (one pass over every row at once would
        hold temporaries the size of the whole window). Each chunk's compiled pass splits itself
        into parts, a thread per core (health/window_pass.py `window_pass_in_parts`), once the
        chunk is large enough for a hand-off to pay."""
        since = now.timestamp() - self.window.window
        self.window.horizon = since
        lo = first_column(self.window, since)
        per_chunk = max(CHUNK_CELLS // max(self.window.used - lo, 1), 64)
        if len(rows) <= per_chunk:
            return feature_columns(self.window, rows, since, lo, rhythm_after)
        chunks = -(-len(rows) // per_chunk)
        afters = (np.array_split(rhythm_after, chunks) if isinstance(rhythm_after, np.ndarray)
                  else [rhythm_after] * chunks)
        parts = [feature_columns(self.window, c, since, lo, after)
                 for c, after in zip(np.array_split(rows, chunks), afters)]
        found = [p for p in parts if p]
        if len(found) < 2:
            return found[0] if found else {}
        return {name: np.concatenate([p[name] for p in found]) for name in found[0]}

    def recent_activity(self, now: dt.datetime, rows: np.ndarray,
                        wait_floor: float = 0.0) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Each row's activity folded with what the window shows (consumer_activity.sql's rules on
        the samples in memory): the last sample with a pull waiting or the delivered sequence up
        from the sample before, the last with the ack floor up, the first sample seen, and its
        waits for a pull (health/pull_rhythm.py, under their own names); and each row's newest
        sample now folded in (for `folded`, once the judged cycle is kept). `wait_floor`: the shortest
        wait for a pull that counts towards a rhythm.

        Only the samples not folded into the kept activity yet are read (from the newest folded
        time on: a later reading may carry the same time), each with the sample before it:
        folding is a max (a min for first seen), so the older ones would change nothing. A
        reading sorted in among older ones (a clock that stepped back) has its row read again
        from the window's start."""
        w = self.window
        since = now.timestamp() - w.window
        lo, n = max(first_column(w, since) - 1, 0), w.used  # one sample before the window: its step
        out = {c: self.activity[c][rows].copy() for c in ACTIVITY}
        waits = {c: self.waits[c][rows] for c in pull_rhythm.WAITS}
        out.update(waits)
        folded = self.folded[rows].copy()
        if len(rows) == 0 or n <= lo:
            return out, folded
        if w.reordered:
            again = sorted(w.reordered)
            self.folded[again] = np.nan
            self.waits["pull_wait_from"][again] = np.nan  # the wait is followed again from the window's start
            folded = self.folded[rows].copy()
            waits = {c: self.waits[c][rows] for c in pull_rhythm.WAITS}
        pick = picked(rows)
        with np.errstate(invalid="ignore"):
            fresh = (w.t[lo:n, pick] >= np.nan_to_num(folded, nan=-np.inf)[None, :]).any(axis=1)
        if not fresh.any():
            return out, folded
        first_fresh = lo + int(np.argmax(fresh))
        before = ~np.isnan(w.t[lo:first_fresh, pick])  # the sample before each fresh one: its step
        has_before = before.any(axis=0)
        if has_before.any():
            lo += int(last_true(before)[has_before].min())
        else:
            lo = first_fresh
        t = w.t[lo:n, pick]
        valid = ~np.isnan(t)
        has_prev, irregular, p = previous_samples(valid)
        dcs = w.values["delivered_consumer_seq"][lo:n, pick]
        afs = w.values["ack_floor_stream_seq"][lo:n, pick]
        waiting = w.values["num_waiting"][lo:n, pick]

        def previous(a: np.ndarray) -> np.ndarray:  # as health.window.feature_columns: by column, then the rest
            return lagged(a, irregular, p)

        pulled = valid & ((waiting > 0) | (has_prev & (dcs > previous(dcs))))
        acked = has_prev & (afs > previous(afs))
        with np.errstate(invalid="ignore"):
            out["last_pull"] = np.fmax(out["last_pull"], np.where(pulled, t, -np.inf).max(axis=0))
            out["last_ack"] = np.fmax(out["last_ack"], np.where(acked, t, -np.inf).max(axis=0))
            out["first_seen"] = np.fmin(out["first_seen"], np.where(valid, t, np.inf).min(axis=0))
            folded = np.fmax(folded, np.where(valid, t, -np.inf).max(axis=0))
            fresh_cells = valid & (t > np.nan_to_num(self.folded[rows], nan=-np.inf)[None, :])
        out.update(self._fold_waits(waits, np.where(fresh_cells, t, np.nan), previous(np.where(valid, t, np.nan)),
                                    has_prev, w.values["num_pending"][lo:n, pick], dcs,
                                    w.times["delivered_last_active"][lo:n, pick], previous, wait_floor))
        folded[np.isinf(folded)] = np.nan
        for c in ACTIVITY:
            out[c][np.isinf(out[c])] = np.nan
        return out, folded

    def _fold_waits(self, waits: dict[str, np.ndarray], t: np.ndarray, before: np.ndarray, has_prev: np.ndarray,
                    pending: np.ndarray, dcs: np.ndarray, delivered_at: np.ndarray,
                    previous: Any, floor: float) -> dict[str, np.ndarray]:
        """The waits folded over the fresh samples (`t`, NaN elsewhere), moment by moment."""
        pending_before, dcs_before, at_before = previous(pending), previous(dcs), previous(delivered_at)
        with np.errstate(invalid="ignore"):
            delivered = has_prev & ((dcs > dcs_before) | (delivered_at > at_before))
        for k in np.flatnonzero(~np.isnan(t).all(axis=1)):
            waits = pull_rhythm.fold(waits, t[k], np.where(has_prev[k], before[k], np.nan),
                                     pending[k], np.where(has_prev[k], pending_before[k], np.nan), delivered[k],
                                     delivered_at[k], floor)
        return waits

