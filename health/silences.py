"""Silences: an operator's acknowledgement of a consumer's verdict, for a bounded time, with a note.

A silence never hides a verdict: the verdict, its colour and its findings stay as judged, and every
surface says beside it who silenced it, until when and why. What a silence holds back is alerting
(Alertmanager posts, the Prometheus rules through `jetwatch_consumer_silenced`, `jetwatch check`'s
exit status), and only while it holds: until it expires, or until the verdict worsens, that is
turns into another verdict that alerts (a different cause is a different incident, whether more or
less severe). A calmer verdict (OK, PAUSED, COLLECTING) does not end it: a consumer that recovers
and falls back into the acknowledged verdict within the silence stays acknowledged.

One definition, read by the collector (which ends a silence that stopped holding, and audits it),
the pages, `jetwatch status` and the exporters.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from jetwatch.core.durations import duration
from jetwatch.health.verdicts import BY_NAME

if TYPE_CHECKING:  # `jetwatch check` reads silences without pandas: only `attach` needs it
    import pandas as pd

MAX_SECONDS = 24 * 3600.0  # a silence is for an incident being worked on, not a way to switch a consumer off
NOTE_CHARS = 500
ALERTING = ("critical", "warning")
# The columns a consumer's silence adds beside its verdict (silences_open.sql), NaN/None: none.
COLUMNS = ("silenced_verdict", "silenced_level", "silence_note", "silenced_by", "silenced_at", "silenced_until")


def alerting(verdict: Any) -> bool:
    """Whether a verdict alerts (and so can be silenced): its level is critical or warning."""
    found = BY_NAME.get(str(verdict))
    return found is not None and found.level in ALERTING


def broken_by(verdict: Any, silenced: Any) -> bool:
    """The silence of `silenced` stops holding once the verdict is another one that alerts."""
    return alerting(verdict) and str(verdict) != str(silenced)


def _utc(t: Any) -> dt.datetime | None:
    """A time as an aware UTC datetime (a datetime, a pandas Timestamp or ISO text); None: none."""
    if t is None or t != t:  # None, NaN or NaT
        return None
    t = dt.datetime.fromisoformat(t) if isinstance(t, str) else t
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


def holds(verdict: Any, silenced: Any, until: Any, now: dt.datetime) -> bool:
    """Whether a silence of `silenced` until `until` holds at `now` for a consumer now `verdict`:
    before its expiry, and while the verdict is not another one that alerts."""
    end = _utc(until)
    return end is not None and end > _utc(now) and not broken_by(verdict, silenced)  # type: ignore[operator]


def end_reason(verdict: Any, silenced: Any, expires_at: Any, now: dt.datetime) -> str | None:
    """Why an open silence ends now (None: it still holds): expired, or the verdict worsened."""
    if _utc(expires_at) <= _utc(now):  # type: ignore[operator]
        return "expired"
    if broken_by(verdict, silenced):
        return f"the verdict became {verdict} (it had been {silenced} when silenced)"
    return None


def attach(consumers: pd.DataFrame, open_silences: pd.DataFrame | None, now: dt.datetime) -> pd.DataFrame:
    """`consumers` (with account, stream, consumer and verdict) with each one's silence beside it
    (COLUMNS) where one holds at `now`, and `silenced` (bool): a silence past its expiry, or of a
    verdict since replaced by another alerting one, is not shown as holding even before the
    collector ends it."""
    import numpy as np
    import pandas as pd

    out = consumers.copy()
    for c in COLUMNS:
        out[c] = None
    out["silenced"] = False
    if open_silences is None or open_silences.empty or out.empty:
        return out
    newest = open_silences.drop_duplicates(["account", "stream", "consumer"], keep="first")
    found = out[["account", "stream", "consumer"]].merge(
        newest[["account", "stream", "consumer", *COLUMNS]], on=["account", "stream", "consumer"], how="left")
    until = pd.to_datetime(found["silenced_until"], utc=True)
    live = until.notna().to_numpy()
    live[live] = np.array([holds(v, s, u, now) for v, s, u in zip(out["verdict"].to_numpy()[live],
                                                                   found["silenced_verdict"].to_numpy()[live],
                                                                   until[live])], dtype=bool)
    for c in COLUMNS:
        out[c] = found[c].where(pd.Series(live), None).to_numpy()
    out["silenced"] = live
    return out


def words(row: Any, now: dt.datetime) -> str:
    """A silence in words, the same on every page: 'STALLED silenced by alice until 2026-11-27 14:30
    UTC (in 52 min): restarting the workers'."""
    until = _utc(row["silenced_until"])
    assert until is not None, "a silence has an expiry"
    left = (until - _utc(now)).total_seconds()  # type: ignore[operator]
    return (f"{row['silenced_verdict']} silenced by {row['silenced_by']} until {until:%Y-%m-%d %H:%M} UTC "
            f"(in {duration(max(left, 0.0))}): {row['silence_note']}")
