"""The Pins and Consumer pages' reads as they were before sessions had one definition, frozen here
as the page bench's baseline (bench/pages.py): the Pins page sessionised every pin event of the range in pandas and
merged the pipeline's sessions by the newest start of the whole fleet, counted the most switches in
any health window of the range in a Python loop per consumer, and read every session and event of
the range; the Consumer page read the whole fleet's verdicts to show one consumer's. Not used by
jetwatch itself."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pandas as pd

from jetwatch import sql
from jetwatch.dashboard import data, dropped
from jetwatch.health.rules import Thresholds, flapping
from jetwatch.store.database import Store, StoreMissing

KEY = ["account", "stream", "consumer"]
# The two queries as they were (sql/queries/pin_events_range.sql and pin_sessions_range.sql as they were).
PIN_EVENTS_RANGE = """
-- Pin history for a time range (pin events and consumer deletions), with one pin before the
-- range per consumer so a pin that started earlier still shows as a bar from the range's start.
-- At one instant a deletion comes first, then an unpin, then a pin. $account, $stream and
-- $consumer NULL: every consumer; set: that one only (the Consumer page reads no other; $account
-- NULL: in whichever account).
WITH ranked AS (
    SELECT *, row_number() OVER (PARTITION BY account, stream, consumer
                                 ORDER BY ts DESC, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END DESC) AS back
    FROM pin_session_events WHERE ts < $since AND ($consumer IS NULL OR (($account IS NULL OR account = $account) AND stream = $stream AND consumer = $consumer))
)
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source, vouched
FROM pin_session_events WHERE ts >= $since AND ts <= $until
  AND ($consumer IS NULL OR (($account IS NULL OR account = $account) AND stream = $stream AND consumer = $consumer))
UNION ALL
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source, vouched
FROM ranked WHERE back = 1 AND event = 'pinned'
ORDER BY account, stream, consumer, ts, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END;
"""
PIN_SESSIONS_RANGE = """
-- The pipeline's pin sessions overlapping a range.
SELECT account, stream, consumer, group_name, pinned_id, start_ts, end_ts, duration_seconds,
       end_reason, gap_seconds
FROM pin_sessions
WHERE coalesce(end_ts, $until) >= $since AND start_ts <= $until
ORDER BY account, stream, consumer, start_ts;
"""
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


SUMMARY_COLUMNS = KEY + ["switches", "hours_with_data", "switches_per_hour", "most_in_a_window",
                         "median_pin_seconds", "p95_pin_seconds", "nopin_pending_seconds",
                         "nopin_age_weighted_seconds", "nopin_oldest_age_seconds", "flapping"]


def _most_in_a_window(pins: pd.DataFrame, window_s: float) -> pd.DataFrame:
    """Per consumer, the most pins that started within any one window of `window_s` seconds."""
    if pins.empty:
        return pd.DataFrame(columns=KEY + ["most_in_a_window"])
    p = pins[KEY + ["ts"]].copy()
    p["ts"] = pd.to_datetime(p["ts"], utc=True)
    p["t"] = p["ts"].astype("int64") / 1e9
    p = p.sort_values(KEY + ["t"]).reset_index(drop=True)
    counts = []
    for _, g in p.groupby(KEY, sort=False, dropna=False):
        t = g["t"].to_numpy()
        # pins in [t_i - window, t_i] for each pin i: a window ending at a pin holds the most
        counts.append((g.iloc[0][KEY].tolist(), int((np.arange(len(t)) - np.searchsorted(t, t - window_s, "left") + 1).max())))
    return pd.DataFrame([[*k, n] for k, n in counts], columns=KEY + ["most_in_a_window"])


def pin_summary(sessions: pd.DataFrame, events: pd.DataFrame, nopin: pd.DataFrame,
                since: dt.datetime, until: dt.datetime, thresholds: Thresholds) -> pd.DataFrame:
    """Per consumer: switches, switches per hour of the time with data (from the range's start, or
    the consumer's first pin event in it when it starts later), median and p95 pin duration, time
    with work pending and no pin; FLAPPING by the Fleet's own rule (health.rules.flapping) on the
    most pin switches within any one health window of the range. Flapping consumers first."""
    cols = SUMMARY_COLUMNS
    parts = [f[KEY] for f in (sessions, events, nopin) if not f.empty]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts).drop_duplicates().reset_index(drop=True)
    pinned = events[events["event"] == "pinned"] if not events.empty else pd.DataFrame(columns=KEY + ["ts"])
    switches = pinned.groupby(KEY).size().rename("switches").reset_index()
    out = out.merge(switches, on=KEY, how="left")
    seen = [f[KEY].assign(first_ts=pd.to_datetime(f[col], utc=True)) for f, col in
            ((events, "ts"), (sessions, "start_ts")) if not f.empty]  # a pin carried in starts before the range
    if seen:
        out = out.merge(pd.concat(seen).groupby(KEY)["first_ts"].min().reset_index(), on=KEY, how="left")
    else:
        out["first_ts"] = pd.NaT
    start = pd.to_datetime(out["first_ts"], utc=True).fillna(pd.Timestamp(since)).clip(lower=pd.Timestamp(since))
    out["hours_with_data"] = ((pd.Timestamp(until) - start).dt.total_seconds() / 3600).clip(lower=1 / 3600)
    out = out.merge(_most_in_a_window(pinned, thresholds.health_window), on=KEY, how="left")
    closed = sessions[sessions["end_reason"] != "still pinned"] if not sessions.empty else pd.DataFrame(
        columns=KEY + ["duration_seconds"])
    durations = closed.groupby(KEY)["duration_seconds"].agg(
        median_pin_seconds="median", p95_pin_seconds=lambda d: d.quantile(0.95)).reset_index()
    out = out.merge(durations, on=KEY, how="left")
    nopin_cols = ["nopin_pending_seconds", "nopin_age_weighted_seconds", "nopin_oldest_age_seconds"]
    nopin = nopin.reindex(columns=KEY + nopin_cols) if not nopin.empty else pd.DataFrame(columns=KEY + nopin_cols)
    out = out.merge(nopin, on=KEY, how="left")
    out["switches"] = out["switches"].fillna(0).astype(int)
    out["most_in_a_window"] = pd.to_numeric(out["most_in_a_window"]).fillna(0).astype(int)
    out["switches_per_hour"] = out["switches"] / out["hours_with_data"]
    out["nopin_pending_seconds"] = pd.to_numeric(out["nopin_pending_seconds"]).fillna(0.0)
    out["nopin_age_weighted_seconds"] = pd.to_numeric(out["nopin_age_weighted_seconds"]).fillna(0.0)
    out["nopin_oldest_age_seconds"] = pd.to_numeric(out["nopin_oldest_age_seconds"]).astype(float)
    out["flapping"] = flapping(out["most_in_a_window"], thresholds).astype(bool)
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


EVERY_CONSUMER = {"account": None, "stream": None, "consumer": None}


def pin_history(store: Store, since: dt.datetime, until: dt.datetime, thresholds: Thresholds) -> PinHistory:
    rng = {"since": since, "until": until}
    try:
        events, nopin, piped = store.read(lambda con: [
            con.execute(PIN_EVENTS_RANGE, {**rng, **EVERY_CONSUMER}).df(),
            con.execute(sql.query("nopin_pending"), rng).df(), con.execute(PIN_SESSIONS_RANGE, rng).df()])
    except StoreMissing:
        empty = pd.DataFrame(columns=SESSION_COLUMNS)
        return PinHistory(pd.DataFrame(), empty, pd.DataFrame(), "no store yet")
    live = sessions_from_events(events, until)
    sessions, source = merge_sessions(piped, live)
    sessions = drawn_sessions(sessions)
    events = pin_switches(events)
    in_range = events[pd.to_datetime(events["ts"], utc=True) >= pd.Timestamp(since)] if not events.empty else events
    summary = pin_summary(sessions, in_range, nopin, since, until, thresholds)
    return PinHistory(in_range.reset_index(drop=True), sessions, summary, source)


def consumer_detail(store: Store, account: str, stream: str, consumer: str,
                    since: dt.datetime, until: dt.datetime) -> data.ConsumerDetail:
    """data.consumer_detail as it was: the same reads, the consumer's pin events with the one pin
    before the range (the old pin_events_range)."""
    ident = {"account": account, "stream": stream, "consumer": consumer}
    rng = {**ident, "since": since, "until": until}
    span = until - since
    long = span > data.RAW_RANGE_LIMIT
    gran = "1h" if span > dt.timedelta(days=3) else "1m"

    def read(con):  # type: ignore[no-untyped-def]
        out = [con.execute(sql.query("consumer_configs"), ident).df(),
               con.execute(sql.query("consumer_advisories"), rng).df(), con.execute(PIN_EVENTS_RANGE, rng).df(),
               con.execute(sql.query("consumer_latest_one"), ident).df()]
        if long:
            out.append(con.execute(sql.query("consumer_rollups"), {**rng, "granularity": gran}).df())
        out.append(con.execute(sql.query("consumer_samples"), {**rng, "since": max(since, until - data.RAW_RANGE_LIMIT)}).df())
        return out

    frames = store.read(read)
    configs, advisories, pins, latest = frames[:4]
    samples, source = frames[-1], "raw samples"
    if long and not frames[4].empty and data._rollups_reach_further(frames[4], samples):
        samples, source = frames[4], "rollups"
    return data.ConsumerDetail(samples, source, configs, advisories, pins.reset_index(drop=True), latest)


def pins_page(store: Store, since: dt.datetime, until: dt.datetime, th: Thresholds) -> PinHistory:
    """What the Pins page read on a load (its cache cold): the pin history, the capture gaps and the
    operator actions of the range."""
    history = pin_history(store, since, until, th)
    data.capture_gaps(store, since, until)
    data.operator_actions(store, since, until)
    return history


def consumer_page(store: Store, account: str, stream: str, consumer: str, since: dt.datetime, until: dt.datetime,
                  th: Thresholds) -> pd.DataFrame:
    """What the Consumer page read on a load (its caches cold): the picker's keys, the consumer's
    detail, its verdict out of the whole fleet's, the verdict band, its pin sessions, the operator
    actions and its dropped and naked messages."""
    store.query("consumer_keys")
    detail = consumer_detail(store, account, stream, consumer, since, until)
    fleet = data.fleet(store, th).consumers
    fleet[(fleet["account"] == account) & (fleet["stream"] == stream) & (fleet["consumer"] == consumer)]
    data.verdict_band(store, account, stream, consumer, data.data_start(detail.samples, since), until)
    sessions = data.drawn_sessions(sessions_from_events(detail.pins, until))
    data.operator_actions(store, since, until)
    dropped.dropped(store, account, stream, consumer)
    dropped.naks_left(store, account, stream, consumer, since)
    return sessions
