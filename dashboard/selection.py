"""The Fleet's selection: a consumer, never a row number.

Streamlit's table selection is a list of row positions. Positions mean nothing once the table is
filtered, searched, re-sorted by a verdict change or refreshed, so the page keeps the selected
consumer's key (account, stream, consumer) instead, and reads a position only in the table it
was made in: the table widget's key is derived from the exact ordered list of consumers it shows,
so a new list is a new widget with no selection, and a position is always looked up in the list
it was clicked in. The lists of the last few tables drawn are kept: a table stays on screen, and
clickable, until the run that replaces it has reached the browser, which may be more than one run
later (a search's run, then a refresh queued behind it). No Streamlit import here: the session
state is passed in, so this is tested with plain pytest as well as through the page.
"""

from __future__ import annotations

import hashlib
from collections.abc import MutableMapping
from typing import Any, TypedDict

import pandas as pd

SELECTED = "fleet_selected_key"  # (account, stream, consumer, cluster) of the selected consumer
_SEEN = "fleet_selection_seen"  # [(widget key, rows, keys)] of the last runs' tables, oldest first
TABLES_KEPT = 4  # tables whose clicks are still read: a click lands a run or two behind the page's rerun

Key = tuple[str | None, str, str, str | None]
# Streamlit's session state (keyed by name or number), or a dict in the tests.
State = MutableMapping[str | int, Any]


class Selection(TypedDict, total=False):
    """A table's selection as st.dataframe takes it (Streamlit's DataframeSelectionStateInput)."""

    rows: list[int]
    columns: list[str]
    cells: list[tuple[int, str]]


class Default(TypedDict):
    selection: Selection


def _text(value: object) -> str | None:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def keys_of(frame: pd.DataFrame) -> list[Key]:
    """The consumer key of each row, in the table's order. The fleet has one row per (account,
    stream, consumer) in each cluster: a consumer named alike in two clusters is two keys."""
    clusters = frame["cluster"] if "cluster" in frame else [None] * len(frame)
    return [(_text(a), str(s), str(c), _text(cl))
            for a, s, c, cl in zip(frame["account"], frame["stream"], frame["consumer"], clusters)]


def widget_key(keys: list[Key]) -> str:
    """A table widget key that changes whenever the shown consumers or their order change."""
    return "fleet_table_" + hashlib.sha256(repr(keys).encode()).hexdigest()[:16]


def _rows(state: State, widget: str) -> list[int]:
    value = state.get(widget)
    if value is None:
        return []
    sel = value.get("selection") if isinstance(value, dict) else getattr(value, "selection", None)
    if sel is None:
        return []
    rows = sel.get("rows") if isinstance(sel, dict) else getattr(sel, "rows", None)
    return list(rows or [])


def follow(state: State, widget: str, keys: list[Key]) -> bool:
    """Take a click in the table `widget` (showing `keys`) into the selected key.

    A row picked in a table selects that row's consumer, looked up in the list that table showed:
    also a click in a table the browser still showed while the runs after it were under way (a
    filter's run, a refresh behind it), which made new tables; un-ticking the row in the same table
    clears the selection; a new table (other filter, order or data) keeps the selected consumer.
    Returns whether the selection changed.
    """
    before = state.get(SELECTED)
    seen: list[tuple[str, list[int], list[Key]]] = list(state.get(_SEEN) or [])
    kept: list[tuple[str, list[int], list[Key]]] = []
    for seen_widget, seen_rows, seen_keys in seen:
        if seen_widget == widget:
            continue
        clicked = [r for r in _rows(state, seen_widget) if 0 <= r < len(seen_keys)]
        if clicked and clicked != seen_rows:  # a click in a table the user was looking at
            state[SELECTED] = seen_keys[clicked[0]]
        kept.append((seen_widget, clicked or seen_rows, seen_keys))  # each click taken once
    rows = [r for r in _rows(state, widget) if 0 <= r < len(keys)]
    last_widget, last_rows, _ = seen[-1] if seen else (None, [], [])
    if last_widget == widget and rows != last_rows:
        state[SELECTED] = keys[rows[0]] if rows else None
    elif last_widget != widget and rows:
        state[SELECTED] = keys[rows[0]]
    state[_SEEN] = (kept + [(widget, rows, keys)])[-TABLES_KEPT:]
    return state.get(SELECTED) != before


def default(keys: list[Key], chosen: Key | None) -> Default | None:
    """The table's selection when it is first drawn: the chosen consumer's row, so a new table (a
    refresh that reordered the rows, another filter) shows it ticked; None when it is not shown."""
    if chosen is None or chosen not in keys:
        return None
    return {"selection": {"rows": [keys.index(chosen)], "columns": []}}


def clear(state: State) -> None:
    state[SELECTED] = None


def row_of(frame: pd.DataFrame, key: Key) -> pd.Series | None:
    """The selected consumer's current row in the (unfiltered) fleet, or None when it is gone."""
    for i, k in enumerate(keys_of(frame)):
        if k == key:
            return frame.iloc[i]
    return None
