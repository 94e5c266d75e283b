"""`jetwatch status`: the fleet's verdicts from the store, for people and scripts.

It prints what the collector judged after its last cycle (a table, or JSON with --json), from
every store of the fleet (`--dbs`, or a directory, as the dashboard does: one store per cluster,
store/clusters.py); each row carries its store's cluster, and a cluster whose data is stale is said
on stderr and marked in the JSON. `jetwatch check`, the monitoring-plugin line, is
commands/check.py: it reads the same kept verdicts without pandas, to answer at once.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fnmatch
import json
import sys
from dataclasses import dataclass
from typing import Any

import pandas as pd

from jetwatch.core.clock import utcnow
from jetwatch.core.durations import duration
from jetwatch.core.pin_words import pin_holder
from jetwatch.core.settings import Settings
from jetwatch.health import advice, drops, failover, freshness, pin_causes, silences, thresholds
from jetwatch.health.verdicts import SEVERITY
from jetwatch.store import clusters
from jetwatch.store.database import Store, StoreError


def _glob(value: Any, patterns: list[str] | None) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(str(value), p) for p in patterns)


def _matches(values: pd.Series, patterns: list[str] | None) -> pd.Series:
    if not patterns:
        return pd.Series(True, index=values.index)
    return values.map(lambda v: _glob(v, patterns))


@dataclass(frozen=True)
class Read:
    """One store's verdicts (all of them, unfiltered), or why they could not be read."""
    path: str
    cluster: str | None  # None: the store could not be read, so its cluster is not known either
    frame: pd.DataFrame | None
    error: StoreError | None = None
    dropped: pd.DataFrame | None = None  # the newest messages each consumer dropped (dropped_latest)
    silences: pd.DataFrame | None = None  # the silences not ended (silences_open)
    moves: pd.DataFrame | None = None  # pin moves with their causes over MOVES_BACK (pin_moves)

    @property
    def name(self) -> str:
        return f"cluster {self.cluster}" if self.cluster is not None else f"the store {self.path}"


def read_stores(settings: Settings, args: argparse.Namespace) -> list[Read]:
    """Every store of the fleet whose cluster --cluster keeps; a store that cannot be read is kept
    (with its error) whatever --cluster says, since its cluster is not known."""
    def read(store: Store, cluster: str) -> Read:
        now = utcnow()
        # Why pins moved only for `status --json`.
        moved = [("pin_moves", pin_causes.params(now - MOVES_BACK, now, settings))] if getattr(args, "json", False) else []
        verdicts_read, dropped, silenced, *more = store.queries([
            ("verdicts_status", {}), ("dropped_latest", {"per_consumer": DROPPED_SHOWN}), ("silences_open", {}),
            *moved])
        return Read(str(store.path), cluster, silences.attach(verdicts_read, silenced, utcnow()),
                    dropped=dropped, silences=silenced, moves=more[0] if more else None)

    found = clusters.read_fleet(settings.dbs, settings.db, settings.lock_timeout, read,
                                lambda cluster: _glob(cluster, getattr(args, "clusters", None)))
    return [r.value if r.value is not None else Read(r.path, None, None, r.error) for r in found]


def filtered(read: Read, args: argparse.Namespace, settings: Settings | None = None) -> pd.DataFrame:
    """One readable store's verdicts, with its cluster, filtered as asked; with `settings`, each
    consumer's pin moves and failover readiness too (`status --json`)."""
    frame = read.frame
    assert frame is not None, "only a store that was read is filtered"
    keep = (_matches(frame["account"], args.account) & _matches(frame["stream"], args.stream)
            & _matches(frame["consumer"], args.consumer))
    if args.verdict:
        keep &= frame["verdict"].isin([v.upper() for v in args.verdict])
    out = frame[keep].copy()
    out.insert(0, "cluster", pd.Series([read.cluster] * len(out), index=out.index, dtype=object))
    drops = dropped_by_consumer(read.dropped)
    none = {"count": 0, "latest": []}
    out["dropped"] = pd.Series([drops.get(k, none) for k in zip(out["account"], out["stream"], out["consumer"])],
                               index=out.index, dtype=object)
    if settings is not None:
        moved = moves_by_consumer(read.moves, utcnow(), settings.health_window)
        nothing = {"window_seconds": settings.health_window, "by_cause": {}, "dominant": None, "latest": []}
        out["pin_moves"] = pd.Series([moved.get(k, nothing) for k in zip(out["account"], out["stream"], out["consumer"])],
                                     index=out.index, dtype=object)
        out["failover"] = pd.Series([failover.finding(r.priority_policy, _text(r.pinned_id), r.num_waiting, r.num_pending,
                                                      r.num_ack_pending, r.max_ack_pending, settings.holder_pulls)
                                     for r in out.itertuples()], index=out.index, dtype=object)
    return out


MOVES_BACK = dt.timedelta(days=1)  # how far back `status --json` lists pin moves
MOVES_SHOWN = 5  # the newest pin moves listed per consumer


def _move(m: dict[str, Any]) -> dict[str, Any]:
    return {"at": _iso(m["ts"]), "cause": m["cause"], "why": pin_causes.why(m), "from_pin": _text(m["from_pin"]),
            "to_pin": _text(m["to_pin"]), "from_holder": _text(m["from_holder"]), "to_holder": _text(m["to_holder"]),
            "requested_by": pin_causes.requester_words(m)}


def moves_by_consumer(moves: pd.DataFrame | None, now: dt.datetime,
                      window_s: float) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(account, stream, consumer) -> the causes of its pin moves in the health window (what FLAPPING
    judges), the dominant one, and its newest moves of the last day with their causes in words."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    if moves is None or moves.empty:
        return out
    since = pd.Timestamp(now) - pd.Timedelta(seconds=window_s)
    for key, group in moves.groupby(["account", "stream", "consumer"], sort=False):
        recent = group[pd.to_datetime(group["ts"], utc=True) >= since]
        by_cause = pin_causes.counts(recent["cause"])
        newest = group.sort_values("ts", ascending=False).head(MOVES_SHOWN)
        out[key] = {"window_seconds": window_s, "by_cause": by_cause, "dominant": pin_causes.dominant(by_cause),
                    "latest": [_move(m) for m in newest.to_dict("records")]}
    return out


DROPPED_SHOWN = 5  # the newest dropped messages `status --json` lists per consumer


def _dropped_message(d: Any) -> dict[str, Any]:
    """One dropped message as `status --json` says it: which advisory dropped it, and what a read of
    the message found (`read`: found, gone, refused, or unread while the collector has not read it)."""
    seq = int(d.stream_seq)
    reason, state = _text(d.reason), _text(d.read_state)
    return {"stream_seq": seq, "dropped_by": d.dropped_by, "cause": drops.cause(d.dropped_by, reason),
            "at": _iso(d.ts), "deliveries": None if pd.isna(d.deliveries) else int(d.deliveries), "reason": reason,
            "subject": _text(d.message_subject), "stored_at": _iso(d.message_time),
            "read": state or "unread", "read_note": _text(d.read_note),
            "get": f"nats stream get {d.stream} {seq}" if drops.readable(d.dropped_by, reason, state) else None}


def dropped_by_consumer(dropped: pd.DataFrame | None) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(account, stream, consumer) -> {"count", "latest"} from dropped_latest's rows."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    if dropped is None:
        return out
    for d in dropped.itertuples():
        entry = out.setdefault((d.account, d.stream, d.consumer), {"count": int(d.dropped_count), "latest": []})
        entry["latest"].append(_dropped_message(d))
    return out




def worst_first(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Verdicts of every store as one, worst first (then account, stream, consumer, cluster)."""
    kept = [f for f in frames if not f.empty] or frames[:1]
    if not kept:
        return pd.DataFrame(columns=["cluster", "account", "stream", "consumer", "verdict"])
    out = pd.concat(kept, ignore_index=True) if len(kept) > 1 else kept[0]
    out = out.assign(_rank=out["verdict"].map(SEVERITY))
    return (out.sort_values(["_rank", "account", "stream", "consumer", "cluster"], kind="stable")
            .drop(columns="_rank").reset_index(drop=True))


def verdicts(reads: list[Read], args: argparse.Namespace, settings: Settings | None = None) -> pd.DataFrame:
    """verdicts_current of every readable store, filtered as asked, worst first."""
    return worst_first([filtered(r, args, settings) for r in reads if r.frame is not None])


def _iso(value: Any) -> str | None:
    return None if value is None or pd.isna(value) else pd.Timestamp(value).isoformat()


def _num(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _text(value: Any) -> str | None:
    return None if value is None or pd.isna(value) else str(value)


def _pin(r: Any) -> dict[str, Any] | None:
    """The consumer's pin and its holder as the worker announced it (None: nobody is pinned)."""
    pin = _text(getattr(r, "pinned_id", None))
    if not pin:
        return None
    name = _text(getattr(r, "holder_name", None))
    verification = _text(getattr(r, "holder_verification", None))
    pid = _num(getattr(r, "holder_pid", None))
    return {"id": pin, "holder": pin_holder(pin, name, verification),
            "name": name, "verification": verification or "unannounced",
            "host": _text(getattr(r, "holder_host", None)), "pid": None if pid is None else int(pid),
            "version": _text(getattr(r, "holder_version", None))}


def _silence(r: Any) -> dict[str, Any] | None:
    """The silence holding back the consumer's alerts (None: none holds): its verdict stays as judged."""
    if not bool(getattr(r, "silenced", False)):
        return None
    return {"verdict": r.silenced_verdict, "by": r.silenced_by, "note": r.silence_note,
            "since": _iso(r.silenced_at), "until": _iso(r.silenced_until)}


def _thresholds(r: Any) -> dict[str, Any]:
    """The thresholds the consumer's metadata sets (each with its key), the keys read and not
    applied, what could not be read; every threshold not named is the setting."""
    text = _text(getattr(r, "monitor_metadata", None))
    return thresholds.from_metadata(json.loads(text) if text else None).as_dict()


def _reason(r: Any) -> str:
    """The verdict's reason; FLAPPING's with the dominant cause of its pin moves (status --json)."""
    moves = getattr(r, "pin_moves", None)
    if r.verdict != "FLAPPING" or not isinstance(moves, dict):
        return r.reason
    return advice.flapping_reason(r.reason, advice.Context(moves=moves["by_cause"]))


def _next_step(r: Any) -> str | None:
    """What to do about the verdict (health/advice.py), with what status knows of the consumer."""
    moves = getattr(r, "pin_moves", None)
    findings = json.loads(r.findings) if isinstance(r.findings, str) else []
    context = advice.Context(pinned_id=_text(getattr(r, "pinned_id", None)),
                             priority_policy=_text(getattr(r, "priority_policy", None)),
                             moves=moves["by_cause"] if isinstance(moves, dict) else {})
    return advice.next_step(r.verdict, findings[0].get("numbers") if findings else {}, context)


def as_json(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{"cluster": r.cluster, "account": r.account, "stream": r.stream, "consumer": r.consumer,
             "verdict": r.verdict, "level": r.level, "reason": _reason(r), "next_step": _next_step(r),
             "since": _iso(r.since), "unhealthy_since": _iso(r.unhealthy_since),
             "judged_at": _iso(r.judged_at), "findings": json.loads(r.findings),
             "config_findings": json.loads(getattr(r, "config_findings", None) or "[]"),
             "oldest_unacked": {"age_seconds": _num(r.oldest_unacked_age_seconds),
                                "kind": _text(r.oldest_unacked_age_kind)},
             "oldest_undelivered": {"age_seconds": _num(r.oldest_undelivered_age_seconds),
                                    "kind": _text(r.oldest_undelivered_age_kind)},
             "time_to_loss_seconds": _num(r.time_to_loss_seconds), "loss_limit": _text(r.loss_limit),
             "stream_room_messages": _num(r.stream_room_messages),
             "pin": _pin(r), "silence": _silence(r), "thresholds": _thresholds(r),
             "dropped": getattr(r, "dropped", None) or {"count": 0, "latest": []},
             "pin_moves": getattr(r, "pin_moves", None), "failover": getattr(r, "failover", None),
             "eta": {"state": _text(r.eta_state), "seconds": _num(r.eta_seconds), "low_seconds": _num(r.eta_low_seconds),
                     "high_seconds": _num(r.eta_high_seconds)}}
            for r in frame.itertuples()]


def stale_clusters(reads: list[Read], now: dt.datetime, stale_after: float) -> list[freshness.Stale]:
    """The clusters read whose newest verdict is older than stale_after (health/freshness.py):
    each store is judged on its own, so one cluster's fresh verdicts never hide another's."""
    newest = {r.cluster: (pd.to_datetime(r.frame["judged_at"], utc=True).max() if not r.frame.empty else None)
              for r in reads if r.cluster is not None and r.frame is not None}
    return [f for f in freshness.stale(newest, now, stale_after) if f.last is not None]


def status(args: argparse.Namespace, settings: Settings) -> int:
    reads = read_stores(settings, args)
    unread = [(r, r.error) for r in reads if r.error is not None]
    if len(reads) == 1 and unread:
        raise unread[0][1]  # one store: said in words, exactly as before clusters
    frame = verdicts(reads, args, settings if args.json else None)
    for r, error in unread:  # the others are printed; which store is missing is said beside them
        print(f"jetwatch: {r.name} not read: {error}", file=sys.stderr)
    # Stale clusters said beside the verdicts (on stderr: scripts split the table's columns), and
    # each of their rows marked in the JSON: their verdicts are the last known ones.
    stale = stale_clusters(reads, utcnow(), settings.stale_after)
    for found in stale:
        print(f"jetwatch: {freshness.line(found)}", file=sys.stderr)
    code = max((error.exit_code for _, error in unread), default=0)
    if args.json:
        named = {f.cluster for f in stale}
        print(json.dumps([{**row, "stale": row["cluster"] in named} for row in as_json(frame)], indent=2))
        return code
    if frame.empty:
        print("no verdicts yet: the collector judges every consumer after each cycle" if reads
              else f"no store of a cluster matching {', '.join(args.clusters)}")
        return code
    now = utcnow()
    table = pd.DataFrame({"VERDICT": frame["verdict"], "SINCE": [_age(s, now) for s in frame["since"]]})
    if len(reads) > 1:  # one store reads as before clusters
        table["CLUSTER"] = frame["cluster"]
    steps = [_next_step(r) if r.verdict != "OK" else None for r in frame.itertuples()]  # OK: nothing to do
    table = table.assign(ACCOUNT=frame["account"], STREAM=frame["stream"], CONSUMER=frame["consumer"],
                         REASON=[f"{reason} -> {step}" if step else reason for reason, step in zip(frame["reason"], steps)])
    print(aligned(table))
    return code


def aligned(table: pd.DataFrame) -> str:
    """The table as text, every column left-aligned and the last (the reason, of any length) not
    padded: a reason is read from its start, and a short one must not push itself far right."""
    cells = [[str(c) for c in table.columns]] + [["" if pd.isna(v) else str(v) for v in row]
                                                 for row in table.itertuples(index=False)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(table.columns) - 1)]
    return "\n".join("  ".join([*(r[i].ljust(w) for i, w in enumerate(widths)), r[-1]]).rstrip() for r in cells)


def _age(ts: Any, now: dt.datetime) -> str:
    """The age in the words every page uses, without their spaces ('4min12s'): the table's columns
    are split on whitespace by the scripts that read it."""
    return duration((pd.Timestamp(now) - pd.Timestamp(ts)).total_seconds()).replace(" ", "")
