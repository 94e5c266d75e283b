"""Fleet: every consumer with its verdict, worst first. The page an on-call engineer opens."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from jetwatch.actions.operations import Target
from jetwatch.dashboard import data, operator, ui
from jetwatch.health.rules import VERDICT_NAMES
from jetwatch.store.database import StoreError

s = ui.settings()
store = ui.store(s)
st.title("Fleet")
operator.sidebar(s)
operator.dialog(s, store)
operator.show_result()


@st.fragment(run_every=s.refresh)
def live() -> None:
    now = data.utcnow()
    try:
        view = ui.cached_fleet(s.db, s.lock_timeout, ui.thresholds(s))
    except StoreError as exc:  # held by another process for longer than --lock-timeout
        st.error(str(exc))
        return
    ui.collector_panel(view.collector, now)
    warning = data.staleness(view, now, s.stale_after)
    as_of = view.as_of.strftime("%Y-%m-%d %H:%M:%S UTC") if view.as_of else "no data yet"
    st.caption(f"Data as of {as_of} · refreshes every {s.refresh:g}s · health window {s.health_window / 60:g} min")
    if warning:
        st.warning(warning, icon="⏱️")
    frame = view.consumers
    if frame.empty:
        st.info("No consumers yet. Once the collector has sampled the server, every consumer shows here.")
        return

    c1, c2, c3, c4 = st.columns([2, 2, 2, 3])
    streams = c1.multiselect("Stream", sorted(frame["stream"].unique()), key="fleet_stream")
    verdicts = c2.multiselect("Verdict", list(VERDICT_NAMES), key="fleet_verdict")
    policies = c3.multiselect("Priority policy", sorted(frame["priority_policy"].fillna("none").unique()),
                              key="fleet_policy")
    search = c4.text_input("Search consumer or stream", key="fleet_search")
    shown = frame
    if streams:
        shown = shown[shown["stream"].isin(streams)]
    if verdicts:
        shown = shown[shown["verdict"].isin(verdicts)]
    if policies:
        shown = shown[shown["priority_policy"].fillna("none").isin(policies)]
    if search:
        needle = search.lower()
        shown = shown[shown["consumer"].str.lower().str.contains(needle, regex=False)
                      | shown["stream"].str.lower().str.contains(needle, regex=False)]

    counts = frame["verdict"].value_counts()
    st.markdown("  ".join(f"{ui.badge(v)} {int(counts[v])}" for v in VERDICT_NAMES if v in counts))

    table = pd.DataFrame({
        "verdict": shown["verdict"],
        "since": [ui.ago(t, now) for t in shown["since"]],
        "stream": shown["stream"], "consumer": shown["consumer"], "reason": shown["reason"],
        "pending": shown["num_pending"],
        "ack pending": [f"{a:,.0f} / {'∞' if pd.isna(m) or m <= 0 else f'{m:,.0f}'}"
                        for a, m in zip(shown["num_ack_pending"], shown["max_ack_pending"])],
        "waiting": [f"{w:,.0f} / {'∞' if pd.isna(m) or m <= 0 else f'{m:,.0f}'}"
                    for w, m in zip(shown["num_waiting"], shown["max_waiting"])],
        "redeliveries/s": shown["redelivered_per_second"], "deliveries/s": shown["delivered_per_second"],
        "acks/s": shown["acked_per_second"], "policy": shown["priority_policy"].fillna("none"),
        "pinned": shown["pinned_id"],
        "pinned since": [ui.ago(t, now) if p is not None and not pd.isna(p) else "" for p, t in
                         zip(shown["pinned_id"], shown["pinned_ts"])],
        "open": [ui.consumer_link(a, st_, c) for a, st_, c in zip(shown["account"], shown["stream"], shown["consumer"])],
        "account": shown["account"],
    })
    st.caption(f"{len(shown):,} of {len(frame):,} consumers shown · select a row for its findings and actions")
    st.dataframe(
        table.style.map(ui.verdict_cell_style, subset=["verdict"]), key="fleet_table", hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="details"),
            "reason": st.column_config.TextColumn(width="large"),
            "redeliveries/s": st.column_config.NumberColumn(format="%.2f"),
            "deliveries/s": st.column_config.NumberColumn(format="%.2f"),
            "acks/s": st.column_config.NumberColumn(format="%.2f"),
        })
    selection = st.session_state.get("fleet_table")
    rows = selection.selection.rows if selection is not None and hasattr(selection, "selection") else []
    picked = shown.iloc[rows[0]] if rows and rows[0] < len(shown) else None
    chosen = None if picked is None else dict(picked[["account", "stream", "consumer", "verdict", "findings",
                                                      "priority_policy", "pin_group", "pinned_id"]])
    if chosen != st.session_state.get("fleet_selected"):
        st.session_state["fleet_selected"] = chosen
        st.rerun(scope="app")  # the action bar below lives outside this fragment


live()


@st.fragment(run_every=s.refresh)
def recent_changes() -> None:
    """The last verdict transitions of the fleet, newest first."""
    try:
        changes = data.recent_changes(store, 20)
    except StoreError as exc:
        st.error(str(exc))
        return
    now = data.utcnow()
    with st.expander(f"Recent verdict changes ({len(changes)})", expanded=False):
        if changes.empty:
            st.caption("none yet: the collector records each transition after its cycle")
            return
        st.dataframe(pd.DataFrame({
            "when": [ui.ago(t, now) for t in changes["ts"]], "stream": changes["stream"],
            "consumer": changes["consumer"], "from": changes["from_verdict"].fillna("(new)"),
            "to": changes["to_verdict"], "reason": changes["reason"], "account": changes["account"],
        }).style.map(ui.verdict_cell_style, subset=["to"]), key="fleet_changes", hide_index=True, width="stretch")


recent_changes()

selected = st.session_state.get("fleet_selected")
if selected:
    st.markdown(f"**{ui.md(selected['stream'])} / {ui.md(selected['consumer'])}**: {ui.badge(selected['verdict'])}  "
                f"[details]({ui.consumer_link(selected['account'], selected['stream'], selected['consumer'])})")
    for finding in selected["findings"] or []:
        st.markdown(f"- {finding['verdict']}: {ui.md(finding['reason'])}")
    if operator.operator(s) and selected["priority_policy"] == "pinned_client":
        target = Target(selected["account"], selected["stream"], selected["consumer"], selected["pin_group"])
        st.button("Unpin", key="fleet_unpin", on_click=operator.request, args=("unpin", target),
                  disabled=not isinstance(selected["pinned_id"], str), help="nothing is pinned"
                  if not isinstance(selected["pinned_id"], str) else None)
