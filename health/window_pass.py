"""The window features and their onsets, in one compiled pass over each consumer's samples.

Each feature as a vectorised numpy pass read every consumer's whole window again: some forty
passes over arrays of samples x consumers, with temporaries as large, for a handful of numbers per
consumer. Here a loop over one consumer's samples computes all of them while those samples are
in cache (the consumers next to it share their cache lines: the arrays are time-major, as
health/window.py keeps them). numba compiles the loop once; the machine code is cached on disk
beside this module (or in NUMBA_CACHE_DIR), so a later process loads it instead of compiling.

What each feature means is said where it is read: window_features.sql for the sample reductions
(the second, independent definition tests/test_window_state.py holds this one to) and
health/onsets.py for the onsets and each consumer's own rhythms.

Conventions, as the SQL's: a sample counts when it is in the window and at or after the latest
reset (the delivered sequence fell, or `created` changed); a step is a counted sample after
another one, read against the previous sample in the window (window_features.sql's lag()); a
consumer's clients are read across a reset (a consumer recreated under its name keeps them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np

from jetwatch.health.onsets import CAUGHT_UP_AGE

# The outputs, one row each of a float array and of an integer one (flags as 0 or 1).
FLOATS = (
    "span_seconds", "last_ts", "pending_first", "pending_last", "pending_min", "pending_slope",
    "pending_rising_share", "ack_pending_min", "ack_pending_last", "ack_pending_recent_min", "waiting_max",
    "waiting_last", "waiting_recent_min", "deliveries", "stream_delivered", "acked", "redelivered_first",
    "redelivered_last", "unacked_age_last", "backlog_slope", "backlog_slope_se", "nopin_seconds",
    "stall_onset", "ack_gap_max", "quiet_since", "idle_onset", "pin_idle_onset", "pull_gap_max",
    "delivered_last_active", "acked_last_active", "age_rise_onset", "age_rise", "age_rise_gap_max",
    "behind_onset", "behind_rise", "behind_gap_max", "behind_backlog_rise", "first_ts", "last_seconds",
    "recreated_ts", "reset_ts", "reset_floor_before", "reset_floor_after", "redelivered_min", "redelivered_onset",
)
(SPAN_SECONDS, LAST_TS, PENDING_FIRST, PENDING_LAST, PENDING_MIN, PENDING_SLOPE, PENDING_RISING_SHARE,
 ACK_PENDING_MIN, ACK_PENDING_LAST, ACK_PENDING_RECENT_MIN, WAITING_MAX, WAITING_LAST, WAITING_RECENT_MIN,
 DELIVERIES, STREAM_DELIVERED, ACKED, REDELIVERED_FIRST, REDELIVERED_LAST, UNACKED_AGE_LAST, BACKLOG_SLOPE,
 BACKLOG_SLOPE_SE, NOPIN_SECONDS, STALL_ONSET, ACK_GAP_MAX, QUIET_SINCE, IDLE_ONSET, PIN_IDLE_ONSET,
 PULL_GAP_MAX, DELIVERED_LAST_ACTIVE, ACKED_LAST_ACTIVE, AGE_RISE_ONSET, AGE_RISE, AGE_RISE_GAP_MAX,
 BEHIND_ONSET, BEHIND_RISE, BEHIND_GAP_MAX, BEHIND_BACKLOG_RISE, FIRST_TS, LAST_SECONDS, RECREATED_TS, RESET_TS,
 RESET_FLOOR_BEFORE, RESET_FLOOR_AFTER, REDELIVERED_MIN, REDELIVERED_ONSET) = range(len(FLOATS))
INTEGERS = (
    "in_window", "samples", "sample_pin_switches", "delivered_moved", "ack_floor_moved", "redelivered_never_falls",
    "paused_last", "stall_grew", "stall_redelivered", "pullers_seen",
)
(IN_WINDOW, SAMPLES, SAMPLE_PIN_SWITCHES, DELIVERED_MOVED, ACK_FLOOR_MOVED, REDELIVERED_NEVER_FALLS, PAUSED_LAST,
 STALL_GREW, STALL_REDELIVERED, PULLERS_SEEN) = range(len(INTEGERS))

NO_RESET = -1e18  # window_features.sql's "no reset" time
NAN = np.nan
INF = np.inf



def _can_cache() -> bool:
    """Whether numba has a directory to cache the compiled pass in: without one, `cache=True`
    fails at import ("no locator available"), and judging with it. A module inside a zip (the
    pipeline ships the package to Spark's executors as one) has none, nor has a NUMBA_CACHE_DIR
    on a read-only root (a container's image): the pass then compiles in each process instead."""
    if not os.path.isfile(__file__):
        return False
    where = os.environ.get("NUMBA_CACHE_DIR")
    if not where:
        return True  # beside the module, or numba's per-user directory: numba finds one itself
    try:
        os.makedirs(where, exist_ok=True)
    except OSError:
        return False
    return os.access(where, os.W_OK)


_CACHE = _can_cache()


@numba.njit(cache=_CACHE, error_model="numpy", nogil=True)
def _later(a: float, b: float) -> float:
    """The later of an onset and an activity time; no onset stays none, no activity changes nothing."""
    if a != a:
        return NAN
    if b != b:
        return a
    return max(a, b)


@numba.njit(cache=_CACHE, error_model="numpy", nogil=True)
def _trailing(t: np.ndarray, s: np.ndarray, cond: np.ndarray, first: int, last: int) -> float:
    """Since when `cond` has held without a break (health/onsets.py): the time of the latest
    counted sample where it did not, or the first counted one when it held in all; NaN when it
    does not hold in the latest."""
    if not cond[last]:
        return NAN
    for k in range(last, first - 1, -1):
        if s[k] and not cond[k]:
            return t[k]
    return t[first]


@numba.njit(cache=_CACHE, error_model="numpy", nogil=True)
def _min_since(t: np.ndarray, s: np.ndarray, a: np.ndarray, since: float, first: int, last: int) -> float:
    low = INF
    for k in range(first, last + 1):
        if s[k] and t[k] >= since and a[k] < low:
            low = a[k]
    return low


@numba.njit(cache=_CACHE, error_model="numpy", nogil=True)
def _gap_max(t: np.ndarray, seen: np.ndarray, stepped: np.ndarray, prev: np.ndarray, at: np.ndarray,
             busy: np.ndarray, t_first: float) -> float:
    """The longest wait for the activity `at` while `busy` held (health/onsets.py's rhythms):
    at each sample where it moved, its new time minus the latest of its time before, the last
    sample at which the consumer was not busy, and the window's first sample."""
    best, idle_until = -INF, -INF
    for k in range(t.shape[0]):
        if seen[k] and stepped[k] and at[k] == at[k]:
            before = at[prev[k]]
            if before != before or at[k] > before:
                base = t_first
                if idle_until > base:
                    base = idle_until
                if before == before and before > base:
                    base = before
                if at[k] - base > best:
                    best = at[k] - base
        if seen[k] and not busy[k] and t[k] > idle_until:
            idle_until = t[k]
    return NAN if best == -INF else max(best, 0.0)


@numba.njit(cache=_CACHE, error_model="numpy", nogil=True)
def _run_gap_max(t: np.ndarray, s: np.ndarray, stepped: np.ndarray, prev: np.ndarray, cond: np.ndarray) -> float:
    """The longest run of `cond` that ended inside the window, from its first sample to the one
    that broke it; NaN where none ended."""
    best, started = -INF, -INF
    for k in range(t.shape[0]):
        was = stepped[k] and cond[prev[k]]
        if s[k] and not cond[k] and was and started != -INF and t[k] - started > best:
            best = t[k] - started
        if s[k] and cond[k] and not was and t[k] > started:
            started = t[k]
    return NAN if best == -INF else best


BLOCK = 32  # consumers copied out of the time-major arrays together: their samples, side by side


@numba.njit(cache=_CACHE, error_model="numpy", nogil=True)
def window_pass(t: np.ndarray, created: np.ndarray, pending: np.ndarray, in_flight: np.ndarray,
                waiting: np.ndarray, redelivered: np.ndarray, dcs: np.ndarray, dss: np.ndarray, afs: np.ndarray,
                age: np.ndarray, delivered_t: np.ndarray, acked_t: np.ndarray, paused: np.ndarray, pins: np.ndarray,
                no_pin: int, cols: np.ndarray, lo: int, hi: int, since: float, rhythm_after: np.ndarray,
                f: np.ndarray, n: np.ndarray, j_lo: int, j_hi: int) -> None:
    """Every feature of the consumers `cols[j_lo:j_hi]` (columns of the time-major arrays) over
    the samples from row `lo` to `hi` at or after `since`, into f[FLOATS, j] and n[INTEGERS, j] for
    the j-th of `cols` (n[IN_WINDOW, j] = 0: no sample in the window, nothing else written). A consumer's
    rhythms are computed only where a condition has held `rhythm_after[j]` or longer, or where
    messages were redelivered in the window (health/onsets.py; NaN elsewhere).

    The arrays keep a cycle's samples side by side (a cycle appends one row); a consumer's own
    samples are a column, one cache line apart each. So BLOCK consumers at a time are copied
    into arrays of their own, each consumer's samples contiguous, and read there. It holds no
    lock: parts of `cols` can be computed at once in threads of their own."""
    w = hi - lo
    floats = np.empty((12, BLOCK, w))
    flags = np.empty((BLOCK, w), np.bool_)
    marks = np.empty((BLOCK, w), np.int64)
    inner = np.arange(BLOCK)
    for j0 in range(j_lo, j_hi, BLOCK):
        m = min(BLOCK, j_hi - j0)
        for k in range(w):
            i = lo + k
            for b in range(m):
                c = cols[j0 + b]
                floats[0, b, k], floats[1, b, k], floats[2, b, k] = t[i, c], created[i, c], pending[i, c]
                floats[3, b, k], floats[4, b, k], floats[5, b, k] = in_flight[i, c], waiting[i, c], redelivered[i, c]
                floats[6, b, k], floats[7, b, k], floats[8, b, k] = dcs[i, c], dss[i, c], afs[i, c]
                floats[9, b, k], floats[10, b, k], floats[11, b, k] = age[i, c], delivered_t[i, c], acked_t[i, c]
                flags[b, k], marks[b, k] = paused[i, c], pins[i, c]
        _block(floats[0].T, floats[1].T, floats[2].T, floats[3].T, floats[4].T, floats[5].T, floats[6].T,
               floats[7].T, floats[8].T, floats[9].T, floats[10].T, floats[11].T, flags.T, marks.T, no_pin,
               inner[:m], 0, w, since, rhythm_after[j0:j0 + m], f[:, j0:j0 + m], n[:, j0:j0 + m])


@numba.njit(cache=_CACHE, error_model="numpy", nogil=True)
def _block(t: np.ndarray, created: np.ndarray, pending: np.ndarray, in_flight: np.ndarray,
           waiting: np.ndarray, redelivered: np.ndarray, dcs: np.ndarray, dss: np.ndarray, afs: np.ndarray,
           age: np.ndarray, delivered_t: np.ndarray, acked_t: np.ndarray, paused: np.ndarray, pins: np.ndarray,
           no_pin: int, cols: np.ndarray, lo: int, hi: int, since: float, rhythm_after: np.ndarray,
           f: np.ndarray, n: np.ndarray) -> None:
    """window_pass over arrays laid out by consumer (each one's samples contiguous)."""
    w = hi - lo
    tt = np.empty(w)
    valid = np.zeros(w, np.bool_)
    s = np.zeros(w, np.bool_)
    stepped = np.zeros(w, np.bool_)
    has_prev = np.zeros(w, np.bool_)
    prev = np.zeros(w, np.int64)
    dat = np.empty(w)  # the server's last delivery time at each sample (or from the sequences)
    aat = np.empty(w)  # its last acknowledgement time
    idle = np.zeros(w, np.bool_)
    pin_idle = np.zeros(w, np.bool_)
    rising = np.zeros(w, np.bool_)
    behind = np.zeros(w, np.bool_)
    busy = np.zeros(w, np.bool_)
    work = np.zeros(w, np.bool_)
    again = np.zeros(w, np.bool_)
    for j in range(cols.shape[0]):
        c = cols[j]
        # Valid samples, each one's previous, the resets, and whether the server sent activity times.
        before, red_max, bare, first_seen = -1, -INF, True, -1
        reset_t, recreated_t, only = NO_RESET, NAN, -1
        for k in range(w):
            i = lo + k
            ti = t[i, c]
            tt[k] = ti
            if delivered_t[i, c] == delivered_t[i, c] or acked_t[i, c] == acked_t[i, c]:
                bare = False
            valid[k] = ti >= since
            has_prev[k] = valid[k] and before >= 0
            prev[k] = max(before, 0)
            if not valid[k]:
                continue
            red_max = max(red_max, redelivered[i, c])
            if first_seen < 0:
                first_seen = k
            if has_prev[k]:
                p = lo + before
                recreated = abs(created[i, c] - created[p, c]) > 0
                if recreated or dcs[i, c] - dcs[p, c] < 0:
                    reset_t = max(reset_t, ti)
                    if recreated:
                        recreated_t = ti if recreated_t != recreated_t else max(recreated_t, ti)
                    else:
                        only = k
            before = k
        if first_seen < 0:
            n[IN_WINDOW, j] = 0
            continue
        n[IN_WINDOW, j] = 1

        # In one pass over the samples that count: first, last, sums, lows and highs, the steps
        # between them, the trailing run with work and no pin (after the last sample in the window
        # that breaks it), the server's activity times, and the conditions the onsets follow.
        count, first, last = 0, -1, before
        sum_t = sum_p = sum_b = 0.0
        p_min = a_min = r_min = INF
        w_max = -INF
        steps = rises = switches = falls = 0
        nopin_from = d_latest = a_latest = NAN
        broke = -INF
        pin_last = pins[lo + last, c]
        for k in range(w):
            i = lo + k
            s[k] = valid[k] and tt[k] >= reset_t
            stepped[k] = s[k] and has_prev[k] and tt[k] > reset_t
            p = lo + prev[k]
            # Activity: the server's times, or for a consumer stored before they were read, the
            # latest step at which the delivered sequence (the ack floor) rose.
            if bare:
                if stepped[k] and dcs[i, c] > dcs[p, c]:
                    d_latest = tt[k]
                if stepped[k] and afs[i, c] > afs[p, c]:
                    a_latest = tt[k]
                dat[k], aat[k] = d_latest, a_latest
            else:
                dat[k], aat[k] = delivered_t[i, c], acked_t[i, c]
            busy[k] = in_flight[i, c] > 0
            again[k] = redelivered[i, c] > 0
            work[k] = pending[i, c] > 0
            pinned = pins[i, c] != no_pin
            idle[k] = work[k] and not busy[k] and waiting[i, c] == 0
            pin_idle[k] = work[k] and not busy[k] and waiting[i, c] > 0 and pinned and pins[i, c] == pin_last
            rising[k] = stepped[k] and age[i, c] > age[p, c]
            behind[k] = s[k] and work[k] and age[i, c] > CAUGHT_UP_AGE
            if valid[k] and (pinned or not work[k]):
                broke, nopin_from = tt[k], NAN
            if not s[k]:
                continue
            if nopin_from != nopin_from and not pinned and work[k] and tt[k] > broke:
                nopin_from = tt[k]
            count += 1
            if first < 0:
                first = k
            sum_t += tt[k]
            sum_p += pending[i, c]
            sum_b += pending[i, c] + in_flight[i, c]
            p_min = min(p_min, pending[i, c])
            a_min = min(a_min, in_flight[i, c])
            r_min = min(r_min, redelivered[i, c])
            w_max = max(w_max, waiting[i, c])
            if stepped[k]:
                steps += 1
                rises += pending[i, c] - pending[p, c] > 0
                falls += redelivered[i, c] - redelivered[p, c] < 0
                switches += pinned and pins[p, c] != no_pin and pins[i, c] != pins[p, c]
        il, i0 = lo + last, lo + first
        t_first, t_last = tt[first], tt[last]

        # The trends: least squares over times centred first (DuckDB's regr_slope, to its precision).
        mean_t, mean_p, mean_b = sum_t / count, sum_p / count, sum_b / count
        stt = stp = stb = sbb = 0.0
        for k in range(first, last + 1):
            if s[k]:
                i = lo + k
                dt_ = tt[k] - mean_t
                dp = pending[i, c] - mean_p
                db = pending[i, c] + in_flight[i, c] - mean_b
                stt += dt_ * dt_
                stp += dt_ * dp
                stb += dt_ * db
                sbb += db * db

        # The last three counted samples.
        recent, r_ack, r_wait = 0, INF, INF
        for k in range(last, first - 1, -1):
            if s[k]:
                r_ack = min(r_ack, in_flight[lo + k, c])
                r_wait = min(r_wait, waiting[lo + k, c])
                recent += 1
                if recent == 3:
                    break

        row = f[:, j]
        row[SPAN_SECONDS], row[LAST_TS] = t_last - t_first, t_last
        row[PENDING_FIRST], row[PENDING_LAST], row[PENDING_MIN] = pending[i0, c], pending[il, c], p_min
        row[PENDING_SLOPE] = stp / stt
        row[PENDING_RISING_SHARE] = rises / max(steps, 1) if steps > 0 else 0.0
        row[ACK_PENDING_MIN], row[ACK_PENDING_LAST], row[ACK_PENDING_RECENT_MIN] = a_min, in_flight[il, c], r_ack
        row[WAITING_MAX], row[WAITING_LAST], row[WAITING_RECENT_MIN] = w_max, waiting[il, c], r_wait
        row[DELIVERIES] = max(dcs[il, c] - dcs[i0, c], 0.0)
        row[STREAM_DELIVERED] = max(dss[il, c] - dss[i0, c], 0.0)
        row[ACKED] = max(afs[il, c] - afs[i0, c], 0.0)
        row[REDELIVERED_FIRST], row[REDELIVERED_LAST] = redelivered[i0, c], redelivered[il, c]
        row[REDELIVERED_MIN] = r_min
        row[UNACKED_AGE_LAST] = age[il, c]
        row[BACKLOG_SLOPE] = stb / stt if stt > 0 else NAN
        row[BACKLOG_SLOPE_SE] = (np.sqrt(max(sbb - stb * stb / stt, 0.0) / max(count - 2, 1) / stt)
                                 if count > 2 and stt > 0 else NAN)
        row[NOPIN_SECONDS] = t_last - nopin_from if nopin_from == nopin_from else 0.0
        row[RECREATED_TS] = recreated_t
        row[RESET_TS] = tt[only] if only >= 0 else NAN
        row[RESET_FLOOR_AFTER] = afs[lo + only, c] if only >= 0 else NAN
        row[RESET_FLOOR_BEFORE] = afs[lo + prev[only], c] if only >= 0 else NAN
        flags = n[:, j]
        flags[SAMPLES], flags[SAMPLE_PIN_SWITCHES] = count, switches
        flags[DELIVERED_MOVED] = dcs[il, c] > dcs[i0, c]
        flags[ACK_FLOOR_MOVED] = afs[il, c] > afs[i0, c]
        flags[REDELIVERED_NEVER_FALLS] = falls == 0
        flags[PAUSED_LAST] = paused[il, c]

        # The onsets: since when each condition has held (health/onsets.py).
        acked_last, delivered_last, age_last = aat[last], dat[last], age[il, c]

        stall_onset = _later(_trailing(tt, s, busy, first, last), acked_last)
        grew = redone = False
        if stall_onset == stall_onset:
            grew = in_flight[il, c] > _min_since(tt, s, in_flight[lo:hi, c], stall_onset, first, last)
            redone = redelivered[il, c] > _min_since(tt, s, redelivered[lo:hi, c], stall_onset, first, last)
        idle_onset = _later(_trailing(tt, s, idle, first, last), delivered_last)
        pin_idle_onset = _later(_trailing(tt, s, pin_idle, first, last), delivered_last)
        seen_pullers = False
        if idle_onset == idle_onset:
            for k in range(w):
                if valid[k] and (waiting[lo + k, c] > 0 or (has_prev[k] and dat[k] > dat[prev[k]])):
                    seen_pullers = True
                    break
        age_rise_onset = _trailing(tt, s, rising, first, last)
        behind_onset = _trailing(tt, s, behind, first, last)
        age_rise = age_last - _min_since(tt, s, age[lo:hi, c], age_rise_onset, first, last) \
            if age_rise_onset == age_rise_onset else NAN
        behind_rise = age_last - _min_since(tt, s, age[lo:hi, c], behind_onset, first, last) \
            if behind_onset == behind_onset else NAN
        backlog_rise = NAN
        if behind_onset == behind_onset:
            mid = (behind_onset + t_last) / 2
            early = late = INF
            for k in range(first, last + 1):
                if s[k] and tt[k] >= behind_onset:
                    backlog = pending[lo + k, c] + in_flight[lo + k, c]
                    if tt[k] < mid:
                        early = min(early, backlog)
                    else:
                        late = min(late, backlog)
            if early < INF and late < INF:
                backlog_rise = late - early

        # Each consumer's own rhythms, only where a condition has held long enough to need them.
        held_from = max(acked_last, t_first) if acked_last == acked_last else t_first
        for onset in (stall_onset, idle_onset, pin_idle_onset, age_rise_onset, behind_onset):
            if onset == onset and onset < held_from:
                held_from = onset
        ack_gap = pull_gap = rise_gap = behind_gap = NAN
        if t_last - held_from >= rhythm_after[j] or red_max > 0:
            ack_gap = _gap_max(tt, s, stepped, prev, aat, busy, t_first)
            pull_gap = _gap_max(tt, valid, has_prev, prev, dat, work, tt[first_seen])
            rise_gap = _run_gap_max(tt, s, stepped, prev, rising)
            behind_gap = _run_gap_max(tt, s, stepped, prev, behind)

        row[STALL_ONSET], row[ACK_GAP_MAX] = stall_onset, ack_gap
        row[QUIET_SINCE] = (acked_last if delivered_last != delivered_last else
                            delivered_last if acked_last != acked_last else max(acked_last, delivered_last))
        row[IDLE_ONSET], row[PIN_IDLE_ONSET], row[PULL_GAP_MAX] = idle_onset, pin_idle_onset, pull_gap
        row[DELIVERED_LAST_ACTIVE], row[ACKED_LAST_ACTIVE] = delivered_last, acked_last
        row[AGE_RISE_ONSET], row[AGE_RISE], row[AGE_RISE_GAP_MAX] = age_rise_onset, age_rise, rise_gap
        row[BEHIND_ONSET], row[BEHIND_RISE], row[BEHIND_GAP_MAX] = behind_onset, behind_rise, behind_gap
        row[BEHIND_BACKLOG_RISE] = backlog_rise
        row[FIRST_TS], row[LAST_SECONDS] = t_first, t_last
        row[REDELIVERED_ONSET] = _trailing(tt, s, again, first, last)
        flags[STALL_GREW], flags[STALL_REDELIVERED], flags[PULLERS_SEEN] = grew, redone, seen_pullers


# Fewer consumers than this a part: a thread's hand-off costs more than the part's pass.
PART_MIN = 64 * BLOCK
_pool: tuple[ThreadPoolExecutor, int] | None = None  # the pool and its size


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def window_pass_in_parts(arrays: tuple[Any, ...], count: int) -> None:
    """window_pass over `count` consumers, split into parts of whole blocks, one per core: the
    pass holds no lock, so a judge of a large fleet uses every core the machine gives it. `arrays`:
    window_pass's arguments before `j_lo`."""
    global _pool
    run: Callable[..., None] = window_pass  # the compiled function, its arguments unpacked
    parts = max(1, min(_cores(), count // PART_MIN))
    if parts == 1:
        run(*arrays, 0, count)
        return
    step = -(-count // parts // BLOCK) * BLOCK
    bounds = [(a, min(a + step, count)) for a in range(0, count, step)]
    if _pool is None or _pool[1] < len(bounds) - 1:
        _pool = ThreadPoolExecutor(max_workers=len(bounds) - 1, thread_name_prefix="window-pass"), len(bounds) - 1
    others = [_pool[0].submit(run, *arrays, a, b) for a, b in bounds[1:]]
    run(*arrays, *bounds[0])
    for part in others:
        part.result()


def compile_now() -> None:
    """Compile the pass, and cache it, before the first judge needs it (an image build runs
    this, so that a container's first cycle does not spend seconds compiling)."""
    from jetwatch.health.window import WindowState, feature_columns

    state = WindowState(window=60.0)
    state.add({"account": ["A"], "stream": ["S"], "consumer": ["c"], "ts": ["2026-01-01T00:00:00Z"],
               "created": [None], "num_pending": [1], "num_ack_pending": [0], "num_waiting": [0],
               "num_redelivered": [0], "delivered_consumer_seq": [0], "delivered_stream_seq": [0],
               "ack_floor_stream_seq": [0], "paused": [False], "pinned_id": [None]})
    feature_columns(state, np.arange(1), -np.inf)
