"""Audit: every operator action, who did it, and what the server said."""

from __future__ import annotations

import streamlit as st

from jetwatch.dashboard import data, ui
from jetwatch.store.database import StoreError

s = ui.settings()
st.title("Audit")
try:
    log = data.audit(ui.store(s))
except StoreError as exc:  # held by another process for longer than --lock-timeout
    st.error(str(exc))
    st.stop()
if log.empty:
    st.info("No operator actions recorded yet.")
else:
    st.dataframe(log, key="audit_table", hide_index=True)
