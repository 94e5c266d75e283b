"""How a verdict moves over time, beyond one window: it eases only after its cause has been gone
for a clearing time, and its *since* is when its cause began.

Pure functions over one cycle's arrays (a consumer per element), for whatever judges cycle after
cycle and keeps what it judged: the collector (collectors/judging.py) keeps `calmer_since` and the
kept verdicts in the store, so a restarted collector goes on where it stopped.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jetwatch.health.verdicts import SEVERITY, VERDICTS

_UNRANKED = len(SEVERITY)
# The verdicts an alert fires for come first in the table: a consumer in any of them is
# unhealthy (PAUSED, OK and COLLECTING, after them, are not).
_ALERTING = [v.level in ("critical", "warning") for v in VERDICTS]
_FIRST_HEALTHY = _ALERTING.index(False)
assert not any(_ALERTING[_FIRST_HEALTHY:]), "an alerting verdict ranked after a healthy one"

_NAMES = sorted(SEVERITY, key=SEVERITY.__getitem__)


def severity(verdicts: np.ndarray) -> np.ndarray:
    """Each verdict's place in the severity order (lower is worse); None or unknown ranks last."""
    codes = pd.Categorical(np.asarray(verdicts, dtype=object), categories=_NAMES).codes.astype(np.int64)
    return np.where(codes >= 0, codes, _UNRANKED)  # a category's code is its place in SEVERITY


def ease(verdict: np.ndarray, kept: np.ndarray, calmer_since: np.ndarray, now: float,
         clear_after: float) -> tuple[np.ndarray, np.ndarray]:
    """Which consumers keep their kept verdict this cycle (True: held back), and since when each
    has been judged calmer than it (NaN: not easing). A verdict judged less severe than the kept
    one (OK included) replaces it only once it has been judged so for `clear_after`; COLLECTING
    neither eases a verdict nor is eased (it says nothing about the cause)."""
    easing = (severity(kept) < severity(verdict)) & ~np.isin(kept, np.array([None, "COLLECTING"], dtype=object)) & (verdict != "COLLECTING")
    calmer = np.where(easing, np.where(np.isnan(calmer_since), now, calmer_since), np.nan)
    held_back = easing & (now - calmer < clear_after)
    calmer[~held_back] = np.nan  # eased, or not easing: nothing left to count
    return held_back, calmer


def since(onset: np.ndarray, same: np.ndarray, kept_since: np.ndarray, now: float) -> np.ndarray:
    """When each verdict began: its cause's onset where the rule gives one, else when the verdict
    was first judged. An onset of a cause that held through the whole window is "at least then":
    while the verdict holds, the earlier since it was first judged with stands."""
    began = np.where(same, kept_since, now)
    return np.where(np.isnan(onset), began, np.where(same, np.fmin(onset, began), onset))


def unhealthy_since(verdict: np.ndarray, since: np.ndarray, kept: np.ndarray, kept_unhealthy: np.ndarray) -> np.ndarray:
    """Since when each consumer has been unhealthy without a break (epoch seconds; NaN while it is
    not): a run of verdicts that moves between STALLED, NO_PULLERS, LOSING, ... keeps one start,
    the earliest of the run's and the current verdict's since, however often the verdict changes
    within it; it starts again only after the consumer was healthy (`kept` is the verdict judged
    before, `kept_unhealthy` its unhealthy since)."""
    carried = np.where(severity(kept) < _FIRST_HEALTHY, kept_unhealthy, np.nan)
    return np.where(severity(verdict) < _FIRST_HEALTHY, np.fmin(carried, since), np.nan)
