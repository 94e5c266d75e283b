"""The health rules, table-driven over crafted sample sequences."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd
import pytest

from jetwatch.health.rules import Thresholds, evaluate

T0 = dt.datetime(2026, 11, 22, 3, 0, tzinfo=dt.timezone.utc)
TH = Thresholds()


def seq(n: int = 6, every: float = 20.0, **series: Any) -> pd.DataFrame:
    """n samples of one consumer; each keyword is a constant or a list of n values."""
    base: dict[str, Any] = {
        "num_pending": 0, "num_ack_pending": 0, "num_waiting": 1, "num_redelivered": 0,
        "delivered_consumer_seq": [10 * i for i in range(n)], "delivered_stream_seq": [10 * i for i in range(n)],
        "ack_floor_stream_seq": [10 * i for i in range(n)], "paused": False, "pinned_id": "P1",
        "created": T0 - dt.timedelta(days=1),
    }
    base.update(series)
    cols = {k: (v if isinstance(v, list) else [v] * n) for k, v in base.items()}
    return pd.DataFrame({"account": "A", "stream": "S", "consumer": "C",
                         "ts": [T0 + dt.timedelta(seconds=every * i) for i in range(n)], **cols})


def limits(**kw: Any) -> pd.DataFrame:
    row = {"account": "A", "stream": "S", "consumer": "C", "is_pull": True, "filtered": False,
           "max_ack_pending": 1000, "max_waiting": 512, "priority_policy": None, **kw}
    return pd.DataFrame([row])


STUCK = {"delivered_consumer_seq": 5, "delivered_stream_seq": 5, "ack_floor_stream_seq": 5}

CASES = [
    # (id, samples, limits, counts, expected verdicts in order)
    ("healthy", seq(), limits(), None, ["OK"]),
    ("too few samples", seq(n=2), limits(), None, ["COLLECTING"]),
    ("too short a span", seq(n=6, every=5), limits(), None, ["COLLECTING"]),
    ("no pullers", seq(num_pending=40, num_waiting=0, **STUCK), limits(), None, ["NO_PULLERS"]),
    ("pullers waiting is not no pullers", seq(num_pending=40, num_waiting=2, **STUCK), limits(), None, ["OK"]),
    ("stalled pinned client", seq(num_ack_pending=7, ack_floor_stream_seq=5), limits(), None, ["STALLED"]),
    ("in flight but acks move", seq(num_ack_pending=7), limits(), None, ["OK"]),
    ("saturated ack pending", seq(num_ack_pending=[100, 500, 950, 960, 990, 1000]), limits(), None, ["SATURATED"]),
    ("one saturated reading is not enough", seq(num_ack_pending=[0, 0, 0, 0, 0, 1000]), limits(), None, ["OK"]),
    ("max_ack_pending unlimited", seq(num_ack_pending=5000), limits(max_ack_pending=-1), None, ["OK"]),
    ("saturated waiting", seq(num_waiting=500), limits(), None, ["SATURATED"]),
    ("unpinned with work pending", seq(num_pending=[0, 5, 5, 6, 6, 6], pinned_id=[None] * 6,
                                        num_waiting=3), limits(priority_policy="pinned_client"), None, ["UNPINNED"]),
    ("no pin but nothing pending", seq(pinned_id=[None] * 6), limits(priority_policy="pinned_client"), None, ["OK"]),
    ("unpinned rule only for pinned_client", seq(num_pending=5, pinned_id=[None] * 6),
     limits(priority_policy="overflow"), None, ["OK"]),
    ("flapping from samples", seq(pinned_id=["a", "b", "c", "d", "e", "f"]),
     limits(priority_policy="pinned_client"), None, ["FLAPPING"]),
    ("flapping from pin events", seq(), limits(priority_policy="pinned_client"),
     {"pin_switches": 9}, ["FLAPPING"]),
    ("redelivering by sequence deltas", seq(delivered_consumer_seq=[20 * i for i in range(6)]), limits(), None,
     ["REDELIVERING"]),
    ("redelivery gauge rising", seq(num_redelivered=[0, 1, 2, 2, 3, 4]), limits(), None, ["REDELIVERING"]),
    ("redelivery gauge that falls is not rising", seq(num_redelivered=[0, 3, 1, 2, 0, 1]), limits(), None, ["OK"]),
    ("filtered consumer whose stream sequence jumps", seq(delivered_stream_seq=[1000 * i for i in range(6)]),
     limits(filtered=True), None, ["OK"]),
    ("filtered consumer: deltas not trusted", seq(delivered_consumer_seq=[20 * i for i in range(6)]),
     limits(filtered=True), None, ["OK"]),
    ("lagging", seq(num_pending=[10, 20, 35, 50, 70, 90]), limits(), None, ["LAGGING"]),
    ("an old unacked message lags whatever the trend",
     seq(num_pending=[50] * 6, oldest_unacked_age_seconds=[590, 600, 610, 620, 630, 640]), limits(), None, ["LAGGING"]),
    ("a young oldest message and a flat backlog is fine",
     seq(num_pending=[50] * 6, oldest_unacked_age_seconds=[10, 12, 9, 11, 10, 12]), limits(), None, ["OK"]),
    ("the latest age counts: an old message since acked is not lagging",
     seq(num_pending=[50] * 6, oldest_unacked_age_seconds=[900, 900, 900, 900, 900, 5]), limits(), None, ["OK"]),
    ("a single jump is not a trend", seq(num_pending=[10, 10, 10, 10, 10, 90]), limits(), None, ["OK"]),
    ("growing backlog with no acks is not lagging", seq(num_pending=[10, 20, 35, 50, 70, 90], num_waiting=0,
                                                        **STUCK), limits(), None, ["NO_PULLERS"]),
    ("paused explains no deliveries", seq(num_pending=40, num_waiting=0, paused=True, **STUCK), limits(), None,
     ["PAUSED"]),
    ("paused and stalled", seq(num_ack_pending=3, paused=True, ack_floor_stream_seq=5), limits(), None,
     ["STALLED", "PAUSED"]),
    ("severity order: stalled before lagging", seq(num_ack_pending=4, num_pending=[10, 20, 35, 50, 70, 90],
                                                   ack_floor_stream_seq=[5, 5, 5, 5, 5, 5]),
     limits(), None, ["STALLED"]),
    ("saturated and redelivering both listed", seq(num_ack_pending=1000,
                                                   delivered_consumer_seq=[20 * i for i in range(6)]),
     limits(), None, ["SATURATED", "REDELIVERING"]),
    ("push consumer: no pull rules", seq(num_pending=40, num_waiting=0, **STUCK),
     limits(is_pull=False, max_waiting=None), None, ["OK"]),
    ("push consumer can stall", seq(num_ack_pending=9, ack_floor_stream_seq=1), limits(is_pull=False), None,
     ["STALLED"]),
    ("recreated consumer: only samples since the reset count",
     seq(delivered_consumer_seq=[900, 910, 920, 930, 0, 10], delivered_stream_seq=[900, 910, 920, 930, 0, 10],
         ack_floor_stream_seq=[900, 910, 920, 930, 0, 10]), limits(), None, ["COLLECTING"]),
    ("recreated (new created time) with enough samples after",
     seq(n=8, created=[T0] * 3 + [T0 + dt.timedelta(hours=1)] * 5,
         delivered_consumer_seq=[500, 510, 520, 0, 10, 20, 30, 40],
         delivered_stream_seq=[500, 510, 520, 0, 10, 20, 30, 40],
         ack_floor_stream_seq=[500, 510, 520, 0, 10, 20, 30, 40]), limits(), None, ["OK"]),
]


@pytest.mark.parametrize("samples,lim,counts,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_health_rules(samples, lim, counts, expected):
    counts_df = pd.DataFrame([{"account": "A", "stream": "S", "consumer": "C", **counts}]) if counts else None
    out = evaluate(samples, lim, TH, counts_df)
    assert len(out) == 1
    row = out.iloc[0]
    assert [f["verdict"] for f in row["findings"]] == expected
    assert row["verdict"] == expected[0]
    assert row["reason"]


def test_every_finding_carries_its_numbers():
    out = evaluate(seq(num_pending=40, num_waiting=0, **STUCK), limits(), TH).iloc[0]
    assert out["findings"][0]["numbers"] == {"pending": 40, "waiting": 0, "seconds": 100}
    assert out["reason"] == "40 messages pending and no client has pulled for 100s"


def test_a_stalled_consumer_says_how_long_its_oldest_message_has_waited():
    out = evaluate(seq(num_ack_pending=7, ack_floor_stream_seq=5, oldest_unacked_age_seconds=[80, 100, 120, 140, 160, 4000]),
                   limits(), TH).iloc[0]
    assert out["reason"] == "7 messages handed out and none acknowledged for 100s; the oldest has waited 1.1h"
    assert out["findings"][0]["numbers"]["oldest_unacked_age_seconds"] == 4000
    lagging = out["findings"][1]
    assert lagging["verdict"] == "LAGGING"
    assert lagging["reason"] == "the oldest unacknowledged message has waited 1.1h (more than 10m)"


def test_consumers_are_judged_independently():
    a = seq(num_pending=40, num_waiting=0, **STUCK)
    b = seq().assign(consumer="D")
    out = evaluate(pd.concat([a, b]), pd.concat([limits(), limits(consumer="D")]), TH).set_index("consumer")
    assert out.loc["C", "verdict"] == "NO_PULLERS"
    assert out.loc["D", "verdict"] == "OK"


def test_event_counts_for_other_consumers_leave_this_one_alone():
    counts = pd.DataFrame([{"account": "A", "stream": "S", "consumer": "other", "pin_switches": 9, "nak_count": 3}])
    assert evaluate(seq(), limits(), TH, counts).iloc[0]["verdict"] == "OK"


def test_empty_window_gives_no_verdicts():
    assert evaluate(seq().iloc[0:0], limits(), TH).empty
