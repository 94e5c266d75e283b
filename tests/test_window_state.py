"""The collector's in-memory window (health/window.py) against window_features.sql, the
one definition, run by DuckDB over the same samples: generated histories with resets, recreated
consumers, missing readings, pins coming and going, cut by windows that start anywhere."""

from __future__ import annotations

import datetime as dt
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jetwatch.collectors import live_state
from jetwatch.collectors.live_state import LiveState
from jetwatch.core.clock import parse_rfc3339
from jetwatch.health import window_pass
from jetwatch.health.features import SAMPLE_FIELDS, window_features_sql
from jetwatch.health.onsets import ONSET_FEATURES, RHYTHMS
from jetwatch.health.window import FEATURES, NUMBERS, Lag, WindowState, _seconds, feature_columns, previous_samples
from tests.helpers import EDGES, server_time

T0 = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
KEY = ["account", "stream", "consumer"]


@st.composite
def histories(draw):
    """Cycles of readings for a few consumers: each cycle some consumers are read, their numbers
    move (the delivered sequence sometimes falls: a recreated consumer), pins change."""
    consumers = draw(st.integers(1, 4))
    cycles = draw(st.integers(1, 30))
    t, rows = 0.0, []
    state = {c: {"dcs": 0, "created": 0} for c in range(consumers)}
    for _ in range(cycles):
        t += draw(st.sampled_from([0.5, 1.0, 2.5, 5.0, 7.25]))
        for c in range(consumers):
            if draw(st.integers(0, 9)) == 0:
                continue  # not read this cycle
            s = state[c]
            move = draw(st.integers(0, 9))
            if move == 0:
                s["dcs"] = draw(st.integers(0, 3))  # falls: a reset
            elif move == 1:
                s["created"] += 1  # recreated under the same name
            else:
                s["dcs"] += draw(st.integers(0, 4))
            rows.append({
                "account": "A", "stream": "S", "consumer": f"c{c}",
                "ts": T0 + dt.timedelta(seconds=t),
                "created": None if draw(st.booleans()) and s["created"] == 0 else T0 + dt.timedelta(seconds=s["created"]),
                "num_pending": draw(st.one_of(st.none(), st.integers(0, 6))),
                "num_ack_pending": draw(st.integers(0, 5)), "num_waiting": draw(st.integers(0, 3)),
                "num_redelivered": draw(st.integers(0, 3)), "delivered_consumer_seq": s["dcs"],
                "delivered_stream_seq": s["dcs"] + draw(st.integers(0, 2)),
                "ack_floor_stream_seq": max(0, s["dcs"] - draw(st.integers(0, 3))),
                "paused": draw(st.booleans()),
                "pinned_id": draw(st.sampled_from([None, None, "pinA", "pinB"])),
                "oldest_unacked_age_seconds": draw(st.one_of(st.none(), st.floats(0, 1000))),
            })
    cut = draw(st.floats(0, t + 1))
    return pd.DataFrame(rows, columns=SAMPLE_FIELDS), T0 + dt.timedelta(seconds=cut)


def _by_cycle(frame: pd.DataFrame):
    for _, cycle in frame.groupby("ts", sort=True):
        yield {c: [None if isinstance(v, float) and np.isnan(v) else v for v in cycle[c].tolist()]
               for c in SAMPLE_FIELDS}


def _reference(frame: pd.DataFrame, since: dt.datetime) -> pd.DataFrame:
    frame = frame.assign(ts=pd.to_datetime(frame["ts"], utc=True), created=pd.to_datetime(frame["created"], utc=True),
                         pinned_id=frame["pinned_id"].astype("string"))
    inside = frame[frame["ts"] >= pd.Timestamp(since)]
    return window_features_sql(inside) if not inside.empty else pd.DataFrame(columns=KEY + FEATURES)


def _same(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    ours = ours.sort_values(KEY).reset_index(drop=True)
    theirs = theirs.sort_values(KEY).reset_index(drop=True)
    assert list(ours["consumer"]) == list(theirs["consumer"])
    for column in FEATURES:
        a, b = ours[column], theirs[column]
        if column == "last_ts":
            assert list(pd.to_datetime(a, utc=True)) == list(pd.to_datetime(b, utc=True)), column
        elif a.dtype == bool or b.dtype == bool:
            assert list(a.astype(bool)) == list(b.astype(bool)), column
        else:
            # DuckDB's regr_slope sums over raw epoch seconds (about 1.8e9) and keeps ~7 digits;
            # the window centres the times first: the two agree to that precision.
            trends = ("pending_slope", "backlog_slope", "backlog_slope_se")
            tolerance = {"rtol": 1e-5, "atol": 1e-6} if column in trends else {"rtol": 1e-9, "atol": 1e-9}
            assert np.allclose(a.astype(float), b.astype(float), equal_nan=True, **tolerance), \
                (column, list(a), list(b))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_window_features_kept_in_memory_equal_the_sql_definition(history):
    frame, since = history
    state = WindowState(window=300, columns=4)  # small: compaction and growth happen on the way
    for cycle in _by_cycle(frame):
        state.add(cycle)
    _same(state.features(since), _reference(frame, since))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from([0.0, 5.0, 20.0, np.inf]))
def test_rhythms_asked_for_only_where_a_condition_held_long_enough_leave_every_other_feature_alone(history, after):
    """A judge asks for each consumer's rhythms only where one of its conditions has held
    `rhythm_after` or longer, or where messages were redelivered: there they are the rhythms of
    the full computation, elsewhere missing, and every other feature is the same."""
    frame, since = history
    state = WindowState(window=300, columns=4)
    for cycle in _by_cycle(frame):
        state.add(cycle)
    at, rows = since.timestamp(), np.arange(len(state.keys))
    full = feature_columns(state, rows, at)
    lazy = feature_columns(state, rows, at, rhythm_after=after)
    if not full:
        assert not lazy
        return
    onsets = [full[c] for c in ("stall_onset", "idle_onset", "pin_idle_onset", "age_rise_onset", "behind_onset")]
    held = full["last_seconds"] - np.fmin.reduce([*onsets, np.fmax(full["acked_last_active"], full["first_ts"])])
    inside = frame[frame["ts"] >= since]
    redelivered = [inside[inside["consumer"] == c]["num_redelivered"].max() > 0 for c in full["consumer"]]
    asked = (held >= after) | np.array(redelivered)
    for name in full:
        if name in RHYTHMS:
            assert np.allclose(lazy[name][asked], full[name][asked], equal_nan=True), name
            assert np.isnan(lazy[name][~asked]).all(), name
        elif full[name].dtype == object:
            assert list(lazy[name]) == list(full[name]), name
        else:
            assert np.allclose(lazy[name].astype(float), full[name].astype(float), equal_nan=True), name


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), histories())
def test_window_seeded_from_the_store_then_fed_cycles_equals_the_sql_definition(first, second):
    """A restarted collector loads the window's stored samples, then adds cycles."""
    stored, _ = first
    later, since = second
    later = later.assign(ts=later["ts"] + (stored["ts"].max() - T0 if not stored.empty else dt.timedelta(0)))
    since = since + (stored["ts"].max() - T0 if not stored.empty else dt.timedelta(0))
    state = WindowState(window=300)
    state.seed(stored)
    for cycle in _by_cycle(later):
        state.add(cycle)
    both = pd.concat([stored, later], ignore_index=True)
    _same(state.features(since - dt.timedelta(seconds=20)), _reference(both, since - dt.timedelta(seconds=20)))


def test_readings_out_of_time_order_are_judged_in_time_order():
    """A server clock that steps back (or a leader change between servers whose clocks differ)
    delivers a reading older than the previous one; the window sorts it in, as the SQL does."""
    rows = []
    for i, seconds in enumerate([0, 5, 10, 7, 15]):
        rows.append({"account": "A", "stream": "S", "consumer": "c", "ts": T0 + dt.timedelta(seconds=seconds),
                     "created": None, "num_pending": [1, 5, 2, 9, 3][i], "num_ack_pending": 0, "num_waiting": 0,
                     "num_redelivered": 0, "delivered_consumer_seq": i, "delivered_stream_seq": i,
                     "ack_floor_stream_seq": 0, "paused": False, "pinned_id": None})
    frame = pd.DataFrame(rows, columns=SAMPLE_FIELDS)
    state = WindowState(window=300)
    for row in frame.to_dict("records"):
        state.add({c: [row[c]] for c in SAMPLE_FIELDS})
    _same(state.features(T0), _reference(frame, T0))


def test_consumers_no_longer_watched_are_forgotten_and_the_rest_kept():
    rows = [{"account": "A", "stream": "S", "consumer": c, "ts": T0 + dt.timedelta(seconds=s), "created": None,
             "num_pending": s, "num_ack_pending": 0, "num_waiting": 0, "num_redelivered": 0,
             "delivered_consumer_seq": s, "delivered_stream_seq": s, "ack_floor_stream_seq": 0, "paused": False,
             "pinned_id": None} for s in range(0, 30, 5) for c in ("keep", "gone")]
    frame = pd.DataFrame(rows, columns=SAMPLE_FIELDS)
    state = WindowState(window=300)
    for cycle in _by_cycle(frame):
        state.add(cycle)
    state.forget({("A", "S", "keep")})
    assert list(state.features(T0)["consumer"]) == ["keep"]
    _same(state.features(T0), _reference(frame[frame["consumer"] == "keep"], T0))


@pytest.mark.parametrize("missed, chunk, cores", [(True, None, 1), (False, None, 1), (True, 9_000, 1), (True, None, 3)],
                         ids=["readings-missed", "every-reading", "in-chunks", "in-parts-on-three-cores"])
def test_a_large_state_judged_in_chunks_equals_the_sql_definition(missed, chunk, cores, monkeypatch):
    """A fleet larger than CHUNK_CELLS cells a pass goes in chunks of consumers (here CHUNK_CELLS
    is made small: about 1,000 consumers of nine samples a chunk, five chunks); a consumer with
    readings only before the window sits in one of them. With every consumer read every cycle,
    nothing is masked out (the path the collector mostly takes). On a machine of several cores a
    pass goes in parts of whole blocks, one thread each (three here, the last one shorter)."""
    if chunk is not None:
        monkeypatch.setattr(live_state, "CHUNK_CELLS", chunk)
    monkeypatch.setattr(window_pass, "_cores", lambda: cores)
    monkeypatch.setattr(window_pass, "PART_MIN", 1_000)
    consumers = 4_101
    rng = np.random.default_rng(7)
    rows = []
    for cycle in range(14):
        for c in range(consumers):
            if missed and c == consumers // 2 and cycle > 2:
                continue  # read only early on: no samples in the window, at the seam
            if missed and rng.integers(0, 25) == 0:
                continue  # a reading missed
            dcs = cycle * (c % 7) - (5 if missed and c % 97 == 0 and cycle > 9 else 0)  # a few reset
            rows.append({"account": "A", "stream": f"S{c % 13}", "consumer": f"c{c}",
                         "ts": T0 + dt.timedelta(seconds=5 * cycle), "created": None,
                         "num_pending": int(rng.integers(0, 9)), "num_ack_pending": int(rng.integers(0, 4)),
                         "num_waiting": int(rng.integers(0, 3)), "num_redelivered": int(rng.integers(0, 2)),
                         "delivered_consumer_seq": dcs, "delivered_stream_seq": dcs, "ack_floor_stream_seq": max(dcs - 1, 0),
                         "paused": bool(c % 31 == 0), "pinned_id": [None, "pinA", "pinB"][int(rng.integers(0, 3))],
                         "oldest_unacked_age_seconds": float(rng.integers(0, 50))})
    frame = pd.DataFrame(rows, columns=SAMPLE_FIELDS)
    state = LiveState(window_seconds=40)
    for cycle in _by_cycle(frame):
        state.add(cycle)
    now = T0 + dt.timedelta(seconds=65)
    ours = state.features(now, np.arange(len(state.keys)))
    assert consumers - 1 <= len(ours) <= consumers
    _same(ours.drop(columns="row"), _reference(frame, now - dt.timedelta(seconds=40)))


def test_a_long_run_over_a_short_window_moves_its_columns_in_place_and_still_equals_the_sql_definition():
    """Columns that fall out of the window are dropped by moving the rest left in the same arrays
    (no new arrays every few cycles at 100,000 consumers); what the window holds stays exact."""
    rng = np.random.default_rng(3)
    rows = []
    state = WindowState(window=20, columns=4)
    arrays = set()
    for cycle in range(120):
        at = T0 + dt.timedelta(seconds=5 * cycle)
        batch = [{"account": "A", "stream": "S", "consumer": f"c{c}", "ts": at, "created": None,
                  "num_pending": int(rng.integers(0, 5)), "num_ack_pending": int(rng.integers(0, 3)),
                  "num_waiting": int(rng.integers(0, 2)), "num_redelivered": 0,
                  "delivered_consumer_seq": cycle, "delivered_stream_seq": cycle, "ack_floor_stream_seq": cycle // 2,
                  "paused": False, "pinned_id": [None, "p1"][int(rng.integers(0, 2))],
                  "oldest_unacked_age_seconds": None}
                 for c in range(3) if not (c == 2 and cycle % 7 == 0)]  # c2 missed now and then
        rows += batch
        frame = pd.DataFrame(batch, columns=SAMPLE_FIELDS)
        state.add(next(_by_cycle(frame)))
        since = at - dt.timedelta(seconds=20)
        ours = state.features(since)  # as the collector judges every cycle: the horizon moves on
        if cycle % 10 == 9:
            _same(ours, _reference(pd.DataFrame(rows, columns=SAMPLE_FIELDS), since))
        if cycle >= 60:
            arrays.add(id(state.t))
    assert state.used < 20 and len(arrays) == 1  # compacted many times since, never reallocated


def test_growing_the_window_holds_at_most_one_array_twice_at_once():
    """At 100,000 consumers the window's arrays hold hundreds of MB: when they grow, the old and
    the new copy of every array at once was the collector's peak. One array at a time instead."""
    consumers = 5_000
    state = WindowState(window=300, columns=16)

    def cycle(k: int) -> dict:
        at = T0 + dt.timedelta(seconds=10 * k)
        return {"account": ["A"] * consumers, "stream": ["S"] * consumers,
                "consumer": [f"c{c}" for c in range(consumers)], "ts": [at] * consumers, "created": [None] * consumers,
                **{name: [k] * consumers for name in NUMBERS}, "paused": [False] * consumers,
                "pinned_id": [None] * consumers}

    tracemalloc.start()  # before the arrays are made, so that letting one go counts
    try:
        for k in range(16):
            state.add(cycle(k))
        batch = cycle(16)
        held = sum(a.nbytes for a in (state.t, state.created, state.paused, state.pins, *state.values.values()))
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        state.add(batch)  # the arrays are full: they grow
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    arrays = [state.t, state.created, state.paused, state.pins, *state.values.values()]
    growth = sum(a.nbytes for a in arrays) - held
    assert growth > 0
    # What the arrays grew by, one array held twice, and the cycle's own small columns.
    assert peak - before < growth + 2 * max(a.nbytes for a in arrays), (peak - before, growth)


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(server_time(), st.sampled_from(EDGES), st.none()), min_size=1, max_size=8), st.booleans())
def test_the_windows_times_are_parse_rfc3339s_readings_in_epoch_seconds(times, in_range):
    """A cycle's times go into the window parsed by Arrow where it takes the whole column (the
    server's times), one by one otherwise (the zero time, years past 2262: pandas, which parsed them
    all before, refused those and failed the cycle's judging); either way each is parse_rfc3339's
    reading, to the microsecond, as seconds since the epoch."""
    if in_range:
        times = [t for t in times if t is None or dt.datetime(1970, 1, 2, tzinfo=dt.UTC)
                 < parse_rfc3339(t) < dt.datetime(2262, 1, 1, tzinfo=dt.UTC)] or [None]
    expected = [np.nan if t is None else (parse_rfc3339(t) - EPOCH) // dt.timedelta(microseconds=1) / 1e6
                for t in times]
    np.testing.assert_array_equal(_seconds(list(times)), np.array(expected, dtype=np.float64))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 12), st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_a_lag_read_at_one_sample_or_for_some_consumers_equals_the_whole_lag_read_there(samples, consumers, seed):
    """Lag.at and Lag.sub, which onsets use to read a few consumers or one sample each, against
    the lag of every sample of every consumer, over windows with gaps (missed readings)."""
    rng = np.random.default_rng(seed)
    valid = rng.random((samples, consumers)) < 0.7
    values = np.where(valid, rng.random((samples, consumers)), np.nan)
    _, irregular, prev = previous_samples(valid)
    lag = Lag(irregular, prev)
    whole = lag(values)
    rows = rng.integers(0, samples, consumers)
    assert np.array_equal(lag.at(values, rows), whole[rows, np.arange(consumers)], equal_nan=True)
    cols = np.flatnonzero(rng.random(consumers) < 0.5)
    assert np.array_equal(lag.sub(cols)(values[:, cols]), whole[:, cols], equal_nan=True)


def test_each_output_of_the_compiled_pass_is_read_under_its_own_name():
    """The pass writes each feature into a row named by a constant; the caller reads the rows by
    the names in FLOATS and INTEGERS: the two lists of constants must follow the names."""
    from jetwatch.health import window_pass

    for names in (window_pass.FLOATS, window_pass.INTEGERS):
        assert [getattr(window_pass, name.upper()) for name in names] == list(range(len(names)))
    written = set(window_pass.FLOATS) | set(window_pass.INTEGERS)
    assert set(FEATURES) | set(ONSET_FEATURES) <= written
