"""Entry point: routes to the pages, nothing else. Run with `jetwatch dashboard`."""

import streamlit as st

st.set_page_config(page_title="jetwatch", layout="wide")
st.navigation([
    st.Page("views/fleet.py", title="Fleet", url_path="fleet", default=True),
    st.Page("views/consumer.py", title="Consumer", url_path="consumer"),
    st.Page("views/pins.py", title="Pins", url_path="pins"),
    st.Page("views/audit.py", title="Audit", url_path="audit"),
]).run()
