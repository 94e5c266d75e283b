"""Audit: every operator action in one line, who did it, to which consumer, and how it ended."""

from __future__ import annotations

import streamlit as st

from jetwatch.dashboard import data, stores, tables, ui, url_state
from jetwatch.store.database import StoreError

s = ui.settings()
st.title("Audit")
ui.stale_banner(s, data.utcnow())
try:
    actions, log = stores.audit_actions(ui.fleet_stores(s))  # every cluster's log, each its own chain
except StoreError as exc:  # held by another process for longer than --lock-timeout
    st.error(ui.md(exc))
    st.stop()
if log.empty:
    st.info("No operator actions recorded yet.")
    st.stop()

outside = data.outside_chain_count(log)
if outside:
    st.warning(f"{outside} audit row(s) outside the audit chain, written after it began: no action wrote them "
               "(they were put in by hand), so they are not listed below. `jetwatch audit verify` names them; "
               "they show in the raw rows with outside_chain true.", icon="⚠️")
c1, c2, c3, c4 = st.columns([2, 2, 2, 3])
actors = url_state.multiselect(c1, "Actor", sorted(actions["actor"].unique()), key="audit_actor", param="actors")
kinds = url_state.multiselect(c2, "Action", sorted(actions["action"].unique()), key="audit_action", param="actions")
outcomes = url_state.multiselect(c3, "Outcome", sorted(actions["outcome"].unique()), key="audit_outcome",
                                 param="outcomes")
search = url_state.text_input(c4, "Consumer or stream", key="audit_search", param="search")
shown = actions
if actors:
    shown = shown[shown["actor"].isin(actors)]
if kinds:
    shown = shown[shown["action"].isin(kinds)]
if outcomes:
    shown = shown[shown["outcome"].isin(outcomes)]
if search:
    needle = search.lower()
    shown = shown[shown["consumer"].str.lower().str.contains(needle, regex=False)
                  | shown["stream"].str.lower().str.contains(needle, regex=False)]
st.caption(f"{len(shown):,} of {len(actions):,} actions shown · one line per action (its intent and outcome rows)")
table = tables.build(tables.AUDIT, shown, data.utcnow())
st.dataframe(ui.visible_frame(table), key="audit_table", hide_index=True, width="stretch",
             column_config=tables.column_config(tables.AUDIT, table))
with st.expander("Raw audit rows (as chained)"):
    st.dataframe(ui.visible_frame(log), key="audit_raw", hide_index=True)
