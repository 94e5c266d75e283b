"""Fleet: every consumer with its verdict, worst first. The page an on-call engineer opens."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from jetwatch.actions.operations import Target
from jetwatch.dashboard import data, fleet_filters, operator, selection, stores, tables, ui, url_state
from jetwatch.demo.script import SCRIPT
from jetwatch.health import verdicts
from jetwatch.store.database import StoreError

GAPS_SHOWN = dt.timedelta(days=1)  # the sidebar warns of gaps in the advisory record this recent
s = ui.settings()
store = ui.store(s)
st.title("Fleet")
operator.sidebar(s)
operator.dialog(s, store)
if s.demo:  # beside `jetwatch up`'s demo: what it does to each consumer, to tell whether a verdict is right
    with st.expander("What this demo scripts", expanded=False):  # wrapped text: never cut at 1280 px
        for d in SCRIPT:
            st.markdown(f"**{ui.md(d.stream)} / {ui.md(d.consumer)}**: {ui.md(d.trouble)}.  \n"
                        f"*What jetwatch should say:* {ui.md(d.expect)}")


@st.fragment(run_every=s.refresh)
def live() -> None:
    now = data.utcnow()
    try:
        operator.show_result({cs.cluster: cs.store for cs in ui.fleet_stores(s)})  # each naming its consumer
        view = ui.fleet_view(s, ui.thresholds(s))
        gaps = ui.fleet_capture_gaps(s, now - GAPS_SHOWN, now)
    except StoreError as exc:  # held by another process for longer than --lock-timeout
        st.error(ui.md(exc))
        return
    ui.collector_panel(view.collector, now, gaps)
    as_of = view.as_of.strftime("%Y-%m-%d %H:%M:%S UTC") if view.as_of else "no data yet"
    st.caption(f"Data as of {as_of} · refreshes every {ui.duration(s.refresh)} · health window {ui.duration(s.health_window)}")
    ui.stale_banner(s, now, view)
    frame = view.consumers
    if frame.empty:
        st.info("No consumers yet. Once the collector has sampled the server, every consumer shows here.")
        return
    ui.cluster_outages(frame, now)

    clusters = sorted(frame["cluster"].unique())
    # Each filter is kept in the URL: a link shares the filtered Fleet, a reload keeps it.
    chosen_clusters = (url_state.multiselect(st, "Cluster", clusters, key="fleet_cluster", param="clusters")
                       if len(clusters) > 1 else [])
    c1, c2, c3, c4 = st.columns([2, 2, 2, 3])
    wanted = fleet_filters.FleetFilter(
        streams=tuple(url_state.multiselect(c1, "Stream", sorted(frame["stream"].unique()), key="fleet_stream",
                                            param="streams")),
        verdicts=tuple(url_state.multiselect(c2, "Verdict", list(verdicts.VERDICT_NAMES), key="fleet_verdict",
                                             param="verdicts")),
        policies=tuple(url_state.multiselect(c3, "Priority policy", fleet_filters.policies(frame), key="fleet_policy",
                                             param="policies")),
        search=url_state.text_input(c4, "Search consumer or stream", key="fleet_search", param="search"),
        clusters=tuple(chosen_clusters))
    shown = wanted.apply(frame)

    counts = shown["verdict"].value_counts()  # the counts follow the filters
    st.markdown("  ".join(f"{ui.badge(v)} {int(counts[v])}" for v in verdicts.VERDICT_NAMES if v in counts)
                or "no consumer matches the filters")
    ui.silenced_caption(shown, now)

    size = int(st.session_state.get("fleet_page_size", fleet_filters.PAGE_SIZES[0]))
    pages = fleet_filters.pages(len(shown), size)
    number = min(int(st.session_state.get("fleet_page", 1)), pages)
    if "fleet_page" in st.session_state:
        st.session_state["fleet_page"] = number  # fewer pages after a filter: the last one, not an error
    page = fleet_filters.page_of(shown, number, size)
    keys = selection.keys_of(page)
    widget = selection.widget_key(keys)
    selection.follow(st.session_state, widget, keys)  # before drawing: the marker and the panel follow a click
    chosen = st.session_state.get(selection.SELECTED)
    columns = tables.fleet_columns(s.health_window)
    table = tables.fleet_table(page, now, columns)
    table.insert(0, " ", ["▶" if k == chosen else "" for k in keys])
    whole = f"{len(shown):,} of {len(frame):,} consumers shown" if pages == 1 else (
        f"{len(page):,} of {len(shown):,} matching consumers shown (page {number:,} of {pages:,}; "
        f"{len(frame):,} in all)")
    st.caption(f"{whole} · select a row for its findings and actions, or open a consumer by its name")
    st.dataframe(
        ui.visible_frame(table).style.map(ui.verdict_cell_style, subset=["Verdict"]), key=widget, hide_index=True,
        width="stretch", on_select="rerun", selection_mode="single-row",
        selection_default=selection.default(keys, chosen),
        column_config={" ": st.column_config.TextColumn(" ", width=28, help="the selected consumer", pinned=True),
                       **tables.column_config(columns, table)})
    if pages > 1:
        p1, p2, _ = st.columns([2, 2, 5])
        p1.number_input(f"Page (of {pages:,})", min_value=1, max_value=pages, step=1, key="fleet_page")
        p2.selectbox("Rows per page", fleet_filters.PAGE_SIZES, key="fleet_page_size")
    selected(frame, chosen, now)


def selected(frame: pd.DataFrame, chosen: selection.Key | None, now: dt.datetime) -> None:
    """The selected consumer's findings, next steps and actions, from the same read as the table
    above (so the same numbers as its row), refreshed with it."""
    if not chosen or len(chosen) != 4:
        return  # nothing chosen, or a selection kept from before clusters: chosen again
    several = len(ui.fleet_stores(s)) > 1
    current = selection.row_of(frame, chosen)
    account, stream_name, consumer_name, cluster = chosen
    if current is None:
        st.markdown(f"**{ui.md(stream_name)} / {ui.md(consumer_name)}**: no longer in the latest sample")
    else:
        st.markdown(f"**{ui.md(stream_name)} / {ui.md(consumer_name)}**"
                    f"{'' if account is None else ' (account ' + ui.md(account) + ')'}"
                    f"{' in cluster ' + ui.md(cluster) if several else ''}: {ui.badge(current['verdict'])} "
                    f"since {ui.md(ui.since(current['since'], now))}  "
                    f"[details]({ui.consumer_link(account, stream_name, consumer_name, cluster)})")
        ui.silence_banner(current, now)
        ui.findings(current, now)
    st.button("Clear selection", key="fleet_clear", on_click=selection.clear, args=(st.session_state,))
    if current is not None and operator.operator(s) and current["priority_policy"] == "pinned_client":
        pinned = current["pinned_id"] if isinstance(current["pinned_id"], str) else None
        target = Target(account, stream_name, consumer_name,
                        current["pin_group"] if isinstance(current["pin_group"], str) else None)
        st.button("Unpin", key="fleet_unpin", on_click=operator.request, args=("unpin", target, cluster),
                  kwargs={"expect_pin": pinned}, disabled=pinned is None,
                  help=None if pinned else "nothing is pinned")
    if st.session_state.pop(operator.FRESH, False):
        st.rerun(scope="app")  # the confirmation dialog lives outside this fragment


live()


@st.fragment(run_every=s.refresh)
def recent_changes() -> None:
    """The last verdict transitions of the fleet, newest first."""
    try:
        changes = stores.recent_changes(ui.fleet_stores(s), 20)
    except StoreError as exc:
        st.error(ui.md(exc))
        return
    now = data.utcnow()
    with st.expander(f"Recent verdict changes ({len(changes)})", expanded=False):
        if changes.empty:
            st.caption("none yet: the collector records each transition after its cycle")
            return
        table = tables.build(tables.CHANGES, changes, now)
        st.dataframe(ui.visible_frame(table).style.map(ui.verdict_cell_style, subset=["To"]), key="fleet_changes",
                     hide_index=True, width="stretch", column_config=tables.column_config(tables.CHANGES, table))


recent_changes()
