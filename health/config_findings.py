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

From the pull settings the workers announce (core/pull_announce.py; consumer info never shows
them), per consumer with announcements, `pull_findings`. Anyone who may publish on a consumer's
announce subject can announce, and CONNZ verifies only that the announcing connection exists under
the name it gives, not that it pulls from the consumer: so these findings are claims, and their
words name each announcing connection and whether CONNZ verified it (`announced_by` lists them). An
announcement naming a priority group the consumer does not have is ignored (no pull in it is served).

- `pull_expires_past_pin_timeout`: a `pinned_client` consumer whose workers pull in its group
  with an expiry at or above `priority_timeout` (or none). The server restarts the pin timer only
  when it pins a pull and when a pull carrying the current pin id arrives (server/consumer.go
  `setPinnedTimer`, from `assignNewPinId` and `processNextMsgRequest`), never on a delivery or an
  ack; when fewer than `batch` messages come, the holder's pull is still open when the timer fires,
  and the server unpins it (UNPINNED, reason `timeout`) though it is waiting for work.
- `min_ack_pending_unreachable`: an `overflow` consumer whose workers pull with `min_ack_pending`
  at or above `max_ack_pending`. The server hands a new message to a pull only while fewer than
  `max_ack_pending` are in flight (`getNextMsg`), and picks the pull after that (`nextWaiting`),
  so in flight is below `max_ack_pending` then: the threshold is met for a redelivery at most.
  With `min_pending` as well, it depends on the server's version: from 2.12.5 a pull is served
  when either threshold is met (the other, `min_pending`, still serves it), before 2.12.5 (all of
  2.11 and 2.12.0-2.12.4) only when both are (never).
- `min_pending_without_overflow`: workers pull with `min_pending` or `min_ack_pending` from a
  consumer whose policy is not `overflow`: the server refuses every such pull
  (`400 Bad Request - Not a Overflow Priority consumer`, `processNextMsgRequest`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jetwatch.core.pin_announce import verification_words
from jetwatch.health.columns import floats

KINDS = ("max_ack_pending_reached", "max_waiting_reached", "ack_wait_short", "reset",
         "pull_expires_past_pin_timeout", "min_ack_pending_unreachable", "min_pending_without_overflow",
         # from the cluster, not the config: the leader serves with a replica not current (health/cluster.py)
         "replica_not_current")
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


# The first server version that serves an overflow pull when either of `min_pending` and
# `min_ack_pending` is met; before it, only when both are (server/consumer.go `nextWaiting`).
EITHER_FROM = (2, 12, 5)
NAMED = 3  # workers named in a finding's words; the rest counted


def either_threshold(server_version: str | None) -> bool | None:
    """Whether the server serves an overflow pull when either threshold is met (True), only when
    both are (False), or unknown (None) from its version ("2.12.5", "2.15.0-dev", "v2.11.3")."""
    if not server_version:
        return None
    try:
        parts = tuple(int(p) for p in server_version.lstrip("v").split("-")[0].split(".")[:3])
    except ValueError:
        return None
    return parts >= EITHER_FROM if len(parts) == 3 else None


def _workers(rows: Sequence[Mapping[str, Any]]) -> str:
    """The announcing connections, each by the name it gave and how CONNZ checked it: the findings
    read from announcements are their claims, and say whose."""
    names = sorted({f"{r['name']} ({verification_words(r.get('verification'))})" for r in rows})
    more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
    return ("connection " if len(names) == 1 else "connections ") + ", ".join(names[:NAMED]) + more


def _announced_by(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    return [{"name": n, "verification": v}
            for n, v in sorted({(str(r["name"]), verification_words(r.get("verification"))) for r in rows})][:NAMED]


def _groups(value: object) -> set[str]:
    """A consumer's priority groups as a set, whatever list-like the live state holds them in."""
    if value is None or isinstance(value, (str, bytes, float)):
        return set()
    try:
        return {str(g) for g in value}  # type: ignore[attr-defined]
    except TypeError:
        return set()


def _int(v: Any) -> int | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else int(f)


def pull_findings(limits: Mapping[str, Any], announced: Sequence[Mapping[str, Any]],
                  server_version: str | None = None) -> list[dict[str, Any]]:
    """One consumer's findings from the pull settings its workers announced (`announced`: rows of
    `pull_settings`) and its config (`limits`: `priority_policy`, `priority_timeout_ns`,
    `max_ack_pending`, `priority_groups`); `server_version` decides how `min_pending` and
    `min_ack_pending` combine. Announcements in a group the consumer does not have are ignored."""
    groups = _groups(limits.get("priority_groups"))
    announced = [r for r in announced if not r.get("group_name") or str(r["group_name"]) in groups]
    policy = limits.get("priority_policy") if isinstance(limits.get("priority_policy"), str) else None
    out: list[dict[str, Any]] = []
    timeout_ns = _int(limits.get("priority_timeout_ns")) or 0
    if policy == "pinned_client" and timeout_ns > 0:
        # A pull without `expires` (or with 0) never expires: as long as any. A no_wait pull never waits.
        late = [r for r in announced if r.get("group_name") and not r.get("no_wait")
                and ((_int(r.get("expires_ns")) or 0) == 0 or (_int(r.get("expires_ns")) or 0) >= timeout_ns)]
        if late:
            longest = [_int(r.get("expires_ns")) or 0 for r in late]
            never = 0 in longest
            expiry = "no expiry" if never else f"expires {_n(max(longest) / 1e9)} s"
            out.append({
                "kind": "pull_expires_past_pin_timeout",
                "reason": (f"{_workers(late)} announced pulling with {expiry}; priority_timeout is {_n(timeout_ns / 1e9)} s: the "
                           "server restarts the pin timer only when a pull carrying the pin id arrives (or when it "
                           "pins one), never on a delivery or an ack. When fewer than a batch of messages come "
                           "within priority_timeout, the pinned worker's pull is still open when the timer fires: "
                           "the server unpins it while it waits (UNPINNED, reason timeout), refuses that pull "
                           "(423 Nats-Wrong-Pin-Id) and pins the next pull without a pin id, often a standby's"),
                "fix": ("pull with an expiry well under priority_timeout (half of it at most, leaving room for the "
                        "work between pulls), or raise priority_timeout above the expiry and that work"),
                "numbers": {"priority_timeout_seconds": _n(timeout_ns / 1e9),
                            "expires_seconds": None if never else _n(max(longest) / 1e9),
                            "workers": len({r["name"] for r in late})},
                "announced_by": _announced_by(late)})
    max_ack = _int(limits.get("max_ack_pending")) or 0
    if policy == "overflow" and max_ack > 0:
        dead = [r for r in announced if (_int(r.get("min_ack_pending")) or 0) >= max_ack]
        if dead:
            out.append(_unreachable(dead, max_ack, either_threshold(server_version), server_version))
    if policy != "overflow":
        refused = [r for r in announced if (_int(r.get("min_pending")) or 0) > 0 or (_int(r.get("min_ack_pending")) or 0) > 0]
        if refused:
            out.append({
                "kind": "min_pending_without_overflow",
                "reason": (f"{_workers(refused)} announced pulling with min_pending or min_ack_pending; the consumer's "
                           f"priority_policy is {policy or 'none'}, not overflow: the server refuses each such pull "
                           "(400 Bad Request - Not a Overflow Priority consumer), so these workers get nothing"),
                "fix": ("pull without min_pending and min_ack_pending, or make the consumer an overflow consumer "
                        "(priority_policy overflow, with a priority group)"),
                "numbers": {"workers": len({r["name"] for r in refused})},
                "announced_by": _announced_by(refused)})
    return out


def _unreachable(dead: Sequence[Mapping[str, Any]], max_ack: int, either: bool | None,
                 server_version: str | None) -> dict[str, Any]:
    """`min_ack_pending_unreachable`, worded for how the server combines the two thresholds."""
    need = max(_int(r.get("min_ack_pending")) or 0 for r in dead)
    also = [r for r in dead if (_int(r.get("min_pending")) or 0) > 0]
    alone = [r for r in dead if r not in also]
    version = f"nats-server {server_version}" if server_version else "the server (version unknown)"
    why = (f"{_workers(dead)} announced pulling with min_ack_pending {need}; max_ack_pending is {max_ack}: the "
           "server hands a "
           "new message to a pull only while fewer than max_ack_pending are in flight, so min_ack_pending is never "
           "reached for a new message (only a redelivery can meet it)")
    parts = []
    if alone:
        parts.append(f"{_workers(alone)} (no min_pending) never get a new message")
    if also:
        if either is True:
            parts.append(f"{_workers(also)} get work only from min_pending: on {version} a pull is served when "
                         "either threshold is met, and this one never is")
        elif either is False:
            parts.append(f"{_workers(also)} never get a new message either: on {version} (before 2.12.5) a pull "
                         "is served only when both min_pending and min_ack_pending are met")
        else:
            parts.append(f"{_workers(also)} never get a new message on a server before 2.12.5 (both thresholds "
                         "must be met there), and only from min_pending from 2.12.5 (either is enough); "
                         f"{version}")
    return {
        "kind": "min_ack_pending_unreachable",
        "reason": why + ": " + "; ".join(parts),
        "fix": (f"set min_ack_pending below max_ack_pending ({max_ack}), to the in-flight count at which the "
                "standby should help, or pull with min_pending only; or raise max_ack_pending"),
        "numbers": {"min_ack_pending": need, "max_ack_pending": max_ack, "workers": len({r["name"] for r in dead}),
                    "either_threshold": either, "server_version": server_version},
        "announced_by": _announced_by(dead)}
