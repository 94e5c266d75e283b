"""The health model: one table of rules, most severe first.

Each rule looks at a consumer's window features (health/features.py) and its limits, and either
stays silent or returns a finding: the reason in words and the numbers behind it. The verdict is
the most severe finding; every finding is listed. Each verdict is declared once, in
health/verdicts.py, with its severity (its place in the table), colour and meaning; each rule here
names its verdict from that table, in the table's order. The Spark pipeline calls `evaluate` (the window's features computed by
health/window.py from its samples); the collector judges the same features, kept in memory between
cycles, through `verdict_columns` (collectors/judging.py). The pages only read the verdicts the
collector kept.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from jetwatch.core import durations
from jetwatch.core.settings import SETTINGS, Settings
from jetwatch.health import elementwise as ew
from jetwatch.health.columns import array as column_array
from jetwatch.health.columns import floats
from jetwatch.health.features import KEY, window_features
from jetwatch.health.features import Frame as Samples
from jetwatch.health.onsets import ONSET_FEATURES
from jetwatch.health.thresholds import INPUT as THRESHOLD_INPUT
from jetwatch.health.thresholds import OVERRIDABLE
from jetwatch.health.verdicts import BY_NAME, CLUSTER_VERDICTS, VERDICT_NAMES, Verdict

_HEALTH = {s.name: s for s in SETTINGS if s.group == "health"}
# A consumer's own thresholds (health/thresholds.py), as inputs: `threshold_<name>`, NaN where it
# sets none; as the rules read them, every row filled: `threshold:<name>`.
THRESHOLD = "threshold:"
THRESHOLD_COLUMNS = tuple(THRESHOLD_INPUT + name for name in OVERRIDABLE)


def _default(name: str) -> Any:
    return field(default=_HEALTH[name].default)


@dataclass(frozen=True)
class Thresholds:
    """The settings of the "health" group, by the same names and with the same defaults: a
    threshold is declared once, as a setting, and read from here by rules, pages and Spark."""

    health_window: float = _default("health_window")
    health_min_samples: int = _default("health_min_samples")
    health_min_span: float = _default("health_min_span")
    saturation_ratio: float = _default("saturation_ratio")
    unpinned_after: float = _default("unpinned_after")
    flapping_switches: int = _default("flapping_switches")
    redelivery_share: float = _default("redelivery_share")
    lagging_age: float = _default("lagging_age")
    stalled_after: float = _default("stalled_after")
    no_pullers_after: float = _default("no_pullers_after")
    pin_idle_after: float = _default("pin_idle_after")
    lagging_after: float = _default("lagging_after")
    loss_within: float = _default("loss_within")
    losing_after: float = _default("losing_after")
    reset_shown_for: float = _default("reset_shown_for")
    no_leader_after: float = _default("no_leader_after")
    clear_after: float = _default("clear_after")

    @classmethod
    def from_settings(cls, s: Settings) -> Thresholds:
        return cls(**{f.name: getattr(s, f.name) for f in dataclasses.fields(cls)})

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Finding:
    verdict: str
    reason: str
    numbers: dict[str, float | int | str] = field(default_factory=dict)


Ctx = Mapping[str, Any]  # one consumer: features + limits + counts (a row)
Frame: TypeAlias = pd.DataFrame
Columns = Mapping[str, np.ndarray]  # many consumers: the same names, one array each (`_inputs`)

# Each rule is a condition over the consumers' columns (vectorised: ten thousand consumers at once)
# and the words and numbers for the consumers it fires on. The conditions below are written with
# operators that work on whole columns and on one row's values alike, so `says` reuses them.


def _n(x: Any) -> int:
    return int(round(float(x)))


def _count(x: Any, noun: str, verb: str = "") -> str:
    """A count in words, with a verb in the present that agrees: '1 message waits', '10 messages
    wait', '1 other pull request'."""
    n = _n(x)
    said = f"{n} {noun}{'' if n == 1 else 's'}"
    return f"{said} {verb}{'s' if n == 1 else ''}" if verb else said


def _messages(x: Any, verb: str = "") -> str:
    return _count(x, "message", verb)


def _limited(x: Any) -> Any:
    return x > 0 if isinstance(x, np.ndarray) else (x is not None and not pd.isna(x) and x > 0)


# A consumer's own rhythm, doubled, is how long is too long for it: a gap twice the longest it
# showed in the window is not its normal pace.
RHYTHM = 2.0
ACK_WAIT_DEFAULT = 30.0  # the server's default ack_wait, for a config that does not say


def _th(x: Any, name: str) -> Any:
    """A consumer's threshold: its own, where its metadata sets one (health/thresholds.py), else the
    setting (`_inputs` puts one or the other in every row's column)."""
    return x[THRESHOLD + name]


def _after(x: Any, th: Thresholds, name: str) -> Any:
    """A rule's duration (its `for:`) per consumer, at most half the health window: the window must
    hold the evidence."""
    return ew.minimum(_th(x, name), th.health_window / 2)


DURATIONS = ("stalled_after", "no_pullers_after", "pin_idle_after", "lagging_after")


def shortest_duration(th: Thresholds, overrides: Mapping[str, np.ndarray] | None = None) -> float:
    """The shortest time any condition must hold before a rule can fire on it, whatever the
    consumer's rhythm (which only ever lengthens it): of the settings and of the consumers' own
    thresholds in `overrides` (THRESHOLD_COLUMNS, NaN where a consumer sets none)."""
    shortest = min(float(getattr(th, name)) for name in DURATIONS)
    for name in DURATIONS:
        own = (overrides or {}).get(THRESHOLD_INPUT + name)
        if own is not None and len(own) and not np.isnan(own).all():
            shortest = min(shortest, float(np.nanmin(own)))
    return min(shortest, th.health_window / 2)


def rhythm_after(th: Thresholds, overrides: Mapping[str, np.ndarray] | None, ack_wait_ns: np.ndarray) -> np.ndarray:
    """Per consumer, how long a condition must have held before its rhythm can matter to a verdict
    (health/onsets.py): the shortest rule duration, or its ack_wait where that is shorter
    (STALLED on a timed-out ack_wait waits for the consumer's rhythm too)."""
    return np.fmin(shortest_duration(th, overrides), _ack_wait({"ack_wait_ns": floats(ack_wait_ns)}))


def _held(x: Any, onset: str) -> Any:
    """How long a condition has held at the latest sample (NaN: it does not hold)."""
    return x["last_seconds"] - x[onset]


def _rhythm(gap: Any, floor: Any) -> Any:
    """The duration a condition must hold: `floor`, or the consumer's own longest gap doubled."""
    return ew.fmax(floor, RHYTHM * ew.nan_to_zero(gap))


def _ack_wait(x: Any) -> Any:
    ack_wait = x["ack_wait_ns"] / 1e9
    return ew.where(ew.isnan(ack_wait) | (ack_wait <= 0), ACK_WAIT_DEFAULT, ack_wait)


def _seconds_text(seconds: float) -> str:
    return durations.duration(seconds)


def _for(c: Ctx, held: float) -> str:
    """How long a condition has held, in words: "at least" that long where it held through the
    whole health window (its onset is the window's first sample, so it began before; the
    verdict's since, kept from earlier cycles, says when)."""
    whole = float(c["last_seconds"] - c["first_ts"])
    return f"at least {_seconds_text(held)}" if abs(held - whole) < 0.5 and whole > 0 else _seconds_text(held)


def _stalled_at_limit(x: Any) -> Any:
    """In flight at max_ack_pending while pulls keep coming: nothing more can be delivered."""
    return _limited(x["max_ack_pending"]) & (x["ack_pending_last"] >= x["max_ack_pending"]) & (x["waiting_last"] > 0)


def _stalled_fast(x: Any, th: Thresholds) -> Any:
    """Unambiguous before ack_wait: more work handed out, or the limit reached with pulls waiting,
    while nothing is acknowledged for longer than the consumer ever went between acks."""
    held = _held(x, "stall_onset")
    known = ~ew.isnan(x["ack_gap_max"])
    slower = held >= _rhythm(x["ack_gap_max"], _after(x, th, "stalled_after"))
    return slower & ((known & (x["stall_grew"] | _stalled_at_limit(x))) | (~known & _stalled_at_limit(x)))


def _stalled_timed_out(x: Any) -> Any:
    """ack_wait passed with nothing acknowledged and nothing delivered or reported in progress:
    every message in flight has outlived its ack timer in the hands of a client that does nothing.
    And for longer than the consumer ever went between acks: a worker pulling one message at a
    time whose jobs outlast ack_wait goes that quiet between acknowledgements that keep coming,
    and the server redelivers to it as it pulls again (REDELIVERING's case), not a stall."""
    quiet = ew.where(ew.isnan(x["quiet_since"]), x["stall_onset"], x["quiet_since"])
    return ~ew.isnan(x["stall_onset"]) & (x["last_seconds"] - quiet >= _rhythm(x["ack_gap_max"], _ack_wait(x)))


def _stalled_redelivered(x: Any) -> Any:
    """ack_wait passed with nothing acknowledged while the server redelivered the work, and for
    longer than the consumer ever went between acks: an ack_wait shorter than the work redelivers
    between acknowledgements that keep coming (REDELIVERING's case and a config finding), not a stall."""
    return (_held(x, "stall_onset") >= _rhythm(x["ack_gap_max"], _ack_wait(x))) & x["stall_redelivered"]


def _stalled_silent(x: Any, th: Thresholds) -> Any:
    """Work in flight, and its holders went silent: nothing acknowledged, nothing delivered and no
    pull waiting, for longer than the consumer ever went between acknowledgements (doubled, and at
    least --stalled-after). Workers that exit or are killed holding messages leave exactly this,
    long before ack_wait passes; a worker busy with one long job is told apart by its own rhythm
    (an ack gap that long seen before), and one reporting progress (+WPI) is not quiet."""
    known = ~ew.isnan(x["ack_gap_max"])
    rhythm = _rhythm(x["ack_gap_max"], _after(x, th, "stalled_after"))
    quiet_since = ew.where(ew.isnan(x["quiet_since"]), x["stall_onset"], x["quiet_since"])
    quiet = x["last_seconds"] - quiet_since
    return known & (_held(x, "stall_onset") >= rhythm) & (quiet >= rhythm) & (x["waiting_last"] == 0)


def _refused(x: Any) -> Any:
    """Messages refused in the window: naked, or dropped at max_deliver (from the advisories)."""
    return (ew.nan_to_zero(x["nak_count"]) + ew.nan_to_zero(x["max_deliveries_count"])) > 0


def _stalled_failing(x: Any, th: Thresholds) -> Any:
    """Deliveries go on, acknowledgements stopped, and messages are refused: a worker that fails
    every message naks it until max_deliver drops it, so nothing stays in flight and the ack floor
    moves; only the server's clocks (delivered yes, acknowledged no) and the advisories tell."""
    after = _after(x, th, "stalled_after")
    since_ack = x["last_seconds"] - ew.fmax(x["acked_last_active"], x["first_ts"])
    delivering = x["last_seconds"] - x["delivered_last_active"] <= after / 2
    return (since_ack >= _rhythm(x["ack_gap_max"], after)) & delivering & _refused(x)


def _stopped_pulling(x: Any) -> Any:
    """Nothing delivered through the later half of the stall: the work in flight grew at its start
    (the holder's last pull) and nothing more was handed out since, so the client holding it
    stopped, rather than keeps pulling work it never acknowledges."""
    return (x["last_seconds"] - x["delivered_last_active"]) >= _held(x, "stall_onset") / 2


def _stalled(f: Columns, th: Thresholds) -> np.ndarray:
    return (_stalled_fast(f, th) | _stalled_timed_out(f) | _stalled_redelivered(f) | _stalled_silent(f, th)
            | _stalled_failing(f, th))


def _age(c: Ctx) -> float:
    """The latest sample's oldest unacknowledged age (0 when unknown or nothing unacknowledged)."""
    age = c.get("unacked_age_last", 0.0)
    return 0.0 if age is None or age != age else float(age)  # None or NaN: unknown


def _waited(seconds: float) -> str:
    return durations.duration(seconds)


def _stalled_says(c: Ctx, th: Thresholds) -> Finding:
    if ew.isnan(c["stall_onset"]) or not bool(_stalled_fast(c, th) | _stalled_timed_out(c) | _stalled_redelivered(c)
                                              | _stalled_silent(c, th)):
        return _failing_says(c, th)
    held = float(_held(c, "stall_onset"))
    numbers: dict[str, Any] = {"ack_pending": _n(c["ack_pending_last"]), "seconds": round(held),
                               "ack_wait_seconds": round(float(_ack_wait(c)))}
    reason = f"{_messages(c['ack_pending_last'])} handed out and none acknowledged for {_for(c, held)}"
    if bool(_stalled_timed_out(c)):
        reason += f"; nothing delivered or reported in progress since, and ack_wait ({_seconds_text(float(_ack_wait(c)))}) has passed"
        numbers["holder"] = "idle"
    elif bool(_stalled_redelivered(c)):
        reason += "; the server redelivers them and they are not acknowledged either"
        numbers["holder"] = "redelivered"
    elif bool(_stalled_silent(c, th)) and not bool(_stalled_at_limit(c)):
        quiet_since = c["quiet_since"] if not ew.isnan(c["quiet_since"]) else c["stall_onset"]
        reason += (f"; nothing delivered either and no pull waits: the clients holding them went silent (stopped or "
                   f"gone; they acknowledged at least every {_seconds_text(float(c['ack_gap_max']))} before)")
        numbers["holder"] = "silent"
        numbers["redelivered_by"] = float(quiet_since + _ack_wait(c))
    elif bool(_stalled_at_limit(c)):
        reason += f"; in flight is at max_ack_pending ({_n(c['max_ack_pending'])}) while pulls wait"
        numbers["holder"] = "at_limit"
    elif bool(_stopped_pulling(c)):
        quiet = float(c["last_seconds"] - c["delivered_last_active"])
        reason += f"; nothing delivered either for {_seconds_text(quiet)}: the client holding them stopped pulling"
        numbers["holder"] = "stopped"
    else:
        reason += (f"; more keeps being handed out (it acknowledged at least every "
                   f"{_seconds_text(float(c['ack_gap_max']))} before)")
        numbers["holder"] = "pulling"
    if numbers["holder"] in ("stopped", "idle") and c["waiting_last"] > 0:
        reason += f"; {_count(c['waiting_last'], 'other pull request', 'wait')} for work"
        numbers["waiting"] = _n(c["waiting_last"])
    if numbers["holder"] != "at_limit" and bool(_stalled_at_limit(c)):
        reason += f"; in flight is at max_ack_pending ({_n(c['max_ack_pending'])})"
    if _age(c) > 0:
        reason += f"; the oldest has waited {_waited(_age(c))}"
        numbers["oldest_unacked_age_seconds"] = round(_age(c))
    return Finding("STALLED", reason, numbers)


def _failing_says(c: Ctx, th: Thresholds) -> Finding:
    held = float(c["last_seconds"] - ew.fmax(c["acked_last_active"], c["first_ts"]))
    naks, dropped = _n(ew.nan_to_zero(c["nak_count"])), _n(ew.nan_to_zero(c["max_deliveries_count"]))
    reason = (f"messages keep being delivered and none acknowledged for {_for(c, held)}: "
              f"{naks} naked, {dropped} dropped at max_deliver in the window")
    return Finding("STALLED", reason, {"ack_pending": _n(c["ack_pending_last"]), "seconds": round(held),
                                       "naks": naks, "max_deliveries": dropped, "holder": "failing"})


def _idle_for(x: Any, th: Thresholds, onset: str, name: str) -> Any:
    """An idle condition held long enough: the consumer's own pull rhythm doubled, when jetwatch has
    seen it pull; else at least half the health window (a consumer first seen idle may be one
    that pulls rarely). A batch consumer's rhythm, learnt beyond the window (health/pull_rhythm.py),
    must have passed twice over as well, counted from the start of its wait."""
    seen = x["pullers_seen"] if onset == "idle_onset" else ~ew.isnan(x["pull_gap_max"])
    floor = ew.where(seen, _after(x, th, name), ew.maximum(_after(x, th, name), th.health_window / 2))
    held = _held(x, onset)
    waited = ew.fmax(held, x["pull_waited"])
    batch = ew.isnan(x["pull_rhythm"]) | (waited >= RHYTHM * x["pull_rhythm"])
    # A consumer's own duration longer than the window can hold (a job declared hourly in its
    # metadata) is counted from the start of its wait, which the collector follows beyond it; the
    # setting itself stays at most half the window (_after).
    own = _th(x, name)
    declared = (own <= th.health_window / 2) | (own == float(getattr(th, name))) | (waited >= own)
    return (held >= _rhythm(x["pull_gap_max"], floor)) & batch & declared


def _pull_waited(c: Ctx, onset: str) -> float:
    """How long an idle consumer has waited for a pull: since its wait began, where the collector
    knows (beyond the window), else since the condition's onset."""
    held, waited = float(_held(c, onset)), float(c["pull_waited"])
    return held if math.isnan(waited) else waited if math.isnan(held) else max(held, waited)


def _rhythm_says(c: Ctx) -> str:
    rhythm = c["pull_rhythm"]
    if rhythm is None or rhythm != rhythm:  # NaN: no rhythm learnt (a float read per row, as pd.isna but cheaper)
        return ""
    return f" (it was pulled about every {_seconds_text(float(rhythm))} before)"


def _no_pullers(f: Columns, th: Thresholds) -> np.ndarray:
    return _idle_for(f, th, "idle_onset", "no_pullers_after")


def _no_pullers_says(c: Ctx, th: Thresholds) -> Finding:
    held = _pull_waited(c, "idle_onset")
    return Finding("NO_PULLERS", f"{_messages(c['pending_last'])} pending, nothing in flight and no client has "
                   f"pulled for {_for(c, held)}{_rhythm_says(c)}",
                   {"pending": _n(c["pending_last"]), "waiting": 0, "seconds": round(held)})


def _pin_idle(f: Columns, th: Thresholds) -> np.ndarray:
    return (f["priority_policy"] == "pinned_client") & _idle_for(f, th, "pin_idle_onset", "pin_idle_after")


def pin_moves_by(c: Ctx) -> float | None:
    """When the server's priority_timeout moves the pin at the latest (epoch seconds): the timer
    restarts with every pull carrying the pin id, which jetwatch cannot see, so the last delivery
    plus the timeout is an upper bound. None when either is unknown."""
    timeout, last = c.get("priority_timeout_ns"), c.get("delivered_last_active")
    if timeout is None or last is None or pd.isna(timeout) or pd.isna(last) or timeout <= 0:
        return None
    return float(last) + float(timeout) / 1e9


def _pin_idle_says(c: Ctx, th: Thresholds) -> Finding:
    held = _pull_waited(c, "pin_idle_onset")
    numbers: dict[str, Any] = {"pending": _n(c["pending_last"]), "waiting": _n(c["waiting_last"]),
                               "seconds": round(held)}
    reason = (f"the pinned client has pulled nothing for {_for(c, held)}{_rhythm_says(c)} while "
              f"{_messages(c['pending_last'], 'wait')} and {_count(c['waiting_last'], 'other pull request', 'wait')} for the pin")
    moves = pin_moves_by(c)
    if moves is not None:
        numbers["pin_moves_by"] = round(moves, 3)
        left = moves - float(c["last_seconds"])
        reason += (f"; priority_timeout moves the pin by itself within {_seconds_text(left)} at the latest" if left > 0
                   else "; priority_timeout should have moved the pin already")
    return Finding("PIN_IDLE", reason, numbers)


def _ack_saturated(x: Any, th: Thresholds) -> Any:
    """In flight near max_ack_pending while work waits behind it. A limit of one is strict order by
    design (its worker is always at it): whether such a consumer keeps up is LAGGING's question."""
    return (_limited(x["max_ack_pending"]) & (x["max_ack_pending"] > 1) & (x["pending_last"] > 0)
            & (x["ack_pending_recent_min"] >= _th(x, "saturation_ratio") * x["max_ack_pending"]))


def _waiting_saturated(x: Any, th: Thresholds) -> Any:
    """Pulls waiting at max_waiting now, and never more than one below it in the latest samples:
    clients re-pull as soon as a pull ends, so a sample taken between the two shows one fewer,
    which is not the limit easing."""
    at = _th(x, "saturation_ratio") * x["max_waiting"]
    return (x["is_pull"] & _limited(x["max_waiting"]) & (x["waiting_last"] >= at)
            & (x["waiting_recent_min"] >= at - 1))


def _saturated(f: Columns, th: Thresholds) -> np.ndarray:
    return _ack_saturated(f, th) | _waiting_saturated(f, th)


def _saturated_says(c: Ctx, th: Thresholds) -> Finding:
    parts: list[str] = []
    numbers: dict[str, float | int | str] = {}
    if _ack_saturated(c, th):
        parts.append(f"{_n(c['ack_pending_last'])} of max_ack_pending {_n(c['max_ack_pending'])} in flight")
        numbers.update(ack_pending=_n(c["ack_pending_last"]), max_ack_pending=_n(c["max_ack_pending"]))
    if _waiting_saturated(c, th):
        parts.append(f"{_n(c['waiting_last'])} of max_waiting {_n(c['max_waiting'])} pull requests waiting "
                     "(further pulls get 409 Exceeded MaxWaiting)")
        numbers.update(waiting=_n(c["waiting_last"]), max_waiting=_n(c["max_waiting"]))
    return Finding("SATURATED", "; ".join(parts), numbers)


def _unpinned(f: Columns, th: Thresholds) -> np.ndarray:
    return (f["priority_policy"] == "pinned_client") & (f["pending_last"] > 0) & (f["nopin_seconds"] > _th(f, "unpinned_after"))


def _unpinned_says(c: Ctx, th: Thresholds) -> Finding:
    return Finding("UNPINNED", f"no pinned client for {c['nopin_seconds']:.0f}s with {_n(c['pending_last'])} "
                   "messages pending", {"seconds": round(c["nopin_seconds"]), "pending": _n(c["pending_last"])})


def _switches(x: Any) -> Any:
    if isinstance(x["pin_switches"], np.ndarray):
        return np.maximum(x["pin_switches"], x["sample_pin_switches"])
    return max(int(x["pin_switches"]), int(x["sample_pin_switches"]))


def flapping(switches_in_a_window: Any, th: Thresholds) -> Any:
    """The FLAPPING rule on a count of pin switches within the last health window (the collector
    judges it each cycle; the Fleet and the Pins page both show that verdict)."""
    return switches_in_a_window > th.flapping_switches


def flapping_span(th: Thresholds) -> str:
    """The span FLAPPING is judged over, in words, as every page says it: the last health window."""
    return f"the last {durations.duration(th.health_window)}"


def flapping_words(th: Thresholds) -> str:
    """The rule in words: what FLAPPING means, over which span."""
    return f"more than {th.flapping_switches} pin switches in {flapping_span(th)}"


def _flapping(f: Columns, th: Thresholds) -> np.ndarray:
    return _switches(f) > _th(f, "flapping_switches")


def _flapping_says(c: Ctx, th: Thresholds) -> Finding:
    n = _switches(c)
    limit = _n(_th(c, "flapping_switches"))  # the consumer's own, where its metadata sets one
    return Finding("FLAPPING", f"{n} new pins in {flapping_span(th)} (more than {limit} is flapping)",
                   {"switches": n, "limit": limit})


def _redeliveries(x: Any) -> Any:
    """Redeliveries in the window. Δ consumer_seq − Δ stream_seq counts them only when every
    stream message is the consumer's: on a filtered consumer the stream sequence jumps."""
    from_sequences = np.maximum(0.0, x["deliveries"] - x["stream_delivered"]) * (1 - np.asarray(x["filtered"], dtype=float))
    return from_sequences + x["nak_count"] + x["max_deliveries_count"]


def _share(x: Any) -> Any:
    deliveries = np.asarray(x["deliveries"], dtype=float)
    return np.where(deliveries > 0, _redeliveries(x) / np.where(deliveries > 0, deliveries, 1.0), 0.0)


def _gauge_rising(x: Any) -> Any:
    return (x["redelivered_last"] > x["redelivered_first"]) & x["redelivered_never_falls"]


def _dropped(x: Any) -> Any:
    """Messages that reached max_deliver in the window: dropped unprocessed."""
    return ew.nan_to_zero(x["max_deliveries_count"]) > 0


def _redelivered_throughout(x: Any) -> Any:
    """Messages delivered more than once awaited acknowledgement at every sample of the window:
    num_redelivered is a level, not a counter, so a steady redelivery holds it flat above zero
    (neither rising nor a share the sequences can show on a filtered consumer), and the consumer is
    redelivering for as long as it stays there."""
    return ew.nan_to_zero(x["redelivered_min"]) > 0


def _redelivering(f: Columns, th: Thresholds) -> np.ndarray:
    return (((f["deliveries"] > 0) & (_share(f) > _th(f, "redelivery_share"))) | _gauge_rising(f) | _dropped(f)
            | _redelivered_throughout(f))


def _redelivering_says(c: Ctx, th: Thresholds) -> Finding:
    if bool(_dropped(c)):
        n = _n(c["max_deliveries_count"])
        return Finding("REDELIVERING", f"{n} message{'s' if n != 1 else ''} reached max_deliver in the window and "
                       "will not be delivered again (redelivered, never acknowledged)",
                       {"max_deliveries": n, "redeliveries": _n(_redeliveries(c))})
    share = float(_share(c))
    if c["deliveries"] > 0 and share > _th(c, "redelivery_share"):
        return Finding("REDELIVERING", f"{share:.0%} of {_n(c['deliveries'])} deliveries were redeliveries",
                       {"redeliveries": _n(_redeliveries(c)), "deliveries": _n(c["deliveries"]), "share": round(share, 3)})
    if bool(_gauge_rising(c)):
        return Finding("REDELIVERING", f"messages awaiting redelivery rose from {_n(c['redelivered_first'])} to "
                       f"{_n(c['redelivered_last'])}",
                       {"redelivered_first": _n(c["redelivered_first"]), "redelivered_last": _n(c["redelivered_last"])})
    n = _n(c["redelivered_last"])
    return Finding("REDELIVERING", f"{n} message{'s' if n != 1 else ''} delivered more than once "
                   f"{'await' if n != 1 else 'awaits'} acknowledgement, and some have at every sample of the last "
                   f"{_n(c['span_seconds'])} s: their handlers do not acknowledge within ack_wait",
                   {"redelivered_last": n, "redelivered_min": _n(c["redelivered_min"]),
                    "seconds": _n(c["span_seconds"])})


# Falling behind: the oldest unacknowledged message getting older with wall time. At least this
# share of the time passed must show in its age (a worker at half the arrival rate shows 0.5).
AGE_GROWTH = 0.25
BEHIND_GROWTH = 0.1


def _age_rising(x: Any, th: Thresholds) -> Any:
    """The oldest unacknowledged age rose at every sample, work waiting, for long enough."""
    held = _held(x, "age_rise_onset")
    return ((x["pending_last"] > 0) & (held >= _rhythm(x["age_rise_gap_max"], _after(x, th, "lagging_after")))
            & (x["age_rise"] >= AGE_GROWTH * held))


def _never_caught_up(x: Any, th: Thresholds) -> Any:
    """Work waiting and the oldest message never fresh again since the onset, older by a share of
    the time passed, and the backlog's low point higher in the run's second half than in its first:
    a sawtooth whose low points rise (Burrow's "the lag never reached zero"). A consumer that
    acknowledges in batches is never fresh by design (its oldest message waits out a batch) and its
    age swings by its batch period: it is behind only once the age has risen by more than its own
    rhythm between acknowledgements, doubled, as every rhythm here is read."""
    held = _held(x, "behind_onset")
    return ((held >= _rhythm(x["behind_gap_max"], _after(x, th, "lagging_after")))
            & (x["behind_rise"] >= _rhythm(x["ack_gap_max"], BEHIND_GROWTH * held)) & (x["behind_backlog_rise"] > 0))


def _acks_came(x: Any) -> Any:
    """Acknowledged within the window, by the server's clock (the ack floor where it gives none)."""
    known = ~ew.isnan(x["acked_last_active"])
    return ew.where(known, x["acked_last_active"] >= x["first_ts"], x["ack_floor_moved"])


def _growing(x: Any) -> Any:
    """Without ages (time lag not collected): the backlog grows through the window while acks come."""
    return ((x["unacked_age_last"] <= 0) & (x["pending_slope"] > 0) & (x["pending_last"] > x["pending_first"])
            & (x["pending_rising_share"] >= 0.6) & _acks_came(x))


def _too_old(f: Columns, th: Thresholds) -> np.ndarray:
    return f["unacked_age_last"] > _th(f, "lagging_age")  # unknown (NaN) is not too old


def _lagging(f: Columns, th: Thresholds) -> np.ndarray:
    """Falling behind while clients pull and acknowledge: work waiting for nobody is NO_PULLERS or
    PIN_IDLE (the cause), and work held with nothing acknowledged is STALLED (the oldest message
    ages because nothing is done, not because arrivals outrun the workers), not a consumer too
    slow for its arrivals."""
    pulled = np.isnan(f["idle_onset"]) & np.isnan(f["pin_idle_onset"])
    return pulled & ~_stalled(f, th) & (f["age_rising"] | f["never_caught_up"] | f["growing"] | _too_old(f, th))


def _lagging_says(c: Ctx, th: Thresholds) -> Finding:
    parts: list[str] = []
    numbers: dict[str, float | int | str] = {}
    for fired, onset, rise in (("age_rising", "age_rise_onset", "age_rise"), ("never_caught_up", "behind_onset", "behind_rise")):
        if c[fired]:
            held = float(_held(c, onset))
            parts.append(f"the oldest unacknowledged message got {_seconds_text(float(c[rise]))} older in "
                         f"{_seconds_text(held)} with {_messages(c['pending_last'])} waiting: it falls behind")
            numbers.update(seconds=round(held), pending=_n(c["pending_last"]))
            break
    if c["growing"]:
        parts.append(f"backlog grew from {_n(c['pending_first'])} to {_n(c['pending_last'])} "
                     f"({c['pending_slope']:.1f}/s) while acks kept coming")
        numbers.update(pending_first=_n(c["pending_first"]), pending_last=_n(c["pending_last"]),
                       per_second=round(float(c["pending_slope"]), 2))
    lagging_age = float(_th(c, "lagging_age"))
    if _age(c) > lagging_age:
        parts.append(f"the oldest unacknowledged message has waited {_waited(_age(c))} "
                     f"(more than {_waited(lagging_age)})")
        numbers.update(lagging_age=round(lagging_age))
    if _age(c) > 0:
        numbers.update(oldest_unacked_age_seconds=round(_age(c)))
    return Finding("LAGGING", "; ".join(parts), numbers)


def _lagging_since(f: Columns, th: Thresholds) -> np.ndarray:
    """Since the oldest message began getting older: the rule that fired first gives the onset."""
    return np.where(f["age_rising"], f["age_rise_onset"], np.where(f["never_caught_up"], f["behind_onset"], np.nan))


def _onset(name: str) -> Callable[[Columns, Thresholds], np.ndarray]:
    return lambda f, th: f[name]


def _unpinned_since(f: Columns, th: Thresholds) -> np.ndarray:
    return f["last_seconds"] - f["nopin_seconds"]


def _loss_projected(time_to_loss: np.ndarray, within: Any) -> np.ndarray:
    """The stream's limits will remove messages the consumer has not processed within `within`
    seconds at the current rates (health/loss.py; NaN: no loss in sight), or have already."""
    with np.errstate(invalid="ignore"):
        return np.asarray(time_to_loss <= within, dtype=bool)


def loss_within(feats: Mapping[str, Any], th: Thresholds) -> np.ndarray:
    """Each consumer's --loss-within over the collector's columns: its own where its metadata sets
    one, else the setting (what `_inputs` gives the rules as `_th(f, "loss_within")`)."""
    own = feats.get(THRESHOLD_INPUT + "loss_within")
    n = len(feats["time_to_loss_seconds"])
    return np.full(n, th.loss_within) if own is None else np.where(np.isnan(floats(own)), th.loss_within, floats(own))


def _losing(f: Columns, th: Thresholds) -> np.ndarray:
    """A loss already happened, or one projected has held for --losing-after (at most half the
    health window, which must hold the evidence, as for every rule's duration): since
    `loss_seen_since`, the first sample of the projection's unbroken run as the collector reads it
    from the window. Where no run is given (NaN: a window judged on its own, as the pipeline does,
    without the samples' projections) the latest projection is taken as it is."""
    seen = f["loss_seen_since"]
    held = np.isnan(seen) | (f["last_seconds"] - seen >= min(th.losing_after, th.health_window / 2))
    return _loss_projected(f["time_to_loss_seconds"], _th(f, "loss_within")) & ((f["time_to_loss_seconds"] <= 0) | held)


def _losing_since(f: Columns, th: Thresholds) -> np.ndarray:
    return f["loss_seen_since"]


def _losing_says(c: Ctx, th: Thresholds) -> Finding:
    seconds = float(c["time_to_loss_seconds"])
    limit = c["loss_limit"] if isinstance(c["loss_limit"], str) and c["loss_limit"] else None
    named = f"the stream's {limit}" if limit else "one of the stream's limits (max_age, max_msgs or max_bytes)"
    numbers: dict[str, float | int | str] = {"seconds": 0 if seconds <= 0 else round(seconds)}
    if limit:
        numbers["limit"] = limit
    if seconds <= 0:
        return Finding("LOSING", f"{named} removed messages the consumer had not processed: its oldest "
                       "unacknowledged message is gone", numbers)
    return Finding("LOSING", f"at this rate {named} removes messages the consumer has not processed in "
                   f"~{_seconds_text(seconds)}", numbers)


# A stream with discard new refuses a message that does not fit: less room than one message is full.
FULL_BELOW_MESSAGES = 1.0


def _stream_full(f: Columns, th: Thresholds) -> np.ndarray:
    """The consumer's stream refuses publishes (health/loss.py `room_before_refused`): a cause
    outside the consumer, after the worker verdicts, which would be what fills a work-queue stream."""
    with np.errstate(invalid="ignore"):
        return np.asarray(f["stream_room_messages"] < FULL_BELOW_MESSAGES, dtype=bool)


def _stream_full_says(c: Ctx, th: Thresholds) -> Finding:
    return Finding("STREAM_FULL", "the stream holds all its max_msgs or max_bytes allow (no message of its mean "
                   "size fits) and discards new messages: every publish to it is refused (publishers get \"maximum messages exceeded\" or \"maximum "
                   "bytes exceeded\"), so no new work reaches this consumer",
                   {"room_messages": round(float(c["stream_room_messages"]), 2)})


def _paused(f: Columns, th: Thresholds) -> np.ndarray:
    return f["paused_last"]


def _paused_says(c: Ctx, th: Thresholds) -> Finding:
    return Finding("PAUSED", "the consumer is paused: no deliveries until it resumes", {})


@dataclass(frozen=True)
class Rule:
    verdict: Verdict
    when: Callable[[Columns, Thresholds], np.ndarray]
    says: Callable[[Ctx, Thresholds], Finding]
    pull_only: bool = False
    suppressed_by_pause: bool = False
    # When its cause began (epoch seconds; NaN: not known), the verdict's `since` on every surface.
    since: Callable[[Columns, Thresholds], np.ndarray] | None = None


# Severity order, causes before symptoms: the first rule that fires gives the verdict. STALLED,
# NO_PULLERS and PIN_IDLE exclude each other (work in flight; none in flight and no pull; none in
# flight and a pull waiting that the pin holder does not make).
RULES: tuple[Rule, ...] = (
    Rule(BY_NAME["STALLED"], _stalled, _stalled_says, since=_onset("stall_onset")),
    Rule(BY_NAME["NO_PULLERS"], _no_pullers, _no_pullers_says, pull_only=True, suppressed_by_pause=True, since=_onset("idle_onset")),
    Rule(BY_NAME["PIN_IDLE"], _pin_idle, _pin_idle_says, pull_only=True, suppressed_by_pause=True, since=_onset("pin_idle_onset")),
    Rule(BY_NAME["SATURATED"], _saturated, _saturated_says),
    Rule(BY_NAME["STREAM_FULL"], _stream_full, _stream_full_says),
    Rule(BY_NAME["LOSING"], _losing, _losing_says, since=_losing_since),
    Rule(BY_NAME["UNPINNED"], _unpinned, _unpinned_says, pull_only=True, since=_unpinned_since),
    Rule(BY_NAME["FLAPPING"], _flapping, _flapping_says, pull_only=True),
    Rule(BY_NAME["REDELIVERING"], _redelivering, _redelivering_says, since=_onset("redelivered_onset")),
    Rule(BY_NAME["LAGGING"], _lagging, _lagging_says, suppressed_by_pause=True, since=_lagging_since),
    Rule(BY_NAME["PAUSED"], _paused, _paused_says),
)
# The rules fire in the verdict table's order (health/verdicts.py): causes before symptoms.
assert tuple(r.verdict.name for r in RULES) == VERDICT_NAMES[len(CLUSTER_VERDICTS):-2], "RULES out of the table's order"
OK = Finding("OK", BY_NAME["OK"].meaning, {})


def _collecting(c: Ctx, th: Thresholds) -> Finding:
    numbers = {"samples": _n(c["samples"]), "seconds": round(c["span_seconds"])}
    if c["samples"] >= th.health_min_samples and c["span_seconds"] >= th.health_min_span:
        return Finding("COLLECTING", f"{_messages(c['pending_last'], 'wait')} and no client has pulled in any of the "
                       f"{_n(c['samples'])} samples so far ({_seconds_text(c['span_seconds'])}): named once it lasts "
                       "long enough", numbers)
    return Finding("COLLECTING", f"{_n(c['samples'])} samples over {c['span_seconds']:.0f}s; a verdict needs "
                   f"{th.health_min_samples} over {th.health_min_span:.0f}s", numbers)


class _Columns(dict[str, list[Any]]):
    """The speaking rows' columns as lists of Python values (numbers as floats, as `_inputs`
    makes them), each made on first use (a dict: a column already made is a plain lookup, read
    for every value a rule's words say)."""

    def __init__(self, columns: Columns, rows: np.ndarray) -> None:
        super().__init__()
        self.columns, self.rows = columns, rows

    def __missing__(self, name: str) -> list[Any]:
        made = self[name] = self.columns[name][self.rows].tolist()
        return made


class _Row(Mapping[str, Any]):
    """One row of a `_Columns`, as a read-only mapping (a rule's Ctx)."""

    __slots__ = ("columns", "at")

    def __init__(self, columns: _Columns, at: int) -> None:
        self.columns, self.at = columns, at

    def __getitem__(self, name: str) -> Any:
        return self.columns[name][self.at]

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns.columns)

    def __len__(self) -> int:
        return len(self.columns.columns)


def judge(f: Frame, th: Thresholds) -> list[list[Finding]]:
    """All findings per consumer (row of `f`), most severe first; COLLECTING or OK when none."""
    return _judge(_inputs(f, th), len(f), th)[0]


def _judge(f: Columns, n: int, th: Thresholds) -> tuple[list[list[Finding]], np.ndarray, np.ndarray]:
    """`judge` over `_inputs`, with the rows that have anything to say (COLLECTING, or a rule
    fired): every other row holds one shared [OK]; and each row's verdict's rule (-1: none)."""
    collecting = (f["samples"] < th.health_min_samples) | (f["span_seconds"] < th.health_min_span)
    paused = f["paused_last"]
    fired = []
    with np.errstate(invalid="ignore", divide="ignore"):
        for rule in RULES:
            mask = np.asarray(rule.when(f, th), dtype=bool) & ~collecting
            if rule.pull_only:
                mask &= f["is_pull"]
            if rule.suppressed_by_pause:
                mask &= ~paused
            fired.append(mask)
        # Never a false OK: a consumer idle since its first sample in the window, not yet for long
        # enough to be named, has never been seen healthy: it is still being collected.
        idle_throughout = f["is_pull"] & ~paused & ((f["idle_onset"] <= f["first_ts"]) | (f["pin_idle_onset"] <= f["first_ts"]))
        idle_throughout &= ~np.logical_or.reduce(fired)
        collecting = collecting | idle_throughout
    # Words only for the consumers something fired on (or still collecting): each such row read
    # through the columns, a column made into Python values once and only when a rule's words ask
    # for it (a dict of values per row would cost more than the rules).
    speaks = collecting | np.logical_or.reduce(fired) if fired else collecting
    rows = np.flatnonzero(speaks)
    columns = _Columns(f, rows)
    quiet = [OK]  # shared by every consumer nothing fired on: read, never changed
    out: list[list[Finding]] = [quiet] * n
    at_of = {i: at for at, i in enumerate(rows.tolist())}
    for i in np.flatnonzero(collecting).tolist():
        out[i] = [_collecting(_Row(columns, at_of[i]), th)]
    # Each firing (consumer, rule) pair, consumer by consumer and in severity order within one.
    firing = rows[~collecting[rows]]
    if len(firing) and fired:
        which, rule_at = np.nonzero(np.column_stack(fired)[firing])
        current = -1
        ctx: Ctx = {}  # the row of `current`: set at the first pair, whose consumer differs
        for k, r in zip(firing[which].tolist(), rule_at.tolist()):
            if k != current:
                current, ctx = k, _Row(columns, at_of[k])
                out[k] = []
            out[k].append(RULES[r].says(ctx, th))
    top = np.full(n, -1)
    for r in reversed(range(len(fired))):
        top[fired[r]] = r
    return out, rows, top


LIMIT_COLUMNS = ["is_pull", "filtered", "max_ack_pending", "max_waiting", "priority_policy", "ack_wait_ns",
                 "priority_timeout_ns", "time_to_loss_seconds", "loss_limit", "stream_room_messages"]
COUNT_COLUMNS = ["pin_switches", "nak_count", "max_deliveries_count"]
VERDICT_COLUMNS = KEY + ["verdict", "reason", "findings", "samples", "last_ts", "since", "delivered_per_second",
                         "acked_per_second", "redelivered_per_second"]


def evaluate(samples: Samples, limits: pd.DataFrame | None, thresholds: Thresholds,
             counts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Verdicts for every consumer in `samples` (one window), as the pipeline judges them.
    `limits` has KEY + LIMIT_COLUMNS; `counts` has KEY +
    some of COUNT_COLUMNS (events in the window)."""
    return evaluate_features(window_features(samples), limits, thresholds, counts)


def evaluate_features(feats: pd.DataFrame, limits: pd.DataFrame | None, thresholds: Thresholds,
                      counts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Verdicts from window features already computed (health/window.py's columns);
    `evaluate` is this after window_features."""
    if feats.empty:
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    if limits is not None and not limits.empty:
        feats = feats.merge(limits[KEY + [c for c in (*LIMIT_COLUMNS, *THRESHOLD_COLUMNS) if c in limits]], on=KEY,
                            how="left")
    if counts is not None and not counts.empty:
        feats = feats.merge(counts, on=KEY, how="left")
    judged = verdict_columns(feats, thresholds)
    out = pd.DataFrame({"account": feats["account"].to_numpy(), "stream": feats["stream"].to_numpy(),
                        "consumer": feats["consumer"].to_numpy(), **judged,
                        "last_ts": feats["last_ts"].reset_index(drop=True)})
    return out[VERDICT_COLUMNS]


# How the rules read their inputs: numbers as floats (unknown: NaN, which no comparison passes),
# flags as booleans, the policy as text; a limit or count that is missing takes its default.
FLAGS = {"delivered_moved": False, "ack_floor_moved": False, "redelivered_never_falls": False,
         "paused_last": False, "is_pull": True, "filtered": False, "stall_grew": False, "stall_redelivered": False,
         "pullers_seen": False}
NUMBERS = ("samples", "span_seconds", "pending_first", "pending_last", "pending_min", "pending_slope",
           "pending_rising_share", "ack_pending_min", "ack_pending_last", "ack_pending_recent_min", "waiting_max",
           "waiting_last", "waiting_recent_min", "deliveries", "stream_delivered", "acked", "redelivered_first",
           "redelivered_last", "redelivered_min", "nopin_seconds", "sample_pin_switches")
# Features without onsets (a frame with only window_features.sql's columns): unknown, so no onset rule fires.
DEFAULTS = {"unacked_age_last": 0.0, "max_ack_pending": np.nan, "max_waiting": np.nan, "ack_wait_ns": np.nan,
            "priority_timeout_ns": np.nan, "time_to_loss_seconds": np.nan, "loss_seen_since": np.nan,
            "stream_room_messages": np.nan,
            **{c: 0.0 for c in COUNT_COLUMNS},
            **{c: np.nan for c in ONSET_FEATURES if c not in FLAGS},
            # a batch consumer's rhythm beyond the window (health/pull_rhythm.py): none known
            "pull_rhythm": np.nan, "pull_waited": np.nan}


def _flags(values: Any, missing: bool) -> np.ndarray:
    array = column_array(values)
    if isinstance(array, np.ndarray) and array.dtype == bool:
        return array
    if isinstance(array, np.ndarray) and array.dtype == object:
        try:  # flags and None (the collector's limits)
            return np.where(pd.isna(array), missing, array.astype(bool))
        except (TypeError, ValueError):
            pass
    column = pd.Series(array, dtype=object)
    return column.where(column.notna(), missing).astype(bool).to_numpy()


def _texts(values: Any) -> np.ndarray:
    array = np.array(column_array(values), dtype=object)
    array[pd.isna(array)] = None
    return array


def _inputs(feats: pd.DataFrame | Mapping[str, Any], th: Thresholds) -> dict[str, np.ndarray]:
    """The columns the rules read, as arrays of one kind each (a frame's or the collector's
    arrays, converted only where they are not already so), each consumer's thresholds among them:
    its own where `threshold_<name>` gives one, else the setting."""
    n = len(feats) if isinstance(feats, pd.DataFrame) else len(feats["samples"])
    out: dict[str, np.ndarray] = {}
    for name in (*NUMBERS, *DEFAULTS):
        out[name] = floats(feats[name]) if name in feats else np.full(n, DEFAULTS[name])
    for name in COUNT_COLUMNS:  # no events in the window for a consumer: zero
        out[name] = np.nan_to_num(out[name], nan=0.0)
    for name, missing in FLAGS.items():
        out[name] = _flags(feats[name], missing) if name in feats else np.full(n, missing)
    for name in ("priority_policy", "loss_limit"):
        out[name] = _texts(feats[name]) if name in feats else np.full(n, None)
    for name in OVERRIDABLE:
        setting = float(getattr(th, name))
        own = floats(feats[THRESHOLD_INPUT + name]) if THRESHOLD_INPUT + name in feats else None
        out[THRESHOLD + name] = (np.full(n, setting) if own is None or np.isnan(own).all()
                                 else np.where(np.isnan(own), setting, own))
    with np.errstate(invalid="ignore"):
        for name, condition in DERIVED.items():
            out[name] = np.asarray(condition(out, th), dtype=bool)
    return out


# The ways of falling behind, each read by LAGGING's condition, its since and its words: worked out
# once on the columns, so a firing row's words read them rather than work them out again.
DERIVED: dict[str, Callable[[Columns, Thresholds], Any]] = {
    "age_rising": _age_rising, "never_caught_up": _never_caught_up, "growing": lambda x, th: _growing(x)}


def verdict_columns(feats: pd.DataFrame | Mapping[str, Any], thresholds: Thresholds) -> dict[str, Any]:
    """The verdict, reason, findings, samples and rates of each row of `feats` (features with the
    limits and event counts beside, a frame or arrays by column, missing ones taken as unknown or
    none), as arrays: the collector's judging reads them so, `evaluate_features` puts them in a frame."""
    x = _inputs(feats, thresholds)
    n = len(x["samples"])
    all_findings, speaking, top = _judge(x, n, thresholds)
    since = np.full(n, np.nan)
    with np.errstate(invalid="ignore"):
        for r, rule in enumerate(RULES):
            if rule.since is not None and (top == r).any():
                since[top == r] = np.asarray(rule.since(x, thresholds), dtype=float)[top == r]
    # The common case, OK, shared; words only for the rows that have something to say.
    findings: list[Any] = [[{"verdict": "OK", "reason": OK.reason, "numbers": {}}]] * n
    verdict = np.full(n, "OK", dtype=object)
    reason = np.full(n, OK.reason, dtype=object)
    for i in speaking.tolist():
        f = all_findings[i]
        verdict[i], reason[i] = f[0].verdict, f[0].reason
        findings[i] = [{"verdict": x.verdict, "reason": x.reason, "numbers": x.numbers} for x in f]
    with np.errstate(invalid="ignore", divide="ignore"):
        span = np.where(x["span_seconds"] > 0, x["span_seconds"], np.nan)
        redelivered = np.where(x["filtered"], np.nan, np.maximum(0.0, x["deliveries"] - x["stream_delivered"]))
        return {
            "verdict": verdict, "reason": reason,
            "findings": findings, "samples": x["samples"].astype(int), "since": since,
            "delivered_per_second": x["deliveries"] / span,
            "acked_per_second": x["acked"] / span,
            "redelivered_per_second": redelivered / span,
        }
