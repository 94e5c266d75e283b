"""The collector judges each cycle from its in-memory state (collectors/live_state.py) and writes
only the verdicts that changed. Held against a judgement from a fresh start after every cycle
(the state seeded from the store, as `judge_cycle` and a restarted collector do): nothing the
fresh judgement sees may differ from what the collector kept, nothing written may be unchanged,
and each consumer's last pull, last ack and first seen equal consumer_activity.sql over every
stored sample (the page's lookup before the collector kept them). Generated histories cross
window boundaries, reset, pause, pin and lose a stream's listing now and then."""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jetwatch import sql
from jetwatch.collectors.judging import LAST_KNOWN, event_counts, judge, judge_stored_cycle, load_window
from jetwatch.collectors.live_state import NUMERIC_STATE, LiveState
from jetwatch.dashboard import data
from jetwatch.health.columns import floats
from jetwatch.health.rules import Thresholds
from jetwatch.store import writes
from jetwatch.store.database import Store

T0 = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
TH = Thresholds(health_window=40, health_min_samples=3, health_min_span=10)
KEY = ["account", "stream", "consumer"]
NUMBERS = ["samples", "delivered_per_second", "acked_per_second", "redelivered_per_second",
           "eta_seconds", "eta_low_seconds", "eta_high_seconds"]


def _sample(at: dt.datetime, stream: str, consumer: str, **fields) -> dict:
    base = {"ts": at.isoformat(), "server": "s", "cluster": None, "domain": None, "account": "A", "stream": stream,
            "consumer": consumer, "created": None, "num_pending": 0, "num_ack_pending": 0, "num_waiting": 0,
            "num_redelivered": 0, "delivered_consumer_seq": 0, "delivered_stream_seq": 0,
            "delivered_last_active": None, "ack_floor_consumer_seq": 0, "ack_floor_stream_seq": 0,
            "ack_floor_last_active": None, "paused": False, "pause_until": None, "pin_group": None,
            "pinned_id": None, "pinned_ts": None, "leader": None}
    base.update(fields)
    return base


@st.composite
def histories(draw):
    """Cycles 3-12 s apart over a 40 s window; four consumers in two streams whose numbers move,
    stall, reset and pause; now and then a stream's listing fails (its consumers keep their state)."""
    consumers = [("S1", "a"), ("S1", "b"), ("S2", "c"), ("S2", "d")]
    state = {k: {"dcs": 0, "afs": 0} for k in consumers}
    t, cycles = 0.0, []
    for _ in range(draw(st.integers(4, 16))):
        t += draw(st.sampled_from([3.0, 5.0, 5.0, 7.5, 12.0]))
        failed = draw(st.sampled_from([None, None, None, None, "S1", "S2"]))
        rows = []
        for stream, consumer in consumers:
            if stream == failed:
                continue
            s = state[stream, consumer]
            mode = draw(st.integers(0, 9))
            if mode == 0:
                s["dcs"] = draw(st.integers(0, 2))  # recreated: the sequences fall
                s["afs"] = 0
            elif mode <= 3:
                pass  # nothing moves
            else:
                s["dcs"] += draw(st.integers(1, 5))
                s["afs"] = min(s["dcs"], s["afs"] + draw(st.integers(0, 5)))
            rows.append(_sample(T0 + dt.timedelta(seconds=t), stream, consumer,
                                num_pending=draw(st.integers(0, 6)), num_ack_pending=draw(st.integers(0, 4)),
                                num_waiting=draw(st.sampled_from([0, 0, 1])), delivered_consumer_seq=s["dcs"],
                                delivered_stream_seq=s["dcs"], ack_floor_consumer_seq=s["afs"],
                                ack_floor_stream_seq=s["afs"], paused=draw(st.integers(0, 7)) == 0,
                                pinned_id=draw(st.sampled_from([None, "p1", "p2"]))))
        cycles.append((T0 + dt.timedelta(seconds=t), rows, [("A", failed)] if failed else []))
    return cycles


CONFIGS = [{"ts": T0.isoformat(), "account": "A", "stream": s, "consumer": c, "created": None, "config_hash": "h",
            "is_pull": True, "filtered": False, "ack_policy": "explicit", "max_waiting": 4, "max_ack_pending": 4,
            "ack_wait_ns": None, "max_deliver": None, "priority_policy": "pinned_client" if c == "a" else None,
            "priority_groups": ["g"] if c == "a" else None, "priority_timeout_ns": None, "config_json": "{}"}
           for s, c in (("S1", "a"), ("S1", "b"), ("S2", "c"), ("S2", "d"))]


def _fresh_on(con: duckdb.DuckDBPyConnection, now: dt.datetime):
    """What a collector starting now would judge: its state seeded from the store."""
    return judge(LiveState.seeded(con, now, TH.health_window), now, TH, event_counts(con, now, TH))


def _fresh(store: Store, now: dt.datetime):
    return store.read(lambda con: _fresh_on(con, now))


def _activity_on(con: duckdb.DuckDBPyConnection, keys: list[tuple[str, str, str]]) -> pd.DataFrame:
    return con.execute(sql.query("consumer_activity"), {
        "accounts": [k[0] for k in keys], "streams": [k[1] for k in keys], "consumers": [k[2] for k in keys],
        "froms": [T0 - dt.timedelta(days=1)] * len(keys)}).df().set_index(KEY)


def _activity_sql(store: Store, keys: list[tuple[str, str, str]]) -> pd.DataFrame:
    return store.read(lambda con: _activity_on(con, keys))


def _after_cycle(store: Store, now: dt.datetime, live: list[tuple[str, str, str]]):
    """The stored verdicts, a fresh start's judgement and consumer_activity.sql, read on one
    read-only connection (nothing is written between them): one open of the file, not three."""
    return store.read(lambda con: (con.execute(sql.query("verdicts_previous")).df(), _fresh_on(con, now),
                                   _activity_on(con, live)))


def _stored(store: Store, state: LiveState, samples: dict, kept: list = (), configs: list = ()) -> None:
    """A cycle of account A as the collector keeps it: written to the store, then into its state."""
    def tx(con):
        writes.write_configs(con, list(configs))
        writes.write_samples(con, ["A"], samples, kept)

    store.write(tx)
    state.add(samples, ["A"], kept, configs)


def _same_number(a: object, b: object) -> bool:
    a, b = float("nan") if a is None else float(a), float("nan") if b is None else float(b)
    return (np.isnan(a) and np.isnan(b)) or a == b or abs(a - b) <= 1e-3 * abs(a)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(histories())
def test_the_collectors_state_judges_as_a_fresh_start_and_writes_only_what_changed(tmp_path_factory, history):
    store = Store(str(tmp_path_factory.mktemp("live") / "jetwatch.duckdb"))
    store.migrate()
    state = load_window(store, T0, TH)
    for i, (now, rows, kept) in enumerate(history):
        samples = {k: [r[k] for r in rows] for k in rows[0]} if rows else {k: [] for k in _sample(now, "S", "x")}
        configs = CONFIGS if i == 0 else []
        _stored(store, state, samples, kept, configs)
        before = store.query("verdicts_previous").set_index(KEY)
        judged = judge_stored_cycle(store, now, TH, state)

        # Nothing written is unchanged: each written row differs from the row it replaced.
        for row in judged.written.to_pylist():
            key = (row["account"], row["stream"], row["consumer"])
            if key not in before.index:
                continue
            old = before.loc[key]
            quiet = row["verdict"] in ("NO_PULLERS", "STALLED")
            assert (row["verdict"] != old["verdict"] or row["reason"] != old["reason"]
                    or row["eta_state"] != (None if pd.isna(old["eta_state"]) else old["eta_state"])
                    or any(not _same_number(row[c], old[c]) for c in NUMBERS)
                    or json.loads(row["findings"]) != json.loads(old["findings"])
                    or json.loads(row["config_findings"]) != json.loads(old["config_findings"] or "[]")
                    or (row["calmer_since"] is None) != pd.isna(old["calmer_since"])
                    or (row["calmer_since"] is not None and pd.Timestamp(row["calmer_since"]) != pd.Timestamp(old["calmer_since"]))
                    or any(not _same_number(row[c], old[c]) for c in ("pull_wait_last", "pull_wait_prev",
                                                                        "pull_waits_in_row"))
                    or (row["pull_wait_ended"] is None) != pd.isna(old["pull_wait_ended"])
                    or (quiet and any(pd.Timestamp(row[c]) != pd.Timestamp(old[c]) if row[c] is not None
                                      else not pd.isna(old[c]) for c in ("last_pull", "last_ack", "first_seen")))), \
                (key, row)

        live = [k for k, on in zip(state.keys, state.live) if on]
        stamped, fresh, found = _after_cycle(store, now, live)

        # Every verdict judged afresh carries this cycle's time, written or not; a held one its own.
        fresh_rows = ~stamped["reason"].str.startswith(LAST_KNOWN)
        assert (pd.to_datetime(stamped.loc[fresh_rows, "judged_at"], utc=True) == pd.Timestamp(now)).all()

        # A fresh start judging now finds nothing to change: the collector kept what it would.
        assert fresh.written.num_rows == 0, fresh.written.to_pandas().to_dict("records")
        assert fresh.gone.num_rows == 0 and fresh.changes.empty

        # The activity in memory is consumer_activity.sql over every stored sample.
        for key in live:
            row = state.window.rows[key]
            for column in ("last_pull", "last_ack", "first_seen"):
                ours = state.activity[column][row]
                theirs = found[column].get(key) if key in found.index else None
                theirs = float("nan") if theirs is None or pd.isna(theirs) else pd.Timestamp(theirs).timestamp()
                assert (np.isnan(ours) and np.isnan(theirs)) or abs(ours - theirs) < 1e-6, (i, key, column, ours, theirs)


def test_the_fleet_reads_the_kept_activity_and_looks_it_up_for_rows_written_before_it_was_kept(tmp_path):
    store = Store(str(tmp_path / "jetwatch.duckdb"))
    th = Thresholds(health_window=30, health_min_samples=3, health_min_span=5)
    for i in range(12):
        at = T0 + dt.timedelta(seconds=5 * i)
        pulling = i < 4  # then work waits and nobody pulls
        rows = [_sample(at, "S", "idle", num_pending=5, num_waiting=1 if pulling else 0,
                        delivered_consumer_seq=min(i, 3), delivered_stream_seq=min(i, 3),
                        ack_floor_consumer_seq=min(i, 3), ack_floor_stream_seq=min(i, 3))]
        samples = {k: [r[k] for r in rows] for k in rows[0]}

        def tx(con, samples=samples, at=at):
            writes.write_samples(con, ["A"], samples)
            from jetwatch.collectors.judging import judge_cycle
            judge_cycle(con, at, th)

        store.write(tx)
    now = T0 + dt.timedelta(seconds=55)
    kept = data.fleet(store, th, now=now).consumers.iloc[0]
    assert kept["verdict"] == "NO_PULLERS"
    assert kept["last_pull"] == T0 + dt.timedelta(seconds=15) and kept["first_seen"] == T0
    assert kept["last_ack"] == T0 + dt.timedelta(seconds=15)
    store.write(lambda con: con.execute("UPDATE verdicts_current SET last_pull = NULL, last_ack = NULL, "
                                        "first_seen = NULL"))
    looked_up = data.fleet(store, th, now=now).consumers.iloc[0]
    assert looked_up["last_pull"] == kept["last_pull"] and looked_up["last_ack"] == kept["last_ack"]
    assert pd.notna(looked_up["first_seen"])  # the oldest sample looked at: "not since at least then"


def test_a_config_written_before_the_consumers_first_sample_still_sets_its_limits(tmp_path):
    """The first cycle writes every config, but stream S2's listing failed, so consumer c has no
    sample and no live row yet. When c is sampled at its max_ack_pending, the collector's state
    judges it SATURATED, as the store (and a fresh start) does: it did not, having dropped the
    config with c's row."""
    store = Store(str(tmp_path / "jetwatch.duckdb"))
    store.migrate()
    state = load_window(store, T0, TH)
    for i in range(6):
        now = T0 + dt.timedelta(seconds=5 * i)
        rows = [_sample(now, "S1", "a", delivered_consumer_seq=i, delivered_stream_seq=i,
                        ack_floor_consumer_seq=i, ack_floor_stream_seq=i, num_waiting=1)]
        if i:
            rows.append(_sample(now, "S2", "c", num_ack_pending=4, num_pending=3, num_waiting=1, delivered_consumer_seq=i + 4,
                                delivered_stream_seq=i + 4, ack_floor_consumer_seq=i, ack_floor_stream_seq=i))
        kept = [] if i else [("A", "S2")]
        samples = {k: [r[k] for r in rows] for k in rows[0]}
        configs = CONFIGS if i == 0 else []
        _stored(store, state, samples, kept, configs)
        judge_stored_cycle(store, now, TH, state)
    kept_verdicts = store.query("verdicts_previous").set_index(KEY)
    assert kept_verdicts.loc[("A", "S2", "c"), "verdict"] == "SATURATED"
    assert _fresh(store, now).written.num_rows == 0


def test_activity_kept_cycle_by_cycle_counts_steps_across_gaps_and_readings_out_of_order(tmp_path):
    """Each cycle folds only the samples not folded yet: a pull seen across a gap of missed cycles
    (its sample before lies well back) and a reading older than the one before it (a clock that
    stepped back: the row is read again) count as consumer_activity.sql counts them."""
    store = Store(str(tmp_path / "jetwatch.duckdb"))
    store.migrate()
    state = load_window(store, T0, TH)
    # Per cycle, (seconds, {consumer: (delivered sequence, ack floor)}); a consumer left out was
    # missed. "late"'s reading at 22 s arrives after the one at 25 s and is the only one whose ack
    # floor moved; "gap" is missed twice, then has pulled.
    cycles = [(0, {"gap": (1, 0), "late": (0, 0)}), (5, {"gap": (1, 0), "late": (0, 0)}),
              (20, {"gap": (1, 0), "late": (0, 0)}), (25, {"gap": (1, 0), "late": (0, 0)}), (22, {"late": (0, 2)}),
              (30, {"late": (0, 0)}), (35, {"late": (0, 0)}), (40, {"gap": (4, 0), "late": (0, 0)}),
              (45, {"gap": (4, 0), "late": (0, 0)})]
    keys = [("A", "S1", "gap"), ("A", "S1", "late"), ("A", "S1", "steady")]
    for seconds, read in cycles:
        now = T0 + dt.timedelta(seconds=seconds)
        rows = [_sample(now, "S1", "steady", delivered_consumer_seq=seconds, delivered_stream_seq=seconds)]
        rows += [_sample(now, "S1", name, delivered_consumer_seq=dcs, delivered_stream_seq=dcs,
                         ack_floor_consumer_seq=afs, ack_floor_stream_seq=afs) for name, (dcs, afs) in read.items()]
        samples = {k: [r[k] for r in rows] for k in rows[0]}
        kept = [k for k in keys if k[2] != "steady" and k[2] not in read]
        _stored(store, state, samples, kept)
        judge_stored_cycle(store, max(now, T0 + dt.timedelta(seconds=25)), TH, state)
    found = _activity_sql(store, keys)
    for key in keys:
        for column in ("last_pull", "last_ack", "first_seen"):
            ours = state.activity[column][state.window.rows[key]]
            theirs = found.loc[key, column]
            theirs = float("nan") if pd.isna(theirs) else pd.Timestamp(theirs).timestamp()
            assert ours == theirs or (np.isnan(ours) and np.isnan(theirs)), (key, column, ours, theirs)
    assert state.activity["last_pull"][state.window.rows[keys[0]]] == (T0 + dt.timedelta(seconds=40)).timestamp()
    assert state.activity["last_ack"][state.window.rows[keys[1]]] == (T0 + dt.timedelta(seconds=22)).timestamp()


def test_a_later_reading_with_the_time_already_folded_still_counts(tmp_path):
    """A server that stamps two cycles alike (or a sample without its own time, stamped by the
    collector): the second reading is folded all the same; here it is the only pull."""
    store = Store(str(tmp_path / "jetwatch.duckdb"))
    store.migrate()
    state = load_window(store, T0, TH)
    for seconds, dcs in ((0, 1), (5, 1), (5, 3)):
        now = T0 + dt.timedelta(seconds=seconds)
        rows = [_sample(now, "S1", "a", delivered_consumer_seq=dcs, delivered_stream_seq=dcs)]
        samples = {k: [r[k] for r in rows] for k in rows[0]}
        _stored(store, state, samples)
        judge_stored_cycle(store, now, TH, state)
    assert state.activity["last_pull"][state.window.rows[("A", "S1", "a")]] == (T0 + dt.timedelta(seconds=5)).timestamp()


def test_a_kept_verdict_removed_behind_the_collectors_back_is_written_whole_again(tmp_path):
    """Most cycles only a verdict's numbers move (a drain ETA), and only the numbers are written;
    a row that is not there to update (another writer removed it) is written whole instead."""
    store = Store(str(tmp_path / "jetwatch.duckdb"))
    store.migrate()
    state = load_window(store, T0, TH)
    judged = None
    for i in range(10):
        at = T0 + dt.timedelta(seconds=5 * i)
        samples = [_sample(at, "S1", "a", num_pending=100 - 9 * i, num_ack_pending=1, num_waiting=1,
                           delivered_consumer_seq=10 * i, delivered_stream_seq=10 * i,
                           ack_floor_consumer_seq=10 * i, ack_floor_stream_seq=10 * i, pin_group="g",
                           pinned_id="p1")]
        _stored(store, state, {k: [r[k] for r in samples] for k in samples[0]}, configs=CONFIGS if i == 0 else [])
        if i == 8:
            store.write(lambda con: con.execute("DELETE FROM verdicts_current"))
        judged = judge_stored_cycle(store, at, TH, state)
        if i >= 4:  # judged long enough: the words stay, the ETA moves with the backlog
            assert judged.written.num_rows == 1 and judged.numbers_only.tolist() == [True], i
    kept = store.query("verdicts_previous")
    assert len(kept) == 1 and kept["verdict"].iloc[0] == "OK"
    assert kept["eta_seconds"].iloc[0] == pytest.approx(judged.written.to_pylist()[0]["eta_seconds"])
    assert _fresh(store, T0 + dt.timedelta(seconds=45)).written.num_rows == 0


def test_a_consumer_deleted_and_recreated_is_judged_on_its_own_samples_from_then(tmp_path):
    """NO_PULLERS under one `created`; the consumer is deleted and recreated under its name (a new
    `created`, its sequences from zero, the stream's 20 messages pending again) and a worker pulls
    it. The old incarnation's verdict is neither held ("last known") nor eased into: the new one
    is COLLECTING at once, saying it was recreated, since its first sample, then OK on its own
    samples (before: NO_PULLERS held for the new consumer's first samples, then for the clearing
    time, its since the old incident's). A fresh start agrees after every cycle."""
    store = Store(str(tmp_path / "jetwatch.duckdb"))
    store.migrate()
    state = load_window(store, T0, TH)
    old, new = (T0 - dt.timedelta(hours=1)).isoformat(), (T0 + dt.timedelta(seconds=29)).isoformat()
    seen = []
    for i in range(10):
        now = T0 + dt.timedelta(seconds=5 * i)
        if i < 6:  # pulled at first, then nobody pulls while 5 messages wait
            row = _sample(now, "S1", "a", created=old, num_pending=5, num_waiting=1 if i == 0 else 0,
                          delivered_consumer_seq=10, delivered_stream_seq=10, ack_floor_consumer_seq=10,
                          ack_floor_stream_seq=10)
        else:  # recreated: from zero, the stream replayed, a worker pulling and acknowledging
            done = 20 * (i - 6)
            row = _sample(now, "S1", "a", created=new, num_pending=max(20 - done, 0) + 1, num_waiting=1,
                          delivered_consumer_seq=done, delivered_stream_seq=done, ack_floor_consumer_seq=done,
                          ack_floor_stream_seq=done)
        _stored(store, state, {k: [v] for k, v in row.items()}, configs=CONFIGS if i == 0 else [])
        judge_stored_cycle(store, now, TH, state)
        kept = store.query("verdicts_previous").set_index(KEY).loc[("A", "S1", "a")]
        seen.append((i, kept["verdict"], pd.Timestamp(kept["since"]), kept["reason"]))
        assert _fresh(store, now).written.num_rows == 0, i
    assert seen[5][1] == "NO_PULLERS", seen
    recreated_at = T0 + dt.timedelta(seconds=30)
    assert seen[6][1] == "COLLECTING" and seen[6][3].startswith("recreated (seen "), seen[6]
    assert not any(s[3].startswith(LAST_KNOWN) for s in seen), seen
    assert [s[1] for s in seen[6:]] == ["COLLECTING", "COLLECTING", "OK", "OK"], seen
    assert all(s[2] >= recreated_at for s in seen[6:]), seen


def test_the_numbers_judging_reads_follow_every_change_of_the_state():
    """LiveState.numbers keeps the limits and counts judging reads converted between changes:
    after each kind of change (a cycle's samples, a changed config, a consumer gone and its row
    forgotten, the arrays grown for new consumers) each equals its column converted afresh."""
    state = LiveState(TH.health_window)

    def same_as_converted_afresh() -> None:
        for c in NUMERIC_STATE:
            assert np.array_equal(state.numbers(c), floats(state.state[c]), equal_nan=True), c

    def cycle(at: float, pending: dict[str, int], configs: list[dict] = ()) -> None:
        samples = [_sample(T0 + dt.timedelta(seconds=at), "S1", c, num_pending=n, num_ack_pending=n % 3)
                   for c, n in pending.items()]
        state.add({k: [s[k] for s in samples] for k in samples[0]}, ["A"], configs=list(configs))
        same_as_converted_afresh()

    cycle(0, {"a": 1, "b": 2}, CONFIGS[:2])
    cycle(5, {"a": 3, "b": 4}, [{**CONFIGS[1], "max_ack_pending": 8, "ack_wait_ns": 30_000_000_000,
                                 "threshold_stalled_after": 45.0}])
    cycle(10, {"a": 5})  # b is no longer listed: not live
    state.forget_gone()
    same_as_converted_afresh()
    cycle(15, {"a": 6, **{f"n{i}": i for i in range(100)}})  # the arrays grow
    cycle(20, {"a": 7, "b": 1})  # b again: its row new, its config the one kept


def _cycle(state: LiveState, at: dt.datetime, consumers: tuple[str, ...]) -> list[tuple[str, str, str]]:
    samples = [_sample(at, "S1", c) for c in consumers]
    columns = {k: [s[k] for s in samples] for k in _sample(at, "S1", "x")}
    return state.add(columns, ["A"], (), CONFIGS[:2] if at == T0 else [], at=at.timestamp())


def _live(state: LiveState) -> set[str]:
    return {state.keys[r][2] for r in np.flatnonzero(state.live[:len(state.keys)])}


@pytest.mark.parametrize(("removed", "watched", "expected_live", "expected_unlisted"), [
    # No longer listed, nothing said it was removed: held, since its last sample.
    (set(), True, {"a", "b"}, {"b": 0.0}),
    # A DELETED advisory (or an operator) said it was removed: it leaves.
    ({("A", "S1", "b")}, True, {"a"}, {}),
    # Outside the collector's filters (a stream no longer included): it leaves.
    (set(), False, {"a"}, {}),
])
def test_a_consumer_no_longer_listed_is_held_unless_something_said_it_was_removed(removed, watched, expected_live,
                                                                                  expected_unlisted):
    state = LiveState(TH.health_window)
    state.holds = lambda key: watched
    _cycle(state, T0, ("a", "b"))
    state.removed.update(removed)  # a DELETED advisory about a consumer it knows
    held = _cycle(state, T0 + dt.timedelta(seconds=5), ("a",))
    assert _live(state) == expected_live
    assert held == [("A", "S1", c) for c in expected_unlisted]
    assert {k[2]: t - T0.timestamp() for k, t in state.unlisted.items()} == expected_unlisted
    assert not state.removed  # a removal said is used once the consumer leaves


def test_a_held_consumer_listed_again_is_no_longer_unlisted_and_without_holds_none_is_held():
    state = LiveState(TH.health_window)
    state.holds = lambda key: True
    _cycle(state, T0, ("a", "b"))
    _cycle(state, T0 + dt.timedelta(seconds=5), ("a",))
    _cycle(state, T0 + dt.timedelta(seconds=10), ("a", "b"))
    assert _live(state) == {"a", "b"} and state.unlisted == {}
    plain = LiveState(TH.health_window)  # judging apart from a collector (seeded from a store): nothing held
    _cycle(plain, T0, ("a", "b"))
    assert _cycle(plain, T0 + dt.timedelta(seconds=5), ("a",)) == [] and _live(plain) == {"a"}
