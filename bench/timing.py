"""How every bench times a call: the call run `runs` times, durations sorted, the last result
kept (to check it against the baseline's)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[..., Any], runs: int, *args: Any) -> tuple[list[float], Any]:
    """The sorted durations of `runs` calls of fn(*args), and the last call's result."""
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - t)
    return sorted(times), out


def timed_cpu(fn: Callable[..., Any], runs: int, *args: Any) -> tuple[list[float], list[float], Any]:
    """As `timed`, with the process's CPU time of each call beside its wall time (sorted apart): on a
    shared machine the wall time of a call grows with the others' load, its CPU time far less."""
    walls, cpus, out = [], [], None
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        out = fn(*args)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return sorted(walls), sorted(cpus), out


def p95(times: list[float]) -> float:
    """The 95th percentile of sorted durations (the nearest rank)."""
    return times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]


def summary(fn: Callable[[], Any], runs: int) -> tuple[float, float, Any]:
    """Median and p95 of `runs` calls of fn(), and the last call's result."""
    times, out = timed(fn, runs)
    return statistics.median(times), p95(times), out
