"""The typed view of consumer advisories (core/jsadvisory.py) and the collector's reading of them
(collectors/advisories.py `parse_advisory`) as tables: advisories as nats-server 2.15.1 sent them
(the delivery ones with the fields of its jetstream_events.go), and malformed ones, each refused
with the reason the rejects table keeps."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from jetwatch.collectors.advisories import ADVISORY_PREFIX, MalformedAdvisory, parse_advisory
from jetwatch.core.advisory_row import timed_out
from jetwatch.core.jsadvisory import OPTIONAL_COUNTS, OPTIONAL_TEXT, Advisory

P = "io.nats.jetstream.advisory.v1."
RECEIVED = "2026-11-28T01:54:40Z"

# Seen from a nats-server 2.15.1, byte for byte (subject, payload).
PINNED = (f"{ADVISORY_PREFIX}PINNED.ORDERS.w",
          '{"type":"io.nats.jetstream.advisory.v1.consumer_group_pinned","id":"Vwg1QL936Zcf5DMiAcW6E0",'
          '"timestamp":"2026-11-28T01:54:35.181850438Z","account":"$G","stream":"ORDERS","consumer":"w",'
          '"group":"jobs","pinned_id":"Vwg1QL936Zcf5DMiAcW6Ah"}')
UNPINNED = (f"{ADVISORY_PREFIX}UNPINNED.ORDERS.w",
            '{"type":"io.nats.jetstream.advisory.v1.consumer_group_unpinned","id":"Vwg1QL936Zcf5DMiAcW6Kc",'
            '"timestamp":"2026-11-28T01:54:35.88429163Z","account":"$G","stream":"ORDERS","consumer":"w",'
            '"group":"jobs","reason":"admin"}')
MAX_DELIVERIES = (f"{ADVISORY_PREFIX}MAX_DELIVERIES.ORDERS.w",
                  '{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"Vwg1QL936Zcf5DMiAcW6HJ",'
                  '"timestamp":"2026-11-28T01:54:35.483629742Z","stream":"ORDERS","consumer":"w","stream_seq":1,'
                  '"deliveries":1}')
CREATED = (f"{ADVISORY_PREFIX}CREATED.ORDERS.w",
           '{"type":"io.nats.jetstream.advisory.v1.consumer_action","id":"Vwg1QL936Zcf5DMiAcW645",'
           '"timestamp":"2026-11-28T01:54:35.180137198Z","stream":"ORDERS","consumer":"w","action":"create"}')
# JSConsumerDeliveryTerminatedAdvisory's fields; `reason` is the client's words.
TERMINATED = (f"{ADVISORY_PREFIX}MSG_TERMINATED.ORDERS.w",
              '{"type":"io.nats.jetstream.advisory.v1.terminated","id":"T1","timestamp":"2026-11-28T01:55:00Z",'
              '"stream":"ORDERS","consumer":"w","consumer_seq":4,"stream_seq":9,"deliveries":2,"reason":"bad input",'
              '"domain":"hub"}')
# JSConsumerLeaderElectedAdvisory: `replicas` is a list of objects jetwatch does not read.
LEADER = (f"{ADVISORY_PREFIX}LEADER_ELECTED.ORDERS.w",
          '{"type":"io.nats.jetstream.advisory.v1.consumer_leader_elected","id":"L1",'
          '"timestamp":"2026-11-28T01:55:01Z","account":"$G","stream":"ORDERS","consumer":"w","leader":"n2",'
          '"replicas":[{"name":"n1","current":true,"active":1000}]}')


@pytest.mark.parametrize("case, message, expected, kind", [
    ("pinned", PINNED, Advisory(type=P + "consumer_group_pinned", id="Vwg1QL936Zcf5DMiAcW6E0",
                                timestamp="2026-11-28T01:54:35.181850438Z", account="$G", stream="ORDERS",
                                consumer="w", group="jobs", pinned_id="Vwg1QL936Zcf5DMiAcW6Ah"),
     "consumer_group_pinned"),
    ("unpinned", UNPINNED, Advisory(type=P + "consumer_group_unpinned", id="Vwg1QL936Zcf5DMiAcW6Kc",
                                    timestamp="2026-11-28T01:54:35.88429163Z", account="$G", stream="ORDERS",
                                    consumer="w", group="jobs", reason="admin"),
     "consumer_group_unpinned"),
    ("max deliveries", MAX_DELIVERIES, Advisory(type=P + "max_deliver", id="Vwg1QL936Zcf5DMiAcW6HJ",
                                                timestamp="2026-11-28T01:54:35.483629742Z", stream="ORDERS",
                                                consumer="w", stream_seq=1, deliveries=1),
     "max_deliver"),
    ("created", CREATED, Advisory(type=P + "consumer_action", id="Vwg1QL936Zcf5DMiAcW645",
                                  timestamp="2026-11-28T01:54:35.180137198Z", stream="ORDERS", consumer="w",
                                  action="create"),
     "consumer_action"),
    ("terminated", TERMINATED, Advisory(type=P + "terminated", id="T1", timestamp="2026-11-28T01:55:00Z",
                                        stream="ORDERS", consumer="w", domain="hub", reason="bad input",
                                        stream_seq=9, consumer_seq=4, deliveries=2),
     "terminated"),
    ("leader elected: its replicas left out", LEADER,
     Advisory(type=P + "consumer_leader_elected", id="L1", timestamp="2026-11-28T01:55:01Z", account="$G",
              stream="ORDERS", consumer="w", leader="n2"),
     "consumer_leader_elected"),
])
def test_advisory_view_of_what_the_server_sends(case, message, expected, kind):
    advisory = Advisory.of(json.loads(message[1]))
    assert (advisory, advisory.kind) == (expected, kind), case


@pytest.mark.parametrize("case, doc", [
    ("no id", {"type": P + "nak", "timestamp": "2026-11-28T01:55:00Z"}),
    ("a name that is not text", {"type": P + "nak", "id": "i", "timestamp": "t", "stream": 5}),
    ("a count that is text: the view is strict, as the collector's checks are", {
        "type": P + "nak", "id": "i", "timestamp": "t", "stream_seq": "5"}),
    ("a count that is true", {"type": P + "nak", "id": "i", "timestamp": "t", "deliveries": True}),
])
def test_advisory_view_refuses_a_field_of_another_type(case, doc):
    with pytest.raises(msgspec.ValidationError):
        Advisory.of(doc)


def test_the_checked_fields_are_the_views_in_the_order_checked():
    assert OPTIONAL_TEXT == ("account", "stream", "consumer", "domain", "group", "pinned_id", "reason", "action",
                             "leader")
    assert OPTIONAL_COUNTS == ("stream_seq", "consumer_seq", "deliveries")


def _row(subject: str, payload: str, **fields: Any) -> dict[str, Any]:
    doc = json.loads(payload)
    return {"id": doc["id"], "received_at": RECEIVED, "subject": subject, "account": "$G",
            "stream": doc.get("stream"), "consumer": doc.get("consumer"), "group_name": doc.get("group"),
            "pinned_id": doc.get("pinned_id"), "reason": doc.get("reason"), "raw": json.dumps(doc), **fields}


@pytest.mark.parametrize("case, message, expected", [
    ("pinned", PINNED, _row(*PINNED, ts="2026-11-28T01:54:35.181850Z", kind="consumer_group_pinned")),
    ("unpinned", UNPINNED, _row(*UNPINNED, ts="2026-11-28T01:54:35.884291Z", kind="consumer_group_unpinned")),
    ("max deliveries", MAX_DELIVERIES, _row(*MAX_DELIVERIES, ts="2026-11-28T01:54:35.483629Z", kind="max_deliver")),
    ("terminated: the client's reason kept", TERMINATED,
     _row(*TERMINATED, ts="2026-11-28T01:55:00Z", kind="terminated")),
    ("a lone surrogate in a name is stored as U+FFFD", (
        f"{ADVISORY_PREFIX}MSG_NAKED.ORDERS.w",
        '{"type":"io.nats.jetstream.advisory.v1.nak","id":"N1","timestamp":"2026-11-28T01:55:00Z",'
        '"stream":"ORDERS","consumer":"w\\ud800"}'),
     {**_row(f"{ADVISORY_PREFIX}MSG_NAKED.ORDERS.w", '{"id":"N1","stream":"ORDERS","consumer":"w"}',
             ts="2026-11-28T01:55:00Z", kind="nak"),
      "consumer": "w\ufffd",
      "raw": '{"type": "io.nats.jetstream.advisory.v1.nak", "id": "N1", "timestamp": "2026-11-28T01:55:00Z", '
             '"stream": "ORDERS", "consumer": "w\ufffd"}'}),
])
def test_an_advisory_as_the_row_stored(case, message, expected):
    row = parse_advisory(message[0], message[1].encode(), "$G", RECEIVED)
    assert {k: row[k] for k in expected} == expected, case
    assert row.keys() == expected.keys(), case


def _doc(**fields: Any) -> bytes:
    doc = {"type": P + "nak", "id": "i1", "timestamp": "2026-11-28T01:55:00Z", "stream": "S", "consumer": "w"}
    return json.dumps({k: v for k, v in {**doc, **fields}.items() if v is not ...}).encode()


def _pin(kind: str = "consumer_group_pinned", **fields: Any) -> bytes:
    return _doc(**{"type": P + kind, "group": "g", "pinned_id": "p", **fields})


NAKED = f"{ADVISORY_PREFIX}MSG_NAKED.S.w"
PIN = f"{ADVISORY_PREFIX}PINNED.S.w"
UNPIN = f"{ADVISORY_PREFIX}UNPINNED.S.w"


MALFORMED = [
    ("not JSON", NAKED, b"{nope", "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ("not UTF-8", NAKED, b'{"id": "\xff"}', "not JSON: 'utf-8' codec can't decode byte 0xff in position 8: "
                                             "invalid start byte"),
    ("too large", NAKED, b" " * (16 * 1024 + 1), "advisory of 16385 bytes, more than the 16384 an advisory may be"),
    ("nested too deeply", NAKED, b"[" * 10_000, "not an advisory: JSON nested too deeply to read"),
    ("an array", NAKED, b'["x"]', "not a JSON object"),
    ("another type", NAKED, _doc(type="io.nats.jetstream.api.v1.stream_info_response"),
     "unknown advisory type 'io.nats.jetstream.api.v1.stream_info_response'"),
    ("no type", NAKED, _doc(type=...), "unknown advisory type None"),
    ("no id", NAKED, _doc(id=...), "advisory without an id"),
    ("an empty id", NAKED, _doc(id=""), "advisory without an id"),
    ("an id that is a number", NAKED, _doc(id=7), "advisory without an id"),
    ("an id too long", NAKED, _doc(id="i" * 129), "advisory id longer than 128 characters"),
    ("no timestamp", NAKED, _doc(timestamp=...), "advisory without a timestamp"),
    ("a timestamp that is not one", NAKED, _doc(timestamp="noon"), "timestamp: not an RFC 3339 time: 'noon'"),
    ("a name that is a number", NAKED, _doc(stream=5), "stream is int 5, expected a string"),
    ("a name too long", NAKED, _doc(consumer="w" * 300),
     "consumer is 300 characters, more than the 256 an advisory field may hold"),
    ("a reason too long", NAKED, _doc(reason="r" * 1025),
     "reason is 1025 characters, more than the 1024 an advisory field may hold"),
    ("the first wrong field is named", NAKED, _doc(deliveries="2", account=3, leader=[]),
     "account is int 3, expected a string"),
    ("a count that is text", NAKED, _doc(stream_seq="9"), "stream_seq is str '9', expected an integer"),
    ("a count that is true", NAKED, _doc(deliveries=True), "deliveries is bool True, expected an integer"),
    ("a count that is a fraction", NAKED, _doc(consumer_seq=1.5), "consumer_seq is float 1.5, expected an integer"),
    ("a pin without its stream", PIN, _pin(stream=...), "consumer_group_pinned advisory without stream"),
    ("an unpin without its consumer", UNPIN, _pin("consumer_group_unpinned", consumer=""),
     "consumer_group_unpinned advisory without consumer"),
    ("a pin without its pin", PIN, _pin(pinned_id=None), "pinned advisory without pinned_id"),
    ("a pin on the unpin subject", UNPIN, _pin(),
     f"consumer_group_pinned advisory for S/w arrived on '{UNPIN}'"),
    ("a pin of another consumer", PIN, _pin(consumer="x"),
     f"consumer_group_pinned advisory for S/x arrived on '{PIN}'"),
    ("another account", PIN, _pin(account="OTHER"),
     "advisory claims account 'OTHER', but it was published in account '$G', whose advisories name only their "
     "own account: forged, or imported from another account; not stored"),
]


@pytest.mark.parametrize("case, subject, payload, reason", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_advisory_is_refused_saying_why(case, subject, payload, reason):
    with pytest.raises(MalformedAdvisory) as refused:
        parse_advisory(subject, payload, "$G", RECEIVED)
    assert str(refused.value) == reason, case


def test_a_number_too_large_for_any_integer_type_is_still_an_integer():
    """The server's counts are uint64; a larger one is kept in the raw JSON as it came, not refused."""
    row = parse_advisory(NAKED, _doc(stream_seq=2**70), "$G", RECEIVED)
    assert json.loads(row["raw"])["stream_seq"] == 2**70


@pytest.mark.parametrize("case, message, expected", [
    ("an unpin for priority_timeout", (f"{ADVISORY_PREFIX}UNPINNED.S.w", _pin("consumer_group_unpinned",
                                                                              reason="timeout").decode()), True),
    ("an admin unpin", UNPINNED, False),
    ("a pin", PINNED, False),
    ("a termination whose client wrote `timeout`", (f"{ADVISORY_PREFIX}MSG_TERMINATED.S.w",
                                                    _doc(type=P + "terminated", reason="timeout").decode()), False),
])
def test_a_pin_lost_to_priority_timeout_is_told_from_the_stored_row(case, message, expected):
    assert timed_out(parse_advisory(message[0], message[1].encode(), "$G", RECEIVED)) is expected, case
