"""The cluster verdicts as judging makes them: from the evidence a cycle carries (health/cluster.py),
once it has held for --no-leader-after, since it was first seen, above whatever the rules say of
the consumer's last known samples, and eased like every verdict once the evidence is gone."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from jetwatch.collectors.consumer_state import SampleBatch
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.jsz import JszCollector
from jetwatch.collectors.judging import judge
from jetwatch.collectors.live_state import LiveState
from jetwatch.health import cluster
from jetwatch.health.cluster import API_UNAVAILABLE, NO_LEADER, Evidence
from jetwatch.health.rules import Thresholds
from tests.test_live_state import CONFIGS, T0, _sample

TH = Thresholds(health_window=60, health_min_samples=3, health_min_span=10, no_leader_after=15, clear_after=10)
MISSING = Evidence(NO_LEADER, "CONSUMER.LIST names it under missing (no server that leads it answered)")
NO_API = Evidence(API_UNAVAILABLE, "STREAM.NAMES: JetStream system temporarily unavailable (status 503, error 10008)")


def story(cycles: list[tuple[float, dict]]) -> list[dict[str, tuple[str, float, str]]]:
    """Cycles 5 s apart: at each, the evidence it carries ({key: Evidence}); a consumer named by
    evidence is not sampled (it keeps its last state), every other one is, healthy and idle.
    Returns each cycle's {consumer: (verdict, since as seconds after T0, reason)}."""
    state = LiveState(TH.health_window)
    said = []
    for at, evidence in cycles:
        now = T0 + dt.timedelta(seconds=at)
        named = {k[2] for k in evidence if len(k) == 3} | ({"a", "b"} if ("A",) in evidence else set())
        samples = [_sample(now, "S1", c, leader="n1") for c in ("a", "b") if c not in named]
        kept = [k for k in evidence if len(k) == 3] + ([("A", "S1")] if ("A",) in evidence else [])
        columns = {k: [s[k] for s in samples] for k in _sample(now, "S1", "x")}
        state.add(columns, ["A"], kept, CONFIGS[:2] if at == 0 else [])
        cycle = judge(state, now, TH, pd.DataFrame(), None, evidence)
        cycle.commit()
        frame = cycle.consumers.set_index("consumer")
        said.append({c: (frame.loc[c, "verdict"], (frame.loc[c, "since"] - pd.Timestamp(T0)).total_seconds(),
                         frame.loc[c, "reason"]) for c in frame.index})
    return said


HEALTHY = [(t, {}) for t in range(0, 30, 5)]


def test_no_leader_is_named_once_the_evidence_held_since_it_was_first_seen_and_eases_after_it_is_gone():
    gone = [(t, {("A", "S1", "b"): MISSING}) for t in range(30, 55, 5)]
    back = [(t, {}) for t in range(55, 80, 5)]
    said = story(HEALTHY + gone + back)
    b = [s["b"][0] for s in said]
    # 30 and 35: an election could end here; from 45 (15 s after 30) named, since 30.
    assert b[6:11] == ["OK", "OK", "OK", NO_LEADER, NO_LEADER], b
    assert said[9]["b"][1] == 30.0 and "last led by n1" in said[9]["b"][2] and "missing" in said[9]["b"][2]
    assert b[11:] == [NO_LEADER, NO_LEADER, "OK", "OK", "OK"], b  # eased once calmer for clear_after
    assert all(s["a"][0] == "OK" for s in said[6:]), said


def test_a_cluster_verdict_ends_once_a_leader_answers_though_its_fresh_samples_are_too_few_to_judge():
    """An outage longer than the health window: NO_LEADER holds throughout on evidence alone. When
    the cluster serves the consumer again its window holds one fresh sample, too few for a verdict:
    it is COLLECTING in its own words (not NO_LEADER held as "last known", which outlived the
    outage for as long as a never-pulled consumer takes to be judged), then OK."""
    gone = [(t, {("A", "S1", "b"): MISSING}) for t in range(30, 125, 5)]
    back = [(t, {}) for t in range(125, 165, 5)]
    said = story(HEALTHY + gone + back)
    b = [s["b"] for s in said]
    assert {v for v, _, _ in b[len(HEALTHY) + 3:len(HEALTHY) + len(gone)]} == {NO_LEADER}, b
    verdict, _, reason = b[len(HEALTHY) + len(gone)]
    assert verdict == "COLLECTING" and "last known" not in reason, b[len(HEALTHY) + len(gone)]
    assert b[-1][0] == "OK", b


def test_an_election_that_ends_before_no_leader_after_names_nothing():
    said = story(HEALTHY + [(30, {("A", "S1", "b"): MISSING}), (35, {("A", "S1", "b"): MISSING})]
                 + [(t, {}) for t in range(40, 70, 5)])
    assert {s["b"][0] for s in said[6:]} == {"OK"}, [s["b"] for s in said]


@pytest.mark.parametrize("evidence,a,b", [
    ({("A",): NO_API}, API_UNAVAILABLE, API_UNAVAILABLE),
    ({("A",): NO_API, ("A", "S1", "b"): MISSING}, API_UNAVAILABLE, NO_LEADER),  # its own evidence first
    ({("A", "S1"): NO_API}, API_UNAVAILABLE, API_UNAVAILABLE),
])
def test_evidence_about_a_consumer_beats_its_streams_and_its_accounts(evidence, a, b):
    said = story(HEALTHY + [(t, evidence) for t in range(30, 50, 5)])
    assert (said[-1]["a"][0], said[-1]["b"][0]) == (a, b), said[-1]


REPLICA = {"name": "n1", "current": True, "active": 300_000_000}
LOST = {"name": "n2", "current": False, "active": 9_000_000_000}


@pytest.mark.parametrize("replicas,since", [
    (None, None),  # one replica: nothing to lose
    ([REPLICA, {**REPLICA, "name": "n2"}], None),
    ([REPLICA, LOST], None),  # a slow follower: two of three still commit
    ([{**REPLICA, "current": False}, LOST], 0.3),  # since the last peer was heard from
    ([{**REPLICA, "offline": True}, LOST], 0.3),
    ([{**REPLICA, "active": 7_000_000_000}, LOST], 7.0),  # still "current", and silent for 7 s
    ([LOST, LOST, REPLICA, {**REPLICA, "name": "n4"}], None),  # R5: three of five
    ([LOST, LOST, LOST, REPLICA], 9.0),
])
def test_a_leader_that_reaches_too_few_of_its_replicas_has_no_quorum_since_it_last_heard_enough(replicas, since):
    from jetwatch.health.cluster import without_quorum

    said = without_quorum(replicas)
    assert (said and said[1]) == since if since else said is None, said
    assert said is None or ("no quorum" in said[0] and "n2" in said[0])


@pytest.mark.parametrize("replicas,named", [
    (None, None),  # one replica
    ([REPLICA, {**REPLICA, "name": "n2"}], None),  # every peer current
    ([REPLICA, LOST], "n2"),  # a slow or dead follower: serving, one failure from stopping
    ([REPLICA, {**REPLICA, "name": "n2", "offline": True}], "n2"),
    ([REPLICA, {**REPLICA, "name": "n2", "current": False}], None),  # a few entries behind, heard from: healthy
    ([REPLICA, {"name": "n2", "current": False, "active": 0}], "n2"),  # never heard from since this leader leads
    ([{**REPLICA, "current": False}, LOST], None),  # no quorum: NO_LEADER's, not a finding
    ([LOST, {**LOST, "name": "n3"}, REPLICA, {**REPLICA, "name": "n4"}], "n2, n3"),  # R5 with two down
])
def test_a_leader_serving_with_a_replica_not_current_is_a_finding_not_a_verdict(replicas, named):
    from jetwatch.health.cluster import REPLICA_AT_RISK, replicas_at_risk

    found = replicas_at_risk(replicas)
    if named is None:
        assert found is None, found
    else:
        assert found is not None and found["kind"] == REPLICA_AT_RISK and found["numbers"]["replicas"] == named
        assert "one more failure stops it" in found["reason"] and named in found["fix"]


def _row(consumer: str, verdict: str, stream: str = "CQ", since: float | None = 100.0, servers: str = "n1, n2",
         account: str = "APP", cluster: str | None = None) -> dict[str, object]:
    return {"cluster": cluster, "account": account, "stream": stream, "consumer": consumer, "verdict": verdict,
            "since": since, "findings": [{"verdict": verdict, "reason": "...", "numbers": {"servers": servers}}]}


@pytest.mark.parametrize("rows, expected", [
    # Three consumers of one stream without a leader: one outage, the earliest since, its servers.
    ([_row("b", "NO_LEADER", since=120.0), _row("a", "NO_LEADER"), _row("c", "NO_LEADER", since=110.0)],
     [("NO_LEADER", "CQ", ("a", "b", "c"), 100.0, ("n1", "n2"))]),
    # Two streams: two outages; worker verdicts are not outages at all.
    ([_row("a", "NO_LEADER"), _row("x", "NO_LEADER", stream="ONE", servers="n1"), _row("w", "STALLED"),
      _row("o", "OK")],
     [("NO_LEADER", "CQ", ("a",), 100.0, ("n1", "n2")), ("NO_LEADER", "ONE", ("x",), 100.0, ("n1",))]),
    # The API not answering is about the account: every stream's consumers in one, first.
    ([_row("a", "API_UNAVAILABLE"), _row("x", "API_UNAVAILABLE", stream="ONE"), _row("y", "NO_LEADER", stream="ONE")],
     [("API_UNAVAILABLE", None, ("a", "x"), 100.0, ("n1", "n2")), ("NO_LEADER", "ONE", ("y",), 100.0, ("n1", "n2"))]),
    # No since known: none invented.
    ([_row("a", "NO_LEADER", since=None)], [("NO_LEADER", "CQ", ("a",), None, ("n1", "n2"))]),
    # A server that cannot load a consumer stops its stream: one outage of that stream, its own cause.
    ([_row("new", "OFFLINE", stream="S2", servers=""), _row("old", "OFFLINE", stream="S2", servers=""),
      _row("a", "NO_LEADER")],
     [("OFFLINE", "S2", ("new", "old"), 100.0, ()), ("NO_LEADER", "CQ", ("a",), 100.0, ("n1", "n2"))]),
])
def test_cluster_failures_are_grouped_into_one_outage_per_cause(rows, expected):
    got = cluster.outages(rows)
    assert [(o.verdict, o.stream, o.consumers, o.since, o.servers) for o in got] == expected


def test_an_outage_is_one_line_naming_its_consumers_since_and_servers():
    (outage,) = cluster.outages([_row(c, "NO_LEADER") for c in ("a", "b", "c", "d", "e", "f", "g")])
    line = cluster.outage_line(outage, "03:12:04 (2 min ago)")
    assert line.startswith("7 consumers of stream CQ (a, b, c, d, e and 2 more): no server leads them since "
                           "03:12:04 (2 min ago); servers not answering: n1, n2."), line


def test_an_offline_outage_says_a_running_server_cannot_load_them_not_that_servers_are_gone():
    (outage,) = cluster.outages([_row(c, "OFFLINE", stream="S2", servers="") for c in ("new", "old")])
    line = cluster.outage_line(outage, "03:12:04 (2 min ago)")
    assert line.startswith("2 consumers of stream S2 (new, old): a running server cannot load them since 03:12:04"), line
    assert "no server leads" not in line and "servers not answering" not in line


def test_a_cycle_says_who_the_cluster_first_showed_it_cannot_serve_and_when_their_verdict_falls_due():
    state = LiveState(TH.health_window)
    due, new = [], []
    for at in range(0, 55, 5):
        now = T0 + dt.timedelta(seconds=at)
        evidence = {("A", "S1", "b"): MISSING} if at >= 30 else {}
        samples = [_sample(now, "S1", c, leader="n1") for c in ("a", "b") if not (c == "b" and evidence)]
        columns = {k: [s[k] for s in samples] for k in _sample(now, "S1", "x")}
        state.add(columns, ["A"], list(evidence), CONFIGS[:2] if at == 0 else [])
        cycle = judge(state, now, TH, pd.DataFrame(), None, evidence)
        cycle.commit()
        due.append(None if cycle.cluster_due is None else cycle.cluster_due - T0.timestamp())
        new.append([(s.key, s.evidence.verdict, s.due - T0.timestamp()) for s in cycle.cluster_new])
    # First shown at 30: said once, due at 45 until the cycle of 45 names it; nothing after.
    assert new[6] == [(("A", "S1", "b"), NO_LEADER, 45.0)] and not any(new[:6] + new[7:]), new
    assert due == [None] * 6 + [45.0, 45.0, 45.0, None, None], due


def test_a_consumer_whose_leader_answered_is_out_of_its_accounts_api_evidence():
    """While the API cannot list, a consumer its leader answered for is served: the account's
    evidence names the others only."""
    keys = [("A", "S1", "a"), ("A", "ONE", "solo")]
    found = cluster.about(keys, {("A",): NO_API, ("A", "ONE", "solo"): cluster.ANSWERED})
    assert [(keys[i][2], ev.verdict) for i, ev in found] == [("a", API_UNAVAILABLE)]


def _meta(leader: str, **peers: dict) -> dict:
    return {"leader": leader, "replicas": [{"name": name, **fields} for name, fields in peers.items()]}


HEARD = {"current": True, "active": 300_000_000}
CUT = {"current": False, "active": 12_000_000_000, "offline": True}


@pytest.mark.parametrize(("metas", "named"), [
    # n2 sees no meta leader, and the meta leader n0 last heard from it 12 s ago: cut off.
    ({"n0": _meta("n0", n1=HEARD, n2=CUT), "n1": _meta("n0", n0=HEARD, n2=CUT), "n2": _meta("", n0=CUT, n1=CUT)}, 12.0),
    # n2 sees the meta leader: not cut off, whatever else it says.
    ({"n0": _meta("n0", n1=HEARD, n2=CUT), "n2": _meta("n0", n0=HEARD, n1=HEARD)}, None),
    # No meta leader anywhere: the API cannot answer (API_UNAVAILABLE's evidence), nobody is cut off.
    ({"n0": _meta("", n1=CUT, n2=CUT), "n2": _meta("", n0=CUT, n1=CUT)}, None),
    # n2 between meta elections, the meta leader heard from it lately: no more than a moment.
    ({"n0": _meta("n0", n1=HEARD, n2=HEARD), "n2": _meta("", n0=HEARD, n1=HEARD)}, None),
])
def test_a_server_is_cut_off_when_it_sees_no_meta_leader_and_the_meta_leader_has_not_heard_from_it(metas, named):
    reader = JszCollector(None, NameFilter(), lambda: "")  # type: ignore[arg-type]
    led = {"n2": {("A", "ONE", "solo")}, "n0": {("A", "S1", "a")}}
    first, second = SampleBatch(), SampleBatch()
    reader._cut_off(first, led, metas)  # once is a moment (a server just restarted): no evidence yet
    reader._cut_off(second, led, metas)
    assert not first.evidence
    found = second.evidence.get(("A", "ONE", "solo"))
    assert (found is not None) == (named is not None)
    assert ("A", "S1", "a") not in second.evidence
    if found:
        assert found.verdict == NO_LEADER and "cut off" in found.seen and "only clients connected to n2" in found.stops
