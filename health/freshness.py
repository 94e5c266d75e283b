"""Whether each cluster's data is fresh: one judgement per cluster, never one for the whole fleet.

Each cluster has its own collector and its own store, so each stops on its own: a fleet whose
newest data is fresh can hold a cluster whose collector stopped long ago, and the pages, `jetwatch
status` and `jetwatch check` must name that cluster. The times judged are on the server's clock
(verdicts, and the collector's own times once moved by the offset it measured), so a collector host
whose clock is off is not mistaken for a stopped one. The words live here, with no Streamlit, so
the pages and the commands say the same.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from jetwatch.core.durations import duration


@dataclass(frozen=True)
class Stale:
    cluster: str
    last: dt.datetime | None  # the newest data of the cluster (server clock, UTC); None: none yet
    age_seconds: float | None  # how old that is now; None: none yet


def _utc(ts: dt.datetime) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S UTC")


def _aware(value: object) -> dt.datetime | None:
    """A time (a datetime, a pandas Timestamp or ISO text) as an aware UTC datetime; None for
    none (None, NaN, NaT). Plain datetimes: the commands that answer at once never load pandas."""
    if value is None or value != value:  # None, NaN, NaT
        return None
    t = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
    if not isinstance(t, dt.datetime):  # a numpy datetime64, out of a frame's column
        import pandas as pd

        t = pd.Timestamp(t).to_pydatetime()
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


def stale(newest: Mapping[str, object], now: dt.datetime, stale_after: float) -> list[Stale]:
    """The clusters whose newest data (cluster -> a time, or None when it has none) is older than
    `stale_after` seconds, or missing, by name."""
    out = []
    for cluster in sorted(newest):
        last = _aware(newest[cluster])
        if last is None:
            out.append(Stale(cluster, None, None))
            continue
        age = (_aware(now) - last).total_seconds()  # type: ignore[operator]
        if age > stale_after:
            out.append(Stale(cluster, last, age))
    return out


def since(s: Stale) -> str:
    """'6 min ago (2026-12-07 04:44:00 UTC)': when a stale cluster's data stopped."""
    return "never" if s.last is None or s.age_seconds is None else f"{duration(s.age_seconds)} ago ({_utc(s.last)})"


def banner(found: list[Stale], name: Callable[[str], str] = str) -> str | None:
    """The pages' warning for stale clusters of a fleet of several: which ones, since when, what to
    do. `name` writes a cluster's name into the text (the pages escape it as Markdown); in the
    command shown as code, a name has no backticks."""
    if not found:
        return None
    names = [name(s.cluster) for s in found]
    each = "; ".join(f"cluster {n}'s collector " + ("has not completed a cycle yet" if s.last is None
                                                   else f"stopped {since(s)}, its last cycle")
                     for n, s in zip(names, found))
    which = f"cluster {names[0]}" if len(names) == 1 else "clusters " + ", ".join(names[:-1]) + " and " + names[-1]
    commands = " and ".join(f"`jetwatch collect --cluster {s.cluster.replace('`', '')}`" for s in found)
    one = len(found) == 1
    return (f"Data is stale for {which}: {each}. Every verdict of {which} is the last known one, kept as it was "
            f"judged, not a fresh one; the other clusters' data is current. Check that {commands} "
            f"{'is' if one else 'are'} running and can reach {'its' if one else 'their'} server and store.")


def line(s: Stale) -> str:
    """One stale cluster in one line, for `jetwatch status` and `jetwatch check`."""
    if s.last is None:
        return f"cluster {s.cluster}: no data judged yet (is `jetwatch collect --cluster {s.cluster}` running?)"
    return (f"cluster {s.cluster}: the newest verdict is {duration(s.age_seconds)} old (judged {_utc(s.last)}), stale: "
            f"is `jetwatch collect --cluster {s.cluster}` running and reaching its server and store?")
