"""Why each pin moved: the cause of every pin switch, defined once by sql/queries/pin_moves.sql.

The query reads only stored facts (pin events, jetwatch's audit log, the unpin requests the server's
API audit advisory named, leader elections, the holders' announcements and what CONNZ said of their
connections) and gives each ended pin one cause from `CAUSES`. This module holds the query's
parameters, the causes in words, and what they add up to for a consumer; the collector (/metrics),
`status --json`, the FLAPPING advice and the pages all read causes through it. No Streamlit, no store
object: a DuckDB connection is passed in.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from jetwatch import sql
from jetwatch.core.durations import duration

# The causes, in the order the query tries them; also the values of the `cause` metric label (bounded).
CAUSES = ("operator_unpin", "leader_change", "deploy", "holder_disconnected", "priority_timeout", "unknown")
CAUSE_WORDS = {"operator_unpin": "operator unpin", "leader_change": "leader change", "deploy": "deploy",
               "holder_disconnected": "holder disconnected", "priority_timeout": "priority_timeout",
               "unknown": "unknown"}
# How close (seconds) an audit row or a captured unpin request must be to the unpin it explains.
MATCH_SECONDS = 10.0
COLUMNS = ["ts", "account", "stream", "consumer", "group_name", "source", "reason", "from_pin", "from_ts", "to_pin",
           "to_ts", "cause", "operator", "requester_name", "requester_id", "requester_host", "requester_user",
           "requester_account", "leader_elected_at", "new_leader", "burst_groups", "from_holder", "from_version",
           "from_verification", "to_holder", "to_version", "to_verification", "exit_state", "stopped_at", "stop_reason",
           "priority_timeout_seconds", "last_pull_at"]


def params(since: dt.datetime, until: dt.datetime, settings: Any, account: str | None = None,
           stream: str | None = None, consumer: str | None = None) -> dict[str, Any]:
    """pin_moves.sql's parameters: the range, one consumer or (None) all, and the deploy settings
    (`settings` None: their defaults)."""
    if settings is None:
        from jetwatch.core.settings import Settings
        settings = Settings()
    return {"since": since, "until": until, "account": account, "stream": stream, "consumer": consumer,
            "match_seconds": MATCH_SECONDS, "deploy_window_seconds": float(settings.deploy_window),
            "deploy_groups": int(settings.deploy_groups)}


def settled(moves: pd.DataFrame, checked_by: dt.datetime) -> pd.DataFrame:
    """The moves whose cause will not change any more: a pin that timed out is told apart from
    one whose holder disconnected only once CONNZ was asked about the holder's connection
    (`exit_state`, stored by the collector's other loop moments after the unpin), so such a move
    waits for that answer, until `checked_by` at the latest (an unpin before it that still has
    none never will)."""
    if moves.empty:
        return moves
    ts = pd.to_datetime(moves["ts"], utc=True)
    asking = (moves["reason"] == "timeout") & moves["exit_state"].isna() & (ts > pd.Timestamp(checked_by))
    return moves[~asking.to_numpy()]


def moves(con: Any, since: dt.datetime, until: dt.datetime, settings: Any, account: str | None = None,
          stream: str | None = None, consumer: str | None = None) -> pd.DataFrame:
    """Every pin that ended in the range, with its cause and the facts behind it (pin_moves.sql)."""
    frame = con.execute(sql.query("pin_moves"), params(since, until, settings, account, stream, consumer)).df()
    return frame


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _clock(value: Any) -> str:
    if value is None or pd.isna(value):
        return "?"
    return pd.Timestamp(value).tz_convert("UTC").strftime("%H:%M:%S UTC")


def _seconds_between(later: Any, earlier: Any) -> float | None:
    if later is None or earlier is None or pd.isna(later) or pd.isna(earlier):
        return None
    return (pd.Timestamp(later) - pd.Timestamp(earlier)).total_seconds()


def _holder(row: Mapping[str, Any]) -> str:
    name = _text(row.get("from_holder"))
    return f"the holder {name}" if name else "the holder"


def requester_words(row: Mapping[str, Any]) -> str | None:
    """Who asked for an unpin: the operator in jetwatch's audit log, else the client the server named."""
    if _text(row.get("operator")):
        return f"operator {row['operator']} (jetwatch audit log)"
    name, cid = _text(row.get("requester_name")), row.get("requester_id")
    if name or (cid is not None and not pd.isna(cid)):
        where = [f"connection {int(cid)}" if cid is not None and not pd.isna(cid) else None,
                 _text(row.get("requester_host")),
                 f"user {row['requester_user']}" if _text(row.get("requester_user")) else None,
                 f"account {row['requester_account']}" if _text(row.get("requester_account")) else None]
        return f"client {name or 'without a name'} ({', '.join(w for w in where if w)}; server API audit)"
    return None


def why(row: Mapping[str, Any]) -> str:
    """One pin move's cause in words, with the fact that decided it."""
    cause = row.get("cause")
    if cause == "operator_unpin":
        who = requester_words(row)
        return f"unpinned by {who}" if who else "unpinned by an admin request (the requester was not captured)"
    if cause == "leader_change":
        leader = _text(row.get("new_leader"))
        return (f"consumer leader elected at {_clock(row.get('leader_elected_at'))}"
                + (f" ({leader})" if leader else "") + ": the pin lives in the leader's memory, the new leader pinned anew")
    if cause == "deploy":
        before, after = _text(row.get("from_version")), _text(row.get("to_version"))
        if before and after and before != after:
            return f"deploy: the holder ran version {before}, the next holder {after}"
        return (f"deploy: pins of {int(row.get('burst_groups') or 0)} consumers moved within the deploy window "
                "of each other")
    if cause == "holder_disconnected":
        gone_for = _seconds_between(row.get("ts"), row.get("stopped_at"))
        why_closed = _text(row.get("stop_reason"))
        return (f"{_holder(row)} disconnected at {_clock(row.get('stopped_at'))}"
                + (f" ({why_closed})" if why_closed else "")
                + (f", {duration(gone_for)} before the pin moved" if gone_for is not None and gone_for >= 0 else ""))
    if cause == "priority_timeout":
        timeout = row.get("priority_timeout_seconds")
        if timeout is None or pd.isna(timeout):
            return f"priority_timeout: {_holder(row)} stopped pulling"
        still = " and is still connected" if row.get("exit_state") == "open" else ""
        return (f"priority_timeout: {_holder(row)} stopped pulling at {_clock(row.get('last_pull_at'))}, "
                f"{duration(float(timeout))} before the unpin{still}")
    if row.get("source") == "inferred":
        return "the pin was replaced with no unpinned advisory and no leader election was captured"
    return "no stored fact explains it"


def with_words(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` (pin_moves rows) with `why`, the cause in words."""
    out = frame.copy()
    out["why"] = [why(r) for r in out.to_dict("records")] if not out.empty else pd.Series(dtype=object)
    return out


def by_consumer(frame: pd.DataFrame) -> dict[tuple[str, str, str], dict[str, int]]:
    """(account, stream, consumer) -> moves per cause, from pin_moves rows."""
    out: dict[tuple[str, str, str], dict[str, int]] = {}
    for key, group in (frame.groupby(["account", "stream", "consumer"], sort=False) if not frame.empty else ()):
        out[key] = counts(group["cause"])
    return out


def counts(causes: Iterable[Any]) -> dict[str, int]:
    """Moves per cause, in CAUSES order, causes with none left out."""
    c = Counter(x for x in causes if isinstance(x, str))
    return {cause: c[cause] for cause in CAUSES if c[cause]}


def dominant(by_cause: Mapping[str, int]) -> str | None:
    """The cause of most moves (ties: the first in CAUSES order); None with none."""
    best = [c for c in CAUSES if by_cause.get(c)]
    return max(best, key=lambda c: (by_cause[c], -CAUSES.index(c))) if best else None


def counts_words(by_cause: Mapping[str, int]) -> str:
    """'3 priority_timeout, 1 operator unpin' (most first)."""
    ordered = sorted(((n, c) for c, n in by_cause.items() if n), key=lambda x: (-x[0], CAUSES.index(x[1])))
    return ", ".join(f"{n} {CAUSE_WORDS.get(c, c)}" for n, c in ordered)
