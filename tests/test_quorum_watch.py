"""QUORUM_LOST and LEADER_ELECTED as heard by subscription: the lost quorum is evidence for the
consumer it names, in the server's words and dated from the advisory, until a leader is elected
or the consumer is sampled afresh; anything else on the subjects is ignored."""

from __future__ import annotations

import json

import pytest

from jetwatch.collectors.quorum_watch import ELECTED, LOST, QuorumWatch
from jetwatch.health.cluster import NO_LEADER

T = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
REPLICAS = [{"name": "n1", "current": True}, {"name": "n2", "current": False, "offline": True},
            {"name": "n3", "current": False}]


def advisory(kind: str, consumer: str = "busy", at: str = "2027-01-15T08:00:00Z", **more: object) -> bytes:
    return json.dumps({"type": kind, "id": "x", "timestamp": at, "stream": "CQ", "consumer": consumer,
                       **more}).encode()


def watch() -> QuorumWatch:
    return QuorumWatch(None, "A", lambda stream, consumer: consumer != "ignored", lambda: T)  # type: ignore[arg-type]


def test_a_lost_quorum_is_evidence_dated_from_the_advisory_naming_the_peers_it_lost():
    w = watch()
    w.take(advisory(LOST, replicas=REPLICAS), T + 1)
    [(key, ev)] = w.evidence(T + 12).items()
    assert key == ("A", "CQ", "busy") and ev.verdict == NO_LEADER and ev.held_s == 12
    assert ev.servers == ("n2", "n3") and "QUORUM_LOST" in ev.seen and "08:00:00 UTC" in ev.seen


def test_a_leader_elected_ends_it_and_so_does_a_fresh_sample_taken_after_it():
    w = watch()
    w.take(advisory(LOST), T)
    w.take(advisory(ELECTED, at="2027-01-15T08:00:09Z", leader="n1"), T + 9)
    assert not w.evidence(T + 10)
    w.take(advisory(LOST), T)
    w.sampled([("A", "CQ", "busy")], since=T - 5)  # a cycle begun before it: still without a leader
    assert w.evidence(T + 10)
    w.sampled([("A", "CQ", "busy")], since=T + 5)
    assert not w.evidence(T + 10)


def test_what_is_not_a_well_formed_advisory_about_a_watched_consumer_is_ignored():
    w = watch()
    for data in (b"not json", json.dumps({"type": LOST}).encode(), advisory(LOST, at="yesterday"),
                 advisory(LOST, consumer="ignored"), advisory(LOST.replace("quorum_lost", "pause")),
                 json.dumps({"type": LOST, "id": "x", "timestamp": "2027-01-15T08:00:00Z", "stream": 5,
                             "consumer": "busy"}).encode()):
        w.take(data, T)
    assert not w.evidence(T)


@pytest.mark.parametrize("said,dated", [
    ("2027-01-15T08:00:00Z", 0.0),  # as said
    ("2027-01-15T07:00:00Z", -30.0),  # an hour before its receipt: no more than the skew trusted
    ("2027-01-15T09:00:00Z", 0.0),  # from the future: its receipt, so a fresh sample ends it
])
def test_the_advisorys_own_time_is_believed_only_near_its_receipt(said, dated):
    w = watch()
    w.take(advisory(LOST, at=said), T)
    assert w.evidence(T + 40)[("A", "CQ", "busy")].held_s == 40 - dated


def test_consumers_the_collector_does_not_know_are_forgotten():
    w = watch()
    w.take(advisory(LOST), T)
    w.take(advisory(LOST, consumer="forged"), T)
    w.keep_only({("A", "CQ", "busy")})
    assert list(w.evidence(T)) == [("A", "CQ", "busy")]


def test_the_system_accounts_copy_names_the_account_and_one_loss_is_said_once(caplog):
    """The server sends each advisory to the account and a copy to the system account with the
    account in it: the copy is about that account's consumer (one the collector's own connection
    may not be in), a copy without an account is nobody's, and the loss heard twice (and again
    while it lasts) is one loss, dated from the first, one line in the log."""
    w = watch()
    w.take(advisory(LOST, consumer="billing", account="BILLING"), T, system=True)
    w.take(advisory(LOST, consumer="orphan"), T, system=True)  # no account named
    w.take(advisory(LOST, replicas=REPLICAS), T)
    w.take(advisory(LOST, replicas=REPLICAS, account="A"), T + 1, system=True)
    w.take(advisory(LOST, at="2027-01-15T08:00:05Z", replicas=REPLICAS), T + 5)
    assert sorted(w.evidence(T + 10)) == [("A", "CQ", "busy"), ("BILLING", "CQ", "billing")]
    assert w.evidence(T + 10)[("A", "CQ", "busy")].held_s == 10
    said = [r.getMessage() for r in caplog.records if "QUORUM_LOST" in r.getMessage()]
    assert len(said) == 2 and any(m.startswith("CQ > billing") for m in said), said


def test_a_loss_said_again_after_a_fresh_sample_stands_dated_from_its_first_word():
    """A leader that answered (sampled at T+10) and then lost its quorum again (said at T+12): the
    sample began before the newer word, so the loss stands; still dated from the first."""
    w = watch()
    w.take(advisory(LOST), T)
    w.take(advisory(LOST, at="2027-01-15T08:00:12Z"), T + 12)
    w.sampled([("A", "CQ", "busy")], since=T + 10)
    assert w.evidence(T + 20)[("A", "CQ", "busy")].held_s == 20
    w.sampled([("A", "CQ", "busy")], since=T + 13)
    assert not w.evidence(T + 20)
