"""The thin Streamlit layer shared by the pages: settings, the store, caching, small widgets."""

from __future__ import annotations

import datetime as dt
import os
import re
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from jetwatch.dashboard import data
from jetwatch.health import rules
from jetwatch.health.rules import Thresholds
from jetwatch.core.settings import Settings, resolve
from jetwatch.store.database import Store

RANGES = {"15 minutes": dt.timedelta(minutes=15), "1 hour": dt.timedelta(hours=1),
          "6 hours": dt.timedelta(hours=6), "24 hours": dt.timedelta(hours=24),
          "7 days": dt.timedelta(days=7), "30 days": dt.timedelta(days=30)}

# Cell backgrounds for the badge colours the verdict table uses (health.rules.VERDICTS).
_CELL = {"red": "#ffd6d6", "orange": "#ffe3c2", "yellow": "#fff5b8", "blue": "#dbe8ff", "green": "#d9f2dc",
         "gray": "#eeeeee"}


def _colour(verdict: object) -> str:
    known = rules.BY_NAME.get(str(verdict))
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


@st.cache_data(ttl=2.0, show_spinner=False)
def pin_history(db: str, lock_timeout: float, since: dt.datetime, until: dt.datetime, th: Thresholds) -> data.PinHistory:
    return data.pin_history(Store(db, lock_timeout=lock_timeout), since, until, th)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")


def md(text: object) -> str:
    """A server-supplied name as literal text inside Markdown."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def consumer_link(account: str, stream: str, consumer: str) -> str:
    return "consumer?" + urlencode({"account": account, "stream": stream, "consumer": consumer})


def time_range(key: str, default: str = "1 hour") -> tuple[dt.datetime, dt.datetime]:
    choice = st.selectbox("Time range", list(RANGES), index=list(RANGES).index(default), key=key)
    until = data.utcnow()
    return until - RANGES[choice], until


def ago(ts: object, now: dt.datetime) -> str:
    if ts is None or pd.isna(ts):
        return "never"
    seconds = (pd.Timestamp(now) - pd.Timestamp(ts)).total_seconds()
    if seconds < 90:
        return f"{seconds:.0f}s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def collector_panel(collector: pd.DataFrame, now: dt.datetime) -> None:
    """The collector's own health, in the sidebar of every page that reads live data."""
    with st.sidebar:
        st.markdown("**Collector**")
        if collector.empty:
            st.caption("no collector has reported yet")
            return
        c = collector.iloc[0]
        st.caption(f"last cycle {ago(c['last_cycle_at'], now)}, took {c['cycle_seconds'] or 0:.2f}s; "
                   f"{int(c['consumers'] or 0)} consumers in {int(c['streams'] or 0)} streams via {c['sample_mode']}")
        if c["capture_mode"] == "core":
            st.warning("Advisories are captured with a plain subscription: pin events while the collector "
                       "is down are lost. Run `jetwatch setup` to create the capture stream.", icon="⚠️")
        else:
            lag = c["capture_pending"]
            st.caption(f"capture: durable stream, {'caught up' if c['capture_caught_up'] else f'{lag} advisories behind'}; "
                       f"last advisory {ago(c['last_event_at'], now)}")
        if int(c["rejects_total"] or 0):
            st.caption(f"{int(c['rejects_total'])} rejected inputs (see the rejects table), last {ago(c['last_reject_at'], now)}")
        if c["last_error"] is not None and not pd.isna(c["last_error"]):
            st.error(f"{ago(c['last_error_at'], now)}: {c['last_error']}")
