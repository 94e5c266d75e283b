"""Pins: every pin and unpin across the fleet, how long pins last, who flaps."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from jetwatch.dashboard import charts, ui
from jetwatch.store.database import StoreError

s = ui.settings()
st.title("Pins")

c1, c2, c3 = st.columns([2, 3, 3])
with c1:
    since, until = ui.time_range("pins_range")
reasons = c2.multiselect("Unpin reason", ["timeout", "admin", "inferred"], key="pins_reason")
search = c3.text_input("Consumer or stream", key="pins_search")

try:
    history = ui.pin_history(s.db, s.lock_timeout, since, until, ui.thresholds(s))
except StoreError as exc:  # held by another process for longer than --lock-timeout
    st.error(str(exc))
    st.stop()
events, sessions, summary = history.events, history.sessions, history.summary


def matches(frame: pd.DataFrame) -> pd.Series:
    if frame.empty or not search:
        return pd.Series(True, index=frame.index)
    needle = search.lower()
    return (frame["consumer"].str.lower().str.contains(needle, regex=False)
            | frame["stream"].str.lower().str.contains(needle, regex=False))


if not events.empty:
    events = events[matches(events)]
    if reasons:
        why = events["reason"].where(events["source"] != "inferred", "inferred")
        keep = events[(events["event"] == "unpinned") & why.isin(reasons)]
        consumers = keep[["account", "stream", "consumer"]].drop_duplicates()
        events = events.merge(consumers, on=["account", "stream", "consumer"], how="inner")
if not sessions.empty:
    sessions = sessions.merge(events[["account", "stream", "consumer"]].drop_duplicates(),
                              on=["account", "stream", "consumer"], how="inner") if not events.empty else sessions.iloc[0:0]
if not summary.empty:
    summary = summary[matches(summary)]

st.caption(f"Sessions from {history.source}; {len(events)} pin events in range")
st.plotly_chart(charts.pin_timeline(sessions, events, "Pin timeline"), key="pins_timeline")

st.markdown("#### Per consumer")
if summary.empty:
    st.caption("no pins in this range")
else:
    st.dataframe(summary.assign(flapping=summary["flapping"].map({True: "FLAPPING", False: ""})),
                 key="pins_summary", hide_index=True,
                 column_config={"switches_per_hour": st.column_config.NumberColumn(format="%.1f"),
                                "median_pin_seconds": st.column_config.NumberColumn(format="%.0f"),
                                "p95_pin_seconds": st.column_config.NumberColumn(format="%.0f"),
                                "nopin_pending_seconds": st.column_config.NumberColumn(format="%.0f")})

st.markdown("#### Switches")
if events.empty:
    st.caption("no pin events in this range")
else:
    table = events.sort_values("ts", ascending=False)[
        ["ts", "stream", "consumer", "group_name", "event", "pinned_id", "reason", "source"]]
    st.dataframe(table, key="pins_events", hide_index=True)
