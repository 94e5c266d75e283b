"""Server-supplied and user-typed text made safe to show: no Streamlit here (charts use it too).

Names, pin ids, error texts and actors come from the server, from forgeable advisories or from a
form. Bidirectional control characters in them (U+202E turns `\u202eorders` into "sredro" on screen)
are shown as visible marks such as ⟨U+202E⟩, so a name can never disguise itself as another.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from jetwatch.core.durations import duration  # the pages import words from here
from jetwatch.core.pin_words import PIN_TAIL, pin_holder, pin_tail  # noqa: F401 (the pages import words from here)
from jetwatch.core.text import BIDI, visible


def visible_value(value: object) -> Any:
    """A JSON-like value with every string in it made visible (for st.json of server replies)."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible(k): visible_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [visible_value(v) for v in value]
    return value


def visible_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A table for display whose text cells and column names show bidi controls visibly."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            texts = out[col].map(lambda v: isinstance(v, str) and BIDI.search(v) is not None)
            if texts.any():  # rare: a big fleet pays one scan per text column, not a rewrite
                out.loc[texts, col] = out.loc[texts, col].map(visible)
    out.columns = [visible(c) for c in out.columns]
    return out


# -- Words for numbers and ids (one place, so every page says them the same way) --------------

TILE_CHARS = 12  # what a Streamlit metric tile shows at 1280 px without cutting it


def short(text: str, most: int = TILE_CHARS) -> str:
    """`text` as a tile holds it: cut with an ellipsis past `most` characters (the whole goes to
    the tile's help)."""
    return text if len(text) <= most else text[:most - 1] + "…"


def utc(ts: object) -> str:
    """An instant as absolute UTC, '2026-11-23 07:12:03 UTC' ('' when unknown)."""
    if ts is None or pd.isna(ts):
        return ""
    t = pd.Timestamp(ts)
    t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def since(ts: object, now: object) -> str:
    """'2026-11-23 07:12:03 UTC (12 min ago)': when something started, absolute and as an age."""
    if ts is None or pd.isna(ts):
        return ""
    t, n = pd.Timestamp(ts), pd.Timestamp(now)
    t = t.tz_localize("UTC") if t.tzinfo is None else t
    n = n.tz_localize("UTC") if n.tzinfo is None else n
    return f"{utc(t)} ({duration((n - t).total_seconds())} ago)"


def cell(value: object) -> object:
    """A table cell: missing values are empty, never the word None/nan/NaT."""
    if value is None:
        return ""
    try:
        return "" if pd.isna(value) else value
    except (TypeError, ValueError):  # lists, dicts: not scalars
        return value
