"""The thin Streamlit layer shared by the pages: settings, the store, caching, small widgets."""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
from collections.abc import Callable
from typing import TypeVar

import pandas as pd
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from jetwatch.core import durations
from jetwatch.core.settings import Settings, resolve
from jetwatch.dashboard import data, stores, tables, url_state
from jetwatch.dashboard.text import (  # noqa: F401 (the pages import words from here)
    duration,
    pin_holder,
    pin_tail,
    short,
    since,
    utc,
    visible,
    visible_frame,
    visible_value,
)
from jetwatch.health import advice, cluster, silences, verdicts
from jetwatch.health.rules import Thresholds
from jetwatch.store.database import Store, StoreError

T = TypeVar("T")

RANGES = {"15 minutes": dt.timedelta(minutes=15), "1 hour": dt.timedelta(hours=1),
          "6 hours": dt.timedelta(hours=6), "24 hours": dt.timedelta(hours=24),
          "7 days": dt.timedelta(days=7), "30 days": dt.timedelta(days=30)}

# Cell backgrounds for the badge colours the verdict table uses (health/verdicts.py).
_CELL = {"red": "#ffd6d6", "orange": "#ffe3c2", "yellow": "#fff5b8", "blue": "#dbe8ff", "green": "#d9f2dc",
         "gray": "#eeeeee"}


def _colour(verdict: object) -> str:
    known = verdicts.BY_NAME.get(str(verdict))
    return known.colour if known else "gray"


def badge(verdict: str) -> str:
    """A verdict as a coloured Markdown badge (text, so it reads without colour too)."""
    return f":{_colour(verdict)}-badge[{verdict}]"


def verdict_cell_style(verdict: str) -> str:
    return f"background-color: {_CELL[_colour(verdict)]}; font-weight: 600"


def settings() -> Settings:
    """Settings come from the environment `jetwatch dashboard` hands to Streamlit."""
    return resolve(None, os.environ)


def store(s: Settings) -> Store:
    return Store(s.db, lock_timeout=s.lock_timeout)


def fleet_stores(s: Settings) -> list[stores.ClusterStore]:
    """The stores of the fleet with their clusters (read again every few seconds: a new store's
    collector claims it with its first cycle)."""
    return _identified(tuple(s.dbs), s.db, s.lock_timeout)


@st.cache_data(ttl=5.0, show_spinner=False)
def _identified(dbs: tuple[str, ...], db: str, lock_timeout: float) -> list[stores.ClusterStore]:
    return stores.identify(Settings({"dbs": dbs, "db": db, "lock_timeout": lock_timeout}))


def fleet_view(s: Settings, th: Thresholds) -> data.Fleet:
    """Every cluster's fleet in one, each store read once per its collector's cycle, the stores
    at once."""
    return stores.fleet(fleet_stores(s), lambda cs: cached_fleet(cs.path, s.lock_timeout, th), _in_this_script)


def fleet_collectors(s: Settings) -> data.Fleet:
    """Every cluster's collectors without their verdicts: what a page that reads no verdicts judges
    each cluster's staleness by (read again every couple of seconds)."""
    return stores.fleet(fleet_stores(s), lambda cs: _collectors(cs.path, s.lock_timeout), _in_this_script)


@st.cache_data(ttl=2.0, show_spinner=False)
def _collectors(db: str, lock_timeout: float) -> data.Fleet:
    return data.collectors(Store(db, lock_timeout=lock_timeout))


def cluster_outages(frame: pd.DataFrame, now: dt.datetime) -> None:
    """Each failure of the cluster once, above the table, with every consumer it stops, since
    when, the servers not answering and the next step: one cause, not as many unrelated rows."""
    bad = frame[frame["verdict"].isin([v.name for v in verdicts.CLUSTER_VERDICTS])]
    if bad.empty:
        return
    several = frame["cluster"].nunique() > 1 if "cluster" in frame else False
    rows = [{"cluster": r.get("cluster") if several else None, "account": r.get("account"), "stream": r.get("stream"),
             "consumer": r.get("consumer"), "verdict": r.get("verdict"), "findings": r.get("findings"),
             "since": None if r.get("since") is None or pd.isna(r.get("since")) else pd.Timestamp(r["since"]).timestamp()}
            for r in bad.to_dict("records")]
    for outage in cluster.outages(rows):
        when = since(pd.Timestamp(outage.since, unit="s", tz="UTC"), now) if outage.since is not None else "a time not known"
        step = advice.next_step(outage.verdict, {"servers": ", ".join(outage.servers)}, advice.Context())
        st.error(f"{md(cluster.outage_line(outage, when))}  \n**Next step:** {md(step)}")


def stale_banner(s: Settings, now: dt.datetime, view: data.Fleet | None = None) -> None:
    """On every page: whether its data is stale, judged per cluster (a cluster whose collector
    stopped is named, whatever the others' collectors do), since when, and what to do. `view`:
    the fleet the page read already, else its collectors are read (a store that cannot be read
    is said by the page's own read)."""
    try:
        view = view if view is not None else fleet_collectors(s)
        clusters = [cs.cluster for cs in fleet_stores(s)]
    except StoreError:
        return
    warning = data.staleness(view, now, s.stale_after, clusters, md)
    if warning:
        st.warning(warning, icon="⏱️")


def _in_this_script(read: Callable[[], T]) -> Callable[[], T]:
    """A read to run on another thread as part of this script run (its cache and its session),
    as Streamlit asks of threads a script starts."""
    ctx = get_script_run_ctx()

    def run() -> T:
        add_script_run_ctx(threading.current_thread(), ctx)
        return read()

    return run


def fleet_pin_history(s: Settings, span: dt.timedelta, th: Thresholds, search: str | None = None,
                      reasons: tuple[str, ...] = ()) -> data.PinHistory:
    return stores.pin_history(fleet_stores(s), lambda cs: pin_history(cs.path, s.lock_timeout, span, th, search, reasons))


def fleet_capture_gaps(s: Settings, start: dt.datetime, until: dt.datetime) -> pd.DataFrame:
    return stores.union(stores.each(fleet_stores(s), lambda cs: capture_gaps(cs.path, s.lock_timeout, start, until)))


def thresholds(s: Settings) -> Thresholds:
    return Thresholds.from_settings(s)


def cached_fleet(db: str, lock_timeout: float, th: Thresholds) -> data.Fleet:
    """The fleet with the verdicts the collector kept, read once per collector cycle however many
    viewers refresh."""
    store = Store(db, lock_timeout=lock_timeout)
    return _fleet_for_cycle(db, lock_timeout, th, data.last_cycle(store), int(data.utcnow().timestamp() // 30))


@st.cache_data(ttl=60.0, max_entries=8, show_spinner=False)
def _fleet_for_cycle(db: str, lock_timeout: float, th: Thresholds, cycle: object, half_minute: int) -> data.Fleet:
    # `half_minute` keeps "stale data" judgements fresh even when no cycle arrives.
    return data.fleet(Store(db, lock_timeout=lock_timeout), th)


def pin_history(db: str, lock_timeout: float, span: dt.timedelta, th: Thresholds, search: str | None = None,
                reasons: tuple[str, ...] = ()) -> data.PinHistory:
    """The fleet's pin history over the last `span`, read again after every write to the store (a
    collector cycle, a pin event between cycles) and at least every PIN_HISTORY_EVERY seconds (the
    ongoing pins' durations run on), however many viewers refresh: keyed on what repeats (the
    range's length, the viewer's search and reasons, and where the store's file stands), never on
    the time of the request. Looking where the file stands is a stat, not an open of the store."""
    return _pin_history_for_writes(db, lock_timeout, span, th, search or None, tuple(sorted(reasons)),
                                   Store(db).written(), int(data.utcnow().timestamp() // PIN_HISTORY_EVERY))


def cached_fleet_clear() -> None:
    """Forget the fleets read (each kept for its collector cycle): an operator's silence changes
    what they show before the next cycle does."""
    _fleet_for_cycle.clear()


PIN_HISTORY_EVERY = 10.0


@st.cache_data(ttl=60.0, max_entries=16, show_spinner=False)
def _pin_history_for_writes(db: str, lock_timeout: float, span: dt.timedelta, th: Thresholds, search: str | None,
                            reasons: tuple[str, ...], written: object, bucket: int) -> data.PinHistory:
    until = data.utcnow()
    return data.pin_history(Store(db, lock_timeout=lock_timeout), until - span, until, th, search, reasons)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&=^])")
# Where Streamlit's Markdown would make a link of bare text (GFM's autolink literals: `scheme://`,
# `www.`, `name@domain`), whatever the escapes around it: a word joiner, which shows as nothing,
# goes inside each such start.
_AUTOLINK_START = re.compile(r"(?i)(?<=:)(?=//)|(?<=\bwww)(?=\.)|(?=@)")
WORD_JOINER = "\u2060"


def md(text: object) -> str:
    """A server-supplied or user-typed string as literal text inside Markdown (which Streamlit
    also reads in captions, alerts, progress labels and every help tooltip), its bidi controls
    shown visibly: never a link, an image or markup, whoever wrote it."""
    one_line = re.sub(r"[\r\n]+", " ↵ ", visible(text))  # a newline could start a heading or a list
    return _MD_SPECIAL.sub(r"\\\1", _AUTOLINK_START.sub(WORD_JOINER, one_line))


def consumer_link(account: str | None, stream: str, consumer: str, cluster: str | None = None) -> str:
    return tables.consumer_link(account, stream, consumer, cluster)


def time_range(key: str, default: str = "1 hour") -> tuple[dt.datetime, dt.datetime]:
    """The range picked (kept in the URL as `range`), ending now."""
    choice = url_state.selectbox(st, "Time range", list(RANGES), key=key, param="range", default=default)
    until = data.utcnow()
    return until - RANGES[choice], until


# How far a collector's offset from the server's clock may be off (it is measured over a request):
# a time this little in the future is now.
CLOCK_SLACK = 5.0


def ago(ts: object, now: dt.datetime) -> str:
    """'4 min 12 s ago' ('never' when unknown), in the words of every other duration."""
    if ts is None or pd.isna(ts):
        return "never"
    seconds = (pd.Timestamp(now) - pd.Timestamp(ts)).total_seconds()
    if -CLOCK_SLACK < seconds < 0:  # a time moved onto the server's clock is only as exact as the offset measured
        seconds = 0.0
    return durations.ago(seconds)


SILENCED_NAMED = 5  # the Fleet's line above the table names this many silenced consumers


def silenced_caption(frame: pd.DataFrame, now: dt.datetime) -> None:
    """One line above the Fleet's table naming the consumers whose alerts a silence holds back (the
    table's Silenced column says it per row): their verdicts are in the table as judged."""
    if "silenced" not in frame:
        return
    held = frame[frame["silenced"].fillna(False).astype(bool)]
    if held.empty:
        return
    named = "; ".join(f"{visible(r['stream'])}/{visible(r['consumer'])} {visible(silences.words(r, now))}"
                      for _, r in held.head(SILENCED_NAMED).iterrows())
    more = f" (+{len(held) - SILENCED_NAMED} more)" if len(held) > SILENCED_NAMED else ""
    st.caption(md(f"🔕 Alerts held back for {len(held)} consumer{'s' if len(held) != 1 else ''} (verdicts shown as "
                  f"judged): {named}{more}"))


def silence_banner(row: pd.Series, now: dt.datetime) -> None:
    """Beside a consumer's verdict: the silence that holds back its alerts, if one holds."""
    if bool(row.get("silenced")):
        st.warning(md(f"Silenced: {visible(silences.words(row, now))}. Its alerts are held back until then, or until "
                      "the verdict turns into another; the verdict above stays as judged."), icon="🔕")


def findings(row: pd.Series, now: dt.datetime) -> None:
    """Each finding of a Fleet row with its reason (since when, for the verdicts about time) and
    its next step, in full (the table's Why and Next step columns are cut to their width); a row
    without findings (OK) says its verdict's reason and next step all the same."""
    context = tables.context(row)
    listed = row["findings"] if isinstance(row["findings"], list) else []
    if not listed and isinstance(row.get("reason"), str):
        listed = [{"verdict": row["verdict"], "reason": row["reason"], "numbers": {}}]
    for finding in listed:
        verdict, numbers = finding["verdict"], finding.get("numbers") or {}
        reason = advice.reason_since(verdict, finding["reason"], numbers, context, now)
        st.markdown(f"- **{md(verdict)}**: {md(reason)}  \n  **Next step:** {md(advice.next_step(verdict, numbers, context))}")


CONFIG_TITLES = {"max_ack_pending_reached": "max_ack_pending always reached", "max_waiting_reached":
                 "max_waiting reached: pulls refused", "ack_wait_short": "ack_wait shorter than the work",
                 "reset": "consumer reset", "pull_expires_past_pin_timeout": "pull expiry outlasts priority_timeout",
                 "min_ack_pending_unreachable": "min_ack_pending never reached",
                 "min_pending_without_overflow": "min_pending on a consumer that is not overflow: pulls refused",
                 "replica_not_current": "a replica not current: one more failure stops the consumer"}


def config_findings(row: pd.Series) -> None:
    """The consumer's config findings (health/config_findings.py) beside its verdict, each with its
    fix: settings that defeat themselves and resets. They never change the verdict."""
    listed = row.get("config_findings")
    if not isinstance(listed, list) or not listed:
        return
    st.markdown("**Configuration findings** (beside the verdict, not part of it)")
    for f in listed:
        title = CONFIG_TITLES.get(f.get("kind"), str(f.get("kind")))
        st.markdown(f"- **{md(title)}**: {md(f.get('reason', ''))}  \n  **Fix:** {md(f.get('fix', ''))}")


@st.cache_data(ttl=2.0, show_spinner=False)
def capture_gaps(db: str, lock_timeout: float, start: dt.datetime, until: dt.datetime) -> pd.DataFrame:
    return data.capture_gaps(Store(db, lock_timeout=lock_timeout), start, until)


def gap_warnings(gaps: pd.DataFrame) -> None:
    for text in data.gap_warnings(gaps):
        st.warning(md(text), icon="🕳️")


def collector_panel(collector: pd.DataFrame, now: dt.datetime, gaps: pd.DataFrame | None = None) -> None:
    """The collector's own health, in the sidebar of every page that reads live data; with
    `gaps`, the gaps in the advisory record of the last day."""
    with st.sidebar:
        if gaps is not None:
            gap_warnings(gaps)
        several = "cluster" in collector and collector["cluster"].nunique() > 1
        if not several:
            st.markdown("**Collector**")
            if collector.empty:
                st.caption("no collector has reported yet")
                return
            _collector(collector.iloc[0], now)
            return
        for cluster, rows in collector.groupby("cluster", sort=True):
            st.markdown(f"**Collector of cluster {md(cluster)}**")
            _collector(rows.iloc[0], now)


def known(value: object) -> bool:
    """A status field the collector has written: its NULLs (before its first cycle, a column it
    does not know yet) come back as None, NaN or pd.NA, and pd.NA has no truth value."""
    return value is not None and not pd.isna(value)


def cycle_words(c: pd.Series, now: dt.datetime) -> str:
    """The collector's last cycle in words; a collector that has written its status (an error)
    before finishing a cycle has counted nothing, which is not zero consumers."""
    via = f"via {c['sample_mode']}" if known(c.get("sample_mode")) else ""
    if not known(c["last_cycle_at"]):
        return (f"no cycle finished yet (started {ago(c.get('started_at'), now)}): consumers and streams unknown "
                f"until one does {via}").rstrip()
    took = f"took {float(c['cycle_seconds']):.2f} s" if known(c["cycle_seconds"]) else "duration unknown"
    counted = (f"{int(c['consumers'])} consumers in {int(c['streams'])} streams"
               if known(c["consumers"]) and known(c["streams"]) else "consumers and streams unknown")
    return f"last cycle {ago(c['last_cycle_at'], now)}, {took}; {counted} {via}".rstrip()


def _collector(c: pd.Series, now: dt.datetime) -> None:
    """One collector's health, as the sidebar shows it (called inside the sidebar)."""
    st.caption(cycle_words(c, now))
    if c["capture_mode"] == "core":
        st.warning("Advisories are captured with a plain subscription: pin events while the collector "
                   "is down are lost. Run `jetwatch setup` to create the capture stream.", icon="⚠️")
    else:
        lag = c["capture_pending"]
        behind = ("backlog unknown (the capture stream did not answer)" if not known(lag)
                  else "caught up" if known(c["capture_caught_up"]) and bool(c["capture_caught_up"])
                  else f"{int(lag)} advisories behind")
        st.caption(f"capture: {c['capture_mode']} stream, {behind}; last advisory {ago(c['last_event_at'], now)}")
    warning = c.get("capture_warning")
    if warning is not None and not pd.isna(warning):
        st.warning(md(warning), icon="⚠️")
    offset = c.get("clock_offset_seconds")
    if offset is not None and not pd.isna(offset) and abs(offset) > 1:
        st.warning(f"The server's clock is {durations.duration(abs(offset))} {'ahead of' if offset > 0 else 'behind'} the "
                   "collector's. Windows and pin inference follow the server's clock; fix the host's time "
                   "sync (NTP) all the same.", icon="🕒")
    if known(c["rejects_total"]) and int(c["rejects_total"]):
        st.caption(f"{int(c['rejects_total'])} rejected inputs (see the rejects table), last {ago(c['last_reject_at'], now)}")
    if c["last_error"] is not None and not pd.isna(c["last_error"]):
        st.error(f"{ago(c['last_error_at'], now)}: {md(c['last_error'])}")
