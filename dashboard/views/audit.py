"""Audit: every operator action, who did it, and what the server said."""

from __future__ import annotations

import streamlit as st

from dashboard import data, ui

s = ui.settings()
st.title("Audit")
log = data.audit(ui.store(s))
if log.empty:
    st.info("No operator actions recorded yet.")
else:
    st.dataframe(log, key="audit_table", hide_index=True)
