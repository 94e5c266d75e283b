"""Drain ETA: when will a pull consumer's backlog be gone, at the rate seen in the health window.

The backlog is what the consumer still owes: pending (not yet delivered) plus in flight (delivered,
not yet acknowledged). On an unfiltered consumer that is the stream's last sequence minus the ack
floor, so its change over time is arrivals minus acks from sequence deltas; the net drain rate is
minus the least-squares trend of the backlog over the window (window_features.sql's
`backlog_slope`), and its standard error (`backlog_slope_se`) gives the range: the ETA at the
rate plus and minus `SPREAD` standard errors (no upper end when the slower rate does not drain).

Shown only where it means something: a pull consumer with a backlog whose workers acknowledge now
(lately, at their own rhythm: a trend left over from before a crash is not work being done). Whether
anyone pulls is read from what the consumer did lately, as its verdict judged it over its own pull
rhythm, never from one snapshot of waiting pulls (a worker that fetches, works and fetches again
has none waiting most of the time). Otherwise the state says why there is no time: 'paused',
'no pullers' (nobody pulls, nothing delivered or acknowledged lately: it will not drain),
'holder idle' (the pinned client does not pull, and the others' pulls wait behind it), 'not
draining' (the backlog holds or grows, or nothing was acknowledged lately).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from jetwatch.core.durations import duration
from jetwatch.health.columns import floats

DRAINING, NOT_DRAINING, PAUSED, NO_PULLERS = "draining", "not draining", "paused", "no pullers"
PIN_HOLDER_IDLE = "holder idle"
STATES = (DRAINING, NOT_DRAINING, PAUSED, NO_PULLERS, PIN_HOLDER_IDLE)
SPREAD = 2.0  # standard errors either side of the trend: the range's rates
ETA_COLUMNS = ["eta_state", "eta_seconds", "eta_low_seconds", "eta_high_seconds"]


@dataclass(frozen=True)
class Eta:
    state: str | None  # None: no ETA means anything here (push consumer, no backlog, no trend yet)
    seconds: float | None = None
    low: float | None = None
    high: float | None = None


def _flags(column: object, default: bool) -> np.ndarray:
    """A nullable flag column as booleans, missing values taking `default` (no object downcast)."""
    if isinstance(column, np.ndarray) and column.dtype == bool:
        return column
    return pd.Series(column).astype("boolean").fillna(default).to_numpy(dtype=bool)


def drain_eta_columns(columns: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """ETA columns as arrays for every row of `columns`: backlog, backlog_slope (per second),
    backlog_slope_se, paused, no_pullers (nobody pulls lately), is_pull and (optional) pin_idle
    (the pin holder does not pull) and acked (acknowledged lately). Vectorised: the collector runs
    it over the whole fleet each cycle, on its arrays."""
    backlog, slope, se = (floats(columns[c]) for c in ("backlog", "backlog_slope", "backlog_slope_se"))
    backlog, se = np.where(np.isnan(backlog), 0.0, backlog), np.where(np.isnan(se), 0.0, se)
    paused = _flags(columns["paused"], default=False)
    no_pullers = _flags(columns["no_pullers"], default=False)
    is_pull = _flags(columns["is_pull"], default=True)
    n = len(backlog)
    acked = _flags(columns["acked"], default=True) if "acked" in columns else np.ones(n, dtype=bool)
    pin_idle = _flags(columns["pin_idle"], default=False) if "pin_idle" in columns else np.zeros(n, dtype=bool)

    rate = -slope  # net drain: acks minus arrivals
    fast, slow = rate + SPREAD * se, rate - SPREAD * se
    applies = is_pull & (backlog > 0)
    state = np.full(n, None, dtype=object)
    state[applies & ~np.isnan(rate) & (rate <= 0)] = NOT_DRAINING
    state[applies & ~acked] = NOT_DRAINING
    draining = applies & acked & ~np.isnan(rate) & (rate > 0)
    state[draining] = DRAINING
    state[applies & no_pullers] = NO_PULLERS
    state[applies & pin_idle] = PIN_HOLDER_IDLE
    state[applies & paused] = PAUSED
    timed = state == DRAINING
    with np.errstate(divide="ignore", invalid="ignore"):
        seconds = np.where(timed, backlog / np.where(rate > 0, rate, 1.0), np.nan)
        low = np.where(timed, backlog / np.where(fast > 0, fast, 1.0), np.nan)
        high = np.where(timed & (slow > 0), backlog / np.where(slow > 0, slow, 1.0), np.nan)
    return {"eta_state": state, "eta_seconds": seconds, "eta_low_seconds": low, "eta_high_seconds": high}


def lately(features: Mapping[str, Any], stalled_after: float | np.ndarray, no_pullers_after: float | np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """Whether each consumer acknowledged lately, and whether anyone pulled lately, from the window's
    features: "lately" is the consumer's own rhythm doubled (the longest gap between its
    acknowledgements, or between its deliveries), and at least its thresholds that judge a stall
    and an absence of pullers (one for all, or one per consumer). A pull waiting now or a delivery
    lately is a puller (a worker between fetches is one all along); an acknowledgement is work
    done, not a pull."""
    now = floats(features["last_seconds"])
    acked_at, delivered_at = floats(features["acked_last_active"]), floats(features["delivered_last_active"])
    ack_gap, pull_gap = floats(features["ack_gap_max"]), floats(features["pull_gap_max"])
    ack_within = np.fmax(2.0 * np.nan_to_num(ack_gap), stalled_after)
    pull_within = np.fmax(2.0 * np.nan_to_num(pull_gap), no_pullers_after)
    with np.errstate(invalid="ignore"):
        acked = np.where(np.isnan(acked_at), _flags(features["ack_floor_moved"], False), now - acked_at <= ack_within)
        delivered = now - delivered_at <= pull_within
        waiting = floats(features["waiting_last"]) > 0
    return acked, delivered | waiting


def drain_eta(frame: pd.DataFrame) -> pd.DataFrame:
    """drain_eta_columns as a frame with `frame`'s index."""
    return pd.DataFrame(drain_eta_columns(frame), index=frame.index)


def eta(backlog: float, slope: float | None, slope_se: float | None = None, *, paused: bool = False,
        no_pullers: bool = False, is_pull: bool = True, pin_idle: bool = False, acked: bool = True) -> Eta:
    """One consumer's ETA (drain_eta on one row)."""
    row = drain_eta(pd.DataFrame([{"backlog": backlog, "backlog_slope": np.nan if slope is None else slope,
                                   "backlog_slope_se": slope_se, "paused": paused, "no_pullers": no_pullers,
                                   "is_pull": is_pull, "pin_idle": pin_idle, "acked": acked}])).iloc[0]

    def num(x: float) -> float | None:
        return None if pd.isna(x) else float(x)

    return Eta(row["eta_state"], num(row["eta_seconds"]), num(row["eta_low_seconds"]), num(row["eta_high_seconds"]))


def words(state: str | None, seconds: float | None, low: float | None = None, high: float | None = None,
          say: Callable[[float], str] | None = None) -> str:
    """The ETA as a person reads it: '~4 min (3 min–6 min)', 'not draining', 'paused', '' for none;
    `say` words each duration (core/durations.py's words unless given)."""
    duration_ = say or duration
    if state is None or (isinstance(state, float) and np.isnan(state)):
        return ""
    if state != DRAINING or seconds is None or pd.isna(seconds):
        return str(state)
    lo = "" if low is None or pd.isna(low) else duration_(low)
    hi = "∞" if high is None or pd.isna(high) else duration_(high)
    return f"~{duration_(seconds)} ({lo}–{hi})" if lo else f"~{duration_(seconds)}"
