"""The typed views of JetStream info replies (core/jsinfo.py) as tables: replies as nats-server 2.15.1
sent them, trimmed ones, and wrong ones; and what time lag (collectors/lag.py) and the advisory
capture read through them."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from jetwatch.collectors.lag import StreamFacts
from jetwatch.core.clock import parse_rfc3339
from jetwatch.core.jsinfo import ConsumerInfo, StreamConfig, StreamInfo, StreamState
from jetwatch.health.loss import StreamLimits

# Replies of a nats-server 2.15.1 (STREAM.INFO of a stream with messages and of an empty one,
# CONSUMER.INFO of a pinned_client consumer with nothing pinned), whole.
ORDERS: dict[str, Any] = {
    "type": "io.nats.jetstream.api.v1.stream_info_response", "total": 0, "offset": 0, "limit": 0,
    "config": {"name": "ORDERS", "subjects": ["orders.>"], "retention": "limits", "max_consumers": -1,
               "max_msgs": -1, "max_bytes": -1, "max_age": 3600000000000, "max_msgs_per_subject": -1,
               "max_msg_size": -1, "discard": "old", "storage": "file", "num_replicas": 1,
               "duplicate_window": 120000000000, "compression": "none", "allow_direct": True,
               "mirror_direct": False, "sealed": False, "deny_delete": False, "deny_purge": False,
               "allow_rollup_hdrs": False, "consumer_limits": {}, "allow_msg_ttl": False,
               "metadata": {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.1"}},
    "created": "2026-11-28T01:54:35.176555983Z",
    "state": {"messages": 2, "bytes": 82, "first_seq": 1, "first_ts": "2026-11-28T01:54:35.181021449Z",
              "last_seq": 2, "last_ts": "2026-11-28T01:54:35.181405859Z", "num_subjects": 1, "consumer_count": 1},
    "cluster": {"leader": "NBTFED4FBIWOFB445SBJOMJEOP5UWGKVJIGS7JKEUZN7HODAITLFXV2C"},
    "ts": "2026-11-28T01:54:36.386043375Z",
}
EMPTY: dict[str, Any] = {
    **ORDERS,
    "config": {**ORDERS["config"], "name": "EMPTY", "subjects": ["empty.>"], "max_age": 0, "allow_direct": False},
    "state": {"messages": 0, "bytes": 0, "first_seq": 0, "first_ts": "0001-01-01T00:00:00Z", "last_seq": 0,
              "last_ts": "0001-01-01T00:00:00Z", "consumer_count": 0},
}
WORKER: dict[str, Any] = {
    "type": "io.nats.jetstream.api.v1.consumer_info_response", "stream_name": "ORDERS", "name": "w",
    "created": "2026-11-28T01:54:35.179575969Z",
    "config": {"durable_name": "w", "name": "w", "deliver_policy": "all", "ack_policy": "explicit",
               "ack_wait": 300000000, "max_deliver": 1, "replay_policy": "instant", "max_waiting": 512,
               "max_ack_pending": 1000, "num_replicas": 0,
               "metadata": {"_nats.level": "5", "_nats.req.level": "1", "_nats.ver": "2.15.1"},
               "priority_groups": ["jobs"], "priority_policy": "pinned_client", "priority_timeout": 1000000000},
    "delivered": {"consumer_seq": 1, "stream_seq": 1, "last_active": "2026-11-28T01:54:35.483797254Z"},
    "ack_floor": {"consumer_seq": 0, "stream_seq": 0}, "num_ack_pending": 3, "num_redelivered": 0,
    "num_waiting": 0, "num_pending": 1, "ts": "2026-11-28T01:54:36.387915277Z",
    "priority_groups": [{"group": "jobs", "pinned_ts": "0001-01-01T00:00:00Z"}],
}


def _t(text: str) -> float:
    return parse_rfc3339(text).timestamp()


@pytest.mark.parametrize("case, reply, expected", [
    ("a stream with messages, as the server sends it", ORDERS, StreamInfo(
        config=StreamConfig(name="ORDERS", subjects=["orders.>"], allow_direct=True, discard="old",
                            max_age=3600000000000, max_msgs=-1, max_bytes=-1),
        state=StreamState(messages=2, bytes=82, first_seq=1, first_ts="2026-11-28T01:54:35.181021449Z",
                          last_seq=2, last_ts="2026-11-28T01:54:35.181405859Z"),
        created="2026-11-28T01:54:35.176555983Z")),
    ("an empty reply: every field its default", {}, StreamInfo()),
    ("a count written as a string is the count", {"state": {"first_seq": "7"}},
     StreamInfo(state=StreamState(first_seq=7))),
    ("a field jetwatch does not read is left out", {"config": {"name": "S", "sealed": True, "mirror": {"name": "M"}}},
     StreamInfo(config=StreamConfig(name="S"))),
])
def test_stream_info_view(case, reply, expected):
    assert StreamInfo.of(reply) == expected, case


@pytest.mark.parametrize("case, reply", [
    ("a name that is not text", {"config": {"name": 5}}),
    ("a count that is not one", {"state": {"first_seq": "seven"}}),
    ("a count that is null", {"state": {"last_seq": None}}),
    ("a config that is not an object", {"config": ["S"]}),
])
def test_a_stream_info_field_of_another_type_is_a_value_error(case, reply):
    with pytest.raises(ValueError):
        StreamInfo.of(reply)
    assert issubclass(msgspec.ValidationError, ValueError), case


@pytest.mark.parametrize("case, reply, pending, in_flight, pinned", [
    ("a pinned_client consumer with nothing pinned, as the server sends it", WORKER, 1, 3, ("jobs", None)),
    ("an empty reply", {}, 0, 0, (None, None)),
    ("a pin", {"priority_groups": [{"group": "g", "pinned_client_id": "P1", "pinned_ts": "2026-11-28T01:54:35Z"}]},
     0, 0, ("g", "P1")),
])
def test_consumer_info_view(case, reply, pending, in_flight, pinned):
    info = ConsumerInfo.of(reply)
    assert (info.num_pending, info.num_ack_pending, info.pinned()) == (pending, in_flight, pinned), case


@pytest.mark.parametrize("case, reply, expected", [
    ("a stream with messages: its limits, -1 read as no limit", ORDERS, StreamFacts(
        True, 1, _t("2026-11-28T01:54:35.181021449Z"), 2, _t("2026-11-28T01:54:35.181405859Z"),
        StreamLimits(discard="old", max_age=3600.0, max_msgs=0, max_bytes=0, messages=2, bytes=82,
                     first_seq=1, last_seq=2))),
    ("an empty stream: Go's zero times are no times", EMPTY, StreamFacts(
        False, 0, None, 0, None, StreamLimits(discard="old", max_age=0.0, max_msgs=0, max_bytes=0, messages=0,
                                               bytes=0, first_seq=0, last_seq=0))),
    ("no config and no state", {}, StreamFacts()),
    ("a discard policy left empty is the server's default", {"config": {"discard": ""}}, StreamFacts()),
    ("a time that is not one is no time", {"state": {"first_seq": 3, "first_ts": "yesterday"}},
     StreamFacts(first_seq=3, limits=StreamLimits(first_seq=3))),
])
def test_lag_reads_a_streams_facts_from_its_info(case, reply, expected):
    assert StreamFacts.from_info(StreamInfo.of(reply)) == expected, case
