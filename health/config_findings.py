"""Config findings: settings that defeat themselves, read from consumer info and the window's samples.

They are findings, not verdicts: a config finding never changes a consumer's verdict nor wakes
anyone; it is shown beside the verdict with its fix (the Consumer page, `status --json`'s
`config_findings`, /metrics' `jetwatch_consumer_config_finding{kind=...}`).

Each kind, with the evidence it needs (all of it over the health window, after its latest reset):

- `max_ack_pending_reached`: in flight (num_ack_pending) at max_ack_pending in every sample while
  messages waited to be delivered (num_pending > 0 in every sample), at least three samples and a
  limit above one (a limit of one is strict ordering by choice). The limit, not the workers, sets
  the pace.
- `max_waiting_reached`: pulls waiting (num_waiting) reached max_waiting in some sample. A pull
  arriving then is refused: the server answers `409 Exceeded MaxWaiting` (server/consumer.go,
  processNextMsgRequest; not sent to a pull that asked for heartbeats, which simply gets nothing).
- `ack_wait_short`: the consumer keeps acknowledging (the ack floor moved), messages were delivered
  again (the consumer's delivered sequence rose more than the stream's, or num_redelivered was
  above zero), no client nak'd in the window (a nak is a redelivery asked for, not an ack_wait
  expiry), and the longest wait for an acknowledgement while messages were in flight
  (`ack_gap_max`, health/onsets.py) is longer than ack_wait. A long job kept alive with `+WPI`
  waits as long between acks but is not redelivered (each progress report restarts ack_wait), so
  it does not raise it; a stalled consumer (no acks) is the STALLED verdict's, not this.
- `reset`: the delivered consumer sequence fell without `created` changing (the server audits
  no `$JS.API.CONSUMER.RESET`; a reset, to any sequence, starts the delivered consumer sequence
  over and sets the ack floor to the new start: server/consumer.go, resetLocalStartingSeq). Which
  way: `back` when the new ack floor is below the old one (acknowledged messages will be delivered
  again), `forward` when it is above (messages never acknowledged are skipped), `ack_floor` when
  it is the same (only what was in flight is delivered again). A reset stays a finding after the
  health window has moved past it, until `reset_shown_for` after it happened (`held_resets`: from
  the findings last kept, so a restarted collector keeps it too), saying until when.

Vectorised: a few array comparisons over every consumer, words only for the few with a finding.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jetwatch.health.columns import floats

KINDS = ("max_ack_pending_reached", "max_waiting_reached", "ack_wait_short", "reset")
NONE: list[dict[str, Any]] = []  # shared by every consumer without a config finding
MIN_SAMPLES = 3


def _col(x: Mapping[str, Any], name: str, n: int, fill: float = np.nan) -> np.ndarray:
    return floats(x[name]) if name in x else np.full(n, fill)


def _n(v: float) -> int | float:
    return int(v) if float(v).is_integer() else round(float(v), 3)


def _ts(v: float) -> str:
    return dt.datetime.fromtimestamp(float(v), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def config_findings(x: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    """Per consumer (each row of the window features with the limits beside: `max_ack_pending`,
    `max_waiting`, `ack_wait_ns`, `filtered`, `nak_count`; missing ones as unknown), its config
    findings, each {kind, reason, fix, numbers}; the shared empty list where there is none."""
    n = len(floats(x["samples"]))
    samples = _col(x, "samples", n, 0.0)
    limit = _col(x, "max_ack_pending", n)
    waiting_limit = _col(x, "max_waiting", n)
    ack_wait = _col(x, "ack_wait_ns", n) / 1e9
    filtered = np.asarray(x["filtered"], dtype=bool) if "filtered" in x else np.zeros(n, dtype=bool)
    with np.errstate(invalid="ignore"):
        reached = ((limit > 1) & (samples >= MIN_SAMPLES) & (_col(x, "ack_pending_min", n) >= limit)
                   & (_col(x, "pending_min", n) > 0))
        refused = (waiting_limit > 0) & (_col(x, "waiting_max", n) >= waiting_limit)
        again = np.where(filtered, 0.0, np.maximum(_col(x, "deliveries", n, 0.0) - _col(x, "stream_delivered", n, 0.0), 0))
        redelivered = (again > 0) | (_col(x, "redelivered_last", n, 0.0) > 0) | (_col(x, "redelivered_first", n, 0.0) > 0)
        gap = _col(x, "ack_gap_max", n)
        short = ((ack_wait > 0) & (_col(x, "acked", n, 0.0) > 0) & redelivered
                 & (_col(x, "nak_count", n, 0.0) == 0) & (gap > ack_wait))
        reset_at = _col(x, "reset_ts", n)
        reset = ~np.isnan(reset_at)
    out: list[list[dict[str, Any]]] = [NONE] * n
    for i in np.flatnonzero(reached | refused | short | reset).tolist():
        found: list[dict[str, Any]] = []
        if reached[i]:
            found.append({
                "kind": "max_ack_pending_reached",
                "reason": (f"in flight at max_ack_pending ({_n(limit[i])}) in every sample of the window "
                           f"({_n(samples[i])}) while messages waited: the limit sets the pace, not the workers"),
                "fix": ("raise max_ack_pending if the workers can take more at once, or add workers; "
                        "lower it only if it is meant to throttle"),
                "numbers": {"max_ack_pending": _n(limit[i]), "ack_pending_min": _n(x["ack_pending_min"][i]),
                            "samples": _n(samples[i])}})
        if refused[i]:
            found.append({
                "kind": "max_waiting_reached",
                "reason": (f"{_n(x['waiting_max'][i])} pull requests waited, max_waiting is {_n(waiting_limit[i])}: "
                           "further pulls were refused (409 Exceeded MaxWaiting)"),
                "fix": "raise max_waiting above the number of pulls the workers keep open, or pull with fewer requests",
                "numbers": {"max_waiting": _n(waiting_limit[i]), "waiting_max": _n(x["waiting_max"][i])}})
        if short[i]:
            found.append({
                "kind": "ack_wait_short",
                "reason": (f"acknowledgements came up to {_n(gap[i])} s apart while messages were in flight, "
                           f"ack_wait is {_n(ack_wait[i])} s, and messages were redelivered while the consumer "
                           "kept acknowledging: they are delivered again while still being worked"),
                "fix": ("raise ack_wait above the longest processing time, or have the workers send +WPI "
                        "(in progress) while they work"),
                "numbers": {"ack_wait_seconds": _n(ack_wait[i]), "ack_gap_max_seconds": _n(gap[i]),
                            "redeliveries": _n(again[i]), "redelivered_last": _n(x["redelivered_last"][i])}})
        if reset[i]:
            found.append(_reset(float(reset_at[i]), float(x["reset_floor_before"][i]),
                                float(x["reset_floor_after"][i])))
        out[i] = found
    return out


def _reset(at: float, before: float, after: float, until: float | None = None) -> dict[str, Any]:
    """The reset finding: when, which way, the ack floor before and after; `until`: a reset older
    than the health window, shown until then."""
    way = "back" if after < before else "forward" if after > before else "ack_floor"
    words = {"back": f"back: {_n(before - after)} acknowledged messages will be delivered again",
             "forward": f"forward: {_n(after - before)} messages after the ack floor were skipped",
             "ack_floor": "to its ack floor: what was in flight is delivered again"}[way]
    held = f"; older than the health window, shown until {_ts(until)}" if until is not None else ""
    numbers: dict[str, Any] = {"at": _ts(at), "way": way, "ack_floor_before": _n(before), "ack_floor_after": _n(after)}
    if until is not None:
        numbers["shown_until"] = _ts(until)
    return {
        "kind": "reset",
        "reason": (f"reset at {_ts(at)} (the delivered sequence started over, `created` unchanged), "
                   f"{words}; the server audits no reset{held}"),
        "fix": ("check whether the reset was meant: no advisory names who sent it (the server answers "
                "$JS.API.CONSUMER.RESET on the consumer's own subscription, with no API audit); only a "
                "subscriber to $JS.API.CONSUMER.RESET.> sees the requests"),
        "numbers": numbers}


def held_resets(found: list[list[dict[str, Any]]], kept: np.ndarray | Sequence[object], now_s: float,
                shown_for: float, new_consumer: np.ndarray | Sequence[bool]) -> list[list[dict[str, Any]]]:
    """`found` (each consumer's config findings this cycle) with the reset each consumer's kept
    findings (`kept`: the JSON last stored) still hold for it: a reset the health window no longer
    shows stays a finding until `shown_for` after it happened (the `reset_shown_for` setting), so
    a reset nobody looked at within the window is not lost. Never onto a consumer that has a newer
    reset in the window, nor one deleted and recreated since (`new_consumer`: another consumer)."""
    if shown_for <= 0:
        return found
    out = found
    for i in [i for i, text in enumerate(kept) if isinstance(text, str) and '"reset"' in text]:
        if new_consumer[i] or any(f["kind"] == "reset" for f in out[i]):
            continue
        try:
            was = next(f["numbers"] for f in json.loads(str(kept[i])) if f.get("kind") == "reset")
            at = dt.datetime.strptime(was["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
            before, after = float(was["ack_floor_before"]), float(was["ack_floor_after"])
        except (ValueError, KeyError, TypeError, StopIteration):  # a finding stored by another version
            continue
        if now_s < at + shown_for:
            out = list(out) if out is found else out
            out[i] = [*out[i], _reset(at, before, after, until=at + shown_for)]
    return out
