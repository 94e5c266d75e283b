"""Filters, searches and time ranges kept in the page's URL: a link shares the view it shows, and
a reload (a new session) comes back to it.

Each widget is keyed as before; its value starts from the URL's query parameter when the session
has none yet (a link, a reload), only among the options there are now (a stream gone since the
link was made is dropped, not an error), and every run writes the value back to the URL (left
out when it is the default, so a plain page keeps a plain address).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st


def _write(param: str, value: str | list[str]) -> None:
    """Set or remove one query parameter, only when it changes (each write reaches the browser)."""
    now = st.query_params.get_all(param)
    wanted = value if isinstance(value, list) else ([value] if value else [])
    if now == wanted:
        return
    if wanted:
        st.query_params[param] = wanted if isinstance(value, list) else value
    else:
        del st.query_params[param]


def multiselect(where: Any, label: str, options: Sequence[str], key: str, param: str, **kwargs: Any) -> list[str]:
    """A multiselect whose choice is the URL's `param` (repeated: ?verdict=STALLED&verdict=LAGGING)."""
    known = list(options)
    chosen = st.session_state[key] if key in st.session_state else st.query_params.get_all(param)
    st.session_state[key] = [v for v in chosen if v in known]  # only options there are now
    value = list(where.multiselect(label, known, key=key, **kwargs))
    _write(param, value)
    return value


def text_input(where: Any, label: str, key: str, param: str, **kwargs: Any) -> str:
    """A text input whose text is the URL's `param`."""
    if key not in st.session_state:
        st.session_state[key] = st.query_params.get(param, "")
    value = where.text_input(label, key=key, **kwargs)
    _write(param, value)
    return value


def selectbox(where: Any, label: str, options: Sequence[str], key: str, param: str, default: str,
              **kwargs: Any) -> str:
    """A selectbox whose choice is the URL's `param` (left out of the URL while it is `default`)."""
    known = list(options)
    if key not in st.session_state or st.session_state[key] not in known:
        wanted = st.query_params.get(param)
        st.session_state[key] = wanted if wanted in known else default
    value = where.selectbox(label, known, key=key, **kwargs)
    _write(param, "" if value == default else value)
    return value
