"""What the pages show, as plain DataFrames: no Streamlit here, so it is tested with plain pytest.

Each function opens the store for one page's worth of named queries and closes it again.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from jetwatch.core.clock import utcnow
from jetwatch.health.rules import SEVERITY, Thresholds
from jetwatch.store.database import Store, StoreMissing

KEY = ["account", "stream", "consumer"]
RAW_RANGE_LIMIT = dt.timedelta(hours=6)  # longer ranges read rollups when the pipeline made them


@dataclass
class Fleet:
    consumers: pd.DataFrame  # one row per consumer: live state, limits, verdict, rates
    collector: pd.DataFrame  # the collectors' own health
    as_of: dt.datetime | None  # newest sample time
    store_exists: bool = True


FLEET_COLUMNS = KEY + [
    "verdict", "reason", "num_pending", "num_ack_pending", "max_ack_pending", "num_waiting",
    "max_waiting", "redelivered_per_second", "delivered_per_second", "acked_per_second",
    "priority_policy", "pin_group", "pinned_id", "pinned_ts", "paused", "findings", "ts", "since",
]
CHANGE_COLUMNS = ["ts", *KEY, "from_verdict", "to_verdict", "reason"]


def _findings(texts: pd.Series) -> list[Any]:
    """The findings JSON of each consumer as lists; identical texts (every OK) parsed once."""
    parsed: dict[str, Any] = {}
    out = []
    for text in texts:
        if not isinstance(text, str):
            out.append([])
            continue
        if text not in parsed:
            parsed[text] = json.loads(text)
        out.append(parsed[text])
    return out


def fleet(store: Store, thresholds: Thresholds | None = None, now: dt.datetime | None = None) -> Fleet:
    """Every consumer in the live state with the verdict the collector judged after its last
    cycle (verdicts_current), worst first. Nothing is recomputed here: the page's cost grows with
    the consumers shown, not with the samples stored. `thresholds` and `now` are not needed any
    more (the collector judges with its own health settings) and are accepted for old callers."""
    try:
        latest, collector = store.queries([("fleet_verdicts", {}), ("collector_health", {})])
    except StoreMissing:
        return Fleet(pd.DataFrame(columns=FLEET_COLUMNS), pd.DataFrame(), None, store_exists=False)
    if latest.empty:
        return Fleet(pd.DataFrame(columns=FLEET_COLUMNS), collector, None)
    out = latest
    judged = out["verdict"].notna()
    out["verdict"] = out["verdict"].where(judged, "COLLECTING")
    out["reason"] = out["reason"].where(judged, "not judged yet: the collector judges after its next cycle")
    out["findings"] = _findings(out["findings"])
    out["_rank"] = out["verdict"].map(SEVERITY)
    out = out.sort_values(["_rank", "num_pending", "stream", "consumer"], ascending=[True, False, True, True])
    as_of = pd.to_datetime(latest["ts"]).max().to_pydatetime()
    return Fleet(out[FLEET_COLUMNS].reset_index(drop=True), collector, as_of)


def recent_changes(store: Store, limit: int = 20) -> pd.DataFrame:
    """The last verdict transitions of the fleet, newest first."""
    try:
        return store.query("verdict_changes_recent", {"limit": limit})
    except StoreMissing:
        return pd.DataFrame(columns=CHANGE_COLUMNS)


def verdict_band(store: Store, account: str, stream: str, consumer: str,
                 since: dt.datetime, until: dt.datetime) -> pd.DataFrame:
    """One consumer's verdicts over a range as spans (start, end, verdict, reason): the band
    the Consumer page draws over its charts. The span in force at `since` starts there."""
    try:
        changes = store.query("verdict_changes_consumer", {"account": account, "stream": stream,
                                                           "consumer": consumer, "since": since, "until": until})
    except StoreMissing:
        changes = pd.DataFrame(columns=["ts", "from_verdict", "to_verdict", "reason"])
    return band_from_changes(changes, since, until)


def band_from_changes(changes: pd.DataFrame, since: dt.datetime, until: dt.datetime) -> pd.DataFrame:
    cols = ["start", "end", "verdict", "reason"]
    if changes.empty:
        return pd.DataFrame(columns=cols)
    ch = changes.sort_values("ts").reset_index(drop=True)
    starts = pd.to_datetime(ch["ts"], utc=True).clip(lower=pd.Timestamp(since))
    ends = starts.shift(-1).fillna(pd.Timestamp(until))
    return pd.DataFrame({"start": starts, "end": ends, "verdict": ch["to_verdict"], "reason": ch["reason"]})[cols]


def last_cycle(store: Store) -> object:
    """When the collector last wrote a cycle (a cache key for everything computed from it)."""
    try:
        frame = store.query("last_cycle")
    except StoreMissing:
        return None
    return None if frame.empty else frame.iloc[0, 0]


def staleness(fleet_view: Fleet, now: dt.datetime, stale_after_s: float) -> str | None:
    """A warning in words when the newest data is older than `stale_after_s`, else None."""
    if not fleet_view.store_exists:
        return "No store yet: is the collector running? Start it with `jetwatch collect` or `jetwatch up`."
    if fleet_view.collector.empty:
        return "The collector has not completed a cycle yet."
    last = pd.to_datetime(fleet_view.collector["last_cycle_at"]).max()
    if pd.isna(last):
        return "The collector has not completed a cycle yet."
    age = (pd.Timestamp(now) - last).total_seconds()
    if age > stale_after_s:
        return (f"Data is stale: the collector's last cycle was {age:.0f}s ago. Check that "
                "`jetwatch collect` is running and can reach the server.")
    return None


# -- Consumer page ---------------------------------------------------------------------------

@dataclass
class ConsumerDetail:
    samples: pd.DataFrame
    source: str  # "raw samples" or "1-minute rollups" / "1-hour rollups"
    configs: pd.DataFrame
    advisories: pd.DataFrame
    pins: pd.DataFrame
    latest: pd.DataFrame


def consumer_detail(store: Store, account: str, stream: str, consumer: str,
                    since: dt.datetime, until: dt.datetime) -> ConsumerDetail:
    ident = {"account": account, "stream": stream, "consumer": consumer}
    rng = {**ident, "since": since, "until": until}
    span = until - since
    calls: list[tuple[str, Any]] = [
        ("consumer_configs", ident), ("consumer_advisories", rng),
        ("pin_events_range", {"since": since, "until": until}), ("fleet_latest", {}),
    ]
    if span > RAW_RANGE_LIMIT:
        gran = "1h" if span > dt.timedelta(days=3) else "1m"
        calls.append(("consumer_rollups", {**rng, "granularity": gran}))
    calls.append(("consumer_samples", rng))
    frames = store.queries(calls)
    configs, advisories, pins, latest = frames[:4]
    samples, source = frames[-1], "raw samples"
    if span > RAW_RANGE_LIMIT and not frames[4].empty:
        samples, source = frames[4], f"{'1-hour' if gran == '1h' else '1-minute'} rollups"
    pins = pins[(pins["account"] == account) & (pins["stream"] == stream) & (pins["consumer"] == consumer)]
    latest = latest[(latest["account"] == account) & (latest["stream"] == stream) & (latest["consumer"] == consumer)]
    return ConsumerDetail(samples, source, configs, advisories, pins.reset_index(drop=True), latest)


def rates(samples: pd.DataFrame, filtered: bool = False) -> pd.DataFrame:
    """Delivery, ack and redelivery rates per second from sequence deltas between samples.

    The pipeline's rollup rates follow the same rules (a property test holds them together): a
    step where any sequence goes backwards (the consumer was recreated) is dropped, not counted,
    and a filtered consumer has no redelivery rate from sequences (its stream sequence jumps
    over other subjects' messages).
    """
    if samples.empty or "delivered_consumer_seq" not in samples:
        return pd.DataFrame(columns=["ts", "delivered_per_second", "acked_per_second", "redelivered_per_second"])
    df = samples.sort_values("ts")
    dt_s = pd.to_datetime(df["ts"]).diff().dt.total_seconds()
    d_cons = df["delivered_consumer_seq"].diff()
    d_stream = df["delivered_stream_seq"].diff()
    d_ack = df["ack_floor_consumer_seq"].diff()
    ok = (dt_s > 0) & (d_cons >= 0) & (d_stream >= 0) & (d_ack >= 0)
    out = pd.DataFrame({
        "ts": df["ts"],
        "delivered_per_second": (d_cons / dt_s).where(ok),
        "acked_per_second": (d_ack / dt_s).where(ok),
        "redelivered_per_second": ((d_cons - d_stream).clip(lower=0) / dt_s).where(ok & (not filtered)),
    })
    return out.iloc[1:].reset_index(drop=True)


# -- Pins page -------------------------------------------------------------------------------

SESSION_COLUMNS = KEY + ["group_name", "pinned_id", "start_ts", "end_ts", "duration_seconds",
                         "end_reason", "gap_seconds"]


def sessions_from_events(events: pd.DataFrame, until: dt.datetime) -> pd.DataFrame:
    """Pin sessions from pin events, for the live view between pipeline runs.

    The same rules as the pipeline's `pin_sessions` (a property test holds them together): a
    pin ends at its consumer's next event (an unpin, with its reason or 'inferred'; another pin
    with no unpin seen, 'inferred'; the consumer's deletion; or nothing yet: 'still pinned' at
    `until`), and an unpin with no pin before it is a session with an unknown start. At one
    instant a deletion comes first, then an unpin, then a pin.
    """
    if events.empty:
        return pd.DataFrame(columns=SESSION_COLUMNS)
    ev = events.copy()
    ev["ts"] = pd.to_datetime(ev["ts"], utc=True)
    ev["_order"] = ev["event"].map({"deleted": 0, "unpinned": 1}).fillna(2).astype(int)
    ev = ev.drop_duplicates(["ts", *KEY, "event", "pinned_id", "reason", "source"])
    ev = ev.sort_values([*KEY, "ts", "_order", "pinned_id", "source", "reason"], na_position="first")
    grp = ev.groupby(KEY, sort=False, dropna=False)
    ev["prev_event"] = grp["event"].shift(1)
    for col in ("event", "ts", "reason", "source"):
        ev[f"next_{col}"] = grp[col].shift(-1)
    pins = ev[ev["event"] == "pinned"].copy()
    pins["end_reason"] = np.select(
        [pins["next_event"].isna(), pins["next_event"] == "deleted",
         (pins["next_event"] == "unpinned") & (pins["next_source"] == "inferred"),
         pins["next_event"] == "unpinned"],
        ["still pinned", "consumer deleted", "inferred", pins["next_reason"].fillna("unknown").astype(str)],
        default="inferred")
    pins["start_ts"] = pins["ts"]
    pins["end_ts"] = pins["next_ts"].fillna(pd.Timestamp(until))
    orphans = ev[(ev["event"] == "unpinned") & (ev["prev_event"] != "pinned")].copy()
    orphans["pinned_id"] = None
    orphans["start_ts"] = pd.NaT
    orphans["end_ts"] = orphans["ts"]
    orphans["end_reason"] = np.where(orphans["source"] == "inferred", "inferred",
                                     orphans["reason"].fillna("unknown").astype(str))
    cols = [*KEY, "group_name", "pinned_id", "start_ts", "end_ts", "end_reason"]
    out = pd.concat([pins[cols], orphans[cols]], ignore_index=True)
    out["start_ts"] = pd.to_datetime(out["start_ts"], utc=True)
    out["end_ts"] = pd.to_datetime(out["end_ts"], utc=True)
    out["duration_seconds"] = (out["end_ts"] - out["start_ts"]).dt.total_seconds()
    out = out.sort_values([*KEY, "end_ts", "start_ts", "end_reason", "pinned_id"], na_position="first")
    next_start = out.groupby(KEY, sort=False, dropna=False)["start_ts"].shift(-1)
    out["gap_seconds"] = (next_start - out["end_ts"]).dt.total_seconds().clip(lower=0)
    return out[SESSION_COLUMNS].reset_index(drop=True)


def pin_switches(events: pd.DataFrame) -> pd.DataFrame:
    """The pins and unpins among pin history rows (deletions only end sessions)."""
    return events[events["event"] != "deleted"] if not events.empty else events


def drawn_sessions(sessions: pd.DataFrame) -> pd.DataFrame:
    """The sessions a timeline can draw: those with a known start."""
    return sessions[sessions["start_ts"].notna()] if not sessions.empty else sessions


def pin_summary(sessions: pd.DataFrame, events: pd.DataFrame, nopin: pd.DataFrame,
                hours: float, flapping_per_hour: float) -> pd.DataFrame:
    """Per consumer: switches per hour, median and p95 pin duration, time with work pending and
    no pin; flapping consumers first."""
    cols = KEY + ["switches", "switches_per_hour", "median_pin_seconds", "p95_pin_seconds",
                  "nopin_pending_seconds", "flapping"]
    parts = [f[KEY] for f in (sessions, events, nopin) if not f.empty]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts).drop_duplicates().reset_index(drop=True)
    pinned = events[events["event"] == "pinned"] if not events.empty else pd.DataFrame(columns=KEY)
    switches = pinned.groupby(KEY).size().rename("switches").reset_index()
    out = out.merge(switches, on=KEY, how="left")
    closed = sessions[sessions["end_reason"] != "still pinned"] if not sessions.empty else pd.DataFrame(
        columns=KEY + ["duration_seconds"])
    durations = closed.groupby(KEY)["duration_seconds"].agg(
        median_pin_seconds="median", p95_pin_seconds=lambda d: d.quantile(0.95)).reset_index()
    out = out.merge(durations, on=KEY, how="left")
    out = out.merge(nopin if not nopin.empty else pd.DataFrame(columns=KEY + ["nopin_pending_seconds"]),
                    on=KEY, how="left")
    out["switches"] = out["switches"].fillna(0).astype(int)
    out["switches_per_hour"] = out["switches"] / max(hours, 1e-9)
    out["nopin_pending_seconds"] = pd.to_numeric(out["nopin_pending_seconds"]).fillna(0.0)
    out["flapping"] = out["switches_per_hour"] > flapping_per_hour
    out = out.sort_values(["flapping", "switches_per_hour", "stream", "consumer"],
                          ascending=[False, False, True, True])
    return out[cols].reset_index(drop=True)


def merge_sessions(piped: pd.DataFrame, live: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The pipeline's sessions, brought up to date with the pins seen since its last run."""
    if piped.empty:
        return live, "pin events (live)"
    piped = drawn_sessions(piped).copy()
    for col in ("start_ts", "end_ts"):
        piped[col] = pd.to_datetime(piped[col], utc=True)
    if live.empty:
        return piped.reset_index(drop=True), "pipeline pin_sessions"
    newest = piped["start_ts"].max()
    recent = live[pd.to_datetime(live["start_ts"], utc=True) >= newest]
    kept = piped[~piped["pinned_id"].isin(recent["pinned_id"])]
    merged = pd.concat([kept, recent[kept.columns]], ignore_index=True).sort_values(KEY + ["start_ts"])
    return merged.reset_index(drop=True), "pipeline pin_sessions, with pins since its last run"


@dataclass
class PinHistory:
    events: pd.DataFrame
    sessions: pd.DataFrame
    summary: pd.DataFrame
    source: str


def pin_history(store: Store, since: dt.datetime, until: dt.datetime, thresholds: Thresholds) -> PinHistory:
    rng = {"since": since, "until": until}
    try:
        events, nopin, piped = store.queries([
            ("pin_events_range", rng), ("nopin_pending", rng), ("pin_sessions_range", rng)])
    except StoreMissing:
        empty = pd.DataFrame(columns=SESSION_COLUMNS)
        return PinHistory(pd.DataFrame(), empty, pd.DataFrame(), "no store yet")
    live = sessions_from_events(events, until)
    sessions, source = merge_sessions(piped, live)
    sessions = drawn_sessions(sessions)
    events = pin_switches(events)
    in_range = events[pd.to_datetime(events["ts"], utc=True) >= pd.Timestamp(since)] if not events.empty else events
    hours = (until - since).total_seconds() / 3600
    per_hour = thresholds.flapping_switches / (thresholds.health_window / 3600)
    summary = pin_summary(sessions, in_range, nopin, hours, per_hour)
    return PinHistory(in_range.reset_index(drop=True), sessions, summary, source)


def audit(store: Store, limit: int = 500) -> pd.DataFrame:
    try:
        return store.query("audit_recent", {"limit": limit})
    except StoreMissing:
        return pd.DataFrame()
