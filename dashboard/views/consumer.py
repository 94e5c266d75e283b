"""Consumer: one consumer's gauges, rates, pins, config history and advisories."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

import datetime as dt

from jetwatch.actions.operations import THEN_CHOICES, Target
from jetwatch.dashboard import charts, data, operator, ui
from jetwatch.store.database import StoreError, StoreMissing

s = ui.settings()
store = ui.store(s)
params = st.query_params

st.title("Consumer")
operator.sidebar(s)
try:
    latest = store.query("fleet_latest")
except StoreMissing as exc:
    st.info(str(exc))
    st.stop()
except StoreError as exc:  # held by another process for longer than --lock-timeout
    st.error(str(exc))
    st.stop()

if latest.empty:
    st.info("No consumers yet: the collector has not sampled the server.")
    st.stop()

options = list(zip(latest["account"], latest["stream"], latest["consumer"]))
wanted = (params.get("account"), params.get("stream"), params.get("consumer"))
if wanted[1] and wanted[2] and not wanted[0]:
    wanted = next((o for o in options if o[1:] == wanted[1:]), wanted)
if wanted not in options and all(wanted[1:]):
    options.append(wanted)  # a consumer no longer live: its history is still worth seeing
index = options.index(wanted) if wanted in options else 0
choice = st.selectbox("Consumer", options, index=index, key="consumer_pick",
                      format_func=lambda o: f"{o[1]} / {o[2]}  ({o[0]})")
account, stream, consumer = choice
st.query_params.update({"account": account, "stream": stream, "consumer": consumer})

since, until = ui.time_range("consumer_range")
detail = data.consumer_detail(store, account, stream, consumer, since, until)
now = data.utcnow()

st.subheader(f"{ui.md(stream)} / {ui.md(consumer)}")
if detail.latest.empty:
    st.warning("This consumer is not in the latest sample: it was deleted, or is filtered out.")
    max_ack = max_wait = None
else:
    row = detail.latest.iloc[0]
    max_ack, max_wait = row["max_ack_pending"], row["max_waiting"]
    fleet = ui.cached_fleet(s.db, s.lock_timeout, ui.thresholds(s)).consumers
    mine = fleet[(fleet["account"] == account) & (fleet["stream"] == stream) & (fleet["consumer"] == consumer)]
    if not mine.empty:
        v = mine.iloc[0]
        st.markdown(f"### {ui.badge(v['verdict'])}")
        for finding in v["findings"] if isinstance(v["findings"], list) else []:
            numbers = ", ".join(f"{k} {val}" for k, val in finding["numbers"].items())
            st.markdown(f"- **{finding['verdict']}**: {ui.md(finding['reason'])}" + (f" ({ui.md(numbers)})" if numbers else ""))
    cols = st.columns(5)
    cols[0].metric("pending", f"{row['num_pending']:,}")
    cols[1].metric("ack pending", f"{row['num_ack_pending']:,}")
    cols[2].metric("waiting", f"{row['num_waiting']:,}")
    cols[3].metric("redelivered (gauge)", f"{row['num_redelivered']:,}")
    pinned = row["pinned_id"] if row["pinned_id"] is not None and not pd.isna(row["pinned_id"]) else None
    cols[4].metric("pinned", pinned or "nobody",
                   help=f"since {ui.ago(row['pinned_ts'], now)}" if pinned else None)
    if row["paused"]:
        st.info(f"Paused until {row['pause_until']}")

    operator.dialog(s, store)
    operator.show_result()
    result = st.session_state.get(operator.RESULT)

    @st.fragment(run_every=1.0)
    def follow() -> None:
        if result is not None and result.ok and result.action == "unpin" and result.target.consumer == consumer:
            fresh = operator.new_pin_after(store, result)
            st.caption(f"new pin: {fresh.iloc[-1]['pinned_id']}" if not fresh.empty else "waiting for the new pin...")
        operator.drain_progress(store, stream, consumer)

    follow()
    if operator.operator(s):
        target = Target(account, stream, consumer, row["pin_group"] if isinstance(row["pin_group"], str) else None)
        st.markdown("#### Actions")
        a1, a2, a3, a4 = st.columns(4)
        if row["priority_policy"] == "pinned_client":
            a1.button("Unpin", key="action_unpin", on_click=operator.request, args=("unpin", target))
        minutes = a2.number_input("Pause for (minutes)", min_value=1, max_value=10080, value=15, key="pause_minutes")
        a2.button("Pause", key="action_pause", on_click=lambda: operator.request(
            "pause", target, until=data.utcnow() + dt.timedelta(minutes=minutes)))
        a3.button("Resume", key="action_resume", on_click=operator.request, args=("resume", target))
        then = a4.selectbox("Drain, then", THEN_CHOICES, key="drain_then")
        timeout_s = a4.number_input("Drain timeout (s)", min_value=1, max_value=3600, value=60, key="drain_timeout")
        stay_minutes = 60
        if then == "stay-paused":
            stay_minutes = a4.number_input("Stay paused for (minutes)", min_value=1, value=60, key="drain_stay")
        a4.button("Drain", key="action_drain", on_click=lambda: operator.request(
            "drain", target, then=then, timeout_s=timeout_s,
            stay_until=data.utcnow() + dt.timedelta(minutes=stay_minutes) if then == "stay-paused" else None))

st.caption(f"Showing {detail.source}")
band = data.verdict_band(store, account, stream, consumer, since, until)
st.plotly_chart(charts.consumer_gauges(detail.samples, max_ack, max_wait, band=band), key="consumer_gauges")
if not band.empty:
    st.caption("Behind the charts: the verdicts the collector judged, " + " → ".join(
        f"{v} {ui.ago(t, now)}" for v, t in zip(band["verdict"].tail(4), band["start"].tail(4))))
if detail.source == "raw samples":
    filtered = bool(not detail.latest.empty and detail.latest["filtered"].fillna(False).astype(bool).iloc[0])
    st.plotly_chart(charts.consumer_rates(data.rates(detail.samples, filtered), "Rates from sequence deltas"),
                    key="consumer_rates")
sessions = data.drawn_sessions(data.sessions_from_events(detail.pins, until))
st.plotly_chart(charts.pin_timeline(sessions, data.pin_switches(detail.pins), "Pin timeline"), key="consumer_pins")

st.markdown("#### Configuration")
if detail.configs.empty:
    st.caption("no configuration recorded")
else:
    current = detail.configs.iloc[0]
    st.json(json.loads(current["config_json"]) if isinstance(current["config_json"], str) else current["config_json"],
            expanded=False)
    st.dataframe(detail.configs.drop(columns=["config_json"]), key="consumer_config_history", hide_index=True)

st.markdown("#### Recent advisories")
if detail.advisories.empty:
    st.caption("none in this range")
else:
    st.dataframe(detail.advisories.drop(columns=["raw"]), key="consumer_advisories", hide_index=True)
