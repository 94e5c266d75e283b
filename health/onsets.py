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

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

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


@dataclass
class Samples:
    """One window's samples of many consumers, time-major (samples x consumers)."""

    t: np.ndarray  # epoch seconds (NaN: no sample)
    s: np.ndarray  # counted: in the window and after the latest reset
    has_prev: np.ndarray  # a counted sample precedes this one
    lag: Lag  # an array's values at each sample's previous one
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
    # The clients' view: the samples in the window whatever the consumer's incarnation (`s`,
    # `has_prev` and `t_first` unless it was deleted and recreated in the window: a consumer
    # recreated under its name is pulled by the same clients, at their own rhythm).
    seen: np.ndarray
    seen_prev: np.ndarray
    t_first_seen: np.ndarray
    _subs: dict[bytes, Samples] = field(default_factory=dict, init=False, repr=False)

    def sub(self, cols: np.ndarray) -> Samples:
        """The samples of the consumers `cols` (sorted positions) alone: gathered once for a
        set of consumers, however many features are computed for them."""
        key = cols.tobytes()
        if key not in self._subs:
            self._subs.clear()
            parts: dict[str, Any] = {f.name: (self.lag.sub(cols) if f.name == "lag" else getattr(self, f.name)[..., cols])
                                     for f in fields(self) if f.init}
            self._subs[key] = Samples(**parts)
        return self._subs[key]


def _clients(y: Samples) -> Samples:
    """The samples as the clients' view (Samples.seen): what the pull rhythm and whether pullers
    were seen are read over."""
    return replace(y, s=y.seen, has_prev=y.seen_prev, t_first=y.t_first_seen)


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


Columns = np.ndarray | slice


def _only_many(x: Samples, holds: np.ndarray, compute: Callable[[Samples, Columns], dict[str, np.ndarray]],
               fill: float | bool) -> dict[str, np.ndarray]:
    """Per-consumer features that only the consumers where `holds` can have (`fill` for the
    others): each pass over the whole window made only for them, on a gathered copy of their
    samples when they are few, in place when they are many. `compute` gets the samples and where
    they sit among all the consumers (to read other per-consumer arrays at the same places)."""
    cols = np.flatnonzero(holds)
    if len(cols) == 0:
        return {}
    many = 2 * len(cols) >= len(holds)
    found = compute(x, slice(None)) if many else compute(x.sub(cols), cols)
    out = {}
    for name, values in found.items():
        out[name] = np.full(len(holds), fill)
        if many:
            out[name][:] = values
            out[name][~holds] = fill
        else:
            out[name][cols] = values
    return out


def _only(x: Samples, holds: np.ndarray, compute: Callable[[Samples, Columns], np.ndarray],
          fill: float | bool) -> np.ndarray:
    """One such feature (_only_many)."""
    return _only_many(x, holds, lambda y, c: {"": compute(y, c)}, fill).get("", np.full(len(holds), fill))


def _onset_where(x: Samples, holds_last: np.ndarray, cond: Callable[[Samples], np.ndarray]) -> np.ndarray:
    """trailing_onset of `cond`, computed only where it holds in the latest sample (`holds_last`,
    read from the latest values alone; NaN elsewhere, as trailing_onset gives)."""
    return _only(x, holds_last, lambda y, _: trailing_onset(y, cond(y)), np.nan)


# The conditions whose trailing runs the onsets follow, over any set of consumers' samples.
def _busy(y: Samples) -> np.ndarray:
    return y.in_flight > 0


def _work(y: Samples) -> np.ndarray:
    return y.pending > 0


def _idle(y: Samples) -> np.ndarray:
    return _work(y) & ~_busy(y) & (y.waiting == 0)


def _pin_idle(y: Samples) -> np.ndarray:
    return _work(y) & ~_busy(y) & (y.waiting > 0) & y.pinned & y.same_pin


def _rising(y: Samples) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return y.s & y.has_prev & (y.age > y.lag(y.age))


def _behind(y: Samples) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return y.s & _work(y) & (y.age > CAUGHT_UP_AGE)


def _gap_max(g: Samples, at: np.ndarray, prev_at: np.ndarray, busy: np.ndarray) -> np.ndarray:
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


def _run_gap_max(g: Samples, cond: np.ndarray, prev_cond: np.ndarray) -> np.ndarray:
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


def _rhythms(y: Samples) -> dict[str, np.ndarray]:
    """Each consumer's own rhythms (RHYTHMS): the costliest features, a pass over the whole
    window each."""
    rising, behind = _rising(y), _behind(y)
    return {
        "ack_gap_max": _gap_max(y, y.acked_at, y.lag(y.acked_at), _busy(y)),
        "pull_gap_max": _gap_max(_clients(y), y.delivered_at, y.lag(y.delivered_at), _work(y)),
        "age_rise_gap_max": _run_gap_max(y, rising, y.lag(rising)),
        "behind_gap_max": _run_gap_max(y, behind, y.lag(behind)),
    }


def _min_since(x: Samples, a: np.ndarray, since: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        inside = x.s & (x.t >= since[None, :])
    return np.where(inside, a, np.inf).min(axis=0)


def _backlog_rise(y: Samples, onset: np.ndarray) -> np.ndarray:
    """How far the backlog's low point rose from the first half of a run to the second: a
    backlog held at a constant depth (a steady delay) is not falling behind, one whose low
    points keep rising is, whatever its sawtooth does."""
    backlog = y.pending + y.in_flight
    mid = (onset + y.t_last) / 2
    with np.errstate(invalid="ignore"):
        early = y.s & (y.t >= onset[None, :]) & (y.t < mid[None, :])
        late = y.s & (y.t >= mid[None, :])
    lows = [np.where(m, backlog, np.inf).min(axis=0) for m in (early, late)]
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(lows[0]) & np.isfinite(lows[1]), lows[1] - lows[0], np.nan)


def onset_features(x: Samples, rhythm_after: float | np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The onset features of every consumer (ONSET_FEATURES). With `rhythm_after` (the shortest
    duration of any rule, or per consumer the shorter of it and the consumer's ack_wait:
    health/rules.py rhythm_after), the rhythms are computed only for consumers with a condition
    that has held that long (NaN for the others), which cannot change a verdict: a rhythm only
    ever raises a rule's duration above one at least that long.

    Each onset is looked for only where its condition holds in the latest sample (elsewhere it has
    none), and what is measured from an onset only where there is one: in a healthy fleet most
    consumers have none, and the passes over the window are made for the few that do."""
    in_flight, pending, waiting = (_at(a, x.last) for a in (x.in_flight, x.pending, x.waiting))
    acked_last = _at(x.acked_at, x.last)
    delivered_last = _at(x.delivered_at, x.last)
    age_last = _at(x.age, x.last)
    busy, work = in_flight > 0, pending > 0

    stall_onset = _later(_onset_where(x, busy, _busy), acked_last)
    stalled = ~np.isnan(stall_onset)
    grew = _only(x, stalled, lambda y, c: _at(y.in_flight, y.last) > _min_since(y, y.in_flight, stall_onset[c]),
                 False)
    redelivered = _only(x, stalled, lambda y, c: _at(y.redelivered, y.last) > _min_since(y, y.redelivered,
                                                                                          stall_onset[c]), False)
    quiet_since = np.fmax(acked_last, delivered_last)

    idle_onset = _later(_onset_where(x, work & ~busy & (waiting == 0), _idle), delivered_last)
    pin_idle_onset = _later(_onset_where(x, work & ~busy & (waiting > 0) & _at(x.pinned, x.last)
                                         & _at(x.same_pin, x.last), _pin_idle), delivered_last)

    def seen(y: Samples, _: Columns) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            delivered_moved = y.seen & y.seen_prev & (y.delivered_at > y.lag(y.delivered_at))
        return (y.seen & ((y.waiting > 0) | delivered_moved)).any(axis=0)

    # Read only by the rule on idle_onset: where it has none, unknown (False) changes nothing.
    pullers_seen = _only(x, ~np.isnan(idle_onset), seen, False)

    with np.errstate(invalid="ignore"):
        counted = _at(x.s, x.last)
        rising_last = counted & _at(x.has_prev, x.last) & (age_last > x.lag.at(x.age, x.last))
        behind_last = counted & work & (age_last > CAUGHT_UP_AGE)
    age_rise_onset = _onset_where(x, rising_last, _rising)
    behind_onset = _onset_where(x, behind_last, _behind)

    def rise_from(onset: np.ndarray) -> np.ndarray:
        """The age now minus the age at the sample where a run began (its onset's), the run's lowest."""
        return _only(x, ~np.isnan(onset), lambda y, c: age_last[c] - _min_since(y, y.age, onset[c]), np.nan)

    if rhythm_after is None:
        wanted = np.ones(len(x.last), dtype=bool)
    else:
        held = x.t_last - np.fmin.reduce([stall_onset, idle_onset, pin_idle_onset, age_rise_onset, behind_onset,
                                          np.fmax(acked_last, x.t_first)])
        with np.errstate(invalid="ignore"):
            # Also where messages were redelivered: ack_gap_max is the evidence of an ack_wait
            # shorter than the work (health/config_findings.py), rare enough to cost little.
            wanted = (held >= rhythm_after) | (x.redelivered.max(axis=0) > 0)
    rhythms = _only_many(x, wanted, lambda y, _: _rhythms(y), np.nan)
    rhythms = {name: rhythms.get(name, np.full(len(wanted), np.nan)) for name in RHYTHMS}

    return {
        "stall_onset": stall_onset, "ack_gap_max": rhythms["ack_gap_max"],
        "stall_grew": grew, "stall_redelivered": redelivered, "quiet_since": quiet_since,
        "idle_onset": idle_onset, "pin_idle_onset": pin_idle_onset,
        "pull_gap_max": rhythms["pull_gap_max"], "pullers_seen": pullers_seen,
        "delivered_last_active": delivered_last, "acked_last_active": acked_last,
        "age_rise_onset": age_rise_onset, "age_rise": rise_from(age_rise_onset),
        "age_rise_gap_max": rhythms["age_rise_gap_max"],
        "behind_onset": behind_onset, "behind_rise": rise_from(behind_onset),
        "behind_gap_max": rhythms["behind_gap_max"],
        "behind_backlog_rise": _only(x, ~np.isnan(behind_onset), lambda y, c: _backlog_rise(y, behind_onset[c]),
                                     np.nan),
        "first_ts": x.t_first, "last_seconds": x.t_last,
    }
