"""Why pins moved, as the Pins page shows it: every pin move of the range with its cause in words
(health/pin_causes.py, one query per store), and each consumer's causes over the range. Plain
DataFrames, no Streamlit: tested with plain pytest and AppTest."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pandas as pd

from jetwatch.dashboard import stores
from jetwatch.dashboard.text import pin_holder
from jetwatch.health import pin_causes

KEY = ["cluster", "account", "stream", "consumer"]
RANGE_LIMIT = dt.timedelta(days=1)  # the Pins page reads why pins moved over at most the range's newest day
ROWS_SHOWN = 2000  # the newest moves listed one by one (every one is counted per consumer)
BY_CONSUMER = KEY + ["moves", "dominant", "causes"]


def fleet_moves(fleet: Sequence[stores.ClusterStore], since: dt.datetime, until: dt.datetime,
                settings: Any) -> pd.DataFrame:
    """Every pin move in the range in every cluster, newest first, with `why` in words."""
    def read(cs: stores.ClusterStore) -> pd.DataFrame:
        return cs.store.read(lambda con: pin_causes.moves(con, since, until, settings))

    found = stores.union(stores.each(fleet, read))
    if found.empty:
        return pd.DataFrame(columns=["cluster", *pin_causes.COLUMNS, "why"])
    return pin_causes.with_words(found).sort_values("ts", ascending=False).reset_index(drop=True)


def by_consumer(moves: pd.DataFrame) -> pd.DataFrame:
    """Each consumer's moves over the range: how many, the dominant cause, and all causes in words."""
    if moves.empty:
        return pd.DataFrame(columns=BY_CONSUMER)
    rows = []
    for key, group in moves.groupby(KEY, sort=True, dropna=False):
        counts = pin_causes.counts(group["cause"])
        top = pin_causes.dominant(counts)
        rows.append({**dict(zip(KEY, key)), "moves": len(group),
                     "dominant": pin_causes.CAUSE_WORDS.get(top, "") if top else "",
                     "causes": pin_causes.counts_words(counts)})
    return pd.DataFrame(rows, columns=BY_CONSUMER).sort_values("moves", ascending=False, kind="stable")


def fleet_words(moves: pd.DataFrame) -> str:
    """The range's causes over the fleet in one line: '3 priority_timeout, 1 operator unpin'."""
    return pin_causes.counts_words(pin_causes.counts(moves["cause"])) if not moves.empty else ""


def _clock(value: Any) -> str:
    return "" if value is None or pd.isna(value) else pd.Timestamp(value).tz_convert("UTC").strftime("%m-%d %H:%M:%S")


def switches_table(moves: pd.DataFrame, several_clusters: bool = False) -> pd.DataFrame:
    """One row per move, as people read it: when, which consumer, from whom to whom, why."""
    table = pd.DataFrame({
        "When (UTC)": [_clock(t) for t in moves["ts"]],
        "Stream": moves["stream"], "Consumer": moves["consumer"],
        "Cause": [pin_causes.CAUSE_WORDS.get(c, c) for c in moves["cause"]],
        "Why it moved": moves["why"],
        "From": [pin_holder(p, n, v) for p, n, v in zip(moves["from_pin"], moves["from_holder"],
                                                         moves["from_verification"])],
        "To": [pin_holder(p, n, v) for p, n, v in zip(moves["to_pin"], moves["to_holder"], moves["to_verification"])],
    })
    if several_clusters:
        table.insert(0, "Cluster", moves["cluster"])
    return table


def consumers_table(summary: pd.DataFrame, several_clusters: bool = False) -> pd.DataFrame:
    table = pd.DataFrame({"Stream": summary["stream"], "Consumer": summary["consumer"], "Moves": summary["moves"],
                          "Mostly": summary["dominant"], "Causes over the range": summary["causes"]})
    if several_clusters:
        table.insert(0, "Cluster", summary["cluster"])
    return table
