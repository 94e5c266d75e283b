"""Pins: every pin and unpin across the fleet, how long pins last, who flaps."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from jetwatch.dashboard import charts, data, pin_moves, tables, ui, url_state
from jetwatch.health import rules
from jetwatch.store.database import StoreError

s = ui.settings()
st.title("Pins")
ui.stale_banner(s, data.utcnow())

c1, c2, c3 = st.columns([2, 3, 3])
with c1:
    since, until = ui.time_range("pins_range")
reasons = url_state.multiselect(c2, "Unpin reason", ["timeout", "admin", "inferred"], key="pins_reason", param="reasons")
search = url_state.text_input(c3, "Consumer or stream", key="pins_search", param="search")

th = ui.thresholds(s)
try:
    # The capture gaps and operator actions of the range come with it, read on the same connection.
    history = ui.fleet_pin_history(s, until - since, th, search or None, tuple(reasons or ()))
except StoreError as exc:  # held by another process for longer than --lock-timeout
    st.error(ui.md(exc))
    st.stop()
# The sessions and events come chosen by the search and the reasons; the summary holds every consumer.
events, sessions, summary, gaps, actions = history.events, history.sessions, history.summary, history.gaps, history.actions
ui.gap_warnings(gaps)


def matches(frame: pd.DataFrame) -> pd.Series:
    if frame.empty or not search:
        return pd.Series(True, index=frame.index)
    needle = search.lower()
    return (frame["consumer"].str.lower().str.contains(needle, regex=False)
            | frame["stream"].str.lower().str.contains(needle, regex=False))


if not summary.empty:
    summary = summary[matches(summary)]
    if reasons:
        summary = summary[[bool(set(r) & set(reasons)) for r in summary["unpin_reasons"]]]

st.caption(f"Sessions from {history.source}; {history.counts.get('sessions', len(sessions)):,} pins in range")
if not actions.empty:
    actions = actions[matches(actions)]
if len(ui.fleet_stores(s)) > 1:  # one lane per consumer of each cluster: its lane names its cluster
    def in_cluster(f: pd.DataFrame) -> pd.DataFrame:
        return f.assign(stream=f["cluster"].astype(str) + ": " + f["stream"].astype(str)) if not f.empty else f
    timeline = charts.pin_timeline(in_cluster(sessions), in_cluster(events), "Pin timeline",
                                   actions=in_cluster(actions), idle=in_cluster(history.idle))
else:
    timeline = charts.pin_timeline(sessions, events, "Pin timeline", actions=actions, idle=history.idle)
st.plotly_chart(timeline, key="pins_timeline")

now = until
st.markdown("#### Per consumer")
if summary.empty:
    st.caption("no pins in this range")
else:
    st.caption(f"**Flapping now** is the Fleet's verdict: {ui.md(rules.flapping_words(th))} (the health window), as the "
               "collector judged at its last cycle. *Most in one window* is history: the most pin switches within "
               f"any {ui.duration(th.health_window)} of the range. Median and 95th percentile count the ongoing "
               "pin at its duration so far."
               + (f" The *No pin* columns cover the range's newest {ui.duration(data.NOPIN_RANGE_LIMIT.total_seconds())} "
                  "(they come from raw samples)." if until - since > data.NOPIN_RANGE_LIMIT else ""))
    table = tables.build(tables.PIN_SUMMARY, summary, now)
    st.dataframe(ui.visible_frame(table), key="pins_summary", hide_index=True,
                 column_config=tables.column_config(tables.PIN_SUMMARY, table))

st.markdown("#### Sessions")
if sessions.empty:
    st.caption("no pin sessions in this range")
else:
    shown_sessions = sessions.sort_values("start_ts", ascending=False)
    table = tables.build(tables.SESSIONS, shown_sessions, now)
    st.caption("One row per pin: who held it (a pin id names one pin, not a client), from when to when, why it "
               "ended and how long the consumer then went without one; the pin still held runs to now (ongoing)."
               + (f" The newest {len(sessions):,} of {history.counts['sessions']:,}: search to narrow."
                  if history.counts.get("sessions", 0) > len(sessions) and not search and not reasons else ""))
    st.dataframe(ui.visible_frame(table), key="pins_sessions", hide_index=True,
                 column_config=tables.column_config(tables.SESSIONS, table))



@st.cache_data(ttl=s.refresh, show_spinner=False)
def _moves(paths: tuple[str, ...], since_: dt.datetime, until_: dt.datetime) -> pd.DataFrame:
    return pin_moves.fleet_moves(ui.fleet_stores(s), since_, until_, s)


st.markdown("#### Why pins moved")
why_since = max(since, until - pin_moves.RANGE_LIMIT)  # a long range: its newest day (every move is read)
try:
    moved = _moves(tuple(cs.path for cs in ui.fleet_stores(s)), why_since, until)
except StoreError as exc:
    st.error(ui.md(exc))
    moved = pd.DataFrame()
moved = moved[matches(moved)] if not moved.empty else moved
if moved.empty:
    st.caption("no pin moved in this range")
else:
    several = len(ui.fleet_stores(s)) > 1
    newest = f" (the range's newest {ui.duration(pin_moves.RANGE_LIMIT.total_seconds())})" if why_since > since else ""
    st.caption(f"{len(moved):,} pin moves in range{newest}: {ui.md(pin_moves.fleet_words(moved))}. Each move's cause is the "
               "first the stored facts show: an operator's unpin (named from the audit log, or the client the server's "
               "API audit named), a leader change, a deploy (the holder's version changed, or many groups re-pinned "
               "within --deploy-window), the holder's connection closed (CONNZ), or priority_timeout.")
    st.dataframe(ui.visible_frame(pin_moves.consumers_table(pin_moves.by_consumer(moved), several)),
                 key="pins_why_consumers", hide_index=True)
    st.dataframe(ui.visible_frame(pin_moves.switches_table(moved.head(pin_moves.ROWS_SHOWN), several)),
                 key="pins_why_switches", hide_index=True)
    if len(moved) > pin_moves.ROWS_SHOWN:
        st.caption(f"The newest {pin_moves.ROWS_SHOWN:,} moves of {len(moved):,}: search to narrow.")

with st.expander(f"Pin events ({len(events):,}{', the newest' if len(events) >= data.ROWS_SHOWN else ''})"):
    if events.empty:
        st.caption("no pin events in this range")
    else:
        unconfirmed = int((events["vouched"] == "unconfirmed").sum())
        if unconfirmed:
            st.caption(f"{unconfirmed} pin(s) marked **unconfirmed**: their advisory's pin id never showed up in "
                       "sampled state within the grace period. Either the pin was shorter than a sampling "
                       "interval, or the advisory was forged by a user allowed to publish on $JS.EVENT.> "
                       "(see docs/security.md, 'Pin history says what it can vouch for'). They are still counted.")
        table = tables.build(tables.PIN_EVENTS, events.sort_values("ts", ascending=False), now)
        st.dataframe(ui.visible_frame(table), key="pins_events", hide_index=True,
                     column_config=tables.column_config(tables.PIN_EVENTS, table))
