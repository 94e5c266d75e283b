"""A batch consumer's pull rhythm, learnt beyond the health window (health/pull_rhythm.py).

A consumer drained by a job every 8 minutes (or every hour) waits most of its life with work pending and
nobody pulling: within a 5-minute window it looks exactly like one whose workers are gone. Once it
has shown two such waits in a row it is judged against its own rhythm, kept in the store across a
restart; a job that stops running is named once its rhythm has passed twice over. One outage
among steady pulling teaches nothing: the consumer whose pullers then go is named as fast as
ever. Pure logic in a table; the collector's own path (its in-memory state, judging and the
store) over simulated hours of cycles."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np
import pytest

from jetwatch.collectors.judging import judge_in, load_window
from jetwatch.collectors.live_state import LiveState
from jetwatch.health import pull_rhythm, thresholds
from jetwatch.health.rules import Thresholds
from jetwatch.store import writes
from jetwatch.store.database import Store
from tests.test_live_state import _sample

FLOOR = 20.0


def _folded(history: list[tuple[float, int, bool]], memory_from: int = 0) -> dict[str, np.ndarray]:
    """One consumer's waits after its samples (time, pending, delivered since the sample before),
    the memory starting at sample `memory_from` (a collector started then)."""
    waits = pull_rhythm.empty(1)
    for k in range(memory_from, len(history)):
        t, pending, delivered = history[k]
        before = history[k - 1] if k > memory_from else None
        waits = pull_rhythm.fold(
            waits, np.array([t]), np.array([before[0] if before else np.nan]), np.array([float(pending)]),
            np.array([float(before[1]) if before else np.nan]), np.array([bool(delivered and before)]),
            np.array([t if delivered else np.nan]), FLOOR)
    return waits


def _job(period: float, busy: float, runs: int, step: float = 10.0, start: float = 0.0) -> list[tuple[float, int, bool]]:
    """Work arriving all the time, a job pulling it for `busy` seconds every `period`."""
    out = []
    for k in range(int(runs * period / step)):
        t = start + k * step
        running = (t - start) % period < busy
        out.append((t, 0 if running else 5, running))
    return out


def _steady(start: float, end: float, step: float = 10.0) -> list[tuple[float, int, bool]]:
    return [(t, 3, True) for t in np.arange(start, end, step)]


def _outage(start: float, length: float, step: float = 10.0) -> list[tuple[float, int, bool]]:
    return [(t, 3, False) for t in np.arange(start, start + length, step)]


def _rhythm_now(history: list[tuple[float, int, bool]], memory_from: int = 0) -> float:
    waits = _folded(history, memory_from)
    began = waits["pull_wait_from"]
    return float(pull_rhythm.learnt(waits, np.where(np.isfinite(began), began, np.nan))[0])


CASES: list[tuple[str, Callable[[], list[tuple[float, int, bool]]], float | None]] = [
    ("a job every 15 min, busy 1 min: two waits make its rhythm (each seen for 840 s)",
     lambda: _job(900, 60, 3)[:-80], 840.0),
    ("the same job seen wait once: no rhythm yet", lambda: _job(900, 60, 2)[:-80], None),
    ("one outage of 5 min among hours of steady pulling teaches nothing",
     lambda: [*_steady(0, 3600), *_outage(3600, 300), *_steady(3900, 7200), *_outage(7200, 60)], None),
    ("two outages an hour apart, steady pulling between, teach nothing",
     lambda: [*_steady(0, 600), *_outage(600, 300), *_steady(900, 4500), *_outage(4500, 300),
              *_steady(4800, 5400), *_outage(5400, 60)], None),
    ("pauses shorter than the idle rules' floor are the window's business",
     lambda: [(t, 3, (t // 10) % 2 == 0) for t in np.arange(0, 600, 10.0)], None),
    ("no work pending is no wait: a quiet stream, then one message pulled at once",
     lambda: [*[(t, 0, False) for t in np.arange(0, 3600, 10.0)], (3600.0, 1, False), (3610.0, 0, True),
              *[(t, 0, False) for t in np.arange(3620, 7200, 10.0)], (7200.0, 1, False), (7210.0, 0, True),
              (7220.0, 3, False)], None),
    ("a job whose busy spell grew longer than its waits has no rhythm any more",
     lambda: [*_job(900, 60, 3), *_steady(2700, 4000), *_outage(4000, 60)], None),
]


@pytest.mark.parametrize("name,history,rhythm", CASES, ids=[c[0] for c in CASES])
def test_a_rhythm_is_learnt_only_from_waits_that_repeat(name, history, rhythm):
    got = _rhythm_now(history())
    assert (np.isnan(got) if rhythm is None else got == rhythm), got


def test_a_wait_whose_start_was_not_seen_is_not_measured():
    """A collector started in the middle of a wait cannot tell how long it lasted: not counted, so
    one more wait is needed for a rhythm."""
    history = _job(900, 60, 4)[:-80]
    assert _rhythm_now(history) == 840.0
    started_mid_wait = 20  # 200 s into the first wait
    waits = _folded(history, started_mid_wait)
    assert waits["pull_waits_in_row"][0] == 2  # of the three waits, the first is not counted
    assert np.isnan(_rhythm_now(history[:-90], started_mid_wait))


def test_a_wait_is_measured_as_seen_across_a_gap_in_the_samples():
    """Samples missing for 10 minutes (the collector away) in the middle of a steady spell: the
    delivery seen afterwards may have come at any time since, so no wait is made of the gap."""
    history = [*_steady(0, 600), *_steady(1200, 1800)]
    waits = _folded(history)
    assert np.isnan(waits["pull_wait_last"][0])


def test_folding_the_same_samples_again_counts_each_wait_once():
    history = _job(900, 60, 3)[:-80]
    waits = _folded(history)
    again = pull_rhythm.empty(1)
    again.update({k: waits[k].copy() for k in pull_rhythm.KEPT})  # kept in the store; the memory rebuilt
    for k in range(len(history) - 100, len(history)):
        t, pending, delivered = history[k]
        before = history[k - 1]
        again = pull_rhythm.fold(again, np.array([t]), np.array([before[0]]), np.array([float(pending)]),
                                 np.array([float(before[1])]), np.array([delivered]),
                                 np.array([t if delivered else np.nan]), FLOOR)
    for name in pull_rhythm.KEPT:
        np.testing.assert_array_equal(again[name], waits[name])


# -- the collector's path -----------------------------------------------------------------------

T0 = dt.datetime(2026, 11, 27, 0, 0, tzinfo=dt.UTC)
STEP = 20.0  # cycles farther apart than the default 5 s: the rhythm does not depend on it
PERIOD, BUSY = 480.0, 40.0  # a job every 8 minutes, 40 s at work: waits longer than the health window
TH = Thresholds()  # the defaults: 5-minute window, NO_PULLERS after 20 s


@dataclass
class Consumer:
    name: str
    dcs: int = 0
    pending: int = 0
    delivered_at: float | None = None

    def sample(self, t: float, arrivals: int, pulled: bool) -> dict:
        self.pending += arrivals
        if pulled:
            self.dcs += self.pending + 1
            self.pending, self.delivered_at = 0, t
        at = None if self.delivered_at is None else (T0 + dt.timedelta(seconds=self.delivered_at)).isoformat()
        return _sample(T0 + dt.timedelta(seconds=t), "S", self.name, num_pending=self.pending,
                       num_waiting=1 if pulled else 0, delivered_consumer_seq=self.dcs,
                       delivered_stream_seq=self.dcs, ack_floor_consumer_seq=self.dcs,
                       ack_floor_stream_seq=self.dcs, delivered_last_active=at, ack_floor_last_active=at)


def _cycle(con: duckdb.DuckDBPyConnection, state: LiveState, samples: dict, now: dt.datetime,
           configs: list[dict] | None = None) -> None:
    """One cycle as the collector runs it, in one transaction: samples (and configs) written, into
    its state, judged and kept; its memory moves on once the transaction is in."""
    con.execute("BEGIN TRANSACTION")
    writes.write_configs(con, configs or [])
    writes.write_samples(con, ["A"], samples, [])
    state.add(samples, ["A"], configs=configs or [])
    judged = judge_in(con, now, TH, state)
    con.execute("COMMIT")
    judged.commit()


def test_a_job_drained_every_8_minutes_is_judged_against_its_own_rhythm(tmp_path):
    """Cycles every 20 s, the default thresholds, a collector restart in the middle. The job:
    NO_PULLERS in its first wait (nothing is known of it yet), quiet through every wait once two
    have shown its rhythm, restart included, and NO_PULLERS when it stops running, once its
    rhythm has passed twice over, with the rhythm in the reason. The same job declaring 15 minutes
    in its metadata (longer than the window can hold) is quiet from its first wait and named 15
    minutes into the wait it never ends. Beside them, a consumer pulled
    steadily, whose workers went away for 5 minutes once, is named within 30 s of its workers
    going for good."""
    store = Store(str(tmp_path / "jetwatch.duckdb"))
    store.migrate()
    state = load_window(store, T0, TH)
    con = duckdb.connect(str(store.path))  # held open, as the collector's writer is, cycle after cycle
    job, steady, declared = Consumer("job"), Consumer("steady"), Consumer("declared")
    # The same job, declared in its metadata: no alarm before the 15 minutes it sets.
    declares = {"io.jetwatch.no_pullers_after": "15m"}
    configs = [{"ts": T0.isoformat(), "account": "A", "stream": "S", "consumer": "declared", "created": None,
                "config_hash": "d", "is_pull": True, "filtered": False, "ack_policy": "explicit", "max_waiting": 512,
                "max_ack_pending": 1000, "ack_wait_ns": None, "max_deliver": None, "priority_policy": None,
                "priority_groups": None, "priority_timeout_ns": None, "config_json": json.dumps({"metadata": declares}),
                **{k: values[0] for k, values in thresholds.input_columns([json.dumps(declares)]).items()}}]
    job_dies, steady_stops, outage, restart_at = 4 * PERIOD, 4 * PERIOD + 600, (1200.0, 1500.0), 3 * PERIOD + 200
    verdicts: dict[str, list[tuple[float, str, str]]] = {"job": [], "steady": [], "declared": []}
    t = 0.0
    while t <= job_dies + PERIOD + 300:
        runs = t < job_dies and t % PERIOD < BUSY
        pulled = t < steady_stops and not (outage[0] <= t < outage[1])
        rows = [job.sample(t, 5, runs), steady.sample(t, 3, pulled), declared.sample(t, 5, runs)]
        now = T0 + dt.timedelta(seconds=t)
        if t == restart_at:  # what a restarted collector knows: the store
            con.close()
            state = load_window(store, now, TH)
            con = duckdb.connect(str(store.path))
        _cycle(con, state, {k: [r[k] for r in rows] for k in rows[0]}, now, configs if t == 0 else None)
        for name in verdicts:
            row = state.window.rows[("A", "S", name)]
            verdicts[name].append((t, state.kept_text["verdict"][row], state.kept_text["reason"][row]))
        t += STEP
    con.close()

    def alarms(name: str, start: float, end: float) -> list[tuple[float, str, str]]:
        return [v for v in verdicts[name] if start <= v[0] < end and v[1] not in ("OK", "COLLECTING")]

    assert [v[1] for v in alarms("job", BUSY, PERIOD)][:1] == ["NO_PULLERS"]  # not known yet: named
    rhythm = PERIOD - BUSY  # each wait as seen: from its last delivery to the sample before the next
    overdue = job_dies - PERIOD + BUSY - STEP + 2 * rhythm  # its last run's wait, twice its rhythm
    assert alarms("job", 2 * PERIOD + BUSY, overdue) == []  # from its third wait on
    named = alarms("job", overdue, job_dies + 3 * PERIOD)
    assert named and named[0][1] == "NO_PULLERS" and named[0][0] <= overdue + 30, named[:1]
    assert "it was pulled about every 7 min 20 s before" in named[0][2]

    declared_named = alarms("declared", 0, job_dies + PERIOD + 240)
    assert declared_named and declared_named[0][1] == "NO_PULLERS", declared_named[:1]
    assert overdue - 2 * rhythm + 900 <= declared_named[0][0] <= overdue - 2 * rhythm + 900 + 30, declared_named[0]

    assert [v[1] for v in alarms("steady", outage[0], outage[0] + 40)][:1] == ["NO_PULLERS"]
    gone = alarms("steady", steady_stops, steady_stops + 120)
    assert gone and gone[0][1] == "NO_PULLERS" and gone[0][0] <= steady_stops + 30, gone[:1]
