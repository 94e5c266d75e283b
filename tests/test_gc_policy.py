"""The collector's garbage-collection policy: full collections between cycles, never lost."""

from __future__ import annotations

import gc
import weakref

from jetwatch.collectors.gc_policy import MIDDLE, OLD, YOUNG, GcPolicy


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def _old_cyclic_garbage() -> weakref.ref:
    """A reference cycle that lives through a full collection (so it sits in the oldest
    generation), then becomes garbage."""
    holder = [Node()]
    gc.collect()
    ref = weakref.ref(holder[0])
    holder.clear()
    return ref


def test_the_policy_raises_the_thresholds_for_the_run_and_restores_them_after():
    before = gc.get_threshold()
    policy = GcPolicy()
    policy.apply()
    try:
        assert gc.get_threshold() == (YOUNG, MIDDLE, OLD)
    finally:
        policy.restore()
    assert gc.get_threshold() == before


def test_old_cyclic_garbage_waits_for_the_full_collection_between_cycles_and_is_then_freed():
    clock = Clock()
    policy = GcPolicy(full_every=60.0, clock=clock)
    policy.apply()
    try:
        ref = _old_cyclic_garbage()
        _ = [[i] for i in range(3 * YOUNG)]  # a cycle's worth of allocations: young collections only
        assert ref() is not None, "a full collection ran inside the cycle"
        clock.now = 59.0
        assert policy.between_cycles() is False  # not due yet: nothing runs
        assert ref() is not None
        clock.now = 60.0
        assert policy.between_cycles() is True
        assert ref() is None
        assert policy.full_collections == 1
    finally:
        policy.restore()


def test_without_the_policy_applied_nothing_is_collected_between_cycles():
    clock = Clock()
    policy = GcPolicy(full_every=0.0, clock=clock)
    assert policy.between_cycles() is False
    assert policy.full_collections == 0


def test_collectors_run_at_once_put_back_the_thresholds_found_before_the_first_after_the_last():
    before = gc.get_threshold()
    first, second = GcPolicy(), GcPolicy()
    first.apply()
    second.apply()
    first.restore()
    assert gc.get_threshold() == (YOUNG, MIDDLE, OLD)  # the second still runs
    second.restore()
    assert gc.get_threshold() == before
    second.restore()  # a second restore changes nothing
    assert gc.get_threshold() == before
