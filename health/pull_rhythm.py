"""A batch consumer's pull rhythm, learnt beyond the health window.

A consumer drained by a job once an hour waits most of its life with work pending and nobody
pulling: over a 5-minute window it looks exactly like one whose workers are gone, and the window's
own rhythm (health/onsets.py) cannot see a gap longer than the window. So the collector follows
every consumer's waits for a pull as its samples arrive (a few numbers a consumer, kept in the
store beside its verdict) and learns a rhythm only from waits that repeat:

- a *wait* runs from the latest of the last delivery and the last sample with no work pending, to
  the last sample before the next delivery (the longest the consumer was *seen* waiting: a lower
  bound, so a wait measured across a gap in the samples is never longer than it was seen);
- a wait counts once it is at least the idle rules' floor (shorter ones are the window's business);
- waits belong to one *rhythm* when the consumer was busy between them for no longer than it
  waited: a job that drains and goes quiet again. A deploy or an outage, one long wait among hours
  of steady pulling, starts over and teaches nothing;
- two such waits in a row make a rhythm: the longer of the last two. It holds while the current
  wait began no longer after the last one ended than the rhythm itself.

The idle rules (NO_PULLERS, PIN_IDLE) then wait for the learnt rhythm doubled, as for the window's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from jetwatch.health.rules import Thresholds

# What is kept per consumer in the store (verdicts_current) ...
KEPT = ("pull_wait_last", "pull_wait_prev", "pull_wait_ended", "pull_waits_in_row")
# ... and what only the collector's memory holds (rebuilt from the window's samples at a start:
# a wait whose start the window does not show is not measured).
MEMORY = ("pull_wait_from", "pull_wait_seen")
WAITS = (*KEPT, *MEMORY)
UNKNOWN = -np.inf  # pull_wait_from of a wait whose start was not seen


def empty(n: int) -> dict[str, np.ndarray]:
    """The waits of `n` consumers never seen."""
    return {name: np.full(n, np.nan) for name in WAITS}


def fold(waits: dict[str, np.ndarray], t: np.ndarray, before: np.ndarray, pending: np.ndarray,
         pending_before: np.ndarray, delivered: np.ndarray, delivered_at: np.ndarray,
         floor: float) -> dict[str, np.ndarray]:
    """The waits after the samples of one moment, one per consumer (`t` NaN: no sample then, its
    waits unchanged). `before` and `pending_before`: the time and pending count of the
    consumer's sample before (NaN: none); `delivered`: whether a delivery happened since then;
    `delivered_at`: the server's time of the last delivery (NaN: unknown). Returns new arrays."""
    out = {name: a.copy() for name, a in waits.items()}
    valid = ~np.isnan(t)
    start = out["pull_wait_from"]
    end_at = np.where(np.isnan(delivered_at), t, delivered_at)
    with np.errstate(invalid="ignore"):
        length = out["pull_wait_seen"] - start
        new = (valid & delivered & np.isfinite(start) & (length >= floor)
               & ~(end_at <= out["pull_wait_ended"]))  # a wait already counted (folded again)
    if new.any():
        last, in_row = out["pull_wait_last"], np.nan_to_num(out["pull_waits_in_row"])
        with np.errstate(invalid="ignore"):
            same_rhythm = (in_row >= 1) & (start - out["pull_wait_ended"] <= np.fmax(length, last))
        out["pull_waits_in_row"] = np.where(new, np.where(same_rhythm, in_row + 1, 1), out["pull_waits_in_row"])
        out["pull_wait_prev"] = np.where(new, last, out["pull_wait_prev"])
        out["pull_wait_last"] = np.where(new, length, last)
        out["pull_wait_ended"] = np.where(new, end_at, out["pull_wait_ended"])
    # Where the next wait starts: at this delivery; where work has just appeared, at the sample
    # before (or the last delivery, if later); unseen where the memory began mid-wait.
    with np.errstate(invalid="ignore"):
        work = valid & (pending > 0)
        appeared = np.where(pending_before == 0, np.fmax(before, delivered_at), UNKNOWN)
    start = np.where(work & delivered, end_at, np.where(work & np.isnan(start), appeared, start))
    start = np.where(valid & ~work, np.nan, start)
    out["pull_wait_from"] = start
    out["pull_wait_seen"] = np.where(valid, np.where(np.isnan(start), np.nan, t), out["pull_wait_seen"])
    return out


def learnt(waits: Mapping[str, np.ndarray], wait_began: np.ndarray) -> np.ndarray:
    """Each consumer's learnt rhythm (seconds; NaN: none) for a current wait that began at
    `wait_began` (NaN: none now)."""
    rhythm = np.fmax(waits["pull_wait_last"], waits["pull_wait_prev"])
    with np.errstate(invalid="ignore"):
        holds = (waits["pull_waits_in_row"] >= 2) & (wait_began - waits["pull_wait_ended"] <= rhythm)
    return np.where(holds, rhythm, np.nan)


def counted_from(th: Thresholds) -> float:
    """The shortest wait that counts towards a rhythm: the idle rules' shortest duration (a
    shorter pause is no wait the rules would name)."""
    return float(min(th.no_pullers_after, th.pin_idle_after))


def features(waits: Mapping[str, np.ndarray], columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the idle rules read of the waits, beside the window's features: `pull_rhythm` (the
    learnt rhythm, NaN: none) and `pull_waited` (how long the current wait has lasted, from its
    start where the collector saw it begin, else from the server's last delivery; NaN: none)."""
    start = waits["pull_wait_from"]
    began = np.where(np.isfinite(start), start, np.where(np.isnan(start), np.nan, columns["delivered_last_active"]))
    return {"pull_rhythm": learnt(waits, began), "pull_waited": columns["last_seconds"] - began}
