"""What the pages show, as plain DataFrames: no Streamlit here, so it is tested with plain pytest.

Each function opens the store for one page's worth of named queries and closes it again.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from jetwatch.core.clock import utcnow
from jetwatch.dashboard.tables import since_cell
from jetwatch.dashboard.text import duration, pin_holder, utc
from jetwatch.health import freshness, pin_causes, silences
from jetwatch.health.rules import Thresholds
from jetwatch.health.sessions import SESSION_COLUMNS, pin_sessions
from jetwatch.health.verdicts import VERDICT_NAMES
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
    "priority_policy", "pin_group", "pinned_id", "pinned_ts", "holder_name", "holder_verification", "paused",
    "findings", "ts", "since", "unhealthy_since", "oldest_unacked_age_seconds", "oldest_unacked_age_kind", "eta_state", "eta_seconds",
    "eta_low_seconds", "eta_high_seconds",
    "last_pull", "last_ack", "first_seen", "unpins", "moves",
    # Settings that defeat themselves and resets (health/config_findings.py): beside the verdict, never in it.
    "config_findings",
    # An operator's silence beside the verdict, where one holds (health/silences.py): never instead of it.
    "silenced", *silences.COLUMNS,
]
QUIET = ("NO_PULLERS", "STALLED")  # verdicts about time: their reason says since when the consumer was quiet
CHANGE_COLUMNS = ["ts", *KEY, "from_verdict", "to_verdict", "reason"]


def _findings(texts: pd.Series) -> list[Any]:
    """The findings JSON of each consumer as lists; identical texts (every OK) parsed once."""
    parsed: dict[str, Any] = {}
    out: list[Any] = []
    for text in texts:
        if not isinstance(text, str):
            out.append([])
            continue
        if text not in parsed:
            parsed[text] = json.loads(text)
        out.append(parsed[text])
    return out


def fleet(store: Store, thresholds: Thresholds | None = None, now: dt.datetime | None = None,
          since_when: bool = True, only: tuple[str | None, str, str] | None = None) -> Fleet:
    """Every consumer in the live state with the verdict the collector judged after its last
    cycle (verdicts_current), worst first. Nothing is recomputed here: the page's cost grows with
    the consumers shown, not with the samples stored. Beside the verdict: when each consumer last
    pulled and acknowledged and was first seen (kept by the collector with the verdict, so a
    NO_PULLERS or STALLED reason says since when), and the unpin reasons of the health window
    (what a FLAPPING verdict's switches were). `since_when` False leaves both out. `only`
    (account, stream, consumer): that consumer's row alone (the Consumer page's verdict)."""
    window = dt.timedelta(seconds=(thresholds or Thresholds()).health_window)
    now = now or utcnow()
    try:
        ident = dict(zip(KEY, only)) if only else {"account": None, "stream": None, "consumer": None}
        latest, collector, unpins, silenced = store.queries(
            [("fleet_verdicts", {"severity": list(VERDICT_NAMES), **ident}), ("collector_health", {}),
             ("unpin_reasons", {"since": now - window if since_when else now}), ("silences_open", {})],
            arrow=["fleet_verdicts"])
        latest = latest.to_pandas()  # Arrow to pandas directly: at 100,000 rows twice as fast as .df()
    except StoreMissing:
        return Fleet(pd.DataFrame(columns=FLEET_COLUMNS), pd.DataFrame(), None, store_exists=False)
    collector = on_server_clock(collector)
    if latest.empty:
        return Fleet(pd.DataFrame(columns=FLEET_COLUMNS), collector, None)
    out = _with_activity(store, latest, window) if since_when else latest.assign(
        first_seen=pd.NaT, last_pull=pd.NaT, last_ack=pd.NaT)
    reasons: dict[tuple[Any, ...], dict[str, int]] = {}
    for r in unpins.itertuples(index=False):
        reasons.setdefault((r.account, r.stream, r.consumer), {})[r.reason] = int(r.unpins)
    out["unpins"] = [reasons.get(k, {}) for k in zip(out["account"], out["stream"], out["consumer"])]
    out["moves"] = _flapping_causes(store, out, now - window, now)
    judged = out["verdict"].notna()
    out["verdict"] = out["verdict"].where(judged, "COLLECTING")
    out["reason"] = out["reason"].where(judged, "not judged yet: the collector judges after its next cycle")
    out["findings"] = _findings(out["findings"])
    out["config_findings"] = _findings(out["config_findings"]) if "config_findings" in out else [[]] * len(out)
    out = silences.attach(out, silenced, now)
    ts = latest["ts"]  # already timestamps from the store: no parse of every value for the newest
    as_of = (ts if pd.api.types.is_datetime64_any_dtype(ts) else pd.to_datetime(ts)).max().to_pydatetime()
    return Fleet(out[FLEET_COLUMNS], collector, as_of)  # in the query's order: worst first


def _flapping_causes(store: Store, out: pd.DataFrame, since: dt.datetime, until: dt.datetime) -> list[dict[str, int]]:
    """Why the health window's pins moved (moves per cause, health/pin_causes.py), for each FLAPPING
    consumer: what its reason and next step name. Read only when a consumer is FLAPPING (one query for
    all of them, or one consumer's alone); every other row has none."""
    flapping = out[out["verdict"] == "FLAPPING"]
    if flapping.empty:
        return [{}] * len(out)
    one = flapping.iloc[0] if len(flapping) == 1 else None
    moved = store.query("pin_moves", pin_causes.params(
        since, until, None, *((one["account"], one["stream"], one["consumer"]) if one is not None else ())))
    causes = pin_causes.by_consumer(moved)
    return [causes.get(k, {}) for k in zip(out["account"], out["stream"], out["consumer"])]


# The collector's own times, written on its host's clock (samples, verdicts and advisories carry the server's).
COLLECTOR_TIMES = ("started_at", "last_cycle_at", "last_event_at", "last_error_at", "last_reject_at")


def on_server_clock(collector: pd.DataFrame) -> pd.DataFrame:
    """The collector's status with its own times moved onto the server's clock by the offset it
    measured (`clock_offset_seconds`, the server's clock minus its host's), as its verdicts already
    are: pages compare them with their own now, as they do the samples' times, so a collector host
    5 minutes behind does not read as stopped 5 minutes ago, nor one 5 minutes ahead, once stopped,
    as fresh ("last cycle -300s ago")."""
    if collector.empty or "clock_offset_seconds" not in collector:
        return collector
    offset = pd.to_timedelta(pd.to_numeric(collector["clock_offset_seconds"], errors="coerce").fillna(0.0), unit="s")
    out = collector.copy()
    for column in COLLECTOR_TIMES:
        if column in out:
            out[column] = pd.to_datetime(out[column], utc=True) + offset
    # Newest first on the server's clock, as the pages pick the current collector: the query orders by
    # each host's own clock, and a collector restarted on a host behind would sort below the dead one.
    return out.sort_values("last_cycle_at", ascending=False, na_position="last", kind="stable").reset_index(drop=True)


def collectors(store: Store) -> Fleet:
    """The collectors' own health alone (on the server's clock): what a page that reads no verdicts
    needs to say whether its cluster's data is stale."""
    try:
        collector = store.query("collector_health")
    except StoreMissing:
        return Fleet(pd.DataFrame(columns=FLEET_COLUMNS), pd.DataFrame(), None, store_exists=False)
    return Fleet(pd.DataFrame(columns=FLEET_COLUMNS), on_server_clock(collector), None)


ACTIVITY = ["first_seen", "last_pull", "last_ack"]


def _with_activity(store: Store, latest: pd.DataFrame, window: dt.timedelta) -> pd.DataFrame:
    """`latest` with last_pull, last_ack and first_seen as the collector kept them with each
    verdict. Rows written before it kept them (NULL) are looked up for the quiet consumers among
    them in the samples from two health windows before each one's verdict began (the last activity
    lies a window and a sample before the verdict, at most, unless the collector was away)."""
    for c in ACTIVITY:
        if c not in latest:
            latest[c] = pd.NaT
    quiet = latest[latest["verdict"].isin(QUIET) & latest[ACTIVITY].isna().all(axis=1)]
    if quiet.empty:
        return latest
    froms = pd.to_datetime(quiet["since"], utc=True) - 2 * window
    activity = store.query("consumer_activity", {
        "accounts": list(quiet["account"]), "streams": list(quiet["stream"]), "consumers": list(quiet["consumer"]),
        "froms": [t.to_pydatetime() for t in froms]})
    looked_up = latest.drop(columns=ACTIVITY).merge(activity, on=KEY, how="left")
    for c in ACTIVITY:
        latest[c] = latest[c].where(latest[c].notna(), looked_up[c].to_numpy())
    return latest


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


GAP_COLUMNS = ["detected_at", "stream", "from_seq", "to_seq", "missed", "from_ts", "to_ts", "reason"]
ACTION_COLUMNS = ["ts", "actor", "action", *KEY, "group_name", "outcome", "action_id"]  # audit_actions_range


def capture_gaps(store: Store, since: dt.datetime, until: dt.datetime) -> pd.DataFrame:
    """Gaps in the advisory record that touch the range (newest first): pin history is
    incomplete there."""
    try:
        return store.query("capture_gaps_range", {"since": since, "until": until})
    except StoreMissing:
        return pd.DataFrame(columns=GAP_COLUMNS)


def _when(ts: object) -> str:
    return "?" if ts is None or pd.isna(ts) else pd.Timestamp(ts).tz_convert("UTC").strftime("%Y-%m-%d %H:%M:%S UTC")


def gap_warnings(gaps: pd.DataFrame) -> list[str]:
    """Each gap in words, as the pages show it."""
    out = []
    for g in gaps.itertuples():
        lost = "advisories lost" if g.missed is None or pd.isna(g.missed) else f"{int(g.missed)} advisories lost"
        until = g.to_ts if g.to_ts is not None and not pd.isna(g.to_ts) else g.detected_at
        out.append(f"Pin history incomplete between {_when(g.from_ts)} and {_when(until)} "
                   f"({lost} from the capture stream {g.stream}: {g.reason}).")
    return out


def last_cycle(store: Store) -> object:
    """When the collector last wrote a cycle (a cache key for everything computed from it)."""
    try:
        frame = store.query("last_cycle")
    except StoreMissing:
        return None
    return None if frame.empty else frame.iloc[0, 0]


def newest_cycles(collector: pd.DataFrame, clusters: Sequence[str]) -> dict[str, object]:
    """cluster -> the newest cycle of its collectors on the server's clock (None: none yet), for
    each of `clusters`, whether or not its store holds a collector yet."""
    newest: dict[str, object] = dict.fromkeys(clusters)
    if not collector.empty and "cluster" in collector:
        cycles = pd.to_datetime(collector["last_cycle_at"], utc=True)
        for cluster, last in cycles.groupby(collector["cluster"]).max().items():
            newest[str(cluster)] = None if pd.isna(last) else last
    return newest


def staleness(fleet_view: Fleet, now: dt.datetime, stale_after_s: float, clusters: Sequence[str] = (),
              name: Callable[[str], str] = str) -> str | None:
    """A warning in words when data is older than `stale_after_s`, else None. Of several
    `clusters`, each is judged on its own (health/freshness.py): one cluster's fresh data never
    hides another's stopped collector, and the warning names the stale ones (written by `name`)."""
    if len(clusters) > 1:
        found = freshness.stale(newest_cycles(fleet_view.collector, clusters), now, stale_after_s)
        return freshness.banner(found, name)
    if not fleet_view.store_exists:
        return "No store yet: is the collector running? Start it with `jetwatch collect` or `jetwatch up`."
    if fleet_view.collector.empty:
        return "The collector has not completed a cycle yet."
    last = pd.to_datetime(fleet_view.collector["last_cycle_at"]).max()
    if pd.isna(last):
        return "The collector has not completed a cycle yet."
    age = (pd.Timestamp(now) - last).total_seconds()
    if age > stale_after_s:
        return (f"Data is stale: collector stopped {duration(age)} ago (its last cycle, {utc(last)}). Every "
                "verdict below is the last known one, kept as it was judged, not a fresh one. Check that `jetwatch collect` is "
                "running and can reach the server and the store.")
    return None


# -- Consumer page ---------------------------------------------------------------------------

@dataclass
class ConsumerDetail:
    samples: pd.DataFrame
    source: str  # "raw samples" or "1-minute rollups" / "1-hour rollups"
    configs: pd.DataFrame
    advisories: pd.DataFrame
    pins: pd.DataFrame  # pin events in the range
    latest: pd.DataFrame
    sessions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SESSION_COLUMNS))  # drawn, oldest first
    changes: pd.DataFrame = field(default_factory=pd.DataFrame)  # verdict changes of the range, and the one before
    actions: pd.DataFrame = field(default_factory=pd.DataFrame)  # operator actions on it in the range
    dropped: pd.DataFrame = field(default_factory=pd.DataFrame)  # messages it dropped, newest first (DROPPED_SHOWN)
    naks: pd.DataFrame = field(default_factory=pd.DataFrame)  # naked messages of the range still owed
    dropped_counts: pd.DataFrame = field(default_factory=pd.DataFrame)  # all it dropped, by kind and reason

    def band(self, since: dt.datetime, until: dt.datetime) -> pd.DataFrame:
        """Its verdicts from `since` (at or after the range's start) as spans (verdict_band)."""
        ch = self.changes
        if not ch.empty:
            ts = pd.to_datetime(ch["ts"], utc=True)
            before = ts[ts <= pd.Timestamp(since)]
            ch = ch[ts >= (before.max() if not before.empty else pd.Timestamp(since))]
        return band_from_changes(ch, since, until)


def consumer_detail(store: Store, account: str, stream: str, consumer: str,
                    since: dt.datetime, until: dt.datetime) -> ConsumerDetail:
    ident = {"account": account, "stream": stream, "consumer": consumer}
    rng = {**ident, "since": since, "until": until}
    span = until - since
    calls: list[tuple[str, Any]] = [
        ("consumer_configs", ident), ("consumer_advisories", rng), ("pin_events_range", rng),
        ("consumer_latest_one", ident),
    ]
    long = span > RAW_RANGE_LIMIT
    if long:
        gran = "1h" if span > dt.timedelta(days=3) else "1m"
        calls.append(("consumer_rollups", {**rng, "granularity": gran}))
    # Raw samples never for more than RAW_RANGE_LIMIT, however long the range: a "30 days" view
    # reads rollups, and without rollups (no pipeline run yet) only the range's newest hours.
    calls.append(("consumer_samples", {**rng, "since": max(since, until - RAW_RANGE_LIMIT)}))
    # Its pin sessions as the Pins page reads them: the pipeline's, then the live tail's, up to now;
    # its verdicts, the operators' actions, its dropped and naked messages: the page's reads in one.
    extra = [("pin_sessions_rows", {"limit": ROWS_SHOWN}), ("verdict_changes_consumer", rng),
             ("audit_actions_range", {"since": since, "until": until}),
             ("consumer_dropped", {**ident, "limit": DROPPED_SHOWN}), ("consumer_nak_remaining", {**ident, "since": since}),
             ("consumer_dropped_counts", ident)]
    frames = store.queries(calls + extra, stage=pin_range(since, until, Thresholds(), ident))
    configs, advisories, pins, latest = frames[:4]
    rows, changes, actions, dropped, naks, dropped_counts = frames[-len(extra):]
    sessions = _sessions_read(rows).iloc[::-1].reset_index(drop=True)
    actions = actions[(actions["stream"] == stream) & (actions["consumer"] == consumer)]
    frames = frames[:-len(extra)]
    samples, source = frames[-1], "raw samples"
    if long and not frames[4].empty and _rollups_reach_further(frames[4], samples):
        samples, source = frames[4], f"{'1-hour' if gran == '1h' else '1-minute'} rollups"
    elif long and not samples.empty and not frames[4].empty:
        source = "raw samples (every one there is: the rollups hold nothing older)"
    elif long:
        source = (f"raw samples of the last {RAW_RANGE_LIMIT.total_seconds() / 3600:g} h only: the pipeline "
                  "has not rolled up this range yet")
    return ConsumerDetail(samples, source, configs, advisories, pins.reset_index(drop=True), latest, sessions,
                          changes, actions.reset_index(drop=True), dropped, naks, dropped_counts)


DROPPED_SHOWN = 200  # the Consumer page lists this many of a consumer's dropped messages, newest first
SILENCES_SHOWN = 10  # the Consumer page lists this many of a consumer's silences, newest first


def consumer_silences(store: Store, account: str, stream: str, consumer: str) -> pd.DataFrame:
    """A consumer's silences, newest first: the open one (if any) and how the earlier ones ended.
    Read on every refresh, not once per cycle: a silence just set shows at once."""
    return store.query("silences_consumer", {"account": account, "stream": stream, "consumer": consumer,
                                             "limit": SILENCES_SHOWN})


def silences_table(found: pd.DataFrame, now: dt.datetime) -> pd.DataFrame:
    """A consumer's silences as the page lists them, each with how it ended (or that it holds)."""
    def state(r: Any) -> str:
        if isinstance(r.end_reason, str):
            return f"ended {_ago(r.ended_at, now)}: {r.end_reason}"
        if pd.Timestamp(r.silenced_until) <= pd.Timestamp(now):
            return "expired (the collector ends it with its next cycle)"
        return "holds"

    return pd.DataFrame({
        "Verdict": found["silenced_verdict"], "By": found["silenced_by"], "Note": found["silence_note"],
        "Set (UTC)": [_ago(t, now) for t in found["silenced_at"]],
        "Until (UTC)": [f"{pd.Timestamp(t).tz_convert('UTC'):%Y-%m-%d %H:%M:%S}" for t in found["silenced_until"]],
        "State": [state(r) for r in found.itertuples()]})


def _ago(t: Any, now: dt.datetime) -> str:
    return since_cell(t, now)


def _rollups_reach_further(rollups: pd.DataFrame, raw: pd.DataFrame) -> bool:
    """Whether the rollups hold data older than the raw samples read: on a young install they roll
    up only what the raw samples show in full (one hourly point, drawn as nothing), so the page
    reads the samples instead."""
    if raw.empty:
        return True
    first_raw = pd.to_datetime(raw["ts"], utc=True).min()
    first_rollup = pd.to_datetime(rollups["ts"], utc=True).min()
    # A bucket is stamped with its start: the one holding the first raw sample starts before it.
    bucket = pd.Timedelta(hours=1) if len(rollups) < 2 else pd.to_datetime(rollups["ts"], utc=True).diff().min()
    return bool(first_rollup + bucket <= first_raw)


def data_start(samples: pd.DataFrame, since: dt.datetime) -> dt.datetime:
    """Where a range's charts start: `since`, or the first sample read when the data starts later
    (a young install seen over 30 days), so the data is not a sliver at the right of an empty range."""
    if samples.empty:
        return since
    first = pd.to_datetime(samples["ts"], utc=True).min()
    return max(since, first.to_pydatetime())


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

# Pin sessions have one definition, sql/queries/stage_pin_sessions.sql (health/sessions.py runs it
# over a frame); the pages read them from the store through pin_history.
sessions_from_events = pin_sessions


@dataclass(frozen=True)
class Leadership:
    """Which server led a consumer over its raw samples: now, since when, and each change."""

    leader: str | None  # the latest sample's (None: no server led it then)
    since: pd.Timestamp  # the first sample of the trailing run with that leader
    from_start: bool  # that run reaches back to the first sample read: it began earlier, or is not known
    changes: list[tuple[pd.Timestamp, str | None, str | None]]  # (at, from, to), oldest first


def leadership(samples: pd.DataFrame) -> Leadership | None:
    """The consumer's leaders as its raw samples say (None: no sample names a leader, as on a
    server without clustering sampled by CONSUMER.LIST, or rollups read instead)."""
    if samples.empty or "leader" not in samples:
        return None
    names = [v if isinstance(v, str) and v else None for v in samples["leader"]]
    if not any(names):
        return None
    stamps = list(pd.to_datetime(samples["ts"], utc=True))
    changes = [(stamps[i], names[i - 1], names[i]) for i in range(1, len(names)) if names[i] != names[i - 1]]
    since = changes[-1][0] if changes else stamps[0]
    return Leadership(names[-1], since, not changes, changes)


def pin_switches(events: pd.DataFrame) -> pd.DataFrame:
    """The pins and unpins among pin history rows (deletions only end sessions)."""
    return events[events["event"] != "deleted"] if not events.empty else events


def drawn_sessions(sessions: pd.DataFrame) -> pd.DataFrame:
    """The sessions a timeline can draw: those with a known start."""
    return sessions[sessions["start_ts"].notna()] if not sessions.empty else sessions


SUMMARY_COLUMNS = KEY + ["switches", "hours_with_data", "switches_per_hour", "most_in_a_window",
                         "median_pin_seconds", "p95_pin_seconds", "ongoing_pin_seconds", "nopin_pending_seconds",
                         "nopin_age_weighted_seconds", "nopin_oldest_age_seconds", "flapping", "unpin_reasons"]
NOPIN_COLUMNS = ["nopin_pending_seconds", "nopin_age_weighted_seconds", "nopin_oldest_age_seconds"]


def pin_summary(pins: pd.DataFrame, nopin: pd.DataFrame, since: dt.datetime, until: dt.datetime) -> pd.DataFrame:
    """Per consumer, from pin_summary_range (`pins`) and nopin_pending (`nopin`): switches, switches
    per hour of the time with data (from the range's start, or the consumer's first pin data in it
    when that is later), the most switches in one health window (history), median and p95 pin
    duration with the ongoing pin at its duration so far, time with work pending and no pin; and
    `flapping`: the Fleet's verdict, judged by the collector over the last health window
    (health.rules.flapping_span). Flapping consumers first."""
    cols = SUMMARY_COLUMNS
    nopin = nopin.reindex(columns=KEY + NOPIN_COLUMNS)
    if pins.empty and nopin.empty:
        return pd.DataFrame(columns=cols)
    out = pins.merge(nopin, on=KEY, how="outer") if not nopin.empty else pins.reindex(columns=list(pins.columns) + NOPIN_COLUMNS)
    start = pd.to_datetime(out["first_ts"], utc=True).fillna(pd.Timestamp(since)).clip(lower=pd.Timestamp(since))
    out["hours_with_data"] = ((pd.Timestamp(until) - start).dt.total_seconds() / 3600).clip(lower=1 / 3600)
    out["switches"] = pd.to_numeric(out["switches"]).fillna(0).astype(int)
    out["most_in_a_window"] = pd.to_numeric(out["most_in_a_window"]).fillna(0).astype(int)
    out["switches_per_hour"] = out["switches"] / out["hours_with_data"]
    for column in ("median_pin_seconds", "p95_pin_seconds", "ongoing_pin_seconds", "nopin_oldest_age_seconds"):
        out[column] = pd.to_numeric(out[column]).astype(float)
    out["nopin_pending_seconds"] = pd.to_numeric(out["nopin_pending_seconds"]).fillna(0.0)
    out["nopin_age_weighted_seconds"] = pd.to_numeric(out["nopin_age_weighted_seconds"]).fillna(0.0)
    out["flapping"] = out["flapping"].fillna(False).astype(bool)
    out["unpin_reasons"] = [list(r) if isinstance(r, (list, np.ndarray)) else [] for r in out["unpin_reasons"]]
    out = out.sort_values(["flapping", "switches_per_hour", "stream", "consumer"],
                          ascending=[False, False, True, True])
    return out[cols].reset_index(drop=True)


IDLE_COLUMNS: list[str] = [*KEY, "start_ts", "end_ts", "ongoing"]  # sql/queries/pin_idle_range.sql


@dataclass
class PinHistory:
    events: pd.DataFrame  # pins, unpins and deletions in the range, newest last (at most ROWS_SHOWN)
    sessions: pd.DataFrame  # the sessions overlapping the range, newest end first (at most ROWS_SHOWN)
    summary: pd.DataFrame  # one row per consumer (SUMMARY_COLUMNS)
    source: str
    counts: dict[str, int] = field(default_factory=dict)  # "sessions": how many in the range in all
    gaps: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=GAP_COLUMNS))  # capture gaps touching the range
    actions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ACTION_COLUMNS))  # operator actions in it
    idle: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=IDLE_COLUMNS))  # PIN_IDLE stretches in it


EVERY_CONSUMER = {"account": None, "stream": None, "consumer": None}  # the pin queries over the fleet
ROWS_SHOWN = 2000  # sessions and events a page reads at most (newest first); the summary counts them all
# Time without a pin comes from raw samples (every consumer's, every cycle): over the range's newest
# hour at most, so a long range costs what the default one does. Older no-pin time would need rollups.
NOPIN_RANGE_LIMIT = dt.timedelta(hours=1)


def _sessions_read(sessions: pd.DataFrame) -> pd.DataFrame:
    """Sessions as pin_sessions_rows gives them, with UTC times, those a timeline can draw."""
    for column in ("start_ts", "end_ts"):
        sessions[column] = pd.to_datetime(sessions[column], utc=True)
    return drawn_sessions(sessions)


def pin_range(since: dt.datetime, until: dt.datetime, thresholds: Thresholds,
              ident: dict[str, Any] | None = None, search: str | None = None,
              reasons: tuple[str, ...] = ()) -> list[tuple[str, dict[str, Any]]]:
    """The staging of a page's pin reads: the range, the live tail after the pipeline's last run,
    its sessions, the pipeline's sessions of the range, and the consumers whose sessions are listed
    (sql/queries/stage_pin_*.sql)."""
    chosen: tuple[str, dict[str, Any]] = ("stage_pin_rows_chosen" if search or reasons else "stage_pin_rows_all", {})
    return [("set_pin_range", {"since": since, "until": until, "health_window": thresholds.health_window,
                               "search": search or None, "reasons": list(reasons), **(ident or EVERY_CONSUMER)}),
            ("set_sessions_until", {"until": until}), ("stage_pin_tail", {}), ("stage_pin_sessions", {}),
            ("stage_pin_sessions_range", {}), chosen]


def _source(run_until: object) -> str:
    if run_until is None or pd.isna(run_until):
        return "pin events (live)"
    return (f"pipeline pin_sessions up to {pd.Timestamp(run_until).tz_convert('UTC'):%Y-%m-%d %H:%M} UTC, "
            "then the pin events since (live)")


def pin_history(store: Store, since: dt.datetime, until: dt.datetime, thresholds: Thresholds,
                search: str | None = None, reasons: tuple[str, ...] = (), limit: int = ROWS_SHOWN) -> PinHistory:
    """The fleet's pin history over the range: what the pipeline rolled up, then the collector's
    live pin events since its last run, as one set of sessions up to now; per consumer its summary.
    The newest `limit` sessions and events of the consumers whose name holds `search` and that were
    unpinned for one of `reasons` (any, when empty); the summary of every consumer. With them, what
    the Pins page draws beside them: the capture gaps, the operator actions and the PIN_IDLE
    stretches of the range, read on the same connection (opening the store costs about what one of those queries does)."""
    rng = {"since": since, "until": until}
    chosen = {"search": search or None, "reasons": list(reasons), "limit": limit}
    try:
        sessions, events, pins, nopin, run, gaps, actions, idle = store.queries([
            ("pin_sessions_rows", {"limit": limit}), ("pin_events_newest", {**rng, **chosen}),
            ("pin_summary_range", {}), ("nopin_pending", {"since": max(since, until - NOPIN_RANGE_LIMIT), "until": until}),
            ("pin_range_run", {}), ("capture_gaps_range", rng), ("audit_actions_range", rng), ("pin_idle_range", rng)],
            stage=pin_range(since, until, thresholds, search=search, reasons=reasons))
    except StoreMissing:
        return PinHistory(pd.DataFrame(), pd.DataFrame(columns=SESSION_COLUMNS), pd.DataFrame(), "no store yet")
    summary = pin_summary(pins, nopin, since, until)
    return PinHistory(pin_switches(events).iloc[::-1].reset_index(drop=True), _sessions_read(sessions).reset_index(drop=True),
                      summary, _source(run.iloc[0]["run_until"]),
                      {"sessions": int(pins["sessions"].sum()) if not pins.empty else 0}, gaps, actions, idle)


def operator_actions(store: Store, since: dt.datetime, until: dt.datetime) -> pd.DataFrame:
    """Operator actions on consumers in the range (the pin timeline's overlay)."""
    try:
        return store.query("audit_actions_range", {"since": since, "until": until})
    except StoreMissing:
        return pd.DataFrame(columns=ACTION_COLUMNS)


def outside_chain_count(log: pd.DataFrame) -> int:
    """Rows of the log without a chain position that are not from before the chain (forged, or put in by hand)."""
    return int(log["outside_chain"].fillna(False).astype(bool).sum()) if "outside_chain" in log else 0


def audit(store: Store, limit: int = 500) -> pd.DataFrame:
    try:
        return store.query("audit_recent", {"limit": limit})
    except StoreMissing:
        return pd.DataFrame()


AUDIT_COLUMNS = ["ts", "actor", "origin", "action", *KEY, "group_name", "outcome", "parameters", "message",
                 "holder", "summary", "action_id"]
# The parameters naming the pin a consumer had when an action ran on it: the one an unpin dropped
# (else the one its operator confirmed), the one a drain found.
HELD_PIN = ("unpinned_id", "expect_pin", "pinned_before")


def pin_holders_of(store: Store, pins: list[str]) -> dict[str, tuple[str, str]]:
    """pin id -> (announced name, verification) of those of `pins` whose worker announced them."""
    if not pins:
        return {}
    try:
        found = store.query("pin_holders_of", {"pins": sorted(set(pins))})
    except StoreMissing:
        return {}
    return {p: (n, v) for p, n, v in zip(found["pin_id"], found["name"], found["verification"])}


def held_pins(log: pd.DataFrame) -> list[str]:
    """The pin ids the audit rows name as held when their action ran."""
    pins = []
    for p in log.get("parameters", []):
        got = _json(p)
        pins += [got[k] for k in HELD_PIN if isinstance(got, dict) and isinstance(got.get(k), str) and got[k]]
    return pins
_VERBS = {"unpin": "unpinned", "pause": "paused", "resume": "resumed", "drain": "drained", "sign-in": "signed in to",
          "silence": "silenced"}
# How a silence that was set ends later, by the collector's audit event: it was set all the same.
_ENDED = {"silence": ("expired", "ended")}


def _json(value: object) -> Any:
    if isinstance(value, (dict, list)):
        return value
    try:
        return json.loads(value) if isinstance(value, str) and value else {}
    except ValueError:
        return {"text": value}


def _message(reply: object) -> str:
    """What an outcome's reply says in words: jetwatch's own message, else the server's error."""
    if not isinstance(reply, dict):
        return ""
    for key in ("outcome_message", "message"):
        if isinstance(reply.get(key), str):
            return reply[key]
    error = reply.get("error")
    if isinstance(error, dict):
        return f"{error.get('description', '')} (error {error.get('err_code', error.get('code', '?'))})"
    return str(error) if error else ""


def audit_actions(log: pd.DataFrame, holders: dict[str, tuple[str, str]] | None = None) -> pd.DataFrame:
    """One row per action from the audit log's intent and outcome rows: when it was asked, who,
    what, on which consumer (the account the outcome names when the intent did not), how it ended
    and in words why; its parameters with what the outcome added (the pin an unpin dropped); for
    an unpin or a drain, who held the pin when it ran (`holder`, in the Consumer page's words, from
    `holders`: pin id -> (announced name, verification)).
    Rows put in around the chain (`outside_chain`) are no action of anyone's: left out."""
    holders = holders or {}
    if "outside_chain" in log:
        log = log[~log["outside_chain"].fillna(False).astype(bool)]
    if log.empty:
        return pd.DataFrame(columns=AUDIT_COLUMNS)
    log = log.copy()
    log["key"] = log["action_id"].where(log["action_id"].notna(), pd.Series(range(len(log)), index=log.index).astype(str))
    out = []
    for _, rows in log.groupby("key", sort=False):
        rows = rows.sort_values("ts")
        intent = rows[rows["phase"] == "intent"]
        ending = rows[rows["phase"] != "intent"]
        first, last = rows.iloc[0], (ending.iloc[-1] if not ending.empty else rows.iloc[-1])
        params: dict[str, Any] = {}
        for p in rows["parameters"]:
            got = _json(p)
            params.update(got if isinstance(got, dict) else {})
        account = next((a for a in list(ending["account"]) + list(intent["account"]) if isinstance(a, str) and a), "")
        outcome = last["outcome"] if not ending.empty else "no outcome recorded"
        message = _message(_json(last["reply"])) if not ending.empty else ""
        verb = _VERBS.get(str(first["action"]), str(first["action"]))
        held = next((params[k] for k in HELD_PIN if isinstance(params.get(k), str) and params[k]), None)
        holder = pin_holder(held, *holders.get(held, (None, None))) if held else ""
        done = outcome == "ok" or outcome in _ENDED.get(str(first["action"]), ())
        summary = (f"{first['actor']} {verb if done else 'tried to ' + str(first['action'])} "
                   f"{first['stream']} / {first['consumer']}"
                   + (f" (pin held by {holder})" if holder else "")
                   + f": {outcome}" + (f", {message}" if message and outcome != "ok" else ""))
        out.append({"ts": first["ts"], "actor": first["actor"], "origin": first["origin"], "action": first["action"],
                    "account": account, "stream": first["stream"], "consumer": first["consumer"],
                    "group_name": first["group_name"], "outcome": outcome, "parameters": params, "message": message,
                    "holder": holder, "summary": summary, "action_id": first["action_id"]})
    return pd.DataFrame(out, columns=AUDIT_COLUMNS).sort_values("ts", ascending=False).reset_index(drop=True)
