"""Config findings (health/config_findings.py): each kind with the cases that must raise it and the
look-alikes that must not, table-driven over the window features and limits; the reset read from
real sample sequences through health/window.py; and each kind on a real nats-server with real pull
clients and the real collector, in `status --json`'s `config_findings`."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd
import pytest

from jetwatch.health.config_findings import KINDS, config_findings
from jetwatch.health.features import window_features

BASE: dict[str, Any] = {
    "samples": 12, "max_ack_pending": 100, "max_waiting": 512, "ack_wait_ns": 30e9, "filtered": False,
    "ack_pending_min": 10, "pending_min": 0, "waiting_max": 1, "acked": 50, "deliveries": 50,
    "stream_delivered": 50, "redelivered_first": 0, "redelivered_last": 0, "nak_count": 0,
    "ack_gap_max": 0.5, "reset_ts": np.nan, "reset_floor_before": np.nan, "reset_floor_after": np.nan,
}

CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("healthy", {}, set()),
    ("max_ack_pending held every sample while work waits", {"ack_pending_min": 100, "pending_min": 5},
     {"max_ack_pending_reached"}),
    ("at max_ack_pending but nothing waits (caught up)", {"ack_pending_min": 100, "pending_min": 0}, set()),
    ("max_ack_pending of one: strict order by choice", {"max_ack_pending": 1, "ack_pending_min": 1, "pending_min": 5},
     set()),
    ("too few samples to say always", {"samples": 2, "ack_pending_min": 100, "pending_min": 5}, set()),
    ("no max_ack_pending", {"max_ack_pending": -1, "ack_pending_min": 100, "pending_min": 5}, set()),
    ("pulls waiting at max_waiting", {"max_waiting": 4, "waiting_max": 4}, {"max_waiting_reached"}),
    ("pulls waiting one below max_waiting", {"max_waiting": 4, "waiting_max": 3}, set()),
    ("redelivered while acking, gaps longer than ack_wait",
     {"ack_wait_ns": 1e9, "ack_gap_max": 3.0, "deliveries": 60, "stream_delivered": 50}, {"ack_wait_short"}),
    ("redelivered gauge only (filtered consumer)",
     {"ack_wait_ns": 1e9, "ack_gap_max": 3.0, "filtered": True, "deliveries": 10, "stream_delivered": 90,
      "redelivered_last": 2}, {"ack_wait_short"}),
    ("long job kept alive with +WPI: long gaps, no redelivery", {"ack_wait_ns": 1e9, "ack_gap_max": 3.0}, set()),
    ("redelivered by naks, not by ack_wait",
     {"ack_wait_ns": 1e9, "ack_gap_max": 3.0, "deliveries": 60, "stream_delivered": 50, "nak_count": 10}, set()),
    ("redelivered, gaps shorter than ack_wait (a crash, not the setting)",
     {"ack_wait_ns": 5e9, "ack_gap_max": 3.0, "deliveries": 60, "stream_delivered": 50}, set()),
    ("redelivered, nothing acknowledged (STALLED's, not this)",
     {"ack_wait_ns": 1e9, "ack_gap_max": np.nan, "acked": 0, "deliveries": 60, "stream_delivered": 50}, set()),
    ("gap unknown (rhythm not computed)",
     {"ack_wait_ns": 1e9, "ack_gap_max": np.nan, "deliveries": 60, "stream_delivered": 50}, set()),
    ("reset back", {"reset_ts": 1.7e9, "reset_floor_before": 100, "reset_floor_after": 10}, {"reset"}),
    ("reset forward", {"reset_ts": 1.7e9, "reset_floor_before": 100, "reset_floor_after": 500}, {"reset"}),
]


def _columns(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    return {k: np.array([{**BASE, **r}[k] for r in rows], dtype=bool if k == "filtered" else float)
            for k in BASE}


@pytest.mark.parametrize(("name", "change", "kinds"), CASES, ids=[c[0] for c in CASES])
def test_each_kind_and_its_look_alikes(name: str, change: dict[str, Any], kinds: set[str]) -> None:
    found = config_findings(_columns([change]))[0]
    assert {f["kind"] for f in found} == kinds
    for f in found:
        assert f["kind"] in KINDS and f["reason"] and f["fix"] and f["numbers"]


def test_all_at_once_in_one_pass_and_the_quiet_ones_share_one_empty_list() -> None:
    found = config_findings(_columns([c[1] for c in CASES] * 100))
    assert [{f["kind"] for f in x} for x in found] == [c[2] for c in CASES] * 100
    empties = {id(x) for x in found if not x}
    assert len(empties) == 1


def test_the_reset_says_which_way() -> None:
    found = config_findings(_columns([c[1] for c in CASES if c[0].startswith("reset")]))
    assert [x[0]["numbers"]["way"] for x in found] == ["back", "forward"]
    assert "90 acknowledged messages will be delivered again" in found[0][0]["reason"]
    assert "400 messages after the ack floor were skipped" in found[1][0]["reason"]


def _samples(dcs: list[int], afs: list[int], created: list[str]) -> pd.DataFrame:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    n = len(dcs)
    return pd.DataFrame({
        "account": ["A"] * n, "stream": ["S"] * n, "consumer": ["C"] * n,
        "ts": [t0 + dt.timedelta(seconds=5 * i) for i in range(n)], "created": created,
        "num_pending": [0] * n, "num_ack_pending": [0] * n, "num_waiting": [1] * n, "num_redelivered": [0] * n,
        "delivered_consumer_seq": dcs, "delivered_stream_seq": afs, "ack_floor_stream_seq": afs,
        "paused": [False] * n, "pinned_id": [None] * n, "oldest_unacked_age_seconds": [0.0] * n,
        "delivered_last_active": [None] * n, "ack_floor_last_active": [None] * n})


@pytest.mark.parametrize(("dcs", "afs", "created", "way"), [
    ([10, 20, 30, 0, 5], [10, 20, 30, 5, 10], ["2026-01-01T00:00:00Z"] * 5, "back"),
    ([10, 20, 30, 0, 5], [10, 20, 30, 90, 95], ["2026-01-01T00:00:00Z"] * 5, "forward"),
    ([10, 20, 30, 0, 5], [10, 20, 30, 30, 35], ["2026-01-01T00:00:00Z"] * 5, "ack_floor"),
    ([10, 20, 30, 0, 5], [10, 20, 30, 0, 5], ["2026-01-01T00:00:00Z"] * 3 + ["2026-01-01T00:00:14Z"] * 2, None),
    ([10, 20, 30, 40, 50], [10, 20, 30, 40, 50], ["2026-01-01T00:00:00Z"] * 5, None),
], ids=["back", "forward", "to the ack floor", "recreated: not a reset", "no reset"])
def test_a_reset_read_from_the_samples(dcs: list[int], afs: list[int], created: list[str], way: str | None) -> None:
    feats = window_features(_samples(dcs, afs, created))
    found = [f for f in config_findings({c: feats[c].to_numpy() for c in feats.columns})[0] if f["kind"] == "reset"]
    if way is None:
        assert not found
        return
    assert found[0]["numbers"]["way"] == way
    assert found[0]["numbers"]["at"] == "2026-01-01T00:00:15Z"
    assert found[0]["numbers"]["ack_floor_before"] == 30
