"""What to do about each verdict, in words: one next step per verdict, keyed by the verdicts
declared in health/rules.py (a test holds the two together), and which operator actions can
succeed in the state a consumer is in.

The steps read the finding's numbers and a little context (the pin, the priority policy, the
unpin reasons of the window, when the consumer last pulled or acknowledged), so they name the
numbers that matter: "the pinned client holds 20 messages and acks none: unpin to move work to a
standby, or restart the client". No Streamlit, no store: plain functions, tested with plain pytest.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from jetwatch.health import pin_causes


@dataclass(frozen=True)
class Context:
    """What a next step reads about one consumer besides its finding's numbers."""

    pinned_id: str | None = None
    priority_policy: str | None = None
    group: str | None = None
    unpins: Mapping[str, int] = field(default_factory=dict)  # unpin reason -> count in the health window
    moves: Mapping[str, int] = field(default_factory=dict)  # pin move cause (health/pin_causes.py) -> count in it
    last_pull: dt.datetime | None = None  # the last pull or delivery seen in the samples
    last_ack: dt.datetime | None = None  # the last time the ack floor moved
    first_seen: dt.datetime | None = None  # the oldest sample looked at (for "not since at least ...")
    paused_until: dt.datetime | None = None
    since: dt.datetime | None = None  # when the verdict's cause began (its onset)

    @property
    def pinned(self) -> bool:
        return bool(self.pinned_id)

    @property
    def grouped(self) -> bool:
        return self.priority_policy == "pinned_client"


def _n(numbers: Mapping[str, Any], name: str) -> int:
    value = numbers.get(name)
    return 0 if value is None else int(round(float(value)))


def _msgs(n: int) -> str:
    return f"{n} message" if n == 1 else f"{n} messages"


def _unpin_words(unpins: Mapping[str, int]) -> str:
    """'12 timeouts and 6 admin unpins' (the reasons the server gave, most first)."""
    if not unpins:
        return "no unpin recorded in the window (pins replaced without an unpin advisory)"
    named = {"timeout": ("timeout", "timeouts"), "admin": ("admin unpin", "admin unpins")}
    parts = [f"{n} {named.get(r, (r + ' unpin', r + ' unpins'))[n != 1]}"
             for r, n in sorted(unpins.items(), key=lambda kv: (-kv[1], kv[0])) if n]
    return " and ".join(parts) if len(parts) <= 2 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _no_pullers(numbers: Mapping[str, Any], c: Context) -> str:
    return (f"{_msgs(_n(numbers, 'pending'))} wait, nothing is in flight and no client pulls: start the consumer's "
            "workers, or check that they bind to this consumer and can reach the server")


def _stalled(numbers: Mapping[str, Any], c: Context) -> str:
    held = _n(numbers, "ack_pending")
    holder = numbers.get("holder")
    if holder == "failing":
        return ("the workers take messages and refuse every one (naks, until max_deliver drops them): nothing is "
                "processed; look at the workers' errors, and pause the consumer to keep the rest from being dropped")
    if c.grouped and c.pinned and holder == "stopped" and _n(numbers, "waiting") > 0:
        group = f" group {c.group}" if c.group else " the group"
        return (f"the pinned client stopped pulling and holds {_msgs(held)}: unpin{group} so the waiting client "
                "takes the pin and the work now (the held messages go to it once ack_wait passes), then look at "
                "why the pinned one stopped")
    if c.grouped and c.pinned:
        return (f"the pinned client holds {_msgs(held)} and acks none: unpin to hand the work to a waiting "
                "client (the messages are redelivered to it), then restart or inspect the stuck one")
    if holder == "silent":
        by = numbers.get("redelivered_by")
        when = (f" at {dt.datetime.fromtimestamp(float(by), dt.UTC):%H:%M:%S} UTC, when ack_wait passes"
                if by is not None else " once ack_wait passes")
        named = numbers.get("holders_named")
        if numbers.get("holders") == "gone":
            return (f"the workers holding {_msgs(held)} are gone ({named}: their connections closed): start them "
                    f"again (the server redelivers the held messages to them{when})")
        if numbers.get("holders") == "connected":
            return (f"the workers holding {_msgs(held)} are still connected and do nothing ({named}): look at what "
                    f"they wait on (a thread dump), then restart them (the server redelivers the held messages{when})")
        return (f"the clients holding {_msgs(held)} stopped: nothing is acknowledged, delivered or pulled; start or "
                f"restart the workers (the server redelivers the held messages to them{when})")
    if holder == "stopped":
        return (f"a client took {_msgs(held)} and stopped pulling: restart it (the server redelivers them after "
                "ack_wait); a drain would not finish while nothing is acknowledged")
    if holder == "idle":
        return (f"a client holds {_msgs(held)} and has done nothing with them past ack_wait: restart it (the "
                "server redelivers them on the next pull); a drain would not finish while nothing is acknowledged")
    if holder == "redelivered":
        return (f"{_msgs(held)} keep being redelivered and none is acknowledged: the handlers fail or hang on "
                "them; look at the workers' errors, and give poison messages a max_deliver")
    return (f"clients hold {_msgs(held)} and ack none: restart the stuck clients (the messages are redelivered "
            "after ack_wait); a drain would not finish while nothing is acknowledged")


def _pin_idle(numbers: Mapping[str, Any], c: Context) -> str:
    group = f" group {c.group}" if c.group else " the group"
    step = (f"unpin{group}: a client is waiting to take over now and work is waiting for it; then look at why the "
            "pinned client stopped pulling")
    moves = numbers.get("pin_moves_by")
    if moves is not None:
        at = dt.datetime.fromtimestamp(float(moves), dt.UTC)
        step += f" (the server's priority_timeout moves the pin by itself by {at:%H:%M:%S} UTC at the latest)"
    return step


def _saturated(numbers: Mapping[str, Any], c: Context) -> str:
    steps = []
    if "max_ack_pending" in numbers:
        steps.append("in-flight work is at max_ack_pending: add workers or ack sooner, or raise max_ack_pending")
    if "max_waiting" in numbers:
        steps.append("waiting pulls are at max_waiting: make fewer or shorter pulls (batch, expires), or raise "
                     "max_waiting")
    return "; ".join(steps) or "a limit is reached: add workers or raise the limit"


def _unpinned(numbers: Mapping[str, Any], c: Context) -> str:
    group = f" in group {c.group}" if c.group else ""
    return (f"{_msgs(_n(numbers, 'pending'))} wait and no client is pinned: start a client that pulls{group}, "
            "or check why its pulls fail")


# FLAPPING's next step by the dominant cause of the window's pin moves.
FLAPPING_STEP = {
    "operator_unpin": "operators keep unpinning: see the Audit page and the requesters named on the Pins page for "
                      "who and why, and stop unpinning a holder that works",
    "leader_change": "the consumer's leader keeps changing, and each new leader pins anew: check the cluster (server "
                     "restarts, routes, `nats server report jetstream`), not the clients",
    "deploy": "deploys move the pin: expected while one rolls out; have workers drain (or unpin) before they stop, so "
              "the pin moves at once instead of after priority_timeout",
    "holder_disconnected": "the pinned client keeps disconnecting: look at its restarts and logs (crashes, OOM kills, "
                           "the network); until priority_timeout passes nobody takes its work",
    "priority_timeout": "the pinned client stops pulling for longer than priority_timeout while connected: look for "
                        "pauses in it (slow handlers, GC, blocked I/O), or raise priority_timeout",
    "unknown": "the pin moves with no stored cause: check the Pins page for capture gaps, and the group's clients "
               "for restarts",
}


def flapping_cause(moves: Mapping[str, int]) -> str | None:
    """'6 pins ended: mostly priority_timeout (4 priority_timeout, 2 operator unpin)', or '... no single
    cause (...)' on a tie (whose step is then the first tied cause's in pin_causes.CAUSES order, the more
    specific fact); None with no moves. It counts the pins that ended, FLAPPING's reason the pins that
    began: each is named for what it counts (the pin held now has not ended; the first one's start
    may be older than the window)."""
    top = pin_causes.dominant(moves)
    if top is None:
        return None
    total = sum(moves.values())
    ended = f"{total} pin{'s' if total != 1 else ''} ended"
    if sum(1 for n in moves.values() if n == moves[top]) > 1:  # a tie: no cause dominates
        return f"{ended}: no single cause ({pin_causes.counts_words(moves)})"
    return f"{ended}: mostly {pin_causes.CAUSE_WORDS[top]} ({pin_causes.counts_words(moves)})"


def _flapping(numbers: Mapping[str, Any], c: Context) -> str:
    top = pin_causes.dominant(c.moves)
    if top is not None:
        return f"{flapping_cause(c.moves)}: {FLAPPING_STEP[top]}"
    timeouts, admin = c.unpins.get("timeout", 0), c.unpins.get("admin", 0)
    if timeouts >= admin and timeouts:
        step = ("the pinned client stops pulling for longer than priority_timeout: look for pauses in it (slow "
                "handlers, GC, restarts), or raise priority_timeout")
    elif admin:
        step = "operators keep unpinning: see the Audit page for who and why"
    else:
        step = "the pin keeps moving: check the clients of the group for restarts"
    return f"{_unpin_words(c.unpins)}: {step}"


def _redelivering(numbers: Mapping[str, Any], c: Context) -> str:
    if "max_deliveries" in numbers:
        return (f"{_msgs(_n(numbers, 'max_deliveries'))} reached max_deliver and were dropped unprocessed: look at "
                "the handlers' errors for them (the MAX_DELIVERIES advisories give their stream sequences), and "
                "republish them once fixed")
    return ("messages keep coming back: look at the handlers' errors (naks) and check they ack within ack_wait; "
            "a message that always fails belongs in a dead-letter stream (max_deliver)")


def _losing(numbers: Mapping[str, Any], c: Context) -> str:
    limit = numbers.get("limit")
    raise_it = f"the stream's {limit}" if isinstance(limit, str) and limit else "the stream's max_age, max_msgs or max_bytes"
    if _n(numbers, "seconds") <= 0:
        return (f"messages are being removed unprocessed: add workers now, or raise {raise_it}; what was removed "
                "can only be published again from its source")
    return (f"add workers or make each message cheaper, or raise {raise_it} before then; pausing the consumer does "
            "not stop the limits")


def _stream_full(numbers: Mapping[str, Any], c: Context) -> str:
    return ("make room: raise the stream's max_msgs or max_bytes (`nats stream edit`), or, where its consumers have "
            "processed them, remove old messages (`nats stream purge --keep`); a work-queue or interest stream frees "
            "what its consumers acknowledge, so a full one means they fall behind")


def _lagging(numbers: Mapping[str, Any], c: Context) -> str:
    return "messages arrive faster than they are acknowledged: add workers, or make each message cheaper"


def _paused(numbers: Mapping[str, Any], c: Context) -> str:
    until = f" (paused until {pd.Timestamp(c.paused_until).strftime('%Y-%m-%d %H:%M UTC')})" if c.paused_until else ""
    return f"resume the consumer when the pause should end{until}; nothing is delivered until then"


def _no_leader(numbers: Mapping[str, Any], c: Context) -> str:
    leader = numbers.get("leader")
    last = f" (it was last led by {leader})" if isinstance(leader, str) and leader else ""
    return (f"bring back the servers that hold its replicas{last} so they elect a leader: `nats server report "
            "jetstream` shows which are down; a consumer whose only server is lost for good must be recreated")


def _api_unavailable(numbers: Mapping[str, Any], c: Context) -> str:
    return ("bring back enough JetStream servers for the meta group to elect a leader (a majority of them): `nats "
            "server report jetstream` names those down; jetwatch keeps sampling and says when the API answers again")


def _offline(numbers: Mapping[str, Any], c: Context) -> str:
    return ("run it on a nats-server that supports what it needs (the reason names the API level or the setting the "
            "server does not know): upgrade the server, or undo the downgrade; `nats server report jetstream` shows "
            "each server's version; deleting and recreating the consumer loses its position")


def _ok(numbers: Mapping[str, Any], c: Context) -> str:
    return "nothing to do"


def _collecting(numbers: Mapping[str, Any], c: Context) -> str:
    return "wait for a few more samples: a verdict needs a full health window"


# One next step per verdict, by the name health/rules.py declares it under.
NEXT_STEP: dict[str, Callable[[Mapping[str, Any], Context], str]] = {
    "NO_LEADER": _no_leader, "API_UNAVAILABLE": _api_unavailable, "OFFLINE": _offline,
    "NO_PULLERS": _no_pullers, "STALLED": _stalled, "PIN_IDLE": _pin_idle, "SATURATED": _saturated, "UNPINNED": _unpinned,
    "FLAPPING": _flapping, "REDELIVERING": _redelivering, "STREAM_FULL": _stream_full, "LOSING": _losing, "LAGGING": _lagging, "PAUSED": _paused,
    "OK": _ok, "COLLECTING": _collecting,
}


def next_step(verdict: str, numbers: Mapping[str, Any] | None, context: Context) -> str:
    """The next step for a verdict (its finding's numbers, the consumer's context), in words. For a
    consumer the server no longer lists, whatever its last verdict: find out whether it exists."""
    if numbers and numbers.get("unlisted_since") is not None:
        return ("check that it still exists (`nats consumer info` on it): the server no longer lists it and no "
                "DELETED advisory said it was removed; if it was deleted, `jetwatch forget` it; if it exists, its "
                "server cannot load it or is unreachable (`nats server report jetstream`)")
    return NEXT_STEP[verdict](numbers or {}, context)


def _when(ts: object, now: dt.datetime) -> str:
    t = pd.Timestamp(ts)
    t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
    age = int(max(0.0, (pd.Timestamp(now) - t).total_seconds()))
    words = (f"{age} s" if age < 60 else f"{age // 60} min {age % 60} s" if age < 3600
             else f"{age // 3600} h {age % 3600 // 60} min")
    return f"{t.strftime('%H:%M:%S UTC')} ({words} ago)"


# The duration a rule's reason says its cause has held ("for 1 min 5 s"): the pages say since when instead.
# " for <a duration>" (or " for at least <a duration>") as core/durations.py words it ('42 s', '5 min', '4 min 12 s', '3 h 5 min', '2 d 4 h').
_HELD_FOR = re.compile(r" for (?:at least )?(\d+ d(?: \d+ h)?|\d+ h(?: \d+ min)?|\d+ min(?: \d+ s)?|\d+(?:\.\d)? s)\b")
ONSET_VERDICTS = ("STALLED", "NO_PULLERS", "PIN_IDLE")


def reason_since(verdict: str, reason: str, numbers: Mapping[str, Any] | None, context: Context,
                 now: dt.datetime) -> str:
    """The finding's reason, saying since when for the verdicts that are about time: "no client
    has pulled since 07:12:03 UTC (12 min 4 s ago)" instead of how long it had held when judged,
    which a page shown later would understate. The verdict's since is its cause's onset; a verdict
    stored without one is worded from the last pull or acknowledgement seen. Other verdicts keep
    their reason."""
    numbers = numbers or {}
    if verdict == "FLAPPING":
        return flapping_reason(reason, context)
    if verdict in ONSET_VERDICTS and context.since is not None and _HELD_FOR.search(reason):
        return _HELD_FOR.sub(f" since {_when(context.since, now)}", reason, count=1)
    if verdict == "NO_PULLERS":
        when = (f"since {_when(context.last_pull, now)}" if context.last_pull is not None else
                f"since at least {_when(context.first_seen, now)}" if context.first_seen is not None else None)
        if when:
            return f"{_msgs(_n(numbers, 'pending'))} pending and no client has pulled {when}"
    if verdict == "STALLED":
        when = (f"since {_when(context.last_ack, now)}" if context.last_ack is not None else
                f"since at least {_when(context.first_seen, now)}" if context.first_seen is not None else None)
        if when:
            return f"{_msgs(_n(numbers, 'ack_pending'))} handed out and none acknowledged {when}"
    return reason


def flapping_reason(reason: str, context: Context) -> str:
    """FLAPPING's reason with the dominant cause of the window's pin moves after it."""
    cause = flapping_cause(context.moves)
    return f"{reason}; {cause}" if cause and cause not in reason else reason


# -- Actions that can succeed -----------------------------------------------------------------

def drain_warning(verdict: str) -> str | None:
    """Why a drain cannot finish in this state (in-flight work is not falling), or None."""
    if verdict in ("STALLED",):
        return ("in-flight work is not falling (STALLED): a drain waits for it and would time out. Unpin or "
                "restart the client that holds the messages first.")
    return None


def drain_choices(choices: tuple[str, ...], context: Context) -> tuple[str, ...]:
    """The drain plans worth offering, the default first: a hand-off only to a pinned group with a
    pin to hand off; otherwise resume comes first."""
    handoff_works = context.grouped and context.pinned
    offered = tuple(c for c in choices if c != "handoff" or handoff_works)
    return tuple(sorted(offered, key=lambda c: 0 if c == ("handoff" if handoff_works else "resume") else 1))


def unpin_offered(context: Context) -> bool:
    """Unpin only where a priority group holds a pin."""
    return context.grouped and context.pinned
