"""How a verdict moves over time, beyond one window: it eases only after its cause has been gone
for a clearing time, and its *since* is when its cause began.

Pure functions over one cycle's arrays (a consumer per element), for whatever judges cycle after
cycle and keeps what it judged: the collector (collectors/judging.py) keeps `calmer_since` and the
kept verdicts in the store, so a restarted collector goes on where it stopped.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jetwatch.health.verdicts import BY_NAME, SEVERITY

_UNRANKED = len(SEVERITY)
_UNHEALTHY = np.array(sorted(name for name, v in BY_NAME.items() if v.level in ("critical", "warning")), dtype=object)
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


def unhealthy(verdicts: np.ndarray) -> np.ndarray:
    """Which verdicts call for someone (a critical or warning level): OK, PAUSED, COLLECTING and
    unknown ones do not."""
    return np.isin(np.asarray(verdicts, dtype=object), _UNHEALTHY)


def continuing(kept: np.ndarray, verdict: np.ndarray) -> np.ndarray:
    """Where the kept *since* goes on: the same verdict, or one unhealthy verdict after another (a
    consumer that moves from LOSING to NO_PULLERS has been unhealthy since the first; a new since
    at every move would hide how long on-call has had a problem)."""
    return (kept == verdict) | (unhealthy(kept) & unhealthy(verdict))


def since(onset: np.ndarray, same: np.ndarray, kept_since: np.ndarray, now: float) -> np.ndarray:
    """When each verdict began (`same`: where the kept since goes on, `continuing`): its cause's
    onset where the rule gives one, else when the verdict was first judged. An onset of a cause
    that held through the whole window is "at least then": while the verdict holds, the earlier
    since it was first judged with stands."""
    began = np.where(same, kept_since, now)
    return np.where(np.isnan(onset), began, np.where(same, np.fmin(onset, began), onset))
