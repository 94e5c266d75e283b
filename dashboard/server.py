"""The dashboard's web server: Streamlit serving app.py, behind jetwatch's host guard, with the
routes that set and clear the operator session cookie. `jetwatch dashboard` runs
`streamlit run` on this file; Streamlit finds the `app` below and serves it with uvicorn."""

import os
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from jetwatch.core.settings import resolve
from jetwatch.dashboard import gate

_settings = resolve(None, os.environ)
app = st.App(str(Path(__file__).resolve().parent / "app.py"), routes=gate.routes(_settings),
             middleware=[Middleware(gate.HostGuard, allowed=gate.allowed_hosts(_settings))])
