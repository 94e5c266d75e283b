"""`jetwatch status` and `jetwatch check`: the fleet's verdicts from the store, for scripts.

`status` prints what the collector judged after its last cycle (a table, or JSON with --json).
`check` follows the monitoring-plugin convention (Nagios, Icinga, CI gates): one line of summary
and the exit status 0 OK, 1 WARNING, 2 CRITICAL from the worst verdict's `level` in
health/rules.py VERDICTS, or 3 UNKNOWN when there is nothing recent to judge by.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fnmatch
import json
from typing import Any

import pandas as pd

from jetwatch.core.clock import utcnow
from jetwatch.core.settings import Settings
from jetwatch.health.rules import SEVERITY
from jetwatch.store.database import Store, StoreMissing

EXIT = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}
LEVEL_STATE = {"critical": "CRITICAL", "warning": "WARNING"}  # info, ok, unknown (COLLECTING): OK


def add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--account", action="append", help="Only accounts matching this glob (repeatable).")
    p.add_argument("--stream", action="append", help="Only streams matching this glob (repeatable).")
    p.add_argument("--consumer", action="append", help="Only consumers matching this glob (repeatable).")
    p.add_argument("--verdict", action="append", help="Only these verdicts (repeatable).")


def _matches(values: pd.Series, patterns: list[str] | None) -> pd.Series:
    if not patterns:
        return pd.Series(True, index=values.index)
    return values.map(lambda v: any(fnmatch.fnmatchcase(str(v), p) for p in patterns))


def verdicts(store: Store, args: argparse.Namespace) -> pd.DataFrame:
    """verdicts_current, filtered as asked, worst first."""
    frame = store.query("verdicts_status")
    keep = (_matches(frame["account"], args.account) & _matches(frame["stream"], args.stream)
            & _matches(frame["consumer"], args.consumer))
    if args.verdict:
        keep &= frame["verdict"].isin([v.upper() for v in args.verdict])
    out = frame[keep].copy()
    out["_rank"] = out["verdict"].map(SEVERITY)
    return out.sort_values(["_rank", "account", "stream", "consumer"]).drop(columns="_rank").reset_index(drop=True)


def _iso(value: Any) -> str | None:
    return None if value is None or pd.isna(value) else pd.Timestamp(value).isoformat()


def _num(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _text(value: Any) -> str | None:
    return None if value is None or pd.isna(value) else str(value)


def as_json(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{"account": r.account, "stream": r.stream, "consumer": r.consumer, "verdict": r.verdict,
             "level": r.level, "reason": r.reason, "since": _iso(r.since), "judged_at": _iso(r.judged_at),
             "findings": json.loads(r.findings),
             "oldest_unacked": {"age_seconds": _num(r.oldest_unacked_age_seconds),
                                "kind": _text(r.oldest_unacked_age_kind)},
             "oldest_undelivered": {"age_seconds": _num(r.oldest_undelivered_age_seconds),
                                    "kind": _text(r.oldest_undelivered_age_kind)},
             "eta": {"state": _text(r.eta_state), "seconds": _num(r.eta_seconds), "low_seconds": _num(r.eta_low_seconds),
                     "high_seconds": _num(r.eta_high_seconds)}}
            for r in frame.itertuples()]


def status(args: argparse.Namespace, settings: Settings) -> int:
    store = Store(settings.db, lock_timeout=settings.lock_timeout)
    frame = verdicts(store, args)  # StoreMissing is a JetwatchError: printed in words
    if args.json:
        print(json.dumps(as_json(frame), indent=2))
        return 0
    if frame.empty:
        print("no verdicts yet: the collector judges every consumer after each cycle")
        return 0
    now = utcnow()
    table = pd.DataFrame({
        "VERDICT": frame["verdict"], "SINCE": [_age(s, now) for s in frame["since"]],
        "ACCOUNT": frame["account"], "STREAM": frame["stream"], "CONSUMER": frame["consumer"],
        "REASON": frame["reason"]})
    print(table.to_string(index=False))
    return 0


def _age(ts: Any, now: dt.datetime) -> str:
    seconds = max(0.0, (pd.Timestamp(now) - pd.Timestamp(ts)).total_seconds())
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}m" if seconds < 7200 else f"{seconds / 3600:.1f}h"


def summary(frame: pd.DataFrame, now: dt.datetime, stale_after: float) -> tuple[str, str]:
    """(state, one line) for `check`."""
    if frame.empty:
        return "UNKNOWN", "no verdicts in the store yet (is `jetwatch collect` running?)"
    newest = pd.to_datetime(frame["judged_at"], utc=True).max()
    age = (pd.Timestamp(now) - newest).total_seconds()
    if age > stale_after:
        return "UNKNOWN", f"the newest verdict is {age:.0f}s old (collector stopped?); last known below"
    states = frame["level"].map(lambda lv: LEVEL_STATE.get(lv, "OK"))
    state = "CRITICAL" if (states == "CRITICAL").any() else "WARNING" if (states == "WARNING").any() else "OK"
    bad = frame[states != "OK"]
    counts = ", ".join(f"{n} {v}" for v, n in frame["verdict"].value_counts().items())
    worst = "; ".join(f"{r.stream}/{r.consumer} {r.verdict}" for r in bad.head(5).itertuples())
    more = f" (+{len(bad) - 5} more)" if len(bad) > 5 else ""
    return state, f"{len(frame)} consumers: {counts}" + (f" | {worst}{more}" if worst else "")


def check(args: argparse.Namespace, settings: Settings) -> int:
    store = Store(settings.db, lock_timeout=settings.lock_timeout)
    try:
        frame = verdicts(store, args)
    except StoreMissing as exc:
        print(f"JETWATCH UNKNOWN - {exc}")
        return EXIT["UNKNOWN"]
    state, line = summary(frame, utcnow(), settings.stale_after)
    print(f"JETWATCH {state} - {line}")
    return EXIT[state]
