"""When each incident began: the onset features of the health window.

A rule that must hold in every sample of a window names an incident only once the window has
passed, and one sample from before the incident hides it. The rules read these features instead:
for each condition, the start of the trailing run of samples in which it has held without a break
(its onset, NaN when it does not hold in the latest sample), so that a rule fires once its
condition has held for its own duration (Prometheus' `for:`) and its *since* is the incident's
start.

Activity is read from the server's own clocks, not from sequence numbers: `delivered.last_active`
(a delivery, a redelivery, a `+WPI` progress report, a delayed nak) and `ack_floor.last_active`
(an acknowledgement; a message dropped at max_deliver or by the stream's limits moves the ack
floor but not this time). Onsets take the later of the run's start and the last such activity, so
a delivery between two samples is not missed.

Each consumer's own rhythm sets how long is too long: the longest gap between acknowledgements
while work was in flight, between deliveries while work was pending, and the longest stretch the
oldest unacknowledged age grew before the consumer caught up, all as seen in the window. A worker
that acknowledges in bulk every minute, a holder that polls every 45 s, bursts drained in a
sawtooth: each is judged against itself, not against one threshold for all.

Arrays are time-major, as health/window.py keeps them: one row per sample, one column per
consumer; `s` marks the samples that count (in the window, since the latest reset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

# Below this age (seconds) the oldest unacknowledged message is as fresh as processing allows:
# the consumer has caught up.
CAUGHT_UP_AGE = 5.0

ONSET_FEATURES = [
    "stall_onset", "ack_gap_max", "stall_grew", "stall_redelivered", "quiet_since",
    "idle_onset", "pin_idle_onset", "pull_gap_max", "pullers_seen",
    "delivered_last_active", "acked_last_active",
    "age_rise_onset", "age_rise", "age_rise_gap_max",
    "behind_onset", "behind_rise", "behind_gap_max", "behind_backlog_rise",
    "first_ts", "last_seconds",
]


@dataclass
class Samples:
    """One window's samples of many consumers, time-major (samples x consumers)."""

    t: np.ndarray  # epoch seconds (NaN: no sample)
    s: np.ndarray  # counted: in the window and after the latest reset
    has_prev: np.ndarray  # a counted sample precedes this one
    lag: Callable[[np.ndarray], np.ndarray]  # an array's values at each sample's previous one
    pending: np.ndarray
    in_flight: np.ndarray
    waiting: np.ndarray
    redelivered: np.ndarray
    age: np.ndarray  # oldest unacknowledged age; 0 when unknown or nothing is unacknowledged
    delivered_at: np.ndarray  # the server's delivered.last_active (NaN: none)
    acked_at: np.ndarray  # the server's ack_floor.last_active (NaN: none)
    pinned: np.ndarray  # a client is pinned
    same_pin: np.ndarray  # pinned to the same client as in the latest sample
    t_first: np.ndarray  # per consumer
    t_last: np.ndarray
    last: np.ndarray  # per consumer: the row of its latest counted sample


def _at(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return a[idx, np.arange(len(idx))]


def _last_time(mask: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per consumer, the time of the last sample where `mask` holds (-inf where none does)."""
    return np.where(mask, t, -np.inf).max(axis=0)


def trailing_onset(x: Samples, cond: np.ndarray) -> np.ndarray:
    """Since when `cond` has held without a break: the time of the last counted sample where it did
    not (the run began after it), or the window's first sample when it held in every one (since
    at least then). NaN where it does not hold in the latest sample."""
    broke = _last_time(x.s & ~cond, x.t)
    onset = np.where(np.isneginf(broke), x.t_first, broke)
    return np.where(_at(cond, x.last), onset, np.nan)


def _later(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The later of two times per consumer, NaN in `b` ignored (NaN in `a` stays: no onset)."""
    return np.where(np.isnan(a), np.nan, np.fmax(a, b))


@dataclass
class _Grid:
    """The sample times and masks of the consumers a rhythm is computed for (all, or a few)."""

    t: np.ndarray
    s: np.ndarray
    has_prev: np.ndarray
    t_first: np.ndarray


def _grid(x: Samples, cols: np.ndarray | slice) -> _Grid:
    return _Grid(x.t[:, cols], x.s[:, cols], x.has_prev[:, cols], x.t_first[cols])


def _gap_max(g: _Grid, at: np.ndarray, prev_at: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """The longest wait for activity `at` (the server's time of it; `prev_at` its value at the
    sample before) while `busy` held: at each sample where `at` moved, the new time minus the
    latest of the activity before it, the last sample at which the consumer was not busy, and the
    window's first sample. NaN where `at` never moved."""
    with np.errstate(invalid="ignore"):
        moved = g.s & g.has_prev & ~np.isnan(at) & (np.isnan(prev_at) | (at > prev_at))
    idle_until = np.maximum.accumulate(np.where(g.s & ~busy, g.t, -np.inf), axis=0)
    before = np.empty_like(idle_until)
    before[0] = -np.inf
    before[1:] = idle_until[:-1]
    base = np.fmax(np.fmax(prev_at, before), g.t_first[None, :])  # fmax passes over NaN (no activity before)
    gaps = np.where(moved, at - base, -np.inf)
    out = gaps.max(axis=0)
    return np.where(np.isneginf(out), np.nan, np.maximum(out, 0.0))


def _run_gap_max(g: _Grid, cond: np.ndarray, prev_cond: np.ndarray) -> np.ndarray:
    """The longest run of `cond` (`prev_cond`: its value at the sample before) that ended inside
    the window (from its first sample to the sample that broke it); NaN where none ended."""
    was = g.has_prev & prev_cond
    start = np.where(g.s & cond & ~was, g.t, -np.inf)
    started = np.maximum.accumulate(start, axis=0)  # the start of the run each sample is in
    ends = g.s & ~cond & was
    before = np.empty_like(started)
    before[0] = -np.inf
    before[1:] = started[:-1]
    lengths = np.where(ends & (before != -np.inf), g.t - before, -np.inf).max(axis=0)
    return np.where(np.isneginf(lengths), np.nan, lengths)


RHYTHMS = ("ack_gap_max", "pull_gap_max", "age_rise_gap_max", "behind_gap_max")


def _rhythms(x: Samples, cols: np.ndarray | slice, busy: np.ndarray, work: np.ndarray, rising: np.ndarray,
             behind: np.ndarray, prev_delivered: np.ndarray) -> dict[str, np.ndarray]:
    """Each consumer's own rhythms (RHYTHMS), for the consumers `cols` (NaN for the others): the
    costliest features, a pass over the whole window each, and only ever read where a condition
    has already held for a rule's shortest duration."""
    if isinstance(cols, np.ndarray) and len(cols) == 0:
        return {name: np.full(x.t.shape[1], np.nan) for name in RHYTHMS}
    g = _grid(x, cols)

    def sub(a: np.ndarray) -> np.ndarray:
        return a[:, cols]

    found = {
        "ack_gap_max": _gap_max(g, sub(x.acked_at), sub(x.lag(x.acked_at)), sub(busy)),
        "pull_gap_max": _gap_max(g, sub(x.delivered_at), sub(prev_delivered), sub(work)),
        "age_rise_gap_max": _run_gap_max(g, sub(rising), sub(x.lag(rising))),
        "behind_gap_max": _run_gap_max(g, sub(behind), sub(x.lag(behind))),
    }
    if isinstance(cols, slice):
        return found
    out = {}
    for name, values in found.items():
        out[name] = np.full(x.t.shape[1], np.nan)
        out[name][cols] = values
    return out


def _min_since(x: Samples, a: np.ndarray, since: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        inside = x.s & (x.t >= since[None, :])
    return np.where(inside, a, np.inf).min(axis=0)


def onset_features(x: Samples, rhythm_after: float | None = None) -> dict[str, np.ndarray]:
    """The onset features of every consumer (ONSET_FEATURES). With `rhythm_after` (the shortest
    duration of any rule), the rhythms are computed only for consumers with a condition that
    has held that long (NaN for the others), which cannot change a verdict: a rhythm only ever
    raises a rule's duration above one at least that long."""
    busy = x.in_flight > 0
    acked_last = _at(x.acked_at, x.last)
    delivered_last = _at(x.delivered_at, x.last)

    stall_onset = _later(trailing_onset(x, busy), acked_last)
    grew = _at(x.in_flight, x.last) > _min_since(x, x.in_flight, stall_onset)
    redelivered = _at(x.redelivered, x.last) > _min_since(x, x.redelivered, stall_onset)
    quiet_since = np.fmax(acked_last, delivered_last)

    work = x.pending > 0
    idle = work & ~busy & (x.waiting == 0)
    idle_onset = _later(trailing_onset(x, idle), delivered_last)
    pin_idle = work & ~busy & (x.waiting > 0) & x.pinned & x.same_pin
    pin_idle_onset = _later(trailing_onset(x, pin_idle), delivered_last)
    with np.errstate(invalid="ignore"):
        prev_delivered = x.lag(x.delivered_at)
        delivered_moved = x.s & x.has_prev & (x.delivered_at > prev_delivered)
    pullers_seen = (x.s & ((x.waiting > 0) | delivered_moved)).any(axis=0)

    with np.errstate(invalid="ignore"):
        before = x.lag(x.age)
        rising = x.s & x.has_prev & (x.age > before)
        behind = x.s & work & (x.age > CAUGHT_UP_AGE)
    age_last = _at(x.age, x.last)
    age_rise_onset = trailing_onset(x, rising)
    behind_onset = trailing_onset(x, behind)

    def age_at(onset: np.ndarray) -> np.ndarray:
        """The age at the sample where a run began (its onset's sample), the run's lowest."""
        with np.errstate(invalid="ignore"):
            return np.where(x.s & (x.t >= onset[None, :]), x.age, np.inf).min(axis=0)

    def backlog_rise(onset: np.ndarray) -> np.ndarray:
        """How far the backlog's low point rose from the first half of a run to the second: a
        backlog held at a constant depth (a steady delay) is not falling behind, one whose low
        points keep rising is, whatever its sawtooth does."""
        backlog = x.pending + x.in_flight
        mid = (onset + x.t_last) / 2
        with np.errstate(invalid="ignore"):
            early = x.s & (x.t >= onset[None, :]) & (x.t < mid[None, :])
            late = x.s & (x.t >= mid[None, :])
        lows = [np.where(m, backlog, np.inf).min(axis=0) for m in (early, late)]
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(lows[0]) & np.isfinite(lows[1]), lows[1] - lows[0], np.nan)

    if rhythm_after is None:
        cols: np.ndarray | slice = slice(None)
    else:
        held = x.t_last - np.fmin.reduce([stall_onset, idle_onset, pin_idle_onset, age_rise_onset, behind_onset,
                                          np.fmax(acked_last, x.t_first)])
        with np.errstate(invalid="ignore"):
            cols = np.flatnonzero(held >= rhythm_after)
    rhythms = _rhythms(x, cols, busy, work, rising, behind, prev_delivered)

    return {
        "stall_onset": stall_onset, "ack_gap_max": rhythms["ack_gap_max"],
        "stall_grew": grew, "stall_redelivered": redelivered, "quiet_since": quiet_since,
        "idle_onset": idle_onset, "pin_idle_onset": pin_idle_onset,
        "pull_gap_max": rhythms["pull_gap_max"], "pullers_seen": pullers_seen,
        "delivered_last_active": delivered_last, "acked_last_active": acked_last,
        "age_rise_onset": age_rise_onset,
        "age_rise": np.where(np.isnan(age_rise_onset), np.nan, age_last - age_at(age_rise_onset)),
        "age_rise_gap_max": rhythms["age_rise_gap_max"],
        "behind_onset": behind_onset,
        "behind_rise": np.where(np.isnan(behind_onset), np.nan, age_last - age_at(behind_onset)),
        "behind_gap_max": rhythms["behind_gap_max"], "behind_backlog_rise": backlog_rise(behind_onset),
        "first_ts": x.t_first, "last_seconds": x.t_last,
    }
