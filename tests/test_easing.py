"""A verdict eases only after its cause has been gone for the clearing time; its since is its
cause's onset (health/easing.py), table-driven."""

from __future__ import annotations

import numpy as np
import pytest

from jetwatch.health import easing

NOW, CLEAR = 1000.0, 10.0
NAN = float("nan")

CASES = [
    # (id, judged now, kept, calmer since (kept), held back, calmer since (now))
    ("a worse verdict replaces at once", "STALLED", "OK", NAN, False, NAN),
    ("OK after STALLED waits: first calm cycle", "OK", "STALLED", NAN, True, NOW),
    ("OK after STALLED waits: calm for less than the clearing time", "OK", "STALLED", NOW - 5, True, NOW - 5),
    ("OK after STALLED: calm for the clearing time", "OK", "STALLED", NOW - 10, False, NAN),
    ("a milder non-OK verdict waits as OK does", "LAGGING", "NO_PULLERS", NAN, True, NOW),
    ("the same verdict: nothing to count", "STALLED", "STALLED", NOW - 5, False, NAN),
    ("COLLECTING does not ease a verdict", "COLLECTING", "STALLED", NAN, False, NAN),
    ("COLLECTING is not held", "OK", "COLLECTING", NAN, False, NAN),
    ("never judged before", "OK", None, NAN, False, NAN),
]


@pytest.mark.parametrize("now_verdict,kept,calmer,held,calmer_after", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_verdict_eases_only_after_the_clearing_time(now_verdict, kept, calmer, held, calmer_after):
    held_back, calmer_since = easing.ease(np.array([now_verdict], dtype=object), np.array([kept], dtype=object),
                                          np.array([calmer]), NOW, CLEAR)
    assert held_back.tolist() == [held]
    assert np.array_equal(calmer_since, np.array([calmer_after]), equal_nan=True)


@pytest.mark.parametrize("onset,same,kept_since,expected", [
    (900.0, False, NAN, 900.0),  # a new verdict: since its cause began
    (NAN, False, NAN, NOW),  # no onset (SATURATED, FLAPPING): since it was judged
    (950.0, True, 900.0, 900.0),  # the window's "at least" onset moves on; the first since stands
    (NAN, True, 900.0, 900.0),
])
def test_since_is_the_causes_onset(onset, same, kept_since, expected):
    assert easing.since(np.array([onset]), np.array([same]), np.array([kept_since]), NOW).tolist() == [expected]

