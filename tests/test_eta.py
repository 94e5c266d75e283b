"""The drain ETA rule (health/eta.py) as a table: backlog and its trend in, state and times out."""

from __future__ import annotations

import pytest

from jetwatch.health.eta import Eta, eta, words

INF = None  # no upper end: the slowest rate the trend allows does not drain


@pytest.mark.parametrize("case, backlog, slope, se, flags, expected", [
    # backlog 1000 falling 10/s, exact trend: 100 s, no spread
    ("draining, exact trend", 1000, -10.0, 0.0, {}, Eta("draining", 100.0, 100.0, 100.0)),
    # 10/s ± 2·2.5: between 1000/15 and 1000/5
    ("draining, uncertain trend", 1000, -10.0, 2.5, {}, Eta("draining", 100.0, 1000 / 15, 200.0)),
    # the slow end does not drain (10 - 2·6 < 0): no upper end
    ("draining, maybe not at all", 1000, -10.0, 6.0, {}, Eta("draining", 100.0, 1000 / 22, INF)),
    ("holding", 500, 0.0, 0.0, {}, Eta("not draining")),
    ("growing", 500, 3.0, 0.5, {}, Eta("not draining")),
    ("paused wins over the trend", 500, -10.0, 0.0, {"paused": True}, Eta("paused")),
    ("nobody pulls", 500, 0.0, 0.0, {"no_pullers": True}, Eta("no pullers")),
    ("paused and nobody pulls: paused explains it", 500, 0.0, 0.0, {"paused": True, "no_pullers": True},
     Eta("paused")),
    ("the pinned client does not pull: the others wait behind it, not nobody", 500, 0.0, 0.0,
     {"pin_idle": True}, Eta("holder idle")),
    ("a falling trend without acknowledgements lately is no drain", 500, -10.0, 0.0, {"acked": False},
     Eta("not draining")),
    ("no backlog: nothing to drain", 0, -10.0, 0.0, {}, Eta(None)),
    ("a push consumer has no ETA", 500, -10.0, 0.0, {"is_pull": False}, Eta(None)),
    ("no trend yet (one sample)", 500, None, None, {}, Eta(None)),
])
def test_drain_eta(case, backlog, slope, se, flags, expected):
    got = eta(backlog, slope, se, **flags)
    assert got.state == expected.state, case
    for field in ("seconds", "low", "high"):
        want = getattr(expected, field)
        assert getattr(got, field) == (None if want is None else pytest.approx(want)), (case, field)


@pytest.mark.parametrize("state, seconds, low, high, text", [
    ("draining", 240.0, 180.0, 360.0, "~4 min (3 min–6 min)"),
    ("draining", 30.0, 20.0, None, "~30 s (20 s–∞)"),
    ("draining", 7200.0, 7200.0, 7200.0, "~2 h (2 h–2 h)"),
    ("not draining", None, None, None, "not draining"),
    (None, None, None, None, ""),
])
def test_eta_in_words(state, seconds, low, high, text):
    assert words(state, seconds, low, high) == text


@pytest.mark.parametrize("case, last_ack, last_delivery, waiting, ack_gap, stalled_after, expected", [
    ("acknowledged 5 s ago", 95.0, 95.0, 0, None, 20.0, (True, True)),
    ("acknowledged 30 s ago, its rhythm 10 s: not lately", 70.0, 70.0, 0, 10.0, 20.0, (False, False)),
    ("acknowledged 30 s ago, a bulk acker every 20 s: lately", 70.0, 70.0, 0, 20.0, 20.0, (True, False)),
    ("its own --stalled-after of 10 min keeps a 5-min-old ack lately", 400.0 - 300.0, 0.0, 0, None, 600.0,
     (True, False)),
    ("a pull waiting now is a puller, whatever the acks", 0.0, 0.0, 2, None, 20.0, (False, True)),
    ("an acknowledgement is work done, not a pull", 95.0, 0.0, 0, None, 20.0, (True, False)),
])
def test_acknowledged_and_pulled_lately_read_each_consumers_own_rhythm_and_thresholds(
        case, last_ack, last_delivery, waiting, ack_gap, stalled_after, expected):
    import numpy as np

    from jetwatch.health.eta import lately

    now = 400.0 if "10 min" in case else 100.0
    features = {"last_seconds": [now], "acked_last_active": [last_ack], "delivered_last_active": [last_delivery],
                "ack_gap_max": [np.nan if ack_gap is None else ack_gap], "pull_gap_max": [np.nan],
                "waiting_last": [waiting], "ack_floor_moved": [False]}
    acked, pulling = lately(features, np.array([stalled_after]), 20.0)
    assert (bool(acked[0]), bool(pulling[0])) == expected, case
